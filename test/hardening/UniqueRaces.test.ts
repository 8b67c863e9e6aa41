import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { unique, uniqueEmail } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, type Json, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { dealSetup } from "../deals/support.ts"
import { conversationOn } from "../messages/support.ts"
import { templateBody } from "../templates/support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const PARALLEL = 8

const atOnce = (send: () => Promise<Json>) => Promise.all(Array.from({ length: PARALLEL }, send))

/**
 * The answers writers of one unique value get at the same moment: one 201, and for every other the
 * refusal it would get arriving after it, on `field`. Never a 5xx.
 */
const asIfOneAfterAnother = (answers: ReadonlyArray<Json>, field: string) => {
  const statuses = answers.map((a) => a.status)
  assert.isFalse(statuses.some((s) => s >= 500), JSON.stringify(answers.find((a) => a.status >= 500)?.body))
  assert.strictEqual(statuses.filter((s) => s === 201).length, 1, JSON.stringify(statuses))
  for (const answer of answers.filter((a) => a.status !== 201)) {
    assert.strictEqual(answer.status, 422, JSON.stringify(answer.body))
    assert.property(answer.body.errors, field, JSON.stringify(answer.body))
  }
}

describe("two writers of one unique value at the same moment", () => {
  it("tags and lost reasons: one is created, the others are told the name is taken", async () => {
    const company = await createCompany(server)
    for (const path of ["/v1/tags", "/v1/lost-reasons"]) {
      const name = unique("Same")
      const answers = await atOnce(() => request(server, "POST", path, { token: company.token, body: { name } }))
      asIfOneAfterAnother(answers, "name")
    }
    const other = await createCompany(server)
    const theirs = await request(server, "POST", "/v1/tags", { token: other.token, body: { name: "Shared" } })
    const ours = await request(server, "POST", "/v1/tags", { token: company.token, body: { name: "Shared" } })
    assert.deepStrictEqual([theirs.status, ours.status], [201, 201], "names are unique per company")
    const foreign = await request(server, "PATCH", `/v1/tags/${theirs.body.data.id}`, { token: company.token, body: { name: "Mine" } })
    assert.strictEqual(foreign.status, 404)
  })

  it("templates with one slug: one group, the others refused on slug", async () => {
    const company = await createCompany(server)
    const slug = unique("order").toLowerCase().replace(/[^a-z0-9]+/g, "_")
    const answers = await atOnce(() => request(server, "POST", "/v1/templates", { token: company.token, body: templateBody([], { slug }) }))
    asIfOneAfterAnother(answers, "slug")
    const rows = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM template_groups WHERE company_id = $1 AND slug = $2", [company.id, slug])
    assert.strictEqual(rows[0].n, 1)
  })

  it("invitations of one address: each answered as a re-sent invitation, one pending row", async () => {
    const company = await createCompany(server)
    const email = uniqueEmail("invitee")
    const answers = await atOnce(() => request(server, "POST", "/v1/invitations", { token: company.token, body: { email, role: "agent" } }))
    assert.deepStrictEqual(answers.map((a) => a.status), Array(PARALLEL).fill(201), JSON.stringify(answers.find((a) => a.status !== 201)?.body))
    const rows = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM invitations WHERE company_id = $1 AND lower(email) = lower($2) AND status = 'pending'", [company.id, email])
    assert.strictEqual(rows[0].n, 1)
  })

  it("contacts with one account on a channel type: one contact holds it", async () => {
    const company = await createCompany(server)
    const external_id = unique("acct")
    const answers = await atOnce(() =>
      request(server, "POST", "/v1/contacts", {
        token: company.token,
        body: { firstName: "Racer", contactAccounts: [{ channel_type: "msgr_b", external_id }] }
      }))
    assert.isFalse(answers.some((a) => a.status >= 500), JSON.stringify(answers.find((a) => a.status >= 500)?.body))
    const rows = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM contact_accounts WHERE company_id = $1 AND external_id = $2", [company.id, external_id])
    assert.strictEqual(rows[0].n, 1)
    for (const answer of answers.filter((a) => a.status !== 201)) assert.strictEqual(answer.status, 422, JSON.stringify(answer.body))
  })

  it("companies whose admins share one new e-mail address: one user", async () => {
    const email = uniqueEmail("admin")
    const answers = await atOnce(() =>
      request(server, "POST", "/platform/v1/companies", {
        token: server.platformKey,
        body: { name: unique("Co"), plan: "business", admin: { email, password: "password-123", name: "Admin" } }
      }))
    assert.deepStrictEqual(answers.map((a) => a.status), Array(PARALLEL).fill(201), JSON.stringify(answers.find((a) => a.status !== 201)?.body))
    const admins = new Set(answers.map((a) => a.body.data.admin.id))
    assert.strictEqual(admins.size, 1, "one user, admin of every company made with the address")
    const rows = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM users WHERE lower(email) = lower($1)", [email])
    assert.strictEqual(rows[0].n, 1)
  })

  it("tags renamed to one name at once: one takes it, the other is told it is taken", async () => {
    const company = await createCompany(server)
    const tags = await Promise.all(Array.from({ length: PARALLEL }, (_, i) =>
      request(server, "POST", "/v1/tags", { token: company.token, body: { name: unique(`t${i}`) } })))
    const name = unique("Target")
    const answers = await Promise.all(tags.map((tag) =>
      request(server, "PATCH", `/v1/tags/${tag.body.data.id}`, { token: company.token, body: { name } })))
    const statuses = answers.map((a) => a.status)
    assert.strictEqual(statuses.filter((s) => s === 200).length, 1, JSON.stringify(answers.map((a) => a.body)))
    for (const answer of answers.filter((a) => a.status !== 200)) assert.property(answer.body.errors, "name", JSON.stringify(answer.body))
  })

  it("deals filed for one conversation at once: one deal holds it", async () => {
    const company = await createCompany(server)
    const { funnel, contact, open } = await dealSetup(server, company.token)
    const { conversationId } = await conversationOn(server, company.token)
    const answers = await atOnce(() =>
      request(server, "POST", "/v1/deals", {
        token: company.token,
        body: { title: "Race", funnel_id: funnel.id, funnel_stage_id: open.id, contact_id: contact.id, conversation_id: conversationId }
      }))
    asIfOneAfterAnother(answers, "conversation_id")
  })
})
