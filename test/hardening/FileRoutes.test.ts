import { assert, describe, it } from "@effect/vitest"
import { connect } from "node:net"
import { afterAll, beforeAll } from "vitest"
import { uploadLimitBytes } from "../../src/media/Domain.ts"
import { createCompany, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer({ maxBodyBytes: 64 * 1024 })
})
afterAll(() => server?.close())

interface Answer {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: any
}

/** Parses every complete HTTP/1.1 answer (Content-Length framed) at the start of `bytes`. */
const answersIn = (bytes: Buffer): Array<Answer> => {
  const out: Array<Answer> = []
  let at = 0
  while (true) {
    const end = bytes.indexOf("\r\n\r\n", at)
    if (end < 0) return out
    const [statusLine, ...lines] = bytes.subarray(at, end).toString().split("\r\n")
    const headers = Object.fromEntries(lines.map((l) => [l.slice(0, l.indexOf(":")).toLowerCase(), l.slice(l.indexOf(":") + 1).trim()]))
    const length = Number(headers["content-length"] ?? 0)
    if (bytes.length < end + 4 + length) return out
    const text = bytes.subarray(end + 4, end + 4 + length).toString()
    out.push({ status: Number(statusLine.split(" ")[1]), headers, body: text === "" ? undefined : JSON.parse(text) })
    at = end + 4 + length
  }
}

/**
 * A keep-alive client that sends `head` and then `size` body bytes as fast as the server takes them,
 * then `after` (a second request on the same connection). Resolves with what arrived and whether the
 * server reset the connection before its answer was complete.
 */
const exchange = (head: string, size: number, after = "") =>
  new Promise<{ answers: Array<Answer>; resetBeforeAnswer: boolean }>((resolve) => {
    const url = new URL(server.url)
    const socket = connect(Number(url.port), url.hostname)
    const received: Array<Buffer> = []
    let resetBeforeAnswer = false
    const finish = () => resolve({ answers: answersIn(Buffer.concat(received)), resetBeforeAnswer })
    socket.on("data", (chunk) => received.push(chunk))
    socket.on("error", () => {
      resetBeforeAnswer = answersIn(Buffer.concat(received)).length === 0
    })
    socket.on("close", finish)
    socket.write(head)
    const chunk = Buffer.alloc(64 * 1024, "a")
    let sent = 0
    const pump = () => {
      while (sent < size && !socket.destroyed) {
        const piece = chunk.subarray(0, Math.min(chunk.length, size - sent))
        sent += piece.length
        if (!socket.write(piece)) return void socket.once("drain", pump)
      }
      if (after !== "") socket.write(after)
      setTimeout(() => socket.end(), 1_000)
    }
    pump()
  })

const head = (method: string, path: string, headers: Record<string, string>, size: number) =>
  `${method} ${path} HTTP/1.1\r\nhost: test\r\nconnection: keep-alive\r\ncontent-length: ${size}\r\n` +
  Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") + "\r\n"

const multipartHead = (boundary: string) =>
  `--${boundary}\r\ncontent-disposition: form-data; name="file"; filename="big.bin"\r\ncontent-type: application/octet-stream\r\n\r\n`

describe("file routes under a large body the server does not want", () => {
  it("answers a JSON refusal before closing, never a reset, on signed, upload and hook routes", async () => {
    const company = await createCompany(server)
    const other = await createCompany(server)
    const size = 24 * 1024 * 1024
    const cases: Array<[string, string, Record<string, string>, number]> = [
      ["GET", "/v1/messages/1/attachments/1/media?c=1&signature=x", {}, 403],
      ["POST", "/v1/messages/1/attachments/1/media?c=1&signature=x", { "content-type": "application/json" }, 405],
      ["GET", "/v1/exports/1/file?c=1&signature=x", {}, 403],
      ["PUT", "/v1/stickers/1/file?signature=x", {}, 405],
      ["POST", "/v1/uploads", { "content-type": "multipart/form-data; boundary=b" }, 401],
      ["POST", "/v1/uploads/voice", { authorization: `Bearer ${company.token}`, "content-type": "application/json" }, 413],
      ["POST", "/hooks/telegram/1", { "content-type": "application/json" }, 413]
    ]
    for (const [method, path, headers, status] of cases) {
      const result = await exchange(head(method, path, headers, size), size)
      assert.isFalse(result.resetBeforeAnswer, `${method} ${path}: reset before the answer`)
      assert.strictEqual(result.answers.length, 1, `${method} ${path}`)
      const [answer] = result.answers
      assert.strictEqual(answer.status, status, `${method} ${path}: ${JSON.stringify(answer.body)}`)
      assert.strictEqual(typeof answer.body.message, "string")
      assert.strictEqual(answer.headers.connection, "close", "a body left unread ends the connection, announced")
    }
    const pack = await fetch(`${server.url}/v1/sticker-packs`, {
      method: "POST",
      headers: { authorization: `Bearer ${company.token}`, "content-type": "application/json" },
      body: JSON.stringify({ name: "Pack" })
    }).then((r) => r.json() as Promise<any>)
    const foreign = await exchange(
      head("POST", `/v1/sticker-packs/${pack.data.pack.id}/stickers`, { authorization: `Bearer ${other.token}`, "content-type": "multipart/form-data; boundary=b" }, size),
      size
    )
    assert.isFalse(foreign.resetBeforeAnswer)
    assert.strictEqual(foreign.answers[0]?.status, 404, "another company's pack is not found, even under a large body")
  })

  it("refuses an upload past its limit with 422 on file while the client is still sending", async () => {
    const company = await createCompany(server)
    const boundary = "bound"
    const prefix = multipartHead(boundary)
    const size = uploadLimitBytes + 4 * 1024 * 1024
    const result = await exchange(
      head("POST", "/v1/uploads", { authorization: `Bearer ${company.token}`, "content-type": `multipart/form-data; boundary=${boundary}` }, prefix.length + size) + prefix,
      size
    )
    assert.isFalse(result.resetBeforeAnswer)
    assert.strictEqual(result.answers[0]?.status, 422, JSON.stringify(result.answers[0]?.body))
    assert.property(result.answers[0].body.errors, "file")
  })

  it("keeps the connection for the next request when the unread rest is small", async () => {
    const size = 100 * 1024
    const next = "GET /health HTTP/1.1\r\nhost: test\r\nconnection: close\r\n\r\n"
    const result = await exchange(head("GET", "/v1/exports/1/file?c=1&signature=x", {}, size), size, next)
    assert.deepStrictEqual(result.answers.map((a) => a.status), [403, 200])
    assert.notStrictEqual(result.answers[0].headers.connection, "close")
    assert.deepStrictEqual(result.answers[1].body, { status: "ok" })
  })
})
