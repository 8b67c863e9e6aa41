import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, PubSub } from "effect"
import { TestClock } from "effect/testing"
import { afterAll, beforeAll } from "vitest"
import { CredentialCache, type SubscriptionRevocation } from "../../src/auth/Credentials.ts"
import { type Actor, CurrentActor, type UserId } from "../../src/auth/Domain.ts"
import { PhoneRepo, type PendingCode } from "../../src/me/PhoneRepo.ts"
import { maskPhone, PhoneVerification } from "../../src/me/PhoneVerification.ts"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.ts"
import { Sms, SmsError, type SmsMessage } from "../../src/platform/Sms.ts"
import { accountOf, addUser } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { call, type Caller, mobileCaller, sessionCaller, uniquePhone } from "./support.ts"

const uncached = CredentialCache.of({
  resolve: (_key, load) => load,
  forget: () => Effect.void,
  revocations: Effect.flatMap(PubSub.unbounded<SubscriptionRevocation>(), PubSub.subscribe)
})

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const sendOtp = (caller: Caller, target = server) => call(target, caller, "POST", "/v1/me/phone/send-otp")
const verify = (caller: Caller, code: unknown, target = server) => call(target, caller, "POST", "/v1/me/phone/verify", { code })

const smsTo = (phone: string, target = server) =>
  query<{ body: string }>(target, "SELECT body FROM outbound_sms WHERE to_number = $1 ORDER BY id", [phone])

const latestCode = async (phone: string, target = server) => {
  const messages = await smsTo(phone, target)
  const match = /\b(\d{6})\b/.exec(messages[messages.length - 1]?.body ?? "")
  if (match === null) throw new Error(`no code sent to ${phone}`)
  return match[1]
}

const wrongCode = (code: string) => String((Number(code) + 1) % 1_000_000).padStart(6, "0")

/** Someone signed in (mobile token unless a session is asked for) with a saved number. */
const withPhone = async (options: { readonly target?: RunningServer; readonly session?: boolean } = {}) => {
  const target = options.target ?? server
  const company = await createCompany(target)
  const user = await addUser(target, company.id)
  const caller = options.session === true
    ? await sessionCaller(target, user.email, user.password)
    : await mobileCaller(target, user.email, user.password)
  const phone = uniquePhone()
  const saved = await call(target, caller, "POST", "/v1/me", { phone })
  assert.strictEqual(saved.status, 200, JSON.stringify(saved.body))
  return { company, user, caller, phone }
}

const verified = async (caller: Caller, target = server) =>
  (await call(target, caller, "GET", "/v1/me")).body.data.phone_verified as boolean

