import { Data, Effect, Predicate, Schema } from "effect"
import { type Actor, type CompanyId, CurrentActor } from "../../auth/Domain.ts"
import type { ActionId, CatalogEntry } from "../Actions.ts"
import type { RunState } from "../Repo.ts"
import type { ActionServices } from "./ActionServices.ts"

/** A step that did not work: transient ones are retried (3 attempts in all), the others fail the run at once. */
export class StepError extends Data.TaggedError("StepError")<{ readonly message: string; readonly transient: boolean }> {}

export const permanent = (message: string) => new StepError({ message, transient: false })
export const transient = (message: string) => new StepError({ message, transient: true })

export const wireMessage = (e: unknown) => (Predicate.hasProperty(e, "message") ? String(e.message) : String(e))

export interface StepInput {
  readonly companyId: CompanyId
  readonly run: RunState
  readonly actor: Actor
  readonly nodeId: string
  readonly visit: number
  /** The catalogue entry the node names. */
  readonly action: CatalogEntry
  readonly outputs: Record<string, unknown>
}

/**
 * A step's output, and the writes (if any) that commit with its step row. `replayable`: the step
 * only reads, or makes a change a replay finds made (a tag already added is left as it is, without
 * a second event), so its row may wait for the run's next write.
 */
export interface Done {
  readonly output: unknown
  readonly commit: Effect.Effect<void>
  readonly replayable?: boolean
}

export const doneWith = (output: unknown): Done => ({ output, commit: Effect.void })

/** One action (or variants sharing an implementation): the catalogue ids it runs, its data's schema, its effect. */
export interface ActionDefinition<S extends Schema.Decoder<unknown>> {
  readonly ids: readonly [ActionId, ...Array<ActionId>]
  readonly data: S
  readonly run: (data: S["Type"], input: StepInput, services: ActionServices["Service"]) => Effect.Effect<Done, StepError>
}

/** A definition as the registry holds it: `step` decodes a node's data with the definition's schema and runs it. */
export interface Action {
  readonly ids: ReadonlyArray<ActionId>
  readonly data: Schema.Decoder<unknown>
  readonly step: (data: unknown, input: StepInput, services: ActionServices["Service"]) => Effect.Effect<Done, StepError>
}

export const defineAction = <S extends Schema.Decoder<unknown>>(definition: ActionDefinition<S>): Action => {
  const decode = Schema.decodeUnknownEffect(definition.data)
  return {
    ids: definition.ids,
    data: definition.data,
    step: (data, input, services) =>
      decode(data ?? {}).pipe(
        Effect.mapError(() => permanent("The step's data is invalid.")),
        Effect.flatMap((decoded) => definition.run(decoded, input, services))
      )
  }
}

export const asActor = <A, E>(actor: Actor, effect: Effect.Effect<A, E, CurrentActor>) =>
  effect.pipe(
    Effect.provideService(CurrentActor, actor),
    Effect.mapError((e) => permanent(wireMessage(e)))
  )

export const contactOf = (input: StepInput) => {
  const id = input.run.context.contact_id
  return typeof id === "number" ? Effect.succeed(id) : Effect.fail(permanent("The trigger names no contact."))
}
