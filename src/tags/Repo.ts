import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import { SqlClient } from "effect/sql"
import type { Tag } from "./Domain.ts"

interface TagRow {
  readonly id: number
  readonly company_id: CompanyId
  readonly name: string
  readonly contacts_count: number
  readonly created_at: Date
  readonly updated_at: Date
}

const toTag = (row: TagRow): Tag => ({
  id: row.id,
  company_id: row.company_id,
  name: row.name,
  contacts_count: row.contacts_count,
  created_at: row.created_at.toISOString(),
  updated_at: row.updated_at.toISOString()
})

/** Tags of one company; every statement carries the company id. */
export class TagsRepo extends Context.Service<TagsRepo, {
  list(companyId: CompanyId): Effect.Effect<ReadonlyArray<Tag>>
  find(companyId: CompanyId, id: number): Effect.Effect<Option.Option<Tag>>
  /** None when the name is taken (the unique index decides, races included). */
  insert(companyId: CompanyId, name: string): Effect.Effect<Option.Option<number>>
  /** None when the name is taken; Some(false) when the tag is not the company's. */
  rename(companyId: CompanyId, id: number, name: string): Effect.Effect<Option.Option<boolean>>
  delete(companyId: CompanyId, id: number): Effect.Effect<boolean>
}>()("crm/tags/TagsRepo") {
  static readonly layer = Layer.effect(
    TagsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const select = (companyId: CompanyId) => sql`
        SELECT t.id, t.company_id, t.name, t.created_at, t.updated_at,
          (SELECT count(*)::int FROM contact_tags ct JOIN contacts c ON c.id = ct.contact_id AND c.deleted_at IS NULL
           WHERE ct.company_id = ${companyId} AND ct.tag_id = t.id) AS contacts_count
        FROM tags t WHERE t.company_id = ${companyId}`

      const list = (companyId: CompanyId) =>
        sql<TagRow>`${select(companyId)} ORDER BY lower(t.name), t.id`.pipe(Effect.map((rows) => rows.map(toTag)), Effect.orDie)

      const find = (companyId: CompanyId, id: number) =>
        sql<TagRow>`${select(companyId)} AND t.id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toTag)),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, name: string) =>
        sql<{ id: number }>`
          INSERT INTO tags (company_id, name) VALUES (${companyId}, ${name})
          ON CONFLICT (company_id, lower(name)) DO NOTHING RETURNING id`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), (row) => row.id)),
          Effect.orDie
        )

      const rename = (companyId: CompanyId, id: number, name: string) =>
        sql<{ id: number }>`
          UPDATE tags SET name = ${name}, updated_at = now() WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => Option.some(rows.length > 0)),
          Effect.catchReason("SqlError", "UniqueViolation", () => Effect.succeed(Option.none())),
          Effect.orDie
        )

      const remove = (companyId: CompanyId, id: number) =>
        sql<{ id: number }>`DELETE FROM tags WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      return TagsRepo.of({ list, find, insert, rename, delete: remove })
    })
  )
}
