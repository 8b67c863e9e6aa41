import { Context, Effect, Layer, Option, Result, Schema } from "effect"
import type { CompanyId } from "../auth/Domain.ts"
import type { OutgoingTemplate } from "../messages/SendLane.ts"
import { TemplatesRepo } from "./Repo.ts"
import { render } from "./Rules.ts"

/**
 * Why a template send was not made. `field` is the request field a 422 names
 * (`template_id`, `language`, `variables.<name>`); broadcasts and automations turn
 * the reason into a skipped recipient or a failed step.
 */
export class TemplateRefusal extends Schema.TaggedError<TemplateRefusal>()("TemplateRefusal", {
  reason: Schema.Literals(["template_not_found", "no_approved_instance", "missing_variable"]),
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

/** Which instance to send: see `TemplateSending.approved`. */
export interface TemplateChoice {
  readonly templateId: number
  readonly channelId: number
  readonly language?: string | undefined
}

const refuse = (reason: TemplateRefusal["reason"], field: string, message: string) => new TemplateRefusal({ reason, field, message })

/** A rendered template as either door of `messages/Send.ts` takes it. */
export interface TemplateContent {
  readonly text: string
  readonly attachments: ReadonlyArray<never>
  readonly template: OutgoingTemplate
  readonly metadata: Record<string, unknown>
}

/**
 * Renders header, body and footer with `variables` into a `template` message's content, whose
 * metadata carries the template reference (what counts the template's uses); the first missing
 * variable refuses it.
 */
export const templateContent = (
  t: ApprovedTemplate,
  variables: Readonly<Record<string, string>>,
  metadata: Readonly<Record<string, unknown>> = {}
): Result.Result<TemplateContent, TemplateRefusal> => {
  const rendered = render(t, variables)
  if (rendered._tag === "Missing") {
    const name = rendered.names[0]
    return Result.fail(refuse("missing_variable", `variables.${name}`, `The variable ${name} is required.`))
  }
  return Result.succeed({
    text: rendered.value.text,
    attachments: [],
    template: { name: t.slug, language: t.language, header: rendered.value.header, body: rendered.value.body },
    metadata: {
      ...metadata,
      template: { id: t.instanceId, template_group_id: t.groupId, name: t.name, slug: t.slug, language: t.language, variables }
    }
  })
}

/**
 * The approved templates other areas (broadcasts, automations, send-template) send. The send itself
 * takes `templateContent` through a door of `messages/Send.ts`, whose rules let a template through a
 * closed customer-service window.
 */
export class TemplateSending extends Context.Service<TemplateSending, {
  /**
   * `templateId` is a group id or an instance id; `language` defaults to that instance's language,
   * else the group's first language. An archived template has no approved instance.
   */
  approved(companyId: CompanyId, input: TemplateChoice): Effect.Effect<ApprovedTemplate, TemplateRefusal>
}>()("crm/templates/TemplateSending") {
  static readonly layerNoDeps = Layer.effect(
    TemplateSending,
    Effect.gen(function*() {
      const repo = yield* TemplatesRepo

      const approved = Effect.fn("TemplateSending.approved")(function*(companyId: CompanyId, input: TemplateChoice) {
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

      return TemplateSending.of({ approved })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide(TemplatesRepo.layer))
}
