// Sends a message and receives its message.created event over pusher-js.
//   API=http://localhost:8080 REALTIME=ws://localhost:8081 node examples/send-and-listen.mjs
import { call, connect, newCompany, nextEvent, subscribed } from "./lib.mjs"

const company = await newCompany()
const channel = (await call(company.token, "POST", "/v1/channels", { type: "msgr_a", provider: "sandbox", name: "Support" })).data

const pusher = connect(company.token)
try {
  const subscription = await subscribed(pusher, company.id)
  const created = nextEvent(subscription, "message.created")
  const sent = (await call(company.token, "POST", "/v1/messages/send", { channel_id: channel.id, to: { phone: "+14155550123" }, text: "Hello from the API" })).data
  const event = await created
  if (event.data?.message?.id !== sent.id) throw new Error(`the event names message ${event.data?.message?.id}, the send made ${sent.id}`)
  console.log(`sent message ${sent.id} (${sent.status}); received ${event.key} for it over pusher-js`)
} finally {
  pusher.disconnect()
}
