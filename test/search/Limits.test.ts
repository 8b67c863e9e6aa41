import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { CompanyId } from "../../src/auth/Domain.ts"
import { SearchRepo } from "../../src/search/Repo.ts"
import { cookieHeader, mobileLogin, setCookies } from "../auth/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { seedChannel, seedConversation, seedMessage, uniqueWord } from "./seed.ts"

const heavyLimit = 3
const countCap = 3

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ heavyRateLimitPerMinute: heavyLimit, searchCountCap: countCap })
})
afterAll(() => server?.close())

const search = (auth: { readonly token?: string; readonly cookie?: string }, q: string, extra = "") =>
  request(server, "GET", `/v1/messages/search?q=${encodeURIComponent(q)}${extra}`, {
    ...(auth.token === undefined ? {} : { token: auth.token }),
    headers: auth.cookie === undefined ? {} : { cookie: auth.cookie }
  })

const sessionCookie = async (email: string, password: string) => {
  const csrf = await request(server, "GET", "/sanctum/csrf-cookie")
  const xsrf = setCookies(csrf).get("XSRF-TOKEN")!.value
  const login = await request(server, "POST", "/v1/auth/login", {
    body: { email, password },
    headers: { cookie: cookieHeader({ "XSRF-TOKEN": xsrf }), "x-xsrf-token": xsrf }
  })
  assert.strictEqual(login.status, 200, JSON.stringify(login.body))
  return cookieHeader({ crm_session: setCookies(login).get("crm_session")!.value })
}

describe("heavy-route throttle", () => {
  it("answers 429 with retry_after and Retry-After past the limit, per token", async () => {
    const company = await createCompany(server)
    for (let i = 0; i < heavyLimit; i++) assert.strictEqual((await search({ token: company.token }, "hello")).status, 200)
    const limited = await search({ token: company.token }, "hello")
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.ok(Number.isInteger(limited.body.retry_after) && limited.body.retry_after >= 1 && limited.body.retry_after <= 60)
    assert.strictEqual(limited.headers.get("retry-after"), String(limited.body.retry_after))

    const other = await mobileLogin(server, company.admin.email, company.admin.password)
    assert.strictEqual((await search({ token: other.body.data.token }, "hello")).status, 200, "another token has its own bucket")
    const stranger = await createCompany(server)
    assert.strictEqual((await search({ token: stranger.token }, "hello")).status, 200, "another company is untouched")
  })

  it("counts a session user's requests together across sessions", async () => {
    const company = await createCompany(server)
    const first = await sessionCookie(company.admin.email, company.admin.password)
    const second = await sessionCookie(company.admin.email, company.admin.password)
    for (let i = 0; i < heavyLimit; i++) {
      assert.strictEqual((await search({ cookie: i % 2 === 0 ? first : second }, "hello")).status, 200)
    }
    assert.strictEqual((await search({ cookie: second }, "hello")).status, 429)
    assert.strictEqual((await search({ token: company.token }, "hello")).status, 200, "the service token is another bucket")
  })

  it("is one budget for search and around, at the configured limit", async () => {
    const company = await createCompany(server)
    const channelId = await seedChannel(server, company.id)
    const thread = await seedConversation(server, company.id, channelId)
    const messageId = await seedMessage(server, company.id, thread, "anchor")
    const around = () => request(server, "GET", `/v1/messages/${messageId}/around?limit=1`, { token: company.token })
    assert.strictEqual((await around()).status, 200)
    for (let i = 1; i < heavyLimit; i++) assert.strictEqual((await search({ token: company.token }, "anchor")).status, 200)
    const limited = await around()
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.headers.get("retry-after"), String(limited.body.retry_after))
    assert.strictEqual((await search({ token: company.token }, "anchor")).status, 429)
  })

  it("does not spend the budget on a request that fails authentication", async () => {
    const company = await createCompany(server)
    for (let i = 0; i < heavyLimit + 2; i++) {
      assert.strictEqual((await search({ token: `${company.token}x` }, "hello")).status, 401)
    }
    assert.strictEqual((await search({ token: company.token }, "hello")).status, 200)
  })
})

