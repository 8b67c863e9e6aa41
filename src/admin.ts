/**
 * Operator CLI over the platform API (/platform/v1), for a running server, through the generated fetch
 * client (src/client/fetch/).
 *
 *   npm run admin -- create-company --name "Acme" --email a@b.c [--plan business] [--admin-name "Ann"]
 *   npm run admin -- add-user --company 1 --email b@b.c --role agent [--name "Bob"]
 *   npm run admin -- list-companies [--page 1] [--per-page 20]
 *   npm run admin -- get-company --company 1
 *   npm run admin -- update-company --company 1 [--plan pro] [--status suspended] [--name "…"] [--default-country US]
 *   npm run admin -- rotate-platform-key
 *   (every command also takes [--url http://localhost:8080] [--key <PLATFORM_API_KEY>])
 *
 * A password is never needed on the command line (where `ps` and the shell history show it):
 * without --password it is read from stdin when stdin is not a terminal (`… < file`, a pipe),
 * else asked for at a prompt that does not echo.
 *
 * The key is --key, else $PLATFORM_API_KEY, else the file that embedded mode writes
 * ($DATA_DIR/platform-api-key, ./data by default). Prints the JSON answer; exits 1
 * when the server refuses, 2 on a usage mistake.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { createInterface } from "node:readline/promises"
import { parseArgs } from "node:util"
import { ApiError, type Failure, makeClient, type Success } from "./client/fetch/Client.ts"

const usage = `usage:
  admin create-company --name <name> --email <admin e-mail> [--password <password>]
                       [--plan free|business|pro] [--admin-name <name>]
  admin add-user --company <id> --email <e-mail> [--password <password>] --role admin|manager|agent [--name <name>]
  admin list-companies [--page <n>] [--per-page <n>]
  admin get-company --company <id>
  admin update-company --company <id> [--plan free|business|pro] [--status active|suspended] [--name <name>]
                       [--default-country <ISO 3166-1 alpha-2>]
  admin rotate-platform-key
common options: [--url <base url>] [--key <platform key>]
without --password, the password is read from stdin (pipe or file) or asked for at a prompt`

class UsageError extends Error {}

const options = {
  name: { type: "string" },
  email: { type: "string" },
  password: { type: "string" },
  plan: { type: "string" },
  "admin-name": { type: "string" },
  company: { type: "string" },
  role: { type: "string" },
  status: { type: "string" },
  "default-country": { type: "string" },
  page: { type: "string" },
  "per-page": { type: "string" },
  url: { type: "string" },
  key: { type: "string" },
  help: { type: "boolean", short: "h" }
} as const

type Values = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>["values"]

const required = (values: Values, name: "name" | "email" | "company" | "role") => {
  const value = values[name]
  if (value === undefined || value === "") throw new UsageError(`missing --${name}`)
  return value
}

const platformKey = (values: Values) => {
  if (values.key !== undefined && values.key !== "") return values.key
  const env = process.env.PLATFORM_API_KEY
  if (env !== undefined && env !== "") return env
  const file = join(process.env.DATA_DIR ?? "./data", "platform-api-key")
  if (existsSync(file)) return readFileSync(file, "utf8").trim()
  throw new UsageError(`no platform key: pass --key, set PLATFORM_API_KEY, or run from the directory holding ${file}`)
}

const baseUrl = (values: Values) => (values.url ?? `http://localhost:${process.env.PORT ?? 8080}`).replace(/\/+$/, "")

const localPart = (email: string) => email.split("@")[0] || email

/** A line from stdin when it is a pipe or a file, else a prompt that does not echo what is typed. */
const readPassword = async (): Promise<string> => {
  if (!process.stdin.isTTY) {
    const chunks: Array<Buffer> = []
    for await (const chunk of process.stdin) chunks.push(chunk as Buffer)
    const line = Buffer.concat(chunks).toString("utf8").split(/\r?\n/)[0] ?? ""
    if (line === "") throw new UsageError("no password on stdin")
    return line
  }
  const rl = createInterface({ input: process.stdin, output: process.stderr, terminal: true })
  const muted = rl as unknown as { _writeToOutput: (text: string) => void }
  let prompted = false
  muted._writeToOutput = (text) => {
    if (!prompted) {
      process.stderr.write(text)
      prompted = true
    }
  }
  try {
    const answer = await rl.question("password: ")
    process.stderr.write("\n")
    if (answer === "") throw new UsageError("empty password")
    return answer
  } finally {
    rl.close()
  }
}

