import { assert } from "@effect/vitest"
import type { WhatsAppFake } from "../fakes/WhatsAppFake.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

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

/** A WhatsApp Cloud API channel of the company, its access token known to the fake; its id. */
export const whatsappChannel = async (
  server: RunningServer,
  fake: WhatsAppFake,
  token: string,
  credentials: { readonly access_token: string; readonly phone_number_id: string; readonly app_secret: string; readonly verify_token: string },
  name = "WA"
) => {
  fake.tokens.add(credentials.access_token)
  const made = await request(server, "POST", "/v1/channels", {
    token,
    body: { type: "msgr_a_business", provider: "whatsapp_cloud", name, credentials }
  })
  assert.strictEqual(made.status, 201, JSON.stringify(made.body))
  return made.body.data.id as number
}
