import * as net from "node:net"

/**
 * Many WebSocket clients in one process, as cheap per frame as JavaScript allows, so that the process
 * under test rather than the load generator is what a fan-out bench measures: raw TCP, the RFC 6455
 * handshake, unmasked server frames parsed by hand, and an event recognised by a byte search rather
 * than JSON. Each client counts the frames that carry `marker`; the n-th such frame on every socket is
 * event n, and the time the last socket receives it is recorded.
 */
export interface ClientPool {
  readonly size: number
  /** Resolves once every socket has received event `n` (0-based) or after `timeoutMs`; answers the time of the last arrival (NaN on timeout). */
  readonly lastArrival: (n: number, timeoutMs: number) => Promise<number>
  /** Deliveries of event `n` so far. */
  readonly arrivals: (n: number) => number
  /** The first frame that carried the marker, as text (what the fan-out sent). */
  readonly sample: () => string | undefined
  readonly close: () => void
}

export interface PoolOptions {
  readonly port: number
  readonly path: string
  readonly sockets: number
  /** Handshakes in flight at once (the server's accept backlog is finite). */
  readonly opening?: number
  readonly marker: string
  readonly maxEvents: number
  /**
   * Called with each socket's first text frame (Pusher's `connection_established`); answers the text
   * frame to send back (a subscribe) or undefined. `ready` is then awaited per socket.
   */
  readonly greet?: (first: string) => Promise<string | undefined>
  /** A text frame that marks the socket as ready (e.g. `subscription_succeeded`); without it, the handshake does. */
  readonly readyMarker?: string
  /** A text frame that means the socket will never be ready (e.g. `subscription_error`): the pool fails with it. */
  readonly failMarker?: string
}

const handshake = (path: string, port: number) =>
  `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n` +
  `Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n`

/** A client's text frame: masked, as the protocol requires, with a zero key (the payload goes as it is). */
const textFrame = (text: string) => {
  const payload = Buffer.from(text)
  const header = payload.length < 126 ? Buffer.from([0x81, 0x80 | payload.length, 0, 0, 0, 0]) : Buffer.from([0x81, 0x80 | 126, payload.length >> 8, payload.length & 0xff, 0, 0, 0, 0])
  return Buffer.concat([header, payload])
}

export const openPool = async (options: PoolOptions): Promise<ClientPool> => {
  const marker = Buffer.from(options.marker)
  const readyMarker = options.readyMarker === undefined ? undefined : Buffer.from(options.readyMarker)
  const failMarker = options.failMarker === undefined ? undefined : Buffer.from(options.failMarker)
  const counts = new Int32Array(options.maxEvents)
  const lastAt = new Float64Array(options.maxEvents)
  const waiters = new Map<number, () => void>()
  const sockets: Array<net.Socket> = []
  const opening = options.opening ?? 200
  let sample: string | undefined

  const open = (onReady: () => void, onFail: (error: Error) => void) => {
    const socket = net.connect({ port: options.port, host: "127.0.0.1", noDelay: true })
    sockets.push(socket)
    let upgraded = false
    let greeted = options.greet === undefined
    let ready = false
    let seen = 0
    let pending: Buffer = Buffer.alloc(0)
    const becomeReady = () => {
      if (ready) return
      ready = true
      onReady()
    }
    const onText = (payload: Buffer) => {
      if (!greeted) {
        greeted = true
        options.greet!(payload.toString()).then((reply) => {
          if (reply !== undefined) socket.write(textFrame(reply))
          if (readyMarker === undefined) becomeReady()
        }, onFail)
        return
      }
      if (!ready) {
        if (failMarker !== undefined && payload.indexOf(failMarker) >= 0) onFail(new Error(`socket refused: ${payload.toString()}`))
        if (readyMarker !== undefined && payload.indexOf(readyMarker) >= 0) becomeReady()
        return
      }
      if (payload.indexOf(marker) < 0 || seen >= counts.length) return
      const n = seen++
      sample ??= payload.toString()
      if (++counts[n] === options.sockets) {
        lastAt[n] = performance.now()
        waiters.get(n)?.()
      }
    }
    socket.on("error", (error) => {
      if (!ready) onFail(error)
    })
    socket.on("connect", () => socket.write(handshake(options.path, options.port)))
    socket.on("data", (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      if (!upgraded) {
        const end = pending.indexOf("\r\n\r\n")
        if (end < 0) return
        if (!pending.subarray(0, 12).toString().includes("101")) return onFail(new Error(`handshake refused: ${pending.subarray(0, end).toString()}`))
        upgraded = true
        pending = pending.subarray(end + 4)
        if (greeted && readyMarker === undefined) becomeReady()
      }
      let at = 0
      while (pending.length - at >= 2) {
        const opcode = pending[at] & 0x0f
        let length = pending[at + 1] & 0x7f
        let offset = 2
        if (length === 126) {
          if (pending.length - at < 4) break
          length = pending.readUInt16BE(at + 2)
          offset = 4
        } else if (length === 127) {
          if (pending.length - at < 10) break
          length = Number(pending.readBigUInt64BE(at + 2))
          offset = 10
        }
        if (pending.length - at < offset + length) break
        if (opcode === 1) onText(pending.subarray(at + offset, at + offset + length))
        at += offset + length
      }
      pending = at === pending.length ? Buffer.alloc(0) : pending.subarray(at)
    })
  }

  // At most `opening` handshakes at a time.
  await new Promise<void>((resolve, reject) => {
    let started = 0
    let done = 0
    const next = () => {
      if (done === options.sockets) return resolve()
      while (started < options.sockets && started - done < opening) {
        started++
        open(() => {
          done++
          next()
        }, reject)
      }
    }
    next()
  })

  return {
    size: options.sockets,
    arrivals: (n) => counts[n],
    sample: () => sample,
    lastArrival: (n, timeoutMs) =>
      counts[n] === options.sockets ? Promise.resolve(lastAt[n]) : new Promise<number>((resolve) => {
        const timer = setTimeout(() => {
          waiters.delete(n)
          resolve(Number.NaN)
        }, timeoutMs)
        waiters.set(n, () => {
          clearTimeout(timer)
          waiters.delete(n)
          resolve(lastAt[n])
        })
      }),
    close: () => {
      for (const socket of sockets) socket.destroy()
    }
  }
}