const password = (values: Values) =>
  values.password !== undefined && values.password !== "" ? Promise.resolve(values.password) : readPassword()

const companyId = (values: Values) => {
  const company = required(values, "company")
  if (!/^\d+$/.test(company)) throw new UsageError("--company must be a company id")
  return company
}

const positive = (value: string | undefined, flag: string) => {
  if (value === undefined) return undefined
  if (!/^\d+$/.test(value) || Number(value) < 1) throw new UsageError(`${flag} must be a positive number`)
  return value
}

const clientOf = (values: Values) => makeClient({ baseUrl: baseUrl(values), token: platformKey(values) }).platform

/** The answer's JSON on success; a refusal becomes an error naming the status, the message and each field's errors. */
const answer = async <R extends Success<number, unknown> | Failure<number, unknown>>(pending: Promise<R>, values: Values) => {
  const result = await pending.catch((cause: unknown) => {
    if (cause instanceof ApiError) throw new Error(cause.message)
    const reason = cause instanceof Error ? (cause.cause as Error | undefined)?.message ?? cause.message : String(cause)
    throw new Error(`cannot reach ${baseUrl(values)}: ${reason}`)
  })
  if (result.ok) return result.data
  const body = result.error as { message?: string; errors?: Record<string, Array<string>> } | undefined
  const details = Object.entries(body?.errors ?? {}).map(([field, messages]) => `\n  ${field}: ${messages.join(" ")}`).join("")
  throw new Error(`${result.status}: ${body?.message ?? JSON.stringify(body)}${details}`)
}

type Plan = "free" | "business" | "pro"

/** An enumerated option passed on as typed: the server checks it and answers 422 naming the field. */
const checkedByServer = <T extends string>(value: string) => value as T

const optional = <T extends string>(value: string | undefined) => value === undefined ? undefined : checkedByServer<T>(value)

const commands: Record<string, (values: Values) => Promise<unknown>> = {
  "create-company": async (values) => {
    const email = required(values, "email")
    const name = required(values, "name")
    const payload = {
      name,
      plan: optional<Plan>(values.plan),
      default_country: values["default-country"],
      admin: { email, password: await password(values), name: values["admin-name"] ?? localPart(email) }
    }
    return answer(clientOf(values).createCompany({ payload }), values)
  },
  "add-user": async (values) => {
    const id = companyId(values)
    const email = required(values, "email")
    const role = checkedByServer<"admin" | "manager" | "agent">(required(values, "role"))
    const payload = { email, password: await password(values), name: values.name ?? localPart(email), role }
    return answer(clientOf(values).addUser({ params: { id }, payload }), values)
  },
  "list-companies": (values) => {
    const query = { page: positive(values.page, "--page"), perPage: positive(values["per-page"], "--per-page") }
    return answer(clientOf(values).listCompanies({ query }), values)
  },
  "get-company": (values) => answer(clientOf(values).getCompany({ params: { id: companyId(values) } }), values),
  "update-company": (values) => {
    const id = companyId(values)
    const country = values["default-country"]
    const payload = {
      name: values.name,
      plan: optional<Plan>(values.plan),
      status: optional<"active" | "suspended">(values.status),
      ...(country !== undefined ? { default_country: country === "" ? null : country } : {})
    }
    if (Object.values(payload).every((v) => v === undefined)) {
      throw new UsageError("give at least one of --name, --plan, --status, --default-country")
    }
    return answer(clientOf(values).updateCompany({ params: { id }, payload }), values)
  },
  "rotate-platform-key": (values) => answer(clientOf(values).rotateKey(), values)
}

const main = async () => {
  const { values, positionals } = parseArgs({ options, allowPositionals: true, args: process.argv.slice(2) })
  const command = positionals[0]
  if (values.help === true || command === undefined) {
    if (values.help === true) {
      console.log(usage)
      return 0
    }
    console.error(usage)
    return 2
  }
  const run = commands[command]
  if (run === undefined) throw new UsageError(`unknown command: ${command}`)
  console.log(JSON.stringify(await run(values), null, 2))
  return 0
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    const usageMistake = error instanceof UsageError || (error as { code?: string }).code?.startsWith("ERR_PARSE_ARGS")
    console.error(`admin: ${error instanceof Error ? error.message : String(error)}`)
    if (usageMistake) console.error(usage)
    process.exit(usageMistake ? 2 : 1)
  }
)
