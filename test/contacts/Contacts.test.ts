import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { createChannel, inbound } from "../messages/support.ts"
import { unique } from "../support/Ids.ts"
import { eventsOf, query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createContact, getContact } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const contactFields = [
  "blocked_at",
  "blocked_by_user_id",
  "blocked_reason",
  "company",
  "company_id",
  "contactAccounts",
  "created_at",
  "custom_fields",
  "displayName",
  "emailes",
  "firstName",
  "id",
  "lastName",
  "merged_into_contact_id",
  "opted_out_at",
  "phones",
  "photo_url",
  "status",
  "tags",
  "updated_at"
]

const list = (token: string, query = "") => request(server, "GET", `/v1/contacts${query}`, { token })

describe("contacts CRUD", () => {
  it("creates a lead with phones (E.164), emailes and accounts, reads it back and emits contact.created", async () => {
    const company = await createCompany(server)
    const created = await createContact(server, company.token, {
      firstName: " Ann ",
      lastName: "Lee",
      company: "Acme",
      phones: [{ phone: "+1 (415) 555-0123" }, { phone: "0014155550123", type: "work" }, { phone: "447911123456", type: "home" }],
      emailes: [{ email: "ann@example.test" }, { email: "ANN@example.test", type: "home" }],
      contactAccounts: [{ channel_type: "msgr_b", external_id: "9001", username: "annlee" }]
    })
    assert.deepStrictEqual(Object.keys(created).sort(), contactFields)
    assert.strictEqual(created.company_id, company.id)
    assert.strictEqual(created.status, "lead")
    assert.strictEqual(created.firstName, "Ann")
    assert.strictEqual(created.displayName, "Ann Lee")
    assert.strictEqual(created.company, "Acme")
    assert.deepStrictEqual(created.phones, [{ phone: "+14155550123", type: "mobile" }, { phone: "+447911123456", type: "home" }])
    assert.deepStrictEqual(created.emailes, [{ email: "ann@example.test", type: "work" }])
    assert.strictEqual(created.contactAccounts.length, 1)
    assert.deepStrictEqual(
      { ...created.contactAccounts[0], id: 0 },
      { id: 0, channel_type: "msgr_b", external_id: "9001", username: "annlee", profile_picture: null }
    )
    assert.deepStrictEqual(created.tags, [])
    assert.strictEqual(created.blocked_at, null)
    assert.strictEqual(created.opted_out_at, null)
    assert.strictEqual(created.merged_into_contact_id, null)
    assert.strictEqual(created.photo_url, null)

    const read = await getContact(server, company.token, created.id)
    assert.deepStrictEqual([read.status, read.body], [200, { data: created }])

    const [event] = await eventsOf(server, company.id, "contact.created")
    assert.strictEqual(event.payload.contact_id, created.id)
    assert.strictEqual(event.payload.source, "api")
    assert.deepStrictEqual(event.payload.contact, created)
  })

  it("derives displayName, accepts a status, and refuses a contact with nothing to know it by", async () => {
    const company = await createCompany(server)
    const byPhone = await createContact(server, company.token, { phones: [{ phone: "+79161234567" }], status: "active" })
    assert.strictEqual(byPhone.displayName, "+79161234567")
    assert.strictEqual(byPhone.status, "active")
    const byAccount = await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_b", external_id: "77", username: "kit" }] })
    assert.strictEqual(byAccount.displayName, "kit")

    const empty = await request(server, "POST", "/v1/contacts", { token: company.token, body: { firstName: "  " } })
    assert.strictEqual(empty.status, 422)
    assert.deepStrictEqual(Object.keys(empty.body.errors), ["displayName"])

    const bad = await request(server, "POST", "/v1/contacts", {
      token: company.token,
      body: { firstName: "X", status: "vip", phones: [{ phone: "12" }], emailes: [{ email: "nope" }], contactAccounts: [{ channel_type: "fax", external_id: "1" }] }
    })
    assert.strictEqual(bad.status, 422)
    assert.deepStrictEqual(Object.keys(bad.body.errors).sort(), ["contactAccounts.0.channel_type", "emailes.0.email", "phones.0.phone", "status"])
    assert.strictEqual(bad.body.errors["phones.0.phone"][0], "The phone must be a valid phone number with its country code, e.g. +14155550123.")
  })

  it("refuses an account already linked to another contact", async () => {
    const company = await createCompany(server)
    await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_b", external_id: "taken" }] })
    const res = await request(server, "POST", "/v1/contacts", {
      token: company.token,
      body: { firstName: "B", contactAccounts: [{ channel_type: "msgr_a", external_id: "taken" }, { channel_type: "msgr_b", external_id: "taken" }] }
    })
    assert.strictEqual(res.status, 422, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.errors, { "contactAccounts.1.external_id": ["This account is already linked to another contact."] })
    // Nothing of the refused contact was kept.
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM contacts WHERE company_id = $1", [company.id])
    assert.strictEqual(n, 1)
  })

  it("PATCH changes fields and rebuilds phones, emailes and accounts from the body; absent lists stay", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const received = await inbound(server, company.token, channelId, { from: { external_id: "tg-1", username: "tom", name: "Tom Hill" } })
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
    const before = (await getContact(server, company.token, contact_id)).body.data
    assert.strictEqual(before.status, "lead")
    const accountId = before.contactAccounts[0].id

    const patched = await request(server, "PATCH", `/v1/contacts/${contact_id}`, {
      token: company.token,
      body: {
        status: "active",
        company: "Hill & Co",
        phones: [{ phone: "+4915112345678", type: "work" }],
        emailes: [{ email: "tom@example.test" }],
        contactAccounts: [{ channel_type: "msgr_b", external_id: "tg-1" }, { channel_type: "msgr_a", external_id: "4915112345678" }]
      }
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    const after = patched.body.data
    assert.strictEqual(after.status, "active")
    assert.strictEqual(after.company, "Hill & Co")
    assert.strictEqual(after.displayName, "Tom Hill")
    assert.deepStrictEqual(after.phones, [{ phone: "+4915112345678", type: "work" }])
    assert.deepStrictEqual(after.emailes, [{ email: "tom@example.test", type: "work" }])
    assert.deepStrictEqual(after.contactAccounts.map((a: any) => [a.channel_type, a.external_id]), [["msgr_b", "tg-1"], ["msgr_a", "4915112345678"]])
    // The kept account is the same row (its thread still points at it) and keeps the username the provider gave.
    assert.strictEqual(after.contactAccounts[0].id, accountId)
    assert.strictEqual(after.contactAccounts[0].username, "tom")
    const [thread] = await query<{ contact_account_id: number }>(server, "SELECT contact_account_id FROM threads WHERE conversation_id = $1", [received.conversation_id])
    assert.strictEqual(thread.contact_account_id, accountId)

    const renamed = await request(server, "PATCH", `/v1/contacts/${contact_id}`, {
      token: company.token,
      body: { firstName: "Thomas", displayName: null, contactAccounts: [{ channel_type: "msgr_a", external_id: "4915112345678" }] }
    })
    assert.strictEqual(renamed.status, 200, JSON.stringify(renamed.body))
    assert.strictEqual(renamed.body.data.displayName, "Thomas Hill")
    assert.deepStrictEqual(renamed.body.data.phones, after.phones)
    assert.deepStrictEqual(renamed.body.data.contactAccounts.map((a: any) => a.external_id), ["4915112345678"])
    const [detached] = await query<{ contact_account_id: number | null }>(server, "SELECT contact_account_id FROM threads WHERE conversation_id = $1", [received.conversation_id])
    assert.strictEqual(detached.contact_account_id, null)

    const cleared = await request(server, "PATCH", `/v1/contacts/${contact_id}`, { token: company.token, body: { phones: [], emailes: [] } })
    assert.deepStrictEqual([cleared.body.data.phones, cleared.body.data.emailes], [[], []])

    const updates = await eventsOf(server, company.id, "contact.updated")
    assert.strictEqual(updates.length, 3)
    assert.deepStrictEqual(updates[0].payload.changes.sort(), ["company", "contactAccounts", "emailes", "phones", "status"])
  })

  it("DELETE soft-deletes: gone from reads and lists, conversation kept, accounts released for a new lead", async () => {
    const company = await createCompany(server)
    const channelId = await createChannel(server, company.token, "msgr_b")
    const first = await inbound(server, company.token, channelId, { from: { external_id: "returning" } })
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [first.conversation_id])

    const res = await request(server, "DELETE", `/v1/contacts/${contact_id}`, { token: company.token })
    assert.deepStrictEqual([res.status, res.body], [200, { data: { message: "Contact deleted." } }])
    assert.strictEqual((await getContact(server, company.token, contact_id)).status, 404)
    assert.strictEqual((await request(server, "DELETE", `/v1/contacts/${contact_id}`, { token: company.token })).status, 404)
    assert.ok(!(await list(company.token)).body.data.items.some((c: any) => c.id === contact_id))
    const [row] = await query<{ deleted: boolean }>(server, "SELECT deleted_at IS NOT NULL AS deleted FROM contacts WHERE id = $1", [contact_id])
    assert.strictEqual(row.deleted, true)
    assert.strictEqual((await query(server, "SELECT 1 FROM conversations WHERE id = $1", [first.conversation_id])).length, 1)
    const [event] = await eventsOf(server, company.id, "contact.deleted")
    assert.deepStrictEqual(event.payload, { contact_id })

    const again = await inbound(server, company.token, channelId, { from: { external_id: "returning" } })
    assert.notStrictEqual(again.conversation_id, first.conversation_id)
  })

  it("checks permissions: an agent reads, creates and updates but cannot delete", async () => {
    const company = await createCompany(server)
    const agent = await addUser(server, company.id, { role: "agent" })
    const login = await mobileLogin(server, agent.email, agent.password)
    const token = login.body.data.token as string
    const contact = await createContact(server, token, { firstName: "By agent" })
    assert.strictEqual((await request(server, "PATCH", `/v1/contacts/${contact.id}`, { token, body: { status: "active" } })).status, 200)
    assert.strictEqual((await request(server, "DELETE", `/v1/contacts/${contact.id}`, { token })).status, 403)
  })
})

