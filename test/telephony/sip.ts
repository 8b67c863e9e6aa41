import { type ChildProcess, execFileSync, spawn } from "node:child_process"
import { createHash, randomUUID } from "node:crypto"
import { createSocket } from "node:dgram"
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs"
import { createServer, type Socket, connect } from "node:net"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { WebSocket as WsSocket } from "ws"
import { freePort, killOnExit, root, sleep, stopChild } from "../support/Processes.ts"

/** Real SIP processes for the Kamailio tests: Kamailio with the repository's cfg, baresip user agents. */

/** Two consecutive free ports (baresip listens for TLS on the one after its SIP port). */
export const freePortPair = async (): Promise<number> => {
  for (;;) {
    const port = await freePort()
    const next = await new Promise<boolean>((resolve) => {
      const server = createServer()
      server.once("error", () => resolve(false))
      server.listen(port + 1, "127.0.0.1", () => server.close(() => resolve(true)))
    })
    if (next) return port
  }
}

export const eventually = async <A>(what: string, probe: () => Promise<A | undefined> | A | undefined, timeoutMs = 10_000) => {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`)
    await sleep(100)
  }
}

/**
 * A certificate authority made for the run, and a server certificate it signed for `*.<sipDomain>`
 * and 127.0.0.1 (the phones reach the company domains through Kamailio's loopback address).
 */
export interface TestCa {
  readonly caFile: string
  readonly certFile: string
  readonly keyFile: string
  readonly ca: string
  readonly remove: () => void
}

export const makeTestCa = (sipDomain: string): TestCa => {
  const dir = mkdtempSync(join(tmpdir(), "sip-ca-"))
  const at = (name: string) => join(dir, name)
  const openssl = (...args: Array<string>) => execFileSync("openssl", args, { stdio: "pipe" })
  openssl("req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-days", "2",
    "-subj", "/CN=CRM test CA", "-keyout", at("ca.key"), "-out", at("ca.pem"))
  openssl("req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes", "-subj", `/CN=${sipDomain}`,
    "-keyout", at("key.pem"), "-out", at("server.csr"))
  writeFileSync(at("ext.cnf"), `subjectAltName=DNS:${sipDomain},DNS:*.${sipDomain},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n`)
  openssl("x509", "-req", "-in", at("server.csr"), "-CA", at("ca.pem"), "-CAkey", at("ca.key"), "-CAcreateserial",
    "-days", "2", "-extfile", at("ext.cnf"), "-out", at("cert.pem"))
  return {
    caFile: at("ca.pem"),
    certFile: at("cert.pem"),
    keyFile: at("key.pem"),
    ca: readFileSync(at("ca.pem"), "utf8"),
    remove: () => rmSync(dir, { recursive: true, force: true })
  }
}

/** rtpengine (userspace, no kernel table) on loopback: its ng control port and its CLI. */
export interface Rtpengine {
  readonly ngPort: number
  /** `list totals`, `list sessions <call-id>`… as rtpengine-ctl would send them. */
  readonly cli: (command: string) => Promise<string>
  readonly log: () => string
  readonly stop: () => Promise<void>
}

export const startRtpengine = async (): Promise<Rtpengine> => {
  const [ngPort, cliPort] = [await freePort(), await freePort()]
  // A media port range of its own: 200 ports from a random even start, away from other runs'.
  const min = 30_000 + 2 * Math.floor(Math.random() * 10_000)
  const child = killOnExit(spawn("rtpengine", [
    "--config-file=none", "-f", "-E", "-t", "-1", "-i", "127.0.0.1", "-n", `127.0.0.1:${ngPort}`,
    "-c", `127.0.0.1:${cliPort}`, "-m", String(min), "-M", String(min + 199), "-L", "6", "--delete-delay=0"
  ], { stdio: ["ignore", "pipe", "pipe"] }))
  let output = ""
  child.stdout!.on("data", (chunk) => output = (output + chunk).slice(-50_000))
  child.stderr!.on("data", (chunk) => output = (output + chunk).slice(-50_000))
  const cli = (command: string) =>
    new Promise<string>((resolve, reject) => {
      const socket = connect(cliPort, "127.0.0.1", () => socket.write(`${command}\n`))
      let answer = ""
      socket.setEncoding("utf8")
      socket.on("data", (chunk) => answer += chunk)
      socket.on("end", () => resolve(answer))
      socket.on("error", reject)
    })
  await eventually("rtpengine's CLI", async () => {
    if (child.exitCode !== null) throw new Error(`rtpengine exited (${child.exitCode}):\n${output}`)
    return cli("list totals").then((answer) => answer.includes("Total") || undefined, () => undefined)
  })
  return { ngPort, cli, log: () => output, stop: () => stopChild(child, 3000) }
}

/** One side of a relayed call as rtpengine lists it: its media's protocol, the relay's port and the phone's address, packets received. */
export interface RelayedLeg {
  readonly protocol: string | undefined
  readonly relayPort: number
  readonly phoneAddress: string
  readonly phonePort: number
  readonly packets: number
}

/** The legs of the one call the relay holds (`list sessions <call-id>`), caller's first. */
export const relayedLegs = async (rtpengine: Rtpengine): Promise<ReadonlyArray<RelayedLeg>> => {
  const all = await rtpengine.cli("list sessions all")
  const callIds = [...all.matchAll(/callid:\s+(\S+)/g)].map((m) => m[1])
  if (callIds.length !== 1) throw new Error(`expected one call at the relay:\n${all}`)
  const session = await rtpengine.cli(`list sessions ${callIds[0]}`)
  return session.split(/^--- Tag /m).slice(1).map((leg) => {
    const rtp = /^-+ Port\s+127\.0\.0\.1:(\d+) <>\s+([0-9a-f.:]+?):(\d+)\s*, SSRC \S+, (\d+) p/m.exec(leg)
    if (rtp === null) throw new Error(`no media port in the relay's session:\n${session}`)
    return {
      protocol: /audio over (\S+)\)/.exec(leg)?.[1],
      relayPort: Number(rtp[1]),
      phoneAddress: rtp[2],
      phonePort: Number(rtp[3]),
      packets: Number(rtp[4])
    }
  })
}

