import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import type { ConditionInput, GroupLogic } from "../../src/segments/Domain.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { query } from "../support/Sql.ts"
import { converse, createChannel, createContact, createTag, estimate, membersOf } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

/** A calendar date `n` days back (UTC), as the conditions take it. */
const dayAgo = (n: number) => new Date(Date.now() - n * 86_400_000).toISOString().slice(0, 10)

/**
 * Four live contacts and a deleted one, in their own company, with another company's contact
 * tagged and on a channel alongside:
 *
 * | | tags | channels (inbound days ago) | status | created | last message | custom |
 * |---|---|---|---|---|---|---|
 * | anna | vip, lead | ch1 (2), ch1 (60) | opted out | 100 d | 2 d | plan pro, city Almaty |
 * | boris | vip | ch2 (40) | blocked | 10 d | 40 d | plan free |
 * | carla | cold | ch1 (-), ch2 (-) | active | 1 d | 1 d | plan 5 |
 * | dmitri | | | active | now | | |
 * | gone (deleted) | vip | ch1 (1) | active | now | 1 d | plan pro |
 */
const seed = async () => {
  const company = await createCompany(server)
  const token = company.token
  const vip = await createTag(server, token, "vip")
  const lead = await createTag(server, token, "lead")
  const cold = await createTag(server, token, "cold")
  const ch1 = await createChannel(server, company.id, "msgr_a", "Main")
  const ch2 = await createChannel(server, company.id, "msgr_b", "Support")
  const anna = (await createContact(server, token, {
    firstName: "Anna",
    lastName: "Smith",
    company: "Acme",
    phones: [{ phone: "+7 916 111-22-33" }],
    emailes: [{ email: "anna@acme.test" }]
  })).id as number
  const boris = (await createContact(server, token, { firstName: "Boris", lastName: "Ivanov", emailes: [{ email: "boris@x.test" }] })).id as number
  const carla = (await createContact(server, token, { firstName: "Carla", displayName: "Carla 50%_off" })).id as number
  const dmitri = (await createContact(server, token, { firstName: "Dmitri" })).id as number
  const gone = (await createContact(server, token, { firstName: "Gone" })).id as number

  const tag = async (contact: number, tagIds: Array<number>) => {
    const res = await request(server, "POST", `/v1/contacts/${contact}/tags`, { token, body: { tag_ids: tagIds } })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  }
  await tag(anna, [vip, lead])
  await tag(boris, [vip])
  await tag(carla, [cold])
  await tag(gone, [vip])
  await converse(server, company.id, anna, 2, [{ channelId: ch1, inboundDaysAgo: 2 }, { channelId: ch1, inboundDaysAgo: 60 }])
  await converse(server, company.id, boris, 40, [{ channelId: ch2, inboundDaysAgo: 40 }])
  await converse(server, company.id, carla, 1, [{ channelId: ch1, inboundDaysAgo: null }, { channelId: ch2, inboundDaysAgo: null }])
  await converse(server, company.id, gone, 1, [{ channelId: ch1, inboundDaysAgo: 1 }])
  const set = (id: number, assignments: string, params: Array<unknown> = []) =>
    query(server, `UPDATE contacts SET ${assignments} WHERE id = $1`, [id, ...params])
  await set(anna, "opted_out_at = now(), created_at = now() - interval '100 days', custom_fields = $2::jsonb", [JSON.stringify({ plan: "pro", city: "Almaty" })])
  await set(boris, "blocked_at = now(), created_at = now() - interval '10 days', custom_fields = $2::jsonb", [JSON.stringify({ plan: "free" })])
  await set(carla, "created_at = now() - interval '1 day', custom_fields = $2::jsonb", [JSON.stringify({ plan: 5 })])
  await set(gone, "custom_fields = $2::jsonb", [JSON.stringify({ plan: "pro" })])
  assert.strictEqual((await request(server, "DELETE", `/v1/contacts/${gone}`, { token })).status, 200)

  // Another company's contact that matches nearly everything must never show up.
  const other = await createCompany(server)
  const otherTag = await createTag(server, other.token, "vip")
  const otherChannel = await createChannel(server, other.id, "msgr_a", "Main")
  const stranger = (await createContact(server, other.token, { firstName: "Anna", phones: [{ phone: "+7 916 111-22-33" }] })).id as number
  await request(server, "POST", `/v1/contacts/${stranger}/tags`, { token: other.token, body: { tag_ids: [otherTag] } })
  await converse(server, other.id, stranger, 1, [{ channelId: otherChannel, inboundDaysAgo: 1 }])
  await set(stranger, "custom_fields = $2::jsonb", [JSON.stringify({ plan: "pro", city: "Almaty" })])

  return { company, token, ids: { vip, lead, cold, ch1, ch2 }, contacts: { anna, boris, carla, dmitri } }
}

