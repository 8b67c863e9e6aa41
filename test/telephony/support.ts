import { assert } from "@effect/vitest"
import { PbxSandbox } from "../../src/telephony/Pbx.ts"
import { addUser, cookieHeader, mobileLogin, setCookies } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, type Json, request, type RunningServer } from "../support/TestServer.ts"

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

export const profiles = (server: RunningServer, companyId: number) =>
  server.runInApp(PbxSandbox.use((pbx) => pbx.profiles(companyId)))

export const profile = (server: RunningServer, companyId: number, username: string) =>
  server.runInApp(PbxSandbox.use((pbx) => pbx.profile(companyId, username)))

export const register = (server: RunningServer, companyId: number, username: string, password: string) =>
  server.runInApp(PbxSandbox.use((pbx) => pbx.register(companyId, username, password)))

export const outage = (server: RunningServer, companyId: number, down: boolean) =>
  server.runInApp(PbxSandbox.use((pbx) => pbx.setOutage(companyId, down)))

export const pbxCalls = (server: RunningServer, companyId: number) =>
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
