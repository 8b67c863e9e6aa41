import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { enable, profiles, telephonyCompany } from "../telephony/support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

type Role = "admin" | "manager" | "agent"

const login = async (email: string) => {
  const res = await mobileLogin(server, email, "password-123")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

/** A person with a role in the company and their mobile token. */
const person = async (companyId: number, role: Role) => {
  const user = await addUser(server, companyId, { role })
  return { ...user, token: await login(user.email) }
}

const serviceAccountOf = async (token: string) => {
  const me = await request(server, "GET", "/v1/me", { token })
  return me.body.data.id as number
}

const memberFields = ["availability", "email", "id", "lastname", "name", "photo_url", "role", "telephony"]

describe("members", () => {
  it("lists the company's people with role, availability and telephony, never service accounts", async () => {
    const company = await createCompany(server)
    const manager = await addUser(server, company.id, { role: "manager" })
    const agent = await addUser(server, company.id, { role: "agent" })
    await query(server, "UPDATE users SET availability = 'online' WHERE id = $1", [agent.id])
    await query(
      server,
      `INSERT INTO telephony_operators (company_id, user_id, extension, web_sip_username, web_sip_password,
         native_sip_username, native_sip_password) VALUES ($1, $2, '101', 'w', 'p', 'n', 'p')`,
      [company.id, agent.id]
    )
    const res = await request(server, "GET", "/v1/companies/current/members", { token: company.token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data.map((m: any) => m.id), [company.admin.id, manager.id, agent.id])
    for (const member of res.body.data) assert.deepStrictEqual(Object.keys(member).sort(), memberFields)
    const [admin, , operator] = res.body.data
    assert.deepStrictEqual(admin, {
      id: company.admin.id,
      name: "Admin",
      lastname: null,
      email: company.admin.email,
      role: "admin",
      availability: "offline",
      telephony: { enabled: false, extension: null },
      photo_url: null
    })
    assert.strictEqual(operator.role, "agent")
    assert.strictEqual(operator.availability, "online")
    assert.deepStrictEqual(operator.telephony, { enabled: true, extension: "101" })
    const service = await serviceAccountOf(company.token)
    assert.ok(!res.body.data.some((m: any) => m.id === service))
  })

  it("GET /v1/users lists real users with their role, for every role", async () => {
    const company = await createCompany(server)
    const agent = await person(company.id, "agent")
    const service = await serviceAccountOf(company.token)
    for (const token of [company.token, agent.token]) {
      const res = await request(server, "GET", "/v1/users", { token })
      assert.strictEqual(res.status, 200, JSON.stringify(res.body))
      assert.deepStrictEqual(res.body.data, [
        { id: company.admin.id, name: "Admin", lastname: null, email: company.admin.email, role: "admin", photo_url: null },
        { id: agent.id, name: "Person", lastname: null, email: agent.email, role: "agent", photo_url: null }
      ])
      assert.ok(!res.body.data.some((u: any) => u.id === service))
    }
  })

  it("changes a role: admins and service tokens may, managers and agents get 403", async () => {
    const company = await createCompany(server)
    const manager = await person(company.id, "manager")
    const agent = await person(company.id, "agent")
    const admin = await login(company.admin.email)
    const target = await addUser(server, company.id, { role: "agent" })
    const path = `/v1/companies/current/members/${target.id}/role`
    for (const token of [agent.token, manager.token]) {
      const res = await request(server, "POST", path, { token, body: { role: "manager" } })
      assert.deepStrictEqual([res.status, res.body], [403, { message: "This action is unauthorized." }])
    }
    const byAdmin = await request(server, "POST", path, { token: admin, body: { role: "manager" } })
    assert.strictEqual(byAdmin.status, 200, JSON.stringify(byAdmin.body))
    assert.strictEqual(byAdmin.body.data.message, "Role updated.")
    assert.strictEqual(byAdmin.body.data.member.id, target.id)
    assert.strictEqual(byAdmin.body.data.member.role, "manager")
    assert.deepStrictEqual(Object.keys(byAdmin.body.data.member).sort(), memberFields)
    const byService = await request(server, "POST", path, { token: company.token, body: { role: "admin" } })
    assert.strictEqual(byService.status, 200, JSON.stringify(byService.body))
    const [row] = await query(server, "SELECT role FROM memberships WHERE company_id = $1 AND user_id = $2", [company.id, target.id])
    assert.strictEqual(row.role, "admin")
    // The new role applies to the member's next request.
    const targetToken = await login(target.email)
    const me = await request(server, "GET", "/v1/me", { token: targetToken })
    assert.deepStrictEqual(me.body.data.roles, ["admin"])
  })

  it("refuses to demote or revoke the last admin with 422; a second admin lifts the guard", async () => {
    const company = await createCompany(server)
    const admin = await login(company.admin.email)
    const path = `/v1/companies/current/members/${company.admin.id}`
    // The service account is an admin too, but it does not count: it goes when its token is revoked.
    for (const token of [company.token, admin]) {
      const demote = await request(server, "POST", `${path}/role`, { token, body: { role: "manager" } })
      assert.strictEqual(demote.status, 422, JSON.stringify(demote.body))
      assert.strictEqual(demote.body.message, "The last admin of the company cannot be demoted.")
      assert.strictEqual(demote.body.error_code, "last_admin")
      assert.deepStrictEqual(demote.body.errors, { role: ["The last admin of the company cannot be demoted."] })
    }
    const revoke = await request(server, "POST", `${path}/revoke`, { token: company.token })
    assert.strictEqual(revoke.status, 422, JSON.stringify(revoke.body))
    assert.strictEqual(revoke.body.error_code, "last_admin")
    const same = await request(server, "POST", `${path}/role`, { token: admin, body: { role: "admin" } })
    assert.strictEqual(same.status, 200, "keeping the admin role is not a demotion")

    const second = await addUser(server, company.id, { role: "admin" })
    const demoted = await request(server, "POST", `${path}/role`, { token: admin, body: { role: "manager" } })
    assert.strictEqual(demoted.status, 200, JSON.stringify(demoted.body))
    const [row] = await query(server, "SELECT role FROM memberships WHERE company_id = $1 AND user_id = $2", [company.id, company.admin.id])
    assert.strictEqual(row.role, "manager")
    const last = await request(server, "POST", `/v1/companies/current/members/${second.id}/role`, {
      token: company.token,
      body: { role: "agent" }
    })
    assert.strictEqual(last.status, 422)
    const lastRevoke = await request(server, "POST", `/v1/companies/current/members/${second.id}/revoke`, { token: company.token })
    assert.strictEqual(lastRevoke.status, 422)
  })

  it("keeps one admin when two admins demote each other at the same time", async () => {
    const company = await createCompany(server)
    const other = await person(company.id, "admin")
    const admin = await login(company.admin.email)
    const [a, b] = await Promise.all([
      request(server, "POST", `/v1/companies/current/members/${other.id}/role`, { token: admin, body: { role: "agent" } }),
      request(server, "POST", `/v1/companies/current/members/${company.admin.id}/role`, { token: other.token, body: { role: "agent" } })
    ])
    assert.deepStrictEqual([a.status, b.status].sort((x, y) => x - y), [200, 422])
    const [row] = await query(
      server,
      `SELECT count(*)::int AS n FROM memberships m JOIN users u ON u.id = m.user_id
       WHERE m.company_id = $1 AND m.role = 'admin' AND NOT u.is_service_account`,
      [company.id]
    )
    assert.strictEqual(row.n, 1)
  })

  it("revoking ends access at once: the member's token loses the company and current_company_id moves", async () => {
    const home = await createCompany(server)
    const other = await createCompany(server)
    // Member of `home` only.
    const loner = await person(home.id, "agent")
    // Member of both, active in `home`.
    const both = await addUser(server, home.id, { role: "manager" })
    await addUser(server, other.id, { email: both.email, role: "agent" })
    const bothToken = await login(both.email)
    const before = await request(server, "GET", "/v1/me", { token: bothToken })
    assert.strictEqual(before.body.data.current_company_id, home.id)
    const team = await request(server, "POST", "/v1/teams", {
      token: home.token,
      body: { name: "Support", member_ids: [loner.id, both.id] }
    })
    assert.strictEqual(team.status, 201, JSON.stringify(team.body))
    assert.strictEqual((await request(server, "GET", "/v1/teams", { token: loner.token })).status, 200)

    const revoked = await request(server, "POST", `/v1/companies/current/members/${loner.id}/revoke`, { token: home.token })
    assert.deepStrictEqual([revoked.status, revoked.body], [200, { data: { message: "Membership revoked." } }])
    const me = await request(server, "GET", "/v1/me", { token: loner.token })
    assert.strictEqual(me.status, 200)
    assert.strictEqual(me.body.data.current_company_id, null)
    assert.deepStrictEqual(me.body.data.roles, [])
    assert.deepStrictEqual(me.body.data.permissions, [])
    for (const path of ["/v1/teams", "/v1/companies/current/members", "/v1/users"]) {
      const res = await request(server, "GET", path, { token: loner.token })
      assert.strictEqual(res.status, 403, path)
    }
    const [lonerRow] = await query(server, "SELECT current_company_id FROM users WHERE id = $1", [loner.id])
    assert.strictEqual(lonerRow.current_company_id, null)
    const relogin = await mobileLogin(server, loner.email, "password-123")
    assert.strictEqual(relogin.status, 422, "no membership left: no new token either")

    const admin = await login(home.admin.email)
    const moved = await request(server, "POST", `/v1/companies/current/members/${both.id}/revoke`, { token: admin })
    assert.strictEqual(moved.status, 200, JSON.stringify(moved.body))
    const bothMe = await request(server, "GET", "/v1/me", { token: bothToken })
    assert.strictEqual(bothMe.body.data.current_company_id, other.id)
    assert.deepStrictEqual(bothMe.body.data.roles, ["agent"])
    const members = await request(server, "GET", "/v1/companies/current/members", { token: bothToken })
    assert.ok(members.body.data.every((m: any) => m.id !== home.admin.id), "now reads the other company")

    const after = await request(server, "GET", `/v1/teams/${team.body.data.team.id}`, { token: home.token })
    assert.deepStrictEqual(after.body.data.member_ids, [])
    const seats = await query(server, "SELECT count(*)::int AS n FROM team_members WHERE company_id = $1", [home.id])
    assert.strictEqual(seats[0].n, 0)
    const list = await request(server, "GET", "/v1/companies/current/members", { token: home.token })
    assert.deepStrictEqual(list.body.data.map((m: any) => m.id), [home.admin.id])
  })

  it("revoke drops the member's SIP profile row and both PBX profiles", async () => {
    const company = await telephonyCompany(server)
    const agent = await addUser(server, company.id, { role: "agent" })
    await enable(server, company.token, agent.id)
    assert.strictEqual((await profiles(server, company.id)).length, 2)
    const res = await request(server, "POST", `/v1/companies/current/members/${agent.id}/revoke`, { token: company.token })
    assert.strictEqual(res.status, 200)
    const rows = await query(server, "SELECT 1 FROM telephony_operators WHERE company_id = $1 AND user_id = $2", [company.id, agent.id])
    assert.strictEqual(rows.length, 0)
    assert.deepStrictEqual(await profiles(server, company.id), [])
  })

  it("needs member.delete to revoke and refuses to revoke yourself", async () => {
    const company = await createCompany(server)
    const manager = await person(company.id, "manager")
    const agent = await person(company.id, "agent")
    const second = await addUser(server, company.id, { role: "admin" })
    for (const token of [agent.token, manager.token]) {
      const res = await request(server, "POST", `/v1/companies/current/members/${second.id}/revoke`, { token })
      assert.strictEqual(res.status, 403)
    }
    const admin = await login(company.admin.email)
    const self = await request(server, "POST", `/v1/companies/current/members/${company.admin.id}/revoke`, { token: admin })
    assert.strictEqual(self.status, 422, JSON.stringify(self.body))
    assert.strictEqual(self.body.error_code, "cannot_revoke_self")
    const ok = await request(server, "POST", `/v1/companies/current/members/${second.id}/revoke`, { token: admin })
    assert.strictEqual(ok.status, 200)
    const again = await request(server, "POST", `/v1/companies/current/members/${second.id}/revoke`, { token: admin })
    assert.deepStrictEqual([again.status, again.body], [404, { message: "Member not found." }])
  })

  it("answers 404 for another company's member, a service account or an unknown id; never lists them", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const foreign = await addUser(server, b.id, { role: "agent" })
    const service = await serviceAccountOf(a.token)
    for (const id of [foreign.id, b.admin.id, service, 99_999_999]) {
      const role = await request(server, "POST", `/v1/companies/current/members/${id}/role`, { token: a.token, body: { role: "agent" } })
      assert.deepStrictEqual([role.status, role.body], [404, { message: "Member not found." }], `role ${id}`)
      const revoke = await request(server, "POST", `/v1/companies/current/members/${id}/revoke`, { token: a.token })
      assert.deepStrictEqual([revoke.status, revoke.body], [404, { message: "Member not found." }], `revoke ${id}`)
    }
    const list = await request(server, "GET", "/v1/companies/current/members", { token: a.token })
    assert.deepStrictEqual(list.body.data.map((m: any) => m.id), [a.admin.id])
    const users = await request(server, "GET", "/v1/users", { token: a.token })
    assert.deepStrictEqual(users.body.data.map((u: any) => u.id), [a.admin.id])
    const [row] = await query(server, "SELECT role FROM memberships WHERE company_id = $1 AND user_id = $2", [b.id, foreign.id])
    assert.strictEqual(row.role, "agent")
  })

  it("answers bad input with 422 and odd ids without a 500", async () => {
    const company = await createCompany(server)
    const agent = await addUser(server, company.id, { role: "agent" })
    for (const body of [{}, { role: "owner" }, { role: 1 }, { role: null }]) {
      const res = await request(server, "POST", `/v1/companies/current/members/${agent.id}/role`, { token: company.token, body })
      assert.strictEqual(res.status, 422, JSON.stringify(res.body))
      assert.ok(Array.isArray(res.body.errors.role), JSON.stringify(res.body))
    }
    for (const id of ["abc", "1.5", "99999999999999999999", "-1", "0"]) {
      for (const action of ["role", "revoke"]) {
        const res = await request(server, "POST", `/v1/companies/current/members/${id}/${action}`, {
          token: company.token,
          body: { role: "agent" }
        })
        assert.ok(res.status === 404 || res.status === 422, `${action} ${id} -> ${res.status}`)
      }
    }
    assert.strictEqual((await request(server, "GET", "/v1/companies/current/members")).status, 401)
    assert.strictEqual((await request(server, "GET", "/v1/users")).status, 401)
  })
})
