import type { ProviderTemplate } from "../providers/Provider.ts"
import { type Template, templateChannelType, type Version } from "./Domain.ts"
import type { Content, GroupRow, InstanceRow } from "./Repo.ts"
import { variablesIn } from "./Rules.ts"

export const iso = (d: Date | null) => d === null ? null : d.toISOString()

export const contentFrom = (row: InstanceRow): Content => ({
  category: row.category,
  body: row.body,
  parameters: row.parameters,
  header_enabled: row.header_enabled,
  header_type: row.header_type,
  header_text: row.header_text,
  footer_enabled: row.footer_enabled,
  footer_text: row.footer_text,
  buttons_enabled: row.buttons_enabled,
  buttons: row.buttons,
  labels: row.labels
})

export const languagesOf = (rows: ReadonlyArray<InstanceRow>) => [...new Set(rows.map((r) => r.language))]

export const versionsOf = (group: GroupRow, rows: ReadonlyArray<InstanceRow>): ReadonlyArray<Version> =>
  rows.map((r) => ({ id: r.id, language: r.language, channel_id: r.channel_id, status: group.status, meta_status: r.meta_status }))

/** The instance an id shows: that instance, else the group's first. */
export const shown = (instanceId: number | null, all: ReadonlyArray<InstanceRow>) =>
  all.find((r) => r.id === instanceId) ?? all[0]

/** The group's aggregate, seen from one instance's language. */
const logicalOf = (row: InstanceRow, all: ReadonlyArray<InstanceRow>, uses: ReadonlyMap<number, number>): Template["logical_template"] => {
  const counts: Record<string, number> = {}
  for (const r of all) counts[r.meta_status] = (counts[r.meta_status] ?? 0) + 1
  const statuses = Object.keys(counts)
  const sameLanguage = all.filter((r) => r.language === row.language && r.channel_id !== null && r.channel_name !== null)
  return {
    instances_count: all.length,
    assigned_channels_count: new Set(all.flatMap((r) => r.channel_id === null ? [] : [r.channel_id])).size,
    uses_count: all.reduce((n, r) => n + (uses.get(r.id) ?? 0), 0),
    languages: languagesOf(all),
    channels: sameLanguage.map((r) => ({
      id: r.channel_id!,
      name: r.channel_name!,
      account_name: r.channel_account_name,
      meta_status: r.meta_status,
      meta_status_reason: r.meta_status_reason,
      last_synced_at: iso(r.last_synced_at)
    })),
    meta_status_counts: counts,
    meta_overall_status: statuses.length === 1 ? statuses[0] : statuses.length === 0 ? "local" : "mixed"
  }
}

/** One instance as the API shows it, with its group's aggregate. */
export const toTemplate = (group: GroupRow, row: InstanceRow, all: ReadonlyArray<InstanceRow>, uses: ReadonlyMap<number, number>): Template => ({
  id: row.id,
  company_id: row.company_id,
  template_group_id: group.id,
  channel_type: templateChannelType,
  channel: row.channel_id === null || row.channel_name === null
    ? null
    : { id: row.channel_id, name: row.channel_name, account_name: row.channel_account_name },
  name: group.name,
  slug: group.slug,
  language: row.language,
  status: group.status,
  meta_status: row.meta_status,
  meta_status_reason: row.meta_status_reason,
  last_synced_at: iso(row.last_synced_at),
  external_id: row.external_id,
  ...contentFrom(row),
  uses_count: uses.get(row.id) ?? 0,
  logical_template: logicalOf(row, all, uses),
  versions: versionsOf(group, all),
  created_at: row.created_at.toISOString(),
  updated_at: (row.updated_at > group.updated_at ? row.updated_at : group.updated_at).toISOString()
})

/** What the provider reviews for one instance. */
export const providerTemplate = (slug: string, row: InstanceRow): ProviderTemplate => {
  const examples = (text: string | null) =>
    variablesIn(text).map((name) => ({ name, value: row.parameters.find((p) => p.name === name)?.sample_value ?? "" }))
  const header = row.header_enabled && row.header_text !== null ? row.header_text : null
  return {
    name: slug,
    language: row.language,
    category: row.category,
    header: header === null ? null : { text: header, examples: examples(header) },
    body: { text: row.body, examples: examples(row.body) },
    footer: row.footer_enabled ? row.footer_text : null,
    buttons: row.buttons_enabled ? row.buttons.map((b) => ({ type: b.type, label: b.label, value: b.value })) : []
  }
}
