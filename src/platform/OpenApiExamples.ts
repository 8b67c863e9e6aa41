/**
 * Examples for the OpenAPI document, derived from its own schemas, so every operation shows a request and an
 * answer without 237 hand-written samples drifting from the contract; and the `webhooks` section: one entry
 * per event key, each the event envelope.
 */

type Json = Record<string, any>

const methods = ["get", "put", "post", "delete", "patch"] as const

const ref = (doc: Json, node: Json): Json => {
  if (typeof node.$ref !== "string") return node
  const name = node.$ref.replace("#/components/schemas/", "")
  return doc.components?.schemas?.[name] ?? {}
}

const matches = (pattern: unknown, value: string) => {
  if (typeof pattern !== "string") return true
  try {
    return new RegExp(pattern, "u").test(value)
  } catch {
    return true
  }
}

/** A string for the property, in its pattern when it has one (ids in paths are digit strings). */
const stringFor = (name: string, schema: Json): string => {
  const named = namedString(name, schema)
  if (matches(schema.pattern, named)) return named
  return ["1", "example", "US", "a"].find((candidate) => matches(schema.pattern, candidate)) ?? named
}

const namedString = (name: string, schema: Json): string => {
  const key = name.toLowerCase()
  if (schema.format === "date-time" || /_at$|_until$|^timestamp$/.test(key)) return "2026-11-28T09:00:00.000Z"
  if (schema.format === "date" || /(^|_)date/.test(key)) return "2026-11-28"
  if (schema.format === "email" || key.includes("email")) return "ann@acme.test"
  if (schema.format === "uri" || /url$|uri$|link$/.test(key)) return "https://example.com/path"
  if (schema.format === "uuid" || key === "uuid") return "0b6e7a52-3f1c-4d7e-9b8e-1f2a3b4c5d6e"
  if (key.includes("phone")) return "+14155550123"
  if (key === "currency" || key.endsWith("_currency")) return "USD"
  if (key === "country" || key.endsWith("_country")) return "US"
  if (key.includes("password")) return "password-123"
  if (key.includes("token")) return "1|a1b2c3d4e5f6a1b2c3d4e5f6a1b2c3d4e5f6a1b2"
  if (key.includes("name")) return "Acme"
  if (key === "text" || key.includes("message") || key.includes("body") || key.includes("content")) return "Hello from the API"
  const min = typeof schema.minLength === "number" ? schema.minLength : 0
  const max = typeof schema.maxLength === "number" ? schema.maxLength : 64
  return "example".padEnd(min, "x").slice(0, Math.max(min, max))
}

const numberFor = (schema: Json) => {
  const low = typeof schema.minimum === "number" ? schema.minimum : typeof schema.exclusiveMinimum === "number" ? schema.exclusiveMinimum + 1 : 1
  const high = typeof schema.maximum === "number" ? schema.maximum : Number.MAX_SAFE_INTEGER
  return Math.min(Math.max(1, low), high)
}

/** A value that the schema accepts: its own example, else one built from its type and the property's name. */
export const exampleOf = (doc: Json, input: Json, name = "", depth = 0): unknown => {
  const schema = ref(doc, input)
  if (schema.example !== undefined) return schema.example
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0]
  if (schema.const !== undefined) return schema.const
  if (Array.isArray(schema.enum) && schema.enum.length > 0) return schema.enum[0]
  const branches = schema.anyOf ?? schema.oneOf
  if (Array.isArray(branches)) {
    const branch = branches.find((b: Json) => ref(doc, b).type !== "null") ?? branches[0]
    return exampleOf(doc, branch ?? {}, name, depth)
  }
  if (Array.isArray(schema.allOf)) {
    return Object.assign({}, ...schema.allOf.map((part: Json) => exampleOf(doc, part, name, depth) ?? {}))
  }
  const type = Array.isArray(schema.type) ? schema.type.find((t: string) => t !== "null") : schema.type
  if (type === "object" || schema.properties !== undefined) {
    if (depth > 6) return {}
    const out: Json = {}
    for (const [key, property] of Object.entries(schema.properties ?? {})) out[key] = exampleOf(doc, property as Json, key, depth + 1)
    return out
  }
  if (type === "array") return depth > 6 || schema.items === undefined ? [] : [exampleOf(doc, schema.items, name.replace(/s$/, ""), depth + 1)]
  if (type === "string") return stringFor(name, schema)
  if (type === "integer" || type === "number") return numberFor(schema)
  if (type === "boolean") return true
  if (type === "null") return null
  return name === "" ? {} : stringFor(name, schema)
}

const withExample = (doc: Json, content: Json | undefined) => {
  const json = content?.["application/json"]
  if (json?.schema === undefined || json.example !== undefined || json.examples !== undefined) return
  json.example = exampleOf(doc, json.schema)
}

