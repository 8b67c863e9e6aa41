import { assert } from "@effect/vitest"
import { Effect } from "effect"
import { CompanyId } from "../../src/auth/Domain.ts"
import { memberIds, parse } from "../../src/segments/Compiler.ts"
import type { ConditionInput, GroupLogic } from "../../src/segments/Domain.ts"
import { createContact } from "../contacts/support.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

export const createTag = async (server: RunningServer, token: string, name: string) => {
  const res = await request(server, "POST", "/v1/tags", { token, body: { name } })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data.id as number
}

export const createChannel = async (server: RunningServer, companyId: number, type: string, name: string) =>
  (await query<{ id: number }>(
    server,
    "INSERT INTO channels (company_id, type, provider, name, webhook_secret) VALUES ($1, $2, 'sandbox', $3, 'secret') RETURNING id",
    [companyId, type, name]
  ))[0].id

export const createSegment = async (server: RunningServer, token: string, body: Record<string, unknown>) => {
  const res = await request(server, "POST", "/v1/segments", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data
}

export const estimate = async (server: RunningServer, token: string, conditions: ReadonlyArray<unknown>, groupLogic?: GroupLogic) => {
  const res = await request(server, "POST", "/v1/segments/estimate", {
    token,
    body: groupLogic === undefined ? { conditions } : { conditions, group_logic: groupLogic }
  })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data.estimated_count as number
}

/** The member ids the exported compiler selects, run inside the app (its database and Clock). */
export const membersOf = (server: RunningServer, companyId: number, conditions: ReadonlyArray<ConditionInput>, groupLogic: GroupLogic = "and") => {
  const parsed = parse(conditions)
  if (parsed._tag === "Invalid") throw new Error(JSON.stringify(parsed.errors))
  return server.runInApp(
    memberIds(CompanyId.make(companyId), { type: "dynamic", groupLogic, rules: parsed.rules }).pipe(
      Effect.flatMap((statement) => statement.unprepared),
      Effect.map((rows) => rows.map((row) => row.id).sort((a, b) => a - b)),
      Effect.orDie
    )
  )
}

/** A conversation of the contact (last message `messageDaysAgo`) with one thread per channel. */
export const converse = async (
  server: RunningServer,
  companyId: number,
  contactId: number,
  messageDaysAgo: number,
  threads: ReadonlyArray<{ readonly channelId: number; readonly inboundDaysAgo: number | null }>
) => {
  const [conversation] = await query<{ id: number }>(
    server,
    `INSERT INTO conversations (company_id, contact_id, last_message_at) VALUES ($1, $2, now() - make_interval(days => $3))
     RETURNING id`,
    [companyId, contactId, messageDaysAgo]
  )
  for (const thread of threads) {
    await query(
      server,
      `INSERT INTO threads (company_id, conversation_id, channel_id, last_inbound_at)
       VALUES ($1, $2, $3, CASE WHEN $4::int IS NULL THEN NULL ELSE now() - make_interval(days => $4::int) END)`,
      [companyId, conversation.id, thread.channelId, thread.inboundDaysAgo]
    )
  }
}

export { createContact }
