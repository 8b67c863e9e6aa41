import { Clock, Context, Effect, Layer, Option, Result } from "effect"
import { type CurrentActor, requirePersonalCredential } from "../auth/Domain.ts"
import { AppConfig } from "../platform/Config.ts"
import { randomDigits, safeEqual, sha256 } from "../platform/Crypto.ts"
import {
  BadGateway,
  Conflict,
  type Forbidden,
  invalidField,
  ServiceUnavailable,
  type TooManyRequests,
  tooManyRequests,
  type Unprocessable
} from "../platform/Errors.ts"
import { addResponseHeaders } from "../platform/HttpKernel.ts"
import { normalizePhone } from "../platform/Phones.ts"
import { Sms } from "../platform/Sms.ts"
import { PhoneRepo } from "./PhoneRepo.ts"
import { CredentialCache } from "../auth/Credentials.ts"

/** The spec's code lifetime. */
export const codeLifetimeSeconds = 600
const hourMs = 3600_000
const dayMs = 86_400_000

export interface SendRules {
  /** Minimum gap between two sends of one user. */
  readonly resendSeconds: number
  /** Sends per user in any rolling hour. */
  readonly perHour: number
}

/** `+7******4567`: the country's first digit and the last four stay readable. */
export const maskPhone = (phone: string) => `${phone.slice(0, 2)}${"*".repeat(Math.max(0, phone.length - 6))}${phone.slice(-4)}`

/** Milliseconds until the next send is allowed, or none when it is allowed now. `sends` is oldest first. */
export const sendWait = (sends: ReadonlyArray<number>, now: number, rules: SendRules): Option.Option<number> => {
  const waits: Array<number> = []
  const last = sends[sends.length - 1]
  if (last !== undefined && last + rules.resendSeconds * 1000 > now) waits.push(last + rules.resendSeconds * 1000 - now)
  const inHour = sends.filter((at) => at > now - hourMs)
  if (inHour.length >= rules.perHour) waits.push(inHour[inHour.length - rules.perHour] + hourMs - now)
  return waits.length === 0 ? Option.none() : Option.some(Math.max(...waits))
}

// Number and user are part of the hash: a code sent to one number cannot verify another.
const codeHash = (userId: number, phone: string, code: string) => sha256(`phone:${userId}:${phone}:${code}`)

const numberChanged = () =>
  new Conflict({ message: "The phone number changed after the code was sent. Request a new code." })

const badCode = () => invalidField("code", "The code is invalid or has expired.")

const throttled = (waitMs: number) =>
  Effect.gen(function*() {
    const retryAfter = Math.max(1, Math.ceil(waitMs / 1000))
    yield* addResponseHeaders({ "retry-after": String(retryAfter) })
    return yield* tooManyRequests(retryAfter)
  })

export interface PhoneCodeSent {
  readonly phone: string
  readonly expires_in: number
}

export interface PhoneVerified {
  readonly message: string
  readonly phone: string
  readonly phone_verified: boolean
}

