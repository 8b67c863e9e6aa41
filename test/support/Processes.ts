import { type ChildProcess, spawn } from "node:child_process"
import { readdirSync, readFileSync } from "node:fs"
import { createServer } from "node:net"
import { fileURLToPath } from "node:url"

/** The repository: child processes run in it. */
export const root = fileURLToPath(new URL("../..", import.meta.url))

/** A port that was free a moment ago (the OS picks it, then it is released for the child to bind). */
export const freePort = (): Promise<number> =>
  new Promise((resolve, reject) => {
    const server = createServer()
    server.unref()
    server.on("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const address = server.address()
      server.close(() => (typeof address === "object" && address !== null ? resolve(address.port) : reject(new Error("no port"))))
    })
  })

export interface ServerProcess {
  readonly name: string
  readonly url: string
  readonly port: number
  readonly realtimePort: number
  readonly runnerPort: number
  readonly pid: number | undefined
  /** Everything the process wrote so far (stdout and stderr), for failure messages. */
  readonly output: () => string
  /** SIGTERM, then SIGKILL if it has not exited after `graceMs`. */
  readonly stop: (graceMs?: number) => Promise<void>
}

// A test that times out (or a worker that dies) must not leave servers behind holding ports and shards.
const running = new Set<ChildProcess>()
process.once("exit", () => {
  for (const child of running) child.kill("SIGKILL")
})

const hasExited = (child: ChildProcess) => child.exitCode !== null || child.signalCode !== null

/** Kills `child` with the test process if it is still running then (for children of other helpers). */
export const killOnExit = (child: ChildProcess) => {
  running.add(child)
  child.once("exit", () => running.delete(child))
  return child
}

const exited = (child: ChildProcess) =>
  new Promise<void>((resolve) => {
    if (hasExited(child)) return resolve()
    child.once("exit", () => resolve())
  })

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Reads `left` (what is not finished yet) every `everyMs` until it is 0 or `timeoutMs` have passed; answers the last reading. */
export const untilNoneLeft = async (left: () => Promise<number>, timeoutMs: number, everyMs = 1_000) => {
  const deadline = Date.now() + timeoutMs
  let last = await left()
  while (last > 0 && Date.now() < deadline) {
    await sleep(everyMs)
    last = await left()
  }
  return last
}

/** SIGTERM, then SIGKILL if the process has not exited after `graceMs`. */
export const stopChild = async (child: ChildProcess, graceMs: number) => {
  if (hasExited(child)) return
  const gone = exited(child)
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), graceMs)
  await gone
  clearTimeout(timer)
}

/** Whether `url` answers 2xx within `timeoutMs` (a refused connection or a timeout is a no). */
/** The pids of the processes whose parent is `pid` (Linux, read from /proc; none elsewhere). */
export const childrenOf = (pid: number): Array<number> => {
  const entries = (() => {
    try {
      return readdirSync("/proc")
    } catch {
      return []
    }
  })()
  return entries.filter((entry) => /^\d+$/.test(entry)).map(Number).filter((candidate) => {
    try {
      const stat = readFileSync(`/proc/${candidate}/stat`, "utf8")
      return Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]) === pid
    } catch {
      return false
    }
  })
}

export const answers = (url: string, timeoutMs: number) =>
  fetch(url, { signal: AbortSignal.timeout(timeoutMs) }).then((r) => r.ok, () => false)

/**
 * Starts `src/main.ts` as a real server process (tsx loader, no npx in between, so the pid is the server)
 * on fresh ports and resolves once `/ready` answers 200.
 */
export const spawnServer = async (
  name: string,
  /** `undefined` removes a variable inherited from this process (e.g. DATABASE_URL for embedded mode). */
  env: Record<string, string | undefined>,
  options: SpawnOptions = {}
): Promise<ServerProcess> => {
  // A free port can be taken by another process between the moment it is found and the child's listen:
  // such a start is made again on other ports.
  for (let attempt = 1; ; attempt++) {
    const started = await spawnOnce(name, env, options)
    if (started.kind === "ready") return started.server
    if (!started.portTaken || attempt === 3) throw started.error
  }
}

