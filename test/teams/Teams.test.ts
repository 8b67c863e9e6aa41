import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll } from "vitest"
import { ChannelAccess } from "../../src/auth/ChannelAccess.ts"
import type { Actor, CompanyId, UserId } from "../../src/auth/Domain.ts"
import { rolePermissions } from "../../src/auth/Permissions.ts"
import { accountOf, addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const teamFields = ["channel_access", "company_id", "created_at", "description", "id", "member_ids", "name", "updated_at"]

const login = async (email: string) => {
  const res = await mobileLogin(server, email, "password-123")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

const channel = async (companyId: number, name = "Main") => {
  const [row] = await query<{ id: number }>(
    server,
    `INSERT INTO channels (company_id, type, provider, name, webhook_secret)
     VALUES ($1, 'msgr_b', 'sandbox', $2, 'secret') RETURNING id`,
    [companyId, name]
  )
  return Number(row.id)
}

const create = async (token: string, body: unknown) => {
  const res = await request(server, "POST", "/v1/teams", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data.team
}

describe("teams", () => {
  it("creates, lists, reads, updates and deletes a team", async () => {
    const company = await createCompany(server)
    const c1 = await channel(company.id, "One")
    const c2 = await channel(company.id, "Two")
    const agent = await addUser(server, company.id, { role: "agent" })

    const res = await request(server, "POST", "/v1/teams", {
      token: company.token,
      body: {
        name: "Support",
        description: "First line",
        channel_access_mode: "custom",
        channel_ids: [c2, c1, c2],
        member_ids: [agent.id, company.admin.id]
      }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Team created.")
    const team = res.body.data.team
    assert.deepStrictEqual(Object.keys(team).sort(), teamFields)
    assert.strictEqual(team.company_id, company.id)
    assert.strictEqual(team.name, "Support")
    assert.strictEqual(team.description, "First line")
    assert.deepStrictEqual(team.channel_access, { mode: "custom", channel_ids: [c1, c2] })
    assert.deepStrictEqual(team.member_ids, [company.admin.id, agent.id].sort((a, b) => a - b))
    assert.ok(!Number.isNaN(Date.parse(team.created_at)))

    const list = await request(server, "GET", "/v1/teams", { token: company.token })
    assert.deepStrictEqual([list.status, list.body], [200, { data: [team] }])
    const one = await request(server, "GET", `/v1/teams/${team.id}`, { token: company.token })
    assert.deepStrictEqual([one.status, one.body], [200, { data: team }])

    const renamed = await request(server, "PATCH", `/v1/teams/${team.id}`, { token: company.token, body: { name: "Tier 1" } })
    assert.strictEqual(renamed.status, 200, JSON.stringify(renamed.body))
    assert.strictEqual(renamed.body.data.name, "Tier 1")
    assert.strictEqual(renamed.body.data.description, "First line")
    assert.deepStrictEqual(renamed.body.data.channel_access, team.channel_access)
    assert.deepStrictEqual(renamed.body.data.member_ids, team.member_ids)

    const replaced = await request(server, "PATCH", `/v1/teams/${team.id}`, {
      token: company.token,
      body: { channel_ids: [c2], member_ids: [], description: null, channel_access_mode: "all" }
    })
    assert.strictEqual(replaced.status, 200, JSON.stringify(replaced.body))
    assert.deepStrictEqual(replaced.body.data.channel_access, { mode: "all", channel_ids: [c2] })
    assert.deepStrictEqual(replaced.body.data.member_ids, [])
    assert.strictEqual(replaced.body.data.description, "")
    assert.ok(Date.parse(replaced.body.data.updated_at) >= Date.parse(team.updated_at))

    const deleted = await request(server, "DELETE", `/v1/teams/${team.id}`, { token: company.token })
    assert.deepStrictEqual([deleted.status, deleted.body], [200, { data: { message: "Team deleted." } }])
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const gone = await request(server, method, `/v1/teams/${team.id}`, { token: company.token, body: method === "PATCH" ? {} : undefined })
      assert.deepStrictEqual([gone.status, gone.body], [404, { message: "Team not found." }], method)
    }
    const rows = await query(server, "SELECT count(*)::int AS n FROM team_channels WHERE team_id = $1", [team.id])
    assert.strictEqual(rows[0].n, 0)
  })

  it("defaults to custom access with no channels or members and emits team events", async () => {
    const company = await createCompany(server)
    const team = await create(company.token, { name: "Empty" })
    assert.deepStrictEqual(team.channel_access, { mode: "custom", channel_ids: [] })
    assert.deepStrictEqual(team.member_ids, [])
    assert.strictEqual(team.description, "")
    await request(server, "PATCH", `/v1/teams/${team.id}`, { token: company.token, body: { name: "Renamed" } })
    await request(server, "DELETE", `/v1/teams/${team.id}`, { token: company.token })
    const events = await query(server, "SELECT key, payload FROM events WHERE company_id = $1 AND key LIKE 'team.%' ORDER BY seq", [company.id])
    assert.deepStrictEqual(events.map((e: any) => e.key), ["team.created", "team.updated", "team.deleted"])
    assert.strictEqual(events[1].payload.name, "Renamed")
    assert.deepStrictEqual(events[2].payload, { id: team.id })
  })

  it("answers 422 on the offending index for channels and members that are not the company's", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const mine = await channel(company.id)
    const foreignChannel = await channel(other.id)
    const deletedChannel = await channel(company.id, "Old")
    await query(server, "UPDATE channels SET deleted_at = now() WHERE id = $1", [deletedChannel])
    const foreignUser = await addUser(server, other.id, { role: "agent" })
    const service = (await request(server, "GET", "/v1/me", { token: company.token })).body.data.id as number

    const res = await request(server, "POST", "/v1/teams", {
      token: company.token,
      body: {
        name: "Mixed",
        channel_ids: [mine, foreignChannel, deletedChannel, 99_999_999],
        member_ids: [company.admin.id, foreignUser.id, service]
      }
    })
    assert.strictEqual(res.status, 422, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.errors, {
      "channel_ids.1": ["The selected channel_ids.1 is invalid."],
      "channel_ids.2": ["The selected channel_ids.2 is invalid."],
      "channel_ids.3": ["The selected channel_ids.3 is invalid."],
      "member_ids.1": ["The selected member_ids.1 is invalid."],
      "member_ids.2": ["The selected member_ids.2 is invalid."]
    })
    assert.strictEqual(res.body.message, "The selected channel_ids.1 is invalid. (and 4 more errors)")
    const none = await request(server, "GET", "/v1/teams", { token: company.token })
    assert.deepStrictEqual(none.body.data, [], "nothing was created")

    const team = await create(company.token, { name: "Ok", channel_ids: [mine] })
    const patch = await request(server, "PATCH", `/v1/teams/${team.id}`, {
      token: company.token,
      body: { name: "Changed", member_ids: [foreignUser.id] }
    })
    assert.strictEqual(patch.status, 422)
    assert.deepStrictEqual(patch.body.errors, { "member_ids.0": ["The selected member_ids.0 is invalid."] })
    const unchanged = await request(server, "GET", `/v1/teams/${team.id}`, { token: company.token })
    assert.strictEqual(unchanged.body.data.name, "Ok")
  })

  it("answers schema errors with 422 field errors", async () => {
    const company = await createCompany(server)
    const team = await create(company.token, { name: "Target" })
    const bad: Array<[string, string, { body?: unknown; raw?: string }, string]> = [
      ["POST", "/v1/teams", { raw: "{oops" }, "body"],
      ["POST", "/v1/teams", { body: {} }, "name"],
      ["POST", "/v1/teams", { body: { name: "  " } }, "name"],
      ["POST", "/v1/teams", { body: { name: "x".repeat(256) } }, "name"],
      ["POST", "/v1/teams", { body: { name: "ok", channel_access_mode: "some" } }, "channel_access_mode"],
      ["POST", "/v1/teams", { body: { name: "ok", channel_ids: "1" } }, "channel_ids"],
      ["POST", "/v1/teams", { body: { name: "ok", channel_ids: [1, "x"] } }, "channel_ids.1"],
      ["POST", "/v1/teams", { body: { name: "ok", member_ids: [1.5] } }, "member_ids.0"],
      ["PATCH", `/v1/teams/${team.id}`, { body: { name: 3 } }, "name"],
      ["PATCH", `/v1/teams/${team.id}`, { body: { description: "d".repeat(1001) } }, "description"]
    ]
    for (const [method, path, options, field] of bad) {
      const res = await request(server, method, path, { token: company.token, ...options })
      if (options.raw !== undefined) {
        // Malformed JSON is 400 {message}, not a field error.
        assert.deepStrictEqual([res.status, res.body], [400, { message: "The request body must be valid JSON." }])
        continue
      }
      assert.strictEqual(res.status, 422, `${method} ${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
      assert.ok(Array.isArray(res.body.errors?.[field]), `${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
    }
    for (const id of ["abc", "1.5", "99999999999999999999", "-1", "0"]) {
      for (const method of ["GET", "PATCH", "DELETE"]) {
        const res = await request(server, method, `/v1/teams/${id}`, { token: company.token, body: method === "PATCH" ? {} : undefined })
        assert.ok(res.status === 404 || res.status === 422, `${method} ${id} -> ${res.status}`)
      }
    }
  })

  it("lets every role read teams but only managers, admins and service tokens change them", async () => {
    const company = await createCompany(server)
    const agent = await login((await addUser(server, company.id, { role: "agent" })).email)
    const manager = await login((await addUser(server, company.id, { role: "manager" })).email)
    const admin = await login(company.admin.email)
    const team = await create(company.token, { name: "Base" })
    for (const token of [agent, manager, admin, company.token]) {
      assert.strictEqual((await request(server, "GET", "/v1/teams", { token })).status, 200)
      assert.strictEqual((await request(server, "GET", `/v1/teams/${team.id}`, { token })).status, 200)
    }
    const refused = { message: "This action is unauthorized." }
    const post = await request(server, "POST", "/v1/teams", { token: agent, body: { name: "Nope" } })
    assert.deepStrictEqual([post.status, post.body], [403, refused])
    const patch = await request(server, "PATCH", `/v1/teams/${team.id}`, { token: agent, body: { name: "Nope" } })
    assert.deepStrictEqual([patch.status, patch.body], [403, refused])
    const del = await request(server, "DELETE", `/v1/teams/${team.id}`, { token: agent })
    assert.deepStrictEqual([del.status, del.body], [403, refused])
    for (const token of [manager, admin]) {
      const made = await create(token, { name: "Mine" })
      assert.strictEqual((await request(server, "PATCH", `/v1/teams/${made.id}`, { token, body: { name: "Ours" } })).status, 200)
      assert.strictEqual((await request(server, "DELETE", `/v1/teams/${made.id}`, { token })).status, 200)
    }
    assert.strictEqual((await request(server, "GET", "/v1/teams")).status, 401)
  })

  it("keeps companies apart: another company's team is 404 and never listed", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const theirs = await create(b.token, { name: "Theirs" })
    for (const method of ["GET", "PATCH", "DELETE"]) {
      const res = await request(server, method, `/v1/teams/${theirs.id}`, { token: a.token, body: method === "PATCH" ? { name: "x" } : undefined })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Team not found." }], method)
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/teams", { token: a.token })).body.data, [])
    const still = await request(server, "GET", `/v1/teams/${theirs.id}`, { token: b.token })
    assert.strictEqual(still.body.data.name, "Theirs")
  })

  it("is what limits an agent's channels: custom grants its channels, all grants every channel", async () => {
    const company = await createCompany(server)
    const c1 = await channel(company.id, "One")
    await channel(company.id, "Two")
    const agent = await addUser(server, company.id, { role: "agent" })
    const actor: Actor = {
      userId: agent.id as UserId,
      email: agent.email,
      isServiceAccount: false,
      kind: "mobile",
      tokenId: null,
      sessionId: null,
      abilities: ["*"],
      account: accountOf(agent.id, agent.email),
      company: { id: company.id as CompanyId, plan: "business", role: "agent", permissions: rolePermissions.agent }
    }
    const visible = () =>
      server.runInApp(
        Effect.provide(ChannelAccess.use((access) => access.visible(company.id, actor)), ChannelAccess.layer)
      )
    assert.deepStrictEqual([...(await visible()) as Set<number>], [])
    const team = await create(company.token, { name: "Sales", channel_ids: [c1], member_ids: [agent.id] })
    assert.deepStrictEqual([...(await visible()) as Set<number>], [c1])
    await request(server, "PATCH", `/v1/teams/${team.id}`, { token: company.token, body: { channel_access_mode: "all" } })
    assert.strictEqual(await visible(), "all")
  })
})
