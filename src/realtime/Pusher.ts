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
  /** `userId`: whom the signed `channel_data` names, if it names anyone; `userInfo` too on a presence channel. */
  | { readonly _tag: "Granted"; readonly userId: number | null; readonly userInfo?: unknown }
  | { readonly _tag: "Refused"; readonly status: 401 | 403; readonly error: string }

export const isPresence = (channel: string) => channel.startsWith("presence-")

// Private and presence channels only: public channels would leak tenant events to anyone with the
// (public) app key, and end-to-end encrypted channels need keys this product does not hand out. A
// presence subscription must carry the signed `channel_data` naming its member.
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
  const presence = isPresence(channel)
  if (!(presence || channel.startsWith("private-")) || channel.startsWith("private-encrypted-")) {
    return { _tag: "Refused", status: 403, error: "Only private and presence channels are supported" }
  }
  if (presence && channelData === undefined) {
    return { _tag: "Refused", status: 403, error: "A presence channel needs channel_data" }
  }
  if (auth === undefined || !verify(key, secret, socketId, channel, auth, channelData)) {
    return { _tag: "Refused", status: 401, error: `Invalid signature for ${channel}` }
  }
  if (channelData === undefined) return { _tag: "Granted", userId: null }
  const member = decodeChannelData(channelData)
  if (presence && Option.isNone(member)) return { _tag: "Refused", status: 403, error: "Invalid channel_data" }
  return Option.match(member, {
    onNone: () => ({ _tag: "Granted", userId: null }),
    onSome: (m) => (m.user_info === undefined ? { _tag: "Granted", userId: m.user_id } : { _tag: "Granted", userId: m.user_id, userInfo: m.user_info })
  })
}

const ChannelData = Schema.Struct({ user_id: Schema.Int, user_info: Schema.optional(Schema.Unknown) })
const decodeChannelData = Schema.decodeUnknownOption(Schema.fromJsonString(ChannelData))

/** What `/v1/broadcasting/auth` signs along with a subscription: the user it is granted to (and, on a presence channel, who they are). */
export const channelDataFor = (userId: number, userInfo?: unknown): string =>
  JSON.stringify(userInfo === undefined ? { user_id: userId } : { user_id: userId, user_info: userInfo })

export type ClientMessage =
  | { readonly _tag: "Ping" }
  | {
    readonly _tag: "Subscribe"
    readonly channel: string
    readonly auth: string | undefined
    readonly channelData: string | undefined
  }
  | { readonly _tag: "Unsubscribe"; readonly channel: string }
  | { readonly _tag: "ClientEvent"; readonly event: string; readonly channel: string | undefined; readonly data: unknown }
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
      return event.startsWith("client-")
        ? { _tag: "ClientEvent", event, channel: envelope.value.channel, data }
        : { _tag: "Other", event }
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

export interface PresenceMember {
  readonly userId: number
  readonly userInfo: unknown
}

/** The members present when a socket joins, as pusher-js reads them (`channel.members`). */
export const presenceSucceeded = (channel: string, members: ReadonlyArray<PresenceMember>): string =>
  frame("pusher_internal:subscription_succeeded", channel, JSON.stringify({
    presence: {
      ids: members.map((m) => String(m.userId)),
      hash: Object.fromEntries(members.map((m) => [String(m.userId), m.userInfo ?? null])),
      count: members.length
    }
  }))

export const memberAdded = (channel: string, member: PresenceMember): string =>
  frame("pusher_internal:member_added", channel, JSON.stringify({ user_id: String(member.userId), user_info: member.userInfo ?? null }))

export const memberRemoved = (channel: string, userId: number): string =>
  frame("pusher_internal:member_removed", channel, JSON.stringify({ user_id: String(userId) }))

/** A client event relayed to the channel's other members, naming its sender as Pusher does on presence channels. */
export const clientEvent = (channel: string, event: string, data: unknown, userId: number): string =>
  JSON.stringify({ event, channel, data: JSON.stringify(data ?? null), user_id: String(userId) })

/** Client events a socket may send: a burst of `burst`, refilled at `perSecond` (Pusher's limit is 10 a second). */
export const clientEventLimit = { burst: 10, perSecond: 10 } as const

export interface Bucket {
  readonly tokens: number
  readonly at: number
}

/** Takes a token at `now` (ms): the bucket after, and whether the event may go. */
export const takeToken = (bucket: Bucket, now: number): { readonly bucket: Bucket; readonly allowed: boolean } => {
  const refilled = Math.min(clientEventLimit.burst, bucket.tokens + Math.max(0, now - bucket.at) * clientEventLimit.perSecond / 1000)
  return refilled >= 1
    ? { bucket: { tokens: refilled - 1, at: now }, allowed: true }
    : { bucket: { tokens: refilled, at: now }, allowed: false }
}
