import { assert, describe, it } from "@effect/vitest"
import { execFile } from "node:child_process"
import { mkdtempSync, rmSync, writeFileSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { uniqueEmail } from "../support/Ids.ts"
import { createCompany, request, startServer, type TestServer } from "../support/TestServer.ts"

let server: TestServer
let dataDir: string
beforeAll(async () => {
  server = await startServer()
  dataDir = mkdtempSync(join(tmpdir(), "crm-admin-"))
})
afterAll(async () => {
  rmSync(dataDir, { recursive: true, force: true })
  await server?.close()
})

interface Run {
  readonly code: number
  readonly stdout: string
  readonly stderr: string
}

const admin = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  new Promise<Run>((resolve) => {
    const { PLATFORM_API_KEY: _, DATA_DIR: __, ...inherited } = process.env
    execFile("npx", ["tsx", "src/admin.ts", ...args], {
      cwd: join(import.meta.dirname, "../.."),
      env: { ...inherited, DATA_DIR: join(dataDir, "missing"), ...env },
      timeout: 60_000
    }, (error, stdout, stderr) => {
      resolve({ code: error === null ? 0 : typeof error.code === "number" ? error.code : -1, stdout, stderr })
    })
  })

describe("admin CLI", () => {
  it("creates a company and prints the platform API's answer", async () => {
    const email = uniqueEmail("cli")
    const run = await admin([
      "create-company", "--name", "Acme CLI", "--email", email, "--password", "secret123",
      "--plan", "business", "--admin-name", "Ann", "--url", server.url, "--key", server.platformKey
    ])
    assert.strictEqual(run.code, 0, run.stderr)
    const body = JSON.parse(run.stdout)
    assert.strictEqual(body.data.company.name, "Acme CLI")
    assert.strictEqual(body.data.company.plan, "business")
    assert.strictEqual(body.data.admin.email, email)
    const me = await request(server, "GET", "/v1/me", { token: body.data.token })
    assert.strictEqual(me.status, 200)
    assert.strictEqual(me.body.data.current_company_id, body.data.company.id)
  }, 60_000)

  it("reads the key from PLATFORM_API_KEY, else from the data directory's key file", async () => {
    const fromEnv = await admin(
      ["create-company", "--name", "Env", "--email", uniqueEmail("env"), "--password", "secret123", "--url", server.url],
      { PLATFORM_API_KEY: server.platformKey }
    )
    assert.strictEqual(fromEnv.code, 0, fromEnv.stderr)
    assert.strictEqual(JSON.parse(fromEnv.stdout).data.company.plan, "free")

    writeFileSync(join(dataDir, "platform-api-key"), `${server.platformKey}\n`)
    const fromFile = await admin(
      ["create-company", "--name", "File", "--email", uniqueEmail("file"), "--password", "secret123", "--url", server.url],
      { DATA_DIR: dataDir }
    )
    assert.strictEqual(fromFile.code, 0, fromFile.stderr)
    assert.strictEqual(JSON.parse(fromFile.stdout).data.company.name, "File")

    const none = await admin(["create-company", "--name", "None", "--email", "n@example.test", "--password", "secret123", "--url", server.url])
    assert.notStrictEqual(none.code, 0)
    assert.match(none.stderr, /no platform key/)
  }, 60_000)

  it("adds a user to a company, only to that company", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const email = uniqueEmail("agent")
    const run = await admin([
      "add-user", "--company", String(company.id), "--email", email, "--password", "secret123", "--role", "agent",
      "--url", server.url, "--key", server.platformKey
    ])
    assert.strictEqual(run.code, 0, run.stderr)
    const body = JSON.parse(run.stdout)
    assert.strictEqual(body.data.user.email, email)
    assert.strictEqual(typeof body.data.user.id, "number")

    const missing = await admin([
      "add-user", "--company", "999999999", "--email", email, "--password", "secret123", "--role", "agent",
      "--url", server.url, "--key", server.platformKey
    ])
    assert.strictEqual(missing.code, 1)
    assert.match(missing.stderr, /404: Company not found\./)
    assert.notStrictEqual(other.id, company.id)
  }, 60_000)

  it("fails with a message and a non-zero exit", async () => {
    const [wrongKey, invalid, badRole, unreachable, usage, unknown] = await Promise.all([
      admin([
        "create-company", "--name", "X", "--email", uniqueEmail("x"), "--password", "secret123",
        "--url", server.url, "--key", "wrong"
      ]),
      admin([
        "create-company", "--name", "X", "--email", "not-an-email", "--password", "short", "--plan", "gold",
        "--url", server.url, "--key", server.platformKey
      ]),
      admin([
        "add-user", "--company", "1", "--email", uniqueEmail("r"), "--password", "secret123", "--role", "owner",
        "--url", server.url, "--key", server.platformKey
      ]),
      admin([
        "create-company", "--name", "X", "--email", "x@example.test", "--password", "secret123",
        "--url", "http://127.0.0.1:9", "--key", "k"
      ]),
      admin(["create-company", "--email", "x@example.test"]),
      admin(["frobnicate"])
    ])
    assert.strictEqual(wrongKey.code, 1)
    assert.match(wrongKey.stderr, /401: Unauthenticated\./)
    assert.strictEqual(wrongKey.stdout, "")

    assert.strictEqual(invalid.code, 1)
    assert.match(invalid.stderr, /422: /)
    assert.match(invalid.stderr, /admin\.email:/)
    assert.match(invalid.stderr, /admin\.password:/)
    assert.match(invalid.stderr, /plan:/)

    assert.strictEqual(badRole.code, 1)
    assert.match(badRole.stderr, /role:/)

    assert.strictEqual(unreachable.code, 1)
    assert.match(unreachable.stderr, /cannot reach/)

    assert.strictEqual(usage.code, 2)
    assert.match(usage.stderr, /missing --name/)
    assert.strictEqual(unknown.code, 2)
    assert.match(unknown.stderr, /unknown command/)
  }, 60_000)
})
