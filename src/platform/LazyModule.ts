import { Effect } from "effect"

/**
 * A module imported on its first use, once. Libraries that only some requests need (spreadsheets,
 * images, SMTP) then cost an idle server neither memory nor start-up time. A module that fails to
 * load is a defect of the installation.
 */
export const lazyModule = <A>(load: () => Promise<A>): Effect.Effect<A> => {
  let loading: Promise<A> | undefined
  return Effect.promise(() => loading ??= load())
}
