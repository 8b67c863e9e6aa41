/**
 * Idle memory and start-up time of the server as `npm start` runs it (the command line is read from
 * package.json, so the bench measures what the README tells users to run).
 *
 * Per mode, two starts of one process each:
 *   first   a fresh data directory (embedded: PGlite creates its cluster and every migration runs) or a
 *           fresh database (server), timed from spawn to the first 200 of `/health`, with the CPU the
 *           process used by then and the `startup phase` lines of its log;
 *   again   the same data once more (migrations up to date), timed the same way; then, after
 *           BENCH_SETTLE_S seconds without requests, the resident memory (VmRSS) of the process and
 *           of any child it started.
 * RSS is sampled every 250 ms through both starts (the chart). Goals: idle RSS ≤ 250 MB embedded and
 * ≤ 180 MB server, first start to `/health` ≤ 3 s. Wall time stretches on a busy machine; the CPU
 * column does not.
 *
 *   npm run bench:footprint                     embedded, plus server mode if DATABASE_URL is set
 *   BENCH_MODES=embedded BENCH_SETTLE_S=15      the defaults
 *   BENCH_NODE_FLAGS="--max-semi-space-size=4"  extra flags before the start script's own
 */
import type { ChildProcess } from "node:child_process"
import { readFileSync } from "node:fs"
import { join } from "node:path"
import { requestedModes } from "./support/App.ts"
import { benchDatabase, type BenchDatabase } from "./support/Database.ts"
import { cpuMsOf, freePort, root, runBench, sleep, stop, workspace } from "./support/Processes.ts"
import { recordResults } from "./support/Results.ts"
import { machine } from "./support/Report.ts"
import { answers, childrenOf } from "../test/support/Processes.ts"

const SETTLE_S = Number(process.env.BENCH_SETTLE_S ?? 15)
const GOAL_RSS_MB = { embedded: 250, server: 180 } as const
const GOAL_START_S = 3
const ws = workspace("crm-footprint-")
let database: BenchDatabase | undefined

type Mode = keyof typeof GOAL_RSS_MB

/** The node arguments of `npm start` (`exec node <args>` in package.json). */
const startArgs = (): Array<string> => {
  const script: string = JSON.parse(readFileSync(join(root, "package.json"), "utf8")).scripts.start
  const words = script.split(/\s+/).filter((w) => w !== "" && w !== "exec")
  if (words[0] !== "node") throw new Error(`the start script does not run node: ${script}`)
  return [...(process.env.BENCH_NODE_FLAGS ?? "").split(" ").filter((f) => f !== ""), ...words.slice(1)]
}

const statusKb = (pid: number, field: string): number => {
  try {
    const match = readFileSync(`/proc/${pid}/status`, "utf8").match(new RegExp(`^${field}:\\s+(\\d+)`, "m"))
    return match === null ? 0 : Number(match[1])
  } catch {
    return 0
  }
}

const rssMb = (pid: number) => [pid, ...childrenOf(pid)].reduce((sum, p) => sum + statusKb(p, "VmRSS"), 0) / 1024

interface Phase {
  readonly phase: string
  readonly ms: number
}

/** The `startup phase` lines and the `server ready` line's total of a log. */
const phasesOf = (log: string) => {
  const phases: Array<Phase> = []
  let readyMs: number | undefined
  for (const line of log.split("\n")) {
    if (!line.startsWith("{")) continue
    const entry = JSON.parse(line) as { msg?: string; phase?: string; ms?: number; startup_ms?: number }
    if (entry.msg?.startsWith("startup phase") === true && entry.phase !== undefined) phases.push({ phase: entry.phase, ms: entry.ms ?? NaN })
    if (entry.msg === "server ready") readyMs = entry.startup_ms
  }
  return { phases, readyMs }
}

interface Start {
  readonly child: ChildProcess
  readonly pid: number
  readonly seconds: number
  readonly cpuMs: number
  readonly samples: Array<readonly [number, number]>
  readonly phases: ReadonlyArray<Phase>
  readonly readyMs: number | undefined
}

const env = async (mode: Mode, dataDir: string): Promise<Record<string, string | undefined>> => {
  const vars: Record<string, string | undefined> = {
    ...process.env,
    PORT: String(await freePort()),
    REALTIME_PORT: String(await freePort()),
    RUNNER_PORT: String(await freePort()),
    METRICS_PORT: "0",
    HOST: "127.0.0.1",
    LOG_LEVEL: "info",
    DATA_DIR: dataDir,
    DATABASE_URL: mode === "server" ? database!.url : undefined
  }
  if (mode === "embedded") delete vars.DATABASE_URL
  return vars
}

