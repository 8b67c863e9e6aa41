import _0001_kernel from "./0001_kernel.ts"
import _0002_messaging from "./0002_messaging.ts"
import _0003_teams from "./0003_teams.ts"
import _0004_invitations from "./0004_invitations.ts"
import _0005_me from "./0005_me.ts"
import _0006_telephony from "./0006_telephony.ts"
import _0009_search from "./0009_search.ts"
import _0010_contacts from "./0010_contacts.ts"
import _0011_media from "./0011_media.ts"
import _0012_stickers from "./0012_stickers.ts"
import _0013_message_quotes from "./0013_message_quotes.ts"
import _0014_call_permissions from "./0014_call_permissions.ts"
import _0015_user_photos from "./0015_user_photos.ts"
import _0016_event_sequencer from "./0016_event_sequencer.ts"
import _0026_jobs from "./0026_jobs.ts"
import _0030_segments from "./0030_segments.ts"
import _0031_segment_statistics from "./0031_segment_statistics.ts"
import _0040_deals from "./0040_deals.ts"
import _0041_deals_board from "./0041_deals_board.ts"
import _0050_integrations from "./0050_integrations.ts"
import _0060_exports from "./0060_exports.ts"
import _0070_templates from "./0070_templates.ts"
import _0080_broadcasts from "./0080_broadcasts.ts"
import _0090_automations from "./0090_automations.ts"
import _0091_conversation_assignment from "./0091_conversation_assignment.ts"
import _0100_company_country_status from "./0100_company_country_status.ts"
import _0101_phones_renormalised from "./0101_phones_renormalised.ts"
import _0102_mail_delivery from "./0102_mail_delivery.ts"
import _0105_idempotency_pending from "./0105_idempotency_pending.ts"
import _0115_automation_trigger_cursors from "./0115_automation_trigger_cursors.ts"
import _0120_webhook_cursors from "./0120_webhook_cursors.ts"
import _0130_kamailio from "./0130_kamailio.ts"
import _0135_idempotency_settle from "./0135_idempotency_settle.ts"
import _0140_event_numbering from "./0140_event_numbering.ts"
import _0150_hot_parent_keys from "./0150_hot_parent_keys.ts"
import _0151_event_notices from "./0151_event_notices.ts"
import _0152_message_keys from "./0152_message_keys.ts"
import _0180_event_envelope_id from "./0180_event_envelope_id.ts"
import _0190_inbox from "./0190_inbox.ts"
import _0220_call_outcomes from "./0220_call_outcomes.ts"
import _0235_inbox_counts from "./0235_inbox_counts.ts"
import _0240_messaging_limit from "./0240_messaging_limit.ts"

/** Every migration, keyed `<id>_<name>`; add the next one here when it lands. */
export const migrations = {
  "0001_kernel": _0001_kernel,
  "0002_messaging": _0002_messaging,
  "0003_teams": _0003_teams,
  "0004_invitations": _0004_invitations,
  "0005_me": _0005_me,
  "0006_telephony": _0006_telephony,
  "0009_search": _0009_search,
  "0010_contacts": _0010_contacts,
  "0011_media": _0011_media,
  "0012_stickers": _0012_stickers,
  "0013_message_quotes": _0013_message_quotes,
  "0014_call_permissions": _0014_call_permissions,
  "0015_user_photos": _0015_user_photos,
  "0016_event_sequencer": _0016_event_sequencer,
  "0026_jobs": _0026_jobs,
  "0030_segments": _0030_segments,
  "0031_segment_statistics": _0031_segment_statistics,
  "0040_deals": _0040_deals,
  "0041_deals_board": _0041_deals_board,
  "0050_integrations": _0050_integrations,
  "0060_exports": _0060_exports,
  "0070_templates": _0070_templates,
  "0080_broadcasts": _0080_broadcasts,
  "0090_automations": _0090_automations,
  "0091_conversation_assignment": _0091_conversation_assignment,
  "0100_company_country_status": _0100_company_country_status,
  "0101_phones_renormalised": _0101_phones_renormalised,
  "0102_mail_delivery": _0102_mail_delivery,
  "0105_idempotency_pending": _0105_idempotency_pending,
  "0115_automation_trigger_cursors": _0115_automation_trigger_cursors,
  "0120_webhook_cursors": _0120_webhook_cursors,
  "0130_kamailio": _0130_kamailio,
  "0135_idempotency_settle": _0135_idempotency_settle,
  "0140_event_numbering": _0140_event_numbering,
  "0150_hot_parent_keys": _0150_hot_parent_keys,
  "0151_event_notices": _0151_event_notices,
  "0152_message_keys": _0152_message_keys,
  "0180_event_envelope_id": _0180_event_envelope_id,
  "0190_inbox": _0190_inbox,
  "0220_call_outcomes": _0220_call_outcomes,
  "0235_inbox_counts": _0235_inbox_counts,
  "0240_messaging_limit": _0240_messaging_limit
}
