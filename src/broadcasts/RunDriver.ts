import { Context, type Effect } from "effect"
import type { CompanyId } from "../auth/Domain.ts"

/** The port: drives a run to its end in the one place the cluster runs it (the run's entity). */
export class RunDriver extends Context.Service<RunDriver, {
  drive(companyId: CompanyId, runId: number): Effect.Effect<void>
}>()("crm/broadcasts/RunDriver") {}
