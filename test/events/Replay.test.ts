import { assert, describe, it } from "@effect/vitest"
import { Context, Effect, Layer, PubSub } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { Events } from "../../src/events/Events.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const emit = (companyId: number, key: string, payload: unknown) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    return yield* sql.withTransaction(events.emit(companyId, key, payload))
  }))

const emitThenRollBack = (companyId: number, key: string, payload: unknown) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const events = yield* Events
    yield* sql.withTransaction(Effect.andThen(events.emit(companyId, key, payload), Effect.fail("rollback"))).pipe(
      Effect.ignore
    )
  }))

const replay = (token: string, query = "") => request(server, "GET", `/v1/events${query}`, { token })

interface Envelope {
  readonly id: string
  readonly seq: number
  readonly event: string
  readonly company_id: number
  readonly occurred_at: string
  readonly data: any
}

const seqs = (items: ReadonlyArray<Envelope>) => items.map((e) => e.seq)
const range = (from: number, count: number) => Array.from({ length: count }, (_, i) => from + i)

describe("GET /v1/events", () => {
  it("replays a company's committed events in order with gapless seq and the full envelope", async () => {
    const a = await createCompany(server)
    const base = (await replay(a.token)).body.data.next_after as number
    await emit(a.id, "contact.created", { id: 1 })
    await emitThenRollBack(a.id, "contact.deleted", { id: 1 })
    await emit(a.id, "contact.updated", { id: 1, name: "Ann" })
    await emit(a.id, "message.created", { id: 9, body: "hé \"quoted\"", user_id: a.admin.id })

    const res = await replay(a.token, `?after=${base}`)
    assert.strictEqual(res.status, 200)
    const items = res.body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(seqs(items), range(base + 1, 3))
    assert.deepStrictEqual(items.map((e) => e.event), ["contact.created", "contact.updated", "message.created"])
    assert.deepStrictEqual(items[2].data, { id: 9, body: "hé \"quoted\"", user_id: a.admin.id })
    const rows = await query<{ id: string; seq: string }>(server, "SELECT id, seq FROM events WHERE company_id = $1 AND seq > $2 ORDER BY seq", [a.id, base])
    assert.deepStrictEqual(items.map((e) => [e.id, e.seq]), rows.map((r) => [`evt_${r.id}`, Number(r.seq)]))
    for (const item of items) {
      assert.deepStrictEqual(Object.keys(item), ["id", "seq", "event", "company_id", "occurred_at", "data"])
      assert.strictEqual(item.company_id, a.id)
      assert.strictEqual(new Date(item.occurred_at).toISOString(), item.occurred_at)
    }
    assert.strictEqual(res.body.data.next_after, base + 3)
    assert.deepStrictEqual(res.body.data.pagination, { page: 1, perPage: 100, total: null, lastPage: null })
  })

  it("keeps seq gapless under concurrent writers", async () => {
    const a = await createCompany(server)
    const base = (await replay(a.token)).body.data.next_after as number
    await Promise.all(range(0, 20).map((i) => emit(a.id, "contact.created", { id: i })))
    const items = (await replay(a.token, `?after=${base}`)).body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(seqs(items), range(base + 1, 20))
    assert.sameMembers(items.map((e) => e.data.id), range(0, 20))
  })

  it("a numbering pass that waits for another's lock numbers only what that one left", async () => {
    const a = await createCompany(server)
    const base = (await replay(a.token)).body.data.next_after as number
    const seqOf = await server.runInApp(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const events = yield* Events
      // Committed and unnumbered, with no numbering pass asked for (what a runner that died leaves).
      yield* sql`INSERT INTO events (company_id, key, payload) SELECT ${a.id}, 'contact.updated', '{}'::jsonb FROM generate_series(1, 3)`
      // The first pass numbers them and keeps the counter locked (its transaction stays open); the second
      // starts meanwhile and has to wait. Having waited, it must see them numbered, not number them again.
      const first = sql.withTransaction(Effect.andThen(events.replay(a.id, 0, 1), Effect.sleep("400 millis")))
      const second = Effect.andThen(Effect.sleep("100 millis"), sql.withTransaction(events.replay(a.id, 0, 1)))
      yield* Effect.all([first, second], { concurrency: 2, discard: true })
      return yield* sql<{ seq: number }>`SELECT seq FROM events WHERE company_id = ${a.id} AND seq > ${base} ORDER BY id`
    }))
    assert.deepStrictEqual(seqOf.map((r) => Number(r.seq)), range(base + 1, 3))
    const items = (await replay(a.token, `?after=${base}`)).body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(seqs(items), range(base + 1, 3))
  })

  it("numbers a batch as it writes it: gapless among concurrent writers, each event delivered once in order here and on another runner, a rolled-back batch taking no number", async () => {
    const a = await createCompany(server)
    const crossNode = process.env.DATABASE_URL !== undefined
    const total = 40 + 10 + 25 + 20
    const base = ((await replay(a.token)).body.data.next_after as number) + (crossNode ? 1 : 0)
    const got = await server.runInApp(Effect.scoped(Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const here = yield* Events
      // A second runner's event service in this process (its own node id and LISTEN), in server mode.
      const other = crossNode ? Context.get(yield* Layer.build(Layer.fresh(Events.layer)), Events) : null
      const subHere = yield* here.subscribe
      const subOther = other === null ? null : yield* other.subscribe
      if (subOther !== null) {
        // Once the other runner has an event, it listens: what follows reaches it by notice, not by its start-up read.
        yield* sql.withTransaction(here.emit(a.id, "contact.created", { probe: true }))
        while (Number((yield* PubSub.take(subOther)).company_id) !== a.id);
      }
      const batch = (tag: string, n: number) => here.emitMany(a.id, range(0, n).map((i) => ({ key: "contact.updated", payload: { tag, i } })))
      yield* Effect.all([
        batch("b1", 40),
        ...range(0, 10).map((i) => sql.withTransaction(here.emit(a.id, "contact.created", { single: i }))),
        batch("b2", 25),
        sql.withTransaction(Effect.andThen(batch("rolled", 30), Effect.fail("rollback"))).pipe(Effect.ignore)
      ], { concurrency: "unbounded", discard: true })
      // Last and alone: nothing after it announces it to the other runner, only its own notice.
      yield* batch("b3", 20)
      const collect = (sub: PubSub.Subscription<Envelope>) =>
        Effect.gen(function*() {
          const out: Array<Envelope> = []
          while (out.length < total) {
            const event = yield* PubSub.take(sub)
            if (Number(event.company_id) === a.id && (event.data as { probe?: boolean }).probe !== true) out.push(event)
          }
          return out
        }).pipe(Effect.timeout("10 seconds"))
      return { here: yield* collect(subHere), other: subOther === null ? null : yield* collect(subOther) }
    }) as Effect.Effect<{ here: Array<Envelope>; other: Array<Envelope> | null }, unknown, never>))

    const items = (await replay(a.token, `?after=${base}&limit=200`)).body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(seqs(items), range(base + 1, total))
    assert.isFalse(items.some((e) => e.data.tag === "rolled"))
    // Each batch holds consecutive numbers, in its own order.
    for (const [tag, n] of [["b1", 40], ["b2", 25], ["b3", 20]] as const) {
      const own = items.filter((e) => e.data.tag === tag)
      assert.deepStrictEqual(own.map((e) => e.data.i), range(0, n))
      assert.deepStrictEqual(seqs(own), range(own[0].seq, n))
    }
    assert.sameMembers(items.filter((e) => e.event === "contact.created").map((e) => e.data.single), range(0, 10))
    // The same envelope live (batches numbered as written, single events by the sequencer) and replayed, ids included.
    const wire = (list: ReadonlyArray<Envelope>) => list.map((e) => [e.id, e.seq, e.event, e.occurred_at, e.data])
    assert.deepStrictEqual(wire(got.here), wire(items))
    if (got.other !== null) assert.deepStrictEqual(wire(got.other), wire(items))
  })

  it("pages with after and limit, and answers an empty page past the end", async () => {
    const a = await createCompany(server)
    const base = (await replay(a.token)).body.data.next_after as number
    for (let i = 0; i < 5; i++) await emit(a.id, "contact.created", { id: i })

    const first = await replay(a.token, `?after=${base}&limit=2`)
    assert.deepStrictEqual(seqs(first.body.data.items), range(base + 1, 2))
    assert.strictEqual(first.body.data.next_after, base + 2)
    assert.strictEqual(first.body.data.pagination.perPage, 2)

    const second = await replay(a.token, `?after=${first.body.data.next_after}&limit=2`)
    assert.deepStrictEqual(seqs(second.body.data.items), range(base + 3, 2))
    const third = await replay(a.token, `?after=${second.body.data.next_after}&limit=2`)
    assert.deepStrictEqual(seqs(third.body.data.items), [base + 5])

    const past = await replay(a.token, `?after=${base + 5}`)
    assert.deepStrictEqual(past.body.data.items, [])
    assert.strictEqual(past.body.data.next_after, base + 5)

    const max = await replay(a.token, "?limit=500")
    assert.strictEqual(max.status, 200)
  })

  it("rejects out-of-range limit and after with 422 field errors", async () => {
    const a = await createCompany(server)
    for (const query of ["?limit=0", "?limit=501", "?limit=abc", "?limit=1.5"]) {
      const res = await replay(a.token, query)
      assert.strictEqual(res.status, 422, query)
      assert.deepStrictEqual(Object.keys(res.body.errors), ["limit"], query)
    }
    for (const query of ["?after=-1", "?after=x"]) {
      const res = await replay(a.token, query)
      assert.strictEqual(res.status, 422, query)
      assert.deepStrictEqual(Object.keys(res.body.errors), ["after"], query)
    }
    assert.strictEqual((await request(server, "GET", "/v1/events")).status, 401)
  })

  it("never shows one company's events to another", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const bBase = (await replay(b.token)).body.data.next_after as number
    await emit(a.id, "contact.created", { secret: "A" })
    await emit(b.id, "contact.created", { mine: "B" })
    await emit(a.id, "contact.created", { secret: "A again" })

    const seen = (await replay(b.token, "?limit=500")).body.data.items as ReadonlyArray<Envelope>
    assert.isTrue(seen.every((e) => e.company_id === b.id))
    assert.isFalse(seen.some((e) => JSON.stringify(e.data).includes("secret")))
    const fresh = (await replay(b.token, `?after=${bBase}`)).body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(fresh.map((e) => e.data), [{ mine: "B" }])
    // Each company has its own sequence.
    assert.deepStrictEqual(seqs(fresh), [bBase + 1])
  })

  it("replays what the product emits: a token created through the API is api_token.created", async () => {
    const a = await createCompany(server)
    const base = (await replay(a.token)).body.data.next_after as number
    const created = await request(server, "POST", "/v1/api-tokens", { token: a.token, body: { name: "Replay probe" } })
    assert.strictEqual(created.status, 201)
    const items = (await replay(a.token, `?after=${base}`)).body.data.items as ReadonlyArray<Envelope>
    assert.deepStrictEqual(items.map((e) => [e.seq, e.event, e.data]), [
      [base + 1, "api_token.created", { id: created.body.data.id, name: "Replay probe" }]
    ])
  })

  it.live("numbers and delivers an event whose writer never asked for numbering (a runner that died after commit)", () =>
    Effect.gen(function*() {
      const a = yield* Effect.promise(() => createCompany(server))
      const base = (yield* Effect.promise(() => replay(a.token))).body.data.next_after as number
      const delivered = yield* Effect.promise(() =>
        server.runInApp(Effect.scoped(Effect.gen(function*() {
          const events = yield* Events
          const sql = yield* SqlClient.SqlClient
          const subscription = yield* events.subscribe
          // Straight into the table, as a commit whose process stopped before its after-commit step.
          yield* sql`INSERT INTO events (company_id, key, payload) VALUES (${a.id}, 'contact.created', '{"orphan":true}'::jsonb)`
          while (true) {
            const event = yield* PubSub.take(subscription).pipe(Effect.timeout("10 seconds"))
            if (event.company_id === a.id) return event
          }
        })).pipe(Effect.orDie))
      )
      assert.strictEqual(delivered.seq, base + 1)
      assert.deepStrictEqual(delivered.data, { orphan: true })
      const items = (yield* Effect.promise(() => replay(a.token, `?after=${base}`))).body.data.items as ReadonlyArray<Envelope>
      assert.deepStrictEqual(seqs(items), [base + 1])
    }), 20_000)
})
