export const ChannelTypes = ["msgr_a", "msgr_a_business", "msgr_b", "msgr_c_business"] as const
export type ChannelType = typeof ChannelTypes[number]
export const ProviderKinds = ["sandbox", "telegram", "whatsapp_cloud"] as const
export type ProviderKind = typeof ProviderKinds[number]

/** What each channel type allows; the message rules (windows, revoke, likes) read only this table. */
export interface ChannelRules {
  /** Free-form sends need an inbound message within the last 24 h; otherwise a template. */
  readonly customerWindowHours: number | null
  readonly revoke: boolean
  readonly revokeWindowSeconds: number | null
  readonly editWindowSeconds: number | null
  /** Comment threads that can be liked (social inbox). */
  readonly likes: boolean
  /** The provider can block a user (contact block propagation). */
  readonly providerBlock: boolean
  /** Calls over the channel need the user's permission, asked for with a call-permission request. */
  readonly callPermission: boolean
}

export const channelRules: Record<ChannelType, ChannelRules> = {
  msgr_a: { customerWindowHours: null, revoke: true, revokeWindowSeconds: 48 * 3600, editWindowSeconds: 15 * 60, likes: false, providerBlock: true, callPermission: false },
  msgr_a_business: { customerWindowHours: 24, revoke: false, revokeWindowSeconds: null, editWindowSeconds: 15 * 60, likes: false, providerBlock: true, callPermission: true },
  msgr_b: { customerWindowHours: null, revoke: true, revokeWindowSeconds: 48 * 3600, editWindowSeconds: 48 * 3600, likes: false, providerBlock: false, callPermission: false },
  msgr_c_business: { customerWindowHours: 24 * 7, revoke: true, revokeWindowSeconds: 24 * 3600, editWindowSeconds: null, likes: true, providerBlock: false, callPermission: false }
}
