import { assert, describe, it } from "@effect/vitest"
import { connect as tlsConnect } from "node:tls"
import { afterAll, beforeAll } from "vitest"
import { sipDigests } from "../../src/telephony/Kamailio.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"
import { Agent, type Account, eventually, freePortPair, type Kamailio, parseProvisioningUri, registerOverWebSocket } from "./sip.ts"
import { whenAvailable } from "../support/Requires.ts"
import { base, enable, kamailioNeeds, person, SIP_DOMAIN, startTelephony, telephonyCompany } from "./support.ts"

/**
 * PBX=kamailio end to end: the API writes the accounts, Kamailio (repository cfg) registers real
 * baresip phones with what the API hands out, and calls the API originates ring those phones.
 * The SIP domains `c<id>.sip.test` have no DNS here: the phones reach them through an outbound
 * proxy at Kamailio's loopback port, which is what a wildcard DNS record does in production.
 */

const TRUNK_NUMBER = "+12025550199"
let telephony: Awaited<ReturnType<typeof startTelephony>>
let server: RunningServer
let kamailio: Kamailio
let trunk: Agent
const agents: Array<Agent> = []

const phone = async (account: Omit<Account, "proxyPort" | "transport">) => {
  const agent = await Agent.start({ ...account, proxyPort: kamailio.sipPort, transport: "tcp" })
  agents.push(agent)
  return agent
}

const registered = (agent: Agent) => agent.waitFor("REGISTER_OK", (e) => e.type === "REGISTER_OK")
const refused = (agent: Agent) => agent.waitFor("REGISTER_FAIL", (e) => e.type === "REGISTER_FAIL")

const credentials = async (token: string, userId: number) => {
  const res = await request(server, "GET", `${base}/${userId}/telephony/credentials`, { token })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data
}

/** A phone set up the way a user does it: by scanning the provisioning URI. */
const provisionedPhone = async (token: string, userId: number) => {
  const creds = await credentials(token, userId)
  const uri = parseProvisioningUri(creds.provisioning_uri)
  assert.deepStrictEqual(uri, {
    username: creds.sip_username,
    password: creds.sip_password,
    host: creds.host,
    port: creds.tcp_port,
    transport: creds.default_transport.toLowerCase()
  })
  return { agent: await phone({ username: uri.username, password: uri.password, domain: uri.host }), uri }
}

const members = async (token: string) => {
  const res = await request(server, "GET", `${base}/telephony`, { token })
  assert.strictEqual(res.status, 200)
  return new Map<number, { registered: boolean }>(res.body.data.map((m: any) => [m.user_id, m]))
}

const locations = (domain: string, username: string) =>
  query(server, "SELECT contact FROM kamailio.location WHERE domain = $1 AND username = $2", [domain, username])

/** A company with two operators whose native phones are registered. */
const office = async () => {
  const company = await telephonyCompany(server)
  const alice = await person(server, company.id)
  const bob = await person(server, company.id)
  await enable(server, company.adminToken, alice.id)
  await enable(server, company.adminToken, bob.id)
  const a = await provisionedPhone(company.adminToken, alice.id)
  const b = await provisionedPhone(company.adminToken, bob.id)
  await Promise.all([registered(a.agent), registered(b.agent)])
  return { company, alice, bob, alicePhone: a.agent, bobPhone: b.agent, domain: a.uri.host }
}

