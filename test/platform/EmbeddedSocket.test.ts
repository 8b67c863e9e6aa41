import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import { existsSync, mkdtempSync, readdirSync, readFileSync, readlinkSync, rmSync, statSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { AppConfig } from "../../src/platform/Config.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"

/** The TCP ports this process listens on (IPv4 and IPv6): /proc's listeners whose socket is one of its descriptors. */
const listeningPorts = () => {
  const mine = new Set<string>()
  for (const fd of readdirSync("/proc/self/fd")) {
    try {
      const target = readlinkSync(`/proc/self/fd/${fd}`)
      if (target.startsWith("socket:[")) mine.add(target.slice(8, -1))
    } catch {
      // closed between the listing and the read
    }
  }
  const ports = new Set<number>()
  for (const file of ["/proc/net/tcp", "/proc/net/tcp6"]) {
    if (!existsSync(file)) continue
    for (const line of readFileSync(file, "utf8").split("\n").slice(1)) {
      const fields = line.trim().split(/\s+/)
      if (fields[3] === "0A" && mine.has(fields[9])) ports.add(parseInt(fields[1].split(":")[1], 16))
    }
  }
  return ports
}

describe("embedded database socket", () => {
  it.effect("is a Unix socket in <DATA_DIR>/run (0700 directory, 0600 socket), no TCP port, gone after shutdown", () =>
    Effect.gen(function*() {
      const dataDir = mkdtempSync(join(tmpdir(), "crm-embedded-"))
      const before = listeningPorts()
      const layer = SqlLayer.pipe(Layer.provide(AppConfig.layerWith({ dataDir, databaseUrl: Option.none() })))
      const during = yield* Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ readonly n: number }>`SELECT 1 AS n`
        assert.strictEqual(rows[0].n, 1)
        const socket = statSync(join(dataDir, "run/.s.PGSQL.5432"))
        assert.isTrue(socket.isSocket())
        assert.strictEqual(socket.mode & 0o777, 0o600)
        assert.strictEqual(statSync(join(dataDir, "run")).mode & 0o777, 0o700)
        return listeningPorts()
      }).pipe(Effect.provide(layer))
      const opened = [...during].filter((port) => !before.has(port))
      assert.deepStrictEqual(opened, [], "the embedded database opened no TCP listener")
      assert.isFalse(existsSync(join(dataDir, "run/.s.PGSQL.5432")), "the socket is removed at shutdown")
      rmSync(dataDir, { recursive: true, force: true })
    }), 180_000)
})
