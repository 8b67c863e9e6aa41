import { Context, Effect, Layer, Option, Schema } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import { Media } from "../media/Media.ts"
import type { Message } from "../messages/Domain.ts"
import { Outbound } from "../messages/Outbound.ts"
import type { SendRefusal, SendUnavailable } from "../messages/SendLane.ts"
import type { ThreadContext } from "../messages/ThreadsRepo.ts"
import { TemplatesRepo } from "./Repo.ts"
import { render } from "./Rules.ts"

/**
 * Why a template send was not made. `field` is the request field a 422 names
 * (`template_id`, `language`, `variables.<name>`, `thread_id`); broadcasts and automations turn
 * the reason into a skipped recipient or a failed step.
 */
export class TemplateRefusal extends Schema.TaggedError<TemplateRefusal>()("TemplateRefusal", {
  reason: Schema.Literals(["template_not_found", "no_approved_instance", "missing_variable", "channel_mismatch"]),
  field: Schema.String,
  message: Schema.String
}) {}

/** The approved instance of a logical template on one channel and language. */
export interface ApprovedTemplate {
  readonly companyId: CompanyId
  readonly instanceId: number
  readonly groupId: number
  readonly channelId: number
  readonly channelName: string
  readonly name: string
  /** Also the template's name at the provider. */
  readonly slug: string
  readonly language: string
  readonly body: string
  /** Header text when the header is enabled. */
  readonly header: string | null
  /** Footer text when the footer is enabled. */
  readonly footer: string | null
  /** Declared variables, by position. */
  readonly parameters: ReadonlyArray<{ readonly name: string; readonly position: number }>
}

const refuse = (reason: TemplateRefusal["reason"], field: string, message: string) => new TemplateRefusal({ reason, field, message })

/**
 * The port other areas (broadcasts, automations) use to send an approved template. Sends go
 * through `Outbound.deliver`, so the Conversation lane, blocked contacts and idempotency apply;
 * the 24-hour window does not.
 */
export class TemplateSending extends Context.Service<TemplateSending, {
  /**
   * `templateId` is a group id or an instance id; `language` defaults to that instance's language,
   * else the group's first language. An archived template has no approved instance.
   */
  approved(companyId: CompanyId, input: {
    readonly templateId: number
    readonly channelId: number
    readonly language?: string | undefined
  }): Effect.Effect<ApprovedTemplate, TemplateRefusal>
  /**
   * Renders header, body and footer with `variables` and sends it on the thread (which must be on
   * the template's channel) as a `template` message whose metadata carries the template reference;
   * the send counts as a use.
   */
  deliver(input: {
    readonly thread: ThreadContext
    readonly userId: number
    readonly template: ApprovedTemplate
    readonly variables: Readonly<Record<string, string>>
    readonly idempotency: { readonly key: string; readonly hash: string } | null
    readonly metadata?: Readonly<Record<string, unknown>> | undefined
  }): Effect.Effect<Message, TemplateRefusal | SendRefusal | SendUnavailable>
}>()("crm/templates/TemplateSending") {
  static readonly layerNoDeps = Layer.effect(
    TemplateSending,
    Effect.gen(function*() {
      const repo = yield* TemplatesRepo
      const outbound = yield* Outbound

      const approved = Effect.fn("TemplateSending.approved")(function*(companyId: CompanyId, input: {
        readonly templateId: number
        readonly channelId: number
        readonly language?: string | undefined
      }) {
        const found = yield* repo.resolve(companyId, input.templateId)
        if (Option.isNone(found)) return yield* refuse("template_not_found", "template_id", "Template not found.")
        const { group, instanceId } = found.value
        if (group.status === "archived") {
          return yield* refuse("no_approved_instance", "template_id", "The template is archived; unarchive it to send it.")
        }
        const instances = yield* repo.instances(companyId, [group.id])
        const language = input.language ?? instances.find((i) => i.id === instanceId)?.language ?? instances[0]?.language
        if (input.language !== undefined && !instances.some((i) => i.language === input.language)) {
          return yield* refuse("no_approved_instance", "language", `The template has no ${input.language} version.`)
        }
        const instance = instances.find((i) => i.channel_id === input.channelId && i.language === language)
        if (instance === undefined || instance.meta_status !== "approved" || instance.channel_name === null) {
          return yield* refuse(
            "no_approved_instance",
            "template_id",
            `The template has no approved ${language} version on this channel${instance === undefined ? "" : ` (it is ${instance.meta_status})`}.`
          )
        }
        return {
          companyId,
          instanceId: instance.id,
          groupId: group.id,
          channelId: input.channelId,
          channelName: instance.channel_name,
          name: group.name,
          slug: group.slug,
          language: instance.language,
          body: instance.body,
          header: instance.header_enabled ? instance.header_text : null,
          footer: instance.footer_enabled ? instance.footer_text : null,
          parameters: instance.parameters.map((p) => ({ name: p.name, position: p.position }))
        }
      })

      const deliver = Effect.fn("TemplateSending.deliver")(function*(input: {
        readonly thread: ThreadContext
        readonly userId: number
        readonly template: ApprovedTemplate
        readonly variables: Readonly<Record<string, string>>
        readonly idempotency: { readonly key: string; readonly hash: string } | null
        readonly metadata?: Readonly<Record<string, unknown>> | undefined
      }) {
        const { thread, template: t } = input
        if (thread.channel_id !== t.channelId) {
          return yield* refuse("channel_mismatch", "thread_id", "The thread is not on the template's channel.")
        }
        const rendered = render(t, input.variables)
        if (rendered._tag === "Missing") {
          const name = rendered.names[0]
          return yield* refuse("missing_variable", `variables.${name}`, `The variable ${name} is required.`)
        }
        return yield* outbound.deliver({
          thread,
          endpoint: "send-template",
          companyId: t.companyId,
          userId: input.userId,
          messageType: "template",
          text: rendered.value.text,
          attachments: [],
          quotedMessageId: null,
          quotedExternalMessageId: null,
          metadata: {
            ...input.metadata,
            template: {
              id: t.instanceId,
              template_group_id: t.groupId,
              name: t.name,
              slug: t.slug,
              language: t.language,
              variables: input.variables
            }
          },
          idempotency: input.idempotency,
          template: { name: t.slug, language: t.language, header: rendered.value.header, body: rendered.value.body }
        })
      })

      return TemplateSending.of({ approved, deliver })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(
    Layer.provide([TemplatesRepo.layer, Outbound.layer]),
    Layer.provide(Media.layer)
  )
}
