import { assert, describe, it } from "@effect/vitest"
import { Option, Schema } from "effect"
import { createHmac } from "node:crypto"
import { Credentials, deriveKey } from "../../src/providers/Credentials.ts"
import { normalizeUpdate, TelegramUpdate } from "../../src/providers/Telegram.ts"
import { normalizeWebhook, validSignature, WhatsAppWebhook } from "../../src/providers/WhatsAppCloud.ts"

const update = (value: unknown) => normalizeUpdate(Schema.decodeUnknownSync(TelegramUpdate)(value))
const from = { id: 777001, is_bot: false, first_name: "Ann", last_name: "Lee", username: "annlee" }
const privateChat = { id: 777001, type: "private", first_name: "Ann" }

describe("Telegram update normalisation", () => {
  it("turns a private text message into an inbound message from the sender", () => {
    const m = Option.getOrThrow(update({ update_id: 1, message: { message_id: 10, from, chat: privateChat, date: 1_700_000_000, text: "Hello" } }))
    assert.strictEqual(m.externalMessageId, "777001:10")
    assert.deepStrictEqual(m.from, { external_id: "777001", username: "annlee", name: "Ann Lee", phone: null, profile_picture: null })
    assert.strictEqual(m.text, "Hello")
    assert.strictEqual(m.messageType, "text")
    assert.deepStrictEqual(m.attachments, [])
    assert.strictEqual(m.thread, null)
    assert.strictEqual(m.timestamp.toISOString(), "2023-11-14T22:13:20.000Z")
    assert.strictEqual(m.edited, undefined)
  })

  it("keeps the largest photo, captions, documents, voice and stickers as attachments", () => {
    const photo = Option.getOrThrow(update({
      update_id: 2,
      message: {
        message_id: 11,
        from,
        chat: privateChat,
        date: 1,
        caption: "pic",
        photo: [{ file_id: "small", file_unique_id: "a", width: 90, height: 90 }, { file_id: "large", file_unique_id: "b", width: 1280, height: 960 }]
      }
    }))
    assert.strictEqual(photo.messageType, "image")
    assert.strictEqual(photo.text, "pic")
    assert.deepStrictEqual(photo.attachments, [{ type: "image", mime_type: "image/jpeg", url: null, provider_ref: "large", thumbnail_url: null, file_name: null }])
    const doc = Option.getOrThrow(update({
      update_id: 3,
      message: { message_id: 12, from, chat: privateChat, date: 1, document: { file_id: "D1", file_name: "cv.pdf", mime_type: "application/pdf" } }
    }))
    assert.strictEqual(doc.messageType, "document")
    assert.strictEqual(doc.attachments[0].file_name, "cv.pdf")
    assert.strictEqual(doc.attachments[0].mime_type, "application/pdf")
    const voice = Option.getOrThrow(update({ update_id: 4, message: { message_id: 13, from, chat: privateChat, date: 1, voice: { file_id: "V1", duration: 3 } } }))
    assert.deepStrictEqual([voice.messageType, voice.attachments[0].provider_ref, voice.attachments[0].mime_type], ["voice", "V1", "audio/ogg"])
    const sticker = Option.getOrThrow(update({
      update_id: 5,
      message: { message_id: 14, from, chat: privateChat, date: 1, sticker: { file_id: "S1", emoji: "😀", is_animated: true, is_video: false } }
    }))
    assert.deepStrictEqual([sticker.messageType, sticker.attachments[0].mime_type], ["sticker", "application/x-tgsticker"])
  })

  it("marks edits, group threads and replies", () => {
    const edited = Option.getOrThrow(update({
      update_id: 6,
      edited_message: { message_id: 15, from, chat: { id: -100555, type: "supergroup", title: "Team" }, date: 1, edit_date: 2, text: "fixed", reply_to_message: { message_id: 9, chat: { id: -100555, type: "supergroup" }, date: 0 } }
    }))
    assert.strictEqual(edited.edited, true)
    assert.strictEqual(edited.externalMessageId, "-100555:15")
    assert.deepStrictEqual(edited.thread, { external_id: "-100555", is_group: true })
    assert.strictEqual(edited.quotedExternalMessageId, "-100555:9")
  })

  it("ignores updates that are not messages from a person", () => {
    assert.ok(Option.isNone(update({ update_id: 7, callback_query: { id: "q" } })))
    assert.ok(Option.isNone(update({ update_id: 8, message: { message_id: 1, chat: { id: -1, type: "channel" }, date: 1, text: "post" } })))
  })
})

