import { Clock, Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../platform/Config.ts"
import { randomDigits, randomToken, safeEqual, sha256 } from "../platform/Crypto.ts"
import {
  type Forbidden,
  invalidField,
  type TooManyRequests,
  tooManyRequests,
  type Unprocessable
} from "../platform/Errors.ts"
import { addResponseHeaders } from "../platform/HttpKernel.ts"
import { Mailer } from "../platform/Mail.ts"
import { RateLimiter } from "../platform/RateLimiter.ts"
import { CurrentActor, requirePersonalCredential } from "./Domain.ts"
import { type LoginUser, LoginRepo } from "./LoginRepo.ts"
import { Passwords } from "./Passwords.ts"
import { CredentialCache } from "./Credentials.ts"
import { AuthRepo } from "./Repo.ts"
import { Tokens } from "./Tokens.ts"

export const codeLifetimeMs = 10 * 60_000
export const codeResendAfterMs = 60_000
export const maxCodeAttempts = 5
/** Fixed, not sliding: a cabinet session ends two hours after login whatever its use. */
export const sessionLifetimeMs = 2 * 3600_000

// One message for every refusal, so the answer never tells whether an e-mail has an account.
const loginFailed = () => invalidField("email", "These credentials do not match our records.")
const badCode = () => invalidField("code", "The code is invalid or has expired.")

export interface Credentials {
  readonly email: string
  readonly password: string
}

export interface EmailStatus {
  readonly message: string
  readonly email_verified: boolean
}

export interface Session {
  readonly id: string
  readonly csrf_token: string
  readonly expires_at: Date
}

// The e-mail is part of the hash: a code sent to one address cannot verify another.
const codeHash = (userId: number, email: string, code: string) => sha256(`${userId}:${email.toLowerCase()}:${code}`)

export class Auth extends Context.Service<Auth, {
  mobileLogin(
    input: Credentials & { readonly device_name: string },
    ip: string
  ): Effect.Effect<{ readonly message: string; readonly email_verified: boolean; readonly token: string }, Unprocessable | TooManyRequests>
  /** Session mode; `previousSessionId` (the cookie the browser still holds) is ended. */
  sessionLogin(
    input: Credentials,
    ip: string,
    previousSessionId: string | undefined
  ): Effect.Effect<{ readonly session: Session; readonly user: { readonly id: number; readonly email: string; readonly name: string } }, Unprocessable | TooManyRequests>
  /** The live session's anti-forgery token, or a fresh one for the pre-login double submit. */
  csrfToken(sessionId: string | undefined): Effect.Effect<string>
  readonly logout: Effect.Effect<void, Forbidden, CurrentActor>
  verifyEmailCode(code: string): Effect.Effect<EmailStatus, Unprocessable | Forbidden, CurrentActor>
  readonly resendEmailCode: Effect.Effect<EmailStatus, Unprocessable | Forbidden | TooManyRequests, CurrentActor>
}>()("crm/auth/Auth") {
  static readonly layerNoDeps = Layer.effect(
    Auth,
    Effect.gen(function*() {
      const repo = yield* LoginRepo
      const authRepo = yield* AuthRepo
      const credentials = yield* CredentialCache
      const sql = yield* SqlClient.SqlClient
      const passwords = yield* Passwords
      const tokens = yield* Tokens
      const limiter = yield* RateLimiter
      const mailer = yield* Mailer
      const config = yield* AppConfig
      const loginRule = { limit: config.loginAttempts, windowSeconds: config.loginWindowSeconds }

      const authenticate = Effect.fnUntraced(function*(bucket: "login" | "web-login", input: Credentials, ip: string) {
        const email = input.email.trim()
        // Counted before the password is looked at: every attempt, right or wrong, spends one.
        yield* limiter.enforce("global", `${bucket}:${email.toLowerCase()}|${ip}`, loginRule)
        const found = yield* repo.findByEmail(email)
        // Always verify (against a dummy hash when there is no user) so timing does not reveal accounts.
        const ok = yield* passwords.verify(Option.isSome(found) ? found.value.password_hash : null, input.password)
        if (!ok || Option.isNone(found)) return yield* loginFailed()
        const user = found.value
        if (user.is_service_account || !user.has_membership) return yield* loginFailed()
        yield* repo.repairCurrentCompany(user.id)
        yield* credentials.forget([{ userId: user.id }])
        return user
      })

      /** Stores and mails a new code unless one went out less than a minute ago; `false` when throttled. */
      const sendCode = Effect.fnUntraced(function*(userId: number, email: string) {
        const now = yield* Clock.currentTimeMillis
        const code = randomDigits(6)
        return yield* Effect.gen(function*() {
          const stored = yield* repo.replaceCode(
            userId,
            codeHash(userId, email, code),
            new Date(now + codeLifetimeMs),
            new Date(now + codeLifetimeMs - codeResendAfterMs)
          )
          if (stored) {
            yield* mailer.send({
              to: email,
              subject: "Your verification code",
              body: `Your e-mail verification code is ${code}. It expires in ${codeLifetimeMs / 60_000} minutes.`
            })
          }
          return stored
        }).pipe(sql.withTransaction, Effect.orDie)
      })

      const mobileLogin = Effect.fn("Auth.mobileLogin")(
        function*(input: Credentials & { readonly device_name: string }, ip: string) {
          const user = yield* authenticate("login", input, ip)
          const token = yield* tokens.issueMobileToken(user.id, input.device_name)
          // The device's previous token is gone.
          yield* credentials.forget([{ userId: user.id }])
          const verified = user.email_verified_at !== null
          if (!verified) yield* sendCode(user.id, user.email)
          return { message: "Logged in.", email_verified: verified, token: token.plaintext }
        }
      )

      const sessionLogin = Effect.fn("Auth.sessionLogin")(
        function*(input: Credentials, ip: string, previousSessionId: string | undefined) {
          const user: LoginUser = yield* authenticate("web-login", input, ip)
          const now = yield* Clock.currentTimeMillis
          const session: Session = {
            id: randomToken(48),
            csrf_token: randomToken(40),
            expires_at: new Date(now + sessionLifetimeMs)
          }
          if (previousSessionId !== undefined) {
            yield* repo.deleteSession(previousSessionId)
            yield* credentials.forget([{ sessionId: previousSessionId }])
          }
          yield* repo.insertSession({ ...session, user_id: user.id })
          return { session, user: { id: user.id, email: user.email, name: user.name } }
        }
      )

      const csrfToken = Effect.fn("Auth.csrfToken")(function*(sessionId: string | undefined) {
        if (sessionId !== undefined && sessionId.length >= 20 && sessionId.length <= 128) {
          const session = yield* authRepo.findSession(sessionId)
          const now = yield* Clock.currentTimeMillis
          // Handing out a different token would break the live session's next POST.
          if (Option.isSome(session) && session.value.expires_at.getTime() > now) return session.value.csrf_token
        }
        return randomToken(40)
      })

      const logout = Effect.gen(function*() {
        const actor = yield* requirePersonalCredential
        if (actor.sessionId !== null) {
          yield* repo.deleteSession(actor.sessionId)
          yield* credentials.forget([{ sessionId: actor.sessionId }])
        }
        if (actor.kind === "mobile" && actor.tokenId !== null) {
          yield* repo.revokeMobileToken(actor.userId, actor.tokenId)
          yield* credentials.forget([{ tokenId: actor.tokenId }])
        }
      }).pipe(Effect.withSpan("Auth.logout"))

      const personalEmail = Effect.gen(function*() {
        const actor = yield* requirePersonalCredential
        const row = yield* repo.findEmail(actor.userId)
        if (Option.isNone(row) || row.value.email === null) {
          return yield* invalidField("email", "This account has no e-mail address.")
        }
        return { userId: actor.userId, email: row.value.email, verified: row.value.email_verified_at !== null }
      })

      const alreadyVerified: EmailStatus = { message: "E-mail already verified.", email_verified: true }

      const verifyEmailCode = Effect.fn("Auth.verifyEmailCode")(function*(code: string) {
        const { email, userId, verified } = yield* personalEmail
        if (verified) return alreadyVerified
        const now = new Date(yield* Clock.currentTimeMillis)
        const attempt = yield* repo.spendAttempt(userId, now, maxCodeAttempts)
        if (Option.isNone(attempt)) return yield* badCode()
        if (!safeEqual(codeHash(userId, email, code), attempt.value.code_hash)) return yield* badCode()
        yield* repo.markVerified(userId, now)
        yield* credentials.forget([{ userId }])
        return { message: "E-mail verified.", email_verified: true }
      })

      const resendEmailCode = Effect.gen(function*() {
        const { email, userId, verified } = yield* personalEmail
        if (verified) return alreadyVerified
        if (yield* sendCode(userId, email)) {
          return { message: "A new verification code has been sent.", email_verified: false }
        }
        const now = yield* Clock.currentTimeMillis
        const expiry = yield* repo.findCodeExpiry(userId)
        const nextAt = Option.match(expiry, {
          onNone: () => now,
          onSome: (at) => at.getTime() - codeLifetimeMs + codeResendAfterMs
        })
        const retryAfter = Math.max(1, Math.ceil((nextAt - now) / 1000))
        yield* addResponseHeaders({ "retry-after": String(retryAfter) })
        return yield* tooManyRequests(retryAfter)
      }).pipe(Effect.withSpan("Auth.resendEmailCode"))

      return Auth.of({ mobileLogin, sessionLogin, csrfToken, logout, verifyEmailCode, resendEmailCode })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([LoginRepo.layer, AuthRepo.layer]))
}
