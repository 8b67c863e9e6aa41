/**
 * Pacing of one channel of a run, as pure functions of the clock: evenly spaced sends at
 * `messagesPerMinute`, plus an optional uniform jitter pause, and a sliding log that refuses
 * any send that would put more than `messagesPerMinute` into a 60 s window (after a lag the
 * even schedule would otherwise catch up in a burst).
 */
export interface Pace {
  readonly perMinute: number | null
  readonly jitterMinMs: number
  readonly jitterMaxMs: number
}

export interface PacerState {
  /** Send times in the last 60 s, oldest first. */
  readonly log: Array<number>
  /** The earliest time of the next send by the even schedule (and jitter). */
  nextAt: number
}

export const windowMs = 60_000
const catchUpSlots = 3
const catchUpMs = 1000

export const newPacer = (recent: ReadonlyArray<number>, now: number): PacerState => ({
  log: recent.filter((at) => at > now - windowMs).sort((a, b) => a - b),
  nextAt: now
})

/** When the next send may happen (≥ now). */
export const nextSlot = (pace: Pace, state: PacerState, now: number): number => {
  while (state.log.length > 0 && state.log[0] <= now - windowMs) state.log.shift()
  let at = Math.max(now, state.nextAt)
  if (pace.perMinute !== null && state.log.length >= pace.perMinute) {
    at = Math.max(at, state.log[state.log.length - pace.perMinute] + windowMs)
  }
  return at
}

/** Records a send at `at`; `random` in [0, 1) draws the jitter. */
export const recordSend = (pace: Pace, state: PacerState, at: number, random: number) => {
  state.log.push(at)
  const interval = pace.perMinute === null ? 0 : windowMs / pace.perMinute
  const jitter = pace.jitterMaxMs > 0 ? pace.jitterMinMs + random * (pace.jitterMaxMs - pace.jitterMinMs) : 0
  // The even schedule advances from its own previous slot, not from the (late) actual send, so
  // timer lag does not lower the rate; it catches up a bounded lag only (no burst after a long
  // pause), and the sliding log keeps any catch-up under the limit.
  const base = interval > 0 ? Math.max(state.nextAt, at - Math.max(catchUpSlots * interval, catchUpMs)) : at
  state.nextAt = base + interval + jitter
}

/** How many sends fit into `now` right away (more than one only without a per-minute rate or jitter). */
export const paceOf = (rate: {
  readonly enabled?: boolean | undefined
  readonly messagesPerMinute?: number | null | undefined
  readonly jitterMinSeconds?: number | null | undefined
  readonly jitterMaxSeconds?: number | null | undefined
} | null | undefined): Pace => {
  if (rate === null || rate === undefined || rate.enabled === false) return { perMinute: null, jitterMinMs: 0, jitterMaxMs: 0 }
  const min = (rate.jitterMinSeconds ?? 0) * 1000
  const max = Math.max(min, (rate.jitterMaxSeconds ?? 0) * 1000)
  return { perMinute: rate.messagesPerMinute ?? null, jitterMinMs: min, jitterMaxMs: max }
}

/** Sends of one channel with neither a rate nor a jitter go in batches; the provider ceiling paces them. */
export const unpaced = (pace: Pace) => pace.perMinute === null && pace.jitterMaxMs === 0

/**
 * The send slots of the next `horizonMs` (at most `max`), recorded in the pacer as planned: a
 * batch is claimed for them and each send waits for its slot.
 */
export const planSlots = (pace: Pace, state: PacerState, now: number, horizonMs: number, max: number, random: (i: number) => number) => {
  const slots: Array<number> = []
  let t = now
  while (slots.length < max) {
    const slot = nextSlot(pace, state, t)
    if (slots.length > 0 && slot >= now + horizonMs) break
    slots.push(slot)
    recordSend(pace, state, slot, random(slots.length - 1))
    t = slot
  }
  return slots
}

/**
 * The actual send times of a channel (the last 60 s), as opposed to the planned slots: a send that
 * started late after its slot and a catch-up after it could otherwise put more than the limit into one
 * window. `admit` gives a send its time (≥ now, never before an earlier send, and the limit kept in
 * the window ending there) and records it; the caller waits until then.
 */
export const admit = (log: Array<number>, perMinute: number | null, now: number): number => {
  let at = Math.max(now, log.length > 0 ? log[log.length - 1] : now)
  while (log.length > 0 && log[0] <= at - windowMs) log.shift()
  if (perMinute !== null && log.length >= perMinute) at = Math.max(at, log[log.length - perMinute] + windowMs)
  log.push(at)
  return at
}
