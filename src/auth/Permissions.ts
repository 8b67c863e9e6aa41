export const Roles = ["admin", "manager", "agent"] as const
export type Role = typeof Roles[number]

const crud = ["view", "create", "update", "delete"] as const

/** The one permission catalog: every key is `<resource>.<action>`. */
const catalog: Record<string, ReadonlyArray<string>> = {
  company: ["view", "update"],
  company_telephony: ["manage"],
  member: ["view", "update", "delete"],
  invitation: crud,
  team: crud,
  user: ["view"],
  api_token: crud,
  channel: crud,
  conversation: crud,
  contact: crud,
  tag: crud,
  sticker: crud,
  deal: crud,
  lost_reason: ["manage"],
  template: crud,
  segment: crud,
  broadcast: crud,
  automation: crud,
  export: ["view", "create"],
  integration: crud
}

export const AllPermissions: ReadonlyArray<string> = Object.entries(catalog).flatMap(([resource, actions]) =>
  actions.map((action) => `${resource}.${action}`)
)

const managerDenied = new Set([
  "company.update",
  "company_telephony.manage",
  "api_token.create",
  "api_token.update",
  "api_token.delete",
  "member.update",
  "member.delete",
  "integration.create",
  "integration.update",
  "integration.delete"
])

const agentAllowed = new Set([
  "company.view",
  "member.view",
  "team.view",
  "user.view",
  "channel.view",
  "conversation.view",
  "conversation.create",
  "conversation.update",
  "contact.view",
  "contact.create",
  "contact.update",
  "tag.view",
  "sticker.view",
  "sticker.create",
  "deal.view",
  "deal.create",
  "deal.update",
  "template.view",
  "segment.view",
  "broadcast.view",
  "automation.view"
])

// The spec spells the contact update permission `contact:update` in places; both
// spellings are granted together so a client checking either finds it.
const withAliases = (permissions: ReadonlyArray<string>) =>
  permissions.includes("contact.update") ? [...permissions, "contact:update"] : permissions

export const rolePermissions: Record<Role, ReadonlySet<string>> = {
  admin: new Set(withAliases(AllPermissions)),
  manager: new Set(withAliases(AllPermissions.filter((p) => !managerDenied.has(p)))),
  agent: new Set(withAliases(AllPermissions.filter((p) => agentAllowed.has(p))))
}

export type Permission = string
