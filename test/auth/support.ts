import type { Account } from "../../src/auth/Domain.ts"
import { Events } from "../../src/events/Events.ts"
import { uniqueEmail } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { type Json, request, type RunningServer } from "../support/TestServer.ts"

export const emitEvent = (server: RunningServer, companyId: number, key: string, payload: unknown) =>
  server.runInApp(Events.use((events) => events.emit(companyId, key, payload)))

/** Another person in a company, through the platform API. */
export const addUser = async (
  server: RunningServer,
  companyId: number,
  input: { readonly email?: string; readonly role?: "admin" | "manager" | "agent" } = {}
) => {
  const email = input.email ?? uniqueEmail("user")
  const res = await request(server, "POST", `/platform/v1/companies/${companyId}/users`, {
    token: server.platformKey,
    body: { email, password: "password-123", name: "Person", role: input.role ?? "agent" }
  })
  if (res.status !== 201) throw new Error(`addUser failed: ${res.status} ${JSON.stringify(res.body)}`)
  return { id: res.body.data.user.id as number, email, password: "password-123" }
}

export const mobileLogin = (
  server: RunningServer,
  email: string,
  password: string,
  deviceName = "phone"
): Promise<Json> => request(server, "POST", "/v1/auth/mobile/login", { body: { email, password, device_name: deviceName } })

export const mailsTo = (server: RunningServer, email: string) =>
  query<{ id: number; subject: string; body: string }>(
    server,
    "SELECT id, subject, body FROM outbound_emails WHERE lower(to_address) = lower($1) ORDER BY id",
    [email]
  )

export const latestCode = async (server: RunningServer, email: string) => {
  const mails = await mailsTo(server, email)
  const match = /\b(\d{6})\b/.exec(mails[mails.length - 1]?.body ?? "")
  if (match === null) throw new Error(`no code mailed to ${email}`)
  return match[1]
}

/** `name=value` pairs of the Set-Cookie headers, plus each header's raw text. */
export const setCookies = (res: Json) => {
  const raw = res.headers.getSetCookie()
  const byName = new Map<string, { value: string; raw: string }>()
  for (const header of raw) {
    const [pair] = header.split(";")
    const at = pair.indexOf("=")
    byName.set(pair.slice(0, at).trim(), { value: decodeURIComponent(pair.slice(at + 1).trim()), raw: header })
  }
  return byName
}

export const cookieHeader = (cookies: Record<string, string>) =>
  Object.entries(cookies).map(([name, value]) => `${name}=${value}`).join("; ")

/** The `account` of a hand-built `Actor` (unit tests that run a service without a request). */
export const accountOf = (id: number, email: string | null, isServiceAccount = false): Account => ({
  id,
  name: "Person",
  lastname: null,
  email,
  email_verified_at: null,
  phone: null,
  phone_verified: false,
  timezone: "UTC",
  locale: "en",
  availability: "online",
  is_service_account: isServiceAccount,
  current_company_id: null,
  photo_version: null
})
