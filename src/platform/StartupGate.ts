import { createServer, type Server } from "node:http"

const startingBody = JSON.stringify({ message: "The server is starting. Retry shortly." })

/**
 * An HTTP server that answers 503 (with `Retry-After`) until the app's own request handler is
 * attached. The port has to be bound before the routes are built (an ephemeral port is known only
 * then), and Node leaves a request with no `request` listener unanswered: without this gate a
 * client that reaches a starting server waits forever.
 */
export const gatedServer = (): Server => {
  const server = createServer()
  server.on("request", (_request, response) => {
    // Listeners run in order: once the app's handler is attached after this one, it answers.
    if (server.listenerCount("request") > 1) return
    response.writeHead(503, {
      "content-type": "application/json",
      "content-length": Buffer.byteLength(startingBody),
      "retry-after": "1",
      connection: "close"
    })
    response.end(startingBody)
  })
  server.on("upgrade", (_request, socket) => {
    if (server.listenerCount("upgrade") > 1) return
    socket.end("HTTP/1.1 503 Service Unavailable\r\nRetry-After: 1\r\nConnection: close\r\nContent-Length: 0\r\n\r\n")
  })
  return server
}
