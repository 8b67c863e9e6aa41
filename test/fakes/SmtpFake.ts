import { SMTPServer } from "smtp-server"

/** One message as the SMTP server received it after DATA. */
export interface ReceivedMail {
  readonly from: string
  readonly to: ReadonlyArray<string>
  readonly raw: string
  readonly subject: string
  /** The text part with soft line breaks and quoted-printable escapes undone. */
  readonly text: string
}

const unfold = (raw: string) => {
  const split = raw.indexOf("\r\n\r\n")
  const head = raw.slice(0, split)
  const body = raw.slice(split + 4)
  const subject = /^Subject: (.*)$/m.exec(head)?.[1]?.trim() ?? ""
  const text = /Content-Transfer-Encoding: quoted-printable/i.test(head)
    ? body.replace(/=\r\n/g, "").replace(/=([0-9A-F]{2})/g, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)))
    : body
  return { subject, text }
}

/**
 * A real SMTP server (nodemailer's `smtp-server`) on a loopback port: records what it accepts and
 * can refuse the next recipients with a given reply (e.g. 451 transient, 550 permanent).
 */
export class SmtpFake {
  readonly received: Array<ReceivedMail> = []
  private readonly refusals: Array<{ code: number; message: string }> = []
  /** Messages whose DATA arrived and that wait `acceptDelayMs` before the 250 (accepted even if the client is gone by then). */
  receiving = 0
  /** How long the server takes to accept a message once its DATA is in: a slow relay. */
  acceptDelayMs = 0
  private server: SMTPServer | undefined
  port = 0

  async start() {
    this.server = new SMTPServer({
      authOptional: true,
      disabledCommands: ["STARTTLS"],
      logger: false,
      onRcptTo: (address, _session, callback) => {
        const refusal = this.refusals.shift()
        if (refusal === undefined) return callback()
        const error = Object.assign(new Error(refusal.message), { responseCode: refusal.code })
        callback(error)
        void address
      },
      onData: (stream, session, callback) => {
        const chunks: Array<Buffer> = []
        stream.on("data", (chunk: Buffer) => chunks.push(chunk))
        stream.on("end", () => {
          const raw = Buffer.concat(chunks).toString("utf8")
          const accept = () => {
            this.received.push({
              from: session.envelope.mailFrom === false ? "" : session.envelope.mailFrom.address,
              to: session.envelope.rcptTo.map((r) => r.address),
              raw,
              ...unfold(raw)
            })
            callback()
          }
          if (this.acceptDelayMs === 0) return accept()
          this.receiving++
          setTimeout(() => {
            this.receiving--
            accept()
          }, this.acceptDelayMs)
        })
      }
    })
    await new Promise<void>((resolve) => this.server!.listen(0, "127.0.0.1", resolve))
    this.port = (this.server as unknown as { server: { address(): { port: number } } }).server.address().port
    return this
  }

  get url() {
    return `smtp://127.0.0.1:${this.port}`
  }

  /** The next RCPT TO is answered with `code` (each call queues one refusal). */
  refuseNext(code: number, message: string) {
    this.refusals.push({ code, message })
  }

  to(address: string) {
    return this.received.filter((m) => m.to.some((t) => t.toLowerCase() === address.toLowerCase()))
  }

  close() {
    return new Promise<void>((resolve) => this.server?.close(() => resolve()) ?? resolve())
  }
}
