/**
 * Operator CLI over the platform API (/platform/v1), for a running server.
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

const call = async (values: Values, path: string, body?: unknown, method = "POST") => {
  const url = `${baseUrl(values)}/platform/v1${path}`
  const response = await fetch(url, {
    method,
    headers: {
      authorization: `Bearer ${platformKey(values)}`,
      accept: "application/json",
      ...(body === undefined ? {} : { "content-type": "application/json" })
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) })
  }).catch((cause: unknown) => {
    throw new Error(`cannot reach ${url}: ${cause instanceof Error ? (cause.cause as Error | undefined)?.message ?? cause.message : String(cause)}`)
  })
  const text = await response.text()
  let parsed: any = text
  try {
    parsed = JSON.parse(text)
  } catch {
    // not JSON: reported as text below
  }
  if (!response.ok) {
    const details = parsed?.errors !== undefined
      ? "\n" + Object.entries(parsed.errors as Record<string, Array<string>>).map(([f, m]) => `  ${f}: ${m.join(" ")}`).join("\n")
      : ""
    throw new Error(`${response.status}: ${parsed?.message ?? text}${details}`)
  }
  return parsed
}

const commands: Record<string, (values: Values) => Promise<unknown>> = {
  "create-company": async (values) => {
    const email = required(values, "email")
    const name = required(values, "name")
    return call(values, "/companies", {
      name,
      ...(values.plan !== undefined ? { plan: values.plan } : {}),
      ...(values["default-country"] !== undefined ? { default_country: values["default-country"] } : {}),
      admin: { email, password: await password(values), name: values["admin-name"] ?? localPart(email) }
    })
  },
  "add-user": async (values) => {
    const company = companyId(values)
    const email = required(values, "email")
    const role = required(values, "role")
    return call(values, `/companies/${company}/users`, {
      email,
      password: await password(values),
      name: values.name ?? localPart(email),
      role
    })
  },
  "list-companies": (values) => {
    const query = new URLSearchParams()
    const page = positive(values.page, "--page")
    const perPage = positive(values["per-page"], "--per-page")
    if (page !== undefined) query.set("page", page)
    if (perPage !== undefined) query.set("perPage", perPage)
    return call(values, `/companies${query.size > 0 ? `?${query}` : ""}`, undefined, "GET")
  },
  "get-company": (values) => call(values, `/companies/${companyId(values)}`, undefined, "GET"),
  "update-company": (values) => {
    const company = companyId(values)
    const patch = {
      ...(values.name !== undefined ? { name: values.name } : {}),
      ...(values.plan !== undefined ? { plan: values.plan } : {}),
      ...(values.status !== undefined ? { status: values.status } : {}),
      ...(values["default-country"] !== undefined ? { default_country: values["default-country"] === "" ? null : values["default-country"] } : {})
    }
    if (Object.keys(patch).length === 0) throw new UsageError("give at least one of --name, --plan, --status, --default-country")
    return call(values, `/companies/${company}`, patch, "PATCH")
  },
  "rotate-platform-key": (values) => call(values, "/key/rotate")
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
