import { Effect, Layer } from "effect"
import { FetchHttpClient } from "effect/http"
import { makePacing } from "./Pacing.ts"
import { type ChannelContext, ProviderError, Providers, type RawAdapter } from "./Provider.ts"
import { makeSandbox, SandboxLog } from "./Sandbox.ts"
import { TelegramApi } from "./Telegram.ts"
import { WhatsAppCloudApi } from "./WhatsAppCloud.ts"

const offline = Effect.fail(new ProviderError({ code: "channel_offline", message: "The channel is disconnected." }))

/** A disconnected channel makes no provider calls at all. */
const whenConnected = (adapter: RawAdapter): RawAdapter => {
  const guard = <Args extends [ChannelContext, ...Array<any>], A, E>(f: (...args: Args) => Effect.Effect<A, E>) =>
  (...args: Args): Effect.Effect<A, E | ProviderError> => args[0].status === "disconnected" ? offline : f(...args)
  return {
    send: guard(adapter.send),
    edit: guard(adapter.edit),
    revoke: guard(adapter.revoke),
    react: guard(adapter.react),
    like: guard(adapter.like),
    block: guard(adapter.block),
    unblock: guard(adapter.unblock),
    download: guard(adapter.download),
    requestCallPermission: guard(adapter.requestCallPermission),
    submitTemplate: guard(adapter.submitTemplate),
    templatePage: guard(adapter.templatePage),
    deleteTemplate: guard(adapter.deleteTemplate)
  }
}

/**
 * The adapter for each channel's `provider`. Also exposes `SandboxLog` (what the sandbox
 * received, for tests) and `TelegramApi` (webhook registration).
 */
export const ProvidersLayer = Layer.effect(
  Providers,
  Effect.gen(function*() {
    // The sandbox logs its own refusals, a disconnected channel included.
    const paced = yield* makePacing
    const sandbox = paced(yield* makeSandbox)
    const telegram = paced(whenConnected((yield* TelegramApi).adapter))
    const whatsapp = paced(whenConnected((yield* WhatsAppCloudApi).adapter))
    return Providers.of({
      forChannel: (channel) =>
        channel.provider === "telegram" ? telegram : channel.provider === "whatsapp_cloud" ? whatsapp : sandbox
    })
  })
).pipe(
  Layer.provideMerge(Layer.mergeAll(SandboxLog.layer, TelegramApi.layer, WhatsAppCloudApi.layer)),
  Layer.provide(FetchHttpClient.layer)
)
