import { assert } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { sipDigests } from "../../src/telephony/Kamailio.ts"
import { PbxSandbox } from "../../src/telephony/Pbx.ts"
import { runMigrations } from "../../src/platform/Migrations.ts"
import { addUser, cookieHeader, mobileLogin, setCookies } from "../auth/support.ts"
import { onDatabase } from "../support/Databases.ts"
import { query } from "../support/Sql.ts"
import { createCompany, type Json, request, type RunningServer, startServer } from "../support/TestServer.ts"
import {
  Agent,
  eventually,
  type Kamailio,
  makeTestCa,
  parseProvisioningUri,
  registerOverWebSocket,
  type Rtpengine,
  startKamailio,
  startRtpengine,
  type TestCa
} from "./sip.ts"

export type Adapter = "in-process" | "kamailio"

export const SIP_DOMAIN = "sip.test"

/** Kamailio reads the accounts from PostgreSQL; the phones of the end-to-end file are baresip. */
export const kamailioNeeds = { programs: ["kamailio", "baresip"], postgres: true } as const

interface Devices {
  readonly kamailio: Kamailio
  /** Desk phones started with `deskPhone`: stopped with the server. */
  readonly phones: Array<Agent>
  /** SIP-over-WebSocket registrations the test made, per company: closed with the server. */
  readonly sockets: Map<number, Array<Awaited<ReturnType<typeof registerOverWebSocket>>>>
}
const kamailios = new WeakMap<RunningServer, Devices>()

/**
 * The API on `adapter`: for `kamailio`, a Kamailio of its own (repository cfg, test database) and
 * PBX=kamailio; `env` is set until `close`.
 */
export const startTelephony = async (
  adapter: Adapter,
  env: Record<string, string> = {},
  /** `media`: Kamailio relays media through an rtpengine of its own, phones on plain RTP or SDES-SRTP. */
  options: { readonly trunkUri?: string; readonly media?: "none" | "sdes" } = {}
) => {
  let kamailio: Kamailio | undefined
  let tls: TestCa | undefined
  let rtpengine: Rtpengine | undefined
  if (adapter === "kamailio") {
    const databaseUrl = process.env.DATABASE_URL
    if (databaseUrl === undefined) throw new Error("The Kamailio tests need PostgreSQL (DATABASE_URL): Kamailio reads the accounts there.")
    // Kamailio reads its tables (version, subscriber, location) from the app's schema at start: on a
    // new database they exist only once the migrations have run.
    await onDatabase(databaseUrl, runMigrations)
    tls = makeTestCa(SIP_DOMAIN)
    try {
      if (options.media !== undefined) rtpengine = await startRtpengine()
      kamailio = await startKamailio({
        databaseUrl,
        sipDomain: SIP_DOMAIN,
        trunkUri: options.trunkUri ?? "sip:127.0.0.1:9;transport=tcp",
        tls,
        ...(rtpengine === undefined ? {} : { rtpengine: { ngPort: rtpengine.ngPort, srtp: options.media === "sdes" } })
      })
    } catch (error) {
      await rtpengine?.stop()
      tls.remove()
      throw error
    }
    env = {
      ...env,
      PBX: "kamailio",
      SIP_DOMAIN,
      SIP_PUBLIC_HOST: "127.0.0.1",
      SIP_TCP_PORT: String(kamailio.sipPort),
      SIP_TLS_PORT: String(kamailio.tlsPort),
      ...(options.media === undefined ? {} : { SIP_MEDIA_ENCRYPTION: options.media }),
      SIP_WSS_URL: `wss://127.0.0.1:${kamailio.wssPort}/ws`,
      KAMAILIO_RPC_URL: kamailio.rpcUrl,
      KAMAILIO_SELF_URI: `sip:127.0.0.1:${kamailio.sipPort}`
    }
  }
  // The app reads parts of its configuration on first use: the variables stay until `close`.
  const saved = Object.fromEntries(Object.keys(env).map((key) => [key, process.env[key]]))
  const restore = () => {
    for (const [key, value] of Object.entries(saved)) {
      if (value === undefined) delete process.env[key]
      else process.env[key] = value
    }
  }
  Object.assign(process.env, env)
  let server: RunningServer | undefined
  try {
    server = await startServer()
    const ready = await request(server, "GET", "/ready")
    assert.deepStrictEqual(ready.body.telephony, { pbx: adapter }, JSON.stringify(ready.body))
  } catch (error) {
    await server?.close()
    restore()
    await kamailio?.stop()
    await rtpengine?.stop()
    tls?.remove()
    throw error
  }
  const devices: Devices | undefined = kamailio && { kamailio, phones: [], sockets: new Map() }
  if (devices) kamailios.set(server, devices)
  return {
    server,
    adapter,
    kamailio,
    rtpengine,
    /** The run's CA (PBX=kamailio): what phones and browsers check Kamailio's certificate against. */
    tls,
    /** The SIP host a company's credentials name, its TCP and TLS ports and the browsers' WebSocket URL. */
    sip: (companyId: number, defaults: { readonly host: string; readonly tcpPort: number; readonly wssUrl: string }) =>
      kamailio === undefined
        ? { ...defaults, tlsPort: 5061 }
        : {
          host: `c${companyId}.${SIP_DOMAIN}`,
          tcpPort: kamailio.sipPort,
          tlsPort: kamailio.tlsPort,
          wssUrl: `wss://127.0.0.1:${kamailio.wssPort}/ws`
        },
    close: async () => {
      for (const list of devices?.sockets.values() ?? []) for (const socket of list) socket.close()
      await Promise.all((devices?.phones ?? []).map((phone) => phone.stop()))
      await server.close()
      await kamailio?.stop()
      await rtpengine?.stop()
      tls?.remove()
      restore()
    }
  }
}

