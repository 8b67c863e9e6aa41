// Prints every event of a company as it happens, over the Pusher protocol with pusher-js.
//   API=http://localhost:8080 REALTIME=ws://localhost:8081 TOKEN=<token> COMPANY=<id> node examples/listen.mjs
import Pusher from "pusher-js"

const api = process.env.API ?? "http://localhost:8080"
const realtime = new URL(process.env.REALTIME ?? "ws://localhost:8081")
const token = process.env.TOKEN
const company = process.env.COMPANY
if (!token || !company) {
  console.error("set TOKEN (a token of the company) and COMPANY (its id)")
  process.exit(2)
}

const pusher = new Pusher(process.env.PUSHER_APP_KEY ?? "crm", {
  cluster: "local",
  wsHost: realtime.hostname,
  wsPort: Number(realtime.port),
  forceTLS: realtime.protocol === "wss:",
  enabledTransports: ["ws"],
  disableStats: true,
  channelAuthorization: {
    transport: "ajax",
    endpoint: `${api}/v1/broadcasting/auth`,
    headers: { authorization: `Bearer ${token}`, accept: "application/json" }
  }
})

const channel = pusher.subscribe(`private-company.${company}`)
channel.bind("pusher:subscription_succeeded", () => console.log(`listening on private-company.${company}`))
channel.bind("pusher:subscription_error", (error) => {
  console.error("subscription refused", error)
  process.exit(1)
})
// The Pusher event name is the event key; the message data is the event envelope.
channel.bind_global((name, envelope) => {
  if (name.startsWith("pusher:")) return
  console.log(JSON.stringify({ event: envelope?.event ?? name, seq: envelope?.seq, data: envelope?.data }))
})
