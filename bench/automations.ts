/**
 * Automations under inbound load: 50 active automations in one company; every inbound message matches
 * exactly two of them, each a 3-step graph (condition → add-tag → send-message to the sandbox). The app
 * is a child process (`node --import tsx src/main.ts`, as `npm start` runs it) on a fresh database; this
 * process is only the load generator. Inbound messages arrive through the sandbox inbound route at a
 * rising rate (open loop). Per rate, a same-run baseline first (the same load matching no automation),
 * then the matching stage: the inbound rate achieved, the latency from sending the inbound request to
 * the finish of the last step of both runs (p50 / p99, after the backlog drained) and where it went,
 * and per inbound message the CPU of the app process and of its PostgreSQL backends and the database's
 * committed transactions against the baseline's.
 *
 * Then the trigger evaluation alone (`TriggerIndex.match` in this process, on the app's client, warmed): an inbound message that
 * matches none of the 50 (50 text conditions evaluated), an event key no automation listens to, and a
 * message that matches two (includes reading the sender's contact id, one SQL query).
 *
 * Goals: ≥ 300 inbound/s with p99 ≤ 250 ms to the last step; a non-matching event ≤ 50 µs.
 *
 *   DATABASE_URL=postgres://… npx tsx bench/automations.ts       a fresh database on that server, dropped at the end
 *   BENCH_AUTOMATION_RATES=25,50,100,200,300,400 BENCH_AUTOMATION_STAGE_S=4 BENCH_AUTOMATION_SENDERS=500
 *   BENCH_AUTOMATION_EVALUATIONS=20000 (per evaluation case; BENCH_AUTOMATION_RATES=0 times the evaluation alone)
 *   BENCH_AUTOMATION_RUNNERS=2 (app processes, inbound alternating between them; CPU is their sum)
 */
import { Effect, Layer } from "effect"
import { AutomationContextRepo } from "../src/automations/ContextRepo.ts"
import { AutomationsRepo } from "../src/automations/Repo.ts"
import { TriggerIndex } from "../src/automations/Triggers.ts"
import { createCompany, startApp } from "./support/App.ts"
import { benchDatabase, runLikeApp, runSql } from "./support/Database.ts"
import { cpuMsOf, runBench, sleep, workspace } from "./support/Processes.ts"
import { fmtMs, machine, summary } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

const RATES = (process.env.BENCH_AUTOMATION_RATES ?? "25,50,100,200,300,400").split(",").map(Number).filter((r) => r > 0)
/** Evaluations timed per case (×10 for the unlistened key): raise it to profile the evaluation. */
const EVALUATIONS = Number(process.env.BENCH_AUTOMATION_EVALUATIONS ?? 20_000)
const STAGE_S = Number(process.env.BENCH_AUTOMATION_STAGE_S ?? 4)
const SENDERS = Number(process.env.BENCH_AUTOMATION_SENDERS ?? 500)
/** App processes against the one database (ARCHITECTURE's scale-out: one per core); inbound messages alternate between them. */
const RUNNERS = Number(process.env.BENCH_AUTOMATION_RUNNERS ?? 1)
const AUTOMATIONS = 50

process.env.LOG_LEVEL ??= "warn"
if (!process.env.DATABASE_URL) {
  console.log("bench/automations needs PostgreSQL: set DATABASE_URL. Skipped.")
  process.exit(0)
}
const serverUrl = process.env.DATABASE_URL

const query = runSql

const keyword = (i: number) => `#k${String(i).padStart(2, "0")}#`