export type Telephony = Awaited<ReturnType<typeof startTelephony>>

/**
 * Telephony on Kamailio with its own rtpengine for the describe block that calls it (started before
 * its tests, closed after them): the getter gives it to the tests.
 */
export const relayedTelephony = (media: "none" | "sdes") => {
  let telephony: Telephony | undefined
  beforeAll(async () => {
    telephony = await startTelephony("kamailio", {}, { media })
  }, 60_000)
  afterAll(async () => {
    await telephony?.close()
  })
  return () => {
    if (telephony === undefined) throw new Error("telephony did not start")
    return { ...telephony, rtpengine: telephony.rtpengine! }
  }
}

/**
 * A registered desk phone (baresip) of `userId`, set up from the native credentials as a user would:
 * with media_encryption "sdes", TLS on tls_port and mandatory SRTP; otherwise the provisioning URI
 * as it is (TCP) and plain RTP. Answers calls by itself; stopped with the telephony.
 */
export const deskPhone = async (telephony: Telephony, token: string, userId: number) => {
  const res = await request(telephony.server, "GET", `${base}/${userId}/telephony/credentials`, { token })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  const creds = res.body.data
  const uri = parseProvisioningUri(creds.provisioning_uri)
  const sdes = creds.media_encryption === "sdes"
  const agent = await Agent.start({
    username: uri.username,
    password: uri.password,
    domain: uri.host,
    ...(sdes
      ? { proxyPort: creds.tls_port, transport: "tls", caFile: telephony.tls!.caFile, mediaenc: "srtp-mand" as const }
      : { proxyPort: uri.port, transport: uri.transport })
  })
  kamailioOf(telephony.server)!.phones.push(agent)
  await agent.waitFor("REGISTER_OK", (e) => e.type === "REGISTER_OK")
  return { agent, domain: uri.host, mediaEncryption: creds.media_encryption as string }
}

const kamailioOf = (server: RunningServer) => kamailios.get(server)
const domainOf = (companyId: number) => `c${companyId}.${SIP_DOMAIN}`

