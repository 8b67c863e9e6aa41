import { Option, Schema } from "effect"

export const ChannelKeys = ["mail", "push", "msgr_a"] as const
export type ChannelKey = typeof ChannelKeys[number]

export const CategoryKeys = ["transactional", "onboarding", "trial", "billing", "win_back", "engagement"] as const
export type CategoryKey = typeof CategoryKeys[number]

export const PushTriggerKeys = [
  "chat_message_new",
  "conversation_assigned",
  "call_missed",
  "call_incoming",
  "company_unassigned"
] as const
export type PushTriggerKey = typeof PushTriggerKeys[number]

export const categoryLabels: Record<CategoryKey, string> = {
  transactional: "Transactional",
  onboarding: "Onboarding",
  trial: "Trial",
  billing: "Billing",
  win_back: "Win-back",
  engagement: "Engagement"
}

/**
 * Categories a user cannot turn off. Transactional by the spec's rule; billing because the
 * spec makes `channels.msgr_a=false` the *only* way to opt out of billing messenger copies,
 * which a billing switch would contradict.
 */
export const fixedCategories: ReadonlySet<CategoryKey> = new Set(["transactional", "billing"])

export const defaultPushTriggers: Record<PushTriggerKey, boolean> = {
  chat_message_new: true,
  conversation_assigned: true,
  call_missed: true,
  call_incoming: true,
  company_unassigned: false
}

const ClockTime = Schema.String.check(
  Schema.isPattern(/^([01]\d|2[0-3]):[0-5]\d$/, { message: "The time must be in HH:MM (24-hour) format." })
)

const Category = Schema.Struct({ enabled: Schema.Boolean, label: Schema.String, controllable: Schema.Boolean })

const structOf = <K extends string, S extends Schema.Top>(keys: ReadonlyArray<K>, schema: S) =>
  Schema.Struct(Object.fromEntries(keys.map((key) => [key, schema])) as { readonly [P in K]: S })

const QuietHours = Schema.Struct({ enabled: Schema.Boolean, start: Schema.NullOr(ClockTime), end: Schema.NullOr(ClockTime) })

/** The snapshot answered by GET and PUT: the four blocks with every key filled in. */
export const NotificationPreferences = Schema.Struct({
  channels: structOf(ChannelKeys, Schema.Boolean),
  categories: structOf(CategoryKeys, Category),
  push_triggers: structOf(PushTriggerKeys, Schema.Boolean),
  quiet_hours: QuietHours
})
export type NotificationPreferences = typeof NotificationPreferences.Type

// `label` and `controllable` are read-only but accepted, so a client can PUT back what it read.
const CategoryPatch = Schema.Struct({
  enabled: Schema.optionalKey(Schema.Boolean),
  label: Schema.optionalKey(Schema.String),
  controllable: Schema.optionalKey(Schema.Boolean)
})

/** PUT body: any subset of the four blocks; unknown keys are refused by the endpoint's parse options. */
export const PreferencesPatch = Schema.Struct({
  channels: Schema.optionalKey(structOf(ChannelKeys, Schema.optionalKey(Schema.Boolean))),
  categories: Schema.optionalKey(structOf(CategoryKeys, Schema.optionalKey(CategoryPatch))),
  push_triggers: Schema.optionalKey(structOf(PushTriggerKeys, Schema.optionalKey(Schema.Boolean))),
  quiet_hours: Schema.optionalKey(Schema.Struct({
    enabled: Schema.optionalKey(Schema.Boolean),
    start: Schema.optionalKey(Schema.NullOr(ClockTime)),
    end: Schema.optionalKey(Schema.NullOr(ClockTime))
  }))
})
export type PreferencesPatch = typeof PreferencesPatch.Type

/**
 * What is stored per user: only the keys the user has set, so a default changed later
 * still reaches everyone who never touched it.
 */
export const StoredPreferences = Schema.Struct({
  channels: Schema.optionalKey(structOf(ChannelKeys, Schema.optionalKey(Schema.Boolean))),
  categories: Schema.optionalKey(structOf(CategoryKeys, Schema.optionalKey(Schema.Boolean))),
  push_triggers: Schema.optionalKey(structOf(PushTriggerKeys, Schema.optionalKey(Schema.Boolean))),
  quiet_hours: Schema.optionalKey(Schema.Struct({
    enabled: Schema.optionalKey(Schema.Boolean),
    start: Schema.optionalKey(Schema.NullOr(ClockTime)),
    end: Schema.optionalKey(Schema.NullOr(ClockTime))
  }))
})
export type StoredPreferences = typeof StoredPreferences.Type

const decodeStored = Schema.decodeUnknownOption(StoredPreferences)

/** A stored document that no longer decodes (hand-edited, older shape) reads as "nothing set". */
export const readStored = (raw: unknown): StoredPreferences => Option.getOrElse(decodeStored(raw), () => ({}))

const mapKeys = <K extends string, A>(keys: ReadonlyArray<K>, f: (key: K) => A) =>
  Object.fromEntries(keys.map((key) => [key, f(key)])) as Record<K, A>

/** The full snapshot: stored values over the defaults, fixed categories forced on. */
export const resolvePreferences = (stored: StoredPreferences): NotificationPreferences => ({
  channels: mapKeys(ChannelKeys, (key) => stored.channels?.[key] ?? true),
  categories: mapKeys(CategoryKeys, (key) => ({
    enabled: fixedCategories.has(key) ? true : stored.categories?.[key] ?? true,
    label: categoryLabels[key],
    controllable: !fixedCategories.has(key)
  })),
  push_triggers: mapKeys(PushTriggerKeys, (key) => stored.push_triggers?.[key] ?? defaultPushTriggers[key]),
  quiet_hours: {
    enabled: stored.quiet_hours?.enabled ?? false,
    start: stored.quiet_hours?.start ?? null,
    end: stored.quiet_hours?.end ?? null
  }
})

const definedOnly = <A extends object>(value: A | undefined) =>
  Object.fromEntries(Object.entries(value ?? {}).filter(([, v]) => v !== undefined))

/** Partial merge: keys present in the patch replace the stored ones, every other key is kept. */
export const mergePreferences = (stored: StoredPreferences, patch: PreferencesPatch): StoredPreferences => {
  const categories = Object.fromEntries(
    Object.entries(patch.categories ?? {}).flatMap(([key, value]) =>
      value?.enabled === undefined || fixedCategories.has(key as CategoryKey) ? [] : [[key, value.enabled]]
    )
  )
  return {
    channels: { ...stored.channels, ...definedOnly(patch.channels) },
    categories: { ...stored.categories, ...categories },
    push_triggers: { ...stored.push_triggers, ...definedOnly(patch.push_triggers) },
    quiet_hours: { ...stored.quiet_hours, ...definedOnly(patch.quiet_hours) }
  }
}