const main = async () => {
  const { name, url, drop } = await benchDatabase(serverUrl, "crm_bench_automations")
  console.log(`bench/automations — ${machine()}, Node ${process.version}, database ${name}, ${RUNNERS} app process${RUNNERS === 1 ? "" : "es"}`)
  const ws = workspace("bench-automations")
  const app = await startApp(ws, { mode: "server", logLevel: process.env.BENCH_LOG_LEVEL ?? "warn", profile: false, dataDir: ws.dir, databaseUrl: url })
  const apps = [app]
  try {
    for (let i = 1; i < RUNNERS; i++) {
      apps.push(await startApp(ws, { mode: `server-${i + 1}`, logLevel: process.env.BENCH_LOG_LEVEL ?? "warn", profile: false, dataDir: ws.dir, databaseUrl: url }))
    }
    const made = await createCompany(app)
    const company = { id: made.companyId }
    const token = made.token
    const call = async (method: string, path: string, body?: unknown, base = app.base) => {
      const res = await fetch(base + path, {
        method,
        headers: { authorization: `Bearer ${token}`, accept: "application/json", "content-type": "application/json" },
        body: body === undefined ? undefined : JSON.stringify(body)
      })
      const json = await res.json().catch(() => undefined) as any
      if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json)}`)
      return json?.data
    }
    const channel = await call("POST", "/v1/channels", { type: "msgr_b", provider: "sandbox", name: "bench" })
    const tag = await call("POST", "/v1/tags", { name: "bench" })
    for (let i = 0; i < AUTOMATIONS; i++) {
      const a = await call("POST", "/v1/automations", { name: `A${i}`, status: "draft" })
      await call("PATCH", `/v1/automations/${a.id}/builder`, {
        nodes: [
          { id: "t", type: "trigger", position: { x: 0, y: 0 } },
          { id: "c", type: "action", actionId: "condition", data: { conditions: [{ type: "text_contains", value: "order" }], conditionsJoiner: "and" } },
          { id: "tag", type: "action", actionId: "add-tag", data: { tag_id: tag.id } },
          { id: "send", type: "action", actionId: "send-message", data: { text: `Thanks from A${i}` } }
        ],
        edges: [
          { id: "e1", source: "t", target: "c" },
          { id: "e2", source: "c", target: "tag", sourceHandle: "true" },
          { id: "e3", source: "tag", target: "send" }
        ],
        triggers: [{ id: "tr", event: "message.created", channelType: "msgr_b", conditionsJoiner: "and", conditions: [{ type: "text_contains", value: keyword(i) }] }]
      })
      await call("PATCH", `/v1/automations/${a.id}`, { status: "active" })
    }
    let sent = 0
    const inbound = (text: string) => {
      const n = sent++
      const sender = n % SENDERS
      return call("POST", `/v1/channels/${channel.id}/sandbox/inbound`, { from: { external_id: `s-${sender}`, name: `S${sender}` }, text }, apps[n % apps.length].base)
    }
    const textFor = (n: number) => `please ${keyword(n % AUTOMATIONS)} ${keyword((n + 1) % AUTOMATIONS)} order`

    // Checked before timing: one inbound starts exactly its two runs, each with three succeeded steps.
    const probe = await inbound(textFor(0))
    const deadline = Date.now() + 20_000
    let steps: ReadonlyArray<{ n: number }> = []
    while (Date.now() < deadline) {
      steps = await query<{ n: number }>(url, `
        SELECT count(*)::int AS n FROM automation_run_steps s JOIN automation_runs r ON r.id = s.run_id
        WHERE r.company_id = $1 AND (r.context->>'message_id')::bigint = $2 AND s.status = 'succeeded'`, [company.id, probe.message_id])
      if (steps[0].n >= 6) break
      await sleep(50)
    }
    if (steps[0].n !== 6) throw new Error(`check failed: ${steps[0].n} steps for the probe message`)

    console.log(`  ${AUTOMATIONS} active automations; each inbound matches 2 (condition → add-tag → send-message); ${SENDERS} senders`)
    console.log(`  ${"offered/s".padStart(9)} ${"achieved/s".padStart(10)} ${"msgs".padStart(6)} ${"done".padStart(6)} ${"in p99".padStart(7)} ${"last p50".padStart(8)} ${"last p99".padStart(8)} ${"max".padStart(8)}  (ms)`)
    /** Inbound messages at `rate` for a stage (open loop): when each was sent, by message id, and each request's time. */
    const offer = async (rate: number, text: (n: number) => string) => {
      const total = rate * STAGE_S
      const sentAt = new Map<number, number>()
      const inboundMs: Array<number> = []
      const started = performance.now()
      const pending: Array<Promise<void>> = []
      for (let i = 0; i < total; i++) {
        const due = started + (i * 1000) / rate
        const wait = due - performance.now()
        if (wait > 1) await sleep(wait)
        const t0 = Date.now()
        const p0 = performance.now()
        pending.push(inbound(text(sent)).then((r) => {
          sentAt.set(Number(r.message_id), t0)
          inboundMs.push(performance.now() - p0)
        }))
      }
      await Promise.all(pending)
      return { total, sentAt, inboundMs, achieved: total / ((performance.now() - started) / 1000) }
    }

    // The app's PostgreSQL backends (its pool, opened by now, and its LISTEN connection), for their CPU.
    const backends = (await query<{ pid: number }>(url, "SELECT pid FROM pg_stat_activity WHERE datname = current_database() AND application_name = 'crm'")).map((r) => r.pid)
    // Load-insensitive costs beside the wall times: the CPU of the app process and of its PostgreSQL
    // backends, and the database's committed transactions (each statement outside a transaction counts as one).
    const cost = async () => {
      await sleep(1_100)
      const [db] = await query<{ xacts: number }>(url, "SELECT xact_commit::int AS xacts FROM pg_stat_database WHERE datname = current_database()")
      return { cpuMs: cpuMsOf(apps.map((a) => a.pid)), dbCpuMs: cpuMsOf(backends), xacts: db.xacts }
    }
    const perMessage = (from: { cpuMs: number; dbCpuMs: number; xacts: number }, to: { cpuMs: number; dbCpuMs: number; xacts: number }, n: number) =>
      ({ cpuMs: (to.cpuMs - from.cpuMs) / n, dbCpuMs: (to.dbCpuMs - from.dbCpuMs) / n, xacts: (to.xacts - from.xacts) / n })
    const costs: Array<string> = []

    const idleFrom = await cost()
    await sleep(5_000)
    const idleTo = await cost()
    console.log(`  idle (no load, after the probe): app ${((idleTo.cpuMs - idleFrom.cpuMs) / 6.1).toFixed(0)} ms CPU per second, PostgreSQL ${((idleTo.dbCpuMs - idleFrom.dbCpuMs) / 6.1).toFixed(0)} ms, ${((idleTo.xacts - idleFrom.xacts) / 6.1).toFixed(1)} transactions/s`)
    let sustained = 0
    for (const rate of RATES) {
      // The same-run baseline: the same inbound load matching no automation (the 50 conditions evaluated, no run).
      const c0 = await cost()
      const base = await offer(rate, () => "hello, nothing to match here")
      const baseCost = perMessage(c0, await cost(), base.total)
      const baseS = summary(base.inboundMs)
      console.log(`  ${String(rate).padStart(9)} ${base.achieved.toFixed(0).padStart(10)} ${String(base.total).padStart(6)} ${"-".padStart(6)} ${fmtMs(baseS.p99)}   (baseline: no match)`)
      const c1 = await cost()
      const { total, sentAt, inboundMs, achieved } = await offer(rate, textFor)
      const ids = [...sentAt.keys()]
      let rows: ReadonlyArray<{ message_id: number; steps: number; last: Date; admitted: Date; first: Date }> = []
      const drainUntil = Date.now() + 60_000
      while (Date.now() < drainUntil) {
        rows = await query(url, `
          SELECT (r.context->>'message_id')::bigint::int AS message_id, count(*)::int AS steps, max(s.finished_at) AS last,
            max(r.started_at) AS admitted, max(s.started_at) FILTER (WHERE s.node_id = 'c') AS first
          FROM automation_runs r JOIN automation_run_steps s ON s.run_id = r.id AND s.company_id = r.company_id
          WHERE r.company_id = $1 AND (r.context->>'message_id')::bigint = ANY($2::bigint[])
          GROUP BY 1`, [company.id, ids])
        if (rows.filter((r) => r.steps >= 6).length === ids.length) break
        await sleep(200)
      }
      const done = rows.filter((r) => r.steps >= 6)
      const runCost = perMessage(c1, await cost(), total)
      costs.push(`  ${String(rate).padStart(9)}   app cpu ms/msg ${baseCost.cpuMs.toFixed(2)} → ${runCost.cpuMs.toFixed(2)} (×${(runCost.cpuMs / baseCost.cpuMs).toFixed(2)}), ` +
        `PostgreSQL cpu ms/msg ${baseCost.dbCpuMs.toFixed(2)} → ${runCost.dbCpuMs.toFixed(2)}, ` +
        `db transactions/msg ${baseCost.xacts.toFixed(1)} → ${runCost.xacts.toFixed(1)} (×${(runCost.xacts / baseCost.xacts).toFixed(2)})`)
      const latencies = done.map((r) => new Date(r.last).getTime() - sentAt.get(Number(r.message_id))!)
      const last = summary(latencies)
      const inS = summary(inboundMs)
      // Where the time went, p50 of each part: inbound sent → the later run admitted → its first step started → the last step of both ended.
      const admitted = summary(done.map((r) => new Date(r.admitted).getTime() - sentAt.get(Number(r.message_id))!))
      const toFirst = summary(done.map((r) => new Date(r.first).getTime() - new Date(r.admitted).getTime()))
      console.log(`  ${String(rate).padStart(9)} ${achieved.toFixed(0).padStart(10)} ${String(total).padStart(6)} ${String(done.length).padStart(6)} ${fmtMs(inS.p99)} ${fmtMs(last.p50).padStart(8)} ${fmtMs(last.p99).padStart(8)} ${fmtMs(last.max).padStart(8)}   admitted p50 ${fmtMs(admitted.p50)}, admitted→first step p50 ${fmtMs(toFirst.p50)}`)
      recordResults("automations", { title: "Automations: inbound to the last step of both runs, against offered rate", x: "offered inbound/s", y: "latency ms", logY: true }, { "last step p50": [[rate, last.p50]], "last step p99": [[rate, last.p99]], "inbound request p99": [[rate, inS.p99]] }, { rate, achieved, total, done: done.length, inbound: inS, lastStep: last, baseCost, runCost })
      if (done.length === total && last.p99 <= 250 && achieved >= rate * 0.95) sustained = rate
      if (done.length < total || last.p99 > 5_000) break
      await sleep(1_000)
    }
    console.log(`  sustained (all runs done, p99 to last step ≤ 250 ms): ${sustained} inbound/s`)
    console.log("  cost per inbound message, no match (baseline) → matching two 3-step runs:")
    for (const line of costs) console.log(line)

    const [account] = await query<{ id: number }>(url, "SELECT id::int AS id FROM contact_accounts WHERE company_id = $1 LIMIT 1", [company.id])
    const envelope = (event: string, data: unknown) => ({ id: "evt_1", seq: 1, event, company_id: company.id, occurred_at: new Date().toISOString(), data })
    const message = (text: string) => envelope("message.created", {
      message: { id: 1, direction: "inbound", message_content: text, message_type: "text", contact_account_id: account.id },
      conversation_id: 1,
      thread_id: 1,
      channel_id: channel.id
    })
    for (const a of apps) await a.stop()
    const timing = await runLikeApp(url, Effect.gen(function*() {
      const index = yield* TriggerIndex
      const time = Effect.fnUntraced(function*(event: ReturnType<typeof envelope>, n: number, expect: number) {
        const got = yield* index.match(event)
        if (got.length !== expect) return yield* Effect.die(`expected ${expect} matches, got ${got.length}`)
        for (let i = 0; i < Math.min(n, 1000); i++) yield* index.match(event)
        const t = performance.now()
        for (let i = 0; i < n; i++) yield* index.match(event)
        return ((performance.now() - t) * 1000) / n
      })
      return {
        none: yield* time(message("hello there, nothing to see"), EVALUATIONS, 0),
        unlistened: yield* time(envelope("contact.updated", { contact_id: 1 }), EVALUATIONS * 10, 0),
        two: yield* time(message(textFor(3)), 2_000, 2)
      }
    }).pipe(Effect.provide(TriggerIndex.layer.pipe(Layer.provide([AutomationsRepo.layer, AutomationContextRepo.layer])))))
    console.log("  trigger evaluation per event (TriggerIndex.match, in process):")
    console.log(`    message.created matching none of 50 (50 conditions)   ${timing.none.toFixed(2).padStart(8)} µs`)
    console.log(`    an event key no automation listens to               ${timing.unlistened.toFixed(2).padStart(8)} µs`)
    console.log(`    message.created matching 2 (+ contact id query)      ${timing.two.toFixed(2).padStart(8)} µs`)
  } finally {
    for (const a of apps) await a.stop()
    await ws.cleanup()
    await drop()
  }
}

runBench(main)