describe("contacts list", () => {
  it("pages with perPage 5-100 (default 10), sorts, and filters statuses[] (lead → 422)", async () => {
    const company = await createCompany(server)
    const names = ["delta", "Alpha", "charlie", "bravo", "echo", "foxtrot"]
    const made: Array<any> = []
    for (const [i, name] of names.entries()) {
      made.push(await createContact(server, company.token, { displayName: name, status: i % 2 === 0 ? "active" : "inactive", company: i === 0 ? null : `Co ${name}` }))
    }
    const lead = await createContact(server, company.token, { displayName: "lead one" })

    const all = await list(company.token)
    assert.strictEqual(all.status, 200)
    assert.deepStrictEqual(all.body.data.pagination, { page: 1, perPage: 10, total: 7, lastPage: 1 })
    // Default: newest first.
    assert.deepStrictEqual(all.body.data.items.map((c: any) => c.id), [lead, ...made].map((c) => c.id).sort((a, b) => b - a))

    const byName = await list(company.token, "?sortBy=display_name&sortDir=asc&perPage=5")
    assert.deepStrictEqual(byName.body.data.items.map((c: any) => c.displayName), ["Alpha", "bravo", "charlie", "delta", "echo"])
    assert.deepStrictEqual(byName.body.data.pagination, { page: 1, perPage: 5, total: 7, lastPage: 2 })
    const page2 = await list(company.token, "?sortBy=display_name&sortDir=asc&perPage=5&page=2")
    assert.deepStrictEqual(page2.body.data.items.map((c: any) => c.displayName), ["foxtrot", "lead one"])
    const byCompany = await list(company.token, "?sortBy=company&sortDir=asc")
    assert.strictEqual(byCompany.body.data.items[0].company, "Co Alpha")
    const byId = await list(company.token, "?sortBy=id&sortDir=asc")
    assert.deepStrictEqual(byId.body.data.items.map((c: any) => c.id), [...made, lead].map((c) => c.id))

    const active = await list(company.token, "?statuses[]=active")
    assert.deepStrictEqual(active.body.data.items.map((c: any) => c.displayName).sort(), ["charlie", "delta", "echo"])
    const both = await list(company.token, "?statuses[]=active&statuses[]=inactive")
    assert.strictEqual(both.body.data.pagination.total, 6)

    const withLead = await list(company.token, "?statuses[]=active&statuses[]=lead")
    assert.strictEqual(withLead.status, 422)
    assert.ok(Object.keys(withLead.body.errors)[0].startsWith("statuses[]"), JSON.stringify(withLead.body))
    for (const query of ["?perPage=4", "?perPage=101", "?page=0", "?sortBy=email", "?sortDir=up", "?exclude_lid_only=2"]) {
      assert.strictEqual((await list(company.token, query)).status, 422, query)
    }
  })

  it("searches names, company, e-mails, usernames and phone digits", async () => {
    const company = await createCompany(server)
    const ann = await createContact(server, company.token, { firstName: "Ann", lastName: "Lee", phones: [{ phone: "+14155550123" }] })
    const bob = await createContact(server, company.token, { firstName: "Bob", company: "Zeta_Works", emailes: [{ email: "bob@corp.test" }] })
    const kit = await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_b", external_id: "1", username: "kitty" }] })
    const ids = async (search: string) =>
      (await list(company.token, `?search=${encodeURIComponent(search)}`)).body.data.items.map((c: any) => c.id).sort()
    assert.deepStrictEqual(await ids("lee"), [ann.id])
    assert.deepStrictEqual(await ids("555-01"), [ann.id])
    assert.deepStrictEqual(await ids("zeta_"), [bob.id])
    assert.deepStrictEqual(await ids("CORP.test"), [bob.id])
    assert.deepStrictEqual(await ids("itt"), [kit.id])
    // LIKE wildcards are literal.
    assert.deepStrictEqual(await ids("%"), [])
  })

  it("hides contacts whose only accounts are unresolved @lid ids unless exclude_lid_only=0", async () => {
    const company = await createCompany(server)
    const lidOnly = await createContact(server, company.token, { displayName: "Lid", contactAccounts: [{ channel_type: "msgr_a", external_id: "1234567@lid" }] })
    const lidWithPhone = await createContact(server, company.token, {
      displayName: "Lid with phone",
      phones: [{ phone: "+14155550100" }],
      contactAccounts: [{ channel_type: "msgr_a", external_id: "7654321@lid" }]
    })
    const mixed = await createContact(server, company.token, {
      displayName: "Mixed",
      contactAccounts: [{ channel_type: "msgr_a", external_id: "999@lid" }, { channel_type: "msgr_b", external_id: "55" }]
    })
    const plain = await createContact(server, company.token, { displayName: "Plain" })
    const resolved = await createContact(server, company.token, { displayName: "Resolved lid", contactAccounts: [{ channel_type: "msgr_a", external_id: "111@lid" }] })
    await query(server, "UPDATE contact_accounts SET phone = '+14155550111' WHERE contact_id = $1", [resolved.id])

    const ids = async (query: string) => (await list(company.token, query)).body.data.items.map((c: any) => c.id).sort((a: number, b: number) => a - b)
    const visible = [lidWithPhone.id, mixed.id, plain.id, resolved.id].sort((a, b) => a - b)
    assert.deepStrictEqual(await ids(""), visible)
    assert.deepStrictEqual(await ids("?exclude_lid_only=1"), visible)
    assert.deepStrictEqual(await ids("?exclude_lid_only=0"), [lidOnly.id, ...visible].sort((a, b) => a - b))
  })
})