export const base = "/v1/companies/current/members"

/** A company with telephony switched on (platform API), its admin's mobile token and an agent. */
export const telephonyCompany = async (server: RunningServer, options: { readonly telephony?: boolean } = {}) => {
  const company = await createCompany(server)
  if (options.telephony !== false) {
    const res = await request(server, "PATCH", `/platform/v1/companies/${company.id}`, {
      token: server.platformKey,
      body: { telephony_enabled: true }
    })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  }
  const adminToken = await tokenOf(server, company.admin.email)
  return { ...company, adminToken }
}

export const tokenOf = async (server: RunningServer, email: string, device = "phone") => {
  const res = await mobileLogin(server, email, "password-123", device)
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.token as string
}

/** A member with a role and a mobile token. */
export const person = async (server: RunningServer, companyId: number, role: "admin" | "manager" | "agent" = "agent") => {
  const user = await addUser(server, companyId, { role })
  return { ...user, token: await tokenOf(server, user.email) }
}

export const enable = async (server: RunningServer, token: string, userId: number) => {
  const res = await request(server, "POST", `${base}/${userId}/telephony/enable`, { token })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data
}

/**
 * An account as the PBX holds it. `secret` is what it checks a password against: the password
 * itself in the in-process PBX, the ha1 digest in Kamailio (which never sees the password).
 */
export interface PbxAccount {
  readonly username: string
  readonly kind: "web" | "native"
  readonly userId: number
  readonly secret: string
}

/** What the PBX of `server` stores for `password` (compare with `PbxAccount.secret`). */
export const secretOf = (server: RunningServer, companyId: number, username: string, password: string) =>
  kamailioOf(server) === undefined ? password : sipDigests(username, domainOf(companyId), password).ha1

export const profiles = async (server: RunningServer, companyId: number): Promise<ReadonlyArray<PbxAccount>> => {
  if (kamailioOf(server) === undefined) {
    const list = await server.runInApp(PbxSandbox.use((pbx) => pbx.profiles(companyId)))
    return list.map((p) => ({ username: p.username, kind: p.kind, userId: p.userId, secret: p.password }))
  }
  const rows = await query<{ username: string; user_id: number; ha1: string; domain: string }>(
    server,
    "SELECT username, user_id, ha1, domain FROM kamailio.subscriber WHERE company_id = $1 ORDER BY user_id, username",
    [companyId]
  )
  for (const row of rows) assert.strictEqual(row.domain, domainOf(companyId))
  return rows.map((r) => ({ username: r.username, kind: r.username.endsWith("-web") ? "web" : "native", userId: r.user_id, secret: r.ha1 }))
}

export const profile = async (server: RunningServer, companyId: number, username: string) =>
  (await profiles(server, companyId)).find((p) => p.username === username)

/** A SIP REGISTER with `password`; on Kamailio a real one (SIP over WebSocket, digest auth). Whether it got 200. */
export const register = async (server: RunningServer, companyId: number, username: string, password: string) => {
  const devices = kamailioOf(server)
  if (devices === undefined) return server.runInApp(PbxSandbox.use((pbx) => pbx.register(companyId, username, password)))
  const socket = await registerOverWebSocket(`ws://127.0.0.1:${devices.kamailio.wsPort}/ws`, { username, password, domain: domainOf(companyId) })
  if (socket.status !== 200) {
    socket.close()
    return false
  }
  devices.sockets.set(companyId, [...(devices.sockets.get(companyId) ?? []), socket])
  return true
}

/** The PBX unreachable (on Kamailio: its processes stopped, so the RPC times out) or back. */
export const outage = async (server: RunningServer, companyId: number, down: boolean) => {
  const devices = kamailioOf(server)
  if (devices === undefined) return server.runInApp(PbxSandbox.use((pbx) => pbx.setOutage(companyId, down)))
  if (down) devices.kamailio.pause()
  else devices.kamailio.resume()
}

