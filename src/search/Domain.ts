import { Schema } from "effect"
import { PageInfo } from "../platform/Pagination.ts"

export const SearchHit = Schema.Struct({
  message_id: Schema.Int,
  conversation_id: Schema.Int,
  thread_id: Schema.Int,
  created_at: Schema.String,
  snippet: Schema.String,
  query: Schema.String,
  contact_name: Schema.NullOr(Schema.String),
  channel_id: Schema.Int,
  channel_type: Schema.NullOr(Schema.String)
})
export type SearchHit = typeof SearchHit.Type

export const SearchResult = Schema.Struct({
  items: Schema.Array(SearchHit),
  pagination: PageInfo,
  total_matches: Schema.Int
})
export type SearchResult = typeof SearchResult.Type

export const perPageRange = { min: 5, max: 100, fallback: 20 } as const

// Lengths in characters (code points), as the spec counts them; surrounding spaces do not count.
export const SearchQuery = {
  q: Schema.String.check(
    Schema.isMinCodePoints(2, { message: "The q field must be at least 2 characters." }),
    Schema.isMaxCodePoints(255, { message: "The q field must not be greater than 255 characters." })
  ),
  conversation_id: Schema.optional(Schema.Int),
  // Bounded so that an offset always fits the database's integers; far beyond any real result.
  page: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: 1, maximum: 1_000_000 }, {
    message: "The page field must be between 1 and 1000000."
  }))),
  perPage: Schema.optional(Schema.Int.check(Schema.isBetween({ minimum: perPageRange.min, maximum: perPageRange.max }, {
    message: `The per page field must be between ${perPageRange.min} and ${perPageRange.max}.`
  })))
}

export interface SearchInput {
  readonly q: string
  readonly conversation_id?: number | undefined
  readonly page?: number | undefined
  readonly perPage?: number | undefined
}

const snippetLength = 240
// How far a cut may move to end on a word boundary instead of inside a word.
const snapDistance = 20
const escape = (text: string) => text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")
const isSpace = (char: string | undefined) => char !== undefined && /\s/u.test(char)

/** Earliest textual occurrence (code point offsets): the whole query first, else any of its words, each at a word start. */
const findMatch = (text: string, q: string): { readonly start: number; readonly end: number } | undefined => {
  const words = q.trim().split(/\s+/u).filter((word) => word.length > 0)
  const locate = (pattern: string) => {
    const found = new RegExp(`(?<![\\p{L}\\p{N}])${pattern}`, "iu").exec(text)
    if (found === null) return undefined
    const start = Array.from(text.slice(0, found.index)).length
    return { start, end: start + Array.from(found[0]).length }
  }
  const phrase = locate(words.map(escape).join("\\s+"))
  if (phrase !== undefined || words.length < 2) return phrase
  let best: { readonly start: number; readonly end: number } | undefined
  for (const word of words) {
    const hit = locate(escape(word))
    if (hit !== undefined && (best === undefined || hit.start < best.start)) best = hit
  }
  return best
}

/**
 * The spec's snippet: a window of about 240 characters centred on the first textual
 * match, with `...` where the text was cut; without a textual match (a stemmed hit such
 * as "orders" for "ordered"), the first 240 characters.
 */
export const snippetOf = (text: string, q: string): string => {
  const chars = Array.from(text)
  if (chars.length <= snippetLength) return text
  const match = findMatch(text, q)
  let start = 0
  if (match !== undefined) {
    const centre = Math.floor((match.start + match.end) / 2)
    start = Math.min(Math.max(0, centre - snippetLength / 2), chars.length - snippetLength, match.start)
  }
  let end = start + snippetLength
  if (start > 0 && !isSpace(chars[start - 1])) {
    const limit = Math.min(start + snapDistance, match?.start ?? start + snapDistance)
    for (let i = start; i < limit; i++) {
      if (isSpace(chars[i])) {
        start = i + 1
        break
      }
    }
  }
  if (end < chars.length && !isSpace(chars[end])) {
    const limit = Math.max(end - snapDistance, match?.end ?? end - snapDistance)
    for (let i = end - 1; i > limit; i--) {
      if (isSpace(chars[i])) {
        end = i
        break
      }
    }
  }
  const body = chars.slice(start, end).join("").trim()
  return `${start > 0 ? "..." : ""}${body}${end < chars.length ? "..." : ""}`
}
