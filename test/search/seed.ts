import { query } from "../support/Sql.ts"
import type { RunningServer } from "../support/TestServer.ts"

const one = async (server: RunningServer, text: string, params: ReadonlyArray<unknown>) =>
  ((await query<{ id: number }>(server, text, params))[0]).id

export type ChannelType = "msgr_a" | "msgr_a_business" | "msgr_b" | "msgr_c_business"

export const seedChannel = (server: RunningServer, companyId: number, type: ChannelType = "msgr_b") =>
  one(
    server,
    "INSERT INTO channels (company_id, type, provider, name, webhook_secret) VALUES ($1, $2, 'sandbox', $3, 'secret') RETURNING id",
    [companyId, type, `Channel ${type}`]
  )

export interface Contact {
  readonly display_name?: string | null
  readonly first_name?: string | null
  readonly last_name?: string | null
}

/** A contact, its conversation and one thread on the channel. */
export const seedConversation = async (server: RunningServer, companyId: number, channelId: number, contact: Contact = {}) => {
  const contactId = await one(
    server,
    "INSERT INTO contacts (company_id, display_name, first_name, last_name) VALUES ($1, $2, $3, $4) RETURNING id",
    [companyId, contact.display_name ?? null, contact.first_name ?? null, contact.last_name ?? null]
  )
  const conversationId = await one(
    server,
    "INSERT INTO conversations (company_id, contact_id) VALUES ($1, $2) RETURNING id",
    [companyId, contactId]
  )
  const threadId = await seedThread(server, companyId, conversationId, channelId)
  return { contactId, conversationId, threadId, channelId }
}

export const seedThread = (server: RunningServer, companyId: number, conversationId: number, channelId: number) =>
  one(
    server,
    "INSERT INTO threads (company_id, conversation_id, channel_id) VALUES ($1, $2, $3) RETURNING id",
    [companyId, conversationId, channelId]
  )

let clock = Date.parse("2025-01-01T00:00:00Z")

/** A message; `at` defaults to a strictly increasing time so the seeding order is the age order. */
export const seedMessage = async (
  server: RunningServer,
  companyId: number,
  thread: { readonly conversationId: number; readonly threadId: number; readonly channelId: number },
  text: string | null,
  at: Date = new Date((clock += 60_000))
) =>
  one(
    server,
    `INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp", created_at)
     VALUES ($1, $2, $3, $4, 'inbound', $5, $6, $6) RETURNING id`,
    [companyId, thread.conversationId, thread.threadId, thread.channelId, text, at]
  )

/** A team of the company granting `channelIds` to `userIds` (channel access mode `custom`). */
export const seedTeam = async (
  server: RunningServer,
  companyId: number,
  userIds: ReadonlyArray<number>,
  channelIds: ReadonlyArray<number>
) => {
  const teamId = await one(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'Team') RETURNING id", [companyId])
  for (const userId of userIds) {
    await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [companyId, teamId, userId])
  }
  for (const channelId of channelIds) {
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [companyId, teamId, channelId])
  }
  return teamId
}

let words = 0
/** A fresh word that the English stemmer keeps as is (it ends in "x"). */
export const uniqueWord = () => {
  const letters = "abcdefghijklmnopqrstuvwxyz"
  let n = Date.now() * 1000 + words++ * 7919 + Math.floor(Math.random() * 1000)
  let word = "zq"
  while (n > 0) {
    word += letters[n % 26]
    n = Math.floor(n / 26)
  }
  return `${word}x`
}
