import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { createChannel } from "../messages/support.ts"
import { unique } from "../support/Ids.ts"
import { payloadsOf } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { approvedTemplate, createTemplate, eventually, syncUntil, templateBody } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const call = (method: string, path: string, token: string, body?: unknown) => request(server, method, path, { token, body })

describe("templates: create and the content rules", () => {
  it("creates a draft group with one local instance per channel, and its created event", async () => {
    const a = await createCompany(server)
    const c1 = await createChannel(server, a.token, "msgr_a_business")
    const c2 = await createChannel(server, a.token, "msgr_a_business")
    const res = await call("POST", "/v1/templates", a.token, templateBody([c1, c2], { name: "Order Update!", labels: ["orders"] }))
    assert.strictEqual(res.status, 201, JSON.stringify(res.body))
    assert.strictEqual(res.body.data.message, "Template created.")
    const t = res.body.data.template
    assert.strictEqual(t.name, "Order Update!")
    assert.strictEqual(t.slug, "order_update")
    assert.strictEqual(t.status, "draft")
    assert.strictEqual(t.meta_status, "local")
    assert.strictEqual(t.language, "en")
    assert.strictEqual(t.category, "utility")
    assert.deepStrictEqual(t.channel_type, { id: 2, key: "msgr_a_business", name: "Business messenger" })
    assert.strictEqual(t.channel.id, c1)
    assert.deepStrictEqual(t.parameters.map((p: any) => [p.id, p.name, p.type, p.sample_value, p.position]), [
      [1, "first_name", "text", "Ann", 1],
      [2, "order_id", "text", "A-42", 2]
    ])
    assert.deepStrictEqual(t.labels, ["orders"])
    assert.strictEqual(t.uses_count, 0)
    assert.strictEqual(t.logical_template.instances_count, 2)
    assert.strictEqual(t.logical_template.assigned_channels_count, 2)
    assert.deepStrictEqual(t.logical_template.languages, ["en"])
    assert.deepStrictEqual(t.logical_template.meta_status_counts, { local: 2 })
    assert.strictEqual(t.logical_template.meta_overall_status, "local")
    assert.deepStrictEqual(t.versions.map((v: any) => [v.language, v.channel_id, v.status, v.meta_status]), [
      ["en", c1, "draft", "local"],
      ["en", c2, "draft", "local"]
    ])
    const again = await call("POST", "/v1/templates", a.token, templateBody([], { name: "Order update" }))
    assert.strictEqual(again.body.data.template.slug, "order_update_2")
    assert.strictEqual(again.body.data.template.channel, null)
    const created = (await payloadsOf(server, a.id, "template.created")).filter((p) => p.template_group_id === t.template_group_id)
    assert.strictEqual(created.length, 1)
  })

  it("422s: undeclared, numbered or sample-less variables, language length, channels, slug, type", async () => {
    const a = await createCompany(server)
    const business = await createChannel(server, a.token, "msgr_a_business")
    const other = await createChannel(server, a.token, "msgr_b")
    const b = await createCompany(server)
    const foreign = await createChannel(server, b.token, "msgr_a_business")
    const post = (extra: Record<string, unknown>, channels: ReadonlyArray<number> = [business]) =>
      call("POST", "/v1/templates", a.token, templateBody(channels, extra))

    const undeclared = await post({ body: "Hi {{first_name}} {{last_name}}" })
    assert.strictEqual(undeclared.status, 422)
    assert.match(undeclared.body.errors.body[0], /last_name/)
    const numbered = await post({ body: "Hi {{1}}" })
    assert.strictEqual(numbered.status, 422)
    assert.match(numbered.body.errors.body[0], /named, not numbered/)
    const noSample = await post({ parameters: [{ name: "first_name" }, { name: "order_id", sample_value: "1" }] })
    assert.strictEqual(noSample.status, 422)
    assert.ok(noSample.body.errors["parameters.0.sample_value"])
    const header = await post({ header_enabled: true, header_type: "text", header_text: "Order {{ref}}" })
    assert.strictEqual(header.status, 422)
    assert.match(header.body.errors.header_text[0], /ref/)
    const language = await post({ language: "en_US_extended" })
    assert.strictEqual(language.status, 422)
    assert.ok(language.body.errors.language)
    const channels = await post({}, [business, other, foreign])
    assert.strictEqual(channels.status, 422)
    assert.deepStrictEqual(Object.keys(channels.body.errors).sort(), ["channel_ids.1", "channel_ids.2"])
    const type = await post({ channel_type: "msgr_b" })
    assert.strictEqual(type.status, 422)
    assert.ok(type.body.errors.channel_type)
    const button = await post({ buttons_enabled: true, buttons: [{ type: "url", label: "Track" }] })
    assert.strictEqual(button.status, 422)
    assert.ok(button.body.errors["buttons.0.value"])
    const slug = unique("s").replace(/[^a-z0-9]/g, "_")
    assert.strictEqual((await post({ slug })).status, 201)
    const taken = await post({ slug })
    assert.strictEqual(taken.status, 422)
    assert.ok(taken.body.errors.slug)
    const badSlug = await post({ slug: "Not-A-Slug" })
    assert.strictEqual(badSlug.status, 422)
    assert.ok(badSlug.body.errors.slug)
  })
})