describe("lookup, channel options and identifiers", () => {
  it("lookup matches phones, account external ids and usernames, at most 20", async () => {
    const company = await createCompany(server)
    const ann = await createContact(server, company.token, { firstName: "Ann", phones: [{ phone: "+14155550123" }] })
    const kit = await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_b", external_id: "tg-42", username: "Kitty" }] })
    await createContact(server, company.token, { firstName: "Lee" })
    const ids = async (q: string) => (await request(server, "GET", `/v1/contacts/lookup?q=${encodeURIComponent(q)}`, { token: company.token })).body.data.map((c: any) => c.id)
    assert.deepStrictEqual(await ids("4155550123"), [ann.id])
    assert.deepStrictEqual(await ids("+1 415 555"), [ann.id])
    assert.deepStrictEqual(await ids("tg-4"), [kit.id])
    assert.deepStrictEqual(await ids("@kitty"), [kit.id])
    // Names are not lookup keys.
    assert.deepStrictEqual(await ids("Lee"), [])
    assert.strictEqual((await request(server, "GET", "/v1/contacts/lookup", { token: company.token })).status, 422)

    for (let i = 0; i < 22; i++) await createContact(server, company.token, { phones: [{ phone: `+1202555${String(1000 + i)}` }] })
    const many = await request(server, "GET", "/v1/contacts/lookup?q=1202555", { token: company.token })
    assert.strictEqual(many.body.data.length, 20)
  })

  it("channel-options lists every channel type with the company's channel count", async () => {
    const company = await createCompany(server)
    await createChannel(server, company.token, "msgr_b")
    await createChannel(server, company.token, "msgr_b")
    await createChannel(server, company.token, "msgr_a_business")
    const res = await request(server, "GET", "/v1/contacts/channel-options", { token: company.token })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data.map((o: any) => [o.channel_type, o.channels_count]), [
      ["msgr_a", 0],
      ["msgr_a_business", 1],
      ["msgr_b", 2],
      ["msgr_c_business", 0]
    ])
    assert.ok(res.body.data.every((o: any) => typeof o.label === "string" && o.label !== ""))
  })

  it("resolve-identifiers maps phones (E.164), usernames and external ids to contact ids, null when unknown", async () => {
    const company = await createCompany(server)
    const ann = await createContact(server, company.token, { firstName: "Ann", phones: [{ phone: "+14155550123" }] })
    const kit = await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_b", external_id: "tg-7", username: "Kit" }] })
    const wa = await createContact(server, company.token, { contactAccounts: [{ channel_type: "msgr_a_business", external_id: "447911123999" }] })
    const identifiers = [
      { phone: "001 415 555 0123" },
      { phone: "+44 7911 123999" },
      { username: "@kit" },
      { username: "kit", channel_type: "msgr_a" },
      { external_id: "tg-7", channel_type: "msgr_b" },
      { external_id: "nobody" }
    ]
    const res = await request(server, "POST", "/v1/contacts/resolve-identifiers", { token: company.token, body: { identifiers } })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data.map((r: any) => r.contact_id), [ann.id, wa.id, kit.id, null, kit.id, null])
    assert.deepStrictEqual(res.body.data[0].identifier, identifiers[0])

    assert.deepStrictEqual(res.body.data.map((r: any) => r.reason), [null, null, null, "not_found", null, "not_found"])
    assert.deepStrictEqual(res.body.data[5], { identifier: identifiers[5], contact_id: null, reason: "not_found", message: null })
  })

  it("resolve-identifiers answers every item of a batch with a bad one, each with its reason; only the shape is refused", async () => {
    const company = await createCompany(server)
    const ann = await createContact(server, company.token, { firstName: "Ann", phones: [{ phone: "+14155550123" }] })
    const identifiers = [
      { phone: "12" },
      { phone: "+14155550123" },
      { channel_type: "msgr_b" },
      { username: "   " },
      { phone: "x".repeat(255) },
      { external_id: "y".repeat(255) },
      { phone: "+14155550199" }
    ]
    const res = await request(server, "POST", "/v1/contacts/resolve-identifiers", { token: company.token, body: { identifiers } })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    assert.deepStrictEqual(res.body.data.map((r: any) => [r.contact_id, r.reason]), [
      [null, "invalid_phone"],
      [ann.id, null],
      [null, "no_identifier"],
      [null, "no_identifier"],
      [null, "invalid_phone"],
      [null, "not_found"],
      [null, "not_found"]
    ])
    assert.deepStrictEqual(res.body.data.map((r: any) => r.identifier), identifiers)
    assert.match(res.body.data[0].message, /phone/)
    assert.strictEqual(res.body.data[1].message, null)

    for (const body of [
      { identifiers: [] },
      { identifiers: "+14155550123" },
      { identifiers: { phone: "+14155550123" } },
      { identifiers: Array.from({ length: 501 }, () => ({ phone: "+14155550123" })) },
      { identifiers: [{ phone: 14155550123 }] },
      { identifiers: [{ username: "kit", channel_type: "fax" }] },
      { identifiers: [{ external_id: "y".repeat(256) }] },
      {}
    ]) {
      const refused = await request(server, "POST", "/v1/contacts/resolve-identifiers", { token: company.token, body })
      assert.strictEqual(refused.status, 422, JSON.stringify(body).slice(0, 80))
      assert.isTrue(Object.keys(refused.body.errors).every((key) => key.startsWith("identifiers")), JSON.stringify(refused.body))
    }
  })
})

