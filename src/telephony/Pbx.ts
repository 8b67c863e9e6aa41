import { Context, Data, Effect, Layer } from "effect"
import { randomUUID } from "node:crypto"

export class PbxError extends Data.TaggedError("PbxError")<{ readonly message: string }> {}

export type SipProfileKind = "web" | "native"

export interface SipProfile {
  readonly companyId: number
  readonly userId: number
  readonly kind: SipProfileKind
  readonly username: string
  readonly password: string
}

export type CallTarget =
  | { readonly kind: "internal"; readonly calleeUserId: number; readonly usernames: ReadonlyArray<string> }
  | { readonly kind: "external"; readonly number: string }

export interface OriginateRequest {
  readonly companyId: number
  readonly callerUserId: number
  /** The caller's SIP profile the PBX rings first (click-to-call). */
  readonly from: string
  readonly to: CallTarget
}

export interface CallRecord extends OriginateRequest {
  readonly callId: string
  readonly at: number
}

/**
 * The PBX port: SIP profiles, registration state and call origination. Every call is
 * scoped by company: the spec's usernames (`agent-<user id>`) are unique per user, not
 * per company, so a real adapter must give each company its own SIP domain.
 */
export class Pbx extends Context.Service<Pbx, {
  /** Which adapter answers (shown in `/ready`). */
  readonly adapter: "in-process" | "kamailio"
  /** Creates the profile or replaces its password (a changed password drops the registration). */
  upsertProfile(profile: SipProfile): Effect.Effect<void, PbxError>
  removeProfile(companyId: number, username: string): Effect.Effect<void, PbxError>
  isRegistered(companyId: number, username: string): Effect.Effect<boolean, PbxError>
  originate(request: OriginateRequest): Effect.Effect<{ readonly callId: string }, PbxError>
}>()("crm/telephony/Pbx") {
  /** The default: an in-process registry, also reachable through `PbxSandbox` to play the devices' side. */
  static readonly layerInProcess = Layer.unwrap(Effect.sync(() => {
    const { pbx, sandbox } = makeInProcess()
    return Layer.mergeAll(Layer.succeed(Pbx, pbx), Layer.succeed(PbxSandbox, sandbox))
  }))
}

/** The devices' and the operator's side of the in-process PBX (dev and tests). */
export class PbxSandbox extends Context.Service<PbxSandbox, {
  profile(companyId: number, username: string): Effect.Effect<SipProfile | undefined>
  profiles(companyId: number): Effect.Effect<ReadonlyArray<SipProfile>>
  /** A SIP REGISTER: accepted only for an existing profile with its current password. */
  register(companyId: number, username: string, password: string): Effect.Effect<boolean>
  unregister(companyId: number, username: string): Effect.Effect<void>
  calls(companyId: number): Effect.Effect<ReadonlyArray<CallRecord>>
  /** While down, every port operation for the company fails with PbxError. */
  setOutage(companyId: number, down: boolean): Effect.Effect<void>
}>()("crm/telephony/PbxSandbox") {}

const makeInProcess = () => {
  const key = (companyId: number, username: string) => `${companyId}/${username}`
  const profiles = new Map<string, SipProfile>()
  const registrations = new Set<string>()
  const calls: Array<CallRecord> = []
  const down = new Set<number>()

  const reachable = (companyId: number) =>
    down.has(companyId) ? Effect.fail(new PbxError({ message: "PBX unreachable." })) : Effect.void

  const pbx = Pbx.of({
    adapter: "in-process",
    upsertProfile: (profile) =>
      Effect.flatMap(reachable(profile.companyId), () =>
        Effect.sync(() => {
          const k = key(profile.companyId, profile.username)
          if (profiles.get(k)?.password !== profile.password) registrations.delete(k)
          profiles.set(k, profile)
        })),
    removeProfile: (companyId, username) =>
      Effect.flatMap(reachable(companyId), () =>
        Effect.sync(() => {
          profiles.delete(key(companyId, username))
          registrations.delete(key(companyId, username))
        })),
    isRegistered: (companyId, username) =>
      Effect.flatMap(reachable(companyId), () => Effect.sync(() => registrations.has(key(companyId, username)))),
    originate: (request) =>
      Effect.flatMap(reachable(request.companyId), () =>
        Effect.sync(() => {
          const callId = randomUUID()
          calls.push({ ...request, callId, at: Date.now() })
          if (calls.length > 10_000) calls.splice(0, calls.length - 10_000)
          return { callId }
        }))
  })

  const sandbox = PbxSandbox.of({
    profile: (companyId, username) => Effect.sync(() => profiles.get(key(companyId, username))),
    profiles: (companyId) => Effect.sync(() => [...profiles.values()].filter((p) => p.companyId === companyId)),
    register: (companyId, username, password) =>
      Effect.sync(() => {
        const k = key(companyId, username)
        if (profiles.get(k)?.password !== password) return false
        registrations.add(k)
        return true
      }),
    unregister: (companyId, username) => Effect.sync(() => void registrations.delete(key(companyId, username))),
    calls: (companyId) => Effect.sync(() => calls.filter((c) => c.companyId === companyId)),
    setOutage: (companyId, isDown) => Effect.sync(() => void (isDown ? down.add(companyId) : down.delete(companyId)))
  })

  return { pbx, sandbox }
}
