import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { AppConfig } from "../platform/Config.ts"
import { createHash, randomUUID } from "node:crypto"
import { companySipHost, TelephonyConfig } from "./Config.ts"
import { nativeUsername } from "./Domain.ts"
import { type OriginateRequest, Pbx, PbxError, PbxSandbox, type SipProfile } from "./Pbx.ts"

const md5 = (value: string) => createHash("md5").update(value).digest("hex")

/** The digests SIP digest authentication checks against (RFC 2617): MD5 is the protocol's, not our choice. */
export const sipDigests = (username: string, realm: string, password: string) => ({
  ha1: md5(`${username}:${realm}:${password}`),
  ha1b: md5(`${username}@${realm}:${realm}:${password}`)
})

interface RpcAnswer {
  readonly result?: unknown
  readonly error?: { readonly code?: number; readonly message?: string }
}

/** Kamailio answers this when an AOR has no registration: nothing to remove, nobody registered. */
const AOR_NOT_FOUND = 404

/** The contacts of a `ul.lookup` answer that are still registered (expiry in seconds ahead, or permanent). */
export const liveContacts = (result: unknown): number => {
  const contacts = (result as { readonly Contacts?: ReadonlyArray<{ readonly Contact?: { readonly Expires?: unknown } }> } | undefined)?.Contacts
  if (!Array.isArray(contacts)) return 0
  return contacts.filter((c) => {
    const expires = c?.Contact?.Expires
    return (typeof expires === "number" && expires > 0) || expires === "permanent"
  }).length
}

/**
 * The PBX port on Kamailio (deploy/kamailio/kamailio.cfg). Profiles are rows of
 * `kamailio.subscriber` written with the caller's connection, so they commit or roll back
 * with the operator row that caused them; registrations are asked of Kamailio
 * (`ul.lookup`, live); removals and calls go through Kamailio's JSON-RPC.
 */
