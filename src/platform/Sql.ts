import { PGlite } from "@electric-sql/pglite"
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { PgClient, PgTypes } from "@effect/sql-pg"
import { Effect, Layer, Option, Redacted, Result } from "effect"
import { SqlClient } from "effect/sql"
import { chmodSync, mkdirSync, mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { connect } from "node:net"
import { AppConfig } from "./Config.ts"

// Ids and counts stay far below 2^53, so int8 is read as a JS number instead of
// bigint; every row schema can then use plain numbers.
const types = PgTypes.makeRegistry()
types.register<number | bigint>(PgTypes.OID.int8, {
  encode: (value) => {
    const buf = new Uint8Array(8)
    new DataView(buf.buffer).setBigInt64(0, BigInt(value))
    return Result.succeed(buf)
  },
  decode: (bytes) => Result.succeed(Number(new DataView(bytes.buffer, bytes.byteOffset, 8).getBigInt64(0)))
})

/**
 * Where the embedded database's socket goes: a directory only this user may enter, inside the data
 * directory (`<DATA_DIR>/run`), or a private temporary one when there is none (`memory://`) or its path
 * would pass the 107 bytes a Unix socket's path may have. No TCP port: no other local user reaches it.
 */
const socketDirectory = (dataDir: string, memory: boolean) => {
  const inData = `${dataDir}/run`
  if (!memory && Buffer.byteLength(`${inData}/.s.PGSQL.5432`) <= 107) {
    mkdirSync(inData, { recursive: true, mode: 0o700 })
    chmodSync(inData, 0o700)
    return { dir: inData, temporary: false }
  }
  return { dir: mkdtempSync(join(tmpdir(), "crm-pg-")), temporary: true }
}

/**
 * PostgreSQL zeroes its shared buffers when it starts, so inside PGlite's WebAssembly memory they are
 * resident from the first second: the default 128 MB was a fifth of an idle server's memory. The embedded
 * database serves one process over one connection; 16 MB holds its hot pages.
 */
const EMBEDDED_SETTINGS = ["shared_buffers = 16MB"]

const embedded = (dataDir: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const memory = dataDir === "memory://"
    const dir = memory ? dataDir : `${dataDir}/pg`
    if (!memory) mkdirSync(dir, { recursive: true, mode: 0o700 })
    const socket = socketDirectory(dataDir, memory)
    const path = `${socket.dir}/.s.PGSQL.5432`
    yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const db = await PGlite.create({ dataDir: dir, extensions: { pg_trgm }, postgresqlconf: EMBEDDED_SETTINGS })
        // A socket left by a process that was killed would refuse the bind.
        rmSync(path, { force: true })
        const server = new PGLiteSocketServer({ db, path })
        await server.start()
        chmodSync(path, 0o600)
        return { db, server }
      }),
      ({ db, server }) => Effect.promise(async () => {
        await server.stop()
        await db.close()
        rmSync(socket.temporary ? socket.dir : path, { recursive: true, force: true })
      })
    )
    return PgClient.layer({
      database: "postgres",
      username: "postgres",
      maxConnections: 1,
      types,
      stream: coalescingSocket({ path })
    })
  }))

/**
 * Ids as one PostgreSQL array literal, bound as a single parameter (`= ANY(${idArray(ids)}::bigint[])`),
 * so that a statement's text does not vary with the number of ids.
 */
export const idArray = (ids: ReadonlyArray<number>) => `{${ids.join(",")}}`

/** Where a PostgreSQL server listens: a TCP address, or a Unix socket's path. */
export type PgAddress = { readonly host: string; readonly port: number } | { readonly path: string }

/**
 * A connection whose writes of one tick leave in one: the driver writes each statement as it is
 * issued, and a multiplexed connection carries many fibers' statements, so under load several land in
 * the same tick. Each write is a system call in which, on loopback, the kernel also delivers the bytes
 * to PostgreSQL; corked until the tick ends they go out in one `writev`.
 */
export const coalescingSocket = (address: PgAddress) => () => {
  const socket = "path" in address
    ? connect({ path: address.path })
    : connect({ host: address.host, port: address.port, noDelay: true, keepAlive: true, keepAliveInitialDelay: 60_000 })
  const write = socket.write.bind(socket) as (...args: Array<any>) => boolean
  let corked = false
  const flush = () => {
    corked = false
    socket.uncork()
  }
  socket.write = ((...args: Array<any>) => {
    if (!corked) {
      corked = true
      socket.cork()
      process.nextTick(flush)
    }
    return write(...args)
  }) as typeof socket.write
  return socket
}

/**
 * The server's address in a `postgres://` URL: its host and port, or with a directory as the host
 * (`postgres://user@/db?host=/var/run/postgresql`) the Unix socket in it. Null when it cannot be read
 * (left to the driver, which reports it).
 */
export const pgAddress = (url: string): PgAddress | null => {
  try {
    const parsed = new URL(url)
    const host = parsed.searchParams.get("host") ?? (decodeURIComponent(parsed.hostname) || "localhost")
    const port = parsed.searchParams.get("port") ?? (parsed.port === "" ? "5432" : parsed.port)
    if (host.startsWith("/")) return { path: `${host}/.s.PGSQL.${port}` }
    return { host: host.replace(/^\[|\]$/g, ""), port: Number(port) }
  } catch {
    return null
  }
}

export const SqlLayer = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  return Option.match(config.databaseUrl, {
    onNone: () => embedded(config.dataDir),
    onSome: (url) => {
      const address = pgAddress(Redacted.value(url))
      return PgClient.layer({
        url,
        maxConnections: 10,
        multiplex: true,
        types,
        applicationName: "crm",
        ...(address === null ? {} : { stream: coalescingSocket(address) })
      })
    }
  })
}))

/**
 * Runs reads in one snapshot (a `REPEATABLE READ, READ ONLY` transaction), so that an answer built from
 * several statements shows one state: read one by one, a broadcast's row could be read before a run
 * finished and its runs after, showing every run done and the broadcast still active. It begins the
 * transaction itself, so it must not be called inside one.
 */
export const inSnapshot = <A, E, R>(sql: SqlClient.SqlClient, effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
  Effect.andThen(sql`SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY`, effect).pipe(
    sql.withTransaction,
    Effect.catchTag("SqlError", (e) => Effect.die(e))
  ) as Effect.Effect<A, E, R>

/** A user's text as a literal inside a LIKE pattern (the default escape character is the backslash). */
export const likeEscape = (value: string) => value.replace(/[\\%_]/g, (c) => `\\${c}`)
