import { assert, describe, it } from "@effect/vitest"
import { whenAvailable } from "../support/Requires.ts"
import { request } from "../support/TestServer.ts"
import { eventually, injectRtp, relayedLegs } from "./sip.ts"
import { base, deskPhone, enable, kamailioNeeds, person, relayedTelephony, telephonyCompany } from "./support.ts"

/**
 * The relay on plain RTP (media_encryption "none"), where no key protects a call's media: rtpengine
 * learns each phone's address from its packets (NAT), then keeps to it (strict source), so packets
 * from anyone else, such as a phone of another company that found the relay's ports, are dropped.
 */

const needs = { ...kamailioNeeds, programs: [...kamailioNeeds.programs, "rtpengine"] }

whenAvailable(needs, "relay strict source", () => describe("media relay on plain RTP: strict source", () => {
  const relayed = relayedTelephony("none")

  it("after learning each phone's address the relay drops packets from any other source; the call's audio goes on", async () => {
    const telephony = relayed()
    const { server, rtpengine } = telephony
    const a = await telephonyCompany(server)
    const alice = await person(server, a.id)
    const bob = await person(server, a.id)
    await enable(server, a.adminToken, alice.id)
    await enable(server, a.adminToken, bob.id)
    const ext = await request(server, "POST", `${base}/${alice.id}/telephony/extension`, { token: a.adminToken, body: { extension: "601" } })
    assert.strictEqual(ext.status, 200)
    const desk = await deskPhone(telephony, a.adminToken, alice.id)
    const caller = await deskPhone(telephony, a.adminToken, bob.id)
    assert.strictEqual(desk.mediaEncryption, "none")

    caller.agent.command("dial", `sip:601@${caller.domain}`)
    await desk.agent.waitFor("alice answering", (e) => e.type === "CALL_ESTABLISHED")
    const legs = await eventually("audio from both phones at the relay", async () => {
      const legs = await relayedLegs(rtpengine)
      return legs.length === 2 && legs.every((leg) => leg.packets >= 50) ? legs : undefined
    }, 15_000)
    assert.deepStrictEqual(legs.map((leg) => leg.protocol), ["RTP/AVP", "RTP/AVP"])
    // The relay has learned each phone's address (its packets, not only its SDP): from here on it keeps to it.
    for (const leg of legs) {
      const confirmed = new RegExp(`port ${leg.relayPort}\\]: \\[core\\] Confirmed peer address as 127\\.0\\.0\\.1:${leg.phonePort}\\b`)
      await eventually(`the relay confirming the phone at ${leg.phonePort}`, () => confirmed.test(rtpengine.log()) || undefined)
    }

    for (const leg of legs) {
      const from = await injectRtp(leg.relayPort)
      const drop = new RegExp(`port ${leg.relayPort}\\]: .*Drop due to strict-source attribute; got \\S*127\\.0\\.0\\.1:${from}\\b`)
      await eventually(`the relay dropping packets from ${from}`, () => drop.test(rtpengine.log()) || undefined).catch((error: Error) => {
        throw new Error(`${error.message}:\n${rtpengine.log().slice(-4000)}`)
      })
    }
    // The phones still send to, and hear, the relay's ports they were given. The relay's listing of a
    // session is read while it changes, so it is asked until it shows both legs again.
    const after = await eventually("both legs still relaying the phones' audio", async () => {
      const now = await relayedLegs(rtpengine).catch(() => [])
      return now.length === 2 && now.every((leg, i) => leg.packets > legs[i].packets) ? now : undefined
    }).catch((error: Error) => {
      throw new Error(`${error.message}:\n${rtpengine.log().slice(-4000)}`)
    })
    assert.deepStrictEqual(after.map((leg) => [leg.relayPort, leg.phonePort]), legs.map((leg) => [leg.relayPort, leg.phonePort]))

    caller.agent.command("hangup")
    await desk.agent.waitFor("the call to end", (e) => e.type === "CALL_CLOSED")
  }, 60_000)
}))
