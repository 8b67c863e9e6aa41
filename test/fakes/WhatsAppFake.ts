import { createHmac } from "node:crypto"
import { FakeHttp, type FakeAnswer, type FakeRequest } from "./FakeHttp.ts"

/**
 * The slice of the WhatsApp Cloud API our adapter uses, answered as Meta documents it:
 * `POST /{phone-number-id}/messages`, `POST /{phone-number-id}/media`, `GET /{media-id}`
 * then the media URL with the same bearer token, `POST|DELETE /{phone-number-id}/block_users`.
 * Errors are `{error:{message, type, code, error_data:{details}}}`. Free-form messages (anything
 * but a template) to a user in `closedWindow` fail with 131047, as outside the customer-service
 * window; an interactive `call_permission_request` must carry its action and a body text.
 * Message templates live on the business account: `POST|DELETE /{waba-id}/message_templates`
 * (create with `parameter_format: NAMED`, every body and header variable with a named example;
 * delete by `name` and `hsm_id`), `GET /{waba-id}/message_templates` (the account's list, `limit`
 * per page, cursor paging: `paging.cursors.{before,after}`, and `paging.next` only when a page follows),
 * `GET /{template-id}` (status, rejected_reason) and `POST /{template-id}` (edit: back to PENDING).
 * `decide` plays Meta's reviewer and returns the `message_template_status_update` notification it would
 * post. Every `POST /{phone-number-id}/messages` is logged in `arrivals` (when it arrived, to whom, the
 * status answered); until `throttleUntil` (epoch ms) each one is answered 130429 with HTTP 400, as Meta
 * answers a number over its throughput.
 */
export class WhatsAppFake {
  /**
   * Its server; route keys for `inject` and `calls`: `POST messages`, `POST media`, `media-info`, `download`,
   * `POST block_users`, `DELETE block_users`, `POST message_templates`, `GET message_templates`, `DELETE message_templates`, `GET template`, `POST template`.
   */
  readonly http: FakeHttp
  readonly tokens = new Set<string>()
  /** Users who have not written in 24 h: blocking them fails with 131047 (per user, in failed_users). */
  readonly closedWindow = new Set<string>()
  readonly media = new Map<string, { bytes: Uint8Array; mimeType: string }>()
  readonly blocked = new Set<string>()
  /** Call-permission requests taken, by the message id answered to the business. */
  readonly callPermissionRequests = new Map<string, { readonly to: string; readonly body: string }>()
  /** Message templates by id, as Meta keeps them. */
  readonly templates = new Map<string, FakeTemplate>()
  /** Every message send as it arrived, in order: `at` in epoch ms, `status` the HTTP status answered. */
  readonly arrivals: Array<{ readonly at: number; readonly to: string; readonly status: number }> = []
  /** Sends arriving before this time (epoch ms) are answered 130429, the number's throughput reached. */
  throttleUntil = 0
  /** The most templates one page of the list holds, whatever `limit` asks (Meta caps it too). */
  pageLimit = 100
  private nextId = 1

  constructor() {
    this.http = new FakeHttp((r) => {
      const parts = r.path.split("/").filter((p) => p !== "")
      if (parts[0] === "media-download") return "download"
      if (parts.length === 1) return this.templates.has(parts[0]) ? `${r.method} template` : "media-info"
      return `${r.method} ${parts[1]}`
    }, (r) => this.route(r))
  }

  /** The reviewer's verdict on a template, and the notification Meta posts about it. */
  decide(id: string, event: "APPROVED" | "REJECTED" | "PAUSED" | "DISABLED" | "REINSTATED", reason = "NONE") {
    const t = this.templates.get(id)
    if (t === undefined) throw new Error(`no template ${id}`)
    t.status = event === "REINSTATED" ? "APPROVED" : event
    t.rejected_reason = event === "REJECTED" ? reason : "NONE"
    return {
      object: "whatsapp_business_account",
      entry: [{
        id: t.waba,
        time: Math.floor(Date.now() / 1000),
        changes: [{
          field: "message_template_status_update",
          value: {
            event,
            message_template_id: Number(id),
            message_template_name: t.name,
            message_template_language: t.language,
            reason
          }
        }]
      }]
    }
  }

