import { Config, Context, Effect, Layer, Option, Predicate, Redacted, Schema } from "effect"
import { FetchHttpClient, HttpClient, HttpClientRequest } from "effect/http"

/** Why the helper gave no text: not configured (503), or the model endpoint failed (502). */
export class AssistUnavailable extends Schema.TaggedError<AssistUnavailable>()("AssistUnavailable", {
  reason: Schema.Literals(["not_configured", "upstream_failed"]),
  message: Schema.String
}) {}

export interface AssistAnswer {
  readonly text: string
  readonly tokensUsed: number
}

const instructions = {
  generate: "Write a short, friendly broadcast message for a messenger audience from the brief below. Answer with the message text only.",
  improve: "Improve the broadcast message below: clearer, friendlier, same meaning and placeholders such as {{first_name}}. Answer with the message text only."
} as const

const Completion = Schema.Struct({
  choices: Schema.Array(Schema.Struct({ message: Schema.Struct({ content: Schema.NullOr(Schema.String) }) })).check(Schema.isMinLength(1)),
  usage: Schema.optional(Schema.Struct({ total_tokens: Schema.optional(Schema.Int) }))
})

/** The text assist port; the real adapter speaks the OpenAI-compatible chat completions API. */
export class Assist extends Context.Service<Assist, {
  complete(action: "generate" | "improve", text: string, locale: string | null): Effect.Effect<AssistAnswer, AssistUnavailable>
}>()("crm/broadcasts/Assist") {
  static readonly layer = Layer.effect(
    Assist,
    Effect.gen(function*() {
      const url = yield* Config.option(Config.String("ASSIST_API_URL"))
      const key = yield* Config.option(Config.Redacted("ASSIST_API_KEY"))
      const model = yield* Config.String("ASSIST_MODEL").pipe(Config.withDefault("gpt-4o-mini"))
      const client = yield* HttpClient.HttpClient
      const notConfigured = new AssistUnavailable({ reason: "not_configured", message: "Text assist is not configured." })
      const failed = new AssistUnavailable({ reason: "upstream_failed", message: "The text assist service did not answer." })
      return Assist.of({
        complete: (action, text, locale) =>
          Option.isNone(url) ? Effect.fail(notConfigured) : Effect.gen(function*() {
            const system = `${instructions[action]}${locale ? ` Write in the language of locale ${locale}.` : ""}`
            let request = HttpClientRequest.post(`${url.value.replace(/\/$/, "")}/chat/completions`).pipe(
              HttpClientRequest.bodyJsonUnsafe({ model, messages: [{ role: "system", content: system }, { role: "user", content: text }] })
            )
            if (Option.isSome(key)) request = HttpClientRequest.bearerToken(request, Redacted.value(key.value))
            const response = yield* client.execute(request).pipe(Effect.timeout("30 seconds"))
            if (response.status >= 300) return yield* failed
            const body = yield* Schema.decodeUnknownEffect(Completion)(yield* response.json)
            return { text: (body.choices[0].message.content ?? "").trim(), tokensUsed: body.usage?.total_tokens ?? 0 }
          }).pipe(Effect.catchIf((e) => !Predicate.isTagged(e, "AssistUnavailable"), () => Effect.fail(failed)))
      })
    }).pipe(Effect.orDie)
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
