import { createServer } from "node:http"
import type { AddressInfo, Socket } from "node:net"
import { WebSocket, WebSocketServer } from "ws"
import { appKeyOf, type Listening, type Transport, type TransportOptions, type TransportSocket } from "./Transport.ts"

const CLOSE_GRACE_MS = 5_000

/** An unmasked, final text frame (RFC 6455 5.2): what a server sends, built once for every socket of a publish. */
export const textFrame = (text: string): Buffer => {
  const payload = Buffer.from(text)
  const length = payload.length
  const header = length < 126
    ? Buffer.from([0x81, length])
    : length < 65_536
    ? Buffer.from([0x81, 126, length >> 8, length & 0xff])
    : (() => {
      const h = Buffer.alloc(10)
      h[0] = 0x81
      h[1] = 127
      h.writeBigUInt64BE(BigInt(length), 2)
      return h
    })()
  return Buffer.concat([header, payload])
}

/**
 * The socket under a `ws` connection. Without permessage-deflate (off here) and without Blob data
 * (never sent here) `ws` writes every frame synchronously and queues nothing of its own, so a frame
 * written here directly keeps its place among the frames `ws.send` writes.
 */
const rawSocket = (ws: WebSocket): Socket | undefined => (ws as unknown as { readonly _socket?: Socket })._socket

/** The pure-JS adapter (`ws`): any runtime with `node:http`, Node of any version and Deno included. */
export const WsTransport: Transport = {
  engine: "ws",
  listen: <D>(options: TransportOptions<D>) =>
    new Promise<Listening<D>>((resolve, reject) => {
      const sockets = new Map<WebSocket, { readonly socket: TransportSocket<D>; seen: number }>()
      const connections = new WeakMap<TransportSocket<D>, WebSocket>()
      const server = createServer((_req, res) => {
        res.writeHead(404).end()
      })
      const wss = new WebSocketServer({ noServer: true, maxPayload: options.maxPayloadBytes, perMessageDeflate: false })
      const idleMs = options.idleTimeoutSeconds * 1000

      // uWS ends a socket at once and runs its close handler; `ws` waits for the peer's close frame,
      // which a stalled peer never sends. The gateway sees the socket gone when it ends it, and a peer
      // that has not answered within the grace period is dropped.
      const gone = (ws: WebSocket) => {
        const entry = sockets.get(ws)
        if (entry === undefined) return
        sockets.delete(ws)
        options.close(entry.socket)
      }
      const wrap = (ws: WebSocket, data: D): TransportSocket<D> => {
        const socket: TransportSocket<D> = {
          data,
          send: (text) => {
            if (ws.readyState !== WebSocket.OPEN) return
            // The hard stop uWS applies with closeOnBackpressureLimit.
            if (ws.bufferedAmount > options.maxBackpressureBytes) return void ws.terminate()
            ws.send(text)
          },
          end: (code, reason) => {
            ws.close(code, reason)
            gone(ws)
            setTimeout(() => ws.terminate(), CLOSE_GRACE_MS).unref()
          },
          bufferedAmount: () => ws.bufferedAmount,
          subscribe: () => {},
          unsubscribe: () => {}
        }
        connections.set(socket, ws)
        return socket
      }

      server.on("upgrade", (req, tcp, head) => {
        const key = appKeyOf(options.roots, req.url ?? "/")
        const refuse = (status: string) => {
          tcp.end(`HTTP/1.1 ${status}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`)
        }
        if (key === undefined) return refuse("404 Not Found")
        const data = options.accept(key)
        if (data === undefined) return refuse("503 Service Unavailable")
        wss.handleUpgrade(req, tcp, head, (ws) => {
          const entry = { socket: wrap(ws, data), seen: Date.now() }
          sockets.set(ws, entry)
          const touch = () => void (entry.seen = Date.now())
          ws.on("message", (message, isBinary) => {
            touch()
            if (!isBinary) options.message(entry.socket, message.toString())
          })
          ws.on("pong", touch)
          ws.on("error", () => ws.terminate())
          ws.on("close", () => gone(ws))
          options.open(entry.socket)
        })
      })

      // Same idleness rule as uWS: a ping when a socket has been quiet for most of the window, closed after it.
      const sweep = setInterval(() => {
        const now = Date.now()
        for (const [ws, entry] of sockets) {
          const quiet = now - entry.seen
          if (quiet > idleMs) ws.terminate()
          else if (quiet > idleMs - 16_000 && ws.readyState === WebSocket.OPEN) ws.ping()
        }
      }, 4_000)
      sweep.unref()

      server.once("error", reject)
      server.listen(options.port, options.host, () => {
        server.off("error", reject)
        resolve({
          port: (server.address() as AddressInfo).port,
          // The frame is encoded once per publish and the same bytes written to every socket: per socket
          // that is one write, where `ws.send` would encode the text, build a header and cork two writes.
          publish: (_topic, text, subscribers) => {
            const frame = textFrame(text)
            for (const socket of subscribers) {
              const ws = connections.get(socket)
              if (ws === undefined || ws.readyState !== WebSocket.OPEN) continue
              if (ws.bufferedAmount > options.maxBackpressureBytes) {
                ws.terminate()
                continue
              }
              const tcp = rawSocket(ws)
              if (tcp === undefined) ws.send(text)
              else tcp.write(frame)
            }
          },
          close: () => {
            clearInterval(sweep)
            server.close()
            wss.close()
          }
        })
      })
    })
}