whenAvailable(kamailioNeeds, "telephony on Kamailio", () => describe("telephony on Kamailio (PBX=kamailio)", () => {
beforeAll(async () => {
  const trunkPort = await freePortPair()
  telephony = await startTelephony("kamailio", {}, { trunkUri: `sip:127.0.0.1:${trunkPort};transport=tcp` })
  server = telephony.server
  kamailio = telephony.kamailio!
  // baresip answers only at its own user: the trunk is the one number the tests dial out to.
  trunk = await Agent.start({ username: TRUNK_NUMBER, password: "", domain: "127.0.0.1", proxyPort: trunkPort, listenPort: trunkPort, transport: "tcp", trunk: true })
  agents.push(trunk)
}, 60_000)

afterAll(async () => {
  await Promise.all(agents.map((agent) => agent.stop()))
  await telephony?.close()
})

  it("says so in /ready, and keeps digests only in Kamailio's subscriber table", async () => {
    const ready = await request(server, "GET", "/ready")
    assert.deepStrictEqual(ready.body.telephony, { pbx: "kamailio" })
    const company = await telephonyCompany(server)
    const alice = await person(server, company.id)
    await enable(server, company.adminToken, alice.id)
    const creds = await credentials(company.adminToken, alice.id)
    assert.strictEqual(creds.host, `c${company.id}.${SIP_DOMAIN}`)
    assert.strictEqual(creds.tcp_port, kamailio.sipPort)
    const rows = await query(server, "SELECT username, domain, password, ha1 FROM kamailio.subscriber WHERE company_id = $1 ORDER BY username", [company.id])
    assert.deepStrictEqual(rows.map((r: any) => [r.username, r.domain, r.password]), [
      [`agent-${alice.id}`, creds.host, ""],
      [`agent-${alice.id}-web`, creds.host, ""]
    ])
    assert.notInclude(JSON.stringify(rows), creds.sip_password)
  })

  it("registers the phones set up from the handed-out credentials; registered is true in the list and the credentials", async () => {
    const { company, alice, bob, domain } = await office()
    const list = await members(company.adminToken)
    assert.strictEqual(list.get(alice.id)?.registered, true)
    assert.strictEqual(list.get(bob.id)?.registered, true)
    assert.strictEqual(list.get(company.admin.id)?.registered, false)
    assert.strictEqual((await credentials(company.adminToken, alice.id)).registered, true)
    assert.strictEqual((await locations(domain, `agent-${alice.id}`)).length, 1)
    const own = await request(server, "GET", "/v1/softphone/external-credentials", { token: alice.token })
    assert.strictEqual(own.body.data.registered, true)
  })

  it("an internal call by extension rings the caller first, then the callee; both answer and the call is bridged", async () => {
    const { company, alice, bob, alicePhone, bobPhone } = await office()
    const ext = await request(server, "POST", `${base}/${bob.id}/telephony/extension`, { token: company.adminToken, body: { extension: "201" } })
    assert.strictEqual(ext.status, 200)
    const started = await request(server, "POST", "/v1/softphone/internal-call", { token: alice.token, body: { extension: "201" } })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    // The caller's phone is rung by the controller and answers; the REFER then makes it call bob. Under
    // load the REFER can arrive before baresip reports the controller leg established, so the REFER
    // (TRANSFER, sent by Kamailio only after the answer) counts as the answer too.
    const rung = await alicePhone.waitFor("the controller's call", (e) =>
      (e.type === "CALL_ESTABLISHED" || e.type === "TRANSFER") && /controller/.test(e.peeruri ?? ""))
    const incoming = await bobPhone.waitFor("bob's phone answering alice", (e) => e.type === "CALL_ESTABLISHED")
    assert.strictEqual(incoming.peeruri, `sip:agent-${alice.id}@c${company.id}.${SIP_DOMAIN}`)
    const outgoing = await alicePhone.waitFor("alice's call to bob", (e) => e.type === "CALL_ESTABLISHED" && !/controller/.test(e.peeruri ?? ""))
    assert.strictEqual(outgoing.peeruri, `sip:agent-${bob.id}@c${company.id}.${SIP_DOMAIN}`)
    const bobRang = bobPhone.events.find((e) => e.type === "CALL_INCOMING" || e.type === "CALL_ESTABLISHED")!
    assert.isAtMost(rung.at!, bobRang.at!)
    // Bridged: each phone receives the other's audio (RTP flows phone to phone, not through Kamailio).
    await Promise.all([alicePhone, bobPhone].map((p) =>
      eventually("RTP between the phones", () => /incoming rtp for 'audio' established/.test(p.output()) || undefined)
    ))
    alicePhone.command("hangup")
    await bobPhone.waitFor("bob's call to end", (e) => e.type === "CALL_CLOSED")
  })

  it("a call's outcome comes back from Kamailio's dialog events: answered at, ended at, duration, hang-up cause, and call.ended for the caller", async () => {
    const { company, alice, bob, alicePhone, bobPhone } = await office()
    const started = await request(server, "POST", "/v1/softphone/internal-call", { token: alice.token, body: { callee_user_id: bob.id } })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const callId = started.body.data.call_id
    await bobPhone.waitFor("bob answering", (e) => e.type === "CALL_ESTABLISHED")
    await alicePhone.waitFor("alice's call to bob", (e) => e.type === "CALL_ESTABLISHED" && !/controller/.test(e.peeruri ?? ""))
    const answered = await eventually("answered_at", async () => {
      const [row] = await query(server, "SELECT answered_at, ended_at FROM call_attempts WHERE company_id = $1 AND id = $2", [company.id, callId])
      return row.answered_at === null ? undefined : row
    })
    assert.isNull(answered.ended_at)
    await new Promise((resolve) => setTimeout(resolve, 1500))
    alicePhone.command("hangup")
    await bobPhone.waitFor("bob's call to end", (e) => e.type === "CALL_CLOSED")
    const ended = await eventually("ended_at", async () => {
      const [row] = await query(server, "SELECT * FROM call_attempts WHERE company_id = $1 AND id = $2", [company.id, callId])
      return row.ended_at === null ? undefined : row
    })
    assert.strictEqual(ended.status, "initiated")
    assert.strictEqual(ended.hangup_cause, "caller_hangup")
    assert.isAtLeast(ended.duration_seconds, 1)
    assert.isAtMost(ended.duration_seconds, 5)
    assert.strictEqual(ended.duration_seconds, Math.round((new Date(ended.ended_at).getTime() - new Date(ended.answered_at).getTime()) / 1000))
    // One event, on the caller's user channel (user_id), with the outcome.
    const events = await eventually("call.ended", async () => {
      const rows = await query(server, "SELECT payload FROM events WHERE company_id = $1 AND key = 'call.ended'", [company.id])
      return rows.length > 0 ? rows : undefined
    })
    assert.strictEqual(events.length, 1)
    const payload = typeof events[0].payload === "string" ? JSON.parse(events[0].payload) : events[0].payload
    assert.strictEqual(payload.user_id, alice.id)
    assert.deepInclude(payload.call, { id: callId, kind: "internal", callee_user_id: bob.id, hangup_cause: "caller_hangup", duration_seconds: ended.duration_seconds })
    const left = await query(server, "SELECT count(*)::int AS n FROM kamailio.call_events e JOIN call_attempts a ON a.pbx_call_id = e.call_ref WHERE a.id = $1", [callId])
    assert.strictEqual(left[0].n, 0)
  })

  it("a call to a colleague with no phone registered ends unanswered: no_answer (480), duration 0, call.ended", async () => {
    const { company, alice, alicePhone } = await office()
    const carol = await person(server, company.id)
    await enable(server, company.adminToken, carol.id)
    const started = await request(server, "POST", "/v1/softphone/internal-call", { token: alice.token, body: { callee_user_id: carol.id } })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const callId = started.body.data.call_id
    await alicePhone.waitFor("the refused call", (e) => e.type === "CALL_CLOSED" && /480/.test(e.param ?? ""))
    const ended = await eventually("ended_at", async () => {
      const [row] = await query(server, "SELECT * FROM call_attempts WHERE company_id = $1 AND id = $2", [company.id, callId])
      return row.ended_at === null ? undefined : row
    })
    assert.deepInclude(ended, { answered_at: null, duration_seconds: 0, hangup_cause: "no_answer" })
    const [event] = await eventually("call.ended", async () => {
      const rows = await query(server, "SELECT payload FROM events WHERE company_id = $1 AND key = 'call.ended'", [company.id])
      return rows.length > 0 ? rows : undefined
    })
    const payload = typeof event.payload === "string" ? JSON.parse(event.payload) : event.payload
    assert.deepInclude(payload.call, { id: callId, callee_user_id: carol.id, hangup_cause: "no_answer", sip_code: 480, answered_at: null })
    assert.strictEqual(payload.user_id, alice.id)
  })

  it("an extension dialled on a phone reaches the colleague, and an extension change takes effect at once", async () => {
    const { company, alice, bob, alicePhone, bobPhone, domain } = await office()
    const setExtension = (userId: number, extension: string | null) =>
      request(server, "POST", `${base}/${userId}/telephony/extension`, { token: company.adminToken, body: { extension } })
    assert.strictEqual((await setExtension(alice.id, "202")).status, 200)
    bobPhone.command("dial", `sip:202@${domain}`)
    const answered = await alicePhone.waitFor("alice's phone answering extension 202", (e) => e.type === "CALL_ESTABLISHED")
    assert.strictEqual(answered.peeruri, `sip:agent-${bob.id}@${domain}`)
    bobPhone.command("hangup")
    await alicePhone.waitFor("the call to end", (e) => e.type === "CALL_CLOSED")

    assert.strictEqual((await setExtension(alice.id, "203")).status, 200)
    const since = bobPhone.events.length
    bobPhone.command("dial", `sip:202@${domain}`)
    const gone = await bobPhone.waitFor("the old extension refused", (e) => e.type === "CALL_CLOSED", since)
    assert.match(gone.param ?? "", /404/)
  })

  it("a phone set up for TLS from the credentials (tls_port, the provisioning URI's login) registers over TLS; the port serves the configured certificate", async () => {
    const company = await telephonyCompany(server)
    const alice = await person(server, company.id)
    await enable(server, company.adminToken, alice.id)
    const creds = await credentials(company.adminToken, alice.id)
    assert.strictEqual(creds.tls_port, kamailio.tlsPort)
    // baresip 1.0 does not check the server's certificate: a client that does, for the company's host name.
    const peer = await new Promise<{ authorized: boolean; subject: string }>((resolve, reject) => {
      const socket = tlsConnect({ host: "127.0.0.1", port: creds.tls_port, servername: creds.host, ca: telephony.tls!.ca }, () => {
        resolve({ authorized: socket.authorized, subject: String(socket.getPeerCertificate().subject.CN) })
        socket.end()
      })
      socket.once("error", reject)
    })
    assert.deepStrictEqual(peer, { authorized: true, subject: SIP_DOMAIN })
    const uri = parseProvisioningUri(creds.provisioning_uri)
    const account = { username: uri.username, password: uri.password, domain: uri.host, proxyPort: creds.tls_port, transport: "tls" }
    const agent = await Agent.start({ ...account, caFile: telephony.tls!.caFile })
    agents.push(agent)
    await registered(agent)
    const [contact] = await query(server, "SELECT socket FROM kamailio.location WHERE domain = $1 AND username = $2", [uri.host, uri.username])
    assert.match(contact.socket, new RegExp(`^tls:127\\.0\\.0\\.1:${kamailio.tlsPort}$`))
    assert.strictEqual((await credentials(company.adminToken, alice.id)).registered, true)
    // The wrong password is refused over TLS as over TCP.
    const wrong = await Agent.start({ ...account, password: "not-the-password", caFile: telephony.tls!.caFile })
    agents.push(wrong)
    await refused(wrong)
  })

  it("the browser profile registers over secure WebSocket (wss) served by Kamailio at the URL the softphone credentials give", async () => {
    const company = await telephonyCompany(server)
    const alice = await person(server, company.id)
    await enable(server, company.adminToken, alice.id)
    const own = await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })
    assert.strictEqual(own.status, 200)
    const creds = own.body.data
    assert.strictEqual(creds.sip_username, `agent-${alice.id}-web`)
    assert.strictEqual(creds.wss_url, `wss://127.0.0.1:${kamailio.wssPort}/ws`)
    assert.strictEqual(creds.registered, false)
    const ca = telephony.tls!.ca
    // A client that does not trust the run's CA cannot connect: the certificate is the one configured.
    const untrusted = await registerOverWebSocket(creds.wss_url, { username: creds.sip_username, password: creds.sip_password, domain: creds.host })
      .then(() => "connected", (error: Error) => error.message)
    assert.match(untrusted, /failed/)
    const wrong = await registerOverWebSocket(creds.wss_url, { username: creds.sip_username, password: "not-the-password", domain: creds.host }, ca)
    wrong.close()
    assert.strictEqual(wrong.status, 401)
    const browser = await registerOverWebSocket(creds.wss_url, { username: creds.sip_username, password: creds.sip_password, domain: creds.host }, ca)
    try {
      assert.strictEqual(browser.status, 200)
      const again = await request(server, "GET", "/v1/softphone/credentials", { token: alice.token })
      assert.strictEqual(again.body.data.registered, true)
      assert.strictEqual((await members(company.adminToken)).get(alice.id)?.registered, true)
    } finally {
      browser.close()
    }
  })

  it("an external call reaches the trunk with the dialled number", async () => {
    const { company, alice, alicePhone } = await office()
    const since = trunk.events.length
    const started = await request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body: { number: TRUNK_NUMBER } })
    assert.strictEqual(started.status, 202, JSON.stringify(started.body))
    const atTrunk = await trunk.waitFor("the trunk answering", (e) => e.type === "CALL_ESTABLISHED", since)
    assert.strictEqual(atTrunk.peeruri, `sip:agent-${alice.id}@c${company.id}.${SIP_DOMAIN}`)
    await alicePhone.waitFor("alice's call to the number", (e) => e.type === "CALL_ESTABLISHED" && /12025550199/.test(e.peeruri ?? ""))
    alicePhone.command("hangup")
    await trunk.waitFor("the trunk call to end", (e) => e.type === "CALL_CLOSED", since)
  })

  it("a reset password drops the registration and refuses the old one on the next REGISTER", async () => {
    const { company, alice, domain } = await office()
    const before = await credentials(company.adminToken, alice.id)
    const reset = await request(server, "POST", `${base}/${alice.id}/telephony/reset-password`, { token: company.adminToken })
    assert.strictEqual(reset.status, 200)
    assert.deepStrictEqual(await locations(domain, `agent-${alice.id}`), [])
    assert.strictEqual((await members(company.adminToken)).get(alice.id)?.registered, false)
    await refused(await phone({ username: before.sip_username, password: before.sip_password, domain }))
    const { agent } = await provisionedPhone(company.adminToken, alice.id)
    await registered(agent)
    assert.strictEqual((await members(company.adminToken)).get(alice.id)?.registered, true)
  })

  it("disable removes the registration and the account", async () => {
    const { company, bob, domain } = await office()
    const creds = await credentials(company.adminToken, bob.id)
    const res = await request(server, "POST", `${base}/${bob.id}/telephony/disable`, { token: company.adminToken })
    assert.strictEqual(res.status, 200)
    assert.strictEqual(res.body.data.registered, false)
    assert.deepStrictEqual(await locations(domain, `agent-${bob.id}`), [])
    assert.deepStrictEqual(await query(server, "SELECT 1 FROM kamailio.subscriber WHERE company_id = $1 AND user_id = $2", [company.id, bob.id]), [])
    await refused(await phone({ username: creds.sip_username, password: creds.sip_password, domain }))
  })

  it("company B's phone can neither register in company A's domain nor call A's extension", async () => {
    const a = await office()
    await request(server, "POST", `${base}/${a.bob.id}/telephony/extension`, { token: a.company.adminToken, body: { extension: "301" } })
    const b = await telephonyCompany(server)
    const carol = await person(server, b.id)
    await enable(server, b.adminToken, carol.id)
    const creds = await credentials(b.adminToken, carol.id)
    await refused(await phone({ username: creds.sip_username, password: creds.sip_password, domain: a.domain }))

    const own = await phone({ username: creds.sip_username, password: creds.sip_password, domain: creds.host })
    await registered(own)
    const since = a.bobPhone.events.length
    own.command("dial", `sip:301@${a.domain}`)
    const closed = await own.waitFor("the refused call", (e) => e.type === "CALL_CLOSED")
    assert.match(closed.param ?? "", /403/)
    // Dialling A's member account directly is refused the same way.
    own.command("dial", `sip:agent-${a.bob.id}@${a.domain}`)
    await own.waitFor("the second refused call", (e) => e.type === "CALL_CLOSED" && e !== closed)
    assert.isUndefined(a.bobPhone.events.slice(since).find((e) => e.type === "CALL_INCOMING" || e.type === "CALL_ESTABLISHED"))

    // Through the API, A's extension does not exist in B, and A's member is a 404 for B's admin.
    const api = await request(server, "POST", "/v1/softphone/internal-call", { token: carol.token, body: { extension: "301" } })
    assert.strictEqual(api.status, 422)
    const foreign = await request(server, "GET", `${base}/${a.alice.id}/telephony/credentials`, { token: b.adminToken })
    assert.strictEqual(foreign.status, 404)
  })
  // Last: it stops Kamailio.
  it("with Kamailio gone, registered reads false, calls answer 502 (attempt recorded as failed) and a reset changes nothing", async () => {
    const { company, alice, domain } = await office()
    const before = await credentials(company.adminToken, alice.id)
    assert.strictEqual(before.registered, true)
    await kamailio.stop()
    // The registration rows outlive Kamailio; the live check does not.
    assert.strictEqual((await locations(domain, `agent-${alice.id}`)).length, 1)
    assert.strictEqual((await credentials(company.adminToken, alice.id)).registered, false)
    assert.strictEqual((await members(company.adminToken)).get(alice.id)?.registered, false)
    const own = await request(server, "GET", "/v1/softphone/external-credentials", { token: alice.token })
    assert.strictEqual(own.body.data.registered, false)
    const call = await request(server, "POST", "/v1/softphone/external-call", { token: alice.token, body: { number: TRUNK_NUMBER } })
    assert.strictEqual(call.status, 502)
    const attempts = await query(server, "SELECT status FROM call_attempts WHERE company_id = $1", [company.id])
    assert.deepStrictEqual(attempts.map((r: any) => r.status), ["failed"])
    const reset = await request(server, "POST", `${base}/${alice.id}/telephony/reset-password`, { token: company.adminToken })
    assert.strictEqual(reset.status, 502)
    const after = await credentials(company.adminToken, alice.id)
    assert.strictEqual(after.sip_password, before.sip_password)
    const digests = await query(server, "SELECT ha1 FROM kamailio.subscriber WHERE company_id = $1 AND username = $2", [company.id, before.sip_username])
    assert.strictEqual(digests[0].ha1, sipDigests(before.sip_username, before.host, before.sip_password).ha1)
  })
}))
