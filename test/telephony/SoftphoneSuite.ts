import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"
import {
  type Adapter,
  answeringDevice,
  base,
  enable,
  outage,
  person,
  profile,
  pbxCalls,
  sandboxCalls,
  secretOf,
  sessionLogin,
  startTelephony,
  telephonyCompany
} from "./support.ts"

let server: RunningServer

const endpoints: Array<[string, string, unknown?]> = [
  ["GET", "/v1/softphone/credentials"],
  ["POST", "/v1/softphone/reset-password"],
  ["GET", "/v1/softphone/external-credentials"],
  ["POST", "/v1/softphone/external/reset-password"],
  ["GET", "/v1/softphone/colleagues"],
  ["POST", "/v1/softphone/internal-call", { extension: "100" }],
  ["POST", "/v1/softphone/external-call", { number: "+12025550100" }]
]

/** A company with telephony on, an admin operator, and two agent operators (the second with extension 202). */
const office = async () => {
  const company = await telephonyCompany(server)
  const alice = await person(server, company.id)
  const bob = await person(server, company.id)
  const carol = await person(server, company.id)
  for (const id of [company.admin.id, alice.id, bob.id]) await enable(server, company.adminToken, id)
  const ext = await request(server, "POST", `${base}/${bob.id}/telephony/extension`, {
    token: company.adminToken,
    body: { extension: "202" }
  })
  assert.strictEqual(ext.status, 200)
  return { company, alice, bob, carol }
}

const seedContact = async (companyId: number) => {
  const [row] = await query<{ id: number }>(
    server,
    "INSERT INTO contacts (company_id, first_name, status) VALUES ($1, 'Dana', 'active') RETURNING id",
    [companyId]
  )
  return row.id
}

const callRows = (companyId: number) =>
  query(server, "SELECT * FROM call_attempts WHERE company_id = $1 ORDER BY id", [companyId])

