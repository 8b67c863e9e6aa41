/**
 * An OpenAPI document (what `/openapi.json` serves) to the source of the fetch client
 * (`src/client/fetch/Client.ts`): a type per component schema, a request type and a result type per
 * operation, and `makeClient` with one function per operation, grouped as the operation ids are.
 */
import { type JsonSchema, propertyKey, refName, typeExpression } from "./Schema.ts"

interface Parameter {
  readonly name: string
  readonly in: "path" | "query" | "header" | "cookie"
  readonly required?: boolean
  readonly schema: JsonSchema
}

interface Content {
  readonly schema?: JsonSchema
}

interface ResponseObject {
  readonly $ref?: string
  readonly description?: string
  readonly content?: Readonly<Record<string, Content>>
}

interface OperationObject {
  readonly operationId: string
  readonly summary?: string
  readonly description?: string
  readonly parameters?: ReadonlyArray<Parameter>
  readonly requestBody?: { readonly required?: boolean; readonly content: Readonly<Record<string, Content>> }
  readonly responses: Readonly<Record<string, ResponseObject>>
}

export interface Document {
  readonly info: { readonly title: string; readonly version: string }
  readonly paths: Readonly<Record<string, Readonly<Record<string, OperationObject>>>>
  readonly components: {
    readonly schemas: Readonly<Record<string, JsonSchema>>
    readonly responses?: Readonly<Record<string, ResponseObject>>
  }
  /** Event keys, each with the envelope its webhook delivers. */
  readonly webhooks?: Readonly<Record<string, unknown>>
}

interface Entry {
  readonly method: string
  readonly path: string
  readonly group: string
  readonly endpoint: string
  readonly typeName: string
  readonly operation: OperationObject
}

const METHODS = ["get", "post", "put", "patch", "delete"]

const pascal = (name: string) => name.charAt(0).toUpperCase() + name.slice(1)