describe("match count", () => {
  it("is exact below the cap and a lower bound at it that keeps the next page reachable", async () => {
    const company = await createCompany(server)
    const channelId = await seedChannel(server, company.id)
    const thread = await seedConversation(server, company.id, channelId)
    const word = uniqueWord()
    for (let i = 0; i < 12; i++) await seedMessage(server, company.id, thread, `${word} number ${i}`)
    const tokens = [company.token, (await mobileLogin(server, company.admin.email, company.admin.password)).body.data.token]
    const page = (n: number) => search({ token: tokens[n % 2] }, word, `&perPage=5&page=${n}`)

    const first = await page(1)
    assert.strictEqual(first.body.data.items.length, 5)
    assert.deepStrictEqual(first.body.data.pagination, { page: 1, perPage: 5, total: 6, lastPage: 2 })
    assert.strictEqual(first.body.data.total_matches, 6)
    const second = await page(2)
    assert.strictEqual(second.body.data.items.length, 5)
    assert.strictEqual(second.body.data.total_matches, 11)
    const last = await page(3)
    assert.strictEqual(last.body.data.items.length, 2)
    assert.deepStrictEqual(last.body.data.pagination, { page: 3, perPage: 5, total: 12, lastPage: 3 })
    assert.strictEqual(last.body.data.total_matches, 12)
  })
})

describe("search statements", () => {
  const request = (q: string) => ({
    q,
    conversationId: undefined,
    visible: "all" as const,
    perPage: 20,
    offset: 0,
    countCap: 1000,
    timeoutMs: 2000
  })

  it("run under a transaction-local statement timeout and custom-plan mode", async () => {
    const [inside, after] = await server.runInApp(Effect.gen(function*() {
      const repo = yield* SearchRepo
      const sql = yield* SqlClient.SqlClient
      const settings = sql<{ t: string; m: string }>`
        SELECT current_setting('statement_timeout') AS t, current_setting('plan_cache_mode') AS m`
      return [yield* repo.bounded(1234, settings), yield* settings] as const
    }).pipe(Effect.provide(SearchRepo.layer), Effect.orDie))
    assert.deepStrictEqual(inside[0], { t: "1234ms", m: "force_custom_plan" })
    assert.deepStrictEqual(after[0], { t: "0", m: "auto" })
  })

  it("are never prepared as named statements, so no generic plan can be cached for them", async () => {
    const company = await createCompany(server)
    const named = await server.runInApp(Effect.gen(function*() {
      const repo = yield* SearchRepo
      const sql = yield* SqlClient.SqlClient
      const marker = "search_keys @>"
      const prepared = sql<{ statement: string; generic_plans: number; custom_plans: number }>`
        SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements WHERE strpos(statement, ${marker}) > 0`
      // One transaction pins one connection: prepared statements are per connection.
      return yield* Effect.gen(function*() {
        for (const q of ["hello", "заказ доставка", "ab"]) yield* repo.search(CompanyId.make(company.id), request(q))
        yield* repo.search(CompanyId.make(company.id), { ...request("hello"), perPage: 5, offset: 5 })
        const afterSearch = yield* prepared
        // The control: the same page statement through the default (prepared) path shows up.
        const [text, params] = repo.statement(CompanyId.make(company.id), request("hello"))
        yield* sql.unsafe(text, params as Array<unknown>)
        return { afterSearch, afterPrepared: yield* prepared }
      }).pipe(sql.withTransaction)
    }).pipe(Effect.provide(SearchRepo.layer), Effect.orDie))
    assert.deepStrictEqual(named.afterSearch, [])
    assert.strictEqual(named.afterPrepared.length, 1, "the check sees a prepared search statement")
  })

  it("plan the page with the actual values: the tenant's keys appear as constants", async () => {
    const company = await createCompany(server)
    const word = uniqueWord()
    const plan = await server.runInApp(Effect.gen(function*() {
      const repo = yield* SearchRepo
      const sql = yield* SqlClient.SqlClient
      const [text, params] = repo.statement(CompanyId.make(company.id), request(word))
      return yield* repo.bounded(2000, sql.unsafe<{ "QUERY PLAN": string }>(`EXPLAIN ${text}`, params as Array<unknown>).unprepared)
    }).pipe(Effect.provide(SearchRepo.layer), Effect.orDie))
    const text = plan.map((row) => row["QUERY PLAN"]).join("\n")
    assert.include(text, `${company.id}:${word}`)
    // A generic plan would compare with parameters (`company_id = $1`); InitPlan outputs are fine.
    assert.notMatch(text, /(?:=|@>|<|>)\s*\(?\$\d/)
  })
})
