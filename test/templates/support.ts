import { createChannel } from "../messages/support.ts"
import { unique } from "../support/Ids.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

export const templateBody = (channelIds: ReadonlyArray<number>, extra: Record<string, unknown> = {}) => ({
  channel_type: "msgr_a_business",
  channel_ids: channelIds,
  name: `Order update ${unique("t")}`,
  language: "en",
  category: "utility",
  body: "Hi {{first_name}}, your order {{order_id}} has shipped.",
  parameters: [
    { name: "first_name", type: "text", sample_value: "Ann" },
    { name: "order_id", type: "text", sample_value: "A-42" }
  ],
  ...extra
})

export const createTemplate = async (server: RunningServer, token: string, channelIds: ReadonlyArray<number>, extra: Record<string, unknown> = {}) => {
  const res = await request(server, "POST", "/v1/templates", { token, body: templateBody(channelIds, extra) })
  if (res.status !== 201) throw new Error(`createTemplate: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data.template
}

/** A sandbox business channel with a template approved on it (submit, then sync). */
export const approvedTemplate = async (server: RunningServer, token: string, extra: Record<string, unknown> = {}) => {
  const channelId = await createChannel(server, token, "msgr_a_business")
  const template = await createTemplate(server, token, [channelId], extra)
  const submitted = await request(server, "POST", `/v1/templates/${template.id}/submit`, { token })
  if (submitted.status !== 200) throw new Error(`submit: ${submitted.status} ${JSON.stringify(submitted.body)}`)
  const synced = await request(server, "POST", "/v1/templates/sync", { token })
  if (synced.status !== 200) throw new Error(`sync: ${synced.status} ${JSON.stringify(synced.body)}`)
  return { channelId, template, groupId: template.template_group_id as number, instanceId: template.id as number }
}

export const sendTemplate = (server: RunningServer, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(server, "POST", "/v1/messages/send-template", { token, body, headers })