describe("POST /v1/me/phone/send-otp and /verify", () => {
  it("sends a 6-digit code to the saved number, answers it masked with expires_in 600, and verifies it", async () => {
    const { caller, phone, user } = await withPhone()
    const sent = await sendOtp(caller)
    assert.strictEqual(sent.status, 200, JSON.stringify(sent.body))
    assert.deepStrictEqual(sent.body, { data: { phone: maskPhone(phone), expires_in: 600 } })
    assert.match(sent.body.data.phone, /^\+1\*{6}\d{4}$/)
    assert.strictEqual(sent.body.data.phone.slice(-4), phone.slice(-4))
    const [row] = await query(server, "SELECT extract(epoch FROM expires_at - sent_at)::int AS ttl FROM phone_codes WHERE user_id = $1", [user.id])
    assert.strictEqual(row.ttl, 600)

    const code = await latestCode(phone)
    assert.isFalse(await verified(caller))
    const ok = await verify(caller, code)
    assert.strictEqual(ok.status, 200, JSON.stringify(ok.body))
    assert.deepStrictEqual(ok.body.data, { message: "Phone number verified.", phone: maskPhone(phone), phone_verified: true })
    assert.isTrue(await verified(caller))
    // A code works once.
    assert.strictEqual((await verify(caller, code)).status, 422)
  })

  it("accepts a cabinet session", async () => {
    const { caller, phone } = await withPhone({ session: true })
    assert.strictEqual((await sendOtp(caller)).status, 200)
    assert.strictEqual((await verify(caller, await latestCode(phone))).status, 200)
    assert.isTrue(await verified(caller))
  })

  it("422 when no number is saved or the saved one is not E.164; nothing is sent", async () => {
    const company = await createCompany(server)
    const user = await addUser(server, company.id)
    const caller = await mobileCaller(server, user.email, user.password)
    const none = await sendOtp(caller)
    assert.strictEqual(none.status, 422)
    assert.ok(none.body.errors.phone)
    await query(server, "UPDATE users SET phone = '87011234567' WHERE id = $1", [user.id])
    const legacy = await sendOtp(caller)
    assert.strictEqual(legacy.status, 422)
    assert.ok(legacy.body.errors.phone)
    assert.lengthOf(await smsTo("87011234567"), 0)
    assert.lengthOf(await query(server, "SELECT 1 FROM phone_codes WHERE user_id = $1", [user.id]), 0)
  })

  it("a wrong code is 422; after 5 attempts the code is used up (429), even for the right code", async () => {
    const { caller, phone } = await withPhone()
    assert.strictEqual((await sendOtp(caller)).status, 200)
    const code = await latestCode(phone)
    for (let attempt = 1; attempt <= 5; attempt++) {
      const res = await verify(caller, wrongCode(code))
      assert.strictEqual(res.status, 422, `attempt ${attempt}`)
      assert.ok(res.body.errors.code)
    }
    const limited = await verify(caller, code)
    assert.strictEqual(limited.status, 429)
    assert.strictEqual(limited.body.message, "Too Many Requests.")
    assert.isAbove(limited.body.retry_after, 0)
    assert.strictEqual(limited.headers.get("retry-after"), String(limited.body.retry_after))
    assert.isFalse(await verified(caller))
  })

  it("rejects malformed codes with 422 without spending an attempt", async () => {
    const { caller, phone, user } = await withPhone()
    assert.strictEqual((await sendOtp(caller)).status, 200)
    for (const code of ["12345", "1234567", "abcdef", 123456, null]) {
      const res = await verify(caller, code)
      assert.strictEqual(res.status, 422, JSON.stringify(code))
      assert.ok(res.body.errors.code)
    }
    const [row] = await query(server, "SELECT attempts FROM phone_codes WHERE user_id = $1", [user.id])
    assert.strictEqual(row.attempts, 0)
    assert.strictEqual((await verify(caller, await latestCode(phone))).status, 200)
  })

  it("an expired code is 422", async () => {
    const { caller, phone, user } = await withPhone()
    assert.strictEqual((await sendOtp(caller)).status, 200)
    await query(server, "UPDATE phone_codes SET expires_at = now() - interval '1 second' WHERE user_id = $1", [user.id])
    const res = await verify(caller, await latestCode(phone))
    assert.strictEqual(res.status, 422)
    assert.ok(res.body.errors.code)
    assert.isFalse(await verified(caller))
  })

  it("a number changed after sending is 409 (request a new code); a new code for the new number works", async () => {
    const { caller, phone, user } = await withPhone()
    assert.strictEqual((await sendOtp(caller)).status, 200)
    const oldCode = await latestCode(phone)
    const newPhone = uniquePhone()
    assert.strictEqual((await call(server, caller, "POST", "/v1/me", { phone: newPhone })).status, 200)
    const conflict = await verify(caller, oldCode)
    assert.strictEqual(conflict.status, 409)
    assert.match(conflict.body.message, /new code/i)
    assert.isFalse(await verified(caller))

    await query(server, "UPDATE phone_code_sends SET sent_at = sent_at - interval '61 seconds' WHERE user_id = $1", [user.id])
    assert.strictEqual((await sendOtp(caller)).status, 200)
    // The old code is no good for the new number.
    const newCode = await latestCode(newPhone)
    if (newCode !== oldCode) assert.strictEqual((await verify(caller, oldCode)).status, 422)
    assert.strictEqual((await verify(caller, newCode)).status, 200)
    assert.isTrue(await verified(caller))
  })

  it("send limits: one per 60 s (429 + Retry-After), five per rolling hour", async () => {
    const { caller, phone, user } = await withPhone()
    assert.strictEqual((await sendOtp(caller)).status, 200)
    const again = await sendOtp(caller)
    assert.strictEqual(again.status, 429)
    assert.deepStrictEqual(Object.keys(again.body).sort(), ["message", "retry_after"])
    assert.isAtLeast(again.body.retry_after, 55)
    assert.isAtMost(again.body.retry_after, 60)
    assert.strictEqual(again.headers.get("retry-after"), String(again.body.retry_after))
    assert.lengthOf(await smsTo(phone), 1)

    const age = () => query(server, "UPDATE phone_code_sends SET sent_at = sent_at - interval '61 seconds' WHERE user_id = $1", [user.id])
    for (let n = 2; n <= 5; n++) {
      await age()
      assert.strictEqual((await sendOtp(caller)).status, 200, `send ${n}`)
    }
    await age()
    const hourly = await sendOtp(caller)
    assert.strictEqual(hourly.status, 429)
    // The oldest of the five was sent 5 × 61 s ago: it leaves the hour in about 3600 - 305 s.
    assert.isAtLeast(hourly.body.retry_after, 3200)
    assert.isAtMost(hourly.body.retry_after, 3295)
    assert.lengthOf(await smsTo(phone), 5)
    // The latest code is still the one that verifies.
    assert.strictEqual((await verify(caller, await latestCode(phone))).status, 200)
  })

  it("403 for service-account tokens on both endpoints", async () => {
    const company = await createCompany(server)
    await query(server, "UPDATE users SET phone = $1 WHERE id = (SELECT user_id FROM api_tokens WHERE company_id = $2 AND kind = 'service' LIMIT 1)", [uniquePhone(), company.id])
    const send = await request(server, "POST", "/v1/me/phone/send-otp", { token: company.token })
    assert.strictEqual(send.status, 403)
    const check = await request(server, "POST", "/v1/me/phone/verify", { token: company.token, body: { code: "123456" } })
    assert.strictEqual(check.status, 403)
    assert.isString(check.body.message)
  })

  it("cross-tenant: another company's user cannot use someone else's code", async () => {
    const a = await withPhone()
    const b = await withPhone()
    assert.strictEqual((await sendOtp(a.caller)).status, 200)
    const aCode = await latestCode(a.phone)
    // B has no pending code: A's code means nothing for B.
    assert.strictEqual((await verify(b.caller, aCode)).status, 422)
    assert.strictEqual((await sendOtp(b.caller)).status, 200)
    const bCode = await latestCode(b.phone)
    if (bCode !== aCode) assert.strictEqual((await verify(b.caller, aCode)).status, 422)
    assert.isFalse(await verified(b.caller))
    assert.isFalse(await verified(a.caller))
    assert.strictEqual((await verify(a.caller, aCode)).status, 200)
    assert.isFalse(await verified(b.caller))
  })
})

