import { hash, verify } from "@node-rs/argon2"
import { Context, Effect, Layer, Semaphore } from "effect"
import { AppConfig } from "../platform/Config.ts"

// OWASP minimum for argon2id: m=19 MiB, t=2, p=1. Algorithm 2 is argon2id.
const options = { algorithm: 2, memoryCost: 19456, timeCost: 2, parallelism: 1 } as const

export class Passwords extends Context.Service<Passwords, {
  hash(password: string): Effect.Effect<string>
  verify(hash: string | null, password: string): Effect.Effect<boolean>
}>()("crm/auth/Passwords") {
  // Hashing costs ~35 ms and 19 MiB each: a semaphore keeps a login storm from
  // exhausting memory or starving the event loop's thread pool.
  static readonly layer = Layer.effect(
    Passwords,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const permits = yield* Semaphore.make(config.passwordHashConcurrency)
      // A fixed dummy hash keeps the timing of "no such user" equal to "wrong password".
      const dummy = yield* Effect.promise(() => hash("dummy-password-for-timing", options))
      return Passwords.of({
        hash: (password) => permits.withPermits(1)(Effect.promise(() => hash(password, options))),
        verify: (stored, password) =>
          permits.withPermits(1)(
            Effect.promise(() => verify(stored ?? dummy, password).catch(() => false)).pipe(
              Effect.map((ok) => ok && stored !== null)
            )
          )
      })
    })
  )
}
