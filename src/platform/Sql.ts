import { PGlite } from "@electric-sql/pglite"
import { pg_trgm } from "@electric-sql/pglite/contrib/pg_trgm"
import { PGLiteSocketServer } from "@electric-sql/pglite-socket"
import { PgClient, PgTypes } from "@effect/sql-pg"
import { Effect, Layer, Option, Result } from "effect"
import { mkdirSync } from "node:fs"
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

const embedded = (dataDir: string) =>
  Layer.unwrap(Effect.gen(function*() {
    const memory = dataDir === "memory://"
    const dir = memory ? dataDir : `${dataDir}/pg`
    if (!memory) mkdirSync(dir, { recursive: true })
    const server = yield* Effect.acquireRelease(
      Effect.promise(async () => {
        const db = await PGlite.create({ dataDir: dir, extensions: { pg_trgm } })
        const server = new PGLiteSocketServer({ db, host: "127.0.0.1", port: 0 })
        await server.start()
        return { db, server }
      }),
      ({ db, server }) => Effect.promise(async () => {
        await server.stop()
        await db.close()
      })
    )
    const port = Number(server.server.getServerConn().split(":").pop())
    return PgClient.layer({
      host: "127.0.0.1",
      port,
      database: "postgres",
      username: "postgres",
      maxConnections: 1,
      types
    })
  }))

export const SqlLayer = Layer.unwrap(Effect.gen(function*() {
  const config = yield* AppConfig
  return Option.match(config.databaseUrl, {
    onNone: () => embedded(config.dataDir),
    onSome: (url) => PgClient.layer({ url, maxConnections: 10, multiplex: true, types, applicationName: "crm" })
  })
}))
