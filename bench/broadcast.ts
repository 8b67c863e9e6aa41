/**
 * The broadcast engine end to end, in one process against PostgreSQL:
 *
 *   1. one run of BENCH_BROADCAST_RECIPIENTS (100,000) recipients over 10 selected sandbox channels
 *      (rate control off, sandbox ceiling raised): recipients/s from run start to the last final
 *      status, PostgreSQL row writes per recipient (pg_stat_database tup_inserted + tup_updated +
 *      tup_deleted over the run, everything the app wrote: messages, threads, events, recipients),
 *      and the process's peak RSS growth from the run's start to its end;
 *   2. two bare loops without the engine (no run entity, lanes, pacing, progress), one batch of 500 at a
 *      time, each over its own copy of the audience:
 *      a. the recipient rows alone: claim a batch after the last id claimed (mark it sending), write the
 *         outcome; no send, no message;
 *      b. the engine's statements: the same claim, then `Send.many` (conversations and threads
 *         created, the sandbox called, messages, history, events and the recipients' outcomes in one
 *         statement, the events numbered), on a second company of the same shape, so that it creates
 *         the conversations and threads the engine's run created;
 *   1b. a template broadcast of the same size on one msgr_a_business channel (a template approved there, a variable
 *      rendered per recipient): recipients/s, and template ÷ text against run 1;
 *   3. pacing: 3 channels at 600/min for BENCH_BROADCAST_PACING_SECONDS (180): the most sends in any
 *      60 s window per channel and the share of the allowance used.
 *
 * The run's result is checked (every recipient sent, one message each) before figures are printed.
 *
 *   DATABASE_URL=postgres://…/crm_x npx tsx bench/broadcast.ts
 *   DATABASE_URL=… node_modules/.bin/node --heap-growing-percent=25 --import tsx bench/broadcast.ts   (a V8 heap policy to compare)
 */
import os from "node:os"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId } from "../src/auth/Domain.ts"
import { Send } from "../src/messages/Send.ts"
import { approvedTemplate } from "../test/templates/support.ts"
import { createCompany, request, startServer } from "../test/support/TestServer.ts"
import { query } from "../test/support/Sql.ts"
import { autovacuumWarning } from "./support/Database.ts"
import { machine } from "./support/Report.ts"
import { recordResults } from "./support/Results.ts"

process.env.LOG_LEVEL ??= "warn"
process.env.SANDBOX_SENDS_PER_SECOND ??= "1000000"
const N = Number(process.env.BENCH_BROADCAST_RECIPIENTS ?? 100_000)
const PACING_SECONDS = Number(process.env.BENCH_BROADCAST_PACING_SECONDS ?? 180)
if (!process.env.DATABASE_URL) {
  console.log("bench/broadcast needs PostgreSQL: set DATABASE_URL. Skipped.")
  process.exit(0)
}

const vacuumWarning = await autovacuumWarning(process.env.DATABASE_URL)
if (vacuumWarning !== null) console.log(`  warning: ${vacuumWarning}`)
const server = await startServer({ rateLimitPerWindow: 1_000_000_000 } as any)
const db = (text: string, params: ReadonlyArray<unknown> = []) => query(server, text, params).then((rows) => [...rows] as Array<any>)
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))

let peakRss = process.memoryUsage().rss
const sampler = setInterval(() => (peakRss = Math.max(peakRss, process.memoryUsage().rss)), 100)

/** `count` contacts spread round-robin over `types`, one account each, tagged, and a segment of the tag. */
const population = async (company: { id: number; token: string }, count: number, types: ReadonlyArray<string>) => {
  const tag = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: `bench-${Date.now()}` } })
  const tagId = tag.body.data.id
  await db(`INSERT INTO contacts (company_id, first_name, display_name) SELECT $1, 'C' || g, 'C' || g FROM generate_series(1, $2) g`, [company.id, count])
  await db(`INSERT INTO contact_tags (company_id, contact_id, tag_id) SELECT $1, id, $2 FROM contacts WHERE company_id = $1`, [company.id, tagId])
  await db(
    `INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id)
     SELECT $1, id, ($2::text[])[1 + (row_number() OVER (ORDER BY id) - 1) % array_length($2::text[], 1)], 'x' || id FROM contacts WHERE company_id = $1`,
    [company.id, types]
  )
  await db("ANALYZE contacts, contact_tags, contact_accounts")
  const segment = await request(server, "POST", "/v1/segments", {
    token: company.token,
    body: { name: `bench ${tagId}`, conditions: [{ group: 1, type: "tag", operator: "has_any", value: [tagId] }], group_logic: "and" }
  })
  return String(segment.body.data.id)
}