/**
 * A device of `userId`'s that answers calls, so the calls the API originates can be seen from the
 * PBX's side (Kamailio rings the caller and REFERs the answering device to the target). A no-op
 * in-process, where the sandbox records the calls.
 */
export const answeringDevice = async (server: RunningServer, companyId: number, token: string) => {
  if (kamailioOf(server) === undefined) return
  const res = await request(server, "GET", "/v1/softphone/credentials", { token })
  assert.strictEqual(res.status, 200)
  assert.isTrue(await register(server, companyId, res.body.data.sip_username, res.body.data.sip_password))
}

/** A call as the PBX placed it: whose phone it rang first, and where it then sent them (`agent-<id>` or the number). */
export interface PlacedCall {
  readonly callerUserId: number
  readonly target: string
}

/**
 * The calls the PBX placed for the company. On Kamailio: the caller's answering device saw the
 * ring and the REFER; waits until it saw one per call the API recorded as initiated.
 */
export const pbxCalls = async (server: RunningServer, companyId: number): Promise<ReadonlyArray<PlacedCall>> => {
  const devices = kamailioOf(server)
  if (devices === undefined) {
    const calls = await server.runInApp(PbxSandbox.use((pbx) => pbx.calls(companyId)))
    return calls.map((c) => ({ callerUserId: c.callerUserId, target: c.to.kind === "internal" ? `agent-${c.to.calleeUserId}` : c.to.number }))
  }
  const seen = () =>
    (devices.sockets.get(companyId) ?? []).flatMap((socket) =>
      socket.calls.map((c) => {
        const caller = new RegExp(`^<?sip:agent-(\\d+)@${domainOf(companyId).replace(/\./g, "\\.")}>?`).exec(c.rungAs)
        const target = new RegExp(`^<?sip:([^@]+)@${domainOf(companyId).replace(/\./g, "\\.")}[;>]?`).exec(c.referTo)
        return { callerUserId: caller === null ? -1 : Number(caller[1]), target: target === null ? c.referTo : target[1] }
      })
    )
  const [{ count }] = await query<{ count: number }>(
    server,
    "SELECT count(*)::int AS count FROM call_attempts WHERE company_id = $1 AND status = 'initiated'",
    [companyId]
  )
  await eventually("the PBX to place every initiated call", () => seen().length >= count || undefined).catch(() => undefined)
  return seen()
}

/** The in-process sandbox's own record of the calls (what it was asked to ring), for assertions only it can answer. */
export const sandboxCalls = (server: RunningServer, companyId: number) =>
  server.runInApp(PbxSandbox.use((pbx) => pbx.calls(companyId)))

/** The user behind a service-account bearer value `<token id>|<secret>`. */
export const serviceAccountId = async (server: RunningServer, token: string) => {
  const [row] = await query<{ user_id: number }>(server, "SELECT user_id FROM api_tokens WHERE id = $1", [Number(token.split("|")[0])])
  return row.user_id
}

/** The web cabinet's flow: csrf cookie, login; then requests carry the cookie and, on writes, X-XSRF-TOKEN. */
export const sessionLogin = async (server: RunningServer, email: string) => {
  const csrf = await request(server, "GET", "/sanctum/csrf-cookie")
  const xsrf = setCookies(csrf).get("XSRF-TOKEN")!.value
  const res = await request(server, "POST", "/v1/auth/login", {
    body: { email, password: "password-123" },
    headers: { cookie: cookieHeader({ "XSRF-TOKEN": xsrf }), "x-xsrf-token": xsrf }
  })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  const cookies = setCookies(res)
  const session = cookies.get("crm_session")!.value
  const token = cookies.get("XSRF-TOKEN")?.value ?? xsrf
  return (method: string, path: string, body?: unknown): Promise<Json> =>
    request(server, method, path, {
      body,
      headers: { cookie: cookieHeader({ crm_session: session, "XSRF-TOKEN": token }), "x-xsrf-token": token }
    })
}
