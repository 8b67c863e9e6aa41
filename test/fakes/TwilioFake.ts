import { FakeHttp, type FakeRequest } from "./FakeHttp.ts"

/** Twilio's Messages API as documented: `POST /2010-04-01/Accounts/{AccountSid}/Messages.json`, form body, HTTP Basic. */
export const twilioFake = (accountSid: string, authToken: string) => {
  let counter = 0
  const authorized = (request: FakeRequest) =>
    request.headers.authorization === `Basic ${Buffer.from(`${accountSid}:${authToken}`).toString("base64")}`
  return new FakeHttp(
    (request) => `${request.method} ${request.path}`,
    (request) => {
      if (request.method !== "POST" || request.path !== `/2010-04-01/Accounts/${accountSid}/Messages.json`) {
        return { status: 404, body: { code: 20404, message: "The requested resource was not found", status: 404 } }
      }
      if (!authorized(request)) return { status: 401, body: { code: 20003, message: "Authentication Error - invalid username", status: 401 } }
      const { To, From, MessagingServiceSid, Body } = request.body as Record<string, string | undefined>
      if (To === undefined || !/^\+[1-9]\d{6,14}$/.test(To)) {
        return { status: 400, body: { code: 21211, message: `The 'To' number ${To ?? ""} is not a valid phone number.`, status: 400 } }
      }
      if (From === undefined && MessagingServiceSid === undefined) {
        return { status: 400, body: { code: 21603, message: "A 'From' or 'MessagingServiceSid' parameter is required to send a message", status: 400 } }
      }
      if (Body === undefined || Body === "") return { status: 400, body: { code: 21602, message: "Message body is required.", status: 400 } }
      counter++
      return {
        status: 201,
        body: {
          sid: `SM${String(counter).padStart(32, "0")}`,
          account_sid: accountSid,
          to: To,
          from: From ?? null,
          messaging_service_sid: MessagingServiceSid ?? null,
          body: Body,
          status: "queued",
          num_segments: "1",
          api_version: "2010-04-01"
        }
      }
    }
  )
}
