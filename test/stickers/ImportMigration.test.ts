import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option, Schema } from "effect"
import { SqlClient } from "effect/sql"
import { migrations } from "../../migrations/index.ts"
import { AppConfig } from "../../src/platform/Config.ts"
import { migrate } from "../../src/platform/Migrations.ts"
import { SqlLayer } from "../../src/platform/Sql.ts"
import { StickerImportJob } from "../../src/stickers/Imports.ts"

// Its own in-memory PGlite: the database is taken to just before 0026, filled, then migrated.
const FreshDatabase = SqlLayer.pipe(Layer.provide(AppConfig.layerWith({ dataDir: "memory://", databaseUrl: Option.none() })))

interface MovedJob {
  readonly kind: string
  readonly status: string
  readonly attempts: number
  readonly lease_owner: string | null
  readonly payload: unknown
  readonly progress: unknown
  readonly result: unknown
}

describe("migration 0026: sticker imports move into jobs", () => {
  it.effect("keeps every queued, running and finished import, readable by the job kind, and drops the old table", () =>
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const { "0026_jobs": _jobs, ...before } = migrations
      yield* migrate(before)
      const [company] = yield* sql<{ id: number }>`INSERT INTO companies (name) VALUES ('acme') RETURNING id`
      const [channel] = yield* sql<{ id: number }>`
        INSERT INTO channels (company_id, type, provider, name, webhook_secret)
        VALUES (${company.id}, 'msgr_b', 'telegram', 'bot', 'secret') RETURNING id`
      const items = JSON.stringify([{ file_id: "a", emoji: "🐶" }, { file_id: "b", emoji: null }])
      yield* sql`
        INSERT INTO sticker_imports (company_id, channel_id, set_name, title, items, skipped_animated, truncated, status)
        VALUES (${company.id}, ${channel.id}, 'Queued_set', 'Queued', ${items}::jsonb, 2, false, 'queued')`
      yield* sql`
        INSERT INTO sticker_imports (company_id, channel_id, set_name, title, items, skipped_animated, truncated, status,
          next_index, imported, lease_owner, lease_until)
        VALUES (${company.id}, ${channel.id}, 'Running_set', 'Running', ${items}::jsonb, 0, true, 'running',
          1, 1, 'old-runner', now() + interval '1 minute')`
      yield* sql`
        INSERT INTO sticker_imports (company_id, channel_id, set_name, title, items, status, next_index, failed, outcome, error)
        VALUES (${company.id}, ${channel.id}, 'Done_set', 'Done', ${items}::jsonb, 'finished', 2, 2, 'error', 'No sticker of the set could be imported.')`

      assert.deepStrictEqual(yield* migrate(migrations), ["26_jobs"])
      const moved = yield* sql<MovedJob>`
        SELECT kind, status, attempts, lease_owner, payload, progress, result FROM jobs WHERE company_id = ${company.id} ORDER BY id`
      assert.deepStrictEqual(moved.map((j) => [j.kind, j.status, j.attempts, j.lease_owner]), [
        ["sticker.import", "queued", 0, null],
        ["sticker.import", "running", 1, "old-runner"],
        ["sticker.import", "finished", 1, null]
      ])
      const payloads = moved.map((j) => Schema.decodeUnknownSync(StickerImportJob.payload)(j.payload))
      assert.deepStrictEqual(payloads[0], {
        channel_id: channel.id,
        user_id: null,
        set_name: "Queued_set",
        title: "Queued",
        items: [{ file_id: "a", emoji: "🐶" }, { file_id: "b", emoji: null }],
        skipped_animated: 2,
        truncated: false
      })
      assert.deepStrictEqual(
        moved.map((j) => Schema.decodeUnknownSync(StickerImportJob.progress)(j.progress)),
        [
          { next_index: 0, imported: 0, failed: 0, pack_id: null },
          { next_index: 1, imported: 1, failed: 0, pack_id: null },
          { next_index: 2, imported: 0, failed: 2, pack_id: null }
        ]
      )
      assert.deepStrictEqual([moved[0].result, moved[1].result], [null, null])
      assert.deepStrictEqual(moved[2].result, {
        outcome: "error",
        name: "Done_set",
        title: "Done",
        pack_id: null,
        imported: 0,
        skipped_animated: 0,
        truncated: false,
        failed: 2,
        error: "No sticker of the set could be imported."
      })
      const [old] = yield* sql<{ found: boolean }>`SELECT to_regclass('sticker_imports') IS NOT NULL AS found`
      assert.isFalse(old.found)
    }).pipe(Effect.provide(FreshDatabase)), 60_000)
})
