import { Context, Effect, Layer, Option } from "effect"
import { CurrentActor, requirePermission } from "../auth/Domain.ts"
import { Media } from "../media/Media.ts"
import type { Message } from "../messages/Domain.ts"
import { Outbound, refusalToWire, targetErrors } from "../messages/Outbound.ts"
import { MessagesRepo } from "../messages/Repo.ts"
import { Send } from "../messages/Send.ts"
import { ThreadsRepo } from "../messages/ThreadsRepo.ts"
import { Visibility } from "../messages/Visibility.ts"
import {
  type Conflict,
  type Forbidden,
  invalidFields,
  type NotFound,
  notFound,
  ServiceUnavailable,
  type Unprocessable
} from "../platform/Errors.ts"
import { requestHash } from "../platform/Idempotency.ts"
import type { SendTemplate } from "./Domain.ts"
import { render } from "./Rules.ts"
import { templateContent, type TemplateRefusal, TemplateSending } from "./Sending.ts"

/** Free-form objects we keep (the variables ride in the message metadata) are capped. */
const maxVariablesBytes = 16 * 1024

const refusalToHttp = (e: TemplateRefusal) =>
  e.reason === "template_not_found" ? notFound(e.message) : invalidFields({ [e.field]: [e.message] })

/** `POST /v1/messages/send-template`: an approved template through `Send.one`, with the send endpoint's targets and replays. */
export class TemplateMessages extends Context.Service<TemplateMessages, {
  send(input: SendTemplate, key: string | undefined): Effect.Effect<
    Message,
    Forbidden | NotFound | Unprocessable | Conflict | ServiceUnavailable,
    CurrentActor
  >
}>()("crm/templates/TemplateMessages") {
  static readonly layerNoDeps = Layer.effect(
    TemplateMessages,
    Effect.gen(function*() {
      const outbound = yield* Outbound
      const sending = yield* TemplateSending
      const sender = yield* Send
      const visibility = yield* Visibility

      const send = Effect.fn("TemplateMessages.send")(function*(input: SendTemplate, key: string | undefined) {
        const company = yield* requirePermission("conversation.create")
        const actor = yield* CurrentActor
        const variables = input.variables ?? {}
        const errors = targetErrors(input)
        if (JSON.stringify(variables).length > maxVariablesBytes) errors.variables = ["The variables field must not be greater than 16 KB."]
        if (Object.keys(errors).length > 0) return yield* invalidFields(errors)
        const hash = requestHash(input)
        if (key !== undefined) {
          const earlier = yield* outbound.replay(actor.userId, "send-template", key, hash)
          if (Option.isSome(earlier)) return earlier.value
        }
        yield* visibility.channel(company.id, input.channel_id)
        const template = yield* sending.approved(company.id, {
          templateId: input.template_id,
          channelId: input.channel_id,
          language: input.language ?? undefined
        }).pipe(Effect.mapError(refusalToHttp))
        // Every missing variable at once, before a contact or thread is created for the send.
        const rendered = render(template, variables)
        if (rendered._tag === "Missing") {
          return yield* invalidFields(Object.fromEntries(rendered.names.map((name) => [`variables.${name}`, [`The variable ${name} is required.`]])))
        }
        const content = yield* Effect.fromResult(templateContent(template, variables)).pipe(Effect.mapError(refusalToHttp))
        const thread = yield* outbound.target(company.id, input.channel_id, input)
        return yield* sender.one({
          ...content,
          thread,
          endpoint: "send-template",
          companyId: company.id,
          userId: actor.userId,
          messageType: "template",
          quotedMessageId: null,
          quotedExternalMessageId: null,
          idempotency: key === undefined ? null : { key, hash }
        }).pipe(Effect.catchTags({
          SendRefusal: (e) => Effect.fail(refusalToWire(e)),
          SendUnavailable: (e) => Effect.fail(new ServiceUnavailable({ message: e.message }))
        }))
      })

      return TemplateMessages.of({ send })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([TemplateSending.layer, Outbound.layer, Visibility.layer, Send.layer]),
    Layer.provide([MessagesRepo.layer, ThreadsRepo.layer, Media.layer])
  )
}
