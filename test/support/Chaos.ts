import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { telegramChannel } from "../stickers/telegram.ts"
import { freshDatabase } from "./Databases.ts"
import { type ServerProcess, shardsSettled, sleep, spawnServer, untilNoneLeft } from "./Processes.ts"
import { type Json } from "./TestServer.ts"

/**
 * Chaos across runners: RUNNERS server processes (CLUSTER=socket) on one fresh database, mixed load through
 * whichever are up (keyed sends to a Telegram fake, contact writes, inbound messages that start an automation
 * with a wait, a broadcast now and then), and a `kill -9` of a runner chosen at random every `killEveryS`,
 * restarted at once. Afterwards every write is checked: nothing acknowledged lost, nothing delivered twice at
 * the fake, every idempotency key final, every broadcast recipient final, every automation wait fired once.
 */
export interface ChaosOptions {
  readonly loadSeconds: number
  readonly killEveryS: number
  readonly runners?: number
  /** Requests in flight at once, spread over the kinds of load. */
  readonly concurrency?: number
  readonly log?: (line: string) => void
}

export interface Kill {
  readonly atS: number
  readonly runner: string
  /** From the kill until the restarted runner answered /ready. */
  readonly readyMs: number
  /** From the kill until every shard was held again by a full set of runners. */
  readonly recoveryMs: number
}

export interface ChaosReport {
  readonly requests: number
  readonly statuses: Record<string, number>
  readonly kills: ReadonlyArray<Kill>
  readonly acknowledged: Record<string, number>
  /** Each must be empty: what the run found wrong, one line per fault. */
  readonly problems: ReadonlyArray<string>
}

const WAIT_KEYWORD = "chaos-wait"
const CHATS = 12

type Rows = <A extends object>(text: string, params?: ReadonlyArray<unknown>) => Promise<ReadonlyArray<A>>

interface Cluster {
  readonly slots: Array<ServerProcess>
  readonly down: Set<number>
  readonly rows: Rows
  readonly fake: TelegramFake
  readonly env: () => Record<string, string>
  readonly close: () => Promise<void>
}

const startCluster = async (baseUrl: string, runners: number): Promise<Cluster> => {
  const fake = new TelegramFake()
  await fake.http.start()
  const database = await freshDatabase(baseUrl)
  const db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(database.url), maxConnections: 2 }).pipe(Layer.orDie))
  const rows: Rows = <A extends object>(text: string, params: ReadonlyArray<unknown> = []) =>
    db.runPromise(SqlClient.SqlClient.use((sql) => sql.unsafe<A>(text, params)).pipe(Effect.orDie))
  const env = () => ({
    DATABASE_URL: database.url,
    CLUSTER: "socket",
    PLATFORM_API_KEY: platformKey,
    TELEGRAM_API_BASE: fake.http.url,
    REQUEST_DEADLINE_MS: "5000",
    IDEMPOTENCY_LEASE_MS: "2000",
    PROVIDER_TIMEOUT_MS: "3000",
    CLUSTER_LEASE_MS: "6000",
    RUNNER_HEALTH_CHECK_MS: "1000",
    RATE_LIMIT_PER_WINDOW: "1000000",
    METRICS_PORT: "0"
  })
  const slots: Array<ServerProcess> = []
  // One after the other: the first runs the migrations on the empty database, and on a loaded machine
  // processes starting side by side each take longer than all of them in turn.
  for (let i = 0; i < runners; i++) slots.push(await spawnServer(`runner-${i}`, env(), { readyTimeoutMs: 180_000 }))
  await shardsSettled((text) => rows(text), runners)
  return {
    slots,
    down: new Set(),
    rows,
    fake,
    env,
    close: async () => {
      await Promise.all(slots.map((p) => p.stop(2_000)))
      await fake.http.close()
      await db.dispose()
      await database.drop()
    }
  }
}

const platformKey = `chaos-platform-key-${Math.random().toString(36).slice(2)}`

