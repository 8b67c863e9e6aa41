import { assert } from "@effect/vitest"
import { cookieHeader, mobileLogin, setCookies } from "../auth/support.ts"
import { type Json, request, type RunningServer } from "../support/TestServer.ts"

/** A signed-in caller: a bearer token (mobile or service) or a cabinet session. */
export type Caller =
  | { readonly token: string }
  | { readonly session: string; readonly xsrf: string }

export const call = (server: RunningServer, caller: Caller, method: string, path: string, body?: unknown): Promise<Json> =>
  "token" in caller
    ? request(server, method, path, { token: caller.token, body })
    : request(server, method, path, {
      body,
      headers: {
        cookie: cookieHeader({ crm_session: caller.session, "XSRF-TOKEN": caller.xsrf }),
        "x-xsrf-token": caller.xsrf
      }
    })

export const mobileCaller = async (server: RunningServer, email: string, password: string, device = "phone"): Promise<Caller> => {
  const res = await mobileLogin(server, email, password, device)
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return { token: res.body.data.token }
}

/** csrf-cookie, then the cabinet login. */
export const sessionCaller = async (server: RunningServer, email: string, password: string): Promise<Caller> => {
  const pre = setCookies(await request(server, "GET", "/sanctum/csrf-cookie")).get("XSRF-TOKEN")!.value
  const res = await request(server, "POST", "/v1/auth/login", {
    body: { email, password },
    headers: { cookie: cookieHeader({ "XSRF-TOKEN": pre }), "x-xsrf-token": pre }
  })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  const cookies = setCookies(res)
  return { session: cookies.get("crm_session")!.value, xsrf: cookies.get("XSRF-TOKEN")!.value }
}

let counter = 0
/** A fresh E.164 number (+1 555 …), unique enough across parallel files and runs. */
export const uniquePhone = () =>
  `+1202${2 + (counter++ % 8)}${String((Date.now() * 7 + counter * 104_729 + Math.floor(Math.random() * 1e6)) % 1e6).padStart(6, "0")}`
