import { createHmac, randomInt, timingSafeEqual } from "node:crypto"
import { Option, Schema } from "effect"

export const ACTIVITY_TIMEOUT_SECONDS = 120

// Pusher Channels protocol v7 codes: 4000-4099 refused (client gives up), 4100-4199 reconnect
// after backoff, 4200-4299 reconnect immediately, 4300+ other.
export const ErrorCode = {
  AppNotFound: 4001,
  OverCapacity: 4100,
  Reconnect: 4200,
  ClientEventRejected: 4301
} as const

// With `channel_data` the signed string is `socket_id:channel:channel_data`, as Pusher signs presence
// channels; here it binds a private subscription to the user it was granted to.
export const sign = (secret: string, socketId: string, channelName: string, channelData?: string): string =>
  createHmac("sha256", secret)
    .update(channelData === undefined ? `${socketId}:${channelName}` : `${socketId}:${channelName}:${channelData}`)
    .digest("hex")

export const authFor = (key: string, secret: string, socketId: string, channelName: string, channelData?: string): string =>
  `${key}:${sign(secret, socketId, channelName, channelData)}`

export const verify = (
  key: string,
  secret: string,
  socketId: string,
  channelName: string,
  auth: string,
  channelData?: string
): boolean => {
  const expected = Buffer.from(authFor(key, secret, socketId, channelName, channelData), "utf8")
  const given = Buffer.from(auth, "utf8")
  return expected.length === given.length && timingSafeEqual(expected, given)
}

const SOCKET_ID_PART_MAX = 2_147_483_647

export const makeSocketId = (): string => `${randomInt(1, SOCKET_ID_PART_MAX)}.${randomInt(1, SOCKET_ID_PART_MAX)}`

export const isSocketId = (value: string): boolean => /^\d+\.\d+$/.test(value)

const CHANNEL_NAME = /^[A-Za-z0-9_\-=@,.;]{1,200}$/

export const isChannelName = (value: string): boolean => CHANNEL_NAME.test(value)

export type SubscriptionDecision =
  /** `userId`: whom the signed `channel_data` names, if it names anyone. */
  | { readonly _tag: "Granted"; readonly userId: number | null }
  | { readonly _tag: "Refused"; readonly status: 401 | 403; readonly error: string }

// This product only has private channels: public channels would leak tenant events to anyone with
// the (public) app key, and presence / end-to-end encrypted channels need payloads we do not produce.
export const authorizeSubscription = (
  key: string,
  secret: string,
  socketId: string,
  channel: string,
  auth: string | undefined,
  channelData?: string
): SubscriptionDecision => {
  if (!isChannelName(channel)) {
    return { _tag: "Refused", status: 403, error: "Invalid channel name" }
  }
  if (!channel.startsWith("private-") || channel.startsWith("private-encrypted-")) {
    return { _tag: "Refused", status: 403, error: "Only private channels are supported" }
  }
  if (auth === undefined || !verify(key, secret, socketId, channel, auth, channelData)) {
    return { _tag: "Refused", status: 401, error: `Invalid signature for ${channel}` }
  }
  return { _tag: "Granted", userId: channelData === undefined ? null : Option.getOrNull(decodeChannelData(channelData)) }
}

const ChannelData = Schema.Struct({ user_id: Schema.Int })
const decodeChannelData = (text: string) =>
  Option.map(Schema.decodeUnknownOption(Schema.fromJsonString(ChannelData))(text), (data) => data.user_id)

/** What `/v1/broadcasting/auth` signs along with a subscription: the user it is granted to. */
export const channelDataFor = (userId: number): string => JSON.stringify({ user_id: userId })

export type ClientMessage =
  | { readonly _tag: "Ping" }
  | {
    readonly _tag: "Subscribe"
    readonly channel: string
    readonly auth: string | undefined
    readonly channelData: string | undefined
  }
  | { readonly _tag: "Unsubscribe"; readonly channel: string }
  | { readonly _tag: "ClientEvent"; readonly event: string }
  | { readonly _tag: "Other"; readonly event: string }
  | { readonly _tag: "Malformed" }

const Envelope = Schema.Struct({
  event: Schema.String,
  channel: Schema.optional(Schema.String),
  data: Schema.optional(Schema.Unknown)
})
const SubscribeData = Schema.Struct({
  channel: Schema.String,
  auth: Schema.optional(Schema.String),
  channel_data: Schema.optional(Schema.String)
})
const UnsubscribeData = Schema.Struct({ channel: Schema.String })

const decodeEnvelope = Schema.decodeUnknownOption(Schema.fromJsonString(Envelope))
const decodeSubscribeData = Schema.decodeUnknownOption(SubscribeData)
const decodeUnsubscribeData = Schema.decodeUnknownOption(UnsubscribeData)

const malformed: ClientMessage = { _tag: "Malformed" }
const ping: ClientMessage = { _tag: "Ping" }

export const decodeClientMessage = (text: string): ClientMessage => {
  const envelope = decodeEnvelope(text)
  if (Option.isNone(envelope)) return malformed
  const { data, event } = envelope.value
  switch (event) {
    case "pusher:ping":
      return ping
    case "pusher:subscribe":
      return Option.match(decodeSubscribeData(data), {
        onNone: () => malformed,
        onSome: ({ auth, channel, channel_data }) => ({ _tag: "Subscribe", channel, auth, channelData: channel_data })
      })
    case "pusher:unsubscribe":
      return Option.match(decodeUnsubscribeData(data), {
        onNone: () => malformed,
        onSome: ({ channel }) => ({ _tag: "Unsubscribe", channel })
      })
    default:
      return event.startsWith("client-") ? { _tag: "ClientEvent", event } : { _tag: "Other", event }
  }
}

// Server-to-client `data` is always a JSON *string* (double-encoded): pusher-js and Echo parse it again.
const frame = (event: string, channel: string | undefined, data: string): string =>
  JSON.stringify(channel === undefined ? { event, data } : { event, channel, data })

export const connectionEstablished = (socketId: string): string =>
  frame(
    "pusher:connection_established",
    undefined,
    JSON.stringify({ socket_id: socketId, activity_timeout: ACTIVITY_TIMEOUT_SECONDS })
  )

export const pong: string = frame("pusher:pong", undefined, "{}")

export const error = (code: number, message: string): string =>
  frame("pusher:error", undefined, JSON.stringify({ code, message }))

export const subscriptionSucceeded = (channel: string): string =>
  frame("pusher_internal:subscription_succeeded", channel, "{}")

// pusher-js re-emits any non-internal event carrying `channel` on that channel object, so this
// surfaces as `channel.bind("pusher:subscription_error", ...)` with the same shape pusher-js uses
// for a failed authorizer call.
export const subscriptionError = (channel: string, status: number, message: string): string =>
  frame("pusher:subscription_error", channel, JSON.stringify({ type: "AuthError", error: message, status }))

export const channelEvent = (channel: string, event: string, data: unknown): string =>
  frame(event, channel, JSON.stringify(data) ?? "null")
