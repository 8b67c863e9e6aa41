// Sends a message and receives its message.created event over pusher-js.
//   API=http://localhost:8080 REALTIME=ws://localhost:8081 node examples/send-and-listen.mjs
import { call, connect, keyAndData, newCompany } from "./lib.mjs"

const company = await newCompany()
const channel = (await call(company.token, "POST", "/v1/channels", { type: "msgr_a", provider: "sandbox", name: "Support" })).data

const pusher = connect(company.token)
try {
  const subscription = pusher.subscribe(`private-company.${company.id}`)
  await new Promise((resolve, reject) => {
    subscription.bind("pusher:subscription_succeeded", resolve)
    subscription.bind("pusher:subscription_error", (error) => reject(new Error(`subscription refused: ${JSON.stringify(error)}`)))
  })
  const created = new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error("no message.created within 15 s")), 15_000)
    subscription.bind("message.created", (envelope) => (clearTimeout(timer), resolve(keyAndData(envelope, "message.created"))))
  })
  const sent = (await call(company.token, "POST", "/v1/messages/send", { channel_id: channel.id, to: { phone: "+14155550123" }, text: "Hello from the API" })).data
  const event = await created
  if (event.data?.message?.id !== sent.id) throw new Error(`the event names message ${event.data?.message?.id}, the send made ${sent.id}`)
  console.log(`sent message ${sent.id} (${sent.status}); received ${event.key} for it over pusher-js`)
} finally {
  pusher.disconnect()
}
