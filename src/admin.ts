/**
 * Operator CLI over the platform API (/platform/v1), for a running server.
 *
 *   npm run admin -- create-company --name "Acme" --email a@b.c --password secret123
 *                    [--plan business] [--admin-name "Ann"] [--url http://localhost:8080] [--key <PLATFORM_API_KEY>]
 *   npm run admin -- add-user --company 1 --email b@b.c --password secret123 --role agent [--name "Bob"]
 *
 * The key is --key, else $PLATFORM_API_KEY, else the file that embedded mode writes
 * ($DATA_DIR/platform-api-key, ./data by default). Prints the JSON answer; exits 1
 * when the server refuses, 2 on a usage mistake.
 */
import { existsSync, readFileSync } from "node:fs"
import { join } from "node:path"
import { parseArgs } from "node:util"

const usage = `usage:
  admin create-company --name <name> --email <admin e-mail> --password <password>
                       [--plan free|business|pro] [--admin-name <name>] [--url <base url>] [--key <platform key>]
  admin add-user --company <id> --email <e-mail> --password <password> --role admin|manager|agent
                 [--name <name>] [--url <base url>] [--key <platform key>]`

class UsageError extends Error {}

const options = {
  name: { type: "string" },
  email: { type: "string" },
  password: { type: "string" },
  plan: { type: "string" },
  "admin-name": { type: "string" },
  company: { type: "string" },
  role: { type: "string" },
  url: { type: "string" },
  key: { type: "string" },
  help: { type: "boolean", short: "h" }
} as const

type Values = ReturnType<typeof parseArgs<{ options: typeof options; allowPositionals: true }>>["values"]

const required = (values: Values, name: "name" | "email" | "password" | "company" | "role") => {
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

const call = async (values: Values, path: string, body: unknown) => {
  const url = `${baseUrl(values)}/platform/v1${path}`
  const response = await fetch(url, {
    method: "POST",
    headers: { authorization: `Bearer ${platformKey(values)}`, "content-type": "application/json", accept: "application/json" },
    body: JSON.stringify(body)
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
  "create-company": (values) => {
    const email = required(values, "email")
    return call(values, "/companies", {
      name: required(values, "name"),
      ...(values.plan !== undefined ? { plan: values.plan } : {}),
      admin: { email, password: required(values, "password"), name: values["admin-name"] ?? localPart(email) }
    })
  },
  "add-user": (values) => {
    const company = required(values, "company")
    if (!/^\d+$/.test(company)) throw new UsageError("--company must be a company id")
    const email = required(values, "email")
    return call(values, `/companies/${company}/users`, {
      email,
      password: required(values, "password"),
      name: values.name ?? localPart(email),
      role: required(values, "role")
    })
  }
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