  private templateRoute(r: FakeRequest, parts: ReadonlyArray<string>): FakeAnswer {
    const b = r.body
    if (parts.length === 1) {
      const t = this.templates.get(parts[0])
      if (t === undefined) return this.error(400, 100, "Unsupported get request. Object with ID does not exist")
      if (r.method === "GET") {
        return { status: 200, body: { id: t.id, name: t.name, language: t.language, status: t.status, category: t.category, rejected_reason: t.rejected_reason } }
      }
      const invalid = this.invalidComponents(b.components, t.parameter_format)
      if (invalid !== null) return invalid
      t.components = b.components as Array<Record<string, unknown>>
      t.status = "PENDING"
      return { status: 200, body: { success: true } }
    }
    const waba = parts[0]
    if (r.method === "GET") return this.templateList(waba, r.query)
    if (r.method === "DELETE") {
      const found = [...this.templates.values()].filter((t) =>
        t.waba === waba && t.name === r.query.name && (r.query.hsm_id === undefined || t.id === r.query.hsm_id)
      )
      if (found.length === 0) return this.error(400, 100, "(#100) Message template not found")
      for (const t of found) this.templates.delete(t.id)
      return { status: 200, body: { success: true } }
    }
    if (typeof b.name !== "string" || !/^[a-z0-9_]{1,512}$/.test(b.name)) return this.error(400, 100, "(#100) Invalid parameter: name")
    if (typeof b.language !== "string" || b.language === "") return this.error(400, 100, "(#100) The parameter language is required.")
    if (!["UTILITY", "MARKETING", "AUTHENTICATION"].includes(String(b.category))) return this.error(400, 100, "(#100) Invalid parameter: category")
    const format = b.parameter_format === "NAMED" ? "NAMED" : "POSITIONAL"
    const invalid = this.invalidComponents(b.components, format)
    if (invalid !== null) return invalid
    if ([...this.templates.values()].some((t) => t.waba === waba && t.name === b.name && t.language === b.language)) {
      return this.error(400, 100, "(#2388024) Content in this language already exists")
    }
    const id = String(100000 + this.nextId++)
    this.templates.set(id, {
      id,
      waba,
      name: b.name,
      language: b.language,
      category: String(b.category),
      parameter_format: format,
      components: b.components as Array<Record<string, unknown>>,
      status: "PENDING",
      rejected_reason: "NONE"
    })
    return { status: 200, body: { id, status: "PENDING", category: b.category } }
  }

  /** The account's templates by id, a page from the `after` cursor (an opaque base64 of the last id read). */
  private templateList(waba: string, query: Record<string, string>): FakeAnswer {
    const limit = Math.min(Number(query.limit ?? 25) || 25, this.pageLimit)
    const from = query.after === undefined ? null : Buffer.from(query.after, "base64").toString("utf8")
    const all = [...this.templates.values()].filter((t) => t.waba === waba).sort((a, b) => Number(a.id) - Number(b.id))
    const rest = from === null ? all : all.filter((t) => Number(t.id) > Number(from))
    const page = rest.slice(0, limit)
    const fields = (query.fields ?? "id").split(",")
    const data = page.map((t) => Object.fromEntries(fields.filter((f) => f in t).map((f) => [f, t[f as keyof FakeTemplate]])))
    if (page.length === 0) return { status: 200, body: { data } }
    const cursor = (t: FakeTemplate) => Buffer.from(t.id, "utf8").toString("base64")
    const after = cursor(page[page.length - 1])
    const next = rest.length > limit
      ? `${this.http.url}/${waba}/message_templates?${new URLSearchParams({ ...query, after }).toString()}`
      : undefined
    return { status: 200, body: { data, paging: { cursors: { before: cursor(page[0]), after }, ...(next === undefined ? {} : { next }) } } }
  }

