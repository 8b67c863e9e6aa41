import { assert, describe, it } from "@effect/vitest"
import { Result } from "effect"
import { checkSend, type RuleContent, type RuleThread } from "../../src/messages/SendRules.ts"

const now = Date.UTC(2026, 10, 28, 12, 0, 0)
const hoursAgo = (h: number) => new Date(now - h * 3_600_000)

const thread = (patch: Partial<RuleThread> = {}): RuleThread => ({
  channel_type: "msgr_b",
  channel_status: "connected",
  is_group: false,
  contact_blocked: false,
  last_inbound_at: null,
  external_thread_id: null,
  account_external_id: "acc-1",
  ...patch
})

const text: RuleContent = { forward: false, types: [], template: false }
const template: RuleContent = { forward: false, types: [], template: true }
const forward = (type: string): RuleContent => ({ forward: true, types: [type], template: false })
const media = (...types: Array<string>): RuleContent => ({ forward: false, types, template: false })

/** Each row: the thread, the content, and `ok:<recipient>` or `<reason>/<error_code>`. */
const rows: ReadonlyArray<readonly [string, RuleThread, RuleContent, string]> = [
  ["text on a connected thread", thread(), text, "ok:acc-1"],
  ["the thread's provider id wins over the account's", thread({ external_thread_id: "chat-9" }), text, "ok:chat-9"],
  ["no recipient on the channel", thread({ account_external_id: null }), text, "no_recipient/no_recipient"],
  ["a disconnected channel", thread({ channel_status: "disconnected" }), text, "channel_not_connected/channel_not_connected"],
  ["a disconnected channel before a blocked contact", thread({ channel_status: "disconnected", contact_blocked: true }), text, "channel_not_connected/channel_not_connected"],
  ["a blocked contact", thread({ contact_blocked: true }), text, "contact_blocked/contact_blocked"],
  ["a blocked contact refuses a template too", thread({ contact_blocked: true }), template, "contact_blocked/contact_blocked"],
  ["business messenger, no inbound ever", thread({ channel_type: "msgr_a_business" }), text, "window_closed/template_required"],
  ["business messenger, inbound 25 h ago", thread({ channel_type: "msgr_a_business", last_inbound_at: hoursAgo(25) }), text, "window_closed/template_required"],
  ["business messenger, inbound 23 h ago", thread({ channel_type: "msgr_a_business", last_inbound_at: hoursAgo(23) }), text, "ok:acc-1"],
  ["business messenger, a template through a closed window", thread({ channel_type: "msgr_a_business" }), template, "ok:acc-1"],
  ["social inbox, inbound 8 days ago", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(192) }), text, "window_closed/messaging_window_closed"],
  ["social inbox, inbound 6 days ago", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(144) }), text, "ok:acc-1"],
  ["social inbox comment thread: a reply has no window", thread({ channel_type: "msgr_c_business", is_group: true }), text, "ok:acc-1"],
  ["social inbox cannot carry a sticker", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(1) }), media("sticker"), "content_type_unsupported/content_type_unsupported"],
  ["social inbox carries an image", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(1) }), media("image"), "ok:acc-1"],
  ["a voice note on the QR messenger", thread({ channel_type: "msgr_a" }), media("voice"), "ok:acc-1"],
  ["the first uncarried of several attachments", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(1) }), media("image", "voice"), "content_type_unsupported/content_type_unsupported"],
  ["a forward to a comment thread", thread({ channel_type: "msgr_c_business", is_group: true }), forward("text"), "channel_not_textable/channel_not_textable"],
  ["a forward of a voice note to the social inbox", thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(1) }), forward("voice"), "content_type_unsupported/content_type_unsupported"],
  ["a forward through a closed window", thread({ channel_type: "msgr_a_business", last_inbound_at: hoursAgo(30) }), forward("text"), "window_closed/wa_window_closed"],
  ["a forward to a disconnected channel", thread({ channel_status: "disconnected" }), forward("text"), "channel_not_connected/channel_not_connected"],
  ["a forward to a new thread of an account", thread(), forward("image"), "ok:acc-1"]
]

const verdictOf = (t: RuleThread, c: RuleContent) =>
  Result.match(checkSend(t, c, now), { onSuccess: (recipient) => `ok:${recipient}`, onFailure: (e) => `${e.reason}/${e.error_code}` })

describe("the sending rules (checkSend)", () => {
  it.each(rows)("%s", (_, t, c, expected) => {
    assert.strictEqual(verdictOf(t, c), expected)
  })

  it("words a refusal for the door it came through", () => {
    const offline = thread({ channel_status: "disconnected" })
    const direct = checkSend(offline, text, now)
    const forwarded = checkSend(offline, forward("text"), now)
    assert.isTrue(Result.isFailure(direct) && direct.failure.message === "The channel is not connected.")
    assert.isTrue(Result.isFailure(forwarded) && forwarded.failure.message === "The target channel is not connected.")
    const sticker = checkSend(thread({ channel_type: "msgr_c_business", last_inbound_at: hoursAgo(1) }), media("sticker"), now)
    assert.isTrue(Result.isFailure(sticker) && sticker.failure.message === "A msgr_c_business channel cannot carry a sticker attachment.")
  })
})
