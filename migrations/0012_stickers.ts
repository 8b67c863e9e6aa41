import { Effect } from "effect"
import { SqlClient } from "effect/sql"

/**
 * The sticker library: packs, their stickers (static 512x512 WebP files in the blob store),
 * and the durable queue of Telegram set imports. Packs and stickers are soft-deleted so a
 * sticker id kept by a message attachment never points at a reused row.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  yield* sql`
    CREATE TABLE sticker_packs (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      name text NOT NULL,
      tray_emoji text,
      is_system boolean NOT NULL DEFAULT false,
      source text NOT NULL DEFAULT 'manual' CHECK (source IN ('manual', 'system', 'telegram')),
      source_name text,
      position int NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX sticker_packs_company_idx ON sticker_packs (company_id, position, id) WHERE deleted_at IS NULL`
  // One live system pack per company, so two first uses at once cannot make two.
  yield* sql`CREATE UNIQUE INDEX sticker_packs_system_key ON sticker_packs (company_id) WHERE is_system AND deleted_at IS NULL`
  yield* sql`
    CREATE TABLE stickers (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      pack_id bigint NOT NULL REFERENCES sticker_packs(id) ON DELETE CASCADE,
      storage_path text NOT NULL,
      mime_type text NOT NULL DEFAULT 'image/webp',
      width int NOT NULL,
      height int NOT NULL,
      size int NOT NULL,
      is_animated boolean NOT NULL DEFAULT false,
      emoji_tags jsonb NOT NULL DEFAULT '[]',
      position int NOT NULL DEFAULT 0,
      original_name text,
      source_message_id bigint REFERENCES messages(id) ON DELETE SET NULL,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      deleted_at timestamptz
    )`
  yield* sql`CREATE INDEX stickers_pack_idx ON stickers (company_id, pack_id, position, id) WHERE deleted_at IS NULL`
  yield* sql`
    CREATE TABLE sticker_imports (
      id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
      company_id bigint NOT NULL REFERENCES companies(id) ON DELETE CASCADE,
      channel_id bigint NOT NULL REFERENCES channels(id) ON DELETE CASCADE,
      user_id bigint REFERENCES users(id) ON DELETE SET NULL,
      set_name text NOT NULL,
      title text NOT NULL,
      items jsonb NOT NULL,
      skipped_animated int NOT NULL DEFAULT 0,
      truncated boolean NOT NULL DEFAULT false,
      status text NOT NULL DEFAULT 'queued' CHECK (status IN ('queued', 'running', 'finished')),
      pack_id bigint REFERENCES sticker_packs(id) ON DELETE SET NULL,
      next_index int NOT NULL DEFAULT 0,
      imported int NOT NULL DEFAULT 0,
      failed int NOT NULL DEFAULT 0,
      outcome text CHECK (outcome IN ('success', 'error')),
      error text,
      lease_owner text,
      lease_until timestamptz,
      created_at timestamptz NOT NULL DEFAULT now(),
      updated_at timestamptz NOT NULL DEFAULT now(),
      finished_at timestamptz
    )`
  yield* sql`CREATE INDEX sticker_imports_company_idx ON sticker_imports (company_id, id)`
  // Small by construction: only unfinished jobs, which the workers scan to adopt.
  yield* sql`CREATE INDEX sticker_imports_pending_idx ON sticker_imports (company_id, id) WHERE status <> 'finished'`
})
