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

/** Polls `check` until it answers something. */
export const eventually = async <A>(check: () => Promise<A | undefined>, timeoutMs = 15_000): Promise<A> => {
  const until = Date.now() + timeoutMs
  for (;;) {
    const found = await check()
    if (found !== undefined) return found
    if (Date.now() > until) throw new Error("eventually: timed out")
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * POST /v1/templates/sync answers 202 at once; `check` polls for the queued job's outcome. The test servers share
 * one database, so another file's runner may take the job, fail against its own provider fakes and leave it to a
 * back-off: asking again (nothing more is queued) makes it due at once.
 */
export const syncThen = async <A>(server: RunningServer, token: string, check: () => Promise<A | undefined>) => {
  const ask = async () => {
    const started = await request(server, "POST", "/v1/templates/sync", { token })
    if (started.status !== 202) throw new Error(`sync: ${started.status} ${JSON.stringify(started.body)}`)
    return started.body.data as { message: string; already_queued: boolean }
  }
  const first = await ask()
  let asked = Date.now()
  const outcome = await eventually(async () => {
    const found = await check()
    if (found === undefined && Date.now() - asked > 2_000) {
      asked = Date.now()
      await ask()
    }
    return found
  })
  return { first, outcome }
}

/** `syncThen`, until instance `id` satisfies `done`. */
export const syncUntil = async (server: RunningServer, token: string, id: number, done: (template: any) => boolean) =>
  (await syncThen(server, token, async () => {
    const res = await request(server, "GET", `/v1/templates/${id}`, { token })
    return done(res.body.data) ? res.body.data : undefined
  })).outcome

/** A sandbox business channel with a template approved on it (submit, then sync). */
export const approvedTemplate = async (server: RunningServer, token: string, extra: Record<string, unknown> = {}) => {
  const channelId = await createChannel(server, token, "msgr_a_business")
  const template = await createTemplate(server, token, [channelId], extra)
  const submitted = await request(server, "POST", `/v1/templates/${template.id}/submit`, { token })
  if (submitted.status !== 200) throw new Error(`submit: ${submitted.status} ${JSON.stringify(submitted.body)}`)
  await syncUntil(server, token, template.id, (t) => t.meta_status === "approved")
  return { channelId, template, groupId: template.template_group_id as number, instanceId: template.id as number }
}

export const sendTemplate = (server: RunningServer, token: string, body: Record<string, unknown>, headers: Record<string, string> = {}) =>
  request(server, "POST", "/v1/messages/send-template", { token, body, headers })