const channel = async (companyId: number, type: string, i: number) =>
  (await db("INSERT INTO channels (company_id, type, provider, name, webhook_secret) VALUES ($1, $2, 'sandbox', $3, 's') RETURNING id", [companyId, type, `ch${i}`]))[0].id as number

const writes = async () => {
  const [row] = await db("SELECT (tup_inserted + tup_updated + tup_deleted)::bigint AS w FROM pg_stat_database WHERE datname = current_database()")
  return Number(row.w)
}

/** Polls the run's row (not the API: its stats are the heavier read, and would load the database under test). */
const waitDone = async (runId: number) => {
  const began = Date.now()
  let reported = began
  while (true) {
    if (Date.now() - reported >= 30_000) {
      reported = Date.now()
      const [p] = await db("SELECT count(*) FILTER (WHERE status NOT IN ('pending', 'sending'))::int AS done FROM broadcast_recipients WHERE run_id = $1", [runId])
      console.log(`  … ${p.done} recipients final after ${((reported - began) / 1000).toFixed(0)} s (${(p.done / ((reported - began) / 1000)).toFixed(0)}/s)`)
    }
    const [run] = await db("SELECT status FROM broadcast_runs WHERE id = $1", [runId])
    if (run.status !== "processing") {
      const [counts] = await db("SELECT count(*) FILTER (WHERE status = 'sent')::int AS sent FROM broadcast_recipients WHERE run_id = $1", [runId])
      return { status: run.status, sent: counts.sent }
    }
    await sleep(250)
  }
}

// 1. The engine.
const company = await createCompany(server)
// Only msgr_a and msgr_b have no customer window; a contact's channel is the first selected one of its account's type.
const types = ["msgr_a", "msgr_b"]
const channels: Array<number> = []
for (let i = 0; i < 10; i++) channels.push(await channel(company.id, types[i % 2], i))
const segmentId = await population(company, N, types)
const rssBefore = process.memoryUsage().rss
peakRss = rssBefore
const w0 = await writes()
const created = await request(server, "POST", "/v1/broadcasts", {
  token: company.token,
  body: {
    name: "bench", audience: { segmentId }, channels: { mode: "specific", channelIds: channels },
    content: { channels: channels.map((channelId) => ({ type: "text", channelId, text: "Hello {{first_name}}" })) },
    schedule: { mode: "now" }
  }
})
if (created.status !== 201) throw new Error(JSON.stringify(created.body))
const runId = created.body.data.runs[0].id
const [{ started }] = await db("SELECT started_at AS started FROM broadcast_runs WHERE id = $1", [runId])
const run = await waitDone(runId)
const enginePeakRss = peakRss
const [{ last }] = await db("SELECT max(sent_at) AS last FROM broadcast_recipients WHERE run_id = $1", [runId])
const w1 = await writes()
const seconds = (new Date(last).getTime() - new Date(started).getTime()) / 1000
const [{ dup }] = await db(
  `SELECT count(*)::int AS dup FROM (SELECT metadata->>'broadcast_recipient_id' FROM messages WHERE company_id = $1 AND direction = 'outbound' GROUP BY 1 HAVING count(*) > 1) d`,
  [company.id]
)
if (run.sent !== N || dup !== 0) throw new Error(`run check failed: ${JSON.stringify(run)}, duplicates ${dup}`)
const engineRate = N / seconds

