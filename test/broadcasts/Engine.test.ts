import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { payloadsOf } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { audience, broadcastBody, createChannel, queryOf, recipientsOf, sleep, waitFor } from "./support.ts"

let server: RunningServer
beforeAll(async () => {
  delete process.env.ASSIST_API_URL
  server = await startServer()
})
afterAll(() => server?.close())

const db = () => queryOf(server)
const post = (token: string, path: string, body?: unknown) => request(server, "POST", path, { token, body })

const setup = async (n: number, channels = 1) => {
  const company = await createCompany(server)
  const ids: Array<number> = []
  for (let i = 0; i < channels; i++) ids.push(await createChannel(db(), company.id, { name: `Bot ${i}` }))
  const { segmentId, contactIds } = await audience(server, db(), company, n)
  return { company, channels: ids, segmentId, contactIds }
}

const start = async (token: string, body: unknown) => {
  const res = await post(token, "/v1/broadcasts", body)
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data as { id: number; runs: Array<{ id: number }> }
}

const sentTimes = async (broadcastId: number, channelId: number) =>
  (await recipientsOf(db(), broadcastId)).filter((r) => r.channel_id === channelId && r.status === "sent").map((r) => r.sent_at!.getTime()).sort((a, b) => a - b)

describe("the run engine", () => {
  it("paces each channel at messagesPerMinute and uses the allowance", async () => {
    const { company, channels: [a], segmentId } = await setup(30)
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 1200 } } }))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed", 20_000)
    const times = await sentTimes(b.id, a)
    assert.strictEqual(times.length, 30)
    // 1200/min is one send per 50 ms: 30 sends span at least 29 slots, and not much more.
    const span = times[times.length - 1] - times[0]
    // Slots are 50 ms apart; a send's recorded start can lag its slot by the pre-send check (the first most).
    assert.isAtLeast(span, 29 * 50 - 100)
    // Not much slower either (a loaded machine adds latency between batches; the bench measures use over 3 minutes).
    assert.isAtMost(span, 29 * 50 + 1500)
  })

  it("pauses for a uniform jitter between sends", async () => {
    const { company, channels: [a], segmentId } = await setup(5)
    const b = await start(company.token, broadcastBody(segmentId, [a], {
      schedule: { mode: "now", rateControl: { enabled: true, jitterMinSeconds: 0.2, jitterMaxSeconds: 0.4 } }
    }))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed", 20_000)
    const times = await sentTimes(b.id, a)
    for (let i = 1; i < times.length; i++) {
      const gap = times[i] - times[i - 1]
      // Sends start at their slots (gaps of 200-400 ms) give or take the timer's wake-up.
      assert.isAtLeast(gap, 200 - 25)
      assert.isAtMost(gap, 400 + 350)
    }
  })

  it("stops at the daily limit, and cancel skips the rest", async () => {
    const { company, channels: [a], segmentId } = await setup(5)
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, dailyLimit: 2 } } }))
    await waitFor(server, company.token, b.id, (x) => x.stats.sent === 2)
    await sleep(1200)
    const held = await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })
    assert.strictEqual(held.body.data.stats.sent, 2)
    assert.strictEqual(held.body.data.runs[0].status, "processing")
    const cancelled = await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/cancel`)
    assert.strictEqual(cancelled.status, 200, JSON.stringify(cancelled.body))
    assert.include(cancelled.body.data, { status: "cancelled", sent: 2, skipped: 3, pending: 0 })
    const after = await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })
    assert.strictEqual(after.body.data.status, "cancelled")
    assert.strictEqual((await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/resume`)).status, 422)
  })

  it("sends a batch with one message and one message.created event per recipient; a deleted creator's broadcast sends as the system", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(5)
    const later = new Date(Date.now() + 3_600_000).toISOString()
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "later", scheduledAt: later } }))
    // What deleting the creator does to the row (ON DELETE SET NULL).
    await db()("UPDATE broadcasts SET user_id = NULL WHERE id = $1", [b.id])
    const run = await post(company.token, `/v1/broadcasts/${b.id}/run`)
    assert.strictEqual(run.status, 200, JSON.stringify(run.body))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    const recipients = await recipientsOf(db(), b.id)
    assert.deepStrictEqual(recipients.map((r) => r.status), contactIds.map(() => "sent"))
    const messages = await db()(
      "SELECT id, sender_user_id, status, message_content FROM messages WHERE company_id = $1 AND direction = 'outbound' ORDER BY id",
      [company.id]
    )
    assert.deepStrictEqual(messages.map((m) => Number(m.id)).sort(), recipients.map((r) => Number(r.message_id)).sort())
    for (const m of messages) assert.deepStrictEqual([m.sender_user_id, m.status, m.message_content.startsWith("Hi Ann")], [null, "sent", true])
    const created = await db()("SELECT (payload->'message'->>'id')::bigint AS id FROM events WHERE company_id = $1 AND key = 'message.created'", [company.id])
    assert.deepStrictEqual(created.map((e) => Number(e.id)).sort(), messages.map((m) => Number(m.id)).sort())
    const conversations = await db()("SELECT count(*)::int AS n FROM events WHERE company_id = $1 AND key = 'conversation.created'", [company.id])
    assert.strictEqual(conversations[0].n, contactIds.length)
  })

  it("numbers a batch's events as it writes them: one numbered message.created and conversation.created per recipient, gapless, replayed in order", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(40)
    const before = (await request(server, "GET", "/v1/events", { token: company.token })).body.data.next_after as number
    const b = await start(company.token, broadcastBody(segmentId, [a]))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    const recipients = await recipientsOf(db(), b.id)
    assert.deepStrictEqual(recipients.map((r) => r.status), contactIds.map(() => "sent"))
    // Batches of 32 and 8: the first is written numbered (16 events or more), the second through the sequencer.
    const rows = await db()("SELECT seq, key, (payload->'message'->>'id')::bigint AS message_id FROM events WHERE company_id = $1 AND seq > $2 ORDER BY seq", [company.id, before])
    assert.isTrue(rows.every((r) => r.seq !== null))
    assert.deepStrictEqual(rows.map((r) => Number(r.seq)), rows.map((_, i) => before + 1 + i))
    const created = rows.filter((r) => r.key === "message.created").map((r) => Number(r.message_id)).sort((x, y) => x - y)
    assert.deepStrictEqual(created, recipients.map((r) => Number(r.message_id)).sort((x, y) => x - y))
    assert.strictEqual(rows.filter((r) => r.key === "conversation.created").length, contactIds.length)
    // Written once: the first batch's events are still the tuples its transaction inserted with its messages (the
    // sequencer's numbering would have rewritten them in a transaction of its own).
    const [once] = await db()(
      `SELECT count(*)::int AS n FROM events e JOIN messages m ON m.company_id = e.company_id AND m.id = (e.payload->'message'->>'id')::bigint
       WHERE e.company_id = $1 AND e.key = 'message.created' AND e.xmin::text = m.xmin::text`,
      [company.id]
    )
    assert.strictEqual(once.n, 32)
    const replayed = (await request(server, "GET", `/v1/events?after=${before}&limit=500`, { token: company.token })).body.data.items as Array<{ seq: number; event: string; data: any }>
    assert.deepStrictEqual(replayed.map((e) => e.seq), rows.map((r) => Number(r.seq)))
    const replayedIds = replayed.filter((e) => e.event === "message.created").map((e) => Number(e.data.message.id)).sort((x, y) => x - y)
    assert.deepStrictEqual(replayedIds, created)
  })

  it("skips recipients contacted within skipContactedWithinHours", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(3)
    const test = await post(company.token, "/v1/broadcasts/test", { channel_id: a, recipient: `msgr_b-${contactIds[1]}`, content: { type: "text", text: "Earlier" } })
    assert.strictEqual(test.status, 200, JSON.stringify(test.body))
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, skipContactedWithinHours: 24 } } }))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    const recipients = (await recipientsOf(db(), b.id)).sort((x, y) => x.contact_id - y.contact_id)
    assert.deepStrictEqual(recipients.map((r) => [r.contact_id, r.status, r.error_message]), [
      [contactIds[0], "sent", null],
      [contactIds[1], "skipped", "recently_contacted"],
      [contactIds[2], "sent", null]
    ])
  })

  it("sends only inside the window, in each recipient's time zone; smart mode waits for the active hour", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(3)
    const hour = new Date().getUTCHours()
    const hh = (h: number) => `${String(((h % 24) + 24) % 24).padStart(2, "0")}:00`
    // UTC: inside [hour, hour+3). Kathmandu (UTC+5:45): outside. The third (UTC) most often writes at hour+2.
    await db()("UPDATE contacts SET timezone = 'UTC' WHERE id = ANY($1::bigint[])", [[contactIds[0], contactIds[2]]])
    await db()("UPDATE contacts SET custom_fields = '{\"timezone\": \"Asia/Kathmandu\"}' WHERE id = $1", [contactIds[1]])
    const [conversation] = await db()("INSERT INTO conversations (company_id, contact_id) VALUES ($1, $2) RETURNING id", [company.id, contactIds[2]])
    const [thread] = await db()(
      "INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id) SELECT $1, $2, $3, id FROM contact_accounts WHERE contact_id = $4 RETURNING id",
      [company.id, conversation.id, a, contactIds[2]]
    )
    await db()(
      `INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp")
       SELECT $1, $2, $3, $4, 'inbound', 'hi', date_trunc('hour', now()) - make_interval(days => d) + interval '2 hours'
       FROM generate_series(1, 3) d`,
      [company.id, conversation.id, thread.id, a]
    )
    const b = await start(company.token, broadcastBody(segmentId, [a], {
      schedule: { mode: "now", sendWindow: { enabled: true, mode: "smart", startTime: hh(hour), endTime: hh(hour + 3), timezone: "recipient" } }
    }))
    await waitFor(server, company.token, b.id, (x) => x.stats.sent === 1)
    await sleep(1500)
    const recipients = (await recipientsOf(db(), b.id)).sort((x, y) => x.contact_id - y.contact_id)
    assert.deepStrictEqual(recipients.map((r) => [r.contact_id, r.status]), [
      [contactIds[0], "sent"],
      [contactIds[1], "pending"],
      [contactIds[2], "pending"]
    ])
    assert.strictEqual((await post(company.token, `/v1/broadcasts/${b.id}/cancel`)).status, 200)
  })

  it("assigns A/B variants deterministically and evenly", async () => {
    const { company, channels: [a], segmentId } = await setup(10_000)
    const variants = [{ key: "a", text: "A {{first_name}}" }, { key: "b", text: "B" }, { key: "c", text: "C" }]
    const b = await start(company.token, broadcastBody(segmentId, [a], {
      content: { channels: [{ type: "text", channelId: a, variants }] },
      schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 60 } }
    }))
    assert.strictEqual((await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/cancel`)).status, 200)
    const first = await recipientsOf(db(), b.id)
    assert.strictEqual(first.length, 10_000)
    const counts = new Map<string, number>()
    for (const r of first) counts.set(r.variant_key!, (counts.get(r.variant_key!) ?? 0) + 1)
    assert.deepStrictEqual([...counts.keys()].sort(), ["a", "b", "c"])
    for (const count of counts.values()) assert.isAtMost(Math.abs(count / 10_000 - 1 / 3), 0.02)
    // A second run of the same broadcast gives every contact the same key again.
    const again = await post(company.token, `/v1/broadcasts/${b.id}/run`)
    assert.strictEqual(again.status, 422, "a cancelled broadcast does not run")
    await db()("UPDATE broadcasts SET status = 'completed' WHERE id = $1", [b.id])
    const rerun = await post(company.token, `/v1/broadcasts/${b.id}/run`)
    assert.strictEqual(rerun.status, 200, JSON.stringify(rerun.body))
    await post(company.token, `/v1/broadcasts/${b.id}/runs/${rerun.body.data.runs[0].id}/cancel`)
    const all = await recipientsOf(db(), b.id)
    const byContact = new Map<number, Set<string>>()
    for (const r of all) byContact.set(r.contact_id, (byContact.get(r.contact_id) ?? new Set()).add(r.variant_key!))
    assert.strictEqual(all.length, 20_000)
    for (const keys of byContact.values()) assert.strictEqual(keys.size, 1)
    const stats = (await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })).body.data.stats
    assert.deepStrictEqual(Object.keys(stats.byVariant).sort(), ["a", "b", "c"])
  }, 60_000)

  it("skips a contact whose stop word arrives mid-run", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(8)
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 150 } } }))
    await waitFor(server, company.token, b.id, (x) => x.stats.sent >= 1)
    // The recipient claimed last (claims go in recipient id order).
    const [{ contact_id: stopper }] = await db()("SELECT contact_id FROM broadcast_recipients WHERE broadcast_id = $1 ORDER BY id DESC LIMIT 1", [b.id])
    assert.include(contactIds, stopper)
    const stop = await post(company.token, `/v1/channels/${a}/sandbox/inbound`, { from: { external_id: `msgr_b-${stopper}` }, text: "STOP" })
    assert.strictEqual(stop.status, 201, JSON.stringify(stop.body))
    await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    const last = (await recipientsOf(db(), b.id)).find((r) => r.contact_id === stopper)!
    assert.deepStrictEqual([last.status, last.error_message], ["skipped", "opted_out"])
    const [contact] = await db()("SELECT opted_out_at FROM contacts WHERE id = $1", [stopper])
    assert.isNotNull(contact.opted_out_at)
    const optedOut = await payloadsOf(server, company.id, "contact.opted_out")
    assert.deepStrictEqual(optedOut.map((p) => p.contact_id), [stopper])
  })

  it("keeps a run to its company: another company gets 404 on its run and its controls, and the run goes on", async () => {
    const { company, channels: [a], segmentId } = await setup(4)
    const other = await createCompany(server)
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 240 } } }))
    const run = b.runs[0].id
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${b.id}/runs/${run}`, { token: other.token })).status, 404)
    for (const action of ["pause", "cancel", "retry-failed"]) {
      assert.strictEqual((await post(other.token, `/v1/broadcasts/${b.id}/runs/${run}/${action}`)).status, 404, action)
    }
    const done = await waitFor(server, company.token, b.id, (x) => x.status === "completed", 20_000)
    assert.strictEqual(done.stats.sent, 4)
  })

  it("pauses and resumes a run; reports progress and finish events", async () => {
    const { company, channels: [a], segmentId } = await setup(8)
    const b = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "now", rateControl: { enabled: true, messagesPerMinute: 120 } } }))
    await waitFor(server, company.token, b.id, (x) => x.stats.sent >= 2)
    const paused = await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/pause`)
    assert.strictEqual(paused.body.data.status, "paused")
    await sleep(700)
    const held = (await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })).body.data
    await sleep(700)
    const still = (await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })).body.data
    assert.strictEqual(still.stats.sent, held.stats.sent)
    assert.isBelow(still.stats.sent, 8)
    const resumed = await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/resume`)
    assert.strictEqual(resumed.body.data.status, "processing")
    const done = await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    assert.strictEqual(done.stats.sent, 8)
    assert.strictEqual((await payloadsOf(server, company.id, "broadcast.run.started")).length, 1)
    const finished = await payloadsOf(server, company.id, "broadcast.run.finished")
    assert.deepStrictEqual(finished.map((p) => [p.status, p.sent, p.total]), [["completed", 8, 8]])
    const progress = await payloadsOf(server, company.id, "broadcast.run.progress")
    assert.isAtLeast(progress.length, 1)
    assert.include(progress[progress.length - 1], { total: 8, sent: 8, pending: 0 })
  })

  it("fails a run whose every recipient failed; retry-failed schedules it and resends them", async () => {
    const company = await createCompany(server)
    const a = await createChannel(db(), company.id, { settings: { sandbox_fail: true } })
    const { segmentId } = await audience(server, db(), company, 3)
    const b = await start(company.token, broadcastBody(segmentId, [a]))
    const failed = await waitFor(server, company.token, b.id, (x) => x.status === "failed")
    assert.strictEqual(failed.runs[0].status, "failed")
    assert.strictEqual(failed.stats.failed, 3)
    await db()("UPDATE channels SET settings = '{}' WHERE id = $1", [a])
    await sleep(2100)
    const retried = await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/retry-failed`)
    assert.strictEqual(retried.status, 200, JSON.stringify(retried.body))
    assert.strictEqual(retried.body.data.status, "processing")
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${b.id}`, { token: company.token })).body.data.status, "scheduled")
    const done = await waitFor(server, company.token, b.id, (x) => x.status === "completed")
    assert.include(done.stats, { sent: 3, failed: 0 })
    const recipients = await recipientsOf(db(), b.id)
    assert.isTrue(recipients.every((r) => r.status === "sent"))
    assert.strictEqual((await post(company.token, `/v1/broadcasts/${b.id}/runs/${b.runs[0].id}/retry-failed`)).status, 422)
  })

  it("starts a scheduled broadcast at scheduledAt and each recurrence with a fresh snapshot", async () => {
    const { company, channels: [a], segmentId, contactIds } = await setup(2)
    const later = await start(company.token, broadcastBody(segmentId, [a], { schedule: { mode: "later", scheduledAt: new Date(Date.now() + 1500).toISOString() } }))
    assert.strictEqual((await request(server, "GET", `/v1/broadcasts/${later.id}`, { token: company.token })).body.data.status, "scheduled")
    await waitFor(server, company.token, later.id, (x) => x.status === "completed", 15_000)

    const recurring = await start(company.token, broadcastBody(segmentId, [a], { recurrence: { rrule: "FREQ=SECONDLY;INTERVAL=2;COUNT=2" } }))
    const first = await waitFor(server, company.token, recurring.id, (x) => x.runs.length === 1 && x.runs[0].status === "completed", 15_000)
    assert.strictEqual(first.runs[0].total, 2)
    // Someone opts out between occurrences: the second snapshot no longer has them.
    await db()("UPDATE contacts SET opted_out_at = now() WHERE id = $1", [contactIds[0]])
    const second = await waitFor(server, company.token, recurring.id, (x) => x.runs.length === 2 && x.runs.every((r: any) => r.status === "completed"), 15_000)
    assert.deepStrictEqual(second.runs.map((r: any) => r.total).sort(), [1, 2])
    assert.strictEqual(second.status, "completed")
    assert.isNull(second.recurring_schedule.next_run_at)
  })

  it("answers 503 from assist when no model endpoint is configured", async () => {
    const company = await createCompany(server)
    const res = await post(company.token, "/v1/broadcasts/assist", { action: "generate", text: "spring sale" })
    assert.strictEqual(res.status, 503)
    assert.deepStrictEqual(res.body, { message: "Text assist is not configured." })
  })
})
