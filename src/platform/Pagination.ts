import { Schema } from "effect"

export const PageInfo = Schema.Struct({
  page: Schema.Int,
  perPage: Schema.Int,
  total: Schema.NullOr(Schema.Int),
  lastPage: Schema.NullOr(Schema.Int)
})

/** `{items, pagination}` — the spec's paged list; cursor mode leaves total and lastPage null. */
export const Paged = <S extends Schema.Top>(item: S) =>
  Schema.Struct({ items: Schema.Array(item), pagination: PageInfo })

export const pageInfo = (page: number, perPage: number, total: number) => ({
  page,
  perPage,
  total,
  lastPage: Math.max(1, Math.ceil(total / perPage))
})

export const cursorInfo = (perPage: number) => ({ page: 1, perPage, total: null, lastPage: null })

/** Query fields shared by page-mode lists; the range of perPage differs per list, so callers pass it. */
export const pageQuery = (perPage: { readonly min: number; readonly max: number }) => ({
  page: Schema.optional(Schema.Int.check(Schema.isGreaterThanOrEqualTo(1))),
  perPage: Schema.optional(
    Schema.Int.check(Schema.isBetween({ minimum: perPage.min, maximum: perPage.max }))
  )
})

export const offsetOf = (page: number, perPage: number) => (page - 1) * perPage
