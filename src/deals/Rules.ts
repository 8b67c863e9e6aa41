import type { Deal, DealStatus, StageType } from "./Domain.ts"

/** The spec's state table: a stage change without an explicit status takes the stage type's status. */
export const statusOfStage = (type: StageType): DealStatus => type === "success" ? "won" : type === "failed" ? "lost" : "open"

/** "1.5" and "1.50" are the same amount: compare and store with two decimals, never through a float. */
export const normalizeAmount = (amount: string): string => {
  const [whole, fraction = ""] = amount.split(".")
  return `${whole.replace(/^0+(?=\d)/, "")}.${fraction.padEnd(2, "0")}`
}

/** Fields whose change gets a `field_changed` entry (`responsible_user_id` gets `responsible_changed`). */
export const trackedFields = ["title", "amount", "currency", "funnel_id", "type_id", "begin_date", "expected_close_date"] as const

const same = (a: unknown, b: unknown) => JSON.stringify(a) === JSON.stringify(b)

/** The fields of `after` that differ from `before`, with the id. */
export const changedFields = (before: Deal, after: Deal): Partial<Deal> & { readonly id: number } => {
  const changes: Record<string, unknown> = { id: after.id }
  for (const key of Object.keys(after) as Array<keyof Deal>) {
    if (!same(before[key], after[key])) changes[key] = after[key]
  }
  return changes as Partial<Deal> & { readonly id: number }
}

/** `{{contact_name}}` and `{{channel_name}}` filled in; unknown placeholders are left as written. */
export const renderTitle = (template: string, values: { readonly contact_name: string; readonly channel_name: string }) =>
  template
    .replace(/\{\{\s*contact_name\s*\}\}/g, values.contact_name)
    .replace(/\{\{\s*channel_name\s*\}\}/g, values.channel_name)
    .trim()
    .slice(0, 255)
