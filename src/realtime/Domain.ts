import { Schema } from "effect"

// The same shapes the gateway accepts (see Pusher.ts): pusher-js sends `<int>.<int>` socket ids.
export const SocketId = Schema.String.check(
  Schema.isPattern(/^\d{1,10}\.\d{1,10}$/, { message: "The socket id field must be a Pusher socket id." })
)

export const ChannelName = Schema.String.check(
  Schema.isPattern(/^[A-Za-z0-9_\-=@,.;]{1,200}$/, { message: "The channel name field must be a valid channel name." })
)

export const BroadcastingAuthRequest = Schema.Struct({
  socket_id: SocketId,
  channel_name: ChannelName
})
export type BroadcastingAuthRequest = typeof BroadcastingAuthRequest.Type

/**
 * Flat, as Pusher and Laravel answer it: `auth` is `<app key>:<hex hmac-sha256 of
 * "socket_id:channel:channel_data">`; `channel_data` (`{"user_id":…}`) is what pusher-js sends back
 * with the subscription, so the gateway knows whose it is and can end it when the member is removed.
 */
export const BroadcastingAuth = Schema.Struct({ auth: Schema.String, channel_data: Schema.String })
export type BroadcastingAuth = typeof BroadcastingAuth.Type

export const companyChannel = (companyId: number) => `private-company.${companyId}`
export const userChannel = (userId: number) => `private-user.${userId}`
