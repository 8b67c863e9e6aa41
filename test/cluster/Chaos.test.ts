import { assert, describe, it } from "@effect/vitest"
import { runChaos } from "../support/Chaos.ts"

const baseUrl = process.env.DATABASE_URL

/**
 * The short chaos run (bench/chaos.ts runs the long one): three runners on one database under mixed load,
 * `kill -9` of a random runner every 15 s, each restarted at once. Nothing acknowledged is lost, nothing is
 * delivered twice at the provider, every key, recipient and automation wait ends once.
 */
describe.runIf(baseUrl)("chaos across three runners", () => {
  it("loses no acknowledged write and sends nothing twice while runners are killed and restarted", async () => {
    const report = await runChaos(baseUrl!, { loadSeconds: 45, killEveryS: 15, concurrency: 6, log: (line) => console.log(line) })
    console.log(`chaos figures: ${report.requests} requests ${JSON.stringify(report.statuses)}, acknowledged ${JSON.stringify(report.acknowledged)}, ` +
      `kills ${JSON.stringify(report.kills)}`)
    assert.isAtLeast(report.kills.length, 1, "at least one runner was killed")
    assert.isAbove(report.acknowledged.sends, 0)
    assert.isAbove(report.acknowledged.inbound, 0)
    assert.isFalse(Object.keys(report.statuses).some((s) => Number(s) >= 500 && s !== "503"), JSON.stringify(report.statuses))
    assert.deepStrictEqual(report.problems, [])
  }, 400_000)
})
