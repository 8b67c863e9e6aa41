import { Clock, Context, Data, Effect, Layer } from "effect"
import { lookup as dnsLookup, type LookupAddress } from "node:dns"
import * as http from "node:http"
import * as https from "node:https"
import { BlockList, isIP, type LookupFunction } from "node:net"

/**
 * Why an outbound request got no HTTP answer. `refused` is the SSRF guard (the target resolves to an
 * address a server-side request must not reach); the others are the network's.
 */
export class OutboundError extends Data.TaggedError("OutboundError")<{
  readonly reason: "invalid_url" | "refused" | "timeout" | "connection"
  readonly message: string
}> {}

export interface OutboundRequest {
  readonly url: string
  readonly method?: "POST" | "GET" | "PUT"
  readonly headers: Record<string, string>
  readonly body?: string
  readonly timeoutMs: number
  /** Loopback and private targets allowed (tests, closed networks). */
  readonly allowPrivate: boolean
  /** Keep up to this many bytes of the answer's body (automation steps read it); default none. */
  readonly keepBodyBytes?: number
}

export interface OutboundResponse {
  readonly status: number
  readonly durationMs: number
  /** The first `keepBodyBytes` of the body, as UTF-8, when asked for. */
  readonly body?: string
}

// Everything a request from the server must not reach: loopback, "this network", private (RFC 1918, ULA),
// link-local (cloud metadata 169.254.169.254 and fd00:ec2::254 included), CGNAT, multicast, reserved,
// documentation and benchmarking ranges, NAT64/6to4/Teredo prefixes that embed v4 addresses.
const blocked = new BlockList()
for (
  const [net, prefix] of [
    ["0.0.0.0", 8],
    ["10.0.0.0", 8],
    ["100.64.0.0", 10],
    ["127.0.0.0", 8],
    ["169.254.0.0", 16],
    ["172.16.0.0", 12],
    ["192.0.0.0", 24],
    ["192.0.2.0", 24],
    ["192.88.99.0", 24],
    ["192.168.0.0", 16],
    ["198.18.0.0", 15],
    ["198.51.100.0", 24],
    ["203.0.113.0", 24],
    ["224.0.0.0", 3]
  ] as const
) blocked.addSubnet(net, prefix, "ipv4")
for (
  const [net, prefix] of [
    ["::", 127],
    ["64:ff9b::", 96],
    ["64:ff9b:1::", 48],
    ["100::", 64],
    ["2001::", 32],
    ["2001:db8::", 32],
    ["2002::", 16],
    ["fc00::", 7],
    ["fe80::", 10],
    ["fec0::", 10],
    ["ff00::", 8]
  ] as const
) blocked.addSubnet(net, prefix, "ipv6")

const mappedV4 = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i
const mappedV4Hex = /^::ffff:([0-9a-f]{1,4}):([0-9a-f]{1,4})$/i

/** True when a server-side request must not connect to `address` (v4, v6 or v4-mapped v6). */
export const isBlockedAddress = (address: string): boolean => {
  const plain = address.replace(/^\[|\]$/g, "")
  const dotted = mappedV4.exec(plain)
  if (dotted !== null) return blocked.check(dotted[1], "ipv4")
  const hex = mappedV4Hex.exec(plain)
  if (hex !== null) {
    const hi = parseInt(hex[1], 16)
    const lo = parseInt(hex[2], 16)
    return blocked.check(`${hi >> 8}.${hi & 255}.${lo >> 8}.${lo & 255}`, "ipv4")
  }
  const family = isIP(plain)
  if (family === 0) return true
  return blocked.check(plain, family === 6 ? "ipv6" : "ipv4")
}

const refusal = (host: string, address: string) => `Refused: ${host} resolves to ${address}, a private, loopback, link-local or reserved address.`

class Refused extends Error {
  readonly code = "ESSRFREFUSED"
}

/**
 * The resolver the socket connects with: the address checked is the address connected to, so a host
 * whose DNS answer changes between a check and the connection (rebinding) cannot slip through.
 */