const payload = (value: unknown) => Schema.decodeUnknownSync(WhatsAppWebhook)({
  object: "whatsapp_business_account",
  entry: [{ id: "WABA", changes: [{ field: "messages", value }] }]
})
const metadata = { display_phone_number: "15550009999", phone_number_id: "PN1" }
const now = new Date("2025-01-01T00:00:00Z")

describe("WhatsApp webhook normalisation", () => {
  it("reads text, media, voice notes, reactions, contact names and ad referrals", () => {
    const { messages } = normalizeWebhook(payload({
      messaging_product: "whatsapp",
      metadata,
      contacts: [{ profile: { name: "Bob" }, wa_id: "15551112222" }],
      messages: [
        {
          from: "15551112222",
          id: "wamid.A",
          timestamp: "1700000000",
          type: "text",
          text: { body: "Hi" },
          referral: {
            source_url: "https://fb.me/ad",
            source_id: "AD1",
            source_type: "ad",
            headline: "Sale",
            body: "50% off",
            media_type: "image",
            image_url: "https://img",
            ctwa_clid: "CLID",
            unknown_key: "dropped"
          }
        },
        { from: "15551112222", id: "wamid.B", timestamp: "1700000001", type: "image", image: { id: "MEDIA1", mime_type: "image/jpeg", caption: "look" } },
        { from: "15551112222", id: "wamid.C", timestamp: "1700000002", type: "audio", audio: { id: "MEDIA2", mime_type: "audio/ogg; codecs=opus", voice: true } },
        { from: "15551112222", id: "wamid.D", timestamp: "1700000003", type: "document", document: { id: "MEDIA3", filename: "a.pdf", mime_type: "application/pdf" } },
        { from: "15551112222", id: "wamid.E", timestamp: "1700000004", type: "sticker", sticker: { id: "MEDIA4", mime_type: "image/webp", animated: false } },
        { from: "15551112222", id: "wamid.F", timestamp: "1700000005", type: "reaction", reaction: { message_id: "wamid.OUT", emoji: "👍" } },
        { from: "15551112222", id: "wamid.G", timestamp: "1700000006", type: "location", location: { latitude: 1, longitude: 2 } }
      ]
    }), "PN1", now)
    assert.strictEqual(messages.length, 7)
    const [text, image, voice, doc, sticker, reaction, location] = messages
    assert.deepStrictEqual(text.from, { external_id: "15551112222", username: null, name: "Bob", phone: "+15551112222", profile_picture: null })
    assert.deepStrictEqual(text.referral, {
      source_type: "ad",
      source_id: "AD1",
      headline: "Sale",
      image_url: "https://img",
      source_url: "https://fb.me/ad",
      body: "50% off",
      ctwa_clid: "CLID",
      media_type: "image"
    })
    assert.strictEqual(text.timestamp.toISOString(), "2023-11-14T22:13:20.000Z")
    assert.deepStrictEqual([image.messageType, image.text, image.attachments[0].provider_ref], ["image", "look", "MEDIA1"])
    assert.deepStrictEqual([voice.messageType, voice.attachments[0].type], ["voice", "voice"])
    assert.deepStrictEqual([doc.messageType, doc.attachments[0].file_name], ["document", "a.pdf"])
    assert.strictEqual(sticker.messageType, "sticker")
    assert.deepStrictEqual(reaction.reaction, { externalMessageId: "wamid.OUT", emoji: "👍" })
    assert.strictEqual(reaction.messageType, "reaction")
    assert.strictEqual(location.messageType, "unsupported_type")
  })

  it("reads statuses with their errors and our echoed reference, and skips other phone numbers", () => {
    const { statuses, messages } = normalizeWebhook(payload({
      metadata,
      statuses: [
        { id: "wamid.OUT", status: "delivered", timestamp: "1", recipient_id: "1555", biz_opaque_callback_data: "crm_message:42" },
        { id: "wamid.OUT2", status: "failed", timestamp: "1", recipient_id: "1555", errors: [{ code: 131047, title: "Re-engagement message", error_data: { details: "24 hours passed" } }] },
        { id: "wamid.OUT3", status: "deleted", timestamp: "1" }
      ]
    }), "PN1", now)
    assert.deepStrictEqual(statuses, [
      { externalMessageId: "wamid.OUT", status: "delivered", error: null, reference: "crm_message:42" },
      { externalMessageId: "wamid.OUT2", status: "failed", error: "24 hours passed", reference: null }
    ])
    assert.strictEqual(messages.length, 0)
    const other = normalizeWebhook(payload({
      metadata: { phone_number_id: "OTHER" },
      messages: [{ from: "1", id: "wamid.X", timestamp: "1", type: "text", text: { body: "x" } }]
    }), "PN1", now)
    assert.strictEqual(other.messages.length, 0)
  })

  it("checks X-Hub-Signature-256 over the exact bytes", () => {
    const body = new TextEncoder().encode('{"object":"whatsapp_business_account","entry":[]}')
    const good = `sha256=${createHmac("sha256", "app-secret").update(body).digest("hex")}`
    assert.ok(validSignature("app-secret", body, good))
    assert.ok(validSignature("app-secret", body, good.toUpperCase().replace("SHA256=", "sha256=")))
    assert.ok(!validSignature("other-secret", body, good))
    assert.ok(!validSignature("app-secret", new TextEncoder().encode('{"object": "whatsapp_business_account","entry":[]}'), good))
    assert.ok(!validSignature("app-secret", body, undefined))
    assert.ok(!validSignature("app-secret", body, "sha1=abc"))
    assert.ok(!validSignature("app-secret", body, good.slice(0, -2)))
  })
})

