// Receives webhooks on a local server and verifies them with the standardwebhooks package.
// The server must allow a plain-HTTP loopback receiver: WEBHOOK_ALLOW_HTTP=true WEBHOOK_ALLOW_PRIVATE=true.
//   API=http://localhost:8080 node examples/webhooks.mjs
import { createServer } from "node:http"
import { Webhook } from "standardwebhooks"
import { call, keyAndData, newCompany, until } from "./lib.mjs"

const received = []
const receiver = createServer((req, res) => {
  const chunks = []
  req.on("data", (c) => chunks.push(c))
  req.on("end", () => {
    received.push({ headers: req.headers, body: Buffer.concat(chunks).toString("utf8") })
    res.writeHead(200).end()
  })
})
await new Promise((resolve) => receiver.listen(0, "127.0.0.1", resolve))
const url = `http://127.0.0.1:${receiver.address().port}/hooks/crm`

try {
  const company = await newCompany()
  // No signingSecret given: the server makes one and shows it in this answer only.
  const integration = (await call(company.token, "POST", "/v1/integrations", {
    type: "webhook",
    name: "Example receiver",
    settings: { url, selectedEventKeys: ["message.created"], channelFilter: "all" }
  })).data
  const secret = integration.signing_secret
  if (typeof secret !== "string") throw new Error("the answer carries no signing_secret")

  const channel = (await call(company.token, "POST", "/v1/channels", { type: "msgr_a", provider: "sandbox", name: "Support" })).data
  const sent = (await call(company.token, "POST", "/v1/messages/send", { channel_id: channel.id, to: { phone: "+14155550123" }, text: "Hello" })).data

  const delivery = await until("a webhook delivery", () => received[0])
  const envelope = new Webhook(secret).verify(delivery.body, {
    "webhook-id": delivery.headers["webhook-id"],
    "webhook-timestamp": delivery.headers["webhook-timestamp"],
    "webhook-signature": delivery.headers["webhook-signature"]
  })
  const { key, data } = keyAndData(envelope)
  if (key !== "message.created" || data?.message?.id !== sent.id) throw new Error(`unexpected delivery ${delivery.body}`)
  if (envelope.id !== delivery.headers["webhook-id"]) throw new Error("the envelope id is not the webhook-id")

  // A body changed in transit fails verification.
  let refused = false
  try {
    new Webhook(secret).verify(delivery.body.replace("Hello", "Hullo"), delivery.headers)
  } catch {
    refused = true
  }
  if (!refused) throw new Error("a tampered body verified")
  console.log(`webhook ${envelope.id} (${key}) verified with the secret shown at creation; a tampered copy was refused`)
} finally {
  receiver.close()
}