// 1b. The same size as a template broadcast on a business channel (the template resolved once per batch, rendered per recipient).
const templated = await createCompany(server)
const business = await approvedTemplate(server, templated.token)
const templateSegment = await population(templated, N, ["msgr_a_business"])
const templateCreated = await request(server, "POST", "/v1/broadcasts", {
  token: templated.token,
  body: {
    name: "bench template", audience: { segmentId: templateSegment }, channels: { mode: "specific", channelIds: [business.channelId] },
    content: { channels: [{ type: "template", channelId: business.channelId, templateId: business.groupId, language: "en", variables: { order_id: "A-42" } }] },
    schedule: { mode: "now" }
  }
})
if (templateCreated.status !== 201) throw new Error(JSON.stringify(templateCreated.body))
const templateRunId = templateCreated.body.data.runs[0].id
const [{ started: templateStarted }] = await db("SELECT started_at AS started FROM broadcast_runs WHERE id = $1", [templateRunId])
const templateRun = await waitDone(templateRunId)
const [{ last: templateLast }] = await db("SELECT max(sent_at) AS last FROM broadcast_recipients WHERE run_id = $1", [templateRunId])
const [{ templated: templateMessages }] = await db(
  "SELECT count(*)::int AS templated FROM messages WHERE company_id = $1 AND direction = 'outbound' AND message_type = 'template'",
  [templated.id]
)
if (templateRun.sent !== N || templateMessages !== N) throw new Error(`template run check failed: ${JSON.stringify(templateRun)}, ${templateMessages} template messages`)
const templateSeconds = (new Date(templateLast).getTime() - new Date(templateStarted).getTime()) / 1000
const templateRate = N / templateSeconds

// 2. The bare loop over the same rows.
const [{ id: bareRun }] = await db("INSERT INTO broadcast_runs (company_id, broadcast_id, status, started_at) VALUES ($1, $2, 'processing', now()) RETURNING id", [company.id, created.body.data.id])
await db(
  `INSERT INTO broadcast_recipients (company_id, broadcast_id, run_id, contact_id, channel_id, contact_account_id, identifier, timezone)
   SELECT company_id, broadcast_id, $1, contact_id, channel_id, contact_account_id, identifier, timezone FROM broadcast_recipients WHERE run_id = $2`,
  [bareRun, runId]
)
await db("UPDATE broadcast_runs SET status = 'cancelled' WHERE id = $1", [bareRun])
const bareStart = Date.now()
// The engine's claim (per channel, after the last id claimed, at its largest batch) and its outcome write, one batch at a time.
const bareChannels = (await db("SELECT DISTINCT channel_id FROM broadcast_recipients WHERE run_id = $1", [bareRun])).map((r) => Number(r.channel_id))
for (const channelId of bareChannels) {
  let after = 0
  for (;;) {
    const claimed = await db(
      `WITH picked AS (
         SELECT id FROM broadcast_recipients WHERE run_id = $1 AND status = 'pending' AND channel_id = $2 AND id > $3
         ORDER BY id LIMIT 500 FOR UPDATE SKIP LOCKED
       )
       UPDATE broadcast_recipients r SET status = 'sending', attempts = attempts + 1, sent_at = now() FROM picked WHERE r.id = picked.id RETURNING r.id`,
      [bareRun, channelId, after]
    )
    if (claimed.length === 0) break
    after = Math.max(...claimed.map((c) => Number(c.id)))
    await db(
      `UPDATE broadcast_recipients r SET status = v.status, message_id = v.message_id FROM jsonb_to_recordset($1::jsonb) AS v(id bigint, status text, message_id bigint)
       WHERE r.id = v.id AND r.status = 'sending'`,
      [JSON.stringify(claimed.map((c) => ({ id: c.id, status: "sent", message_id: null })))]
    )
  }
}
const bareRate = N / ((Date.now() - bareStart) / 1000)

