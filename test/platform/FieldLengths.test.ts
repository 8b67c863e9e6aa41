import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { conversationOn, createChannel, send } from "../messages/support.ts"
import { unique } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

// Every string limit the spec documents (both documents: "up to N chars", "2-255 chars", the 16 KB free-form
// cap of issue 20), one row each: one character over answers 422 on that field, and the value at the limit is
// accepted (so an off-by-one either way fails). Fields without a documented limit are covered by the fuzz suite
// (test/fuzz/: 70,000 characters in every field, no 5xx).

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

interface Fixture {
  readonly token: string
  readonly email: string
  readonly password: string
  readonly channelId: number
  readonly threadId: number
  readonly messageId: number
  readonly templateId: number
}

interface Row {
  readonly limit: string
  readonly field: string
  /** The request with a value of `length` characters in the field. */
  readonly call: (f: Fixture, value: (length: number) => string) => Promise<{ status: number; body: any }>
  readonly max: number
  /** The shortest accepted value, where the spec gives one. */
  readonly min?: number
  /** What the value at the limit answers (default: 2xx). */
  readonly accepted?: (status: number) => boolean
}

const ok = (status: number) => status >= 200 && status < 300

const rows: ReadonlyArray<Row> = [
  {
    limit: "doc 1: Idempotency-Key header of send, up to 128 chars",
    field: "idempotency-key",
    max: 128,
    call: (f, v) => send(server, f.token, { channel_id: f.channelId, thread_id: f.threadId, text: unique("len") }, { "idempotency-key": v(0) })
  },
  {
    limit: "doc 1: Idempotency-Key header of send-template, up to 128 chars",
    field: "idempotency-key",
    max: 128,
    call: (f, v) =>
      request(server, "POST", "/v1/messages/send-template", {
        token: f.token,
        headers: { "idempotency-key": v(0) },
        body: { channel_id: f.channelId, thread_id: f.threadId, template_id: f.templateId }
      }),
    // At the limit the key is taken; the send itself is refused by the template's rules (not published), never by the key.
    accepted: (status) => status !== 500
  },
  {
    limit: "doc 1: body idempotency_key of POST /v1/messages, up to 100 chars",
    field: "idempotency_key",
    max: 100,
    call: (f, v) => request(server, "POST", "/v1/messages", { token: f.token, body: { thread_id: f.threadId, text: unique("len"), idempotency_key: v(0) } })
  },
  {
    limit: "doc 1: body idempotency_key of forward, up to 100 chars",
    field: "idempotency_key",
    max: 100,
    call: (f, v) =>
      request(server, "POST", `/v1/messages/${f.messageId}/forward`, { token: f.token, body: { target_thread_id: f.threadId, idempotency_key: v(0) } })
  },
  {
    limit: "doc 1: reaction text, up to 32 chars",
    field: "reaction",
    max: 32,
    call: (f, v) => request(server, "POST", `/v1/messages/${f.messageId}/reactions`, { token: f.token, body: { reaction: v(0) } }),
    // 32 characters of one emoji: not a single emoji, refused by its own rule, never as too long.
    accepted: (status) => status !== 500
  },
  {
    limit: "doc 1: device_name of mobile login, up to 100 chars",
    field: "device_name",
    max: 100,
    call: (f, v) => request(server, "POST", "/v1/auth/mobile/login", { body: { email: f.email, password: f.password, device_name: v(0) } })
  },
  {
    limit: "doc 1: message search q, 2-255 chars",
    field: "q",
    max: 255,
    min: 2,
    call: (f, v) => request(server, "GET", `/v1/messages/search?q=${encodeURIComponent(v(0))}`, { token: f.token })
  },
  {
    limit: "doc 2: template language on create, up to 12 chars",
    field: "language",
    max: 12,
    call: (f, v) => request(server, "POST", "/v1/templates", { token: f.token, body: { name: unique("Len"), language: v(0), body: "Hello" } })
  },
  {
    limit: "doc 2: template language on POST /v1/templates/{template}/languages, up to 12 chars",
    field: "language",
    max: 12,
    call: (f, v) => request(server, "POST", `/v1/templates/${f.templateId}/languages`, { token: f.token, body: { language: v(0), body: "Hola" } })
  },
  {
    limit: "custom_fields of a deal, at most 16 KB as JSON",
    field: "custom_fields",
    // Five values of at most 3,500 characters (each under the 4,096 of a free-form string): the object
    // {"a0":"…","a1":"…",…,"a4":"…"} is 41 bytes around them.
    max: 16 * 1024 - 41,
    call: (f, v) => request(server, "POST", "/v1/deals", { token: f.token, body: { title: unique("Len"), custom_fields: inPieces(v(0), 3500) } }),
    // The deal itself needs a pipeline and more; the free-form field is never what refuses it.
    accepted: (status) => status !== 500
  }
]

