import type { TemplatedApp, us_listen_socket, WebSocket, WebSocketBehavior } from "@btc-vision/uwebsockets.js"
import { createRequire } from "node:module"
import type { Listening, Transport, TransportOptions, TransportSocket } from "./Transport.ts"

type Uws = typeof import("@btc-vision/uwebsockets.js")

/**
 * The native addon for this Node ABI, or why it cannot load. The package has no JS fallback: its entry
 * point requires `uws_<platform>_<arch>_<abi>.node` and throws when that binary is missing or cannot be
 * linked (its builds for Linux need glibc 2.38, so Debian 12's 2.36 refuses them). The reason kept is
 * the loader's own line, e.g. "version `GLIBC_2.38' not found".
 */
export const loadNativeUws = (): { readonly uws: Uws } | { readonly reason: string } => {
  if ("Deno" in globalThis || "Bun" in globalThis) return { reason: "uWebSockets.js is a V8 addon for Node only" }
  try {
    return { uws: createRequire(import.meta.url)("@btc-vision/uwebsockets.js") as Uws }
  } catch (error) {
    const lines = (error instanceof Error ? error.message : String(error)).split("\n").filter((line) => line.trim() !== "")
    const cause = lines[lines.length - 1] ?? "unknown error"
    return { reason: `no native uWebSockets.js for Node ${process.version} (ABI ${process.versions.modules}, ${process.platform}-${process.arch}): ${cause}` }
  }
}

interface Slot<D> {
  socket: TransportSocket<D> | undefined
}

export const makeUwsTransport = (uWS: Uws): Transport => ({
  engine: "uws",
  listen: <D>(options: TransportOptions<D>) =>
    new Promise<Listening<D>>((resolve, reject) => {
      const wrap = (ws: WebSocket<Slot<D> & { readonly data: D }>): TransportSocket<D> => {
        const slot = ws.getUserData()
        if (slot.socket !== undefined) return slot.socket
        const socket: TransportSocket<D> = {
          data: slot.data,
          send: (text) => void ws.send(text, false),
          end: (code, reason) => ws.end(code, reason),
          bufferedAmount: () => ws.getBufferedAmount(),
          subscribe: (topic) => void ws.subscribe(topic),
          unsubscribe: (topic) => void ws.unsubscribe(topic)
        }
        slot.socket = socket
        return socket
      }
      const behavior: WebSocketBehavior<Slot<D> & { readonly data: D }> = {
        compression: uWS.DISABLED,
        maxPayloadLength: options.maxPayloadBytes,
        maxBackpressure: options.maxBackpressureBytes,
        closeOnBackpressureLimit: true,
        // uWS wants a multiple of 4.
        idleTimeout: Math.ceil(options.idleTimeoutSeconds / 4) * 4,
        sendPingsAutomatically: true,
        upgrade: (res, req, context) => {
          const data = options.accept(req.getParameter(0) ?? "")
          if (data === undefined) {
            res.writeStatus("503 Service Unavailable").end()
            return
          }
          res.upgrade<Slot<D> & { readonly data: D }>(
            { data, socket: undefined },
            req.getHeader("sec-websocket-key"),
            req.getHeader("sec-websocket-protocol"),
            req.getHeader("sec-websocket-extensions"),
            context
          )
        },
        open: (ws) => options.open(wrap(ws)),
        message: (ws, message, isBinary) => {
          if (!isBinary) options.message(wrap(ws), Buffer.from(message).toString("utf8"))
        },
        close: (ws) => options.close(wrap(ws))
      }
      const app: TemplatedApp = uWS.App()
      for (const root of options.roots) app.ws(`${root}/app/:key`, behavior)
      app.any("/*", (res) => {
        res.writeStatus("404 Not Found").end()
      })
      const onListen = (token: us_listen_socket | false) => {
        if (token === false) return reject(new Error(`could not listen on ${options.host ?? "*"}:${options.port}`))
        resolve({
          port: uWS.us_socket_local_port(token),
          publish: (topic, text) => void app.publish(topic, text, false),
          close: () => uWS.us_listen_socket_close(token)
        })
      }
      if (options.host === undefined) app.listen(options.port, onListen)
      else app.listen(options.host, options.port, onListen)
    })
})
