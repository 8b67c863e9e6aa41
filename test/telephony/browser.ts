import { build } from "esbuild"
import { createHash, X509Certificate } from "node:crypto"
import { mkdtempSync, readFileSync, rmSync } from "node:fs"
import { createServer } from "node:http"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { chromium } from "playwright-core"
import { root } from "../support/Processes.ts"
import type { TestCa } from "./sip.ts"

/**
 * A WebRTC softphone in Debian's Chromium (headless, fake microphone), driven by playwright-core: a
 * local page running JsSIP (test/telephony/browser/softphone.js, bundled with esbuild at start).
 */

export const CHROMIUM = "/usr/bin/chromium"

/** What the page's `getStats()` reports for the call (see softphone.js). */
export interface CallStats {
  readonly bytesReceived: number
  readonly packetsReceived: number
  readonly bytesSent: number
  readonly packetsSent: number
  readonly dtlsState: string | null
  readonly srtpCipher: string | null
  readonly local: { readonly address: string; readonly port: number } | null
  readonly remote: { readonly address: string; readonly port: number; readonly candidateType: string } | null
}

export interface BrowserCredentials {
  readonly sip_username: string
  readonly sip_password: string
  readonly host: string
  readonly wss_url: string
  readonly display_name: string
}

/** The base64 SHA-256 of the certificate's public key: the one key Chromium accepts beyond its own roots. */
const spkiHash = (certFile: string) =>
  createHash("sha256")
    .update(new X509Certificate(readFileSync(certFile)).publicKey.export({ type: "spki", format: "der" }))
    .digest("base64")

const servePage = async () => {
  const bundle = await build({
    entryPoints: [join(root, "test/telephony/browser/softphone.js")],
    bundle: true,
    format: "iife",
    platform: "browser",
    target: "chrome120",
    write: false,
    logLevel: "silent"
  })
  const script = bundle.outputFiles[0].contents
  const html = "<!doctype html><meta charset=utf-8><title>softphone</title><script src=/softphone.js></script>"
  const server = createServer((req, res) => {
    if (req.url === "/softphone.js") res.writeHead(200, { "content-type": "text/javascript" }).end(script)
    else if (req.url === "/") res.writeHead(200, { "content-type": "text/html" }).end(html)
    else res.writeHead(404).end()
  })
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve))
  const address = server.address()
  if (address === null || typeof address === "string") throw new Error("the page server has no TCP address")
  // http://127.0.0.1 is a secure context: getUserMedia and WebRTC work without TLS on the page itself.
  return { url: `http://127.0.0.1:${address.port}/`, close: () => new Promise<void>((resolve) => server.close(() => resolve())) }
}

/**
 * Chromium with a new empty profile, trusting the run's server certificate (by its key) for wss, with
 * loopback ICE candidates allowed so that media stays on this machine's loopback with the relay.
 */
export const startBrowser = async (tls: TestCa) => {
  const page = await servePage()
  const profile = mkdtempSync(join(tmpdir(), "chromium-"))
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: [
      "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
      "--disable-background-networking", "--disable-component-update", "--disable-sync",
      "--use-fake-ui-for-media-stream", "--use-fake-device-for-media-stream",
      "--allow-loopback-in-peer-connection",
      `--ignore-certificate-errors-spki-list=${spkiHash(tls.certFile)}`
    ]
  })
  const messages: Array<string> = []
  const close = async () => {
    await context.close()
    await page.close()
    rmSync(profile, { recursive: true, force: true })
  }
  try {
    const tab = context.pages()[0] ?? await context.newPage()
    tab.on("console", (message) => void messages.push(message.text()))
    tab.on("pageerror", (error) => void messages.push(`page error: ${error.message}`))
    await tab.goto(page.url)
    const run = <A>(expression: string) => tab.evaluate<A>(expression)
    return {
      register: (credentials: BrowserCredentials) => run<string>(`softphone.register(${JSON.stringify(credentials)})`),
      call: (target: string) => run<void>(`softphone.call(${JSON.stringify(target)})`),
      stats: () => run<CallStats>("softphone.stats()"),
      hangup: () => run<void>("softphone.hangup()"),
      /** The call's progress as the page saw it (`registered`, `confirmed`, `failed: …`, `ended: …`). */
      log: () => run<Array<string>>("softphone.log()"),
      /** The page's console, for failure messages. */
      console: () => messages.join("\n"),
      close
    }
  } catch (error) {
    await close()
    throw error
  }
}

export type Browser = Awaited<ReturnType<typeof startBrowser>>