let data: Awaited<ReturnType<typeof seed>>
beforeAll(async () => {
  data = await seed()
})

type Name = "anna" | "boris" | "carla" | "dmitri"
type Case = readonly [string, ReadonlyArray<ConditionInput>, ReadonlyArray<Name>, GroupLogic?]

const cases = (): ReadonlyArray<Case> => {
  const { ch1, ch2, cold, lead, vip } = data.ids
  const c = (type: string, operator: string, value?: unknown, field_name?: string, group?: number): ConditionInput => ({
    type,
    operator,
    value,
    ...(field_name === undefined ? {} : { field_name }),
    ...(group === undefined ? {} : { group })
  })
  return [
    ["no conditions: every live contact", [], ["anna", "boris", "carla", "dmitri"]],
    ["tag has_any", [c("tag", "has_any", [lead, cold])], ["anna", "carla"]],
    ["tag has_any (one id, not a list)", [c("tag", "has_any", vip)], ["anna", "boris"]],
    ["tag has_all", [c("tag", "has_all", [vip, lead])], ["anna"]],
    ["tag has_none", [c("tag", "has_none", [vip])], ["carla", "dmitri"]],
    ["channel in", [c("channel", "in", [ch1])], ["anna", "carla"]],
    ["channel in (two)", [c("channel", "in", [ch1, ch2])], ["anna", "boris", "carla"]],
    ["channel not_in", [c("channel", "not_in", [ch1])], ["boris", "dmitri"]],
    ["status is opted_out", [c("status", "is", "opted_out")], ["anna"]],
    ["status is blocked", [c("status", "is", "blocked")], ["boris"]],
    ["status is active", [c("status", "is", "active")], ["carla", "dmitri"]],
    ["status is_not active", [c("status", "is_not", "active")], ["anna", "boris"]],
    ["status is_not opted_out", [c("status", "is_not", "opted_out")], ["boris", "carla", "dmitri"]],
    ["created_at within_last_days", [c("date", "within_last_days", 30, "created_at")], ["boris", "carla", "dmitri"]],
    ["created_at not_within_last_days", [c("date", "not_within_last_days", 30, "created_at")], ["anna"]],
    ["created_at before a date", [c("date", "before", dayAgo(50), "created_at")], ["anna"]],
    ["created_at after a date (from the next day)", [c("date", "after", dayAgo(5), "created_at")], ["carla", "dmitri"]],
    ["created_at between two dates (both days whole)", [c("date", "between", [dayAgo(20), dayAgo(0)], "created_at")], ["boris", "carla", "dmitri"]],
    ["last_message_at within_last_days", [c("date", "within_last_days", 30, "last_message_at")], ["anna", "carla"]],
    ["last_message_at not_within_last_days (never counts)", [c("date", "not_within_last_days", 30, "last_message_at")], ["boris", "dmitri"]],
    ["last_message_at before", [c("date", "before", dayAgo(20), "last_message_at")], ["boris"]],
    ["last_message_at after an instant", [c("date", "after", new Date(Date.now() - 3 * 86_400_000).toISOString(), "last_message_at")], ["anna", "carla"]],
    ["last_message_at between", [c("date", "between", [dayAgo(45), dayAgo(30)], "last_message_at")], ["boris"]],
    ["last_inbound_at within_last_days", [c("date", "within_last_days", 7, "last_inbound_at")], ["anna"]],
    ["last_inbound_at not_within_last_days", [c("date", "not_within_last_days", 7, "last_inbound_at")], ["boris", "carla", "dmitri"]],
    ["last_inbound_at before: the latest counts", [c("date", "before", dayAgo(10), "last_inbound_at")], ["boris"]],
    ["last_inbound_at between: an older thread does not count", [c("date", "between", [dayAgo(70), dayAgo(50)], "last_inbound_at")], []],
    ["field first_name is (any case)", [c("field", "is", "ANNA", "first_name")], ["anna"]],
    ["field first_name is_not", [c("field", "is_not", "anna", "first_name")], ["boris", "carla", "dmitri"]],
    ["field display_name contains % literally", [c("field", "contains", "%", "display_name")], ["carla"]],
    ["field display_name contains _ literally", [c("field", "contains", "_o", "display_name")], ["carla"]],
    ["field last_name starts_with", [c("field", "starts_with", "iv", "last_name")], ["boris"]],
    ["field company_name is_empty", [c("field", "is_empty", null, "company_name")], ["boris", "carla", "dmitri"]],
    ["field company_name is_not_empty", [c("field", "is_not_empty", null, "company_name")], ["anna"]],
    ["field phone is (by digits)", [c("field", "is", "+7 (916) 111-22-33", "phone")], ["anna"]],
    ["field phone contains", [c("field", "contains", "1112", "phone")], ["anna"]],
    ["field phone is_empty", [c("field", "is_empty", null, "phone")], ["boris", "carla", "dmitri"]],
    ["field email is", [c("field", "is", "ANNA@acme.test", "email")], ["anna"]],
    ["field email is_not (no e-mail counts)", [c("field", "is_not", "anna@acme.test", "email")], ["boris", "carla", "dmitri"]],
    ["field email starts_with", [c("field", "starts_with", "boris", "email")], ["boris"]],
    ["custom is (any case)", [c("custom", "is", "PRO", "plan")], ["anna"]],
    ["custom is, a number compared as text", [c("custom", "is", 5, "plan")], ["carla"]],
    ["custom is, custom_fields. prefix", [c("custom", "is", "free", "custom_fields.plan")], ["boris"]],
    ["custom is_not (absent counts)", [c("custom", "is_not", "pro", "plan")], ["boris", "carla", "dmitri"]],
    ["custom contains", [c("custom", "contains", "lma", "city")], ["anna"]],
    ["custom starts_with", [c("custom", "starts_with", "fr", "plan")], ["boris"]],
    ["custom is_empty", [c("custom", "is_empty", null, "plan")], ["dmitri"]],
    ["custom is_not_empty", [c("custom", "is_not_empty", null, "plan")], ["anna", "boris", "carla"]],
    ["activity has_conversation", [c("activity", "has_conversation", true)], ["anna", "boris", "carla"]],
    ["activity has_conversation false", [c("activity", "has_conversation", false)], ["dmitri"]],
    ["activity replied_within_days", [c("activity", "replied_within_days", 7)], ["anna"]],
    ["activity no_reply_within_days", [c("activity", "no_reply_within_days", 7)], ["boris", "carla", "dmitri"]],
    ["one group: every condition holds", [c("tag", "has_any", [vip]), c("status", "is", "blocked")], ["boris"]],
    [
      "groups joined by or",
      [c("tag", "has_all", [vip, lead], undefined, 1), c("channel", "in", [ch2], undefined, 2), c("status", "is", "active", undefined, 2)],
      ["anna", "carla"],
      "or"
    ],
    ["groups joined by and", [c("tag", "has_any", [vip], undefined, 1), c("channel", "in", [ch1], undefined, 2)], ["anna"], "and"],
    [
      "or with a negative condition in a group",
      [c("tag", "has_none", [vip, cold], undefined, 1), c("status", "is", "blocked", undefined, 2)],
      ["boris", "dmitri"],
      "or"
    ]
  ]
}

