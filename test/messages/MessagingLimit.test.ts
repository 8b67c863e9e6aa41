import { assert, describe, it, layer } from "@effect/vitest"
import { Clock, Effect, Layer } from "effect"
import { SqlClient } from "effect/sql"
import { TestClock } from "effect/testing"
import { CompanyId } from "../../src/auth/Domain.ts"
import { allot, limitOf, MessagingLimit, outlookOf } from "../../src/messages/MessagingLimit.ts"
import { AppConfig } from "../../src/platform/Config.ts"
import { MigrationsLayer } from "../../src/platform/Migrations.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"

describe("the messaging limit's arithmetic", () => {
  it("reads a positive whole limit from the settings, else none", () => {
    const cases: ReadonlyArray<[unknown, number | null]> = [[250, 250], [1, 1], [null, null], [undefined, null], [0, null], [-5, null], [2.5, null], ["250", null]]
    for (const [value, expected] of cases) assert.strictEqual(limitOf({ messaging_limit: value }), expected, String(value))
    assert.strictEqual(limitOf({}), null)
  })

  it("admits candidates up to what the last 24 hours leave, in order, each customer once", () => {
    const cases: ReadonlyArray<[limit: number, contacted: number, candidates: Array<number>, admitted: Array<number>, beyond: Array<number>]> = [
      [3, 0, [1, 2, 3, 4, 5], [1, 2, 3], [4, 5]],
      [3, 2, [1, 2, 3], [1], [2, 3]],
      [3, 3, [1, 2], [], [1, 2]],
      [3, 7, [1], [], [1]],
      [250, 10, [], [], []],
      [2, 0, [9, 9, 8, 7], [9, 8], [7]],
      [5, 1, [4, 3], [4, 3], []]
    ]
    for (const [limit, contacted, candidates, admitted, beyond] of cases) {
      assert.deepStrictEqual(allot(limit, contacted, candidates), { admitted, beyond }, JSON.stringify([limit, contacted, candidates]))
    }
  })

  it("shows the estimate's remaining and beyond", () => {
    const cases: ReadonlyArray<[limit: number, contacted: number, candidates: number, remaining: number, beyond: number]> = [
      [250, 0, 100, 250, 0],
      [250, 200, 100, 50, 50],
      [250, 300, 10, 0, 10],
      [1000, 0, 1000, 1000, 0]
    ]
    for (const [limit, contacted, candidates, remaining, beyond] of cases) {
      assert.deepStrictEqual(outlookOf(7, limit, contacted, candidates), { channel_id: 7, limit, contacted_last_24h: contacted, remaining, beyond })
    }
  })
})

/** A real database (PostgreSQL from DATABASE_URL, else PGlite) with time from TestClock. */
const Database = MigrationsLayer.pipe(
  Layer.provideMerge(SqlLayer),
  Layer.provide(AppConfig.layerWith(process.env.DATABASE_URL ? {} : { dataDir: "memory://" }))
)

const hour = 3_600_000

/** A company with a WhatsApp-type channel limited to `limit`, and `n` contacts each with an account of that type. */
const setup = (limit: number, n: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [company] = yield* sql<{ id: number }>`INSERT INTO companies (name) VALUES ('messaging limit') RETURNING id`
    const companyId = CompanyId.make(Number(company.id))
    const channel = yield* channelOf(companyId, limit)
    const contacts = yield* sql<{ id: number }>`
      INSERT INTO contacts (company_id, first_name) SELECT ${companyId}, 'C' || g FROM generate_series(1, ${n}) g RETURNING id`
    const accounts = yield* sql<{ id: number }>`
      INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id)
      SELECT ${companyId}, c, 'msgr_a_business', 'wa-' || c FROM unnest(${`{${contacts.map((c) => c.id).join(",")}}`}::bigint[]) c
      RETURNING id`
    return { companyId, channel, accounts: accounts.map((a) => Number(a.id)).sort((a, b) => a - b) }
  })

const channelOf = (companyId: CompanyId, limit: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [row] = yield* sql<{ id: number }>`
      INSERT INTO channels (company_id, type, provider, name, webhook_secret, settings)
      VALUES (${companyId}, 'msgr_a_business', 'sandbox', 'WA', 'secret', ${JSON.stringify({ messaging_limit: limit })}::jsonb) RETURNING id`
    return Number(row.id)
  })

/** The account's thread on the channel, its last inbound message at `at`: inside the window until 24 h after. */
const wroteAt = (companyId: CompanyId, channelId: number, accountId: number, at: Date) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const [conversation] = yield* sql<{ id: number }>`
      INSERT INTO conversations (company_id, contact_id)
      SELECT company_id, contact_id FROM contact_accounts WHERE id = ${accountId} RETURNING id`
    yield* sql`
      INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, external_thread_id, last_inbound_at)
      VALUES (${companyId}, ${conversation.id}, ${channelId}, ${accountId}, ${`wa-${accountId}`}, ${at})`
  })