/** A long value as an object of pieces `a0`, `a1`, … of at most `size` characters. */
const inPieces = (value: string, size: number) =>
  Object.fromEntries(Array.from({ length: Math.ceil(value.length / size) }, (_, i) => [`a${i}`, value.slice(i * size, (i + 1) * size)]))

/** The value of a row: `length` characters that pass every other rule of the field (letters and digits). */
const valueOf = (length: number) => {
  const base = `${unique("v").replace(/[^a-z0-9]/gi, "")}xxxxxxxxxxxxxxxxxxxxxxxx`
  return base.repeat(Math.ceil(length / base.length) + 1).slice(0, length)
}

describe("documented string limits", () => {
  it("answers 422 on the field one character over each limit, and takes the value at the limit", async () => {
    const company = await createCompany(server)
    const c = await conversationOn(server, company.token)
    const sent = await send(server, company.token, { channel_id: c.channelId, thread_id: c.threadId, text: "to forward and react to" })
    assert.strictEqual(sent.status, 201, JSON.stringify(sent.body))
    const business = await createChannel(server, company.token, "msgr_a_business")
    const template = await request(server, "POST", "/v1/templates", {
      token: company.token,
      body: { name: unique("Len"), language: "en", body: "Hello", channel_ids: [business] }
    })
    assert.strictEqual(template.status, 201, JSON.stringify(template.body))
    const f: Fixture = {
      token: company.token,
      email: company.admin.email,
      password: company.admin.password,
      channelId: c.channelId,
      threadId: c.threadId,
      messageId: sent.body.data.id,
      templateId: template.body.data.template.id
    }
    const failures: Array<string> = []
    for (const row of rows) {
      const over = await row.call(f, () => valueOf(row.max + 1))
      if (over.status !== 422 || over.body?.errors?.[row.field] === undefined) {
        failures.push(`${row.limit}: ${row.max + 1} chars answered ${over.status} ${JSON.stringify(over.body).slice(0, 300)}`)
      }
      if (row.min !== undefined) {
        const under = await row.call(f, () => valueOf(row.min! - 1))
        if (under.status !== 422 || under.body?.errors?.[row.field] === undefined) {
          failures.push(`${row.limit}: ${row.min - 1} chars answered ${under.status} ${JSON.stringify(under.body).slice(0, 300)}`)
        }
      }
      const at = await row.call(f, () => valueOf(row.max))
      const fine = (row.accepted ?? ok)(at.status) && at.body?.errors?.[row.field] === undefined
      if (!fine) failures.push(`${row.limit}: ${row.max} chars answered ${at.status} ${JSON.stringify(at.body).slice(0, 300)}`)
    }
    assert.deepStrictEqual(failures, [])
  })

  it("keeps companies apart: another company's message and template are 404 whatever the lengths", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const sent = await send(server, a.token, { channel_id: c.channelId, thread_id: c.threadId, text: "mine" })
    const template = await request(server, "POST", "/v1/templates", { token: a.token, body: { name: unique("Len"), language: "en", body: "Hello" } })
    const react = await request(server, "POST", `/v1/messages/${sent.body.data.id}/reactions`, { token: b.token, body: { reaction: "👍" } })
    assert.strictEqual(react.status, 404)
    const language = await request(server, "POST", `/v1/templates/${template.body.data.template.id}/languages`, { token: b.token, body: { language: "es", body: "Hola" } })
    assert.strictEqual(language.status, 404)
    const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM message_reactions WHERE message_id = $1", [sent.body.data.id])
    assert.strictEqual(n, 0)
  })
})
