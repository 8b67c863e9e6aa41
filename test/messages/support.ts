import { unique } from "../support/Ids.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

export type ChannelType = "msgr_a" | "msgr_a_business" | "msgr_b" | "msgr_c_business"

export const createChannel = async (server: RunningServer, token: string, type: ChannelType, extra: Record<string, unknown> = {}) => {
  const res = await request(server, "POST", "/v1/channels", {
    token,
    body: { type, provider: "sandbox", name: `${type} ${unique("ch")}`, ...extra }
  })
  if (res.status !== 201) throw new Error(`createChannel: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.id as number
}

/** A simulated inbound message; returns `{message_id, conversation_id, duplicate}`. */
export const inbound = async (
  server: RunningServer,
  token: string,
  channelId: number,
  body: {
    readonly from?: { external_id: string; username?: string; name?: string; phone?: string }
    readonly text?: string | null
    readonly external_message_id?: string
    readonly referral?: Record<string, unknown>
    readonly thread?: { external_id: string; is_group?: boolean }
  } = {}
) => {
  const res = await request(server, "POST", `/v1/channels/${channelId}/sandbox/inbound`, {
    token,
    body: { from: { external_id: unique("user"), name: "Ann Lee" }, text: "hello", ...body }
  })
  if (res.status !== 201) throw new Error(`inbound: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data as { message_id: number; conversation_id: number; duplicate: boolean }
}

export const threadOf = async (server: RunningServer, messageId: number) => {
  const [row] = await query<{ thread_id: number; conversation_id: number }>(
    server,
    "SELECT thread_id, conversation_id FROM messages WHERE id = $1",
    [messageId]
  )
  return row
}

/** The external id of the contact account a thread talks to. */
export const externalIdOf = async (server: RunningServer, threadId: number) => {
  const [row] = await query<{ external_id: string }>(
    server,
    "SELECT ca.external_id FROM threads t JOIN contact_accounts ca ON ca.id = t.contact_account_id WHERE t.id = $1",
    [threadId]
  )
  return row.external_id
}

/** A channel with one inbound conversation: the usual starting point of a send. */
export const conversationOn = async (server: RunningServer, token: string, type: ChannelType = "msgr_b") => {
  const channelId = await createChannel(server, token, type)
  const received = await inbound(server, token, channelId)
  const { thread_id } = await threadOf(server, received.message_id)
  return { channelId, threadId: thread_id, conversationId: received.conversation_id, inboundId: received.message_id }
}

export const send = (server: RunningServer, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(server, "POST", "/v1/messages/send", { token, body, headers })

export const messageCount = async (server: RunningServer, companyId: number) => {
  const [{ n }] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM messages WHERE company_id = $1", [companyId])
  return n
}
