// Runs a broadcast to a segment and follows its progress over pusher-js, through the generated fetch client.
//   API=http://localhost:8080 REALTIME=ws://localhost:8081 node examples/broadcast-progress.mjs
import { makeClient, unwrap } from "../src/client/fetch/Client.ts"
import { API, connect, keyAndData, newCompany, nextEvent, subscribed } from "./lib.mjs"

const RECIPIENTS = 25
const company = await newCompany()
const client = makeClient({ baseUrl: API, token: company.token })

// A Telegram-style sandbox channel, and customers who wrote to it first (each becomes a contact with an account).
const channel = unwrap(await client.channels.create({ payload: { type: "msgr_b", provider: "sandbox", name: "Bot" } })).data
for (let i = 1; i <= RECIPIENTS; i++) {
  const from = { external_id: `customer-${i}`, name: `Customer ${i}` }
  unwrap(await client.channels.sandboxInbound({ params: { id: channel.id }, payload: { from, text: "Hi" } }))
}
const segment = unwrap(await client.segments.create({
  payload: { name: "Wrote to the bot", conditions: [{ group: 1, type: "channel", operator: "in", value: [channel.id] }], group_logic: "and" }
})).data

const pusher = connect(company.token)
try {
  const subscription = await subscribed(pusher, company.id)
  const progress = []
  subscription.bind("broadcast.run.progress", (envelope) => progress.push(keyAndData(envelope).data))
  const finished = nextEvent(subscription, "broadcast.run.finished", 60_000)

  const broadcast = unwrap(await client.broadcasts.create({
    payload: {
      name: "Spring sale",
      audience: { segmentId: String(segment.id) },
      channels: { mode: "specific", channelIds: [channel.id] },
      content: { channels: [{ type: "text", channelId: channel.id, text: "Hi {{first_name}}, spring sale today" }] },
      schedule: { mode: "now" }
    }
  })).data
  const last = (await finished).data
  for (const counts of progress) console.log(`progress: ${counts.sent} sent, ${counts.pending} pending of ${counts.total}`)
  console.log(`finished: ${last.status}, ${last.sent} sent, ${last.failed} failed, ${last.skipped} skipped of ${last.total}`)

  // The same counts, read back: the broadcast with its runs.
  const stored = unwrap(await client.broadcasts.get({ params: { broadcast: broadcast.id } })).data
  if (last.status !== "completed" || last.sent !== RECIPIENTS || stored.stats.sent !== RECIPIENTS) {
    throw new Error(`expected ${RECIPIENTS} sent: event ${JSON.stringify(last)}, stored ${JSON.stringify(stored.stats)}`)
  }
  console.log(`broadcast ${stored.id}: ${stored.status}, run ${stored.runs[0]?.id} ${stored.runs[0]?.status}`)
} finally {
  pusher.disconnect()
}