/** Every operation: an example of its JSON body, of each JSON answer, and of each parameter; one with none of these, a request. */
export const addExamples = (doc: Json) => {
  for (const [route, path] of Object.entries(doc.paths ?? {}) as Array<[string, Json]>) {
    for (const method of methods) {
      const operation = path[method] as Json | undefined
      if (operation === undefined) continue
      for (const parameter of (operation.parameters ?? []) as Array<Json>) {
        if (parameter.example === undefined && parameter.schema !== undefined) parameter.example = exampleOf(doc, parameter.schema, parameter.name)
      }
      withExample(doc, operation.requestBody?.content)
      for (const response of Object.values(operation.responses ?? {}) as Array<Json>) {
        if (response.$ref === undefined) withExample(doc, response.content)
      }
      if (!JSON.stringify(operation).includes('"example"')) {
        operation["x-codeSamples"] = [{ lang: "Shell", label: "curl", source: `curl -i -X ${method.toUpperCase()} "http://localhost:8080${route}"` }]
      }
    }
  }
  for (const response of Object.values(doc.components?.responses ?? {}) as Array<Json>) withExample(doc, response.content)
}

/**
 * `anyOf`/`oneOf` lists whose members repeat (the generator writes `{"type":"null"}` once per nullable layer)
 * keep one of each; a list left with one member becomes that member.
 */
export const dedupeBranches = (node: unknown): void => {
  if (Array.isArray(node)) {
    for (const item of node) dedupeBranches(item)
    return
  }
  if (node === null || typeof node !== "object") return
  const object = node as Json
  for (const value of Object.values(object)) dedupeBranches(value)
  for (const key of ["anyOf", "oneOf"]) {
    const list = object[key]
    if (!Array.isArray(list)) continue
    const seen = new Set<string>()
    const unique = list.filter((member) => {
      const text = JSON.stringify(member)
      if (seen.has(text)) return false
      seen.add(text)
      return true
    })
    if (unique.length === 1 && typeof unique[0] === "object" && Object.keys(object).every((k) => k === key || k === "description")) {
      delete object[key]
      Object.assign(object, unique[0], object.description === undefined ? {} : { description: object.description })
    } else {
      object[key] = unique
    }
  }
}

export interface EventKey {
  readonly key: string
  readonly name: string
  readonly group: string
  readonly description: string
}

export const eventEnvelopeSchema = {
  type: "object",
  description: "Every event, on webhooks, realtime and `GET /v1/events`: one envelope.",
  properties: {
    id: { type: "string", description: "`evt_<id>`: stable for the event; the `webhook-id` of every delivery attempt." },
    seq: { type: "integer", description: "The company's sequence number: gapless, increasing." },
    event: { type: "string", description: "The event key." },
    company_id: { type: "integer" },
    occurred_at: { type: "string", format: "date-time" },
    data: { type: "object", additionalProperties: true, description: "The payload of the key." }
  },
  required: ["id", "seq", "event", "company_id", "occurred_at", "data"]
}

const payloadExamples: Record<string, unknown> = {
  "message.created": {
    type: "text",
    message: { id: 1, conversation_id: 1, thread_id: 1, channel_id: 1, direction: "outbound", type: "text", status: "sent", message_content: "Hello from the API", attachments: [], created_at: "2026-11-28T09:00:00.000Z" },
    thread_id: 1,
    channel_id: 1,
    conversation_id: 1
  },
  "contact.created": { source: "outbound", contact: { id: 1, status: "lead" }, contact_id: 1 },
  "conversation.created": { thread_id: 1, channel_id: 1, contact_id: 1, conversation: { id: 1, contact_id: 1 }, conversation_id: 1 }
}

const signatureHeaders = [
  { name: "webhook-id", in: "header", required: true, schema: { type: "string" }, example: "evt_1042", description: "The envelope's `id`; the same on every attempt." },
  { name: "webhook-timestamp", in: "header", required: true, schema: { type: "integer" }, example: 1795856400, description: "Unix seconds of this attempt." },
  { name: "webhook-signature", in: "header", required: true, schema: { type: "string" }, example: "v1,K5oZfzN95Z9UVu1EsfQmfVNQhnkZ2pj9o9NDN/H/pI4=", description: "`v1,` and the base64 HMAC-SHA256 of `{id}.{timestamp}.{body}` keyed with the secret (Standard Webhooks); the header's name is the integration's `signatureHeader`." }
]

/** The `webhooks` section: what an integration receives for each key of the catalog. */
export const webhooksOf = (events: ReadonlyArray<EventKey>): Json => {
  const out: Json = {}
  for (const event of events) {
    out[event.key] = {
      post: {
        summary: event.name,
        description: `${event.description} Group: ${event.group}.`,
        operationId: `webhook.${event.key}`,
        tags: ["Webhooks"],
        parameters: signatureHeaders,
        requestBody: {
          required: true,
          content: {
            "application/json": {
              schema: { allOf: [{ $ref: "#/components/schemas/EventEnvelope" }, { type: "object", properties: { event: { const: event.key } } }] },
              example: { id: "evt_1042", seq: 3, event: event.key, company_id: 1, occurred_at: "2026-11-28T09:00:00.000Z", data: payloadExamples[event.key] ?? {} }
            }
          }
        },
        responses: {
          "200": { description: "Any 2xx: delivered. 410 disables the integration; anything else is retried." }
        }
      }
    }
  }
  return out
}