const counted = (companyId: CompanyId, channelId: number) =>
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const rows = yield* sql<{ contact_account_id: number; contacted_at: Date }>`
      SELECT contact_account_id, contacted_at FROM messaging_limit_contacts
      WHERE company_id = ${companyId} AND channel_id = ${channelId} ORDER BY contact_account_id`
    return rows.map((r) => [Number(r.contact_account_id), r.contacted_at.getTime()])
  })

const sorted = (set: ReadonlySet<number>) => [...set].sort((a, b) => a - b)

layer(Database, { timeout: "120 seconds" })("the messaging limit of a channel", (it) => {
  it.effect("admits up to the limit outside the window, lets the window's customers pass uncounted, and rolls after 24 hours", () =>
    Effect.gen(function*() {
      const limits = yield* MessagingLimit
      yield* TestClock.adjust("2 days")
      const start = yield* Clock.currentTimeMillis
      const { companyId, channel, accounts } = yield* setup(3, 9)
      const [a1, a2, a3, a4, a5, inside, later1, later2, later3] = accounts
      yield* wroteAt(companyId, channel, inside, new Date(start - 23 * hour))

      const beyond = yield* limits.reserve(companyId, channel, [a1, a2, inside, a3, a4, a5])
      assert.deepStrictEqual(sorted(beyond), [a4, a5])
      assert.deepStrictEqual(yield* counted(companyId, channel), [[a1, start], [a2, start], [a3, start]])

      // Counted customers pass again within their 24 hours; newcomers are still beyond.
      yield* TestClock.adjust(23 * hour)
      assert.deepStrictEqual(sorted(yield* limits.reserve(companyId, channel, [a1, a2, a3, later1])), [later1])
      // The customer who wrote 23 h before the start is now outside the window: it counts, and nothing is left.
      assert.deepStrictEqual(sorted(yield* limits.reserve(companyId, channel, [inside])), [inside])

      yield* TestClock.adjust(hour)
      const rolled = yield* limits.reserve(companyId, channel, [later1, later2, later3, a4])
      assert.deepStrictEqual(sorted(rolled), [a4])
      const now = start + 24 * hour
      assert.deepStrictEqual(yield* counted(companyId, channel), [[a1, start], [a2, start], [a3, start], [later1, now], [later2, now], [later3, now]])
    }).pipe(Effect.provide(MessagingLimit.layer)))

  it.effect("counts a single send without refusing it, and shows the rest in the outlook", () =>
    Effect.gen(function*() {
      const limits = yield* MessagingLimit
      yield* TestClock.adjust("2 days")
      const { companyId, channel, accounts } = yield* setup(2, 5)
      yield* limits.record(companyId, channel, accounts[0])
      yield* limits.record(companyId, channel, accounts[0])
      yield* wroteAt(companyId, channel, accounts[1], new Date((yield* Clock.currentTimeMillis) - hour))
      const outlook = yield* limits.outlook(companyId, channel, accounts)
      assert.deepStrictEqual(outlook._tag === "Some" ? outlook.value : null, { channel_id: channel, limit: 2, contacted_last_24h: 1, remaining: 1, beyond: 2 })
      // Another company's view of the channel: no limit, nothing counted there.
      const [other] = yield* (yield* SqlClient.SqlClient)<{ id: number }>`INSERT INTO companies (name) VALUES ('other') RETURNING id`
      const otherId = CompanyId.make(Number(other.id))
      assert.strictEqual((yield* limits.outlook(otherId, channel, accounts))._tag, "None")
      assert.strictEqual((yield* limits.reserve(otherId, channel, accounts)).size, 0)
      assert.strictEqual((yield* counted(companyId, channel)).length, 1)
    }).pipe(Effect.provide(MessagingLimit.layer)))

  it.effect("reservations at once on one channel never admit more than the limit together", () =>
    Effect.gen(function*() {
      const limits = yield* MessagingLimit
      // A few rounds, each on a channel of its own: without the lock, one of them admits more than 5.
      for (let round = 0; round < 3; round++) {
        const { companyId, channel, accounts } = yield* setup(5, 24)
        const batches = [0, 1, 2, 3, 4, 5, 6, 7].map((k) => accounts.slice(k * 3, k * 3 + 3))
        const beyond = yield* Effect.forEach(batches, (batch) => limits.reserve(companyId, channel, batch), { concurrency: "unbounded" })
        const admitted = batches.flatMap((batch, k) => batch.filter((id) => !beyond[k].has(id)))
        assert.strictEqual(admitted.length, 5)
        assert.strictEqual(beyond.reduce((n, b) => n + b.size, 0), 19)
        assert.deepStrictEqual((yield* counted(companyId, channel)).map(([id]) => id), admitted.sort((a, b) => a - b))
      }
    }).pipe(Effect.provide(MessagingLimit.layer)))
})
