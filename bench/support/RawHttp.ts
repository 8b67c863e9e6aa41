/**
 * The wire side of the load generators: HTTP/1.1 over `net` with prebuilt request bytes and responses
 * framed by Content-Length. Far cheaper per request than `http.request`, so on two cores the generator
 * takes less of the CPU that the server under test needs.
 */

/** One keep-alive request to 127.0.0.1:`port`, as the bytes to write. */
export const rawRequest = (method: string, port: number, path: string, headers: Record<string, string>, body?: string) =>
  Buffer.from(
    `${method} ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nConnection: keep-alive\r\n` +
      Object.entries(headers).map(([k, v]) => `${k}: ${v}\r\n`).join("") +
      (body === undefined ? "\r\n" : `Content-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`),
    "utf8"
  )

/**
 * A `data` handler for one connection: calls `onResponse` with the status and head of each complete
 * response. Throws on a response without Content-Length (both the app and the bare server send it;
 * without it the next response's start could not be found).
 */
export const responseReader = (onResponse: (status: number, head: string) => void) => {
  let buffer: Buffer = Buffer.alloc(0)
  return (chunk: Buffer) => {
    buffer = buffer.length === 0 ? chunk : Buffer.concat([buffer, chunk])
    for (;;) {
      const headEnd = buffer.indexOf("\r\n\r\n")
      if (headEnd < 0) return
      const head = buffer.toString("latin1", 0, headEnd)
      const length = /\r\ncontent-length: *(\d+)/i.exec(head)
      if (length === null) throw new Error(`response without Content-Length:\n${head}`)
      const size = headEnd + 4 + Number(length[1])
      if (buffer.length < size) return
      buffer = buffer.subarray(size)
      onResponse(Number(head.slice(9, 12)), head)
    }
  }
}