describe("SMS gateway failure and the daily budget", () => {
  it("502 {message} when the SMS port fails: no code kept, no budget spent, the attempt still counts", async () => {
    const failing = await startServer({ smsMode: "fail" })
    try {
      const { caller, phone, user } = await withPhone({ target: failing })
      const usedBefore = await query(failing, "SELECT coalesce(sum(used), 0)::int AS used FROM sms_daily_usage")
      const res = await sendOtp(caller, failing)
      assert.strictEqual(res.status, 502)
      assert.deepStrictEqual(Object.keys(res.body), ["message"])
      assert.lengthOf(await smsTo(phone, failing), 0)
      assert.lengthOf(await query(failing, "SELECT 1 FROM phone_codes WHERE user_id = $1", [user.id]), 0)
      const usedAfter = await query(failing, "SELECT coalesce(sum(used), 0)::int AS used FROM sms_daily_usage")
      assert.strictEqual(usedAfter[0].used, usedBefore[0].used)
      assert.strictEqual((await sendOtp(caller, failing)).status, 429)
      assert.strictEqual((await verify(caller, "123456", failing)).status, 422)
    } finally {
      await failing.close()
    }
  })

  it("503 once the platform-wide daily budget is spent, with nothing sent or stored", async () => {
    const limited = await startServer({ smsDailyBudget: 2 })
    try {
      const first = await withPhone({ target: limited })
      const second = await withPhone({ target: limited })
      // One unit left today.
      await query(
        limited,
        `INSERT INTO sms_daily_usage (day, used) VALUES ((now() AT TIME ZONE 'UTC')::date, 1)
         ON CONFLICT (day) DO UPDATE SET used = 1`
      )
      assert.strictEqual((await sendOtp(first.caller, limited)).status, 200)
      const res = await sendOtp(second.caller, limited)
      assert.strictEqual(res.status, 503)
      assert.deepStrictEqual(Object.keys(res.body), ["message"])
      assert.isAbove(Number(res.headers.get("retry-after")), 0)
      assert.lengthOf(await smsTo(second.phone, limited), 0)
      assert.lengthOf(await query(limited, "SELECT 1 FROM phone_code_sends WHERE user_id = $1", [second.user.id]), 0)
      // The one code that went out still verifies.
      assert.strictEqual((await verify(first.caller, await latestCode(first.phone, limited), limited)).status, 200)
    } finally {
      await limited.close()
    }
  })
})

