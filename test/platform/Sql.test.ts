import { assert, describe, it } from "vitest"
import { afterAll, beforeAll } from "vitest"
import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { once } from "node:events"
import { createServer, type Socket } from "node:net"
import { mkdtempSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { coalescingSocket, inSnapshot, type PgAddress, pgAddress } from "../../src/platform/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

/** A loopback server (TCP, or a Unix socket at `path`) that keeps what each connection sent. */
const sink = async (path?: string) => {
  const received: Array<Buffer> = []
  const server = createServer((socket) => socket.on("data", (chunk) => received.push(chunk)))
  if (path === undefined) server.listen(0, "127.0.0.1")
  else server.listen(path)
  await once(server, "listening")
  const address: PgAddress = path === undefined ? { host: "127.0.0.1", port: (server.address() as { port: number }).port } : { path }
  return { address, received, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/** Counts the socket's calls into the stream machinery: one `_writev` for a batch, one `_write` per lone chunk. */
const spy = (socket: Socket) => {
  const calls = { writev: [] as Array<number>, write: 0 }
  const s = socket as unknown as { _writev: (chunks: Array<unknown>, cb: () => void) => void; _write: (...args: Array<unknown>) => void }
  const writev = s._writev.bind(socket)
  const write = s._write.bind(socket)
  s._writev = (chunks, cb) => {
    calls.writev.push(chunks.length)
    writev(chunks, cb)
  }
  s._write = (...args) => {
    calls.write++
    write(...args)
  }
  return calls
}

const until = async (check: () => boolean) => {
  const deadline = Date.now() + 5_000
  while (!check()) {
    if (Date.now() > deadline) throw new Error("timed out")
    await new Promise((resolve) => setTimeout(resolve, 10))
  }
}

describe("the database socket", () => {
  it("reads the server's address from the URL: host and port, or the Unix socket in a host directory", () => {
    assert.deepStrictEqual(pgAddress("postgres://u@db.internal:6543/crm"), { host: "db.internal", port: 6543 })
    assert.deepStrictEqual(pgAddress("postgres://u@[::1]/crm"), { host: "::1", port: 5432 })
    assert.deepStrictEqual(pgAddress("postgres:///crm?host=/var/run/postgresql&user=u"), { path: "/var/run/postgresql/.s.PGSQL.5432" })
    assert.deepStrictEqual(pgAddress("postgres://u@%2Ftmp:5433/crm"), { path: "/tmp/.s.PGSQL.5433" })
    assert.strictEqual(pgAddress("not a url"), null)
  })

  it.each(["tcp", "unix"])("sends a tick's writes in one writev, in order, and a later tick's on their own (%s)", async (kind) => {
    const server = await sink(kind === "tcp" ? undefined : join(mkdtempSync(join(tmpdir(), "crm-sock-")), ".s.PGSQL.5432"))
    const socket = coalescingSocket(server.address)() as Socket
    try {
      await once(socket, "connect")
      const calls = spy(socket)
      socket.write(Buffer.from("one;"))
      socket.write(Buffer.from("two;"))
      socket.write(Buffer.from("three;"))
      await new Promise((resolve) => setImmediate(resolve))
      assert.deepStrictEqual(calls, { writev: [3], write: 0 })
      socket.write(Buffer.from("four;"))
      await new Promise((resolve) => setImmediate(resolve))
      assert.deepStrictEqual(calls, { writev: [3], write: 1 })
      await until(() => Buffer.concat(server.received).length === 19)
      assert.strictEqual(Buffer.concat(server.received).toString(), "one;two;three;four;")
    } finally {
      socket.destroy()
      await server.close()
    }
  })
})

describe("inSnapshot", () => {
  let server: RunningServer
  beforeAll(async () => {
    server = await startServer()
  })
  afterAll(() => server?.close())

  it("reads in one read-only repeatable-read transaction: what commits in between is not seen", async () => {
    const company = await createCompany(server)
    const setting = (name: string) =>
      Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        return (yield* sql<{ value: string }>`SELECT current_setting(${name}) AS value`)[0].value
      }).pipe(Effect.orDie)
    const inside = await server.runInApp(Effect.flatMap(SqlClient.SqlClient, (sql) =>
      inSnapshot(sql, Effect.all([setting("transaction_isolation"), setting("transaction_read_only")]))))
    assert.deepStrictEqual(inside, ["repeatable read", "on"])

    // PGlite serves one connection, which the snapshot holds: a write in between needs a second one.
    if (process.env.DATABASE_URL === undefined) return
    const tagsOf = Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const rows = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM tags WHERE company_id = ${company.id}`
      return rows[0].n
    }).pipe(Effect.orDie)
    const before = await server.runInApp(tagsOf)
    const seen = await server.runInApp(Effect.flatMap(SqlClient.SqlClient, (sql) => inSnapshot(sql, Effect.gen(function*() {
      const first = yield* tagsOf
      const created = yield* Effect.promise(() => request(server, "POST", "/v1/tags", { token: company.token, body: { name: "between" } }))
      assert.strictEqual(created.status, 201)
      return [first, yield* tagsOf]
    }))))
    assert.deepStrictEqual(seen, [before, before])
    assert.strictEqual(await server.runInApp(tagsOf), before + 1)
  })
})
