import { assert } from "@effect/vitest"
import { request, type RunningServer } from "../support/TestServer.ts"
import { query } from "../support/Sql.ts"

export const createContact = async (server: RunningServer, token: string, body: Record<string, unknown>) => {
  const res = await request(server, "POST", "/v1/contacts", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data
}

export const getContact = (server: RunningServer, token: string, id: number) =>
  request(server, "GET", `/v1/contacts/${id}`, { token })

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
    query(server, `UPDATE threads SET last_inbound_at = now() - make_interval(hours => $2) WHERE id = $1`, [threadId, hours]),
    query(server, `UPDATE messages SET "timestamp" = now() - make_interval(hours => $2) WHERE thread_id = $1 AND direction = 'inbound'`, [
      threadId,
      hours
    ])
  ])