/** A request to one of the runners that are up; a connection cut by a kill answers status 0. */
const caller = (cluster: Cluster) => async (method: string, path: string, token: string, body?: unknown, headers: Record<string, string> = {}): Promise<Json> => {
  const up = cluster.slots.map((_, i) => i).filter((i) => !cluster.down.has(i))
  const runner = cluster.slots[up[Math.floor(Math.random() * up.length)]]
  try {
    const res = await fetch(runner.url + path, {
      method,
      headers: { authorization: `Bearer ${token}`, "content-type": "application/json", accept: "application/json", ...headers },
      body: body === undefined ? undefined : JSON.stringify(body),
      signal: AbortSignal.timeout(20_000)
    })
    return { status: res.status, headers: res.headers, body: await res.json().catch(() => undefined) }
  } catch {
    return { status: 0, headers: new Headers(), body: undefined }
  }
}

type Call = ReturnType<typeof caller>

/** Retries `send` until it answers below 300 (the cluster may be between runners); fails after 60 s. */
const settle = async (what: string, send: () => Promise<Json>) => {
  const deadline = Date.now() + 60_000
  while (true) {
    const res = await send()
    if (res.status > 0 && res.status < 300) return res.body.data
    if (Date.now() > deadline) throw new Error(`${what}: ${res.status} ${JSON.stringify(res.body)}`)
    await sleep(300)
  }
}

/** The company, a Telegram bot with CHATS chats, a sandbox channel whose inbound messages start a waiting automation, a segment of the chats' contacts. */
const setup = async (cluster: Cluster, call: Call) => {
  const created = await settle("company", () =>
    call("POST", "/platform/v1/companies", platformKey, { name: "Chaos", plan: "business", admin: { email: `chaos-${Date.now()}@example.test`, password: "password-123", name: "Chaos" } }))
  const token = created.token as string
  const companyId = created.company.id as number
  const viaFirst = { url: cluster.slots[0].url, platformKey, realtimePort: 0, pusherAppKey: "crm", runInApp: () => Promise.reject(new Error("no app")), close: async () => {} }
  const bot = await telegramChannel(viaFirst, cluster.fake, token)
  const threads: Array<number> = []
  for (let i = 0; i < CHATS; i++) {
    const opened = await settle("opening", () => call("POST", "/v1/messages/send", token, { channel_id: bot.id, to: { external_id: String(7000 + i) }, text: `opening ${i}` }, { "idempotency-key": `opening-${i}` }))
    threads.push(opened.thread_id)
  }
  const sandbox = await settle("sandbox", () => call("POST", "/v1/channels", token, { type: "msgr_b", provider: "sandbox", name: "chaos" }))
  const tag = await settle("tag", () => call("POST", "/v1/tags", token, { name: "waited" }))
  const automation = await settle("automation", () => call("POST", "/v1/automations", token, { name: "chaos wait", status: "draft" }))
  await settle("builder", () => call("PATCH", `/v1/automations/${automation.id}/builder`, token, {
    nodes: [
      { id: "t", type: "trigger", position: { x: 0, y: 0 } },
      { id: "wait", type: "action", actionId: "wait", data: { duration: 3, unit: "seconds" } },
      { id: "tag", type: "action", actionId: "add-tag", data: { tag_id: tag.id } }
    ],
    edges: [{ id: "e1", source: "t", target: "wait" }, { id: "e2", source: "wait", target: "tag" }],
    triggers: [{ id: "tr", event: "message.created", channelType: "msgr_b", conditionsJoiner: "and", conditions: [{ type: "text_contains", value: WAIT_KEYWORD }] }]
  }))
  await settle("activate", () => call("PATCH", `/v1/automations/${automation.id}`, token, { status: "active" }))
  const contacts = await cluster.rows<{ id: number }>(
    "SELECT DISTINCT contact_id::int AS id FROM contact_accounts WHERE company_id = $1 AND channel_type = 'msgr_b' AND external_id LIKE '70%'", [companyId])
  const segment = await settle("segment", () => call("POST", "/v1/segments", token, { name: "chats", type: "static", contact_ids: contacts.map((c) => c.id) }))
  return { token, companyId, botId: bot.id, threads, sandboxId: sandbox.id as number, segmentId: segment.id as number, automationId: automation.id as number }
}