export class PhoneVerification extends Context.Service<PhoneVerification, {
  readonly sendCode: Effect.Effect<
    PhoneCodeSent,
    Forbidden | Unprocessable | TooManyRequests | ServiceUnavailable | BadGateway,
    CurrentActor
  >
  verify(code: string): Effect.Effect<PhoneVerified, Forbidden | Unprocessable | Conflict | TooManyRequests, CurrentActor>
}>()("crm/me/PhoneVerification") {
  static readonly layerNoDeps = Layer.effect(
    PhoneVerification,
    Effect.gen(function*() {
      const repo = yield* PhoneRepo
      const credentials = yield* CredentialCache
      const sms = yield* Sms
      const config = yield* AppConfig
      const rules: SendRules = { resendSeconds: config.phoneCodeResendSeconds, perHour: config.phoneCodeSendsPerHour }

      const waitForSend = Effect.fnUntraced(function*(userId: number, now: number) {
        const sends = yield* repo.recentSends(userId, new Date(now - hourMs))
        return sendWait(sends.map((at) => at.getTime()), now, rules)
      })

      const sendCode = Effect.gen(function*() {
        const actor = yield* requirePersonalCredential
        const userId = actor.userId
        const now = yield* Clock.currentTimeMillis
        const day = new Date(now).toISOString().slice(0, 10)
        const code = randomDigits(6)

        const reserved = yield* repo.atomically(
          userId,
          Effect.gen(function*() {
            const phone = yield* repo.findPhone(userId)
            if (phone === null || normalizePhone(phone, null) !== phone) {
              return yield* invalidField("phone", "Save a phone number in E.164 format (e.g. +14155550123) before requesting a code.")
            }
            const wait = yield* waitForSend(userId, now)
            if (Option.isSome(wait)) return yield* throttled(wait.value)
            if (config.smsDailyBudget <= 0 || !(yield* repo.reserveBudget(day, config.smsDailyBudget))) {
              const untilMidnight = Math.ceil((dayMs - (now % dayMs)) / 1000)
              yield* addResponseHeaders({ "retry-after": String(untilMidnight) })
              return yield* new ServiceUnavailable({
                message: "The daily phone verification budget is exhausted. Try again tomorrow."
              })
            }
            const hash = codeHash(userId, phone, code)
            yield* repo.recordSend(userId, new Date(now), new Date(now - hourMs))
            yield* repo.saveCode(userId, {
              phone,
              code_hash: hash,
              attempts: 0,
              sent_at: new Date(now),
              expires_at: new Date(now + codeLifetimeSeconds * 1000)
            })
            return { phone, hash }
          })
        )

        // Outside the transaction: a slow gateway must not hold the row lock.
        const delivered = yield* sms.send({
          to: reserved.phone,
          body: `Your phone verification code is ${code}. It expires in ${codeLifetimeSeconds / 60} minutes.`
        }).pipe(Effect.result)
        if (Result.isFailure(delivered)) {
          // The attempt still counts against the user's send limits (so a failing gateway
          // is not hammered), but an undelivered code is dropped and costs no budget.
          yield* repo.atomically(
            userId,
            Effect.andThen(repo.dropCode(userId, reserved.hash), repo.releaseBudget(day))
          )
          yield* Effect.logWarning("phone code not delivered").pipe(
            Effect.annotateLogs({ user_id: userId, reason: delivered.failure.message })
          )
          return yield* new BadGateway({ message: "The verification code could not be delivered. Please try again later." })
        }
        return { phone: maskPhone(reserved.phone), expires_in: codeLifetimeSeconds }
      }).pipe(Effect.withSpan("PhoneVerification.sendCode"))

      const verify = Effect.fn("PhoneVerification.verify")(function*(code: string) {
        const actor = yield* requirePersonalCredential
        const userId = actor.userId
        const now = yield* Clock.currentTimeMillis
        const pending = yield* repo.findCode(userId)
        if (Option.isNone(pending) || pending.value.expires_at.getTime() <= now) return yield* badCode()
        const phone = yield* repo.findPhone(userId)
        if (phone !== pending.value.phone) return yield* numberChanged()
        const spent = yield* repo.spendAttempt(userId, new Date(now), config.phoneCodeVerifyAttempts)
        if (Option.isNone(spent)) {
          // This code is used up; the useful wait is until a new one may be requested.
          const wait = yield* waitForSend(userId, now)
          return yield* throttled(Option.getOrElse(wait, () => 0))
        }
        if (spent.value.phone !== phone) return yield* numberChanged()
        if (!safeEqual(codeHash(userId, phone, code), spent.value.code_hash)) return yield* badCode()
        if (!(yield* repo.markVerified(userId, phone, new Date(now)))) return yield* numberChanged()
        yield* credentials.forget([{ userId }])
        return { message: "Phone number verified.", phone: maskPhone(phone), phone_verified: true }
      })

      return PhoneVerification.of({ sendCode, verify })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(PhoneRepo.layer))
}