// 2b. The engine's statements, one batch at a time, on a second company of the same shape.
const twin = await createCompany(server)
const twinChannels: Array<number> = []
for (let i = 0; i < 10; i++) twinChannels.push(await channel(twin.id, types[i % 2], i))
const twinSegment = await population(twin, N, types)
const twinDraft = await request(server, "POST", "/v1/broadcasts", {
  token: twin.token,
  body: {
    name: "bench twin", is_draft: true, audience: { segmentId: twinSegment }, channels: { mode: "specific", channelIds: twinChannels },
    content: { channels: twinChannels.map((channelId) => ({ type: "text", channelId, text: "Hello {{first_name}}" })) },
    schedule: { mode: "now" }
  }
})
if (twinDraft.status !== 201) throw new Error(JSON.stringify(twinDraft.body))
const twinBroadcast = twinDraft.body.data.id as number
const [{ id: twinRun }] = await db("INSERT INTO broadcast_runs (company_id, broadcast_id, status, started_at) VALUES ($1, $2, 'cancelled', now()) RETURNING id", [twin.id, twinBroadcast])
// Each contact on the first selected channel of its account's type, as the engine's snapshot puts it.
await db(
  `INSERT INTO broadcast_recipients (company_id, broadcast_id, run_id, contact_id, channel_id, contact_account_id, identifier, timezone)
   SELECT ca.company_id, $2, $3, ca.contact_id, CASE ca.channel_type WHEN $5 THEN $6::bigint ELSE $7::bigint END, ca.id, ca.external_id, 'UTC'
   FROM contact_accounts ca WHERE ca.company_id = $1 AND ca.channel_type = ANY($4::text[]) ORDER BY ca.contact_id`,
  [twin.id, twinBroadcast, twinRun, types, types[0], twinChannels[0], twinChannels[1]]
)
await db("ANALYZE broadcast_recipients")
const sameStart = Date.now()
await server.runInApp(Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const batches = yield* Send
  const companyId = CompanyId.make(twin.id)
  for (const channelId of [twinChannels[0], twinChannels[1]]) {
    let after = 0
    for (;;) {
      const claimed = yield* sql<{ id: string; contact_account_id: string; first_name: string | null }>`
        WITH picked AS (
          SELECT r.id FROM broadcast_recipients r
          WHERE r.run_id = ${twinRun} AND r.status = 'pending' AND r.channel_id = ${channelId} AND r.id > ${after}
          ORDER BY r.id LIMIT 500 FOR UPDATE SKIP LOCKED
        ), cl AS (
          UPDATE broadcast_recipients r SET status = 'sending', attempts = r.attempts + 1, sent_at = now()
          FROM picked WHERE r.id = picked.id
          RETURNING r.id, r.contact_id, r.contact_account_id
        )
        SELECT cl.id, cl.contact_account_id, c.first_name
        FROM cl JOIN contacts c ON c.id = cl.contact_id AND c.company_id IS NOT DISTINCT FROM ${companyId}::bigint
        ORDER BY cl.id`
      if (claimed.length === 0) break
      after = Number(claimed[claimed.length - 1].id)
      const results = yield* batches.many(
        companyId,
        channelId,
        claimed.map((r) => ({
          key: Number(r.id),
          contactAccountId: Number(r.contact_account_id),
          text: `Hello ${r.first_name ?? ""}`,
          attachments: [],
          metadata: { broadcast_id: twinBroadcast, broadcast_run_id: twinRun, broadcast_recipient_id: Number(r.id) }
        }))
      )
      const outcomes = results.map((r) => r.status === "refused"
        ? { id: r.key, status: "failed", error: r.reason, message_id: null }
        : { id: r.key, status: r.status, error: r.error, message_id: r.messageId })
      yield* sql`
        WITH recipient_values AS MATERIALIZED (
          SELECT * FROM jsonb_to_recordset(${JSON.stringify(outcomes)}::jsonb) AS v(id bigint, status text, error text, message_id bigint)
        )
        UPDATE broadcast_recipients r SET status = v.status, error_message = v.error, message_id = v.message_id
        FROM recipient_values v
        WHERE r.id = v.id AND r.company_id IS NOT DISTINCT FROM ${companyId}::bigint AND r.status = 'sending'`.unprepared
    }
  }
}).pipe(Effect.provide(Send.layer), Effect.orDie))
const sameRate = N / ((Date.now() - sameStart) / 1000)
const [{ twinSent }] = await db(`SELECT count(*) FILTER (WHERE status = 'sent')::int AS "twinSent" FROM broadcast_recipients WHERE run_id = $1`, [twinRun])
if (twinSent !== N) throw new Error(`same-SQL loop check failed: ${twinSent} of ${N} sent`)