export const KamailioPbx = Layer.effect(
  Pbx,
  Effect.gen(function*() {
    const sql = yield* SqlClient.SqlClient
    const config = yield* TelephonyConfig
    const domainOf = (companyId: number) => companySipHost(config, companyId)

    const rpc = (method: string, params: ReadonlyArray<string>) =>
      Effect.tryPromise({
        try: async (signal) => {
          const response = await fetch(config.kamailioRpcUrl, {
            method: "POST",
            headers: { "content-type": "application/json" },
            body: JSON.stringify({ jsonrpc: "2.0", method, params, id: 1 }),
            signal: AbortSignal.any([signal, AbortSignal.timeout(config.kamailioRpcTimeoutMs)])
          })
          return (await response.json()) as RpcAnswer
        },
        catch: (error) => new PbxError({ message: `Kamailio RPC ${method}: ${error instanceof Error ? error.message : String(error)}` })
      })

    /** `tolerated`: an error code that means there was nothing to do. */
    const call = Effect.fnUntraced(function*(method: string, params: ReadonlyArray<string>, tolerated?: number) {
      const answer = yield* rpc(method, params)
      if (answer.error !== undefined && answer.error.code !== tolerated) {
        return yield* new PbxError({ message: `Kamailio RPC ${method}: ${answer.error.code ?? ""} ${answer.error.message ?? ""}`.trim() })
      }
      return answer.result
    })

    /** Drops every registration of the account (phones must REGISTER again, with what is now valid). */
    const dropRegistrations = (companyId: number, username: string) =>
      call("ul.rm", ["location", `${username}@${domainOf(companyId)}`], AOR_NOT_FOUND)

    const upsertProfile = Effect.fn("KamailioPbx.upsertProfile")(function*(profile: SipProfile) {
      const domain = domainOf(profile.companyId)
      const { ha1, ha1b } = sipDigests(profile.username, domain, profile.password)
      const before = yield* sql<{ readonly ha1: string }>`
        SELECT ha1 FROM kamailio.subscriber WHERE username = ${profile.username} AND domain = ${domain} FOR UPDATE`.pipe(Effect.orDie)
      yield* sql`
        INSERT INTO kamailio.subscriber ${sql.insert({
          username: profile.username,
          domain,
          ha1,
          ha1b,
          company_id: profile.companyId,
          user_id: profile.userId
        })}
        ON CONFLICT (username, domain) DO UPDATE SET ha1 = EXCLUDED.ha1, ha1b = EXCLUDED.ha1b,
          company_id = EXCLUDED.company_id, user_id = EXCLUDED.user_id`.pipe(Effect.orDie)
      if (before.length > 0 && before[0].ha1 !== ha1) yield* dropRegistrations(profile.companyId, profile.username)
    })

    const removeProfile = Effect.fn("KamailioPbx.removeProfile")(function*(companyId: number, username: string) {
      yield* sql`DELETE FROM kamailio.subscriber WHERE username = ${username} AND domain = ${domainOf(companyId)}`.pipe(Effect.orDie)
      yield* dropRegistrations(companyId, username)
    })

    /**
     * Asked of Kamailio itself (`ul.lookup`), not read from `kamailio.location`: the table keeps its
     * rows while Kamailio is down, and the contract wants a failed or slow check to read as false.
     * A contact counts while its expiry is ahead ("permanent" too); "expired" and "deleted" do not.
     */
    const isRegistered = Effect.fn("KamailioPbx.isRegistered")(function*(companyId: number, username: string) {
      const result = yield* call("ul.lookup", ["location", `${username}@${domainOf(companyId)}`], AOR_NOT_FOUND)
      return liveContacts(result) > 0
    })

    /**
     * Click-to-call: Kamailio rings the caller (every device of theirs: the cfg forks `agent-<id>`
     * to the browser profile too), and once one answers REFERs it to the callee or the number,
     * which the cfg sends to the trunk. Kamailio does not name the call it creates, so ours is a UUID,
     * handed to the cfg (htable `pending`) so the call's outcome comes back under it.
     */
    const originate = Effect.fn("KamailioPbx.originate")(function*(request: OriginateRequest) {
      const domain = domainOf(request.companyId)
      const callId = randomUUID()
      const caller = `${nativeUsername(request.callerUserId)}@${domain}`
      const from = `sip:${caller}`
      const to = request.to.kind === "internal"
        ? `sip:${nativeUsername(request.to.calleeUserId)}@${domain}`
        : `sip:${request.to.number}@${domain}`
      // The cfg tracks the call's dialogs under this reference and reports them into kamailio.call_events.
      yield* call("htable.sets", ["pending", caller, callId])
      yield* call("dlg.bridge_dlg", [from, to, config.kamailioSelfUri])
      return { callId }
    })

    return Pbx.of({ adapter: "kamailio", upsertProfile, removeProfile, isRegistered, originate })
  })
)

const die = (what: string) =>
  Effect.die(new Error(`PbxSandbox.${what} plays the in-process PBX's devices; with PBX=kamailio use real SIP clients.`))

/** With a real PBX there is no sandbox: devices are real SIP clients. */
const noSandbox = PbxSandbox.of({
  profile: () => die("profile"),
  profiles: () => die("profiles"),
  register: () => die("register"),
  unregister: () => die("unregister"),
  calls: () => die("calls"),
  setOutage: () => die("setOutage")
})

/** `PBX=kamailio` selects Kamailio; otherwise the in-process PBX (embedded mode, dev, tests). */
export const PbxFromConfig = Layer.unwrap(Effect.gen(function*() {
  const config = yield* TelephonyConfig
  if (config.pbx !== "kamailio") return Pbx.layerInProcess
  if (Option.isNone((yield* AppConfig).databaseUrl)) {
    return yield* Effect.die(new Error("PBX=kamailio needs PostgreSQL (DATABASE_URL): Kamailio reads its accounts there."))
  }
  return Layer.merge(KamailioPbx, Layer.succeed(PbxSandbox, noSandbox))
})).pipe(Layer.provide(TelephonyConfig.layer))
