import { createHash } from "node:crypto"
import * as os from "node:os"

/** The value at quantile `q` of ascending `sorted` samples (nearest rank below); NaN when there are none. */
export const percentile = (sorted: ArrayLike<number>, q: number) =>
  sorted.length === 0 ? NaN : sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))]

/** p50, p95, p99 and max of latency samples in ms. */
export const summary = (samples: ReadonlyArray<number>) => {
  const sorted = Float64Array.from(samples).sort()
  return { p50: percentile(sorted, 0.5), p95: percentile(sorted, 0.95), p99: percentile(sorted, 0.99), max: percentile(sorted, 1) }
}

/** Milliseconds in a column of seven characters. */
export const fmtMs = (value: number) => value.toFixed(2).padStart(7)

/** Adds one answer with `status` to a count per status. */
export const tally = (statuses: Map<number, number>, status: number) => statuses.set(status, (statuses.get(status) ?? 0) + 1)

/**
 * A fixed single-threaded loop (200,000 SHA-256 hashes of short strings), best of three, in ms. Machines of
 * one description have differed threefold in speed, so a figure is read against this loop's time on the
 * machine that measured it.
 */
export const referenceLoopMs = () => {
  let best = Infinity
  for (let round = 0; round < 3; round++) {
    const started = performance.now()
    for (let i = 0; i < 200_000; i++) createHash("sha256").update(`reference ${i}`).digest()
    best = Math.min(best, performance.now() - started)
  }
  return best
}

let machineLine: string | undefined

/**
 * CPU model, cores, memory and OS, and the reference loop's time, for the heading of a bench's output. Measured
 * once per process: the results file of the run names the same loop time as its heading.
 */
export const machine = () => {
  const cpus = os.cpus()
  machineLine ??= `${cpus[0]?.model ?? "?"}, ${cpus.length} cores, ${(os.totalmem() / 2 ** 30).toFixed(0)} GiB, ${os.type()} ${os.release()}, reference loop ${referenceLoopMs().toFixed(0)} ms`
  return machineLine
}