/** Spawns the server, samples its RSS, and resolves once `/health` answers 200 (fails after 600 s or on exit: a loaded machine stretches a start tenfold). */
const start = async (mode: Mode, name: string, dataDir: string): Promise<Start> => {
  const vars = await env(mode, dataDir)
  const began = performance.now()
  const child = ws.start(name, startArgs(), vars)
  const pid = child.pid!
  const samples: Array<readonly [number, number]> = []
  const sampler = setInterval(() => samples.push([(performance.now() - began) / 1000, rssMb(pid)]), 250)
  const url = `http://127.0.0.1:${vars.PORT}/health`
  try {
    while (!(await answers(url, 1_000))) {
      if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}`)
      if (performance.now() - began > 600_000) throw new Error(`${name} did not answer /health within 600 s`)
      await sleep(25)
    }
  } catch (error) {
    clearInterval(sampler)
    throw error
  }
  const seconds = (performance.now() - began) / 1000
  const cpuMs = cpuMsOf([pid])
  clearInterval(sampler)
  // The logger writes asynchronously: the ready line may land a moment after the first answer.
  const log = () => readFileSync(join(ws.dir, `${name}.log`), "utf8")
  for (let waited = 0; !log().includes("\"server ready\"") && waited < 30_000; waited += 100) await sleep(100)
  const { phases, readyMs } = phasesOf(log())
  return { child, pid, seconds, cpuMs, samples, phases, readyMs }
}

const describe = (label: string, s: Start) =>
  `  ${label.padEnd(6)} /health after ${s.seconds.toFixed(2)} s (CPU ${(s.cpuMs / 1000).toFixed(2)} s; ready logged at ${s.readyMs ?? "?"} ms)\n` +
  `         phases: ${s.phases.map((p) => `${p.phase} ${p.ms} ms`).join(", ")}`

const measure = async (mode: Mode) => {
  const dataDir = join(ws.dir, `data-${mode}`)
  const first = await start(mode, `${mode}-first`, dataDir)
  await stop(first.child)
  const again = await start(mode, `${mode}-again`, dataDir)
  const idleFrom = performance.now()
  while (performance.now() - idleFrom < SETTLE_S * 1000) {
    again.samples.push([again.samples.at(-1)![0] + 0.25, rssMb(again.pid)])
    await sleep(250)
  }
  const idle = { rssMb: rssMb(again.pid), peakMb: statusKb(again.pid, "VmHWM") / 1024, children: childrenOf(again.pid).length }
  await stop(again.child)
  const goalRss = GOAL_RSS_MB[mode]
  console.log(`${mode}:`)
  console.log(describe("first", first))
  console.log(describe("again", again))
  console.log(`  idle   RSS ${idle.rssMb.toFixed(0)} MB after ${SETTLE_S} s (peak ${idle.peakMb.toFixed(0)} MB; ${idle.children} child processes)`)
  console.log(`  goals  idle RSS ≤ ${goalRss} MB: ${idle.rssMb <= goalRss ? "met" : "not met"}; first start ≤ ${GOAL_START_S} s: ${first.seconds <= GOAL_START_S ? "met" : "not met"}`)
  const figure = (s: Start) => ({ seconds: s.seconds, cpuMs: s.cpuMs, readyMs: s.readyMs, phases: s.phases })
  recordResults(
    "footprint",
    { title: "Resident memory through a start and the idle time after it", x: "seconds after spawn", y: "RSS (MB)" },
    { [`${mode}, first start`]: first.samples, [`${mode}, again + idle`]: again.samples },
    { mode, command: `node ${startArgs().join(" ")}`, first: figure(first), again: figure(again), idle, goalRssMb: goalRss, goalStartS: GOAL_START_S }
  )
}

const main = async () => {
  console.log(`footprint · ${machine()} · node ${startArgs().join(" ")}`)
  const modes = requestedModes<Mode>(["embedded", "server"], process.env.DATABASE_URL === undefined ? "embedded" : "embedded,server")
  for (const mode of modes) {
    if (mode === "server") {
      if (process.env.DATABASE_URL === undefined) {
        console.log("server: skipped (no DATABASE_URL)")
        continue
      }
      database = await benchDatabase(process.env.DATABASE_URL, "bench_footprint")
    }
    await measure(mode)
  }
}

runBench(main, async () => {
  await ws.cleanup()
  await database?.drop()
})