/** `count` packets with an RTP header, from a socket of their own, to `port` on loopback: the socket's port. */
export const injectRtp = async (port: number, count = 25) => {
  const socket = createSocket("udp4")
  await new Promise<void>((resolve) => socket.bind(0, "127.0.0.1", resolve))
  const packet = Buffer.alloc(172, 0x55)
  packet.writeUInt16BE(0x806f, 0)
  packet.writeUInt32BE(0xbadc0de, 8)
  for (let i = 0; i < count; i++) {
    packet.writeUInt16BE(i, 2)
    packet.writeUInt32BE(i * 960, 4)
    await new Promise((resolve) => socket.send(packet, port, "127.0.0.1", resolve))
    await sleep(20)
  }
  const from = socket.address().port
  socket.close()
  return from
}

export interface Kamailio {
  readonly sipPort: number
  readonly tlsPort: number
  readonly wsPort: number
  readonly wssPort: number
  readonly rpcUrl: string
  readonly log: () => string
  /** An outage: the whole process group stops answering (RPC included) until `resume`. */
  readonly pause: () => void
  readonly resume: () => void
  readonly stop: () => Promise<void>
}

/** Kamailio on loopback ports of its own, with deploy/kamailio/kamailio.cfg and the test database. */
export const startKamailio = async (options: {
  readonly databaseUrl: string
  readonly sipDomain: string
  readonly trunkUri: string
  readonly tls: TestCa
  /** The media relay, and whether phones get SDES-SRTP from it. */
  readonly rtpengine?: { readonly ngPort: number; readonly srtp: boolean }
}) => {
  const [sipPort, tlsPort, wsPort, wssPort, rpcPort] = [await freePort(), await freePort(), await freePort(), await freePort(), await freePort()]
  const dir = mkdtempSync(join(tmpdir(), "kamailio-"))
  const db = new URL(options.databaseUrl)
  if (db.port === "") db.port = "5432"
  const dbUrl = `postgres://${db.username}${db.password ? `:${db.password}` : ""}@${db.hostname}:${db.port}${db.pathname}`
  const defines = {
    SIP_DOMAIN: JSON.stringify(options.sipDomain),
    DBURL: JSON.stringify(dbUrl),
    SQLCON: JSON.stringify(`crm=>${dbUrl}`),
    SIP_TRUNK_URI: JSON.stringify(options.trunkUri),
    LISTEN_IP: "127.0.0.1",
    SIP_PORT: String(sipPort),
    WS_PORT: String(wsPort),
    RPC_PORT: String(rpcPort),
    TLS_PORT: String(tlsPort),
    WSS_PORT: String(wssPort),
    TLS_CERT: JSON.stringify(options.tls.certFile),
    TLS_KEY: JSON.stringify(options.tls.keyFile)
  }
  const args = ["-f", join(root, "deploy/kamailio/kamailio.cfg"), "-DD", "-E", "-w", dir, "-P", join(dir, "kamailio.pid"), "-m", "32", "-M", "8"]
  for (const [key, value] of Object.entries(defines)) args.push("-A", `${key}=${value}`)
  args.push("-A", "WITH_TLS")
  if (options.rtpengine !== undefined) {
    args.push("-A", "WITH_RTPENGINE", "-A", `RTPENGINE_SOCK="udp:127.0.0.1:${options.rtpengine.ngPort}"`)
    if (options.rtpengine.srtp) args.push("-A", "WITH_SRTP")
  }
  const child = killOnExit(spawn("kamailio", args, {
    // As in deploy/kamailio's image: location.expires is written in local time, read as UTC.
    env: { ...process.env, PGOPTIONS: "-c search_path=kamailio,public", TZ: "UTC" },
    // Its own process group: `pause` stops the workers (which answer the RPC) with the main process.
    detached: true,
    stdio: ["ignore", "pipe", "pipe"]
  }))
  let output = ""
  child.stdout!.on("data", (chunk) => output += chunk)
  child.stderr!.on("data", (chunk) => output += chunk)
  const rpcUrl = `http://127.0.0.1:${rpcPort}/RPC`
  try {
    await eventually("Kamailio's JSON-RPC", async () => {
      if (child.exitCode !== null) throw new Error(`kamailio exited (${child.exitCode}):\n${output}`)
      const answer = await fetch(rpcUrl, { method: "POST", body: JSON.stringify({ jsonrpc: "2.0", method: "core.version", id: 1 }) })
        .then((r) => r.json() as Promise<{ result?: string }>, () => undefined)
      return answer?.result
    })
  } catch (error) {
    await stopChild(child, 3000)
    throw error
  }
  return {
    sipPort,
    tlsPort,
    wsPort,
    wssPort,
    rpcUrl,
    log: () => output,
    pause: () => process.kill(-child.pid!, "SIGSTOP"),
    resume: () => process.kill(-child.pid!, "SIGCONT"),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) process.kill(-child.pid!, "SIGCONT")
      await stopChild(child, 3000)
      rmSync(dir, { recursive: true, force: true })
    }
  } satisfies Kamailio
}