interface SpawnOptions {
  readonly readyTimeoutMs?: number
  /** Another command line than `node --import tsx src/main.ts` (e.g. `npm start`, whose pid is npm's). */
  readonly command?: ReadonlyArray<string>
}

type Spawned =
  | { readonly kind: "ready"; readonly server: ServerProcess }
  | { readonly kind: "failed"; readonly error: Error; readonly portTaken: boolean }

const spawnOnce = async (name: string, env: Record<string, string | undefined>, options: SpawnOptions): Promise<Spawned> => {
  const [port, realtimePort, runnerPort] = [await freePort(), await freePort(), await freePort()]
  const merged: Record<string, string | undefined> = {
    ...process.env,
    HOST: "127.0.0.1",
    RUNNER_HOST: "127.0.0.1",
    PORT: String(port),
    REALTIME_PORT: String(realtimePort),
    RUNNER_PORT: String(runnerPort),
    LOG_LEVEL: process.env.LOG_LEVEL ?? "warn",
    ...env
  }
  const childEnv = Object.fromEntries(Object.entries(merged).filter((e): e is [string, string] => e[1] !== undefined))
  const [command, ...args] = options.command ?? [process.execPath, "--import", "tsx", "src/main.ts"]
  const child = spawn(command, args, {
    cwd: root,
    env: childEnv,
    stdio: ["ignore", "pipe", "pipe"]
  })
  running.add(child)
  let output = ""
  const append = (chunk: Buffer) => {
    output += chunk.toString()
    if (output.length > 200_000) output = output.slice(-100_000)
  }
  child.stdout?.on("data", append)
  child.stderr?.on("data", append)
  const done = exited(child).then(() => {
    running.delete(child)
  })

  const stop = async (graceMs = 10_000) => {
    await stopChild(child, graceMs)
    await done
  }

  const url = `http://127.0.0.1:${port}`
  const deadline = Date.now() + (options.readyTimeoutMs ?? 40_000)
  let gone = false
  void done.then(() => {
    gone = true
  })
  while (true) {
    if (gone) {
      const error = new Error(`${name} exited before it was ready (code ${child.exitCode}):\n${output}`)
      return { kind: "failed", error, portTaken: output.includes("EADDRINUSE") }
    }
    if (await answers(`${url}/ready`, 3_000)) break
    if (Date.now() > deadline) {
      await stop(2_000)
      return { kind: "failed", error: new Error(`${name} was not ready after ${options.readyTimeoutMs ?? 40_000} ms:\n${output}`), portTaken: false }
    }
    await sleep(200)
  }
  return { kind: "ready", server: { name, url, port, realtimePort, runnerPort, pid: child.pid, output: () => output, stop } }
}

/** The shards of one group (`objsubid` 2 of the runners' advisory locks), each held by some runner. */
export const SHARDS_PER_GROUP = 300

/**
 * Waits until `runners` processes hold every shard between them, so that entities live on each of them
 * (two-runner failover tests). `rows` runs SQL on the test database.
 */
export const shardsSettled = async (
  rows: (sql: string) => Promise<ReadonlyArray<{ readonly pid: number; readonly shards: number }>>,
  runners = 2,
  timeoutMs = 60_000
) => {
  const deadline = Date.now() + timeoutMs
  while (true) {
    const holders = await rows(
      `SELECT pid, count(*)::int AS shards FROM pg_locks
       WHERE locktype = 'advisory' AND granted AND objsubid = 2
         AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
       GROUP BY pid`
    )
    if (holders.length === runners && holders.reduce((sum, h) => sum + h.shards, 0) === SHARDS_PER_GROUP) return
    if (Date.now() > deadline) throw new Error(`shards never settled: ${JSON.stringify(holders)}`)
    await sleep(250)
  }
}
