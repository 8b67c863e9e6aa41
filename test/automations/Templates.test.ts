import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { inbound, threadOf } from "../messages/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, type RunningServer, startServer } from "../support/TestServer.ts"
import { approvedTemplate } from "../templates/support.ts"
import { actionNode, activeAutomation, chain, finishedRuns, ok, trigger } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

describe("send-template", () => {
  it("sends an approved template outside the 24-hour window, where free-form text is refused", async () => {
    const company = await createCompany(server)
    const t = await approvedTemplate(server, company.token)
    const received = await inbound(server, company.token, t.channelId, { from: { external_id: "15550042", phone: "+15550042", name: "Ann" }, text: "hi" })
    const { thread_id } = await threadOf(server, received.message_id)
    const [{ contact_id }] = await query<{ contact_id: number }>(server, "SELECT contact_id FROM conversations WHERE id = $1", [received.conversation_id])
    await query(server, "UPDATE threads SET last_inbound_at = now() - interval '3 days' WHERE id = $1", [thread_id])

    const template = await activeAutomation(server, company.token, chain([
      actionNode("tpl", "send-template", { template_id: t.groupId, variables: { first_name: "Ann", order_id: "A-42" } })
    ]), [trigger("contact.updated")], "template")
    const text = await activeAutomation(server, company.token, chain([actionNode("txt", "send-message", { text: "free-form" })]), [trigger("contact.updated")], "text")
    const missing = await activeAutomation(server, company.token, chain([
      actionNode("tpl", "send-template", { template_id: t.groupId, variables: { first_name: "Ann" } })
    ]), [trigger("contact.updated")], "missing variable")

    await ok(server, "PATCH", `/v1/contacts/${Number(contact_id)}`, company.token, { lastName: "Lee" })
    const [sent] = await finishedRuns(server, company.token, template.id)
    assert.strictEqual(sent.status, "succeeded", JSON.stringify(sent))
    assert.isNumber(sent.steps[0].output.message_id)
    const [refused] = await finishedRuns(server, company.token, text.id)
    assert.strictEqual(refused.status, "failed")
    assert.match(refused.steps[0].error, /^window_closed/)
    const [incomplete] = await finishedRuns(server, company.token, missing.id)
    assert.strictEqual(incomplete.status, "failed")
    assert.match(incomplete.steps[0].error, /^missing_variable/)

    const messages = await query<{ message_type: string; message_content: string }>(
      server,
      "SELECT message_type, message_content FROM messages WHERE conversation_id = $1 AND direction = 'outbound'",
      [received.conversation_id]
    )
    assert.deepStrictEqual(messages.map((m) => m.message_type), ["template"])
    assert.include(messages[0].message_content, "A-42")
  })

  it("another company's template is not found: the step fails", async () => {
    const owner = await createCompany(server)
    const t = await approvedTemplate(server, owner.token)
    const other = await createCompany(server)
    const mine = await approvedTemplate(server, other.token)
    const received = await inbound(server, other.token, mine.channelId, { from: { external_id: "15550043", phone: "+15550043", name: "Bo" }, text: "hi" })
    const automation = await activeAutomation(server, other.token, chain([
      actionNode("tpl", "send-template", { template_id: t.groupId, variables: { first_name: "Bo", order_id: "B-1" } })
    ]), [trigger("message.created")])
    await inbound(server, other.token, mine.channelId, { from: { external_id: "15550043", phone: "+15550043", name: "Bo" }, text: "again" })
    const [run] = await finishedRuns(server, other.token, automation.id)
    assert.strictEqual(run.status, "failed")
    assert.match(run.steps[0].error, /^template_not_found/)
    const sent = await query(server, "SELECT id FROM messages WHERE conversation_id = $1 AND direction = 'outbound'", [received.conversation_id])
    assert.strictEqual(sent.length, 0)
  })
})