/** The suite against one PBX adapter (one per test file: the app reads its environment once per process). */
export const softphoneSuite = (adapter: Adapter) => describe(`softphone on the ${adapter} PBX`, () => {
let telephony: Awaited<ReturnType<typeof startTelephony>>
beforeAll(async () => {
  telephony = await startTelephony(adapter)
  server = telephony.server
}, 60_000)
afterAll(() => telephony?.close())

  it("refuses service-account tokens with 403 on every endpoint, even with admin role", async () => {
    const { company } = await office()
    await answeringDevice(server, company.id, company.adminToken)
    for (const [method, path, body] of endpoints) {
      const res = await request(server, method, path, { token: company.token, body })
      assert.strictEqual(res.status, 403, `${method} ${path}`)
      assert.deepStrictEqual(res.body, { message: "This endpoint accepts only session or mobile-token authentication." })
    }
    assert.deepStrictEqual(await pbxCalls(server, company.id), [])
  })

  it("serves the operator's own browser credentials over a mobile token and a session", async () => {
    const { company, alice } = await office()
    const web = await profile(server, company.id, `agent-${alice.id}-web`)
    const res = await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })
    assert.strictEqual(res.status, 200)
    const password = res.body.data.sip_password
    assert.strictEqual(web!.secret, secretOf(server, company.id, web!.username, password))
    const { host, wssUrl } = telephony.sip(company.id, { host: "sip.localhost", tcpPort: 5060, wssUrl: "wss://sip.localhost:8089/ws" })
    assert.deepStrictEqual(res.body.data, {
      sip_username: `agent-${alice.id}-web`,
      sip_password: password,
      host,
      wss_url: wssUrl,
      extension: null,
      display_name: "Person",
      registered: false
    })
    const session = await sessionLogin(server, alice.email)
    const viaSession = await session("GET", "/v1/softphone/credentials")
    assert.strictEqual(viaSession.status, 200)
    assert.deepStrictEqual(viaSession.body, res.body)
    const reset = await session("POST", "/v1/softphone/reset-password")
    assert.strictEqual(reset.status, 200)
    assert.notStrictEqual(reset.body.data.sip_password, password)
    const rotated = await profile(server, company.id, `agent-${alice.id}-web`)
    assert.strictEqual(rotated!.secret, secretOf(server, company.id, web!.username, reset.body.data.sip_password))
  })

  it("answers 422 to a person whose telephony is off", async () => {
    const { carol } = await office()
    for (const [method, path, body] of endpoints) {
      const res = await request(server, method, path, { token: carol.token, body })
      assert.strictEqual(res.status, 422, `${method} ${path}`)
      assert.strictEqual(res.body.error_code, "telephony_disabled")
    }
  })

  it("reset-password rotates only the browser password; external reset rotates both", async () => {
    const { company, alice } = await office()
    // What the PBX holds for each profile (the password in-process, its digest on Kamailio).
    const read = async () => ({
      web: (await profile(server, company.id, `agent-${alice.id}-web`))!.secret,
      native: (await profile(server, company.id, `agent-${alice.id}`))!.secret
    })
    const web = (password: string) => secretOf(server, company.id, `agent-${alice.id}-web`, password)
    const nativeSecret = (password: string) => secretOf(server, company.id, `agent-${alice.id}`, password)
    const start = await read()

    const reset = await request(server, "POST", "/v1/softphone/reset-password", { token: alice.token })
    assert.strictEqual(reset.status, 200)
    const afterWeb = await read()
    assert.notStrictEqual(afterWeb.web, start.web)
    assert.strictEqual(afterWeb.native, start.native)
    assert.strictEqual(reset.body.data.sip_username, `agent-${alice.id}-web`)
    assert.strictEqual(web(reset.body.data.sip_password), afterWeb.web)
    const own = await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })
    assert.strictEqual(own.body.data.sip_password, reset.body.data.sip_password)

    const external = await request(server, "POST", "/v1/softphone/external/reset-password", { token: alice.token })
    assert.strictEqual(external.status, 200)
    const afterBoth = await read()
    assert.notStrictEqual(afterBoth.web, afterWeb.web)
    assert.notStrictEqual(afterBoth.native, afterWeb.native)
    assert.strictEqual(external.body.data.sip_username, `agent-${alice.id}`)
    assert.strictEqual(nativeSecret(external.body.data.sip_password), afterBoth.native)
    const webPassword = (await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })).body.data.sip_password
    assert.strictEqual(web(webPassword), afterBoth.web)
    assert.notInclude(JSON.stringify(external.body), webPassword)

    const native = await request(server, "GET", "/v1/softphone/external-credentials", { token: alice.token })
    assert.strictEqual(native.status, 200)
    assert.strictEqual(native.body.data.sip_password, external.body.data.sip_password)
    const { host, tcpPort } = telephony.sip(company.id, { host: "sip.localhost", tcpPort: 5060, wssUrl: "" })
    assert.strictEqual(native.body.data.provisioning_uri, `sip:agent-${alice.id}:${external.body.data.sip_password}@${host}:${tcpPort};transport=tcp`)
    assert.notInclude(JSON.stringify(native.body), webPassword)
    assert.deepStrictEqual(Object.keys(native.body.data).sort(), [
      "codecs",
      "default_transport",
      "host",
      "media_encryption",
      "provisioning_uri",
      "registered",
      "sip_password",
      "sip_username",
      "tcp_port",
      "tls_port"
    ])
  })

  it("lists telephony-enabled colleagues of the company with extension and availability, without the caller", async () => {
    const { company, alice, bob } = await office()
    const other = await office()
    await query(server, "UPDATE users SET availability = 'online' WHERE id = $1", [bob.id])
    const res = await request(server, "GET", "/v1/softphone/colleagues", { token: alice.token })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data, [
      { user_id: bob.id, name: "Person", email: bob.email, extension: "202", availability: "online" },
      { user_id: company.admin.id, name: "Admin", email: company.admin.email, extension: null, availability: "offline" }
    ])
    const ids = res.body.data.map((c: any) => c.user_id)
    for (const foreign of [other.alice.id, other.bob.id, other.company.admin.id]) assert.notInclude(ids, foreign)
  })

  it("places internal calls by colleague id or extension and refuses bad callees with 422", async () => {
    const { company, alice, bob, carol } = await office()
    const other = await office()
    const call = (body: unknown, token = alice.token) => request(server, "POST", "/v1/softphone/internal-call", { token, body })
    await answeringDevice(server, company.id, alice.token)
    await answeringDevice(server, other.company.id, other.alice.token)

    const byId = await call({ callee_user_id: bob.id })
    assert.strictEqual(byId.status, 202, JSON.stringify(byId.body))
    assert.strictEqual(byId.body.data.status, "initiated")
    assert.isNumber(byId.body.data.call_id)
    const byExtension = await call({ extension: "202" })
    assert.strictEqual(byExtension.status, 202)

    const calls = await pbxCalls(server, company.id)
    assert.strictEqual(calls.length, 2)
    for (const c of calls) assert.deepStrictEqual(c, { callerUserId: alice.id, target: `agent-${bob.id}` })
    if (adapter === "in-process") {
      // What the sandbox was asked to ring; Kamailio's cfg forks `agent-<id>` to both profiles itself.
      for (const c of await sandboxCalls(server, company.id)) {
        assert.strictEqual(c.from, `agent-${alice.id}-web`)
        assert.deepStrictEqual(c.to, { kind: "internal", calleeUserId: bob.id, usernames: [`agent-${bob.id}-web`, `agent-${bob.id}`] })
      }
    }
    const rows = await callRows(company.id)
    assert.deepStrictEqual(rows.map((r: any) => [r.id, r.kind, r.caller_user_id, r.callee_user_id, r.status]), [
      [byId.body.data.call_id, "internal", alice.id, bob.id, "initiated"],
      [byExtension.body.data.call_id, "internal", alice.id, bob.id, "initiated"]
    ])

    const refused: Array<[unknown, string]> = [
      [{}, "callee_user_id"],
      [{ callee_user_id: bob.id, extension: "202" }, "callee_user_id"],
      [{ callee_user_id: carol.id }, "callee_user_id"],
      [{ callee_user_id: alice.id }, "callee_user_id"],
      [{ callee_user_id: other.bob.id }, "callee_user_id"],
      [{ callee_user_id: 999999999 }, "callee_user_id"],
      [{ extension: "999" }, "extension"],
      [{ extension: "12" }, "extension"]
    ]
    for (const [body, field] of refused) {
      const res = await call(body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors[field], JSON.stringify(res.body))
    }
    // Company B's extension 202 belongs to B's Bob, never to A's caller.
    const otherCall = await call({ extension: "202" }, other.alice.token)
    assert.strictEqual(otherCall.status, 202)
    assert.deepStrictEqual(await pbxCalls(server, other.company.id), [{ callerUserId: other.alice.id, target: `agent-${other.bob.id}` }])
    assert.strictEqual((await pbxCalls(server, company.id)).length, 2)
  })

  it("places external calls; contact_id is resolved strictly inside the company", async () => {
    const { company, alice } = await office()
    const other = await office()
    const own = await seedContact(company.id)
    const foreign = await seedContact(other.company.id)
    const call = (body: unknown) => request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body })
    await answeringDevice(server, company.id, alice.token)
    await answeringDevice(server, other.company.id, other.alice.token)

    const plain = await call({ number: "+1 (202) 555-0199" })
    assert.strictEqual(plain.status, 202, JSON.stringify(plain.body))
    const withContact = await call({ number: "+12025550100", contact_id: own })
    assert.strictEqual(withContact.status, 202)
    const calls = await pbxCalls(server, company.id)
    assert.deepStrictEqual(calls.map((c) => [c.callerUserId, c.target]).sort(), [
      [alice.id, "+12025550100"],
      [alice.id, "+12025550199"]
    ])
    const rows = await callRows(company.id)
    assert.deepStrictEqual(rows.map((r: any) => [r.kind, r.number, r.contact_id]), [
      ["external", "+12025550199", null],
      ["external", "+12025550100", own]
    ])

    for (const contact_id of [foreign, 999999999]) {
      const res = await call({ number: "+12025550100", contact_id })
      assert.strictEqual(res.status, 422)
      assert.deepStrictEqual(res.body.errors, { contact_id: ["The selected contact is invalid."] })
    }
    await query(server, "UPDATE contacts SET deleted_at = now() WHERE id = $1", [own])
    assert.strictEqual((await call({ number: "+12025550100", contact_id: own })).status, 422)
    for (const number of ["", "abc", "+0123456", "12345", "+1234567890123456", "+1 555 CALL NOW"]) {
      const res = await call({ number })
      assert.strictEqual(res.status, 422, number)
      assert.ok(res.body.errors.number)
    }
    const missing = await call({ contact_id: own })
    assert.strictEqual(missing.status, 422)
    assert.strictEqual((await pbxCalls(server, company.id)).length, 2)
    assert.strictEqual((await pbxCalls(server, other.company.id)).length, 0)
  })

  it("shares a 20-per-minute originate limit per user across internal and external calls", async () => {
    const { company, alice, bob } = await office()
    await answeringDevice(server, company.id, alice.token)
    for (let i = 0; i < 20; i++) {
      const res = i % 2 === 0
        ? await request(server, "POST", "/v1/softphone/internal-call", { token: alice.token, body: { callee_user_id: bob.id } })
        : await request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body: { number: "+12025550100" } })
      assert.strictEqual(res.status, 202, `call ${i}: ${JSON.stringify(res.body)}`)
    }
    for (const [path, body] of [
      ["/v1/softphone/internal-call", { callee_user_id: bob.id }],
      ["/v1/softphone/external-call", { number: "+12025550100" }]
    ] as const) {
      const res = await request(server, "POST", path, { token: alice.token, body })
      assert.strictEqual(res.status, 429)
      assert.strictEqual(res.body.message, "Too Many Requests.")
      assert.isAbove(res.body.retry_after, 0)
      assert.isAtMost(res.body.retry_after, 60)
      assert.strictEqual(res.headers.get("retry-after"), String(res.body.retry_after))
    }
    assert.strictEqual((await pbxCalls(server, company.id)).length, 20)
    // Per user: a colleague still calls.
    const fromBob = await request(server, "POST", "/v1/softphone/external-call", { token: bob.token, body: { number: "+12025550100" } })
    assert.strictEqual(fromBob.status, 202)
  })

  it("answers 502 and records a failed attempt when the PBX cannot originate; 422 when the company's telephony is off", async () => {
    const { company, alice } = await office()
    await outage(server, company.id, true)
    try {
      const res = await request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body: { number: "+12025550100" } })
      assert.strictEqual(res.status, 502)
      const creds = await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })
      assert.strictEqual(creds.status, 200)
      assert.strictEqual(creds.body.data.registered, false)
    } finally {
      await outage(server, company.id, false)
    }
    assert.deepStrictEqual((await callRows(company.id)).map((r: any) => r.status), ["failed"])

    await request(server, "PATCH", `/platform/v1/companies/${company.id}`, { token: server.platformKey, body: { telephony_enabled: false } })
    const off = await request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body: { number: "+12025550100" } })
    assert.strictEqual(off.status, 422)
    assert.strictEqual(off.body.error_code, "company_telephony_disabled")
  })
})