const comment = (text: string, depth: number) => {
  const pad = "  ".repeat(depth)
  const lines = text.replace(/\*\//g, "*\\/").split("\n")
  return lines.length === 1 ? `${pad}/** ${lines[0]} */\n` : `${pad}/**\n${lines.map((l) => `${pad} * ${l}`.trimEnd()).join("\n")}\n${pad} */\n`
}

const entriesOf = (document: Document): Array<Entry> =>
  Object.entries(document.paths).flatMap(([path, item]) =>
    METHODS.filter((method) => item[method] !== undefined).map((method) => {
      const operation = item[method]
      const [group, endpoint] = operation.operationId.split(".")
      return { method: method.toUpperCase(), path, group, endpoint, typeName: pascal(group) + pascal(endpoint), operation }
    })
  )

const fieldsOf = (parameters: ReadonlyArray<Parameter>) =>
  parameters.map((p) => `${propertyKey(p.name)}${p.required === true ? "" : "?"}: ${typeExpression(p.schema, 2, true)}`)

const group = (name: string, fields: ReadonlyArray<string>, required: boolean) =>
  fields.length === 0 ? [] : [`${name}${required ? "" : "?"}: {\n    ${fields.join("\n    ")}\n  }`]

const payloadOf = (body: OperationObject["requestBody"]) => {
  if (body === undefined) return []
  const optional = body.required === true ? "" : "?"
  if (body.content["multipart/form-data"] !== undefined) return [`payload${optional}: FormData`]
  const json = body.content["application/json"]?.schema
  return [`payload${optional}: ${json === undefined ? "unknown" : typeExpression(json, 1)}`]
}

/** Whether the request argument may be left out: nothing in it is required. */
const optionalRequest = (operation: OperationObject) =>
  operation.requestBody?.required !== true && !(operation.parameters ?? []).some((p) => p.required === true)

const requestType = (entry: Entry) => {
  const parameters = entry.operation.parameters ?? []
  const byPlace = (place: Parameter["in"]) => parameters.filter((p) => p.in === place)
  const members = [
    ...group("params", fieldsOf(byPlace("path")), true),
    ...group("query", fieldsOf(byPlace("query")), byPlace("query").some((p) => p.required === true)),
    ...group("headers", fieldsOf(byPlace("header")), byPlace("header").some((p) => p.required === true)),
    ...payloadOf(entry.operation.requestBody)
  ]
  return `export interface ${entry.typeName}Request {${members.length === 0 ? "" : `\n  ${members.join("\n  ")}\n`}}\n`
}

const resolve = (document: Document, response: ResponseObject) =>
  response.$ref === undefined ? response : document.components.responses?.[refName(response.$ref)] ?? {}

const bodyType = (response: ResponseObject) => {
  const content = response.content ?? {}
  const json = content["application/json"]
  if (json !== undefined) return json.schema === undefined ? "unknown" : typeExpression(json.schema, 1)
  const [type] = Object.keys(content)
  if (type === undefined) return "undefined"
  return type.startsWith("text/") ? "string" : "Blob"
}

const isSuccess = (status: string) => status.startsWith("2") || status.startsWith("3")

const successBodies = (document: Document, entry: Entry) =>
  Object.entries(entry.operation.responses).filter(([status]) => isSuccess(status))
    .map(([, raw]) => bodyType(resolve(document, raw)))

/** `{ data: X }` of a named X as `Data<X>`, the envelope most answers share. */
const enveloped = (body: string) => {
  const named = /^\{\n {4}data: (\w+)\n {2}\}$/.exec(body)
  return named === null ? undefined : `Data<${named[1]}>`
}

/**
 * Success bodies written inline by more than one operation, each named once after the first of them
 * (`<Operation>Data`), so that the operations that share an answer share its type.
 */
const sharedBodies = (document: Document, entries: ReadonlyArray<Entry>) => {
  const first = new Map<string, Entry>()
  const repeated = new Map<string, string>()
  for (const entry of entries) {
    for (const body of successBodies(document, entry).filter((b) => b.startsWith("{") && enveloped(b) === undefined)) {
      const owner = first.get(body)
      if (owner === undefined) first.set(body, entry)
      else if (!repeated.has(body)) repeated.set(body, `${owner.typeName}Data`)
    }
  }
  return repeated
}

const resultType = (document: Document, entry: Entry, shared: ReadonlyMap<string, string>) => {
  const members = Object.entries(entry.operation.responses).map(([status, raw]) => {
    const body = bodyType(resolve(document, raw))
    return `${isSuccess(status) ? "Success" : "Failure"}<${status}, ${enveloped(body) ?? shared.get(body) ?? body}>`
  })
  return `export type ${entry.typeName}Result =\n  | ${members.join("\n  | ")}\n`
}

const statusesOf = (entry: Entry) => Object.keys(entry.operation.responses).map(Number)

const clientFunction = (entry: Entry) => {
  const { operation } = entry
  const repeated = operation.summary !== undefined && operation.description?.startsWith(operation.summary.replace(/\.$/, "")) === true
  const doc = [repeated ? undefined : operation.summary, operation.description, `\`${entry.method} ${entry.path}\``]
    .filter((t) => t !== undefined).join("\n\n")
  const argument = optionalRequest(operation) ? `request: ${entry.typeName}Request = {}` : `request: ${entry.typeName}Request`
  const spec = `{ method: "${entry.method}", path: "${entry.path}", statuses: [${statusesOf(entry).join(", ")}] }`
  return `${comment(doc, 2)}    ${entry.endpoint}: (${argument}, init?: CallOptions) =>\n` +
    `      call(options, ${spec}, request, init) as Promise<${entry.typeName}Result>`
}

const clientOf = (entries: ReadonlyArray<Entry>) => {
  const groups = new Map<string, Array<Entry>>()
  for (const entry of entries) groups.set(entry.group, [...(groups.get(entry.group) ?? []), entry])
  const body = [...groups].map(([name, members]) => `  ${name}: {\n${members.map(clientFunction).join(",\n")}\n  }`).join(",\n")
  return `/** One function per operation: \`client.<group>.<operation>({ params, query, headers, payload })\`. */\n` +
    `export const makeClient = (options: ClientOptions) => ({\n${body}\n})\n\nexport type Client = ReturnType<typeof makeClient>\n`
}

const eventKeys = (document: Document) => {
  const keys = Object.keys(document.webhooks ?? {}).map((key) => `\n  | ${JSON.stringify(key)}`)
  return `/** Every event key: the \`event\` of an \`EventEnvelope\` on webhooks, realtime and \`GET /v1/events\`. */\n` +
    `export type EventKey =${keys.length === 0 ? " never" : keys.join("")}\n`
}

/** The client's source for a document; the same document always gives the same text. */
export const generate = (document: Document): string => {
  const entries = entriesOf(document)
  const schemas = Object.entries(document.components.schemas)
    .map(([name, schema]) => `export type ${name} = ${typeExpression(schema)}\n`)
  const shared = sharedBodies(document, entries)
  const answers = [...shared].map(([body, name]) => `export type ${name} = ${body.replace(/\n  /g, "\n")}\n`)
  const operations = entries.map((entry) =>
    `${comment(`${entry.operation.summary ?? entry.operation.operationId}: \`${entry.method} ${entry.path}\``, 0)}` +
    `${requestType(entry)}\n${resultType(document, entry, shared)}`
  )
  return [
    `// Generated by \`npm run client:generate\` from ${document.info.title} ${document.info.version} (/openapi.json). Do not edit.\n` +
    `import { call, type CallOptions, type ClientOptions, type Failure, type Success } from "./Runtime.ts"\n\n` +
    `export { ApiError, type CallOptions, type ClientOptions, type Failure, type Success, unwrap } from "./Runtime.ts"\n\n` +
    `/** The envelope of most answers. */\nexport type Data<T> = {\n  data: T\n}\n`,
    ...schemas,
    eventKeys(document),
    ...answers,
    ...operations,
    clientOf(entries)
  ].join("\n")
}
