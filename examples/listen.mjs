// Prints every event of a company as it happens, over the Pusher protocol with pusher-js.
//   API=http://localhost:8080 REALTIME=ws://localhost:8081 TOKEN=<token> COMPANY=<id> node examples/listen.mjs
import { connect, keyAndData } from "./lib.mjs"

const token = process.env.TOKEN
const company = process.env.COMPANY
if (!token || !company) {
  console.error("set TOKEN (a token of the company) and COMPANY (its id)")
  process.exit(2)
}

// pusher-js with the gateway's host and port, authorizing private channels at POST /v1/broadcasting/auth.
const channel = connect(token).subscribe(`private-company.${company}`)
channel.bind("pusher:subscription_succeeded", () => console.log(`listening on private-company.${company}`))
channel.bind("pusher:subscription_error", (error) => {
  console.error("subscription refused", error)
  process.exit(1)
})
// The Pusher event name is the event key; the message data is the event envelope.
channel.bind_global((name, envelope) => {
  if (name.startsWith("pusher:")) return
  const { key, data } = keyAndData(envelope, name)
  console.log(JSON.stringify({ event: key, seq: envelope?.seq, data }))
})