  /** A BODY component is required; with NAMED parameters every `{{name}}` needs its named example. */
  private invalidComponents(components: unknown, format: string): FakeAnswer | null {
    if (!Array.isArray(components)) return this.error(400, 100, "(#100) The parameter components is required.")
    const body = components.find((c) => c?.type === "BODY")
    if (body === undefined || typeof body.text !== "string") return this.error(400, 100, "(#100) A BODY component is required.")
    for (const c of components) {
      if (c?.type !== "BODY" && c?.type !== "HEADER") continue
      const names = [...String(c.text ?? "").matchAll(/\{\{\s*([^{}]*?)\s*\}\}/g)].map((m) => m[1])
      if (names.length === 0) continue
      if (format !== "NAMED") {
        if (names.some((n) => !/^\d+$/.test(n))) return this.error(400, 100, "(#100) Positional parameters must be numbers")
        continue
      }
      const key = c.type === "BODY" ? "body_text_named_params" : "header_text_named_params"
      const examples: Array<{ param_name?: string; example?: string }> = c.example?.[key] ?? []
      for (const name of names) {
        if (!/^[a-z_][a-z0-9_]*$/.test(name)) return this.error(400, 100, `(#100) Invalid parameter name: ${name}`)
        if (!examples.some((e) => e.param_name === name && typeof e.example === "string" && e.example !== "")) {
          return this.error(400, 100, `(#100) Missing example for parameter ${name}`)
        }
      }
    }
    return null
  }

  /** What Meta would post to a webhook: the body and its `X-Hub-Signature-256`. */
  static signed(appSecret: string, payload: unknown) {
    const body = JSON.stringify(payload)
    return { body, signature: `sha256=${createHmac("sha256", appSecret).update(body).digest("hex")}` }
  }

  /** A notification of the `messages` field for one business number, as Meta posts it. */
  static notification(phoneNumberId: string, value: Record<string, unknown>) {
    return {
      object: "whatsapp_business_account",
      entry: [{
        id: "WABA-FAKE",
        changes: [{
          field: "messages",
          value: { messaging_product: "whatsapp", metadata: { display_phone_number: "15550000000", phone_number_id: phoneNumberId }, ...value }
        }]
      }]
    }
  }

  /**
   * The user's answer to a call-permission request: an `interactive` message of type
   * `call_permission_reply` whose `context.id` is the request's message id.
   */
  static callPermissionReply(
    phoneNumberId: string,
    reply: {
      readonly from: string
      readonly id: string
      readonly requestMessageId?: string
      readonly response: "accept" | "reject"
      readonly isPermanent?: boolean
      /** Unix seconds; Meta sends it for a temporary acceptance. */
      readonly expirationTimestamp?: number
      readonly timestamp?: number
      readonly responseSource?: "user_action" | "automatic"
    }
  ) {
    return WhatsAppFake.notification(phoneNumberId, {
      contacts: [{ profile: { name: "Caller" }, wa_id: reply.from }],
      messages: [{
        ...(reply.requestMessageId !== undefined ? { context: { from: "15550000000", id: reply.requestMessageId } } : {}),
        from: reply.from,
        id: reply.id,
        timestamp: String(reply.timestamp ?? Math.floor(Date.now() / 1000)),
        type: "interactive",
        interactive: {
          type: "call_permission_reply",
          call_permission_reply: {
            response: reply.response,
            is_permanent: reply.isPermanent ?? false,
            ...(reply.expirationTimestamp !== undefined ? { expiration_timestamp: reply.expirationTimestamp } : {}),
            response_source: reply.responseSource ?? "user_action"
          }
        }
      }]
    })
  }

  private error(status: number, code: number, message: string, details?: string): FakeAnswer {
    return {
      status,
      body: { error: { message, type: "OAuthException", code, ...(details ? { error_data: { messaging_product: "whatsapp", details } } : {}), fbtrace_id: "AbC" } }
    }
  }

  private authorized(r: FakeRequest) {
    const header = r.headers.authorization
    return typeof header === "string" && header.startsWith("Bearer ") && this.tokens.has(header.slice(7))
  }