type Setup = Awaited<ReturnType<typeof setup>>

/** What the load was told: acknowledged ids, and every idempotency key with its body and final answer. */
interface Ledger {
  readonly statuses: Record<string, number>
  readonly contacts: Array<number>
  readonly messages: Array<number>
  readonly waits: Array<number>
  readonly broadcasts: Array<number>
  readonly keys: Map<string, { readonly body: unknown; final: string | undefined }>
}

const tallyInto = (statuses: Record<string, number>, status: number) => {
  statuses[status] = (statuses[status] ?? 0) + 1
}

/** A keyed send's answer is final when it is 201, 422, or 409 outcome_unknown; anything else is retried with the key. */
const finalOf = (res: Json) =>
  res.status === 201 ? `sent ${res.body.data.id}` : res.status === 422 ? "refused" : res.status === 409 && res.body?.reason === "outcome_unknown" ? "outcome_unknown" : undefined

const sendKeyed = async (call: Call, ctx: Setup, ledger: Ledger, key: string) => {
  const entry = ledger.keys.get(key)!
  const res = await call("POST", "/v1/messages/send", ctx.token, entry.body, { "idempotency-key": key })
  tallyInto(ledger.statuses, res.status)
  entry.final = finalOf(res)
  if (res.status === 201) ledger.messages.push(res.body.data.id)
}

const loadKinds = (call: Call, ctx: Setup, ledger: Ledger) => {
  let n = 0
  return [
    async () => {
      const i = n++
      const key = `chaos-send-${i}`
      ledger.keys.set(key, { body: { channel_id: ctx.botId, thread_id: ctx.threads[i % ctx.threads.length], text: `chaos ${i}` }, final: undefined })
      await sendKeyed(call, ctx, ledger, key)
    },
    async () => {
      const res = await call("POST", "/v1/contacts", ctx.token, { firstName: `Chaos${n++}` })
      tallyInto(ledger.statuses, res.status)
      if (res.status === 201) ledger.contacts.push(res.body.data.id)
    },
    async () => {
      const i = n++
      // A customer of their own per message: the loop guard cancels a contact's eleventh run of an
      // automation within an hour, which is not a lost wait.
      const res = await call("POST", `/v1/channels/${ctx.sandboxId}/sandbox/inbound`, ctx.token, { from: { external_id: `w-${i}`, name: "Waiter" }, text: `${WAIT_KEYWORD} ${i}` })
      tallyInto(ledger.statuses, res.status)
      if (res.status === 201) ledger.waits.push(res.body.data.message_id)
    },
    async () => {
      const res = await call("GET", "/v1/contacts?search=Chaos1&perPage=10", ctx.token)
      tallyInto(ledger.statuses, res.status)
    }
  ]
}

const broadcastOnce = async (call: Call, ctx: Setup, ledger: Ledger) => {
  const k = ledger.broadcasts.length + 1
  const res = await call("POST", "/v1/broadcasts", ctx.token, {
    name: `chaos ${k}`,
    audience: { segmentId: String(ctx.segmentId) },
    channels: { mode: "specific", channelIds: [ctx.botId] },
    content: { channels: [{ type: "text", channelId: ctx.botId, text: `chaos broadcast ${k}` }] },
    schedule: { mode: "now" }
  }, { "idempotency-key": `chaos-broadcast-${k}` })
  tallyInto(ledger.statuses, res.status)
  if (res.status === 201) ledger.broadcasts.push(res.body.data.id)
}

