import { Schema } from "effect"
import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"

export const Drive = Rpc.make("Drive", {
  payload: { companyId: Schema.Int, runId: Schema.Int }
})

/**
 * One per broadcast run (entity id = run id): the only place the run is driven, so its
 * recipients are claimed, paced and sent by one fiber in the whole cluster.
 */
export const BroadcastRun = Entity.make("BroadcastRun", [Drive])
