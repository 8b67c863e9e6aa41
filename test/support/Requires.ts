import { it } from "@effect/vitest"
import { accessSync, constants } from "node:fs"
import { delimiter, join } from "node:path"

/** What a test file needs from the machine besides `npm install`. */
export interface Needs {
  readonly programs?: ReadonlyArray<string>
  readonly postgres?: boolean
}

const onPath = (program: string) =>
  (process.env.PATH ?? "").split(delimiter).some((dir) => {
    try {
      accessSync(join(dir, program), constants.X_OK)
      return true
    } catch {
      return false
    }
  })

/** What is missing, in words; undefined when nothing is. */
export const unmet = (needs: Needs): string | undefined => {
  const missing = [
    ...(needs.programs ?? []).filter((p) => !onPath(p)).map((p) => `${p} is not on PATH`),
    ...(needs.postgres === true && process.env.DATABASE_URL === undefined ? ["DATABASE_URL is not set (PostgreSQL only)"] : [])
  ]
  return missing.length === 0 ? undefined : missing.join("; ")
}

const inCi = process.env.CI !== undefined && process.env.CI !== "" && process.env.CI !== "false" && process.env.CI !== "0"

/**
 * Declares `suite` when the machine has what it needs. Otherwise one test stands in for it: skipped with
 * the reason as its note (the run's summary counts it and the reporter shows the note), and in CI, which
 * installs everything and runs everything, failed with that reason.
 */
export const whenAvailable = (needs: Needs, name: string, suite: () => void): void => {
  const reason = unmet(needs)
  if (reason === undefined) return suite()
  it(`${name}: not run, ${reason}`, (ctx) => {
    if (inCi) throw new Error(`${name} cannot run in CI: ${reason}.`)
    // The default reporter shows a skip's count, not its note: the reason goes to the run's output as well.
    console.warn(`NOT RUN: ${name}: ${reason}`)
    ctx.skip(`${name} did not run: ${reason}`)
  })
}