describe("segment conditions against a known dataset", () => {
  it("each type and operator selects exactly the expected live contacts, and estimate counts them", async () => {
    const failures: Array<string> = []
    for (const [label, conditions, expected, groupLogic] of cases()) {
      const want = expected.map((name) => data.contacts[name]).sort((a, b) => a - b)
      const got = await membersOf(server, data.company.id, conditions, groupLogic)
      if (JSON.stringify(got) !== JSON.stringify(want)) failures.push(`${label}: members ${JSON.stringify(got)} != ${JSON.stringify(want)}`)
      const count = await estimate(server, data.token, conditions, groupLogic)
      if (count !== want.length) failures.push(`${label}: estimate ${count} != ${want.length}`)
    }
    assert.deepStrictEqual(failures, [])
  })

  it("a saved segment stores the normalized conditions, a summary and its count", async () => {
    const { ch1, lead, vip } = data.ids
    const res = await request(server, "POST", "/v1/segments", {
      token: data.token,
      body: {
        name: "VIP on Main or blocked",
        group_logic: "or",
        conditions: [
          { group: 1, type: "tag", operator: "has_any", value: [vip, lead, vip] },
          { group: 1, type: "channel", operator: "in", value: [ch1] },
          { group: 2, type: "status", operator: "is", value: "blocked", field_name: null }
        ]
      }
    })
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    const segment = res.body.data
    assert.strictEqual(segment.conditions_summary, "(Has any of the tags vip, lead and is on channel Main) or is blocked.")
    assert.deepStrictEqual(segment.conditions[0], { group: 1, type: "tag", operator: "has_any", value: [vip, lead], field_name: null })
    assert.strictEqual(segment.estimated_count, 2)
    assert.deepStrictEqual([segment.members, segment.contacts_count], [null, null])
  })
})