export interface AgentEvent {
  readonly type: string
  /** When the test saw it (ms). */
  readonly at?: number
  readonly class?: string
  readonly accountaor?: string
  readonly direction?: string
  readonly peeruri?: string
  readonly param?: string
}

export interface Account {
  readonly username: string
  readonly password: string
  /** The SIP domain of the account (what the credentials call `host`). */
  readonly domain: string
  /** Where the domain's DNS would lead: Kamailio's loopback port. */
  readonly proxyPort: number
  readonly transport: string
  /** A trunk: no registration, answers calls to its username. */
  readonly trunk?: boolean
  /** SIP port (TCP, UDP; TLS on the next one); phones take ephemeral ones. */
  readonly listenPort?: number
  /** The CA the phone checks the server's TLS certificate against (transport `tls`). */
  readonly caFile?: string
  /** `srtp-mand`: SDES-SRTP only (what media_encryption "sdes" asks of a phone). */
  readonly mediaenc?: "srtp-mand"
}

/**
 * One baresip process, driven over its ctrl_tcp module (JSON in netstrings): every event it
 * reports (REGISTER_OK, CALL_INCOMING, CALL_ESTABLISHED, CALL_CLOSED…) is kept in `events`.
 * Calls are answered automatically (`answermode=auto`); `menu` follows REFERs (call transfer).
 */
export class Agent {
  readonly events: Array<AgentEvent> = []
  private constructor(
    private readonly child: ChildProcess,
    private readonly control: Socket,
    private readonly dir: string,
    readonly sipPort: number,
    /** The console (last 20 kB): media details ctrl_tcp does not report. */
    readonly output: () => string
  ) {}

