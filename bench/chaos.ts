/**
 * Chaos across runners, the long run: three server runners (CLUSTER=socket) on one fresh database under mixed
 * load (keyed sends to a Telegram fake, contact writes, inbound messages starting an automation with a wait,
 * three broadcasts), `kill -9` of a runner chosen at random every CHAOS_KILL_EVERY_S, restarted at once.
 * The engine and its checks are `test/support/Chaos.ts` (test/cluster/Chaos.test.ts runs a short one in CI).
 *
 * Goals: no acknowledged write lost; no message delivered twice at the provider fake; every idempotency key
 * final; every broadcast recipient with one final status; every automation wait fired once. Figures: requests,
 * kills, the time from each kill until the restarted runner answered /ready and until every shard was held again.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/chaos.ts
 *   CHAOS_MINUTES=10 (default), CHAOS_KILL_EVERY_S=60, CHAOS_CONCURRENCY=8
 */
import "./support/QuietLogs.ts"
import { runChaos } from "../test/support/Chaos.ts"
import { runBench } from "./support/Processes.ts"
import { machine, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

const MINUTES = Number(process.env.CHAOS_MINUTES ?? 10)
const KILL_EVERY_S = Number(process.env.CHAOS_KILL_EVERY_S ?? 60)
const CONCURRENCY = Number(process.env.CHAOS_CONCURRENCY ?? 8)

const main = async () => {
  if (process.env.DATABASE_URL === undefined) throw new Error("bench/chaos.ts needs DATABASE_URL (PostgreSQL)")
  console.log(`chaos — ${machine()}, ${MINUTES} min, a kill -9 every ${KILL_EVERY_S} s, ${CONCURRENCY} requests in flight`)
  const report = await runChaos(process.env.DATABASE_URL, {
    loadSeconds: MINUTES * 60,
    killEveryS: KILL_EVERY_S,
    concurrency: CONCURRENCY,
    log: (line) => console.log(line)
  })
  const recovery = summary(report.kills.map((k) => k.recoveryMs))
  console.log(`requests ${report.requests} ${JSON.stringify(report.statuses)}; acknowledged ${JSON.stringify(report.acknowledged)}`)
  console.log(`kills ${report.kills.length}; recovery (all shards held again) p50 ${recovery.p50} ms, max ${recovery.max} ms`)
  console.log(report.problems.length === 0 ? "  met     every goal" : report.problems.map((p) => `  MISSED  ${p}`).join("\n"))
  recordResults("chaos", { title: `Chaos: ${MINUTES} min, kill -9 every ${KILL_EVERY_S} s, 3 runners`, x: "s since the load began", y: "ms until whole again", scatter: true }, {
    "ready again": report.kills.map((k) => [k.atS, k.readyMs]),
    "all shards held": report.kills.map((k) => [k.atS, k.recoveryMs])
  }, report)
  if (report.problems.length > 0) process.exitCode = 1
}

runBench(main)
