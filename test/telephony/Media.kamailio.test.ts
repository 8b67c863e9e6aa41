import { assert, describe, it } from "@effect/vitest"
import { writeFileSync } from "node:fs"
import { cpus, loadavg } from "node:os"
import { request } from "../support/TestServer.ts"
import { eventually, relayedLegs } from "./sip.ts"
import { base, deskPhone, enable, person, relayedTelephony, telephonyCompany } from "./support.ts"

/**
 * Media through the relay (PBX=kamailio with rtpengine, media_encryption "sdes"): phones set up
 * from the credentials over TLS, SDES-SRTP only, call each other and rtpengine carries the audio.
 */

const relayed = relayedTelephony("sdes")

/** A desk phone set up from the native credentials: TLS on tls_port, SRTP as media_encryption says. */
const sdesPhone = async (token: string, userId: number) => {
  const phone = await deskPhone(relayed(), token, userId)
  assert.strictEqual(phone.mediaEncryption, "sdes")
  return phone
}

/** Alice (at `extension`) and Bob of a new company, each with a registered desk phone. */
const twoDeskPhones = async (extension: string) => {
  const { server } = relayed()
  const company = await telephonyCompany(server)
  const alice = await person(server, company.id)
  const bob = await person(server, company.id)
  await enable(server, company.adminToken, alice.id)
  await enable(server, company.adminToken, bob.id)
  const ext = await request(server, "POST", `${base}/${alice.id}/telephony/extension`, { token: company.adminToken, body: { extension } })
  assert.strictEqual(ext.status, 200)
  return { a: await sdesPhone(company.adminToken, alice.id), b: await sdesPhone(company.adminToken, bob.id) }
}

describe("media relay (rtpengine)", () => {
  it("a call between two desk phones over TLS with SDES-SRTP is relayed by rtpengine, packets both ways", async () => {
    const { a, b } = await twoDeskPhones("401")
    b.agent.command("dial", `sip:401@${b.domain}`)
    await a.agent.waitFor("alice answering", (e) => e.type === "CALL_ESTABLISHED")
    await b.agent.waitFor("bob's call established", (e) => e.type === "CALL_ESTABLISHED")
    // Both legs on RTP/SAVP at the relay, and audio arriving at the relay from both phones.
    const legs = await eventually("audio from both phones at the relay", async () => {
      const legs = await relayedLegs(relayed().rtpengine)
      return legs.length === 2 && legs.every((leg) => leg.packets >= 50) ? legs : undefined
    })
    assert.deepStrictEqual(legs.map((leg) => leg.protocol), ["RTP/SAVP", "RTP/SAVP"])
    // Each phone hears the relay, not the other phone: its audio comes from one of rtpengine's ports.
    for (const phone of [a.agent, b.agent]) {
      assert.match(phone.output(), /SRTP is Enabled/)
      const from = await eventually("incoming audio", () => /incoming rtp for 'audio' established, receiving from 127\.0\.0\.1:(\d+)/.exec(phone.output()) ?? undefined)
      assert.include(legs.map((leg) => leg.relayPort), Number(from[1]))
      assert.notInclude(legs.map((leg) => leg.phonePort), Number(from[1]))
    }
    b.agent.command("hangup")
    await a.agent.waitFor("the call to end", (e) => e.type === "CALL_CLOSED")
    // The relay let go of the call with the BYE.
    await eventually("the session deleted", async () => /callid:/.test(await relayed().rtpengine.cli("list sessions all")) ? undefined : true)
  })

  it("twenty calls in a row are each set up and relayed with audio both ways (figures: setup time, packets each way)", async () => {
    const { a, b } = await twoDeskPhones("402")
    const calls: Array<{ setupMs: number; packets: Array<number> }> = []
    for (let i = 0; i < 20; i++) {
      const [sinceA, sinceB] = [a.agent.events.length, b.agent.events.length]
      const dialled = Date.now()
      b.agent.command("dial", `sip:402@${b.domain}`)
      const established = await b.agent.waitFor("the call established", (e) => e.type === "CALL_ESTABLISHED", sinceB)
      await a.agent.waitFor("alice answering", (e) => e.type === "CALL_ESTABLISHED", sinceA)
      // The relay lists a call's legs once both answers have passed through it; on a loaded machine
      // that can be later than the phones' CALL_ESTABLISHED.
      await new Promise((resolve) => setTimeout(resolve, 1000))
      const legs = await eventually("audio from both phones at the relay", async () => {
        const legs = await relayedLegs(relayed().rtpengine)
        return legs.length === 2 && legs.every((leg) => leg.packets > 0) ? legs : undefined
      })
      calls.push({ setupMs: established.at! - dialled, packets: legs.map((leg) => leg.packets) })
      b.agent.command("hangup")
      await a.agent.waitFor("the call to end", (e) => e.type === "CALL_CLOSED", sinceA)
      await b.agent.waitFor("the call to end", (e) => e.type === "CALL_CLOSED", sinceB)
      await eventually("the session deleted", async () => /callid:/.test(await relayed().rtpengine.cli("list sessions all")) ? undefined : true)
    }
    const setup = calls.map((c) => c.setupMs).sort((x, y) => x - y)
    const at = (q: number) => setup[Math.min(setup.length - 1, Math.ceil(q * setup.length) - 1)]
    const figures = {
      date: new Date().toISOString(),
      machine: `${cpus().length} cores, load average ${loadavg().map((l) => l.toFixed(1)).join(" ")} (shared machine)`,
      command: "DATABASE_URL=… TELEPHONY_FIGURES_OUT=bench/results/telephony-calls.json npx vitest run test/telephony/Media.kamailio.test.ts",
      calls: calls.length,
      setup_ms: { p50: at(0.5), p95: at(0.95), min: setup[0], max: setup[setup.length - 1] },
      packets_at_relay_after_1s_of_audio: {
        from_caller_min: Math.min(...calls.map((c) => c.packets[0])),
        from_callee_min: Math.min(...calls.map((c) => c.packets[1]))
      },
      per_call: calls
    }
    if (process.env.TELEPHONY_FIGURES_OUT !== undefined) writeFileSync(process.env.TELEPHONY_FIGURES_OUT, `${JSON.stringify(figures, null, 2)}\n`)
  }, 120_000)
})
