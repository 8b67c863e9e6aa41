import { Effect, Schema } from "effect"

/** The spec's success envelope: `{data: …}`. */
export const Data = <S extends Schema.Top>(schema: S) => Schema.Struct({ data: schema })

/** A handler's answer in the `{data: …}` envelope. */
export const data = <A, E, R>(effect: Effect.Effect<A, E, R>) => Effect.map(effect, (data) => ({ data }))
