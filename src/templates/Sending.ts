import { Context, type Effect, Schema } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import type { Message } from "../messages/Domain.ts"
import type { SendRefusal, SendUnavailable } from "../messages/SendLane.ts"
import type { ThreadContext } from "../messages/ThreadsRepo.ts"

/**
 * Why a template send was not made. `field` is the request field a 422 names
 * (`template_id`, `variables.<name>`); broadcasts and automations turn the reason into a
 * skipped recipient or a failed step.
 */
export class TemplateRefusal extends Schema.TaggedError<TemplateRefusal>()("TemplateRefusal", {
  reason: Schema.Literals(["template_not_found", "no_approved_instance", "missing_variable"]),
  field: Schema.String,
  message: Schema.String
}) {}

/** The approved instance of a logical template on one channel and language. */
export interface ApprovedTemplate {
  readonly instanceId: number
  readonly groupId: number
  readonly channelId: number
  readonly channelName: string
  readonly name: string
  readonly slug: string
  readonly language: string
  readonly body: string
  /** Declared variables, by position. */
  readonly parameters: ReadonlyArray<{ readonly name: string; readonly position: number }>
}

/**
 * The port other areas (broadcasts, automations) use to send an approved template. Sends go
 * through `Outbound.deliver`, so the Conversation lane, blocked contacts and idempotency apply;
 * the 24-hour window does not.
 */
export class TemplateSending extends Context.Service<TemplateSending, {
  /** `templateId` is a group id or an instance id; `language` defaults to the group's first language. */
  approved(companyId: CompanyId, input: {
    readonly templateId: number
    readonly channelId: number
    readonly language?: string | undefined
  }): Effect.Effect<ApprovedTemplate, TemplateRefusal>
  /** Renders the body with `variables` and sends it on the thread as a `template` message; counts a use. */
  deliver(input: {
    readonly thread: ThreadContext
    readonly userId: number
    readonly template: ApprovedTemplate
    readonly variables: Readonly<Record<string, string>>
    readonly idempotency: { readonly key: string; readonly hash: string } | null
    readonly metadata?: Readonly<Record<string, unknown>> | undefined
  }): Effect.Effect<Message, TemplateRefusal | SendRefusal | SendUnavailable>
}>()("crm/templates/TemplateSending") {}
