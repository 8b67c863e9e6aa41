import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { releaseOperator } from "../../src/telephony/Telephony.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer } from "../support/TestServer.ts"
import {
  type Adapter,
  base,
  enable,
  outage,
  person,
  profile,
  profiles,
  register,
  secretOf,
  serviceAccountId,
  startTelephony,
  telephonyCompany
} from "./support.ts"

let server: RunningServer

const operatorRow = async (companyId: number, userId: number) =>
  (await query(server, "SELECT * FROM telephony_operators WHERE company_id = $1 AND user_id = $2", [companyId, userId]))[0]

/** The suite against one PBX adapter (one per test file: the app reads its environment once per process). */
export const adminSuite = (adapter: Adapter) => describe(`operator telephony (admin) on the ${adapter} PBX`, () => {
let telephony: Awaited<ReturnType<typeof startTelephony>>
beforeAll(async () => {
  telephony = await startTelephony(adapter, { SIP_HOST: "pbx.example.test" })
  server = telephony.server
}, 60_000)
afterAll(() => telephony?.close())

/** The passwords handed out for the member's two profiles (native: admin credentials; web: their own). */
const handedOut = async (adminToken: string, member: { readonly id: number; readonly token: string }) => {
  const native = await request(server, "GET", `${base}/${member.id}/telephony/credentials`, { token: adminToken })
  const web = await request(server, "GET", "/v1/softphone/credentials", { token: member.token })
  assert.strictEqual(native.status, 200)
  assert.strictEqual(web.status, 200)
  return new Map<string, string>([[native.body.data.sip_username, native.body.data.sip_password], [web.body.data.sip_username, web.body.data.sip_password]])
}

  it("enable creates both SIP profiles, is idempotent, and disable removes both", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const enabled = await enable(server, company.adminToken, agent.id)
    assert.deepStrictEqual(enabled, {
      user_id: agent.id,
      name: "Person",
      email: agent.email,
      role: "agent",
      enabled: true,
      extension: null,
      native_enabled: true,
      registered: false
    })
    const created = await profiles(server, company.id)
    assert.deepStrictEqual(created.map((p) => [p.username, p.kind, p.userId]).sort(), [
      [`agent-${agent.id}`, "native", agent.id],
      [`agent-${agent.id}-web`, "web", agent.id]
    ])
    const passwords = await handedOut(company.adminToken, agent)
    for (const p of created) {
      assert.match(passwords.get(p.username)!, /^[A-Za-z0-9]{24}$/)
      assert.strictEqual(p.secret, secretOf(server, company.id, p.username, passwords.get(p.username)!))
    }
    assert.notStrictEqual(passwords.get(`agent-${agent.id}`), passwords.get(`agent-${agent.id}-web`))

    // Stored encrypted: the row never holds the plaintext the PBX knows.
    const row = await operatorRow(company.id, agent.id)
    assert.strictEqual(row.web_sip_username, `agent-${agent.id}-web`)
    assert.strictEqual(row.native_sip_username, `agent-${agent.id}`)
    for (const password of passwords.values()) {
      assert.notInclude(JSON.stringify(row), password)
    }
    assert.match(row.web_sip_password, /^v1\./)

    const again = await enable(server, company.adminToken, agent.id)
    assert.strictEqual(again.enabled, true)
    const after = await profiles(server, company.id)
    assert.deepStrictEqual(after.map((p) => p.secret).sort(), created.map((p) => p.secret).sort())

    const disabled = await request(server, "POST", `${base}/${agent.id}/telephony/disable`, { token: company.adminToken })
    assert.strictEqual(disabled.status, 200)
    assert.strictEqual(disabled.body.data.enabled, false)
    assert.strictEqual(disabled.body.data.native_enabled, false)
    assert.deepStrictEqual(await profiles(server, company.id), [])
    assert.strictEqual(await operatorRow(company.id, agent.id), undefined)

    const twice = await request(server, "POST", `${base}/${agent.id}/telephony/disable`, { token: company.adminToken })
    assert.strictEqual(twice.status, 200)
    assert.strictEqual(twice.body.data.enabled, false)
  })

  it("lists real members with their telephony status, never service accounts", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const manager = await person(server, company.id, "manager")
    await enable(server, company.adminToken, agent.id)
    await request(server, "POST", `${base}/${agent.id}/telephony/extension`, {
      token: company.adminToken,
      body: { extension: "201" }
    })
    const res = await request(server, "GET", `${base}/telephony`, { token: company.adminToken })
    assert.strictEqual(res.status, 200)
    const serviceId = await serviceAccountId(server, company.token)
    const ids = res.body.data.map((m: any) => m.user_id)
    assert.deepStrictEqual(ids, [company.admin.id, agent.id, manager.id])
    assert.notInclude(ids, serviceId)
    const byId = new Map(res.body.data.map((m: any) => [m.user_id, m]))
    assert.deepStrictEqual(byId.get(agent.id), {
      user_id: agent.id,
      name: "Person",
      email: agent.email,
      role: "agent",
      enabled: true,
      extension: "201",
      native_enabled: true,
      registered: false
    })
    assert.deepStrictEqual(byId.get(manager.id), {
      user_id: manager.id,
      name: "Person",
      email: manager.email,
      role: "manager",
      enabled: false,
      extension: null,
      native_enabled: false,
      registered: false
    })
  })

  it("never enables a service account (422) and needs the company's telephony switched on (422)", async () => {
    const company = await telephonyCompany(server)
    const serviceId = await serviceAccountId(server, company.token)
    const res = await request(server, "POST", `${base}/${serviceId}/telephony/enable`, { token: company.token })
    assert.strictEqual(res.status, 422)
    assert.strictEqual(res.body.error_code, "service_account")
    assert.strictEqual(await operatorRow(company.id, serviceId), undefined)
    assert.deepStrictEqual(await profiles(server, company.id), [])

    const off = await telephonyCompany(server, { telephony: false })
    const agent = await person(server, off.id)
    const refused = await request(server, "POST", `${base}/${agent.id}/telephony/enable`, { token: off.adminToken })
    assert.strictEqual(refused.status, 422)
    assert.strictEqual(refused.body.error_code, "company_telephony_disabled")
    assert.deepStrictEqual(await profiles(server, off.id), [])
  })

  it("lets admins and admin-role service tokens manage telephony, not managers or agents", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const manager = await person(server, company.id, "manager")
    const secondAdmin = await person(server, company.id, "admin")
    const paths: Array<[string, string, unknown?]> = [
      ["GET", `${base}/telephony`],
      ["POST", `${base}/${agent.id}/telephony/enable`],
      ["GET", `${base}/${agent.id}/telephony/credentials`],
      ["POST", `${base}/${agent.id}/telephony/reset-password`],
      ["POST", `${base}/${agent.id}/telephony/extension`, { extension: "300" }],
      ["POST", `${base}/${agent.id}/telephony/disable`]
    ]
    for (const token of [agent.token, manager.token]) {
      for (const [method, path, body] of paths) {
        const res = await request(server, method, path, { token, body })
        assert.strictEqual(res.status, 403, `${method} ${path}`)
      }
    }
    assert.deepStrictEqual(await profiles(server, company.id), [])
    for (const token of [company.token, secondAdmin.token]) {
      for (const [method, path, body] of paths) {
        const res = await request(server, method, path, { token, body })
        assert.strictEqual(res.status, 200, `${method} ${path}: ${JSON.stringify(res.body)}`)
      }
    }
  })

  it("answers 404 for unknown members and for another company's members", async () => {
    const a = await telephonyCompany(server)
    const b = await telephonyCompany(server)
    const agentA = await person(server, a.id)
    await enable(server, a.adminToken, agentA.id)
    const paths: Array<[string, string, unknown?]> = [
      ["POST", `${base}/${agentA.id}/telephony/enable`],
      ["GET", `${base}/${agentA.id}/telephony/credentials`],
      ["POST", `${base}/${agentA.id}/telephony/reset-password`],
      ["POST", `${base}/${agentA.id}/telephony/extension`, { extension: "300" }],
      ["POST", `${base}/${agentA.id}/telephony/disable`],
      ["POST", `${base}/999999999/telephony/enable`]
    ]
    for (const token of [b.adminToken, b.token]) {
      for (const [method, path, body] of paths) {
        const res = await request(server, method, path, { token, body })
        assert.strictEqual(res.status, 404, `${method} ${path}`)
        assert.deepStrictEqual(res.body, { message: "Member not found." })
      }
    }
    const list = await request(server, "GET", `${base}/telephony`, { token: b.adminToken })
    assert.notInclude(list.body.data.map((m: any) => m.user_id), agentA.id)
    // Untouched in A.
    assert.strictEqual((await profiles(server, a.id)).length, 2)
    assert.strictEqual((await operatorRow(a.id, agentA.id)).extension, null)
  })

  it("sets, validates and clears extensions unique per company; 422 while telephony is off", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const other = await person(server, company.id)
    const set = (userId: number, extension: unknown) =>
      request(server, "POST", `${base}/${userId}/telephony/extension`, { token: company.adminToken, body: { extension } })

    const off = await set(agent.id, "101")
    assert.strictEqual(off.status, 422)
    assert.strictEqual(off.body.error_code, "telephony_disabled")

    await enable(server, company.adminToken, agent.id)
    await enable(server, company.adminToken, other.id)
    for (const bad of ["12", "12345", "1a2", "١٢٣", "+123", "12 3"]) {
      const res = await set(agent.id, bad)
      assert.strictEqual(res.status, 422, bad)
      assert.deepStrictEqual(res.body.errors, { extension: ["The extension must be 3 or 4 digits."] })
    }
    const missing = await request(server, "POST", `${base}/${agent.id}/telephony/extension`, { token: company.adminToken, body: {} })
    assert.strictEqual(missing.status, 422)
    assert.ok(missing.body.errors.extension)

    assert.strictEqual((await set(agent.id, "101")).body.data.extension, "101")
    assert.strictEqual((await set(agent.id, " 101 ")).body.data.extension, "101")
    const taken = await set(other.id, "101")
    assert.strictEqual(taken.status, 422)
    assert.deepStrictEqual(taken.body.errors, { extension: ["The extension has already been taken."] })
    assert.strictEqual((await set(other.id, "0101")).body.data.extension, "0101")

    // Unique per company only.
    const elsewhere = await telephonyCompany(server)
    const outsider = await person(server, elsewhere.id)
    await enable(server, elsewhere.adminToken, outsider.id)
    const same = await request(server, "POST", `${base}/${outsider.id}/telephony/extension`, {
      token: elsewhere.adminToken,
      body: { extension: "101" }
    })
    assert.strictEqual(same.status, 200)

    for (const blank of ["", "   ", null]) {
      await set(agent.id, "777")
      const cleared = await set(agent.id, blank)
      assert.strictEqual(cleared.status, 200)
      assert.strictEqual(cleared.body.data.extension, null)
    }
    // A cleared extension is free again.
    assert.strictEqual((await set(other.id, "777")).body.data.extension, "777")

    await request(server, "POST", `${base}/${agent.id}/telephony/disable`, { token: company.adminToken })
    const afterOff = await set(agent.id, "555")
    assert.strictEqual(afterOff.status, 422)
  })

  it("shows the native credentials object, never the browser password", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const off = await request(server, "GET", `${base}/${agent.id}/telephony/credentials`, { token: company.adminToken })
    assert.strictEqual(off.status, 422)
    await enable(server, company.adminToken, agent.id)
    const native = await profile(server, company.id, `agent-${agent.id}`)
    const web = await profile(server, company.id, `agent-${agent.id}-web`)
    const webPassword = (await handedOut(company.adminToken, agent)).get(`agent-${agent.id}-web`)!
    assert.strictEqual(web!.secret, secretOf(server, company.id, web!.username, webPassword))
    const res = await request(server, "GET", `${base}/${agent.id}/telephony/credentials`, { token: company.adminToken })
    assert.strictEqual(res.status, 200)
    const password = res.body.data.sip_password
    assert.strictEqual(native!.secret, secretOf(server, company.id, native!.username, password))
    const { host, tcpPort, tlsPort } = telephony.sip(company.id, { host: "pbx.example.test", tcpPort: 5060, wssUrl: "" })
    assert.deepStrictEqual(res.body.data, {
      sip_username: `agent-${agent.id}`,
      sip_password: password,
      host,
      tcp_port: tcpPort,
      tls_port: tlsPort,
      default_transport: "TCP",
      codecs: ["opus", "PCMU", "PCMA"],
      media_encryption: "none",
      registered: false,
      provisioning_uri: `sip:agent-${agent.id}:${password}@${host}:${tcpPort};transport=tcp`
    })
    assert.match(res.body.data.provisioning_uri, /^sip:agent-\d+:[A-Za-z0-9%]+@[a-z0-9.]+:\d+;transport=tcp$/)
    assert.notInclude(JSON.stringify(res.body), webPassword)
  })

  it("reset-password rotates both passwords and answers only the new browser login", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    await enable(server, company.adminToken, agent.id)
    const read = async () => {
      const passwords = await handedOut(company.adminToken, agent)
      const account = async (username: string) => {
        const password = passwords.get(username)!
        assert.strictEqual((await profile(server, company.id, username))!.secret, secretOf(server, company.id, username, password))
        return { password }
      }
      return { web: await account(`agent-${agent.id}-web`), native: await account(`agent-${agent.id}`) }
    }
    const before = await read()
    assert.isTrue(await register(server, company.id, `agent-${agent.id}`, before.native!.password))

    const res = await request(server, "POST", `${base}/${agent.id}/telephony/reset-password`, { token: company.adminToken })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(Object.keys(res.body.data).sort(), ["sip_password", "sip_username"])
    assert.strictEqual(res.body.data.sip_username, `agent-${agent.id}-web`)
    const after = await read()
    assert.strictEqual(res.body.data.sip_password, after.web!.password)
    assert.notStrictEqual(after.web!.password, before.web!.password)
    assert.notStrictEqual(after.native!.password, before.native!.password)
    assert.notInclude(JSON.stringify(res.body), after.native!.password)

    // The old password no longer registers; the native credentials show the new one.
    assert.isFalse(await register(server, company.id, `agent-${agent.id}`, before.native!.password))
    const creds = await request(server, "GET", `${base}/${agent.id}/telephony/credentials`, { token: company.adminToken })
    assert.strictEqual(creds.body.data.sip_password, after.native!.password)
    assert.strictEqual(creds.body.data.registered, false)

    const again = await request(server, "POST", `${base}/${agent.id}/telephony/reset-password`, { token: company.adminToken })
    assert.notStrictEqual(again.body.data.sip_password, res.body.data.sip_password)

    const other = await person(server, company.id)
    const off = await request(server, "POST", `${base}/${other.id}/telephony/reset-password`, { token: company.adminToken })
    assert.strictEqual(off.status, 422)
    assert.strictEqual(off.body.error_code, "telephony_disabled")
  })

  it("reports registration live and false when the PBX check fails; a PBX outage rolls writes back with 502", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    await enable(server, company.adminToken, agent.id)
    const native = { password: (await handedOut(company.adminToken, agent)).get(`agent-${agent.id}`)! }
    assert.isFalse(await register(server, company.id, `agent-${agent.id}`, "wrong-password"))
    assert.isTrue(await register(server, company.id, `agent-${agent.id}`, native!.password))

    const creds = () => request(server, "GET", `${base}/${agent.id}/telephony/credentials`, { token: company.adminToken })
    const listed = async () =>
      (await request(server, "GET", `${base}/telephony`, { token: company.adminToken })).body.data.find((m: any) => m.user_id === agent.id)
    assert.strictEqual((await creds()).body.data.registered, true)
    assert.strictEqual((await listed()).registered, true)

    const other = await person(server, company.id)
    await outage(server, company.id, true)
    try {
      const during = await creds()
      assert.strictEqual(during.status, 200)
      assert.strictEqual(during.body.data.sip_password, native!.password)
      const enableDown = await request(server, "POST", `${base}/${other.id}/telephony/enable`, { token: company.adminToken })
      // Spec: a failed or timed-out check reads as false, on either PBX.
      assert.strictEqual(during.body.data.registered, false)
      assert.strictEqual((await listed()).registered, false)
      if (adapter === "in-process") {
        assert.strictEqual(enableDown.status, 502)
        assert.strictEqual(await operatorRow(company.id, other.id), undefined)
      } else {
        // Kamailio's accounts are rows of the shared database: a new account is a committed
        // subscriber row Kamailio authenticates against once it answers again.
        assert.strictEqual(enableDown.status, 200, JSON.stringify(enableDown.body))
        assert.ok(await operatorRow(company.id, other.id))
        assert.deepStrictEqual((await profiles(server, company.id)).filter((p) => p.userId === other.id).map((p) => p.username).sort(), [
          `agent-${other.id}`,
          `agent-${other.id}-web`
        ])
      }

      const resetDown = await request(server, "POST", `${base}/${agent.id}/telephony/reset-password`, { token: company.adminToken })
      assert.strictEqual(resetDown.status, 502)
      const disableDown = await request(server, "POST", `${base}/${agent.id}/telephony/disable`, { token: company.adminToken })
      assert.strictEqual(disableDown.status, 502)
      assert.ok(await operatorRow(company.id, agent.id))
    } finally {
      await outage(server, company.id, false)
    }
    // Nothing moved while the PBX was down.
    const after = await creds()
    assert.strictEqual(after.body.data.sip_password, native!.password)
    assert.strictEqual(after.body.data.registered, true)
    if (adapter === "kamailio") {
      // The account enabled during the outage registers once Kamailio answers again.
      const password = (await handedOut(company.adminToken, other)).get(`agent-${other.id}`)!
      assert.isTrue(await register(server, company.id, `agent-${other.id}`, password))
    }
  })

  it("ends telephony with the membership: the row cascades and releaseOperator drops both PBX profiles", async () => {
    const company = await telephonyCompany(server)
    const agent = await person(server, company.id)
    const stays = await person(server, company.id)
    await enable(server, company.adminToken, agent.id)
    await enable(server, company.adminToken, stays.id)
    await query(server, "DELETE FROM memberships WHERE company_id = $1 AND user_id = $2", [company.id, agent.id])
    assert.strictEqual(await operatorRow(company.id, agent.id), undefined)
    await server.runInApp(releaseOperator(company.id, agent.id))
    assert.deepStrictEqual((await profiles(server, company.id)).map((p) => p.userId), [stays.id, stays.id])
    const gone = await request(server, "GET", `${base}/${agent.id}/telephony/credentials`, { token: company.adminToken })
    assert.strictEqual(gone.status, 404)
  })

  it("works for a company created without telephony once the platform switches it on", async () => {
    const company = await createCompany(server)
    const agent = await person(server, company.id)
    const refused = await request(server, "POST", `${base}/${agent.id}/telephony/enable`, { token: company.token })
    assert.strictEqual(refused.status, 422)
    await request(server, "PATCH", `/platform/v1/companies/${company.id}`, { token: server.platformKey, body: { telephony_enabled: true } })
    const ok = await request(server, "POST", `${base}/${agent.id}/telephony/enable`, { token: company.token })
    assert.strictEqual(ok.status, 200)
  })
})
