import { Effect } from "effect"
import { SqlClient } from "effect/sql"
import { type CountryCode, isSupportedCountry, parsePhoneNumberFromString } from "libphonenumber-js/max"

const batch = 1000

/** The reading of src/platform/Phones.ts as of this migration (a migration never changes with the code). */
const normalizePhone = (value: string, defaultCountry: string | null): string | undefined => {
  const trimmed = value.trim()
  if (trimmed === "" || trimmed.length > 64) return undefined
  const country = defaultCountry !== null && isSupportedCountry(defaultCountry) ? defaultCountry as CountryCode : undefined
  const read = (text: string) => {
    const parsed = parsePhoneNumberFromString(text, country === undefined ? undefined : { defaultCountry: country })
    return parsed !== undefined && parsed.isValid() ? parsed.number : undefined
  }
  if (country !== undefined) return read(trimmed)
  const compact = trimmed.replace(/[\s().-]/g, "")
  return read(compact.startsWith("00") ? `+${compact.slice(2)}` : compact.startsWith("+") ? compact : `+${compact}`)
}

/**
 * Re-reads stored phone numbers with libphonenumber (`normalizePhone`, the company's
 * `default_country`): the old reading took "(415) 555-0123" as +4155550123 and kept invalid
 * numbers. A row that does not parse is kept as it is and listed in this migration's log.
 */
export default Effect.gen(function*() {
  const sql = yield* SqlClient.SqlClient
  const unparseable: Array<{ table: string; id: number; phone: string }> = []
  let changed = 0

  const pass = Effect.fnUntraced(function*(
    table: string,
    page: (after: number) => Effect.Effect<ReadonlyArray<{ id: number; phone: string; country: string | null }>, unknown>,
    write: (id: number, phone: string) => Effect.Effect<unknown, unknown>
  ) {
    let after = 0
    while (true) {
      const rows = yield* page(after)
      if (rows.length === 0) return
      for (const row of rows) {
        const phone = normalizePhone(row.phone, row.country)
        if (phone === undefined) unparseable.push({ table, id: Number(row.id), phone: row.phone })
        else if (phone !== row.phone) {
          yield* write(Number(row.id), phone)
          changed++
        }
      }
      after = Number(rows[rows.length - 1].id)
    }
  })

  yield* pass(
    "contact_phones",
    (after) =>
      sql<{ id: number; phone: string; country: string | null }>`
        SELECT p.id, p.phone, c.default_country AS country FROM contact_phones p JOIN companies c ON c.id = p.company_id
        WHERE p.id > ${after} ORDER BY p.id LIMIT ${batch}`,
    (id, phone) => sql`UPDATE contact_phones SET phone = ${phone} WHERE id = ${id}`
  )
  yield* pass(
    "users",
    (after) =>
      sql<{ id: number; phone: string; country: string | null }>`
        SELECT u.id, u.phone, c.default_country AS country FROM users u LEFT JOIN companies c ON c.id = u.current_company_id
        WHERE u.id > ${after} AND u.phone IS NOT NULL ORDER BY u.id LIMIT ${batch}`,
    // A number that reads differently now is a different number: its verification does not carry over.
    (id, phone) => sql`UPDATE users SET phone = ${phone}, phone_verified = false WHERE id = ${id}`
  )
  yield* Effect.logInfo("phone numbers re-normalised").pipe(Effect.annotateLogs({ changed, unparseable: unparseable.length }))
  for (const row of unparseable) {
    yield* Effect.logWarning("phone number kept as it is: not a valid number").pipe(Effect.annotateLogs(row))
  }
})