/** `kill -9` of runner `index`, started again at once; how long until it answered /ready and until every shard was held again. */
const killAndRestart = async (cluster: Cluster, index: number, started: number, log: (line: string) => void): Promise<Kill> => {
  const victim = cluster.slots[index]
  cluster.down.add(index)
  const killedAt = Date.now()
  process.kill(victim.pid!, "SIGKILL")
  await victim.stop(1_000)
  cluster.slots[index] = await spawnServer(victim.name, cluster.env(), { readyTimeoutMs: 180_000 })
  const readyMs = Date.now() - killedAt
  cluster.down.delete(index)
  const whole = await shardsSettled((text) => cluster.rows(text), cluster.slots.length, RECOVERY_LIMIT_MS).then(() => true, () => false)
  // NaN: the cluster was not whole again within the limit (a fault the checks report).
  const kill = { atS: Math.round((killedAt - started) / 1000), runner: victim.name, readyMs, recoveryMs: whole ? Date.now() - killedAt : Number.NaN }
  log(`  kill -9 ${kill.runner} at ${kill.atS} s: ready again after ${kill.readyMs} ms, ${whole ? `all shards held after ${kill.recoveryMs} ms` : `shards not all held within ${RECOVERY_LIMIT_MS} ms`}`)
  return kill
}

const RECOVERY_LIMIT_MS = 180_000

/**
 * A kill every `everyS` of a runner chosen at random among those up, on schedule even while an earlier one is
 * still restarting (a slow restart does not thin out the kills); never the last runner up.
 */
const killer = async (cluster: Cluster, everyS: number, until: number, started: number, log: (line: string) => void) => {
  const kills: Array<Promise<Kill>> = []
  while (Date.now() + everyS * 1000 < until) {
    await sleep(everyS * 1000)
    const up = cluster.slots.map((_, i) => i).filter((i) => !cluster.down.has(i))
    if (up.length < 2) continue
    const index = up[Math.floor(Math.random() * up.length)]
    const atS = Math.round((Date.now() - started) / 1000)
    // A runner that does not start again stays down; the run goes on with the others and reports it.
    kills.push(killAndRestart(cluster, index, started, log).catch((error): Kill => {
      log(`  runner-${index} did not start again: ${String(error).slice(0, 300)}`)
      return { atS, runner: `runner-${index}`, readyMs: Number.NaN, recoveryMs: Number.NaN }
    }))
  }
  return Promise.all(kills)
}

const count = async (rows: Rows, text: string, params: ReadonlyArray<unknown>) => (await rows<{ n: number }>(text, params))[0].n

/** Polls `text` (a count of what is not finished yet) until it is 0 or 90 s have passed; answers the last count. */
const drained = (rows: Rows, text: string, params: ReadonlyArray<unknown>) => untilNoneLeft(() => count(rows, text, params), 90_000)

/** Every check of the run; each fault is a line. */
const check = async (cluster: Cluster, ctx: Setup, ledger: Ledger) => {
  const problems: Array<string> = []
  const { rows } = cluster
  const missing = async (what: string, table: string, acknowledged: ReadonlyArray<number>) => {
    // A key retried after its answer was lost is acknowledged again with the same id.
    const ids = [...new Set(acknowledged)]
    const found = await count(rows, `SELECT count(*)::int AS n FROM ${table} WHERE company_id = $1 AND id = ANY($2::bigint[])`, [ctx.companyId, ids])
    if (found !== ids.length) problems.push(`${what}: ${ids.length - found} of ${ids.length} acknowledged missing`)
  }
  await missing("contacts", "contacts", ledger.contacts)
  await missing("messages", "messages", [...ledger.messages, ...ledger.waits])
  const texts = new Map<string, number>()
  for (const c of cluster.fake.http.calls("sendMessage")) {
    const key = `${c.body.chat_id} ${c.body.text}`
    texts.set(key, (texts.get(key) ?? 0) + 1)
  }
  const twice = [...texts].filter(([, n]) => n > 1)
  if (twice.length > 0) problems.push(`delivered twice at the provider: ${twice.slice(0, 5).map(([t, n]) => `${t} ×${n}`).join(", ")}`)
  const open = [...ledger.keys].filter(([, e]) => e.final === undefined).map(([k]) => k)
  if (open.length > 0) problems.push(`idempotency keys never final: ${open.length} (${open.slice(0, 5).join(", ")})`)
  const pending = await count(rows, "SELECT count(*)::int AS n FROM idempotency_keys WHERE company_id = $1 AND state = 'pending'", [ctx.companyId])
  if (pending > 0) problems.push(`idempotency keys pending in the database: ${pending}`)
  const recipients = await drained(rows, "SELECT count(*)::int AS n FROM broadcast_recipients WHERE company_id = $1 AND status IN ('pending', 'sending')", [ctx.companyId])
  if (recipients > 0) problems.push(`broadcast recipients without a final status: ${recipients}`)
  const unfinished = await drained(rows, "SELECT count(*)::int AS n FROM automation_runs WHERE company_id = $1 AND status IN ('running', 'waiting')", [ctx.companyId])
  if (unfinished > 0) problems.push(`automation runs not finished: ${unfinished}`)
  const runs = await rows<{ message: string; runs: number; fired: number }>(
    `SELECT r.context->>'message_id' AS message, count(DISTINCT r.id)::int AS runs, count(s.id)::int AS fired
     FROM automation_runs r LEFT JOIN automation_run_steps s ON s.run_id = r.id AND s.node_id = 'tag'
     WHERE r.company_id = $1 AND r.automation_id = $2 GROUP BY 1`, [ctx.companyId, ctx.automationId])
  const byMessage = new Map(runs.map((r) => [String(r.message), r]))
  const notOnce = ledger.waits.filter((id) => byMessage.get(String(id))?.runs !== 1 || byMessage.get(String(id))?.fired !== 1)
  if (notOnce.length > 0) {
    problems.push(`automation waits not fired exactly once: ${notOnce.length} of ${ledger.waits.length} (${notOnce.slice(0, 5).map((id) => `${id}: ${JSON.stringify(byMessage.get(String(id)) ?? "no run")}`).join(", ")})`)
  }
  return problems
}

