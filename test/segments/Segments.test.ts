import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { eventsOf } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { createChannel, createContact, createSegment, createTag, estimate } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const SegmentKeys = [
  "company_id",
  "conditions",
  "conditions_summary",
  "contacts_count",
  "created_at",
  "description",
  "estimated_count",
  "group_logic",
  "id",
  "members",
  "name",
  "slug",
  "type",
  "updated_at"
]

const errorsOf = async (token: string, method: string, path: string, body: unknown) => {
  const res = await request(server, method, path, { token, body })
  assert.strictEqual(res.status, 422, JSON.stringify(res.body))
  assert.strictEqual(typeof res.body.message, "string")
  return res.body.errors
}

describe("segments", () => {
  it("creates a dynamic segment: string id, slug unique per company, summary and count; lists with search and paging", async () => {
    const company = await createCompany(server)
    const token = company.token
    const vip = await createTag(server, token, "VIP")
    const a = await createContact(server, token, { firstName: "A" })
    await createContact(server, token, { firstName: "B" })
    await request(server, "POST", `/v1/contacts/${a.id}/tags`, { token, body: { tag_ids: [vip] } })

    const first = await createSegment(server, token, {
      name: "  Ünïcode VIP clients! ",
      description: "Paying",
      conditions: [{ type: "tag", operator: "has_any", value: [vip] }]
    })
    assert.deepStrictEqual(Object.keys(first).sort(), SegmentKeys)
    assert.strictEqual(typeof first.id, "string")
    assert.deepStrictEqual(
      [first.name, first.slug, first.description, first.type, first.group_logic, first.company_id],
      ["Ünïcode VIP clients!", "unicode-vip-clients", "Paying", "dynamic", "and", company.id]
    )
    assert.deepStrictEqual([first.estimated_count, first.conditions_summary], [1, "Has any of the tags VIP."])
    const second = await createSegment(server, token, { name: "Unicode vip clients", conditions: [] })
    const third = await createSegment(server, token, { name: "unicode VIP   clients", conditions: [] })
    assert.deepStrictEqual([second.slug, third.slug], ["unicode-vip-clients-2", "unicode-vip-clients-3"])
    assert.deepStrictEqual([second.estimated_count, second.conditions_summary], [2, "All contacts."])
    const cyrillic = await createSegment(server, token, { name: "Постоянные клиенты" })
    assert.strictEqual(cyrillic.slug, "постоянные-клиенты")
    // Slugs are per company.
    const other = await createCompany(server)
    assert.strictEqual((await createSegment(server, other.token, { name: "Unicode VIP clients" })).slug, "unicode-vip-clients")

    const listed = await request(server, "GET", "/v1/segments", { token })
    assert.strictEqual(listed.status, 200)
    assert.deepStrictEqual(listed.body.data.items.map((s: any) => s.id), [cyrillic.id, third.id, second.id, first.id])
    assert.deepStrictEqual(listed.body.data.pagination, { page: 1, perPage: 50, total: 4, lastPage: 1 })
    const paged = await request(server, "GET", "/v1/segments?perPage=2&page=2", { token })
    assert.deepStrictEqual(paged.body.data.items.map((s: any) => s.id), [second.id, first.id])
    assert.deepStrictEqual(paged.body.data.pagination, { page: 2, perPage: 2, total: 4, lastPage: 2 })
    const searched = await request(server, "GET", `/v1/segments?search=${encodeURIComponent("PAYING")}`, { token })
    assert.deepStrictEqual(searched.body.data.items.map((s: any) => s.id), [first.id])
    const literal = await request(server, "GET", `/v1/segments?search=${encodeURIComponent("%")}`, { token })
    assert.deepStrictEqual(literal.body.data.items, [])

    const created = await eventsOf(server, company.id, "segment.created")
    assert.strictEqual(created.length, 4)
    assert.strictEqual(created[0].payload.id, first.id)
  })

  it("PATCH and its POST alias change name, slug, conditions and count; the type is fixed", async () => {
    const company = await createCompany(server)
    const token = company.token
    const vip = await createTag(server, token, "vip")
    const c1 = await createContact(server, token, { firstName: "One" })
    await createContact(server, token, { firstName: "Two" })
    await request(server, "POST", `/v1/contacts/${c1.id}/tags`, { token, body: { tag_ids: [vip] } })
    const segment = await createSegment(server, token, { name: "Everyone" })
    assert.strictEqual(segment.estimated_count, 2)

    const patched = await request(server, "PATCH", `/v1/segments/${segment.id}`, {
      token,
      body: { name: "Tagged", conditions: [{ type: "tag", operator: "has_any", value: [vip] }] }
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.deepStrictEqual(
      [patched.body.data.name, patched.body.data.slug, patched.body.data.estimated_count, patched.body.data.conditions_summary],
      ["Tagged", "tagged", 1, "Has any of the tags vip."]
    )
    const posted = await request(server, "POST", `/v1/segments/${segment.id}`, {
      token,
      body: { description: "by POST", conditions: [{ type: "tag", operator: "has_none", value: [vip] }] }
    })
    assert.strictEqual(posted.status, 200, JSON.stringify(posted.body))
    assert.deepStrictEqual(
      [posted.body.data.name, posted.body.data.slug, posted.body.data.description, posted.body.data.estimated_count],
      ["Tagged", "tagged", "by POST", 1]
    )
    // Absent conditions are kept; the count is refreshed on every save.
    await createContact(server, token, { firstName: "Three" })
    const renamed = await request(server, "PATCH", `/v1/segments/${segment.id}`, { token, body: { group_logic: "or" } })
    assert.deepStrictEqual([renamed.body.data.conditions.length, renamed.body.data.estimated_count], [1, 2])
    // Changing only the group logic recounts with the new logic.
    const both = await request(server, "PATCH", `/v1/segments/${segment.id}`, {
      token,
      body: {
        group_logic: "and",
        conditions: [
          { group: 1, type: "tag", operator: "has_any", value: [vip] },
          { group: 2, type: "field", operator: "is", value: "two", field_name: "first_name" }
        ]
      }
    })
    assert.strictEqual(both.body.data.estimated_count, 0)
    const either = await request(server, "POST", `/v1/segments/${segment.id}`, { token, body: { group_logic: "or" } })
    assert.deepStrictEqual(
      [either.body.data.estimated_count, either.body.data.conditions_summary],
      [2, "Has any of the tags vip or first name is \"two\"."]
    )

    assert.deepStrictEqual(await errorsOf(token, "PATCH", `/v1/segments/${segment.id}`, { type: "static" }), {
      type: ["The type of a segment cannot be changed."]
    })
    assert.deepStrictEqual(await errorsOf(token, "POST", `/v1/segments/${segment.id}`, { name: " " }), {
      name: ["The name field is required."]
    })
    assert.deepStrictEqual(
      await errorsOf(token, "PATCH", `/v1/segments/${segment.id}`, { conditions: [{ type: "tag", operator: "has", value: [vip] }] }),
      { "conditions.0.operator": ["The selected conditions.0.operator is invalid."] }
    )
    const updates = await eventsOf(server, company.id, "segment.updated")
    assert.strictEqual(updates.length, 5)
  })

  it("answers 422 on conditions.<i>.<key> for unknown types, operators, fields and values of the wrong shape, and saves nothing", async () => {
    const company = await createCompany(server)
    const token = company.token
    const vip = await createTag(server, token, "vip")
    const foreign = await createTag(server, (await createCompany(server)).token, "theirs")
    const bad: ReadonlyArray<readonly [unknown, Record<string, Array<string>>]> = [
      [{ type: "bogus", operator: "is", value: 1 }, { "conditions.0.type": ["The selected conditions.0.type is invalid."] }],
      [{ type: "tag", operator: "in", value: [vip] }, { "conditions.0.operator": ["The selected conditions.0.operator is invalid."] }],
      [{ type: "tag", operator: "has_any", value: [] }, { "conditions.0.value": ["The conditions.0.value field must be a list of 1 to 1000 tag ids."] }],
      [{ type: "tag", operator: "has_any", value: "vip" }, { "conditions.0.value": ["The conditions.0.value field must be a list of 1 to 1000 tag ids."] }],
      [{ type: "tag", operator: "has_any", value: [foreign] }, { "conditions.0.value": ["The selected conditions.0.value has an unknown tag id."] }],
      [{ type: "channel", operator: "in", value: [999999999] }, { "conditions.0.value": ["The selected conditions.0.value has an unknown channel id."] }],
      [{ type: "status", operator: "is", value: "vip" }, { "conditions.0.value": ["The conditions.0.value field must be one of: opted_out, blocked, active."] }],
      [{ type: "status", operator: "equals", value: "blocked" }, { "conditions.0.operator": ["The selected conditions.0.operator is invalid."] }],
      [
        { type: "date", operator: "before", value: "2026-01-01" },
        { "conditions.0.field_name": ["The conditions.0.field_name field must be one of: created_at, last_message_at, last_inbound_at."] }
      ],
      [
        { type: "date", operator: "before", value: "2026-02-30", field_name: "created_at" },
        { "conditions.0.value": ["The conditions.0.value field must be a date (YYYY-MM-DD or ISO 8601)."] }
      ],
      [
        { type: "date", operator: "between", value: ["2026-03-01"], field_name: "created_at" },
        { "conditions.0.value": ["The conditions.0.value field must be two dates (YYYY-MM-DD or ISO 8601), from and to."] }
      ],
      [
        { type: "date", operator: "between", value: ["2026-03-02", "2026-03-01"], field_name: "created_at" },
        { "conditions.0.value": ["The conditions.0.value dates must be in order: from, then to."] }
      ],
      [
        { type: "date", operator: "within_last_days", value: 0, field_name: "last_message_at" },
        { "conditions.0.value": ["The conditions.0.value field must be a whole number of days from 1 to 36500."] }
      ],
      [
        { type: "field", operator: "is", value: "x", field_name: "password" },
        { "conditions.0.field_name": ["The conditions.0.field_name field must be one of: first_name, last_name, display_name, company_name, phone, email."] }
      ],
      [
        { type: "field", operator: "contains", value: " ", field_name: "first_name" },
        { "conditions.0.value": ["The conditions.0.value field must be a non-empty text of at most 255 characters."] }
      ],
      [
        { type: "field", operator: "is", value: "abc", field_name: "phone" },
        { "conditions.0.value": ["The conditions.0.value field must contain digits to compare with phone numbers."] }
      ],
      [
        { type: "custom", operator: "is", value: { a: 1 }, field_name: "plan" },
        { "conditions.0.value": ["The conditions.0.value field must be a non-empty text of at most 255 characters."] }
      ],
      [
        { type: "custom", operator: "is", value: "x", field_name: "bad key!" },
        { "conditions.0.field_name": ["The conditions.0.field_name field must be a custom field name (letters, digits, _ . -; up to 64)."] }
      ],
      [{ type: "activity", operator: "has_conversation", value: "yes" }, { "conditions.0.value": ["The conditions.0.value field must be true or false."] }],
      [
        { type: "activity", operator: "replied_within_days", value: 1.5 },
        { "conditions.0.value": ["The conditions.0.value field must be a whole number of days from 1 to 36500."] }
      ],
      [{ type: "activity", operator: "opened" }, { "conditions.0.operator": ["The selected conditions.0.operator is invalid."] }]
    ]
    for (const [condition, errors] of bad) {
      assert.deepStrictEqual(
        await errorsOf(token, "POST", "/v1/segments", { name: "Bad", conditions: [condition] }),
        errors,
        JSON.stringify(condition)
      )
      assert.deepStrictEqual(await errorsOf(token, "POST", "/v1/segments/estimate", { conditions: [condition] }), errors)
    }
    // Each condition is reported at its own index.
    assert.deepStrictEqual(
      await errorsOf(token, "POST", "/v1/segments/estimate", {
        conditions: [{ type: "tag", operator: "has_any", value: [vip] }, { type: "status", operator: "nope", value: "active" }]
      }),
      { "conditions.1.operator": ["The selected conditions.1.operator is invalid."] }
    )
    // The outline of a condition is the schema's: a missing type is a 422 on that key.
    const outline = await errorsOf(token, "POST", "/v1/segments", { name: "X", conditions: [{ operator: "is" }] })
    assert.deepStrictEqual(Object.keys(outline), ["conditions.0.type"])
    assert.deepStrictEqual(Object.keys(await errorsOf(token, "POST", "/v1/segments", { name: "X", conditions: "all" })), ["conditions"])
    assert.deepStrictEqual(Object.keys(await errorsOf(token, "POST", "/v1/segments", { conditions: [] })), ["name"])
    assert.deepStrictEqual(Object.keys(await errorsOf(token, "POST", "/v1/segments", { name: "X", group_logic: "xor" })), ["group_logic"])
    assert.deepStrictEqual(Object.keys(await errorsOf(token, "POST", "/v1/segments/estimate", {})), ["conditions"])
    const badPage = await request(server, "GET", "/v1/segments?perPage=0", { token })
    assert.deepStrictEqual([badPage.status, Object.keys(badPage.body.errors)], [422, ["perPage"]])

    const listed = await request(server, "GET", "/v1/segments", { token })
    assert.strictEqual(listed.body.data.pagination.total, 0)
  })

  it("estimate counts live contacts of the company and saves nothing", async () => {
    const company = await createCompany(server)
    const token = company.token
    await createContact(server, token, { firstName: "Kept" })
    const gone = await createContact(server, token, { firstName: "Gone" })
    await request(server, "DELETE", `/v1/contacts/${gone.id}`, { token })
    await createContact(server, (await createCompany(server)).token, { firstName: "Elsewhere" })
    assert.strictEqual(await estimate(server, token, []), 1)
    assert.strictEqual(await estimate(server, token, [{ type: "status", operator: "is", value: "active" }], "or"), 1)
    assert.strictEqual(await estimate(server, token, [{ type: "status", operator: "is", value: "blocked" }]), 0)
    const listed = await request(server, "GET", "/v1/segments", { token })
    assert.strictEqual(listed.body.data.pagination.total, 0)
    assert.deepStrictEqual(await eventsOf(server, company.id, "segment.created"), [])
  })

  it("static segments: created with contact_ids, members added and removed, members and contacts_count filled", async () => {
    const company = await createCompany(server)
    const token = company.token
    const [a, b, c] = [
      await createContact(server, token, { firstName: "A" }),
      await createContact(server, token, { firstName: "B" }),
      await createContact(server, token, { firstName: "C" })
    ]
    const stranger = await createContact(server, (await createCompany(server)).token, { firstName: "S" })
    const segment = await createSegment(server, token, { name: "Hand-picked", type: "static", contact_ids: [b.id, a.id, b.id] })
    assert.deepStrictEqual(
      [segment.type, segment.members, segment.contacts_count, segment.estimated_count, segment.conditions, segment.conditions_summary],
      ["static", [a.id, b.id].sort((x, y) => x - y), 2, 2, [], "Static list of 2 contacts."]
    )
    const added = await request(server, "POST", `/v1/segments/${segment.id}/members`, { token, body: { contact_ids: [c.id, a.id] } })
    assert.strictEqual(added.status, 200, JSON.stringify(added.body))
    assert.deepStrictEqual([added.body.data.members, added.body.data.contacts_count], [[a.id, b.id, c.id].sort((x, y) => x - y), 3])
    const removed = await request(server, "DELETE", `/v1/segments/${segment.id}/members`, { token, body: { contact_ids: [a.id, 123456789] } })
    assert.strictEqual(removed.status, 200, JSON.stringify(removed.body))
    assert.deepStrictEqual([removed.body.data.members, removed.body.data.estimated_count], [[b.id, c.id].sort((x, y) => x - y), 2])

    // A deleted contact is never a member.
    await request(server, "DELETE", `/v1/contacts/${c.id}`, { token })
    const listed = await request(server, "GET", "/v1/segments", { token })
    assert.deepStrictEqual([listed.body.data.items[0].members, listed.body.data.items[0].contacts_count], [[b.id], 1])

    assert.deepStrictEqual(
      await errorsOf(token, "POST", `/v1/segments/${segment.id}/members`, { contact_ids: [b.id, stranger.id] }),
      { "contact_ids.1": ["The selected contact_ids.1 is invalid."] }
    )
    assert.deepStrictEqual(await errorsOf(token, "POST", "/v1/segments", { name: "S", type: "static", contact_ids: [stranger.id] }), {
      "contact_ids.0": ["The selected contact_ids.0 is invalid."]
    })
    assert.deepStrictEqual(
      await errorsOf(token, "POST", "/v1/segments", {
        name: "S",
        type: "static",
        conditions: [{ type: "status", operator: "is", value: "active" }]
      }),
      { conditions: ["A static segment has no conditions: list its members in contact_ids."] }
    )
    assert.deepStrictEqual(await errorsOf(token, "POST", "/v1/segments", { name: "D", contact_ids: [a.id] }), {
      contact_ids: ["Only a static segment has explicit members."]
    })
    assert.deepStrictEqual(Object.keys(await errorsOf(token, "POST", `/v1/segments/${segment.id}/members`, {})), ["contact_ids"])
    const dynamic = await createSegment(server, token, { name: "Dynamic" })
    const refused = await request(server, "POST", `/v1/segments/${dynamic.id}/members`, { token, body: { contact_ids: [a.id] } })
    assert.deepStrictEqual([refused.status, refused.body], [422, {
      message: "Only a static segment has explicit members.",
      error_code: "segment_not_static"
    }])
  })

  it("DELETE removes the segment and emits segment.deleted", async () => {
    const company = await createCompany(server)
    const segment = await createSegment(server, company.token, { name: "Temp" })
    const res = await request(server, "DELETE", `/v1/segments/${segment.id}`, { token: company.token })
    assert.deepStrictEqual([res.status, res.body], [200, { data: { message: "Segment deleted." } }])
    assert.strictEqual((await request(server, "DELETE", `/v1/segments/${segment.id}`, { token: company.token })).status, 404)
    assert.strictEqual((await request(server, "GET", "/v1/segments", { token: company.token })).body.data.pagination.total, 0)
    assert.deepStrictEqual((await eventsOf(server, company.id, "segment.deleted")).map((e) => e.payload), [{ id: segment.id }])
    // A freed slug can be taken again.
    assert.strictEqual((await createSegment(server, company.token, { name: "Temp" })).slug, "temp")
  })

  it("another company's segment is 404 on every segment route, and its ids are never usable", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const contact = await createContact(server, other.token, { firstName: "Mine" })
    const segment = await createSegment(server, owner.token, { name: "Private", type: "static" })
    const routes: ReadonlyArray<readonly [string, string, unknown]> = [
      ["PATCH", `/v1/segments/${segment.id}`, { name: "Stolen" }],
      ["POST", `/v1/segments/${segment.id}`, { name: "Stolen" }],
      ["DELETE", `/v1/segments/${segment.id}`, undefined],
      ["POST", `/v1/segments/${segment.id}/members`, { contact_ids: [contact.id] }],
      ["DELETE", `/v1/segments/${segment.id}/members`, { contact_ids: [contact.id] }],
      ["PATCH", "/v1/segments/not-a-number", { name: "X" }],
      ["DELETE", "/v1/segments/99999999999", undefined]
    ]
    for (const [method, path, body] of routes) {
      const res = await request(server, method, path, { token: other.token, body })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Segment not found." }], `${method} ${path}`)
    }
    assert.deepStrictEqual((await request(server, "GET", "/v1/segments", { token: other.token })).body.data.items, [])
    // Its tags and channels are unknown ids to the other company.
    const tag = await createTag(server, owner.token, "owner-tag")
    const channel = await createChannel(server, owner.id, "msgr_a", "Owner channel")
    assert.deepStrictEqual(
      await errorsOf(other.token, "POST", "/v1/segments/estimate", {
        conditions: [{ type: "tag", operator: "has_any", value: [tag] }, { type: "channel", operator: "in", value: [channel] }]
      }),
      {
        "conditions.0.value": ["The selected conditions.0.value has an unknown tag id."],
        "conditions.1.value": ["The selected conditions.1.value has an unknown channel id."]
      }
    )
    const kept = await request(server, "GET", "/v1/segments", { token: owner.token })
    assert.deepStrictEqual([kept.body.data.items[0].name, kept.body.data.items[0].members], ["Private", []])
  })

  it("an agent may list and estimate but not create, change or delete segments", async () => {
    const company = await createCompany(server)
    const segment = await createSegment(server, company.token, { name: "Team", type: "static" })
    const agent = await addUser(server, company.id, { role: "agent" })
    const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
    assert.strictEqual((await request(server, "GET", "/v1/segments", { token })).status, 200)
    assert.strictEqual((await request(server, "POST", "/v1/segments/estimate", { token, body: { conditions: [] } })).status, 200)
    for (const [method, path, body] of [
      ["POST", "/v1/segments", { name: "X" }],
      ["PATCH", `/v1/segments/${segment.id}`, { name: "X" }],
      ["POST", `/v1/segments/${segment.id}`, { name: "X" }],
      ["DELETE", `/v1/segments/${segment.id}`, undefined],
      ["POST", `/v1/segments/${segment.id}/members`, { contact_ids: [] }],
      ["DELETE", `/v1/segments/${segment.id}/members`, { contact_ids: [] }]
    ] as const) {
      assert.strictEqual((await request(server, method, path, { token, body })).status, 403, `${method} ${path}`)
    }
  })
})

describe("segment routes and garbage", () => {
  it("answer malformed bodies and ids with a 4xx JSON body, never a 500", async () => {
    const company = await createCompany(server)
    const segment = await createSegment(server, company.token, { name: "Target", type: "static" })
    const bodies = ["{not json", "[]", "null", "12345", JSON.stringify({ name: { $ne: 1 }, conditions: [{ type: 1 }], contact_ids: ["x"] }),
      JSON.stringify({ name: "x", conditions: [null, 5, { type: "tag", operator: "has_any", value: [1.5, -1, "2"] }] })]
    const failures: Array<string> = []
    for (const id of [segment.id, "999999999", "abc", "-1", "1.5", "%27%22", "99999999999999999999"]) {
      for (const [method, path] of [
        ["POST", "/v1/segments"],
        ["POST", "/v1/segments/estimate"],
        ["PATCH", `/v1/segments/${id}`],
        ["POST", `/v1/segments/${id}`],
        ["DELETE", `/v1/segments/${id}`],
        ["POST", `/v1/segments/${id}/members`],
        ["DELETE", `/v1/segments/${id}/members`]
      ] as const) {
        for (const raw of bodies) {
          const res = await request(server, method, path, { token: company.token, raw })
          const label = `${method} ${path} ${raw.slice(0, 20)} -> ${res.status}`
          // DELETE of the segment itself takes no body: it may succeed once, then 404.
          const bodyless = method === "DELETE" && !path.endsWith("/members") && res.status === 200
          if (!bodyless && (res.status >= 500 || res.status < 400 || typeof res.body?.message !== "string")) failures.push(label)
        }
      }
    }
    for (const query of ["?page=0", "?perPage=101", "?perPage=x", "?search=" + "x".repeat(300)]) {
      const res = await request(server, "GET", `/v1/segments${query}`, { token: company.token })
      if (res.status !== 422) failures.push(`GET ${query.slice(0, 20)} -> ${res.status}`)
    }
    assert.deepStrictEqual(failures, [])
  }, 120_000)
})
