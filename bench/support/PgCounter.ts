import * as net from "node:net"

/**
 * A TCP proxy in front of PostgreSQL that counts what the app executes: every simple query (`Q`)
 * and every `Execute` of the extended protocol, by statement text (named prepared statements are
 * resolved from their `Parse`), plus the `Sync`s (one per pipelined cycle). Point the app's
 * DATABASE_URL at `port`; `snapshot()` gives the counts so far, to diff around a measured window.
 */
export interface PgCounts {
  readonly executes: number
  readonly syncs: number
  /** `COMMIT`s, plus writing statements run outside a transaction block (each its own commit). */
  readonly commits: number
  readonly byText: ReadonlyMap<string, number>
}

export const pgCounter = async (upstreamHost: string, upstreamPort: number) => {
  const byText = new Map<string, number>()
  let executes = 0
  let syncs = 0
  let commits = 0
  const writes = /\b(INSERT|UPDATE|DELETE|pg_notify|number_events)\b/i
  const count = (session: { inTransaction: boolean }, text: string) => {
    executes++
    if (/^\s*(BEGIN|START)/i.test(text)) session.inTransaction = true
    else if (/^\s*(COMMIT|ROLLBACK)/i.test(text)) {
      session.inTransaction = false
      if (/^\s*COMMIT/i.test(text)) commits++
    } else if (!session.inTransaction && writes.test(text)) commits++
    const key = text.replace(/\s+/g, " ").trim()
    byText.set(key, (byText.get(key) ?? 0) + 1)
  }
  const cstring = (buf: Buffer, at: number) => {
    const end = buf.indexOf(0, at)
    return { text: buf.toString("utf8", at, end), next: end + 1 }
  }

  const server = net.createServer((client) => {
    const upstream = net.connect({ host: upstreamHost, port: upstreamPort, noDelay: true })
    client.setNoDelay(true)
    const statements = new Map<string, string>()
    const session = { inTransaction: false }
    let portalText = ""
    let pending: Buffer = Buffer.alloc(0)
    // The startup packet (and an SSL request before it) has no type byte.
    let untyped = true
    const scan = (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk])
      let at = 0
      while (true) {
        if (untyped) {
          if (pending.length - at < 8) break
          const len = pending.readInt32BE(at)
          if (pending.length - at < len) break
          const code = pending.readInt32BE(at + 4)
          untyped = code === 80877103 || code === 80877104
          at += len
          continue
        }
        if (pending.length - at < 5) break
        const type = pending[at]
        const len = pending.readInt32BE(at + 1)
        if (pending.length - at < len + 1) break
        const body = pending.subarray(at + 5, at + 1 + len)
        if (type === 0x51 /* Q */) count(session, cstring(body, 0).text)
        else if (type === 0x50 /* P */) {
          const name = cstring(body, 0)
          statements.set(name.text, cstring(body, name.next).text)
        } else if (type === 0x42 /* B */) {
          const portal = cstring(body, 0)
          portalText = statements.get(cstring(body, portal.next).text) ?? "?"
        } else if (type === 0x45 /* E */) count(session, portalText)
        else if (type === 0x53 /* S */) syncs++
        at += len + 1
      }
      pending = pending.subarray(at)
    }
    client.on("data", (chunk) => {
      scan(chunk)
      upstream.write(chunk)
    })
    upstream.pipe(client)
    const close = () => {
      client.destroy()
      upstream.destroy()
    }
    client.on("error", close).on("close", close)
    upstream.on("error", close).on("close", close)
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const port = (server.address() as net.AddressInfo).port
  return {
    port,
    snapshot: (): PgCounts => ({ executes, syncs, commits, byText: new Map(byText) }),
    close: () => new Promise<void>((resolve) => server.close(() => resolve()))
  }
}

/** What ran between two snapshots: totals and the statements by count, most frequent first. */
export const countsBetween = (before: PgCounts, after: PgCounts) => ({
  executes: after.executes - before.executes,
  syncs: after.syncs - before.syncs,
  commits: after.commits - before.commits,
  byText: [...after.byText]
    .map(([text, n]) => [text, n - (before.byText.get(text) ?? 0)] as const)
    .filter(([, n]) => n > 0)
    .sort((a, b) => b[1] - a[1])
})