/** Retries every key without a final answer against the runners that are up, for up to 60 s. */
const settleKeys = async (call: Call, ctx: Setup, ledger: Ledger) => {
  const deadline = Date.now() + 60_000
  while (Date.now() < deadline) {
    const open = [...ledger.keys].filter(([, e]) => e.final === undefined).map(([k]) => k)
    if (open.length === 0) return
    await Promise.all(open.map((key) => sendKeyed(call, ctx, ledger, key)))
    await sleep(500)
  }
}

export const runChaos = async (baseUrl: string, options: ChaosOptions): Promise<ChaosReport> => {
  const log = options.log ?? (() => {})
  const cluster = await startCluster(baseUrl, options.runners ?? 3)
  try {
    const call = caller(cluster)
    const ctx = await setup(cluster, call)
    const ledger: Ledger = { statuses: {}, contacts: [], messages: [], waits: [], broadcasts: [], keys: new Map() }
    const started = Date.now()
    const until = started + options.loadSeconds * 1000
    log(`  load for ${options.loadSeconds} s on ${cluster.slots.length} runners, a kill every ${options.killEveryS} s`)
    const kinds = loadKinds(call, ctx, ledger)
    const workers = Array.from({ length: options.concurrency ?? 8 }, async (_, w) => {
      while (Date.now() < until) await kinds[w % kinds.length]()
    })
    const broadcasts = (async () => {
      for (let k = 1; k <= 3; k++) {
        await sleep(Math.max(0, started + (k * options.loadSeconds * 1000) / 4 - Date.now()))
        await broadcastOnce(call, ctx, ledger)
      }
    })()
    const [kills] = await Promise.all([killer(cluster, options.killEveryS, until, started, log), ...workers, broadcasts])
    await settleKeys(call, ctx, ledger)
    const problems = await check(cluster, ctx, ledger)
    const unrecovered = kills.filter((k) => Number.isNaN(k.recoveryMs))
    if (unrecovered.length > 0) problems.push(`cluster not whole within ${RECOVERY_LIMIT_MS} ms after ${unrecovered.length} of ${kills.length} kills`)
    return {
      requests: Object.values(ledger.statuses).reduce((a, b) => a + b, 0),
      statuses: ledger.statuses,
      kills,
      acknowledged: { contacts: ledger.contacts.length, sends: ledger.messages.length, inbound: ledger.waits.length, broadcasts: ledger.broadcasts.length, keys: ledger.keys.size },
      problems
    }
  } finally {
    await cluster.close()
  }
}
