import { assert } from "@effect/vitest"
import { sqlQuery } from "../messages/support.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

export const createContact = async (server: RunningServer, token: string, body: Record<string, unknown>) => {
  const res = await request(server, "POST", "/v1/contacts", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data
}

export const getContact = (server: RunningServer, token: string, id: number) =>
  request(server, "GET", `/v1/contacts/${id}`, { token })

/** Events of a company with this key, oldest first (straight from the events table). */
export const eventsOf = (server: RunningServer, companyId: number, key: string) =>
  sqlQuery<{ seq: number; payload: any }>(
    server,
    "SELECT seq, payload FROM events WHERE company_id = $1 AND key = $2 ORDER BY seq",
    [companyId, key]
  )

export const enableTelephony = async (server: RunningServer, companyId: number) => {
  const res = await request(server, "PATCH", `/platform/v1/companies/${companyId}`, {
    token: server.platformKey,
    body: { telephony_enabled: true }
  })
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
}

/** Moves a thread's last inbound message (and the window it opened) `hours` into the past. */
export const ageInbound = (server: RunningServer, threadId: number, hours: number) =>
  Promise.all([
    sqlQuery(server, `UPDATE threads SET last_inbound_at = now() - make_interval(hours => $2) WHERE id = $1`, [threadId, hours]),
    sqlQuery(server, `UPDATE messages SET "timestamp" = now() - make_interval(hours => $2) WHERE thread_id = $1 AND direction = 'inbound'`, [
      threadId,
      hours
    ])
  ])