// 3. Pacing: 3 channels at 600/min.
const paced = await createCompany(server)
const pacedTypes = ["msgr_a", "msgr_b", "msgr_c_business"]
const pacedChannels: Array<number> = []
for (let i = 0; i < 3; i++) pacedChannels.push(await channel(paced.id, pacedTypes[i], i))
const perChannel = Math.ceil(600 * PACING_SECONDS / 60 * 1.1)
const pacedSegment = await population(paced, perChannel * 3, pacedTypes)
// msgr_c_business free-form sends need the contact's inbound within 7 days: give each a thread that has one.
await db(`INSERT INTO conversations (company_id, contact_id) SELECT $1, contact_id FROM contact_accounts WHERE company_id = $1 AND channel_type = 'msgr_c_business'`, [paced.id])
await db(
  `INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, last_inbound_at)
   SELECT $1, cv.id, $2, ca.id, now() FROM contact_accounts ca JOIN conversations cv ON cv.contact_id = ca.contact_id AND cv.company_id = $1
   WHERE ca.company_id = $1 AND ca.channel_type = 'msgr_c_business'`,
  [paced.id, pacedChannels[2]]
)
const pacedCreated = await request(server, "POST", "/v1/broadcasts", {
  token: paced.token,
  body: {
    name: "pacing", audience: { segmentId: pacedSegment }, channels: { mode: "specific", channelIds: pacedChannels },
    content: { channels: pacedChannels.map((channelId) => ({ type: "text", channelId, text: "Hi" })) },
    schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 600 } }
  }
})
const pacedRun = pacedCreated.body.data.runs[0].id
await sleep(PACING_SECONDS * 1000)
await request(server, "POST", `/v1/broadcasts/${pacedCreated.body.data.id}/runs/${pacedRun}/cancel`, { token: paced.token })
const pacing: Array<string> = []
for (const ch of pacedChannels) {
  const times = (await db("SELECT sent_at FROM broadcast_recipients WHERE run_id = $1 AND channel_id = $2 AND status = 'sent' ORDER BY sent_at", [pacedRun, ch]))
    .map((r) => new Date(r.sent_at).getTime())
  let best = 0
  let from = 0
  for (let to = 0; to < times.length; to++) {
    while (times[to] - times[from] >= 60_000) from++
    best = Math.max(best, to - from + 1)
  }
  const windowStart = times[0]
  const inWindow = times.filter((t) => t < windowStart + (PACING_SECONDS - 1) * 1000).length
  pacing.push(`channel ${ch}: max ${best} in any 60 s window (limit 600), used ${(100 * inWindow / (600 * (PACING_SECONDS - 1) / 60)).toFixed(1)}% of the allowance`)
}

clearInterval(sampler)
if (vacuumWarning !== null) console.log(`  warning: ${vacuumWarning}`)
console.log(`  machine: ${machine()}, load average ${os.loadavg().map((l) => l.toFixed(1)).join(" ")}`)
console.log(`broadcast bench (${N} recipients, ${channels.length} channels selected; recipients land on the first channel of each of ${types.length} account types)`)
console.log(`  engine: ${engineRate.toFixed(0)} recipients/s (${seconds.toFixed(1)} s), ${((w1 - w0) / N).toFixed(1)} PostgreSQL row writes per recipient`)
console.log(`  template run of the same size on one business channel: ${templateRate.toFixed(0)} recipients/s (${templateSeconds.toFixed(1)} s); template / text = ${(templateRate / engineRate).toFixed(2)}`)
console.log(`  bare loop, recipient rows only (claim, outcome): ${bareRate.toFixed(0)} recipients/s; engine / bare = ${(engineRate / bareRate).toFixed(2)}`)
console.log(`  bare loop, the engine's statements (claim, Send.many, outcome), one batch at a time: ${sameRate.toFixed(0)} recipients/s; engine / bare = ${(engineRate / sameRate).toFixed(2)}`)
console.log(`  RSS: ${(rssBefore / 1e6).toFixed(0)} MB before the run, peak during the run ${(enginePeakRss / 1e6).toFixed(0)} MB (growth ${((enginePeakRss - rssBefore) / 1e6).toFixed(0)} MB)`)
for (const line of pacing) console.log(`  pacing ${line}`)
recordResults("broadcast", { title: `Broadcast of ${N} recipients: recipients final per second over the run`, x: "seconds since the run started", y: "recipients/s" }, { "recipients/s": (await db("SELECT floor(extract(epoch FROM sent_at - $2::timestamptz))::int AS s, count(*)::int AS n FROM broadcast_recipients WHERE run_id = $1 GROUP BY 1 ORDER BY 1", [runId, started])).map((r) => [r.s, r.n]) }, { recipients: N, engineRate, seconds, templateRate, templateSeconds, bareRate, sameRate, rssGrowthMb: (enginePeakRss - rssBefore) / 1e6, pacing })
await server.close()
process.exit(0)
