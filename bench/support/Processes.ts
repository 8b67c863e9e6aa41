import { type ChildProcess, spawn } from "node:child_process"
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from "node:fs"
import * as os from "node:os"
import { join } from "node:path"
import { answers, root, sleep, stopChild } from "../../test/support/Processes.ts"

export { freePort, root, sleep } from "../../test/support/Processes.ts"

/** SIGTERM, then SIGKILL if the process has not exited 15 s later. */
export const stop = (child: ChildProcess) => stopChild(child, 15_000)

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
      if (await answers(url, 5_000)) return
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

/**
 * CPU time (user + system, ms) the processes `pids` have used so far, from /proc (Linux; 0 elsewhere).
 * Far less sensitive to a busy machine than wall time: what a process costs, not how long it waited.
 */
export const cpuMsOf = (pids: ReadonlyArray<number>): number => {
  let ticks = 0
  for (const pid of pids) {
    try {
      // The fields after the parenthesised command name; utime and stime are the 14th and 15th of the line.
      const stat = readFileSync(`/proc/${pid}/stat`, "utf8")
      const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ")
      ticks += Number(fields[11]) + Number(fields[12])
    } catch {
      // gone, or not Linux
    }
  }
  return ticks * 10
}
