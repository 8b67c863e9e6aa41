/**
 * What the app's building blocks cost in CPU on this machine, each alone, in this process: a statement on the
 * app's own client (multiplexed pool, coalesced writes) issued by many fibers at once and by one, a transaction
 * of 1, 2 and 4 statements, a call to a local cluster entity (`SingleRunner`, as the app configures it), and
 * an `Effect.fn` of five steps. A path's cost can then be read as a sum (a run's statements, transactions and
 * entity calls) and set against what a bench measured for the whole path, to tell which change can pay.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/unit-costs.ts        a fresh database on that server, dropped at the end
 *   BENCH_UNIT_COUNT=4000 (units per round), 8 rounds
 *
 * Each figure is the best round's process CPU (user + system) per unit, after warm-up rounds.
 */
import { NodeCrypto } from "@effect/platform-node"
import { Effect, Layer, Schema } from "effect"
import { Entity, SingleRunner } from "effect/cluster"
import { Rpc } from "effect/rpc"
import { SqlClient } from "effect/sql"
import { benchDatabase, runLikeApp } from "./support/Database.ts"
import { machine } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

process.env.LOG_LEVEL ??= "warn"
if (!process.env.DATABASE_URL) {
  console.log("bench/unit-costs needs PostgreSQL: set DATABASE_URL. Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL
const COUNT = Number(process.env.BENCH_UNIT_COUNT ?? 4_000)
const ROUNDS = 8

const Ping = Rpc.make("Ping", { payload: Schema.Struct({ n: Schema.Number, text: Schema.String }), success: Schema.Number })
const Probe = Entity.make("Probe", [Ping])
const ProbeLayer = Probe.toLayer(Effect.succeed(Probe.of({ Ping: ({ payload }) => Effect.succeed(payload.n) })), {
  mailboxCapacity: "unbounded"
})

/** Best CPU µs per unit over the rounds of `fibers` fibers doing `COUNT` units between them. */
const cpuPerUnit = (fibers: number, unit: (i: number) => Effect.Effect<unknown, unknown>) =>
  Effect.gen(function*() {
    let best = Infinity
    for (let round = 0; round < ROUNDS; round++) {
      const before = process.cpuUsage()
      yield* Effect.forEach(
        Array.from({ length: fibers }, (_, f) => f),
        (f) => Effect.forEach(Array.from({ length: Math.ceil(COUNT / fibers) }, (_, i) => i), (i) => unit(f * COUNT + i), { discard: true }),
        { concurrency: "unbounded", discard: true }
      )
      const used = process.cpuUsage(before)
      best = Math.min(best, (used.user + used.system) / COUNT)
    }
    return best
  })

const steps = Effect.fn("unit-costs.steps")(function*(n: number) {
  let total = n
  for (let i = 0; i < 5; i++) total += yield* Effect.succeed(i)
  return total
})

const main = Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const statement = (i: number) => sql`SELECT ${i}::int AS n, now() AS at`
  const transaction = (statements: number) => (i: number) =>
    Effect.forEach(Array.from({ length: statements }, (_, k) => k), (k) => statement(i + k), { discard: true }).pipe(sql.withTransaction)
  const rows: Array<[string, number]> = []
  rows.push(["Effect.fn of 5 steps (no I/O), 1 fiber", yield* cpuPerUnit(1, steps)])
  rows.push(["statement, 8 fibers at once", yield* cpuPerUnit(8, statement)])
  rows.push(["statement, 1 fiber", yield* cpuPerUnit(1, statement)])
  for (const n of [1, 2, 4]) rows.push([`transaction of ${n} statement${n === 1 ? "" : "s"}, 8 fibers`, yield* cpuPerUnit(8, transaction(n))])
  const entity = yield* Effect.gen(function*() {
    const client = yield* Probe.client
    // 50 entities, as a company's automations or conversations would be addressed.
    return yield* cpuPerUnit(16, (i) => client(String(i % 50)).Ping({ n: i, text: "hello" }))
  }).pipe(
    Effect.provide(
      ProbeLayer.pipe(
        Layer.provideMerge(SingleRunner.layer({ runnerStorage: "memory", shardingConfig: { simulateRemoteSerialization: false } })),
        Layer.provide(NodeCrypto.layerDigest)
      )
    )
  )
  rows.push(["local entity call, 16 fibers", entity])
  console.log(`bench/unit-costs — ${machine()}, Node ${process.version}, ${COUNT} units per round, best of ${ROUNDS} rounds`)
  for (const [label, us] of rows) console.log(`  ${label.padEnd(44)} ${us.toFixed(0).padStart(6)} µs CPU`)
  recordResults("unit-costs", { title: "CPU of one unit", x: "unit", y: "µs CPU", scatter: true }, { "µs CPU": rows.map(([label, us], i) => [i + 1, us, label]) }, { units: COUNT, rounds: ROUNDS, rows })
})

// A database of its own: the entity's runner writes its cluster tables there, and it is dropped at the end.
const database = await benchDatabase(serverUrl, "crm_bench_unit_costs")
try {
  await runLikeApp(database.url, Effect.scoped(main))
} finally {
  await database.drop()
}
process.exit(0)