describe("templates: reading", () => {
  it("lists one row per group with filters, facets and paging; channel-types", async () => {
    const a = await createCompany(server)
    const channel = await createChannel(server, a.token, "msgr_a_business")
    const first = await createTemplate(server, a.token, [channel], { name: "Alpha shipping" })
    await call("POST", `/v1/templates/${first.id}/languages`, a.token, { language: "de", body: "Hallo {{name}}", parameters: [{ name: "name", sample_value: "Jo" }] })
    const second = await createTemplate(server, a.token, [channel], { name: "Beta reminder", language: "fr", body: "Bonjour" , parameters: [] })
    await call("POST", `/v1/templates/${second.id}/archive`, a.token)

    const all = await call("GET", "/v1/templates?sortBy=name&sortDir=asc&includeFacets=true", a.token)
    assert.strictEqual(all.status, 200, JSON.stringify(all.body))
    assert.deepStrictEqual(all.body.data.items.map((t: any) => t.name), ["Alpha shipping", "Beta reminder"])
    assert.deepStrictEqual(all.body.data.items[0].logical_template.languages, ["en", "de"])
    assert.strictEqual(all.body.data.items[0].logical_template.instances_count, 2)
    assert.deepStrictEqual(all.body.data.pagination, { page: 1, perPage: 20, total: 2, lastPage: 1 })
    assert.deepStrictEqual(all.body.data.facets, {
      statuses: { draft: 1, archived: 1 },
      languages: { en: 1, de: 1, fr: 1 },
      channel_types: { msgr_a_business: 2 }
    })
    const names = async (query: string) => (await call("GET", `/v1/templates?${query}`, a.token)).body.data.items.map((t: any) => t.name)
    assert.deepStrictEqual(await names("status=archived"), ["Beta reminder"])
    assert.deepStrictEqual(await names("language=de"), ["Alpha shipping"])
    assert.deepStrictEqual(await names("search=remind"), ["Beta reminder"])
    assert.deepStrictEqual(await names("search=hallo"), ["Alpha shipping"])
    assert.deepStrictEqual(await names("channelType=msgr_b"), [])
    assert.deepStrictEqual(await names("sortBy=name&sortDir=desc&perPage=1&page=2"), ["Alpha shipping"])
    const bad = await call("GET", "/v1/templates?status=nope", a.token)
    assert.strictEqual(bad.status, 422)

    const types = await call("GET", "/v1/templates/channel-types", a.token)
    assert.deepStrictEqual(types.body.data, [{ id: 2, key: "msgr_a_business", name: "Business messenger" }])
  })

  it("gets by group or instance id, with availability per channel", async () => {
    const a = await createCompany(server)
    const c1 = await createChannel(server, a.token, "msgr_a_business")
    const c2 = await createChannel(server, a.token, "msgr_a_business")
    const t = await createTemplate(server, a.token, [c1, c2])
    const byGroup = await call("GET", `/v1/templates/${t.template_group_id}`, a.token)
    assert.strictEqual(byGroup.status, 200)
    assert.strictEqual(byGroup.body.data.id, t.id)
    const second = t.versions[1].id
    const byInstance = await call("GET", `/v1/templates/${second}`, a.token)
    assert.strictEqual(byInstance.body.data.id, second)
    assert.strictEqual(byInstance.body.data.channel.id, c2)
    assert.strictEqual(byInstance.body.data.body, t.body)

    const c3 = await createChannel(server, a.token, "msgr_a_business")
    const availability = await call("GET", `/v1/templates/${t.id}/channels`, a.token)
    assert.strictEqual(availability.status, 200)
    assert.deepStrictEqual(availability.body.data.map((i: any) => [i.channel.id, i.availability, i.template?.meta_status ?? null]), [
      [c1, "added", "local"],
      [c2, "added", "local"],
      [c3, "not_added", null]
    ])
    assert.deepStrictEqual(availability.body.data[0].channel.external_ids, [])
  })
})