  /** `POST /{phone-number-id}/messages`: the message accepted, or the error Meta would answer. */
  private message(r: FakeRequest): FakeAnswer {
    const b = r.body
    if (r.receivedAt < this.throttleUntil) {
      return this.error(400, 130429, "(#130429) Rate limit hit", "Cloud API message throughput has been reached.")
    }
    if (b.messaging_product !== "whatsapp") return this.error(400, 100, "(#100) The parameter messaging_product is required.")
    if (typeof b.to !== "string" || b.to === "") return this.error(400, 100, "(#100) The parameter to is required.")
    const type = (b.type as string | undefined) ?? "text"
    if (!(type in b)) return this.error(400, 100, `(#100) The parameter ${type} is required.`)
    if (type !== "template" && this.closedWindow.has(b.to)) {
      return this.error(400, 131047, "(#131047) Re-engagement message", "Message failed to send because more than 24 hours have passed since the customer last replied to this number.")
    }
    const interactive = b.interactive as { type?: string; action?: { name?: string }; body?: { text?: string } } | undefined
    if (type === "interactive" && interactive?.type === "call_permission_request") {
      if (interactive.action?.name !== "call_permission_request") return this.error(400, 100, "(#100) The parameter interactive.action.name is required.")
      if (typeof interactive.body?.text !== "string" || interactive.body.text === "") {
        return this.error(400, 100, "(#100) The parameter interactive.body.text is required.")
      }
    }
    const id = `wamid.FAKE${this.nextId++}`
    if (type === "interactive" && interactive?.type === "call_permission_request") {
      this.callPermissionRequests.set(id, { to: b.to, body: interactive.body!.text! })
    }
    return {
      status: 200,
      body: { messaging_product: "whatsapp", contacts: [{ input: b.to, wa_id: b.to }], messages: [{ id }] }
    }
  }

  private route(r: FakeRequest): FakeAnswer {
    if (!this.authorized(r)) return this.error(401, 190, "Invalid OAuth access token - Cannot parse access token")
    const parts = r.path.split("/").filter((p) => p !== "")
    if (parts.length === 1 && this.templates.has(parts[0])) return this.templateRoute(r, parts)
    if (parts[1] === "message_templates") return this.templateRoute(r, parts)
    if (parts[0] === "media-download") {
      const found = this.media.get(parts[1])
      return found === undefined ? { status: 404, body: "not found", contentType: "text/plain" } : { status: 200, bytes: found.bytes, contentType: found.mimeType }
    }
    if (parts.length === 1 && r.method === "GET") {
      const found = this.media.get(parts[0])
      if (found === undefined) return this.error(400, 100, "Unsupported get request. Object with ID does not exist")
      return {
        status: 200,
        body: {
          messaging_product: "whatsapp",
          url: `${this.http.url}/media-download/${parts[0]}`,
          mime_type: found.mimeType,
          sha256: "0",
          file_size: found.bytes.length,
          id: parts[0]
        }
      }
    }
    const [, edge] = parts
    const b = r.body
    if (edge === "messages" && r.method === "POST") {
      const answer = this.message(r)
      this.arrivals.push({ at: r.receivedAt, to: String(b.to), status: answer.status })
      return answer
    }
    if (edge === "media" && r.method === "POST") {
      const file = r.files.file
      if (b.messaging_product !== "whatsapp" || file === undefined) return this.error(400, 100, "(#100) The parameter file is required.")
      const id = `media${this.nextId++}`
      this.media.set(id, { bytes: file.bytes, mimeType: String(b.type ?? file.type) })
      return { status: 200, body: { id } }
    }
    if (edge === "block_users") {
      const users = (b.block_users as Array<{ user: string }> | undefined) ?? []
      const ok = users.filter((u) => !this.closedWindow.has(u.user))
      const failed = users.filter((u) => this.closedWindow.has(u.user))
      for (const u of ok) r.method === "POST" ? this.blocked.add(u.user) : this.blocked.delete(u.user)
      const listKey = r.method === "POST" ? "added_users" : "removed_users"
      return {
        status: 200,
        body: {
          messaging_product: "whatsapp",
          ...(failed.length > 0
            ? { errors: { message: "Failed to block/unblock users", type: "OAuthException", code: 139100, error_data: { details: "Failed to block some users, see the block_users response list for details" } } }
            : {}),
          block_users: {
            [listKey]: ok.map((u) => ({ input: u.user, wa_id: u.user })),
            ...(failed.length > 0
              ? {
                failed_users: failed.map((u) => ({
                  input: u.user,
                  wa_id: u.user,
                  errors: [{
                    message: "Re-engagement message",
                    code: 131047,
                    error_data: { details: "Message failed to send because more than 24 hours have passed since the customer last replied to this number." }
                  }]
                }))
              }
              : {})
          }
        }
      }
    }
    return this.error(400, 100, "Unsupported request")
  }
}

export interface FakeTemplate {
  readonly id: string
  readonly waba: string
  readonly name: string
  readonly language: string
  readonly category: string
  readonly parameter_format: string
  components: Array<Record<string, unknown>>
  status: string
  rejected_reason: string
}
