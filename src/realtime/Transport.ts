/**
 * The WebSocket transport under the Pusher protocol: the gateway (`Gateway.ts`) holds the protocol,
 * channels and limits; an adapter only accepts sockets on `<root>/app/:key`, moves text frames and
 * fans a frame out to a channel's sockets.
 */
export type TransportEngine = "uws" | "ws"

export interface TransportSocket<D> {
  readonly data: D
  send(text: string): void
  /** A close frame with a Pusher code; the socket's `close` handler runs once it is gone. */
  end(code: number, reason: string): void
  /** Bytes queued for this socket and not yet written to the kernel. */
  bufferedAmount(): number
  subscribe(topic: string): void
  unsubscribe(topic: string): void
}

export interface TransportOptions<D> {
  readonly host?: string
  readonly port: number
  /** Each root serves `<root>/app/:key`; everything else is 404. */
  readonly roots: ReadonlyArray<string>
  readonly maxPayloadBytes: number
  /** Past this many queued bytes a socket is closed by the transport itself (the hard stop). */
  readonly maxBackpressureBytes: number
  /** A socket with no inbound frame (or pong) for this long is closed; pings are sent before that. */
  readonly idleTimeoutSeconds: number
  /** The data of a new socket for the `:key` it asked for, or undefined to answer the upgrade with 503. */
  accept(appKey: string): D | undefined
  open(socket: TransportSocket<D>): void
  message(socket: TransportSocket<D>, text: string): void
  close(socket: TransportSocket<D>): void
}

export interface Listening<D> {
  readonly port: number
  /** Sends `text` to every socket subscribed to `topic`. */
  publish(topic: string, text: string, subscribers: ReadonlySet<TransportSocket<D>>): void
  /** Stops accepting; open sockets stay until the gateway ends them. */
  close(): void
}

export interface Transport {
  readonly engine: TransportEngine
  listen<D>(options: TransportOptions<D>): Promise<Listening<D>>
}

/** `/v1/realtime/app/crm-key?protocol=7` → `crm-key` when the path is one of the roots. */
export const appKeyOf = (roots: ReadonlyArray<string>, url: string): string | undefined => {
  const path = url.split("?", 1)[0]
  for (const root of roots) {
    const prefix = `${root}/app/`
    if (!path.startsWith(prefix)) continue
    const key = path.slice(prefix.length)
    if (key.length > 0 && !key.includes("/")) return decodeURIComponent(key)
  }
  return undefined
}
