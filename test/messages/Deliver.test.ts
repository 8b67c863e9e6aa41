import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer, Option } from "effect"
import { afterAll, beforeAll } from "vitest"
import { CompanyId } from "../../src/auth/Domain.ts"
import { Media } from "../../src/media/Media.ts"
import { Outbound } from "../../src/messages/Outbound.ts"
import { Send } from "../../src/messages/Send.ts"
import { ThreadsRepo } from "../../src/messages/ThreadsRepo.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { conversationOn, createChannel, messageCount } from "./support.ts"
import { query } from "../support/Sql.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

/** The single-send door as a caller other than HTTP uses it (an automation): no actor, a resolved target. */
const withSend = <A, E>(f: (send: Send["Service"], threads: ThreadsRepo["Service"]) => Effect.Effect<A, E>) =>
  server.runInApp(
    Effect.gen(function*() {
      return yield* f(yield* Send, yield* ThreadsRepo)
    }).pipe(Effect.provide(Layer.mergeAll(Send.layer, ThreadsRepo.layer)))
  )

/** Outbound's thread lookup for callers that address contact accounts. */
const withOutbound = <A, E>(f: (outbound: Outbound["Service"], threads: ThreadsRepo["Service"]) => Effect.Effect<A, E>) =>
  server.runInApp(
    Effect.gen(function*() {
      return yield* f(yield* Outbound, yield* ThreadsRepo)
    }).pipe(Effect.provide(Layer.mergeAll(Outbound.layer, ThreadsRepo.layer).pipe(Layer.provide(Media.layer))))
  )

const content = (companyId: number, userId: number, text: string) => ({
  endpoint: "send" as const,
  companyId: CompanyId.make(companyId),
  userId,
  messageType: "text",
  text,
  attachments: [],
  quotedMessageId: null,
  quotedExternalMessageId: null,
  metadata: {},
  idempotency: null
})

const userOf = async (token: string) => (await request(server, "GET", "/v1/me", { token })).body.data.id as number

describe("Send.one (non-HTTP callers)", () => {
  it("sends to a resolved thread and refuses by typed reason, writing nothing", async () => {
    const a = await createCompany(server)
    const userId = await userOf(a.token)
    const c = await conversationOn(server, a.token)
    const sent = await withSend((send, threads) =>
      Effect.gen(function*() {
        const thread = Option.getOrThrow(yield* threads.threadContext(CompanyId.make(a.id), c.threadId))
        return yield* send.one({ ...content(a.id, userId, "From an automation"), thread })
      })
    )
    assert.strictEqual(sent.status, "sent")
    assert.strictEqual(sent.thread_id, c.threadId)
    assert.strictEqual(sent.message_content, "From an automation")

    await query(server, "UPDATE contacts SET blocked_at = now() WHERE id = (SELECT contact_id FROM conversations WHERE id = $1)", [
      c.conversationId
    ])
    const before = await messageCount(server, a.id)
    const refusal = await withSend((send, threads) =>
      Effect.gen(function*() {
        const thread = Option.getOrThrow(yield* threads.threadContext(CompanyId.make(a.id), c.threadId))
        return yield* send.one({ ...content(a.id, userId, "Blocked"), thread }).pipe(
          Effect.as("sent"),
          Effect.catchTags({
            SendRefusal: (e) => Effect.succeed(`${e.reason}: ${e.error_code}`),
            SendUnavailable: () => Effect.succeed("unavailable")
          })
        )
      })
    )
    assert.strictEqual(refusal, "contact_blocked: contact_blocked")
    assert.strictEqual(await messageCount(server, a.id), before)
  })

  it("finds or creates the thread of a contact account, and knows nothing of another company's", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const c = await conversationOn(server, a.token)
    const [{ contact_account_id }] = await query<{ contact_account_id: number }>(
      server,
      "SELECT contact_account_id FROM threads WHERE id = $1",
      [c.threadId]
    )
    const second = await createChannel(server, a.token, "msgr_b")
    const foreign = await createChannel(server, b.token, "msgr_b")
    const [same, created, again, otherCompany, otherChannel] = await withOutbound((outbound) =>
      Effect.all([
        outbound.threadFor(CompanyId.make(a.id), c.channelId, contact_account_id),
        outbound.threadFor(CompanyId.make(a.id), second, contact_account_id),
        outbound.threadFor(CompanyId.make(a.id), second, contact_account_id),
        outbound.threadFor(CompanyId.make(b.id), c.channelId, contact_account_id),
        outbound.threadFor(CompanyId.make(a.id), foreign, contact_account_id)
      ], { concurrency: 1 })
    )
    assert.strictEqual(Option.getOrThrow(same).id, c.threadId)
    const thread = Option.getOrThrow(created)
    assert.notStrictEqual(thread.id, c.threadId)
    assert.strictEqual(thread.channel_id, second)
    assert.strictEqual(thread.conversation_id, c.conversationId, "one conversation per contact")
    assert.strictEqual(Option.getOrThrow(again).id, thread.id)
    assert.isTrue(Option.isNone(otherCompany))
    assert.isTrue(Option.isNone(otherChannel))
  })
})