// Service level, on the test clock: the rules of PhoneVerification over in-memory ports.
describe("PhoneVerification on the test clock", () => {
  const userId = 42 as UserId
  const actor: Actor = {
    userId,
    email: "person@example.test",
    isServiceAccount: false,
    kind: "mobile",
    tokenId: 1,
    sessionId: null,
    abilities: ["*"],
    account: accountOf(userId, "person@example.test"),
    company: null
  }

  const makeWorld = (options: { readonly failSms?: boolean; readonly budget?: number } = {}) => {
    const state = {
      phone: "+77011234567" as string | null,
      verified: false,
      sends: [] as Array<Date>,
      code: Option.none<PendingCode>(),
      used: 0,
      outbox: [] as Array<SmsMessage>
    }
    const repo = PhoneRepo.of({
      atomically: (_userId, effect) => effect,
      findPhone: () => Effect.sync(() => state.phone),
      recentSends: (_userId, since) => Effect.sync(() => state.sends.filter((at) => at > since)),
      recordSend: (_userId, at, forgetBefore) =>
        Effect.sync(() => {
          state.sends = [...state.sends.filter((s) => s > forgetBefore), at]
        }),
      reserveBudget: (_day, budget) => Effect.sync(() => state.used < budget && ++state.used > 0),
      releaseBudget: () => Effect.sync(() => void (state.used = Math.max(0, state.used - 1))),
      saveCode: (_userId, code) => Effect.sync(() => void (state.code = Option.some(code))),
      dropCode: () => Effect.sync(() => void (state.code = Option.none())),
      findCode: () => Effect.sync(() => state.code),
      spendAttempt: (_userId, now, max) =>
        Effect.sync(() => {
          if (Option.isNone(state.code)) return Option.none()
          const code = state.code.value
          if (code.attempts >= max || code.expires_at <= now) return Option.none()
          state.code = Option.some({ ...code, attempts: code.attempts + 1 })
          return state.code
        }),
      markVerified: (_userId, phone) =>
        Effect.sync(() => {
          if (state.phone !== phone) return false
          state.verified = true
          state.code = Option.none()
          return true
        })
    })
    const sms = Sms.of({
      send: (message) =>
        options.failSms === true
          ? Effect.fail(new SmsError({ message: "down" }))
          : Effect.sync(() => void state.outbox.push(message))
    })
    const config = {
      smsMode: "outbox",
      smsDailyBudget: options.budget ?? 100,
      phoneCodeResendSeconds: 60,
      phoneCodeSendsPerHour: 5,
      phoneCodeVerifyAttempts: 5
    } as AppConfigShape
    const layer = PhoneVerification.layerNoDeps.pipe(
      Layer.provide([
        Layer.succeed(PhoneRepo, repo),
        Layer.succeed(Sms, sms),
        Layer.succeed(AppConfig, config),
        // One runner, nothing cached: what a verification forgets is tested over HTTP.
        Layer.succeed(CredentialCache, uncached)
      ])
    )
    const lastCode = () => /\b(\d{6})\b/.exec(state.outbox[state.outbox.length - 1]?.body ?? "")![1]
    const run = <A, E>(f: (phone: PhoneVerification["Service"]) => Effect.Effect<A, E, CurrentActor>) =>
      PhoneVerification.use(f).pipe(Effect.provideService(CurrentActor, actor), Effect.provide(layer))
    return { state, run, lastCode }
  }

  it.effect("a code verifies up to the 600th second and not after", () =>
    Effect.gen(function*() {
      const early = makeWorld()
      const sent = yield* early.run((p) => p.sendCode)
      assert.deepStrictEqual(sent, { phone: "+7******4567", expires_in: 600 })
      yield* TestClock.adjust("599 seconds")
      const ok = yield* early.run((p) => p.verify(early.lastCode()))
      assert.isTrue(ok.phone_verified)
      assert.isTrue(early.state.verified)

      const late = makeWorld()
      yield* late.run((p) => p.sendCode)
      yield* TestClock.adjust("600 seconds")
      const error = yield* late.run((p) => p.verify(late.lastCode())).pipe(Effect.flip)
      assert.strictEqual((error as any).errors.code[0], "The code is invalid or has expired.")
      assert.isFalse(late.state.verified)
    }))

  it.effect("resend after 60 s; the sixth send in an hour waits for the oldest to leave the hour", () =>
    Effect.gen(function*() {
      const world = makeWorld()
      yield* world.run((p) => p.sendCode)
      yield* TestClock.adjust("59 seconds")
      const early = yield* world.run((p) => p.sendCode).pipe(Effect.flip)
      assert.strictEqual((early as any).retry_after, 1)
      yield* TestClock.adjust("1 second")
      for (let n = 2; n <= 5; n++) {
        yield* world.run((p) => p.sendCode)
        yield* TestClock.adjust("60 seconds")
      }
      // Now at 300 s after the first send, which leaves the hour at 3600 s.
      const hourly = yield* world.run((p) => p.sendCode).pipe(Effect.flip)
      assert.strictEqual((hourly as any).retry_after, 3300)
      yield* TestClock.adjust("3299 seconds")
      assert.strictEqual(((yield* world.run((p) => p.sendCode).pipe(Effect.flip)) as any).retry_after, 1)
      yield* TestClock.adjust("1 second")
      yield* world.run((p) => p.sendCode)
      assert.lengthOf(world.state.outbox, 6)
    }))

  it.effect("409 when the number changed, 502 when the port fails (budget given back), 503 past the budget", () =>
    Effect.gen(function*() {
      const changed = makeWorld()
      yield* changed.run((p) => p.sendCode)
      changed.state.phone = "+77019999999"
      const conflict = yield* changed.run((p) => p.verify(changed.lastCode())).pipe(Effect.flip)
      assert.match((conflict as any).message, /new code/)

      const broken = makeWorld({ failSms: true })
      const gateway = yield* broken.run((p) => p.sendCode).pipe(Effect.flip)
      assert.strictEqual((gateway as any).message, "The verification code could not be delivered. Please try again later.")
      assert.strictEqual(broken.state.used, 0)
      assert.isTrue(Option.isNone(broken.state.code))

      const spent = makeWorld({ budget: 1 })
      yield* spent.run((p) => p.sendCode)
      yield* TestClock.adjust("61 seconds")
      const budget = yield* spent.run((p) => p.sendCode).pipe(Effect.flip)
      assert.match((budget as any).message, /budget/)
      assert.lengthOf(spent.state.outbox, 1)
    }))
})

