import { Duration, Effect, Layer } from "effect"
import { type Cookies, HttpEffect, type HttpServerRequest, HttpServerResponse } from "effect/http"
import { HttpApiBuilder } from "effect/http-api"
import { Api } from "../Api.ts"
import { AppConfig } from "../platform/Config.ts"
import { safeEqualString } from "../platform/Crypto.ts"
import { csrfMismatch } from "../platform/Errors.ts"
import { clientIp } from "../platform/HttpKernel.ts"
import { Auth, sessionLifetimeMs } from "./Auth.ts"
import { SessionCookie, XsrfCookie, XsrfHeader } from "./Middleware.ts"
import { data } from "../platform/Envelope.ts"

type CookieOptions = NonNullable<Cookies.Cookie["options"]>


/** Sets (value) or expires (null) cookies on whatever answer this request ends with. */
const writeCookies = (cookies: ReadonlyArray<readonly [name: string, value: string | null, options: CookieOptions]>) =>
  HttpEffect.appendPreResponseHandler((_request, response) =>
    Effect.gen(function*() {
      let res = response
      for (const [name, value, options] of cookies) {
        if (value === null) {
          const { maxAge: _maxAge, expires: _expires, ...rest } = options
          res = yield* HttpServerResponse.expireCookie(res, name, rest)
        } else {
          res = yield* HttpServerResponse.setCookie(res, name, value, options)
        }
      }
      return res
    }).pipe(Effect.orDie)
  )

// Login has no session yet, so the anti-forgery check is the double submit: the header
// must repeat the XSRF-TOKEN cookie, which a cross-site page can neither read nor set.
const requireDoubleSubmit = (request: HttpServerRequest.HttpServerRequest) => {
  const cookie = request.cookies[XsrfCookie]
  const header = request.headers[XsrfHeader]
  return cookie !== undefined && header !== undefined && cookie.length >= 20 && safeEqualString(cookie, header)
    ? Effect.void
    : Effect.fail(csrfMismatch())
}

export const AuthHttp = HttpApiBuilder.group(Api, "auth", Effect.fn(function*(handlers) {
  const auth = yield* Auth
  const config = yield* AppConfig
  const base: CookieOptions = { path: "/", sameSite: "lax", secure: config.appUrl.startsWith("https:") }
  const maxAge = Duration.millis(sessionLifetimeMs)
  // The cabinet's script reads XSRF-TOKEN to echo it in X-XSRF-TOKEN; the session id stays out of its reach.
  const xsrfOptions: CookieOptions = { ...base, httpOnly: false, maxAge }
  const sessionOptions: CookieOptions = { ...base, httpOnly: true, maxAge }

  return handlers
    .handle("csrfCookie", ({ request }) =>
      Effect.flatMap(auth.csrfToken(request.cookies[SessionCookie]), (token) =>
        writeCookies([[XsrfCookie, token, xsrfOptions]])))
    .handle("login", ({ payload, request }) =>
      Effect.gen(function*() {
        yield* requireDoubleSubmit(request)
        const { session, user } = yield* auth.sessionLogin(payload, clientIp(request), request.cookies[SessionCookie])
        yield* writeCookies([
          [SessionCookie, session.id, sessionOptions],
          [XsrfCookie, session.csrf_token, xsrfOptions]
        ])
        return { data: { message: "Logged in.", user } }
      }))
    .handle("mobileLogin", ({ payload, request }) =>
      data(auth.mobileLogin(payload, clientIp(request))))
    .handle("verifyEmailCode", ({ payload }) => data(auth.verifyEmailCode(payload.code)))
    .handle("resendEmailCode", () => data(auth.resendEmailCode))
    .handle("logout", ({ request }) =>
      Effect.gen(function*() {
        yield* auth.logout
        if (request.cookies[SessionCookie] !== undefined && request.headers.authorization === undefined) {
          yield* writeCookies([[SessionCookie, null, { ...base, httpOnly: true }], [XsrfCookie, null, base]])
        }
        return { data: { message: "Logged out." } }
      }))
})).pipe(Layer.provide(Auth.layer))
