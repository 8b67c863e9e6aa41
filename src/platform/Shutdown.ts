import { Effect } from "effect"

/**
 * The process's shutdown budget: `main.ts` marks the signal, and background workers that drain after the HTTP
 * server (their layers close after it) bound their waits by what is left. Wall time, not the Clock: the budget is
 * the operator's (a container's stop timeout), which a TestClock does not move.
 */
export const SHUTDOWN_LIMIT_MS = 10_000

/** Kept back from the budget for what closes after the workers (entities, pools, the log flush). */
const reserveMs = 3_000

let began: number | null = null

export const shutdownBegins = () => {
  began ??= Date.now()
}

/** How long a worker may still wait for its in-flight work: `wantedMs`, or less once a shutdown signal came. */
export const drainBudgetMs = (wantedMs: number) =>
  began === null ? wantedMs : Math.max(0, Math.min(wantedMs, began + SHUTDOWN_LIMIT_MS - reserveMs - Date.now()))

/** A wait in wall time (see above): how a worker bounds its drain, also under a TestClock. */
export const wallSleep = (ms: number) =>
  Effect.callback<void>((resume) => {
    const timer = setTimeout(() => resume(Effect.void), ms)
    return Effect.sync(() => clearTimeout(timer))
  })
