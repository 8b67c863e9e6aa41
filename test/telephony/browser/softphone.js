// The page's softphone: JsSIP over secure WebSocket, as the built-in softphone runs it. Bundled with
// esbuild for the browser test; the test drives it through `globalThis.softphone`.
import JsSIP from "jssip"

const log = []
let ua
let session

const note = (text) => log.push(`${new Date().toISOString()} ${text}`)

/** Registers with the browser profile's credentials; resolves once Kamailio answered 200, rejects on a refusal. */
const register = (credentials) =>
  new Promise((resolve, reject) => {
    ua = new JsSIP.UA({
      sockets: [new JsSIP.WebSocketInterface(credentials.wss_url)],
      uri: `sip:${credentials.sip_username}@${credentials.host}`,
      password: credentials.sip_password,
      display_name: credentials.display_name,
      register: true,
      session_timers: false
    })
    ua.on("registered", () => {
      note("registered")
      resolve("registered")
    })
    ua.on("registrationFailed", (e) => {
      note(`registration failed: ${e.cause}`)
      reject(new Error(`registration failed: ${e.cause}`))
    })
    ua.start()
  })

/** Dials `target`; the call's progress goes into the log (`confirmed`, `failed: <cause>`, `ended: <cause>`). */
const call = (target) => {
  session = ua.call(target, {
    mediaConstraints: { audio: true, video: false },
    pcConfig: { iceServers: [] },
    rtcOfferConstraints: { offerToReceiveAudio: true, offerToReceiveVideo: false }
  })
  session.on("progress", (e) => note(`progress ${e.response?.status_code ?? ""}`))
  session.on("confirmed", () => note("confirmed"))
  session.on("failed", (e) => note(`failed: ${e.cause} ${e.message?.status_code ?? ""}`))
  session.on("ended", (e) => note(`ended: ${e.cause}`))
}

/** What the peer connection's statistics say about the call's audio and its selected ICE pair. */
const stats = async () => {
  const report = await session.connection.getStats()
  const all = [...report.values()]
  const inbound = all.find((s) => s.type === "inbound-rtp" && s.kind === "audio")
  const outbound = all.find((s) => s.type === "outbound-rtp" && s.kind === "audio")
  const transport = all.find((s) => s.type === "transport")
  const pair = transport && report.get(transport.selectedCandidatePairId)
  const local = pair && report.get(pair.localCandidateId)
  const remote = pair && report.get(pair.remoteCandidateId)
  return {
    bytesReceived: inbound?.bytesReceived ?? 0,
    packetsReceived: inbound?.packetsReceived ?? 0,
    bytesSent: outbound?.bytesSent ?? 0,
    packetsSent: outbound?.packetsSent ?? 0,
    dtlsState: transport?.dtlsState ?? null,
    srtpCipher: transport?.srtpCipher ?? null,
    local: local ? { address: local.address, port: local.port } : null,
    remote: remote ? { address: remote.address, port: remote.port, candidateType: remote.candidateType } : null
  }
}

const hangup = () => session?.terminate()

globalThis.softphone = { register, call, stats, hangup, log: () => log.slice() }