const guardedLookup: LookupFunction = (hostname, options, callback) => {
  dnsLookup(hostname, { ...options, all: true }, (error, addresses: Array<LookupAddress>) => {
    if (error) return callback(error, "")
    const bad = addresses.find((a) => isBlockedAddress(a.address))
    if (bad !== undefined) return callback(new Refused(refusal(hostname, bad.address)), "")
    if (addresses.length === 0) return callback(new Error(`${hostname} did not resolve`), "")
    if (options.all) return callback(null, addresses)
    return callback(null, addresses[0].address, addresses[0].family)
  })
}

const agents = {
  guarded: { http: new http.Agent({ keepAlive: true, lookup: guardedLookup } as http.AgentOptions), https: new https.Agent({ keepAlive: true, lookup: guardedLookup } as https.AgentOptions) },
  open: { http: new http.Agent({ keepAlive: true }), https: new https.Agent({ keepAlive: true }) }
}

/** How much of an answer's body is read before the connection is dropped: only the status matters. */
const maxBodyBytes = 64 * 1024

/**
 * Server-side HTTP to user-given URLs (webhooks, automation requests, remote pictures): resolves the
 * host at connect time and refuses private and metadata addresses, follows no redirect (a 3xx is just
 * the answer), and bounds each request by `timeoutMs` from start to the end of the answer.
 */
export class OutboundHttp extends Context.Service<OutboundHttp, {
  request(request: OutboundRequest): Effect.Effect<OutboundResponse, OutboundError>
}>()("crm/platform/OutboundHttp") {
  static readonly make = OutboundHttp.of({
    request: (req) =>
      Effect.gen(function*() {
        const url = URL.canParse(req.url) ? new URL(req.url) : null
        if (url === null || (url.protocol !== "http:" && url.protocol !== "https:")) {
          return yield* new OutboundError({ reason: "invalid_url", message: "The URL is not a valid http(s) URL." })
        }
        const host = url.hostname.replace(/^\[|\]$/g, "")
        // IP literals never reach the resolver, so they are checked here.
        if (!req.allowPrivate && isIP(host) !== 0 && isBlockedAddress(host)) {
          return yield* new OutboundError({ reason: "refused", message: refusal(host, host) })
        }
        const started = yield* Clock.currentTimeMillis
        const keep = req.keepBodyBytes ?? 0
        const kept: Array<Buffer> = []
        let keptBytes = 0
        const status = yield* Effect.callback<number, OutboundError>((resume) => {
          const pool = req.allowPrivate ? agents.open : agents.guarded
          const client = url.protocol === "https:" ? https : http
          const outgoing = client.request(url, {
            method: req.method ?? "POST",
            headers: req.body === undefined ? req.headers : { ...req.headers, "content-length": String(Buffer.byteLength(req.body)) },
            agent: url.protocol === "https:" ? pool.https : pool.http
          }, (response) => {
            let read = 0
            response.on("data", (chunk: Buffer) => {
              if (keptBytes < keep) {
                const part = chunk.subarray(0, keep - keptBytes)
                kept.push(part)
                keptBytes += part.length
              }
              read += chunk.length
              if (read > maxBodyBytes) {
                response.destroy()
                resume(Effect.succeed(response.statusCode ?? 0))
              }
            })
            response.on("end", () => resume(Effect.succeed(response.statusCode ?? 0)))
            response.on("error", () => resume(Effect.succeed(response.statusCode ?? 0)))
          })
          outgoing.on("error", (error: NodeJS.ErrnoException) => {
            const refused = error instanceof Refused || error.code === "ESSRFREFUSED"
            resume(Effect.fail(new OutboundError({ reason: refused ? "refused" : "connection", message: refused ? error.message : `Connection failed: ${error.code ?? error.message}` })))
          })
          outgoing.end(req.body)
          return Effect.sync(() => outgoing.destroy())
        }).pipe(
          Effect.timeoutOrElse({
            duration: req.timeoutMs,
            orElse: () => Effect.fail(new OutboundError({ reason: "timeout", message: `Timed out after ${req.timeoutMs} ms.` }))
          })
        )
        const ended = yield* Clock.currentTimeMillis
        return keep > 0
          ? { status, durationMs: ended - started, body: Buffer.concat(kept).toString("utf8") }
          : { status, durationMs: ended - started }
      })
  })

  static readonly layer = Layer.succeed(OutboundHttp, OutboundHttp.make)
}
