import { createServer } from "node:http"
import type { AddressInfo } from "node:net"
import { WebSocket, WebSocketServer } from "ws"
import { appKeyOf, type Listening, type Transport, type TransportOptions, type TransportSocket } from "./Transport.ts"

const CLOSE_GRACE_MS = 5_000

/** The pure-JS adapter (`ws`): any runtime with `node:http`, Node of any version and Deno included. */
export const WsTransport: Transport = {
  engine: "ws",
  listen: <D>(options: TransportOptions<D>) =>
    new Promise<Listening<D>>((resolve, reject) => {
      const sockets = new Map<WebSocket, { readonly socket: TransportSocket<D>; seen: number }>()
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
      const wrap = (ws: WebSocket, data: D): TransportSocket<D> => ({
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
      })

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
          publish: (_topic, text, subscribers) => {
            for (const socket of subscribers) socket.send(text)
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