  static async start(account: Account) {
    const dir = mkdtempSync(join(tmpdir(), "baresip-"))
    const [sipPort, ctrlPort] = [account.listenPort ?? 0, await freePort()]
    writeFileSync(join(dir, "config"), [
      "poll_method epoll",
      `sip_listen 127.0.0.1:${sipPort}`,
      "audio_player aufile,/dev/null",
      "audio_source ausine,440",
      "audio_alert aufile,/dev/null",
      "module_path /usr/lib/baresip/modules",
      "module opus.so",
      "module g711.so",
      "module srtp.so",
      "module ausine.so",
      "module aufile.so",
      "module_app account.so",
      "module_app menu.so",
      "module_app ctrl_tcp.so",
      `ctrl_tcp_listen 127.0.0.1:${ctrlPort}`,
      ...(account.caFile === undefined ? [] : [`sip_cafile ${account.caFile}`]),
      ""
    ].join("\n"))
    const outbound = `sip:127.0.0.1:${account.proxyPort};transport=${account.transport}`
    const mediaenc = account.mediaenc === undefined ? "" : `;mediaenc=${account.mediaenc}`
    const params = account.trunk
      ? ";regint=0;answermode=auto"
      : `;auth_pass=${account.password};outbound="${outbound}";answermode=auto;regint=60${mediaenc}`
    writeFileSync(join(dir, "accounts"), `<sip:${account.username}@${account.domain};transport=${account.transport}>${params}\n`)
    const child = killOnExit(spawn("baresip", ["-f", dir], { stdio: ["ignore", "pipe", "pipe"] }))
    let output = ""
    // Registration results come before the control connection can exist: they are read off the console.
    const registrations: Array<AgentEvent> = []
    let line = ""
    child.stdout!.on("data", (chunk: Buffer) => {
      output = (output + chunk).slice(-20_000)
      line += chunk.toString("utf8")
      const lines = line.split("\n")
      line = lines.pop()!
      for (const raw of lines) {
        const text = raw.replace(/\x1b\[[0-9;]*m/g, "")
        const registered = /^(\S+): \{\d+\/\w+\/v\d\} (\d{3}) (.*)$/.exec(text)
        if (registered !== null) {
          registrations.push({ type: registered[2].startsWith("2") ? "REGISTER_OK" : "REGISTER_FAIL", param: `${registered[2]} ${registered[3]}` })
        } else if (/^reg: .*: [0-9]{3} /.test(text)) {
          registrations.push({ type: "REGISTER_FAIL", param: text })
        }
      }
    })
    child.stderr!.on("data", (chunk) => output = (output + chunk).slice(-20_000))
    const control = await eventually("baresip's ctrl_tcp", () => {
      if (child.exitCode !== null) throw new Error(`baresip exited (${child.exitCode}):\n${output}`)
      return new Promise<Socket | undefined>((resolve) => {
        const socket = connect(ctrlPort, "127.0.0.1")
        socket.once("connect", () => resolve(socket))
        socket.once("error", () => resolve(undefined))
      })
    })
    const agent = new Agent(child, control, dir, sipPort, () => output)
    agent.events.push(...registrations.splice(0))
    child.stdout!.on("data", () => agent.events.push(...registrations.splice(0)))
    let buffer = ""
    control.setEncoding("utf8")
    control.on("data", (chunk: string) => {
      buffer += chunk
      for (;;) {
        const colon = buffer.indexOf(":")
        if (colon < 0) return
        const length = Number(buffer.slice(0, colon))
        if (buffer.length < colon + 1 + length + 1) return
        const body = buffer.slice(colon + 1, colon + 1 + length)
        buffer = buffer.slice(colon + 1 + length + 1)
        const message = JSON.parse(body) as AgentEvent & { readonly event?: boolean }
        if (message.event) agent.events.push({ ...message, at: Date.now() })
      }
    })
    control.on("error", () => {})
    return agent
  }

  /** The first event (from `since`) matching, waiting for it. */
  waitFor(what: string, match: (event: AgentEvent) => boolean, since = 0, timeoutMs = 10_000) {
    return eventually(what, () => this.events.slice(since).find(match), timeoutMs).catch((error: Error) => {
      throw new Error(`${error.message}; events: ${JSON.stringify(this.events)}\n${this.output().slice(-3000)}`)
    })
  }

  command(command: string, params = "") {
    const body = JSON.stringify({ command, params, token: String(Date.now()) })
    this.control.write(`${Buffer.byteLength(body)}:${body},`)
  }

  async stop() {
    this.control.destroy()
    await stopChild(this.child, 3000)
    rmSync(this.dir, { recursive: true, force: true })
  }
}

/** The spec's provisioning URI, `sip:<user>:<password>@<host>:<port>;transport=tcp`, taken apart. */
export const parseProvisioningUri = (uri: string) => {
  const match = /^sip:([^:@;]+):([^@;]+)@([^:;@]+):([0-9]+);transport=([a-z]+)$/.exec(uri)
  if (match === null) throw new Error(`not a provisioning URI: ${uri}`)
  return {
    username: decodeURIComponent(match[1]),
    password: decodeURIComponent(match[2]),
    host: match[3],
    port: Number(match[4]),
    transport: match[5]
  }
}

const md5 = (value: string) => createHash("md5").update(value).digest("hex")

/**
 * What a browser softphone (JsSIP, SIP.js) does first: REGISTER over SIP-over-WebSocket (RFC 7118,
 * subprotocol `sip`), answering the digest challenge. Resolves with the final status code; the
 * socket stays open (the registration lives on it) until `close`.
 */
export const registerOverWebSocket = async (
  url: string,
  account: { readonly username: string; readonly password: string; readonly domain: string },
  /** For wss: the CA that signed the server's certificate (checked, with the host name). */
  ca?: string
) => {
  const socket = new WsSocket(url, "sip", ca === undefined ? {} : { ca })
  const host = `${randomUUID().slice(0, 8)}.invalid`
  const replies: Array<string> = []
  /** Calls this device was rung with and answered: the To it was rung as, and the REFER's target. */
  const calls: Array<{ readonly rungAs: string; readonly referTo: string }> = []
  const rungAs = new Map<string, string>()
  socket.addEventListener("message", (event) => {
    const message = String(event.data)
    if (message.startsWith("SIP/2.0 ")) return void replies.push(message)
    const method = message.slice(0, message.indexOf(" "))
    const header = (name: string) => new RegExp(`^${name}: *(.*)$`, "im").exec(message)?.[1]?.trim() ?? ""
    // The controller's BYE stays unanswered: with Kamailio 5.6 a reply to it over the WebSocket
    // dropped the connection (and with it the registration's route for the next call).
    if (method === "ACK" || method === "BYE") return
    const copied = message.split("\r\n").filter((line) => /^(Via|From|Call-ID|CSeq|Record-Route):/i.test(line))
    const to = header("To")
    const toTagged = /;tag=/.test(to) ? to : `${to};tag=${randomUUID().slice(0, 8)}`
    const reply = (status: string, extra: Array<string> = [], body = "") =>
      socket.send([`SIP/2.0 ${status}`, ...copied, `To: ${toTagged}`, ...extra, `Content-Length: ${Buffer.byteLength(body)}`, "", body].join("\r\n"))
    if (method === "INVITE") {
      rungAs.set(header("Call-ID"), to)
      const sdp = ["v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "c=IN IP4 127.0.0.1", "t=0 0", "m=audio 9 RTP/AVP 0", "a=sendrecv", ""].join("\r\n")
      reply("200 OK", [`Contact: <sip:${account.username}@${host};transport=ws>`, "Content-Type: application/sdp"], sdp)
    } else if (method === "REFER") {
      calls.push({ rungAs: rungAs.get(header("Call-ID")) ?? "", referTo: header("Refer-To") })
      reply("202 Accepted", [`Contact: <sip:${account.username}@${host};transport=ws>`])
    } else {
      reply("200 OK")
    }
  })
  await new Promise((resolve, reject) => {
    socket.addEventListener("open", resolve)
    socket.addEventListener("error", () => reject(new Error(`WebSocket ${url} failed`)))
  })
  const callId = randomUUID()
  const tag = randomUUID().slice(0, 8)
  const uri = `sip:${account.domain}`
  const send = async (cseq: number, authorization?: string) => {
    replies.length = 0
    socket.send([
      `REGISTER ${uri} SIP/2.0`,
      `Via: SIP/2.0/WSS ${host};branch=z9hG4bK${randomUUID().slice(0, 12)}`,
      "Max-Forwards: 70",
      `To: <sip:${account.username}@${account.domain}>`,
      `From: <sip:${account.username}@${account.domain}>;tag=${tag}`,
      `Call-ID: ${callId}`,
      `CSeq: ${cseq} REGISTER`,
      `Contact: <sip:${account.username}@${host};transport=ws>;expires=60`,
      ...(authorization === undefined ? [] : [`Authorization: ${authorization}`]),
      "Content-Length: 0",
      "",
      ""
    ].join("\r\n"))
    const reply = await eventually("a final reply over the WebSocket", () => replies.find((r) => /^SIP\/2\.0 [2-6]/.test(r)))
    return { status: Number(reply.slice(8, 11)), reply }
  }
  const challenge = await send(1)
  let status = challenge.status
  if (status === 401) {
    const header = /^WWW-Authenticate: Digest (.*)$/im.exec(challenge.reply)![1]
    const realm = /realm="([^"]*)"/.exec(header)![1]
    const nonce = /nonce="([^"]*)"/.exec(header)![1]
    const response = md5(`${md5(`${account.username}:${realm}:${account.password}`)}:${nonce}:${md5(`REGISTER:${uri}`)}`)
    status = (await send(2, `Digest username="${account.username}", realm="${realm}", nonce="${nonce}", uri="${uri}", response="${response}", algorithm=MD5`)).status
  }
  return { status, calls, close: () => socket.close() }
}