describe("contacts across companies", () => {
  it("answers another company's contact with 404 Contact not found. on every route", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const contact = await createContact(server, owner.token, { firstName: "Private", phones: [{ phone: "+14155550999" }], contactAccounts: [{ channel_type: "msgr_b", external_id: unique("x") }] })
    const mine = await createContact(server, other.token, { firstName: "Mine" })
    const tag = (await request(server, "POST", "/v1/tags", { token: other.token, body: { name: "t" } })).body.data
    const routes: Array<[string, string, unknown?]> = [
      ["GET", `/v1/contacts/${contact.id}`],
      ["PATCH", `/v1/contacts/${contact.id}`, { firstName: "Stolen" }],
      ["DELETE", `/v1/contacts/${contact.id}`],
      ["POST", `/v1/contacts/${contact.id}/merge`, { target_contact_id: mine.id }],
      ["POST", `/v1/contacts/${contact.id}/tags`, { tag_ids: [tag.id] }],
      ["POST", `/v1/contacts/${contact.id}/opt-out`],
      ["POST", `/v1/contacts/${contact.id}/opt-in`],
      ["GET", `/v1/contacts/${contact.id}/block-preview`],
      ["POST", `/v1/contacts/${contact.id}/block`, { reason: "x" }],
      ["POST", `/v1/contacts/${contact.id}/unblock`]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: other.token, body })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Contact not found." }], `${method} ${path}`)
    }
    // Nor does it leak through lists, lookup or resolution.
    assert.deepStrictEqual((await list(other.token)).body.data.items.map((c: any) => c.id), [mine.id])
    assert.deepStrictEqual((await request(server, "GET", "/v1/contacts/lookup?q=4155550999", { token: other.token })).body.data, [])
    const resolved = await request(server, "POST", "/v1/contacts/resolve-identifiers", { token: other.token, body: { identifiers: [{ phone: "+14155550999" }] } })
    assert.strictEqual(resolved.body.data[0].contact_id, null)
    // Merging into another company's contact is a bad target, not a merge.
    const into = await request(server, "POST", `/v1/contacts/${mine.id}/merge`, { token: other.token, body: { target_contact_id: contact.id } })
    assert.strictEqual(into.status, 422)
    assert.strictEqual((await getContact(server, owner.token, contact.id)).body.data.firstName, "Private")
  })

  it("lists the contact events in the system-events catalog", async () => {
    const company = await createCompany(server)
    const res = await request(server, "GET", "/v1/system-events?type=contact", { token: company.token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const keys = (res.body.data as Array<{ key: string }>).map((e) => e.key)
    for (const key of ["contact.created", "contact.updated", "contact.merged", "contact.deleted", "contact.blocked", "contact.unblocked", "contact.opted_out", "contact.opted_in"]) {
      assert.ok(keys.includes(key), key)
    }
  })
})
