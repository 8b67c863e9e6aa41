import { assert } from "@effect/vitest"
import { query } from "../support/Sql.ts"
import { Effect, Redacted } from "effect"
import { PgClient } from "@effect/sql-pg"
import { SqlClient } from "effect/sql"
import { request, type RunningServer, type TestServer } from "../support/TestServer.ts"

/** Raw SQL on the app's database: through a running in-process app, or a client of its own (spawned servers). */
export type Query = (text: string, params?: ReadonlyArray<unknown>) => Promise<Array<any>>
export const queryOf = (server: RunningServer): Query => (text, params) => query(server, text, params).then((rows) => [...rows])

export const createChannel = async (db: Query, companyId: number, options: { type?: string; name?: string; settings?: Record<string, unknown> } = {}) =>
  (await db(
    "INSERT INTO channels (company_id, type, provider, name, webhook_secret, settings) VALUES ($1, $2, 'sandbox', $3, 'secret', $4::jsonb) RETURNING id",
    [companyId, options.type ?? "msgr_b", options.name ?? "Bot", JSON.stringify(options.settings ?? {})]
  ))[0].id as number

/**
 * `n` contacts tagged with a fresh tag, each with an account of `channelType` (unless `noAccount`),
 * and a segment of that tag. Returns the segment id and the contact ids in creation order.
 */
export const audience = async (
  server: TestServer,
  db: Query,
  company: { id: number; token: string },
  n: number,
  options: { channelTypes?: ReadonlyArray<string>; firstName?: string } = {}
) => {
  const tag = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: `t${Math.random().toString(36).slice(2, 10)}` } })
  assert.strictEqual(tag.status, 201, JSON.stringify(tag.body))
  const tagId = tag.body.data.id as number
  const contacts = await db(
    `INSERT INTO contacts (company_id, first_name, display_name)
     SELECT $1, $3 || g, $3 || g FROM generate_series(1, $2) g RETURNING id`,
    [company.id, n, options.firstName ?? "Ann"]
  )
  const ids = contacts.map((c) => Number(c.id)).sort((a, b) => a - b)
  await db(`INSERT INTO contact_tags (company_id, contact_id, tag_id) SELECT $1, unnest($2::bigint[]), $3`, [company.id, ids, tagId])
  for (const type of options.channelTypes ?? ["msgr_b"]) {
    await db(
      `INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id)
       SELECT $1, id, $3, $3 || '-' || id FROM unnest($2::bigint[]) AS id`,
      [company.id, ids, type]
    )
  }
  // Fresh bulk rows: without statistics the planner picks nested loops over thousands of rows.
  if (n >= 1000) await db("ANALYZE contacts, contact_tags, contact_accounts")
  const segment = await request(server, "POST", "/v1/segments", {
    token: company.token,
    body: { name: `Seg ${tagId}`, conditions: [{ group: 1, type: "tag", operator: "has_any", value: [tagId] }], group_logic: "and" }
  })
  assert.strictEqual(segment.status, 201, JSON.stringify(segment.body))
  return { segmentId: String(segment.body.data.id), contactIds: ids, tagId }
}

export const broadcastBody = (segmentId: string, channelIds: ReadonlyArray<number>, overrides: Record<string, unknown> = {}) => ({
  name: "Spring sale",
  audience: { segmentId },
  channels: { mode: "specific", channelIds },
  content: { channels: channelIds.map((channelId) => ({ type: "text", channelId, text: "Hi {{first_name}}" })) },
  schedule: { mode: "now" },
  ...overrides
})

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** Polls `GET /v1/broadcasts/{id}` until `done` holds (or fails after `timeoutMs`). */
export const waitFor = async (
  server: TestServer,
  token: string,
  id: number,
  done: (broadcast: any) => boolean,
  timeoutMs = 20_000
) => {
  const deadline = Date.now() + timeoutMs
  let last: any
  while (Date.now() < deadline) {
    const res = await request(server, "GET", `/v1/broadcasts/${id}`, { token })
    last = res.body
    if (res.status === 200 && done(res.body.data)) return res.body.data
    await sleep(150)
  }
  throw new Error(`timed out waiting for broadcast ${id}: ${JSON.stringify(last)}`)
}

export const recipientsOf = (db: Query, broadcastId: number): Promise<Array<{ id: number; contact_id: number; channel_id: number; status: string; error_message: string | null; variant_key: string | null; sent_at: Date | null; message_id: number | null }>> =>
  db(
    "SELECT id, contact_id, channel_id, status, error_message, variant_key, sent_at, message_id FROM broadcast_recipients WHERE broadcast_id = $1 ORDER BY run_id, contact_id",
    [broadcastId]
  )

/** A SQL client of its own on `url` (for servers in child processes); `close` ends it. */
export const pgQuery = (url: string) => {
  const layer = PgClient.layer({ url: Redacted.make(url), maxConnections: 2 })
  const db: Query = (text, params = []) =>
    Effect.runPromise(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql.unsafe<Record<string, unknown>>(text, params as Array<unknown>)
      return rows.map((row) => Object.fromEntries(Object.entries(row).map(([k, v]) => [k, typeof v === "bigint" ? Number(v) : v])))
    }).pipe(Effect.provide(layer), Effect.orDie))
  return db
}
