import { assert, describe, it } from "@effect/vitest"
import { afterAll } from "vitest"
import { whenAvailable } from "../support/Requires.ts"
import { request } from "../support/TestServer.ts"
import { type Browser, type BrowserCredentials, startBrowser } from "./browser.ts"
import { type Agent, eventually, injectRtp, relayedLegs } from "./sip.ts"
import { base, deskPhone, enable, kamailioNeeds, person, relayedTelephony, telephonyCompany } from "./support.ts"

/**
 * A browser softphone meets a desk phone (PBX=kamailio, rtpengine, media_encryption "sdes"): JsSIP in
 * headless Chromium registers over wss with the browser profile's credentials and calls a baresip
 * desk phone (TLS, SDES-SRTP) by extension. rtpengine bridges ICE + DTLS-SRTP to RTP/SAVP.
 */

const needs = { ...kamailioNeeds, programs: [...kamailioNeeds.programs, "rtpengine", "chromium"] }

whenAvailable(needs, "browser softphone to desk phone", () => describe("browser softphone to desk phone (Chromium, JsSIP, rtpengine)", () => {
  const relayed = relayedTelephony("sdes")
  const browsers: Array<Browser> = []
  afterAll(() => Promise.all(browsers.map((browser) => browser.close())))

  const server = () => relayed().server
  const rtpengine = () => relayed().rtpengine

  /** The browser softphone of the member behind `token`, registered with its own browser profile. */
  const browserPhone = async (token: string) => {
    const res = await request(server(), "GET", "/v1/softphone/credentials", { token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const credentials = res.body.data as BrowserCredentials
    const browser = await startBrowser(relayed().tls!)
    browsers.push(browser)
    assert.strictEqual(await browser.register(credentials), "registered", browser.console())
    return { browser, credentials }
  }

  /** A company with Alice at `extension` on a desk phone, and Bob. */
  const office = async (extension: string) => {
    const company = await telephonyCompany(server())
    const alice = await person(server(), company.id)
    const bob = await person(server(), company.id)
    await enable(server(), company.adminToken, alice.id)
    await enable(server(), company.adminToken, bob.id)
    const ext = await request(server(), "POST", `${base}/${alice.id}/telephony/extension`, { token: company.adminToken, body: { extension } })
    assert.strictEqual(ext.status, 200)
    const desk = await deskPhone(relayed(), company.adminToken, alice.id)
    assert.strictEqual(desk.mediaEncryption, "sdes")
    return { company, alice, bob, desk: desk.agent }
  }

  /** Until the browser's log has a line matching `pattern`; the page's console in the failure. */
  const browserSaw = (browser: Browser, what: string, pattern: RegExp) =>
    eventually(what, async () => (await browser.log()).find((line) => pattern.test(line)), 15_000).catch(async (error: Error) => {
      throw new Error(`${error.message}: ${(await browser.log()).join("; ")}\n${browser.console().slice(-3000)}`)
    })

  /** What the desk phone's status line says it received (bit/s): baresip prints `audio=<tx>/<rx>` each second. */
  const deskReceived = (desk: Agent) => {
    const lines = [...desk.output().matchAll(/audio=(\d+)\/(\d+) \(bit\/s\)/g)]
    return lines.length === 0 ? 0 : Number(lines[lines.length - 1][2])
  }

  /** Bob's browser calls Alice's desk phone at `extension`; both sides have audio from the relay. */
  const browserCall = async (extension: string) => {
    const { company, alice, bob, desk } = await office(extension)
    const { browser, credentials } = await browserPhone(bob.token)
    await browser.call(`sip:${extension}@${credentials.host}`)
    const answered = await desk.waitFor("the desk phone answering", (e) => e.type === "CALL_ESTABLISHED")
    await browserSaw(browser, "the browser's call confirmed", / confirmed$/)
    const stats = await eventually("audio at the browser", async () => {
      const stats = await browser.stats()
      return stats.packetsReceived >= 50 ? stats : undefined
    }, 15_000)
    const legs = await eventually("audio from both phones at the relay", async () => {
      const legs = await relayedLegs(rtpengine())
      return legs.length === 2 && legs.every((leg) => leg.packets >= 50) ? legs : undefined
    }, 15_000)
    return { company, alice, bob, desk, browser, credentials, answered, stats, legs }
  }

  it("registers over wss with the browser profile, calls a desk phone by extension and is answered; audio both ways through the relay", async () => {
    const { bob, desk, browser, answered, stats, legs } = await browserCall("501")
    const own = await request(server(), "GET", "/v1/softphone/credentials", { token: bob.token })
    assert.isTrue(own.body.data.registered)
    assert.match(answered.peeruri ?? "", new RegExp(`^sip:agent-${bob.id}-web@`))

    // The browser's side: ICE and DTLS-SRTP with the relay, audio received (getStats).
    assert.strictEqual(stats.dtlsState, "connected")
    assert.isNotNull(stats.srtpCipher)
    assert.isAbove(stats.bytesReceived, 0)
    assert.isAbove(stats.packetsSent, 0)
    // The relay bridges the two: WebRTC towards the browser, SDES-SRTP towards the desk phone.
    assert.deepStrictEqual(legs.map((leg) => leg.protocol), ["UDP/TLS/RTP/SAVPF", "RTP/SAVP"])
    const [web, native] = legs
    // Media goes through the relay, never phone to phone: the browser's selected ICE pair ends at the
    // relay's port for its leg, and the relay learned the browser's own address from its packets.
    assert.deepStrictEqual(stats.remote && { address: stats.remote.address, port: stats.remote.port }, { address: "127.0.0.1", port: web.relayPort })
    assert.strictEqual(web.phonePort, stats.local?.port)
    // The desk phone: SRTP, audio received from the relay's port for its leg (not from the browser).
    assert.match(desk.output(), /SRTP is Enabled \(cryptosuite=AES_CM_128_HMAC_SHA1_80\)/)
    const from = await eventually("incoming audio at the desk phone", () => /incoming rtp for 'audio' established, receiving from 127\.0\.0\.1:(\d+)/.exec(desk.output()) ?? undefined)
    assert.strictEqual(Number(from[1]), native.relayPort)
    assert.notStrictEqual(Number(from[1]), stats.local?.port)
    await eventually("audio decoded at the desk phone", () => deskReceived(desk) > 0 || undefined)
    assert.notMatch(desk.output(), /failed to decrypt/)

    await browser.hangup()
    await desk.waitFor("the call to end", (e) => e.type === "CALL_CLOSED")
    await browserSaw(browser, "the browser's call ended", / ended: /)
    await eventually("the relay session deleted", async () => /callid:/.test(await rtpengine().cli("list sessions all")) ? undefined : true)
  }, 90_000)

  it("company B's browser reaches neither company A's extensions nor the media of A's call", async () => {
    const a = await browserCall("502")
    const b = await telephonyCompany(server())
    const carol = await person(server(), b.id)
    await enable(server(), b.adminToken, carol.id)
    const { browser: intruder, credentials } = await browserPhone(carol.token)
    const since = a.desk.events.length

    // A's extension, dialled at A's domain or at B's own: refused, and A's desk phone never rings.
    await intruder.call(`sip:502@${a.credentials.host}`)
    await browserSaw(intruder, "the call to A's domain refused", /failed: .* 403$/)
    await intruder.call(`sip:502@${credentials.host}`)
    await browserSaw(intruder, "A's extension unknown in B", /failed: .* 404$/)
    await intruder.call(`sip:agent-${a.alice.id}@${a.credentials.host}`)
    await eventually("the call to A's member refused", async () => (await intruder.log()).filter((line) => / 403$/.test(line)).length >= 2 || undefined)
    assert.isUndefined(a.desk.events.slice(since).find((e) => e.type === "CALL_INCOMING"))

    // Packets aimed at A's relay ports by anyone but A's phones are dropped: they fail SRTP
    // authentication (keys from the DTLS handshake with A's browser, from the SDES offer to A's desk
    // phone). Strict source on plain RTP: StrictSource.kamailio.test.ts.
    for (const leg of a.legs) {
      await injectRtp(leg.relayPort)
      const discarded = new RegExp(`port ${leg.relayPort}\\]: \\[core\\] Discarded invalid SRTP packet: authentication failed`)
      await eventually(`the relay discarding packets sent to ${leg.relayPort}`, () => discarded.test(rtpengine().log()) || undefined)
        .catch((error: Error) => {
          throw new Error(`${error.message}:\n${rtpengine().log().slice(-4000)}`)
        })
    }
    // A's call goes on between its own phones.
    const after = await relayedLegs(rtpengine())
    assert.deepStrictEqual(after.map((leg) => [leg.phoneAddress, leg.phonePort]), a.legs.map((leg) => [leg.phoneAddress, leg.phonePort]))
    const before = (await a.browser.stats()).packetsReceived
    await eventually("audio still arriving at A's browser", async () => (await a.browser.stats()).packetsReceived > before + 10 || undefined)
    await a.browser.hangup()
    await a.desk.waitFor("the call to end", (e) => e.type === "CALL_CLOSED", since)
  }, 90_000)
}))
