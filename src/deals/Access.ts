import { Effect } from "effect"
import { requireFeature, requirePermission } from "../auth/Domain.ts"

/**
 * Every deals endpoint: the plan feature first (so a plan without it always answers the
 * feature-gate body), then the permission.
 */
export const dealsAccess = (permission: string) =>
  Effect.andThen(requireFeature("deals"), requirePermission(permission))

/**
 * Funnels, stages, deal types and settings are edited with `lost_reason.manage`, the spec's one
 * permission for deal configuration (admins and managers); reading them needs `deal.view`.
 */
export const configure = "lost_reason.manage"

export const iso = (value: Date | null): string | null => value === null ? null : value.toISOString()
