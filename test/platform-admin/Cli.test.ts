import { assert, describe, it } from "@effect/vitest"
import { spawn } from "node:child_process"
import { afterAll, beforeAll } from "vitest"
import { uniqueEmail } from "../support/Ids.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

/** `npm run admin -- …` as an operator runs it: a child process, stdin piped (never a terminal). */
const admin = (args: ReadonlyArray<string>, options: { readonly stdin?: string; readonly key?: string } = {}) =>
  new Promise<{ code: number | null; stdout: string; stderr: string; json: any }>((resolve, reject) => {
    const child = spawn(process.execPath, ["--import", "tsx", "src/admin.ts", ...args, "--url", server.url, "--key", options.key ?? server.platformKey], {
      env: { ...process.env, PLATFORM_API_KEY: "" },
      stdio: ["pipe", "pipe", "pipe"]
    })
    let stdout = ""
    let stderr = ""
    child.stdout.on("data", (chunk: Buffer) => (stdout += chunk.toString()))
    child.stderr.on("data", (chunk: Buffer) => (stderr += chunk.toString()))
    child.on("error", reject)
    child.on("close", (code) => {
      let json: any = null
      try {
        json = JSON.parse(stdout)
      } catch {
        // not JSON: the test reads stdout/stderr
      }
      resolve({ code, stdout, stderr, json })
    })
    child.stdin.end(options.stdin ?? "")
  })

describe("operator CLI (src/admin.ts)", () => {
  it("creates a company with the password read from stdin, never from argv", async () => {
    const email = uniqueEmail("cli")
    const made = await admin(["create-company", "--name", "Cli Co", "--email", email, "--default-country", "DE"], { stdin: "piped-secret-123\n" })
    assert.strictEqual(made.code, 0, made.stderr)
    assert.strictEqual(made.json.data.company.default_country, "DE")
    const login = await request(server, "POST", "/v1/auth/mobile/login", { body: { email, password: "piped-secret-123", device_name: "cli" } })
    assert.strictEqual(login.status, 200, JSON.stringify(login.body))

    const noPassword = await admin(["add-user", "--company", String(made.json.data.company.id), "--email", uniqueEmail("x"), "--role", "agent"])
    assert.strictEqual(noPassword.code, 2)
    assert.match(noPassword.stderr, /no password on stdin/)
  })

  it("lists, reads and updates companies (plan, status); a suspended company's members get 403, other companies are untouched", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const listed = await admin(["list-companies", "--per-page", "100", "--page", "1"])
    assert.strictEqual(listed.code, 0, listed.stderr)
    assert.ok(listed.json.data.pagination.total >= 2)
    const got = await admin(["get-company", "--company", String(a.id)])
    assert.strictEqual(got.code, 0, got.stderr)
    assert.strictEqual(got.json.data.status, "active")

    const suspended = await admin(["update-company", "--company", String(a.id), "--plan", "pro", "--status", "suspended"])
    assert.strictEqual(suspended.code, 0, suspended.stderr)
    assert.strictEqual(suspended.json.data.plan, "pro")
    assert.strictEqual(suspended.json.data.status, "suspended")
    assert.strictEqual((await request(server, "GET", "/v1/contacts", { token: a.token })).status, 403)
    assert.strictEqual((await request(server, "GET", "/v1/contacts", { token: b.token })).status, 200)
    const restored = await admin(["update-company", "--company", String(a.id), "--status", "active"])
    assert.strictEqual(restored.code, 0, restored.stderr)
    assert.strictEqual((await request(server, "GET", "/v1/contacts", { token: a.token })).status, 200)

    const bad = await admin(["update-company", "--company", String(a.id), "--status", "gone"])
    assert.strictEqual(bad.code, 1)
    assert.match(bad.stderr, /422/)
    const missing = await admin(["get-company", "--company", "999999999"])
    assert.strictEqual(missing.code, 1)
    assert.match(missing.stderr, /404/)
  })

  it("rotates the platform key: the new key works, the old one is refused", async () => {
    const rotated = await admin(["rotate-platform-key"])
    assert.strictEqual(rotated.code, 0, rotated.stderr)
    const key = rotated.json.data.key as string
    assert.match(key, /^[A-Za-z0-9]{40}$/)
    assert.strictEqual((await request(server, "GET", "/platform/v1/companies", { token: server.platformKey })).status, 401)
    assert.strictEqual((await request(server, "GET", "/platform/v1/companies", { token: key })).status, 200)
    const again = await admin(["list-companies"], { key })
    assert.strictEqual(again.code, 0, again.stderr)
  })
})
