import type { CatalogEntry } from "./Domain.ts"

const entry = (key: string, name: string, group: string, type: string, description: string): CatalogEntry => ({
  key,
  name,
  group,
  type,
  description
})

/** Every event key the platform emits. Areas add their keys here when they start emitting them. */
export const Catalog: ReadonlyArray<CatalogEntry> = [
  entry("message.created", "Message created", "messaging", "message", "A new message was created in a conversation."),
  entry("message.updated", "Message updated", "messaging", "message", "A message was edited, deleted, changed status or gained attachments."),
  entry("message.reaction.updated", "Reaction updated", "messaging", "message", "A reaction was added or removed."),
  entry("conversation.created", "Conversation created", "messaging", "conversation", "A conversation was started."),
  entry("contact.created", "Contact created", "contacts", "contact", "A contact was created."),
  entry("contact.updated", "Contact updated", "contacts", "contact", "A contact was changed."),
  entry("contact.deleted", "Contact deleted", "contacts", "contact", "A contact was deleted."),
  entry("contact.merged", "Contact merged", "contacts", "contact", "A contact was merged into another."),
  entry("contact.blocked", "Contact blocked", "contacts", "contact", "A contact was blocked."),
  entry("contact.unblocked", "Contact unblocked", "contacts", "contact", "A contact was unblocked."),
  entry("contact.opted_out", "Contact opted out", "contacts", "contact", "A contact opted out of broadcasts."),
  entry("contact.opted_in", "Contact opted in", "contacts", "contact", "A contact opted back in to broadcasts."),
  entry(
    "contact.call_permission.updated",
    "Call permission changed",
    "contacts",
    "contact",
    "A call-permission request went out, or the contact granted or refused calls on a channel."
  ),
  entry("segment.created", "Segment created", "contacts", "segment", "A segment was created."),
  entry("segment.updated", "Segment updated", "contacts", "segment", "A segment's definition or static members changed."),
  entry("segment.deleted", "Segment deleted", "contacts", "segment", "A segment was deleted."),
  entry(
    "sticker.pack.import.finished",
    "Sticker set import finished",
    "stickers",
    "sticker_pack",
    "A background sticker-set import ended."
  ),
  entry("api_token.created", "API token created", "system", "api_token", "A service-account token was created."),
  entry("api_token.deleted", "API token deleted", "system", "api_token", "A service-account token was revoked."),
  entry("team.created", "Team created", "organization", "team", "A team was created."),
  entry("team.updated", "Team updated", "organization", "team", "A team's name, channels or members changed."),
  entry("team.deleted", "Team deleted", "organization", "team", "A team was deleted."),
  entry("member.added", "Member added", "organization", "member", "Someone joined the company by accepting an invitation."),
  entry("member.updated", "Member role changed", "organization", "member", "A member's role changed."),
  entry("member.removed", "Member removed", "organization", "member", "A membership was revoked."),
  entry(
    "member.availability.updated",
    "Member availability changed",
    "organization",
    "member",
    "A member set online, away or offline (sent to every company of the member)."
  ),
  entry("invitation.created", "Invitation created", "organization", "invitation", "An invitation was sent."),
  entry("invitation.updated", "Invitation updated", "organization", "invitation", "An invitation's role or status changed."),
  entry("invitation.deleted", "Invitation deleted", "organization", "invitation", "An invitation was deleted."),
  entry(
    "call.ended",
    "Call ended",
    "telephony",
    "call",
    "A call placed through the softphone endpoints ended: answered_at, ended_at, duration_seconds and hangup_cause (also sent to the caller's private-user channel)."
  ),
  entry("deal.created", "Deal created", "deals", "deal", "A deal was created (by hand, through the API or automatically for a conversation)."),
  entry("deal.updated", "Deal updated", "deals", "deal", "Fields of a deal changed; `changes` names them."),
  entry("deal.stage_changed", "Deal stage changed", "deals", "deal", "A deal moved to another stage (`from`, `to` are stage ids)."),
  entry("deal.won", "Deal won", "deals", "deal", "A deal was marked won."),
  entry("deal.lost", "Deal lost", "deals", "deal", "A deal was marked lost."),
  entry("deal.deleted", "Deal deleted", "deals", "deal", "A deal was soft-deleted."),
  entry("deal.restored", "Deal restored", "deals", "deal", "A soft-deleted deal was restored."),
  entry("deal_task.created", "Deal task created", "deals", "deal_task", "A task was added to a deal."),
  entry("deal_task.updated", "Deal task updated", "deals", "deal_task", "A deal task changed; `changes` names the fields."),
  entry(
    "deal_task.assigned",
    "Deal task assigned",
    "deals",
    "deal_task",
    "A deal task got a new assignee (also sent to the assignee's private-user channel)."
  ),
  entry(
    "deal_task.reminder",
    "Deal task reminder",
    "deals",
    "deal_task",
    "A deal task's reminder time came (sent to the assignee's private-user channel)."
  ),
  entry(
    "export.progress",
    "Export progress",
    "exports",
    "export",
    "An export being written reports its row_count, at most once a second (also sent to its creator's private-user channel)."
  ),
  entry(
    "export.completed",
    "Export completed",
    "exports",
    "export",
    "An export's file is ready to download until expires_at (also sent to its creator's private-user channel)."
  ),
  entry(
    "export.failed",
    "Export failed",
    "exports",
    "export",
    "An export stopped; error_message says why (also sent to its creator's private-user channel)."
  ),
  entry(
    "integration.disabled",
    "Integration disabled",
    "integrations",
    "integration",
    "A webhook integration was disabled: its receiver answered 410 Gone, or 100 deliveries in a row failed over at least 24 hours."
  ),
  entry("template.created", "Template created", "templates", "template", "A logical message template was created."),
  entry("template.updated", "Template updated", "templates", "template", "A draft template's content or name changed, or a language was deleted."),
  entry("template.deleted", "Template deleted", "templates", "template", "A template and all its instances were deleted."),
  entry("template.submitted", "Template submitted", "templates", "template", "A template instance was sent to the provider's review."),
  entry("template.meta_pending", "Template review pending", "templates", "template", "The provider put a template instance back under review."),
  entry("template.meta_approved", "Template approved", "templates", "template", "The provider approved a template instance."),
  entry("template.meta_rejected", "Template rejected", "templates", "template", "The provider rejected a template instance (`reason` says why)."),
  entry("template.meta_paused", "Template paused", "templates", "template", "The provider paused a template instance."),
  entry("template.meta_disabled", "Template disabled", "templates", "template", "The provider disabled a template instance."),
  entry("template.published", "Template published", "templates", "template", "An approved template was published."),
  entry("template.archived", "Template archived", "templates", "template", "A template was archived."),
  entry("template.unarchived", "Template unarchived", "templates", "template", "An archived template was restored."),
  entry("template.channel_added", "Template channel added", "templates", "template", "A channel was assigned to a template."),
  entry("template.language_added", "Template language added", "templates", "template", "A language version was added to a template."),
  entry("tag.added", "Tag added", "contacts", "contact", "A tag was added to a contact (`contact_id`, `tag_id`)."),
  entry("automation.created", "Automation created", "automations", "automation", "An automation was created."),
  entry("automation.updated", "Automation updated", "automations", "automation", "An automation's metadata, status or graph changed."),
  entry("automation.deleted", "Automation deleted", "automations", "automation", "An automation was deleted."),
  entry("automation.run.finished", "Automation run finished", "automations", "automation_run", "A run ended (`status` succeeded or failed, `error`, `duration_ms`)."),
  entry(
    "conversation.assigned",
    "Conversation assigned",
    "messaging",
    "conversation",
    "A conversation was assigned to a member or a team; the new assignee also hears it on their private-user channel unless their " +
      "conversation_assigned push trigger is off or quiet hours hold it (`notified`)."
  ),
  entry(
    "conversation.updated",
    "Conversation updated",
    "messaging",
    "conversation",
    "An operator changed a conversation's status, assignee, team or priority; `changes` names the fields."
  ),
  entry(
    "conversation.status_changed",
    "Conversation status changed",
    "messaging",
    "conversation",
    "A conversation's status changed (`from`, `to`); `reason` is `user`, `inbound` (the contact wrote to a resolved or snoozed " +
      "conversation) or `snooze_expired`."
  ),
  entry("automation.notification", "Automation notification", "automations", "automation_run", "A notify-user step (sent to the user's private-user channel)."),
  entry("broadcast.created", "Broadcast created", "broadcasts", "broadcast", "A broadcast was created (or duplicated)."),
  entry("broadcast.updated", "Broadcast updated", "broadcasts", "broadcast", "A broadcast was changed, published, cancelled or its recurring schedule paused or resumed."),
  entry("broadcast.run.started", "Broadcast run started", "broadcasts", "broadcast_run", "A run started with its audience snapshot."),
  entry("broadcast.run.progress", "Broadcast run progress", "broadcasts", "broadcast_run", "The counts of a run in progress, at most once per second."),
  entry("broadcast.run.finished", "Broadcast run finished", "broadcasts", "broadcast_run", "A run completed, failed or was cancelled.")
]
