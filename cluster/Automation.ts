import { Entity } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { Schema } from "effect"
import { StartRequest, Started } from "../src/automations/Starter.ts"

export const Start = Rpc.make("Start", { payload: StartRequest, success: Schema.NullOr(Started) })

/**
 * One per automation (entity id = automation id): starts its runs one at a time, so the loop guard's
 * count and the run it admits cannot race between two events of the same contact.
 */
export const Automation = Entity.make("Automation", [Start])
