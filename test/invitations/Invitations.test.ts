import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mailsTo, mobileLogin } from "../auth/support.ts"
import { uniqueEmail } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ appUrl: "https://app.example.test/" })
})
afterAll(() => server?.close())

type Role = "admin" | "manager" | "agent"

const invitationFields = ["company_id", "created_at", "email", "expires_at", "guid", "id", "invite_url", "role", "status"]
const uuid = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/

const login = async (email: string) => {
  const res = await mobileLogin(server, email, "password-123")
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

const invite = async (token: string, email: string, role: Role = "agent") => {
  const res = await request(server, "POST", "/v1/invitations", { token, body: { email, role } })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data.invitation
}

/** Someone with an account (a member of a company of their own) and a mobile token. */
const invitee = async () => {
  const home = await createCompany(server)
  const user = await addUser(server, home.id, { role: "agent" })
  return { ...user, home, token: await login(user.email) }
}

/** Invitation mails only: a mobile login also mails a verification code. */
const invitationMails = async (email: string) =>
  (await mailsTo(server, email)).filter((mail) => mail.subject.startsWith("You are invited"))

const membership = (companyId: number, userId: number) =>
  query(server, "SELECT role FROM memberships WHERE company_id = $1 AND user_id = $2", [companyId, userId])

describe("invitations", () => {
  it("runs the life cycle: create, e-mail with the link, accept by the invitee, membership", async () => {
    const company = await createCompany(server, { name: "Acme Ltd" })
    const person = await invitee()
    const before = Date.now()
    const res = await request(server, "POST", "/v1/invitations", {
      token: company.token,
      body: { email: person.email.toUpperCase(), role: "manager" }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Invitation sent.")
    const invitation = res.body.data.invitation
    assert.deepStrictEqual(Object.keys(invitation).sort(), invitationFields)
    assert.match(invitation.guid, uuid)
    assert.strictEqual(invitation.invite_url, `https://app.example.test/invitation/${invitation.guid}`)
    assert.strictEqual(invitation.email, person.email.toUpperCase())
    assert.strictEqual(invitation.role, "manager")
    assert.strictEqual(invitation.status, "pending")
    assert.strictEqual(invitation.company_id, company.id)
    const ttl = Date.parse(invitation.expires_at) - before
    assert.ok(ttl > 7 * 86_400_000 - 60_000 && ttl <= 7 * 86_400_000 + 60_000, `expires in ${ttl} ms`)

    const mails = await invitationMails(person.email)
    assert.strictEqual(mails.length, 1)
    assert.ok(mails[0].body.includes(invitation.invite_url), mails[0].body)
    assert.match(mails[0].subject, /Acme Ltd/)

    const list = await request(server, "GET", "/v1/invitations", { token: company.token })
    assert.deepStrictEqual([list.status, list.body], [200, { data: [invitation] }])

    const accepted = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.strictEqual(accepted.status, 200, JSON.stringify(accepted.body))
    assert.strictEqual(accepted.body.data.message, "Invitation accepted.")
    assert.strictEqual(accepted.body.data.invitation.status, "accepted")
    assert.deepStrictEqual(await membership(company.id, person.id), [{ role: "manager" }])
    // They had an active company already: it stays.
    const me = await request(server, "GET", "/v1/me", { token: person.token })
    assert.strictEqual(me.body.data.current_company_id, person.home.id)
    const members = await request(server, "GET", "/v1/companies/current/members", { token: company.token })
    assert.ok(members.body.data.some((m: any) => m.id === person.id && m.role === "manager"))
    assert.deepStrictEqual((await request(server, "GET", "/v1/invitations", { token: company.token })).body.data, [])

    const twice = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.deepStrictEqual([twice.status, twice.body.error_code], [422, "invitation_accepted"])
    assert.strictEqual(twice.body.message, "This invitation has already been accepted.")
    const events = await query(server, "SELECT key FROM events WHERE company_id = $1 AND key IN ('invitation.created', 'member.added', 'invitation.updated') ORDER BY seq", [company.id])
    assert.deepStrictEqual(events.map((e: any) => e.key), ["invitation.created", "member.added", "invitation.updated"])
  })

  it("lets an account without an active company accept, and makes the company its active one", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const homeAdmin = await login(person.home.admin.email)
    const revoked = await request(server, "POST", `/v1/companies/current/members/${person.id}/revoke`, { token: homeAdmin })
    assert.strictEqual(revoked.status, 200)
    const lost = await request(server, "GET", "/v1/me", { token: person.token })
    assert.strictEqual(lost.body.data.current_company_id, null)

    const invitation = await invite(company.token, person.email, "agent")
    const accepted = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.strictEqual(accepted.status, 200, JSON.stringify(accepted.body))
    const me = await request(server, "GET", "/v1/me", { token: person.token })
    assert.strictEqual(me.body.data.current_company_id, company.id)
    assert.deepStrictEqual(me.body.data.roles, ["agent"])
    assert.strictEqual((await request(server, "GET", "/v1/teams", { token: person.token })).status, 200)
  })

  it("answers 403 to another account, 404 to an unknown guid, and 422 once expired", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const stranger = await invitee()
    const invitation = await invite(company.token, person.email)
    for (const action of ["accept", "decline"]) {
      const wrong = await request(server, "POST", `/v1/invitations/${invitation.guid}/${action}`, { token: stranger.token })
      assert.deepStrictEqual([wrong.status, wrong.body], [403, { message: "This invitation was sent to another e-mail address." }])
      // A service account has no e-mail address at all.
      const service = await request(server, "POST", `/v1/invitations/${invitation.guid}/${action}`, { token: company.token })
      assert.strictEqual(service.status, 403)
      for (const guid of ["00000000-0000-4000-8000-000000000000", "not-a-guid", "1"]) {
        const unknown = await request(server, "POST", `/v1/invitations/${guid}/${action}`, { token: person.token })
        assert.deepStrictEqual([unknown.status, unknown.body], [404, { message: "Invitation not found." }], guid)
      }
    }
    assert.strictEqual((await membership(company.id, stranger.id)).length, 0)

    await query(server, "UPDATE invitations SET expires_at = now() - interval '1 minute' WHERE id = $1", [invitation.id])
    for (const action of ["accept", "decline"]) {
      const expired = await request(server, "POST", `/v1/invitations/${invitation.guid}/${action}`, { token: person.token })
      assert.strictEqual(expired.status, 422, JSON.stringify(expired.body))
      assert.deepStrictEqual(expired.body, { message: "This invitation has expired.", error_code: "invitation_expired" })
    }
    for (const [method, path, body] of [
      ["POST", `/v1/invitations/${invitation.id}/role`, { role: "manager" }],
      ["POST", `/v1/invitations/${invitation.id}/revoke`, undefined]
    ] as const) {
      const res = await request(server, method, path, { token: company.token, body })
      assert.strictEqual(res.status, 422, path)
      assert.strictEqual(res.body.error_code, "invitation_expired")
    }
    const list = await request(server, "GET", "/v1/invitations", { token: company.token })
    assert.deepStrictEqual(list.body.data.map((i: any) => [i.id, i.status]), [[invitation.id, "expired"]])
    assert.strictEqual((await membership(company.id, person.id)).length, 0)
    // Deleting still works, and a new invitation to the address replaces the expired one.
    const fresh = await invite(company.token, person.email)
    assert.strictEqual(fresh.status, "pending")
    const ok = await request(server, "POST", `/v1/invitations/${fresh.guid}/accept`, { token: person.token })
    assert.strictEqual(ok.status, 200, JSON.stringify(ok.body))
  })

  it("declines; a declined invitation can be neither accepted nor changed", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const invitation = await invite(company.token, person.email)
    const declined = await request(server, "POST", `/v1/invitations/${invitation.guid}/decline`, { token: person.token })
    assert.strictEqual(declined.status, 200, JSON.stringify(declined.body))
    assert.strictEqual(declined.body.data.message, "Invitation declined.")
    assert.strictEqual(declined.body.data.invitation.status, "declined")
    const accept = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.deepStrictEqual([accept.status, accept.body], [422, {
      message: "This invitation has been declined.",
      error_code: "invitation_declined"
    }])
    const role = await request(server, "POST", `/v1/invitations/${invitation.id}/role`, { token: company.token, body: { role: "admin" } })
    assert.deepStrictEqual([role.status, role.body.error_code], [422, "invitation_declined"])
    const revoke = await request(server, "POST", `/v1/invitations/${invitation.id}/revoke`, { token: company.token })
    assert.deepStrictEqual([revoke.status, revoke.body.error_code], [422, "invitation_declined"])
    assert.strictEqual((await membership(company.id, person.id)).length, 0)
  })

  it("revokes a pending invitation; the link then answers 422", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const invitation = await invite(company.token, person.email)
    const revoked = await request(server, "POST", `/v1/invitations/${invitation.id}/revoke`, { token: company.token })
    assert.strictEqual(revoked.status, 200, JSON.stringify(revoked.body))
    assert.strictEqual(revoked.body.data.message, "Invitation revoked.")
    assert.strictEqual(revoked.body.data.invitation.status, "revoked")
    for (const action of ["accept", "decline"]) {
      const res = await request(server, "POST", `/v1/invitations/${invitation.guid}/${action}`, { token: person.token })
      assert.deepStrictEqual([res.status, res.body], [422, { message: "This invitation has been revoked.", error_code: "invitation_revoked" }])
    }
    const again = await request(server, "POST", `/v1/invitations/${invitation.id}/revoke`, { token: company.token })
    assert.deepStrictEqual([again.status, again.body.error_code], [422, "invitation_revoked"])
    assert.deepStrictEqual((await request(server, "GET", "/v1/invitations", { token: company.token })).body.data, [])
  })

  it("changes the role while pending; accepting then grants the new role", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const invitation = await invite(company.token, person.email, "agent")
    const changed = await request(server, "POST", `/v1/invitations/${invitation.id}/role`, { token: company.token, body: { role: "admin" } })
    assert.strictEqual(changed.status, 200, JSON.stringify(changed.body))
    assert.strictEqual(changed.body.data.message, "Invitation role updated.")
    assert.strictEqual(changed.body.data.invitation.role, "admin")
    assert.strictEqual(changed.body.data.invitation.status, "pending")
    const accepted = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.strictEqual(accepted.status, 200)
    assert.deepStrictEqual(await membership(company.id, person.id), [{ role: "admin" }])
    const after = await request(server, "POST", `/v1/invitations/${invitation.id}/role`, { token: company.token, body: { role: "agent" } })
    assert.deepStrictEqual([after.status, after.body.error_code], [422, "invitation_accepted"])
    const revoke = await request(server, "POST", `/v1/invitations/${invitation.id}/revoke`, { token: company.token })
    assert.deepStrictEqual([revoke.status, revoke.body.error_code], [422, "invitation_accepted"])
  })

  it("deletes an invitation in any state; its link is then unknown", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const pending = await invite(company.token, person.email)
    const del = await request(server, "DELETE", `/v1/invitations/${pending.id}`, { token: company.token })
    assert.deepStrictEqual([del.status, del.body], [200, { data: { message: "Invitation deleted." } }])
    const accept = await request(server, "POST", `/v1/invitations/${pending.guid}/accept`, { token: person.token })
    assert.strictEqual(accept.status, 404)
    const twice = await request(server, "DELETE", `/v1/invitations/${pending.id}`, { token: company.token })
    assert.deepStrictEqual([twice.status, twice.body], [404, { message: "Invitation not found." }])

    const accepted = await invite(company.token, person.email)
    await request(server, "POST", `/v1/invitations/${accepted.guid}/accept`, { token: person.token })
    const gone = await request(server, "DELETE", `/v1/invitations/${accepted.id}`, { token: company.token })
    assert.strictEqual(gone.status, 200)
    assert.deepStrictEqual(await membership(company.id, person.id), [{ role: "agent" }], "the membership stays")
  })

  it("refuses to invite a member (422 on email) and replaces a pending invitation to the same address", async () => {
    const company = await createCompany(server)
    const member = await addUser(server, company.id, { role: "agent" })
    for (const email of [member.email, company.admin.email.toUpperCase()]) {
      const res = await request(server, "POST", "/v1/invitations", { token: company.token, body: { email, role: "agent" } })
      assert.strictEqual(res.status, 422, JSON.stringify(res.body))
      assert.deepStrictEqual(res.body.errors, { email: ["This person is already a member of the company."] })
    }
    const person = await invitee()
    const first = await invite(company.token, person.email, "agent")
    const second = await invite(company.token, person.email.toUpperCase(), "manager")
    assert.notStrictEqual(first.guid, second.guid)
    const list = await request(server, "GET", "/v1/invitations", { token: company.token })
    assert.deepStrictEqual(list.body.data.map((i: any) => i.id), [second.id])
    const old = await request(server, "POST", `/v1/invitations/${first.guid}/accept`, { token: person.token })
    assert.deepStrictEqual([old.status, old.body.error_code], [422, "invitation_revoked"])
    assert.strictEqual((await invitationMails(person.email)).length, 2)
    const ok = await request(server, "POST", `/v1/invitations/${second.guid}/accept`, { token: person.token })
    assert.strictEqual(ok.status, 200)
    assert.deepStrictEqual(await membership(company.id, person.id), [{ role: "manager" }])
  })

  it("refuses to accept for someone who became a member meanwhile", async () => {
    const company = await createCompany(server)
    const person = await invitee()
    const invitation = await invite(company.token, person.email, "admin")
    await addUser(server, company.id, { email: person.email, role: "agent" })
    const res = await request(server, "POST", `/v1/invitations/${invitation.guid}/accept`, { token: person.token })
    assert.deepStrictEqual([res.status, res.body], [422, { message: "You are already a member of this company.", error_code: "already_member" }])
    assert.deepStrictEqual(await membership(company.id, person.id), [{ role: "agent" }])
  })

  it("checks permissions per role: agents nothing, managers all but the admin role, admins and service tokens all", async () => {
    const company = await createCompany(server)
    const agent = await login((await addUser(server, company.id, { role: "agent" })).email)
    const manager = await login((await addUser(server, company.id, { role: "manager" })).email)
    const admin = await login(company.admin.email)
    const target = await invite(company.token, uniqueEmail("target"))
    const refused = { message: "This action is unauthorized." }
    for (const [method, path, body] of [
      ["GET", "/v1/invitations", undefined],
      ["POST", "/v1/invitations", { email: uniqueEmail("x"), role: "agent" }],
      ["POST", `/v1/invitations/${target.id}/role`, { role: "manager" }],
      ["POST", `/v1/invitations/${target.id}/revoke`, undefined],
      ["DELETE", `/v1/invitations/${target.id}`, undefined]
    ] as const) {
      const res = await request(server, method, path, { token: agent, body })
      assert.deepStrictEqual([res.status, res.body], [403, refused], `agent ${method} ${path}`)
    }
    assert.strictEqual((await request(server, "GET", "/v1/invitations", { token: manager })).status, 200)
    const byManager = await invite(manager, uniqueEmail("m"), "manager")
    const asAdmin = await request(server, "POST", "/v1/invitations", { token: manager, body: { email: uniqueEmail("a"), role: "admin" } })
    assert.deepStrictEqual([asAdmin.status, asAdmin.body], [403, { message: "Only an admin can invite an admin." }])
    const promote = await request(server, "POST", `/v1/invitations/${byManager.id}/role`, { token: manager, body: { role: "admin" } })
    assert.strictEqual(promote.status, 403)
    const demote = await request(server, "POST", `/v1/invitations/${byManager.id}/role`, { token: manager, body: { role: "agent" } })
    assert.strictEqual(demote.status, 200)
    assert.strictEqual((await request(server, "POST", `/v1/invitations/${byManager.id}/revoke`, { token: manager })).status, 200)
    assert.strictEqual((await request(server, "DELETE", `/v1/invitations/${byManager.id}`, { token: manager })).status, 200)
    for (const token of [admin, company.token]) {
      const made = await invite(token, uniqueEmail("admin"), "admin")
      assert.strictEqual(made.role, "admin")
    }
    assert.strictEqual((await request(server, "GET", "/v1/invitations")).status, 401)
    assert.strictEqual((await request(server, "POST", `/v1/invitations/${target.guid}/accept`)).status, 401)
  })

  it("answers bad input with 422 field errors and odd ids without a 500", async () => {
    const company = await createCompany(server)
    const target = await invite(company.token, uniqueEmail("t"))
    const bad: Array<[string, { body?: unknown; raw?: string }, string]> = [
      ["/v1/invitations", { raw: "nope" }, "body"],
      ["/v1/invitations", { body: {} }, "email"],
      ["/v1/invitations", { body: { email: "not-an-email", role: "agent" } }, "email"],
      ["/v1/invitations", { body: { email: uniqueEmail("r"), role: "owner" } }, "role"],
      ["/v1/invitations", { body: { email: uniqueEmail("r") } }, "role"],
      [`/v1/invitations/${target.id}/role`, { body: { role: "boss" } }, "role"],
      [`/v1/invitations/${target.id}/role`, { body: {} }, "role"]
    ]
    for (const [path, options, field] of bad) {
      const res = await request(server, "POST", path, { token: company.token, ...options })
      if (options.raw !== undefined) {
        // Malformed JSON is 400 {message}, not a field error.
        assert.deepStrictEqual([res.status, res.body], [400, { message: "The request body must be valid JSON." }])
        continue
      }
      assert.strictEqual(res.status, 422, `${path} ${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
      assert.ok(Array.isArray(res.body.errors?.[field]), `${JSON.stringify(options)} -> ${JSON.stringify(res.body)}`)
    }
    for (const id of ["abc", "1.5", "99999999999999999999", "-1", "0"]) {
      for (const [method, suffix] of [["POST", "/role"], ["POST", "/revoke"], ["DELETE", ""]] as const) {
        const res = await request(server, method, `/v1/invitations/${id}${suffix}`, { token: company.token, body: { role: "agent" } })
        assert.ok(res.status === 404 || res.status === 422, `${method} ${id}${suffix} -> ${res.status} ${JSON.stringify(res.body)}`)
      }
    }
  })

  it("keeps companies apart: another company's invitation id is 404 and never listed", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const theirs = await invite(b.token, uniqueEmail("theirs"))
    for (const [method, path, body] of [
      ["POST", `/v1/invitations/${theirs.id}/role`, { role: "manager" }],
      ["POST", `/v1/invitations/${theirs.id}/revoke`, undefined],
      ["DELETE", `/v1/invitations/${theirs.id}`, undefined]
    ] as const) {
      const res = await request(server, method, path, { token: a.token, body })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Invitation not found." }], `${method} ${path}`)
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/invitations", { token: a.token })).body.data, [])
    const still = await request(server, "GET", "/v1/invitations", { token: b.token })
    assert.deepStrictEqual(still.body.data.map((i: any) => [i.id, i.role, i.status]), [[theirs.id, "agent", "pending"]])
  })
})
