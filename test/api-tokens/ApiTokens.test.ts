import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { afterAll, beforeAll } from "vitest"
import { uniqueEmail } from "../support/Ids.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const tokenFields = ["abilities", "created_at", "description", "id", "last_used_at", "name", "updated_at"]

const create = async (token: string, body: unknown) => {
  const res = await request(server, "POST", "/v1/api-tokens", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data as { id: number; name: string; description: string; token: string }
}

const serviceAccountRows = (userId: number) =>
  server.runInApp(Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const users = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM users WHERE id = ${userId}`
    const memberships = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM memberships WHERE user_id = ${userId}`
    const tokens = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM api_tokens WHERE user_id = ${userId}`
    return { users: users[0].n, memberships: memberships[0].n, tokens: tokens[0].n }
  }))

const addUser = async (companyId: number, role: "admin" | "manager" | "agent") => {
  const email = uniqueEmail(role)
  const res = await request(server, "POST", `/platform/v1/companies/${companyId}/users`, {
    token: server.platformKey,
    body: { email, password: "password-123", name: role, role }
  })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return email
}

const mobileLogin = async (email: string, password = "password-123") => {
  const res = await request(server, "POST", "/v1/auth/mobile/login", { body: { email, password, device_name: "phone" } })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

describe("api tokens", () => {
  it("creates, lists, reads, renames and revokes a token", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Zapier", description: "orders sync" })
    assert.deepStrictEqual(Object.keys(created).sort(), [...tokenFields, "token"].sort())
    assert.strictEqual(created.name, "Zapier")
    assert.strictEqual(created.description, "orders sync")
    assert.match(created.token, new RegExp(`^${created.id}\\|[A-Za-z0-9]{40}$`))
    assert.deepStrictEqual((created as any).abilities, ["*"])
    assert.strictEqual((created as any).last_used_at, null)
    assert.ok(!Number.isNaN(Date.parse((created as any).created_at)))

    const list = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.strictEqual(list.status, 200)
    const names = list.body.data.map((t: any) => t.name)
    assert.deepStrictEqual(names, ["platform", "Zapier"])
    for (const item of list.body.data) assert.deepStrictEqual(Object.keys(item).sort(), tokenFields)

    const one = await request(server, "GET", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(one.status, 200)
    assert.deepStrictEqual(Object.keys(one.body.data).sort(), tokenFields)
    assert.strictEqual(one.body.data.name, "Zapier")

    const patched = await request(server, "PATCH", `/v1/api-tokens/${created.id}`, {
      token: company.token,
      body: { name: "Make.com" }
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.strictEqual(patched.body.data.name, "Make.com")
    assert.strictEqual(patched.body.data.description, "orders sync")
    assert.strictEqual(patched.body.data.token, undefined)
    const described = await request(server, "PATCH", `/v1/api-tokens/${created.id}`, {
      token: company.token,
      body: { description: "" }
    })
    assert.strictEqual(described.body.data.name, "Make.com")
    assert.strictEqual(described.body.data.description, "")
    const empty = await request(server, "PATCH", `/v1/api-tokens/${created.id}`, { token: company.token, body: {} })
    assert.strictEqual(empty.status, 200)
    assert.strictEqual(empty.body.data.name, "Make.com")

    const revoked = await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(revoked.status, 200)
    assert.deepStrictEqual(revoked.body, { data: { message: "Token revoked." } })
    const gone = await request(server, "GET", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(gone.status, 404)
    assert.deepStrictEqual(gone.body, { message: "Token not found." })
    const again = await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(again.status, 404)
    const after = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.deepStrictEqual(after.body.data.map((t: any) => t.name), ["platform"])
  })

  it("clears the revoked service account as the sender of its messages, and no one else's", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Sender" })
    const userId = (await request(server, "GET", "/v1/me", { token: created.token })).body.data.id as number
    const owner = (await request(server, "GET", "/v1/me", { token: company.token })).body.data.id as number
    /** A message row in the company, sent by `sender`. */
    const messageBy = (sender: number) =>
      server.runInApp(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [channel] = yield* sql<{ id: number }>`
          INSERT INTO channels (company_id, type, provider, name, webhook_secret) VALUES (${company.id}, 'msgr_a', 'sandbox', 'c', 's') RETURNING id`
        const [contact] = yield* sql<{ id: number }>`
          INSERT INTO contacts (company_id, first_name, display_name) VALUES (${company.id}, 'A', 'A') RETURNING id`
        const [conversation] = yield* sql<{ id: number }>`
          INSERT INTO conversations (company_id, contact_id) VALUES (${company.id}, ${contact.id}) RETURNING id`
        const [thread] = yield* sql<{ id: number }>`
          INSERT INTO threads (company_id, conversation_id, channel_id) VALUES (${company.id}, ${conversation.id}, ${channel.id}) RETURNING id`
        const [message] = yield* sql<{ id: number }>`
          INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, sender_user_id)
          VALUES (${company.id}, ${conversation.id}, ${thread.id}, ${channel.id}, 'outbound', 'hi', ${sender}) RETURNING id`
        return Number(message.id)
      }))
    const senderOf = (messageId: number) =>
      server.runInApp(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const [row] = yield* sql<{ sender_user_id: number | null }>`SELECT sender_user_id FROM messages WHERE id = ${messageId}`
        return row.sender_user_id === null ? null : Number(row.sender_user_id)
      }))
    const bySender = await messageBy(userId)
    const byOwner = await messageBy(owner)
    assert.strictEqual(await senderOf(bySender), userId)

    assert.strictEqual((await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })).status, 200)
    assert.strictEqual(await senderOf(bySender), null)
    assert.strictEqual(await senderOf(byOwner), owner)
  })

  it("defaults the description to an empty string", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "No description" })
    assert.strictEqual(created.description, "")
  })

  it("issues a working token for a new service account of the company", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Integration" })
    const mine = await request(server, "GET", "/v1/me", { token: company.token })
    const theirs = await request(server, "GET", "/v1/me", { token: created.token })
    assert.strictEqual(theirs.status, 200)
    assert.notStrictEqual(theirs.body.data.id, mine.body.data.id)
    assert.strictEqual(theirs.body.data.is_service_account, true)
    assert.strictEqual(theirs.body.data.name, "Integration")
    assert.strictEqual(theirs.body.data.current_company_id, company.id)
    assert.deepStrictEqual(theirs.body.data.roles, ["admin"])

    // The new token manages the same company's tokens and saw its own use.
    const list = await request(server, "GET", "/v1/api-tokens", { token: created.token })
    assert.deepStrictEqual(list.body.data.map((t: any) => t.id), [Number(company.token.split("|")[0]), created.id])
    // last_used_at is written in the background after authentication.
    let seen = null
    for (let i = 0; i < 40 && seen === null; i++) {
      const res = await request(server, "GET", `/v1/api-tokens/${created.id}`, { token: company.token })
      seen = res.body.data.last_used_at
      if (seen === null) await new Promise((resolve) => setTimeout(resolve, 25))
    }
    assert.ok(seen !== null && !Number.isNaN(Date.parse(seen)))
  })

  it("never shows the plaintext again", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Once" })
    const secret = created.token.split("|")[1]
    const list = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    const one = await request(server, "GET", `/v1/api-tokens/${created.id}`, { token: company.token })
    const patched = await request(server, "PATCH", `/v1/api-tokens/${created.id}`, { token: company.token, body: { name: "x" } })
    for (const res of [list, one, patched]) {
      assert.ok(!JSON.stringify(res.body).includes(secret))
      assert.ok(!JSON.stringify(res.body).includes('"token"'))
    }
  })

  it("revokes at once and removes the service account with its tokens and membership", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Doomed" })
    const me = await request(server, "GET", "/v1/me", { token: created.token })
    assert.strictEqual(me.status, 200)
    const userId = me.body.data.id as number
    assert.deepStrictEqual(await serviceAccountRows(userId), { users: 1, memberships: 1, tokens: 1 })

    const revoked = await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(revoked.status, 200)
    const after = await request(server, "GET", "/v1/me", { token: created.token })
    assert.strictEqual(after.status, 401)
    assert.deepStrictEqual(after.body, { message: "Unauthenticated." })
    assert.deepStrictEqual(await serviceAccountRows(userId), { users: 0, memberships: 0, tokens: 0 })
    // The caller's own account is untouched.
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: company.token })).status, 200)
  })

  it("lets a token revoke itself; the next call is 401", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Self" })
    const revoked = await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: created.token })
    assert.strictEqual(revoked.status, 200)
    assert.deepStrictEqual(revoked.body, { data: { message: "Token revoked." } })
    const next = await request(server, "GET", "/v1/api-tokens", { token: created.token })
    assert.strictEqual(next.status, 401)
  })

  it("emits api_token.created and api_token.deleted without the secret", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Evented" })
    await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })
    const events = await request(server, "GET", "/v1/events", { token: company.token })
    assert.strictEqual(events.status, 200)
    const mine = events.body.data.items.filter((e: any) => e.event.startsWith("api_token."))
    assert.deepStrictEqual(mine.map((e: any) => [e.event, e.data]), [
      ["api_token.created", { id: created.id, name: "Evented" }],
      ["api_token.deleted", { id: created.id, name: "Evented" }]
    ])
    assert.ok(!JSON.stringify(events.body).includes(created.token.split("|")[1]))
  })

  it("gates the api feature with the exact 403 body on a free plan", async () => {
    const company = await createCompany(server, { plan: "free" })
    const feature = { message: "Your plan does not include the api feature.", error: "feature_not_available", feature: "api", required_plan: "business" }
    const post = await request(server, "POST", "/v1/api-tokens", { token: company.token, body: { name: "x" } })
    assert.strictEqual(post.status, 403)
    assert.deepStrictEqual(post.body, feature)
    const list = await request(server, "GET", "/v1/api-tokens", { token: company.token })
    assert.strictEqual(list.status, 403)
    assert.deepStrictEqual(list.body, feature)
    const [tokenId] = company.token.split("|")
    const get = await request(server, "GET", `/v1/api-tokens/${tokenId}`, { token: company.token })
    assert.deepStrictEqual([get.status, get.body], [403, feature])
    const patch = await request(server, "PATCH", `/v1/api-tokens/${tokenId}`, { token: company.token, body: { name: "y" } })
    assert.deepStrictEqual([patch.status, patch.body], [403, feature])
    // The existing platform token still authenticates elsewhere.
    const me = await request(server, "GET", "/v1/me", { token: company.token })
    assert.strictEqual(me.status, 200)
  })

  it("still lets a company without the api feature revoke a token", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Before downgrade" })
    const downgrade = await request(server, "PATCH", `/platform/v1/companies/${company.id}`, {
      token: server.platformKey,
      body: { plan: "free" }
    })
    assert.strictEqual(downgrade.status, 200)
    const revoked = await request(server, "DELETE", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(revoked.status, 200)
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: created.token })).status, 401)
  })

  it("keeps companies apart: another company's token id is 404 and never listed", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const secretOfA = await create(a.token, { name: "A's integration" })
    for (const [method, body] of [["GET", undefined], ["PATCH", { name: "stolen" }], ["DELETE", undefined]] as const) {
      const res = await request(server, method, `/v1/api-tokens/${secretOfA.id}`, { token: b.token, body })
      assert.strictEqual(res.status, 404, method)
      assert.deepStrictEqual(res.body, { message: "Token not found." })
    }
    const list = await request(server, "GET", "/v1/api-tokens", { token: b.token })
    assert.deepStrictEqual(list.body.data.map((t: any) => t.id), [Number(b.token.split("|")[0])])
    const still = await request(server, "GET", `/v1/api-tokens/${secretOfA.id}`, { token: a.token })
    assert.strictEqual(still.body.data.name, "A's integration")
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: secretOfA.token })).status, 200)
  })

  it("never lists or reveals a person's mobile token", async () => {
    const company = await createCompany(server)
    const mobile = await mobileLogin(company.admin.email)
    const mobileId = mobile.split("|")[0]
    const viaMobile = await request(server, "GET", "/v1/api-tokens", { token: mobile })
    assert.strictEqual(viaMobile.status, 200)
    assert.deepStrictEqual(viaMobile.body.data.map((t: any) => t.name), ["platform"])
    for (const method of ["GET", "PATCH", "DELETE"] as const) {
      const res = await request(server, method, `/v1/api-tokens/${mobileId}`, {
        token: company.token,
        body: method === "PATCH" ? { name: "x" } : undefined
      })
      assert.strictEqual(res.status, 404, method)
    }
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: mobile })).status, 200)
  })

  it("needs api_token.* permissions: an agent is refused, a manager may only read", async () => {
    const company = await createCompany(server)
    const [platformId] = company.token.split("|")
    const agent = await mobileLogin(await addUser(company.id, "agent"))
    const manager = await mobileLogin(await addUser(company.id, "manager"))
    const refused = { message: "This action is unauthorized." }
    const cases = [
      ["GET", "/v1/api-tokens", undefined],
      ["POST", "/v1/api-tokens", { name: "x" }],
      ["GET", `/v1/api-tokens/${platformId}`, undefined],
      ["PATCH", `/v1/api-tokens/${platformId}`, { name: "x" }],
      ["DELETE", `/v1/api-tokens/${platformId}`, undefined]
    ] as const
    for (const [method, path, body] of cases) {
      const res = await request(server, method, path, { token: agent, body })
      assert.deepStrictEqual([res.status, res.body], [403, refused], `agent ${method} ${path}`)
    }
    const reads = await request(server, "GET", "/v1/api-tokens", { token: manager })
    assert.strictEqual(reads.status, 200)
    for (const [method, path, body] of cases.slice(1)) {
      if (method === "GET") continue
      const res = await request(server, method, path, { token: manager, body })
      assert.deepStrictEqual([res.status, res.body], [403, refused], `manager ${method} ${path}`)
    }
    assert.strictEqual((await request(server, "GET", "/v1/me", { token: company.token })).status, 200)
  })

  it("answers bad input with 422 field errors and odd ids without a 500", async () => {
    const company = await createCompany(server)
    const created = await create(company.token, { name: "Target" })
    const bad: Array<[string, string, { body?: unknown; raw?: string }, string]> = [
      ["POST", "/v1/api-tokens", { raw: "{not json" }, "body"],
      ["POST", "/v1/api-tokens", { body: [] }, "body"],
      ["POST", "/v1/api-tokens", { body: {} }, "name"],
      ["POST", "/v1/api-tokens", { body: { name: "" } }, "name"],
      ["POST", "/v1/api-tokens", { body: { name: "   " } }, "name"],
      ["POST", "/v1/api-tokens", { body: { name: 5 } }, "name"],
      ["POST", "/v1/api-tokens", { body: { name: "x".repeat(256) } }, "name"],
      ["POST", "/v1/api-tokens", { body: { name: "ok", description: "x".repeat(1001) } }, "description"],
      ["PATCH", `/v1/api-tokens/${created.id}`, { body: { name: 7 } }, "name"],
      ["PATCH", `/v1/api-tokens/${created.id}`, { body: { name: "" } }, "name"],
      ["PATCH", `/v1/api-tokens/${created.id}`, { raw: "nope" }, "body"]
    ]
    for (const [method, path, options, field] of bad) {
      const res = await request(server, method, path, { token: company.token, ...options })
      if (options.raw !== undefined) {
        // Malformed JSON is 400 {message}, not a field error.
        assert.deepStrictEqual([res.status, res.body], [400, { message: "The request body must be valid JSON." }])
        continue
      }
      assert.strictEqual(res.status, 422, `${method} ${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
      assert.strictEqual(typeof res.body.message, "string")
      assert.ok(Array.isArray(res.body.errors[field]), `${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
    }
    const max = await create(company.token, { name: "x".repeat(255), description: "d".repeat(1000) })
    assert.strictEqual(max.name.length, 255)

    for (const id of ["abc", "1.5", "99999999999999999999", "-1", "0", "1e3"]) {
      for (const method of ["GET", "PATCH", "DELETE"] as const) {
        const res = await request(server, method, `/v1/api-tokens/${id}`, {
          token: company.token,
          body: method === "PATCH" ? { name: "x" } : undefined
        })
        assert.ok(res.status === 404 || res.status === 422, `${method} ${id} -> ${res.status} ${JSON.stringify(res.body)}`)
        assert.strictEqual(typeof res.body.message, "string")
      }
    }
    const untouched = await request(server, "GET", `/v1/api-tokens/${created.id}`, { token: company.token })
    assert.strictEqual(untouched.body.data.name, "Target")
  })

  it("needs a credential", async () => {
    const res = await request(server, "GET", "/v1/api-tokens")
    assert.deepStrictEqual([res.status, res.body], [401, { message: "Unauthenticated." }])
    const post = await request(server, "POST", "/v1/api-tokens", { body: { name: "x" } })
    assert.strictEqual(post.status, 401)
  })
})
