/**
 * Finishing of the generated OpenAPI document (the `transform` of the API's annotations), so every
 * area's endpoints get the same treatment without repeating it in 40 Api.ts files:
 * - a summary on every operation (its description's first sentence, else its name);
 * - the kernel's answers where they can happen: 400 (malformed body), 413, 415 on operations
 *   with a body, 429 with `Retry-After` and `X-RateLimit-*` on authenticated ones, `X-Request-Id`
 *   on every response;
 * - no ±2^53 bounds on integers (ids are plain integers);
 * - a server entry, relative to wherever the document is served;
 * - no repeated `anyOf` members, an example on every operation, and the events as `webhooks`
 *   (`OpenApiExamples.ts`).
 */

import { addExamples, dedupeBranches, eventEnvelopeSchema, type EventKey, webhooksOf } from "./OpenApiExamples.ts"

type Json = Record<string, any>

const methods = ["get", "put", "post", "delete", "options", "head", "patch", "trace"] as const

const header = (description: string, schema: Json = { type: "string" }) => ({ description, schema })

const components = {
  headers: {
    RequestId: header("The request's id (the client's `X-Request-Id` when it sent a valid one); it is in every log line of the request."),
    RetryAfter: header("Seconds to wait before trying again.", { type: "integer" }),
    RateLimitLimit: header("Requests allowed in the window.", { type: "integer" }),
    RateLimitRemaining: header("Requests left in the window.", { type: "integer" })
  },
  schemas: {
    ErrorMessage: {
      type: "object",
      description: "The error shape of answers the HTTP kernel gives before a handler runs.",
      properties: { message: { type: "string" } },
      required: ["message"]
    }
  }
}

const requestIdHeader = { "X-Request-Id": { $ref: "#/components/headers/RequestId" } }
const messageContent = { "application/json": { schema: { $ref: "#/components/schemas/ErrorMessage" } } }

const responses: Json = {
  BadRequest: { description: "The body is not well-formed JSON.", headers: requestIdHeader, content: messageContent },
  PayloadTooLarge: { description: "The body is larger than the server accepts.", headers: requestIdHeader, content: messageContent },
  UnsupportedMediaType: { description: "The body's Content-Type is not one this operation reads.", headers: requestIdHeader, content: messageContent },
  TooManyRequests: {
    description: "Rate limit reached: wait `Retry-After` seconds.",
    headers: {
      ...requestIdHeader,
      "Retry-After": { $ref: "#/components/headers/RetryAfter" },
      "X-RateLimit-Limit": { $ref: "#/components/headers/RateLimitLimit" },
      "X-RateLimit-Remaining": { $ref: "#/components/headers/RateLimitRemaining" }
    },
    content: messageContent
  }
}

/** A short summary from the description's first sentence, else from the operation id (`contacts.create` → "Contacts: create"). */
export const summaryOf = (operation: Json): string => {
  const description = typeof operation.description === "string" ? operation.description.trim() : ""
  const sentence = /^(.+?[.!?])(\s|$)/s.exec(description)?.[1] ?? description
  if (sentence !== "" && sentence.length <= 100 && !sentence.includes("\n")) return sentence.replace(/[.]$/, "")
  const id = String(operation.operationId ?? "operation")
  const [group, name = ""] = id.split(".")
  const words = (text: string) => text.replace(/([a-z0-9])([A-Z])/g, "$1 $2").replace(/[-_]/g, " ").toLowerCase()
  return `${words(group).replace(/^./, (c) => c.toUpperCase())}: ${words(name)}`.trim()
}

const dropSafeIntegerBounds = (node: unknown): void => {
  if (Array.isArray(node)) {
    for (const item of node) dropSafeIntegerBounds(item)
    return
  }
  if (node === null || typeof node !== "object") return
  const object = node as Json
  if (object.minimum === -9007199254740991) delete object.minimum
  if (object.maximum === 9007199254740991) delete object.maximum
  for (const value of Object.values(object)) dropSafeIntegerBounds(value)
}

/** The transform itself: takes the generated document and returns the finished one, with `events` as its webhooks. */
export const finishOpenApi = (document: Json, events: ReadonlyArray<EventKey> = []): Json => {
  const doc: Json = structuredClone(document)
  dedupeBranches(doc)
  doc.servers = doc.servers ?? [{ url: "/", description: "This server" }]
  doc.components = doc.components ?? {}
  doc.components.headers = { ...components.headers, ...doc.components.headers }
  doc.components.schemas = { ...components.schemas, ...doc.components.schemas }
  doc.components.responses = { ...responses, ...doc.components.responses }
  const globalSecurity = Array.isArray(doc.security) && doc.security.length > 0
  for (const path of Object.values(doc.paths ?? {}) as Array<Json>) {
    for (const method of methods) {
      const operation = path[method] as Json | undefined
      if (operation === undefined) continue
      if (typeof operation.summary !== "string" || operation.summary === "") operation.summary = summaryOf(operation)
      operation.responses = operation.responses ?? {}
      const add = (status: string, name: string) => {
        if (operation.responses[status] === undefined) operation.responses[status] = { $ref: `#/components/responses/${name}` }
      }
      if (operation.requestBody !== undefined) {
        add("400", "BadRequest")
        add("413", "PayloadTooLarge")
        add("415", "UnsupportedMediaType")
      }
      const security = operation.security ?? (globalSecurity ? doc.security : [])
      if (Array.isArray(security) && security.length > 0) add("429", "TooManyRequests")
      for (const response of Object.values(operation.responses) as Array<Json>) {
        if (response.$ref !== undefined) continue
        response.headers = { ...requestIdHeader, ...response.headers }
      }
    }
  }
  dropSafeIntegerBounds(doc)
  addExamples(doc)
  if (events.length > 0) {
    doc.components.schemas.EventEnvelope = eventEnvelopeSchema
    doc.webhooks = webhooksOf(events)
  }
  return doc
}
