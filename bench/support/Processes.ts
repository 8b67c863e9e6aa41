import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs"
import * as net from "node:net"
import * as os from "node:os"
import { join } from "node:path"
import { fileURLToPath } from "node:url"

/** The repository: child processes run in it, and profiles name files relative to it. */
export const root = fileURLToPath(new URL("../..", import.meta.url))

/** A port that was free a moment ago (the OS picks it, then it is released for a child to bind). */
export const freePort = () =>
  new Promise<number>((resolve, reject) => {
    const server = net.createServer()
    server.once("error", reject)
    server.listen(0, "127.0.0.1", () => {
      const port = (server.address() as net.AddressInfo).port
      server.close(() => resolve(port))
    })
  })

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** SIGTERM, then SIGKILL if the process has not exited 15 s later. */
export const stop = async (child: ChildProcess) => {
  if (child.exitCode !== null || child.signalCode !== null) return
  const exited = new Promise((resolve) => child.once("exit", resolve))
  child.kill("SIGTERM")
  const timer = setTimeout(() => child.kill("SIGKILL"), 15_000)
  await exited
  clearTimeout(timer)
}

/** A temporary directory for the logs and data of one bench run, and the child processes it started. */
export interface Workspace {
  readonly dir: string
  /** `node …args` in the repository; stdout and stderr go to `<dir>/<name>.log`. */
  readonly start: (name: string, args: Array<string>, env: Record<string, string | undefined>) => ChildProcess
  /** Resolves once `url` answers 2xx; fails with the end of the child's log if it exits or takes over 120 s. */
  readonly waitFor: (url: string, child: ChildProcess, name: string) => Promise<void>
  /** Stops the children still running and removes the directory. */
  readonly cleanup: () => Promise<void>
}

export const workspace = (prefix: string): Workspace => {
  const dir = mkdtempSync(join(os.tmpdir(), prefix))
  const children = new Set<ChildProcess>()
  const logTail = (name: string) => readFileSync(join(dir, `${name}.log`), "utf8").slice(-4000)

  const start: Workspace["start"] = (name, args, env) => {
    const out = openSync(join(dir, `${name}.log`), "a")
    const child = spawn(process.execPath, args, { cwd: root, env: env as NodeJS.ProcessEnv, stdio: ["ignore", out, out] })
    closeSync(out)
    children.add(child)
    child.once("exit", () => children.delete(child))
    return child
  }

  const waitFor: Workspace["waitFor"] = async (url, child, name) => {
    const deadline = Date.now() + 120_000
    while (Date.now() < deadline) {
      if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode}; log:\n${logTail(name)}`)
      if (await fetch(url, { signal: AbortSignal.timeout(5_000) }).then((r) => r.ok, () => false)) return
      await sleep(200)
    }
    throw new Error(`${name} did not answer ${url} within 120 s; log:\n${logTail(name)}`)
  }

  const cleanup = async () => {
    await Promise.all([...children].map(stop))
    rmSync(dir, { recursive: true, force: true })
  }

  return { dir, start, waitFor, cleanup }
}

/**
 * Runs a bench's main, then `cleanup`, also on Ctrl-C and on failure (printed, exit 1), so no child
 * process outlives the bench holding its ports. Resolves after a successful run and its cleanup.
 */
export const runBench = (main: () => Promise<void>, cleanup: () => Promise<void> = async () => {}) => {
  process.once("SIGINT", () => void cleanup().then(() => process.exit(130)))
  return main().then(cleanup, async (error) => {
    console.error(error)
    await cleanup()
    process.exit(1)
  })
}