describe("templates: changing", () => {
  it("a draft update (PATCH or POST) changes every instance of the language, not the others; published is 422", async () => {
    const a = await createCompany(server)
    const c1 = await createChannel(server, a.token, "msgr_a_business")
    const c2 = await createChannel(server, a.token, "msgr_a_business")
    const t = await createTemplate(server, a.token, [c1, c2])
    await call("POST", `/v1/templates/${t.id}/languages`, a.token, { language: "de", body: "Hallo" })
    const patched = await call("PATCH", `/v1/templates/${t.id}`, a.token, {
      name: "Renamed",
      body: "Dear {{first_name}}, shipped.",
      parameters: [{ name: "first_name", sample_value: "Ann" }]
    })
    assert.strictEqual(patched.status, 200, JSON.stringify(patched.body))
    assert.strictEqual(patched.body.data.name, "Renamed")
    const sibling = await call("GET", `/v1/templates/${t.versions[1].id}`, a.token)
    assert.strictEqual(sibling.body.data.body, "Dear {{first_name}}, shipped.")
    const german = patched.body.data.versions.find((v: any) => v.language === "de")
    assert.strictEqual((await call("GET", `/v1/templates/${german.id}`, a.token)).body.data.body, "Hallo")

    const viaPost = await call("POST", `/v1/templates/${german.id}`, a.token, { body: "Hallo {{x}}" })
    assert.strictEqual(viaPost.status, 422)
    assert.ok(viaPost.body.errors.body)
    const ok = await call("POST", `/v1/templates/${german.id}`, a.token, { footer_enabled: true, footer_text: "Tschüss" })
    assert.strictEqual(ok.status, 200)
    assert.strictEqual(ok.body.data.footer_text, "Tschüss")

    const approved = await approvedTemplate(server, a.token)
    await call("POST", `/v1/templates/${approved.instanceId}/publish`, a.token)
    const locked = await call("PATCH", `/v1/templates/${approved.instanceId}`, a.token, { body: "x" })
    assert.strictEqual(locked.status, 422)
    assert.strictEqual(locked.body.error_code, "template_not_draft")
  })

  it("assigns channels, adds and deletes languages with their 422s and events", async () => {
    const a = await createCompany(server)
    const t = await createTemplate(server, a.token, [])
    const noChannel = await call("POST", `/v1/templates/${t.id}/languages`, a.token, { language: "de", body: "Hallo" })
    assert.strictEqual(noChannel.status, 422)
    assert.match(noChannel.body.errors.language[0], /Assign a channel/)

    const c1 = await createChannel(server, a.token, "msgr_a_business")
    const c2 = await createChannel(server, a.token, "msgr_a_business")
    const assigned = await call("POST", `/v1/templates/${t.id}/channels`, a.token, { channel_ids: [c1, c2] })
    assert.strictEqual(assigned.status, 200, JSON.stringify(assigned.body))
    assert.deepStrictEqual(assigned.body.data.items.map((i: any) => [i.channel.id, i.availability]), [[c1, "added"], [c2, "added"]])
    // The unassigned instance took the first channel.
    assert.strictEqual(assigned.body.data.items[0].template.id, t.id)
    const wrong = await call("POST", `/v1/templates/${t.id}/channels`, a.token, { channel_ids: [await createChannel(server, a.token, "msgr_b")] })
    assert.strictEqual(wrong.status, 422)
    assert.ok(wrong.body.errors["channel_ids.0"])

    const added = await call("POST", `/v1/templates/${t.id}/languages`, a.token, { language: "de", body: "Hallo {{n}}", parameters: [{ name: "n", sample_value: "Jo" }] })
    assert.strictEqual(added.status, 201, JSON.stringify(added.body))
    assert.deepStrictEqual(added.body.data.map((v: any) => [v.language, v.channel_id]), [["en", c1], ["en", c2], ["de", c1], ["de", c2]])
    const duplicate = await call("POST", `/v1/templates/${t.id}/languages`, a.token, { language: "de", body: "Hallo" })
    assert.strictEqual(duplicate.status, 422)
    assert.ok(duplicate.body.errors.language)
    const long = await call("POST", `/v1/templates/${t.id}/languages`, a.token, { language: "x".repeat(13), body: "Hallo" })
    assert.strictEqual(long.status, 422)
    assert.ok(long.body.errors.language)

    const removed = await call("DELETE", `/v1/templates/${t.id}/languages/de`, a.token)
    assert.strictEqual(removed.status, 200)
    assert.deepStrictEqual(removed.body.data.map((v: any) => v.language), ["en", "en"])
    const only = await call("DELETE", `/v1/templates/${t.id}/languages/en`, a.token)
    assert.strictEqual(only.status, 422)
    assert.ok(only.body.errors.language)
    assert.strictEqual((await call("DELETE", `/v1/templates/${t.id}/languages/fr`, a.token)).status, 404)

    const events = await call("GET", `/v1/templates/${t.id}/events`, a.token)
    assert.deepStrictEqual(events.body.data.map((e: any) => e.type).reverse(), ["created", "channel_added", "channel_added", "language_added"])
    const me = await call("GET", "/v1/me", a.token)
    assert.strictEqual(events.body.data[0].actor.id, me.body.data.id)
    assert.strictEqual(events.body.data[1].channel.id, c2)
  })

  it("submit, sync, publish, archive, unarchive, delete: the states and their 422s", async () => {
    const a = await createCompany(server)
    const bare = await createTemplate(server, a.token, [])
    const noChannel = await call("POST", `/v1/templates/${bare.id}/submit`, a.token)
    assert.strictEqual(noChannel.status, 422)
    assert.strictEqual(noChannel.body.error_code, "no_channel_assigned")
    const notApproved = await call("POST", `/v1/templates/${bare.id}/publish`, a.token)
    assert.strictEqual(notApproved.status, 422)
    assert.strictEqual(notApproved.body.error_code, "template_not_approved")
    const notArchived = await call("POST", `/v1/templates/${bare.id}/unarchive`, a.token)
    assert.strictEqual(notArchived.status, 422)
    assert.strictEqual(notArchived.body.error_code, "template_not_archived")
    await call("POST", `/v1/templates/${bare.id}/archive`, a.token)
    const back = await call("POST", `/v1/templates/${bare.id}/unarchive`, a.token)
    assert.strictEqual(back.body.data.status, "draft")

    const channel = await createChannel(server, a.token, "msgr_a_business")
    const t = await createTemplate(server, a.token, [channel])
    const submitted = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.strictEqual(submitted.status, 200, JSON.stringify(submitted.body))
    assert.strictEqual(submitted.body.data.template.meta_status, "pending")
    assert.match(submitted.body.data.template.external_id, /^sbx_tpl_/)
    assert.deepStrictEqual(submitted.body.data.results.map((r: any) => [r.template_id, r.meta_status, r.error]), [[t.id, "pending", null]])
    const synced = await call("POST", "/v1/templates/sync", a.token)
    assert.strictEqual(synced.status, 202, JSON.stringify(synced.body))
    assert.strictEqual(synced.body.data.message, "Template sync started.")
    const approved = await eventually(async () => {
      const res = await call("GET", `/v1/templates/${t.id}`, a.token)
      return res.body.data.meta_status === "approved" ? res.body.data : undefined
    })
    assert.isString(approved.last_synced_at)
    // Another sync reads the same verdict again: it stamps the instance and writes no second event.
    await syncUntil(server, a.token, t.id, (x) => x.last_synced_at !== approved.last_synced_at)

    const published = await call("POST", `/v1/templates/${t.id}/publish`, a.token)
    assert.strictEqual(published.body.data.status, "published")
    // A channel added to a published template is submitted at once.
    const c2 = await createChannel(server, a.token, "msgr_a_business")
    const more = await call("POST", `/v1/templates/${t.id}/channels`, a.token, { channel_ids: [c2] })
    assert.strictEqual(more.body.data.items[0].template.meta_status, "pending")

    assert.strictEqual((await call("POST", `/v1/templates/${t.id}/archive`, a.token)).body.data.status, "archived")
    const archivedSubmit = await call("POST", `/v1/templates/${t.id}/submit`, a.token)
    assert.strictEqual(archivedSubmit.body.error_code, "template_archived")
    assert.strictEqual((await call("POST", `/v1/templates/${t.id}/unarchive`, a.token)).body.data.status, "published")

    const types = (await call("GET", `/v1/templates/${t.id}/events`, a.token)).body.data.map((e: any) => e.type).reverse()
    assert.deepStrictEqual(types, ["created", "submitted", "meta_approved", "published", "channel_added", "submitted", "archived", "unarchived"])
    const approvedEvent = (await call("GET", `/v1/templates/${t.id}/events`, a.token)).body.data.find((e: any) => e.type === "meta_approved")
    assert.strictEqual(approvedEvent.actor, null)
    assert.strictEqual(approvedEvent.meta_status, "approved")

    // The system-events catalog lists the template keys, and the log has them.
    const catalog = await call("GET", "/v1/system-events", a.token)
    const keys = JSON.stringify(catalog.body)
    for (const key of ["template.created", "template.submitted", "template.meta_approved", "template.meta_rejected", "template.published", "template.archived", "template.unarchived", "template.channel_added", "template.language_added"]) {
      assert.include(keys, key)
    }
    assert.strictEqual((await payloadsOf(server, a.id, "template.published")).length, 1)

    const deleted = await call("DELETE", `/v1/templates/${t.id}`, a.token)
    assert.strictEqual(deleted.status, 200)
    assert.strictEqual((await call("GET", `/v1/templates/${t.id}`, a.token)).status, 404)
    assert.strictEqual((await payloadsOf(server, a.id, "template.deleted")).length, 1)
  })

  it("another company's template is 404 on every route", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const t = await approvedTemplate(server, a.token)
    const bChannel = await createChannel(server, b.token, "msgr_a_business")
    for (const id of [t.groupId, t.instanceId]) {
      const routes: Array<[string, string, unknown?]> = [
        ["GET", `/v1/templates/${id}`],
        ["GET", `/v1/templates/${id}/channels`],
        ["GET", `/v1/templates/${id}/events`],
        ["PATCH", `/v1/templates/${id}`, { body: "x" }],
        ["POST", `/v1/templates/${id}`, { body: "x" }],
        ["POST", `/v1/templates/${id}/channels`, { channel_ids: [bChannel] }],
        ["POST", `/v1/templates/${id}/languages`, { language: "de", body: "x" }],
        ["DELETE", `/v1/templates/${id}/languages/en`],
        ["POST", `/v1/templates/${id}/submit`],
        ["POST", `/v1/templates/${id}/publish`],
        ["POST", `/v1/templates/${id}/archive`],
        ["POST", `/v1/templates/${id}/unarchive`],
        ["DELETE", `/v1/templates/${id}`]
      ]
      for (const [method, path, body] of routes) {
        const res = await call(method, path, b.token, body)
        assert.strictEqual(res.status, 404, `${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
      }
    }
    const list = await call("GET", "/v1/templates", b.token)
    assert.strictEqual(list.body.data.items.length, 0)
    // B's sync does not touch A's instances, and A's template is intact.
    const before = (await call("GET", `/v1/templates/${t.instanceId}`, a.token)).body.data
    const bTemplate = await createTemplate(server, b.token, [bChannel])
    await call("POST", `/v1/templates/${bTemplate.id}/submit`, b.token)
    await syncUntil(server, b.token, bTemplate.id, (x) => x.meta_status === "approved")
    const after = (await call("GET", `/v1/templates/${t.instanceId}`, a.token)).body.data
    assert.strictEqual(after.meta_status, "approved")
    assert.strictEqual(after.last_synced_at, before.last_synced_at)
  })
})
