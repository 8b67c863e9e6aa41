export const Plans = ["free", "business", "pro"] as const
export type Plan = typeof Plans[number]

export const Features = ["api", "deals", "broadcasts", "exports", "voice_ai", "voice_campaigns"] as const
export type Feature = typeof Features[number]

const business: ReadonlyArray<Feature> = ["api", "deals", "broadcasts", "exports"]

/** Plans in price order: the first that carries a feature is its `required_plan`. */
export const planFeatures: Record<Plan, ReadonlySet<Feature>> = {
  free: new Set(),
  business: new Set(business),
  pro: new Set([...business, "voice_ai", "voice_campaigns"])
}

export const requiredPlan = (feature: Feature): Plan | null => Plans.find((plan) => planFeatures[plan].has(feature)) ?? null

export const hasFeature = (plan: Plan, feature: Feature) => planFeatures[plan]?.has(feature) ?? false