describe("credential encryption", () => {
  const key = deriveKey("app-key-for-tests")
  const box = Credentials.make(key)
  const secrets = { bot_token: "123:secret-value", app_secret: "s3cr3t" }

  it("round-trips, binds the ciphertext to its company and detects tampering", () => {
    const bytes = box.encrypt(7, secrets)
    assert.ok(!Buffer.from(bytes).includes(Buffer.from("secret-value")))
    assert.deepStrictEqual(Option.getOrThrow(box.decrypt(7, bytes)), secrets)
    assert.ok(Option.isNone(box.decrypt(8, bytes)))
    const tampered = Buffer.from(bytes)
    tampered[tampered.length - 1] ^= 1
    assert.ok(Option.isNone(box.decrypt(7, tampered)))
    assert.ok(Option.isNone(box.decrypt(7, new Uint8Array([1, 2, 3]))))
    // A fresh IV each time: the same secrets never give the same bytes.
    assert.notStrictEqual(Buffer.from(box.encrypt(7, secrets)).toString("hex"), Buffer.from(bytes).toString("hex"))
  })

  it("derives the key from APP_KEY deterministically; another APP_KEY cannot decrypt", () => {
    assert.deepStrictEqual([...deriveKey("app-key-for-tests")], [...key])
    assert.strictEqual(key.length, 32)
    const bytes = box.encrypt(1, secrets)
    assert.deepStrictEqual(Option.getOrThrow(Credentials.make(deriveKey("app-key-for-tests")).decrypt(1, bytes)), secrets)
    assert.ok(Option.isNone(Credentials.make(deriveKey("another-app-key")).decrypt(1, bytes)))
  })
})
