import { assert, describe, it } from "@effect/vitest"
import { PgClient } from "@effect/sql-pg"
import { Effect, Layer, ManagedRuntime, Redacted } from "effect"
import { SqlClient } from "effect/sql"
import { spawn } from "node:child_process"
import { connect } from "node:net"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import { stickerSet, telegramChannel } from "../stickers/telegram.ts"
import { unique } from "../support/Ids.ts"
import { answers, childrenOf, freePort, root, sleep } from "../support/Processes.ts"
import { createCompany, request, type RunningServer } from "../support/TestServer.ts"

// Real server processes (src/main.ts under the Node running the tests), on DATABASE_URL when set.

const direct = [process.execPath, "--import", "tsx", "src/main.ts"] as const

const launch = async (extraEnv: Record<string, string> = {}, command: ReadonlyArray<string> = direct) => {
  const [port, realtimePort, runnerPort] = [await freePort(), await freePort(), await freePort()]
  const platformKey = `lifecycle-${unique()}`
  const child = spawn(command[0], command.slice(1), {
    cwd: root,
    env: {
      ...process.env,
      HOST: "127.0.0.1",
      RUNNER_HOST: "127.0.0.1",
      PORT: String(port),
      REALTIME_PORT: String(realtimePort),
      RUNNER_PORT: String(runnerPort),
      PLATFORM_API_KEY: platformKey,
      LOG_LEVEL: "info",
      ...extraEnv
    },
    stdio: ["ignore", "pipe", "pipe"]
  })
  let output = ""
  child.stdout.on("data", (d) => (output += d))
  child.stderr.on("data", (d) => (output += d))
  const exited = new Promise<{ readonly code: number | null; readonly at: number }>((resolve) =>
    child.once("exit", (code) => resolve({ code, at: Date.now() }))
  )
  return { child, port, url: `http://127.0.0.1:${port}`, platformKey, output: () => output.slice(-4000), exited }
}

const alive = (pid: number) => {
  try {
    process.kill(pid, 0)
    return true
  } catch {
    return false
  }
}

/** Whether something accepts connections on the port: a server left running after its parent would. */
const listening = (port: number) =>
  new Promise<boolean>((resolve) => {
    const socket = connect({ host: "127.0.0.1", port })
    socket.once("connect", () => (socket.destroy(), resolve(true)))
    socket.once("error", () => resolve(false))
  })

const untilReady = async (server: Awaited<ReturnType<typeof launch>>) => {
  const deadline = Date.now() + 90_000
  while (!(await answers(`${server.url}/ready`, 2_000))) {
    assert.isBelow(Date.now(), deadline, `not ready:\n${server.output()}`)
    assert.isNull(server.child.exitCode, server.output())
    await sleep(100)
  }
}

/**
 * Starts `command`, sends SIGTERM to its process while five requests are in flight, and checks the drain:
 * each answered 201, a new connection refused, exit 0 within 10 s. Answers the processes the command had
 * started (the server itself when the command is a wrapper) and the API port.
 */
const drainsOnSigterm = async (command: ReadonlyArray<string>) => {
  const server = await launch({}, command)
  try {
    const deadline = Date.now() + 90_000
    while (!(await answers(`${server.url}/ready`, 2_000))) {
      assert.isBelow(Date.now(), deadline, `not ready:\n${server.output()}`)
      assert.isNull(server.child.exitCode, server.output())
      await sleep(100)
    }
    // Requests whose bodies are still arriving when the signal lands: in flight for about a second.
    const slowCreate = (n: number) => {
      const body = JSON.stringify({
        name: `Drain ${n} ${unique()}`,
        plan: "business",
        admin: { email: `drain-${n}-${unique()}@example.test`, password: "password-123", name: "Drain" }
      })
      const half = body.length >> 1
      const stream = new ReadableStream<Uint8Array>({
        async start(controller) {
          controller.enqueue(new TextEncoder().encode(body.slice(0, half)))
          await sleep(1_000)
          controller.enqueue(new TextEncoder().encode(body.slice(half)))
          controller.close()
        }
      })
      return fetch(`${server.url}/platform/v1/companies`, {
        method: "POST",
        headers: { authorization: `Bearer ${server.platformKey}`, "content-type": "application/json", accept: "application/json" },
        body: stream,
        duplex: "half",
        signal: AbortSignal.timeout(15_000)
      } as RequestInit).then(async (response) => ({ status: response.status, body: await response.text() }))
    }
    const inFlight = [1, 2, 3, 4, 5].map(slowCreate)
    await sleep(300)
    const started = childrenOf(server.child.pid!)
    const signalled = Date.now()
    server.child.kill("SIGTERM")
    await sleep(100)
    const late = await fetch(`${server.url}/health`, { signal: AbortSignal.timeout(2_000) }).then(
      (response) => `answered ${response.status}`,
      (error: unknown) => (error instanceof Error && error.name === "TimeoutError" ? "timed out" : "refused")
    )
    const results = await Promise.all(inFlight)
    for (const result of results) assert.strictEqual(result.status, 201, `${result.body}\n${server.output()}`)
    assert.strictEqual(late, "refused", "a new connection after SIGTERM is refused")
    const exit = await Promise.race([server.exited, sleep(12_000).then(() => undefined)])
    assert.isDefined(exit, `still running 12 s after SIGTERM:\n${server.output()}`)
    assert.strictEqual(exit!.code, 0, server.output())
    assert.isBelow(exit!.at - signalled, 10_000, server.output())
    // Nothing buffered is lost: the last lines written before exit are there.
    assert.include(server.output(), "\"msg\":\"shut down\"", server.output())
    return Object.assign(started, { port: server.port })
  } finally {
    if (server.child.exitCode === null) server.child.kill("SIGKILL")
    await server.exited
  }
}

describe("server process lifecycle", () => {
  it("answers every request of a client polling a starting server every 5 ms: refused or answered, never silent", async () => {
    const server = await launch()
    try {
      const outcomes = { refused: 0, timedOut: 0, statuses: {} as Record<number, number> }
      const inFlight = new Set<Promise<void>>()
      let ready = false
      const deadline = Date.now() + 90_000
      while (!ready && Date.now() < deadline && server.child.exitCode === null) {
        const attempt: Promise<void> = fetch(`${server.url}/ready`, { signal: AbortSignal.timeout(2_000) }).then(
          async (response) => {
            await response.arrayBuffer()
            outcomes.statuses[response.status] = (outcomes.statuses[response.status] ?? 0) + 1
            if (response.status === 200) ready = true
          },
          (error: unknown) => {
            const name = error instanceof Error ? error.name : ""
            if (name === "TimeoutError" || name === "AbortError") outcomes.timedOut++
            else outcomes.refused++
          }
        ).finally(() => inFlight.delete(attempt))
        inFlight.add(attempt)
        await sleep(5)
      }
      await Promise.all(inFlight)
      const summary = `${JSON.stringify(outcomes)}\n${server.output()}`
      assert.isTrue(ready, `never ready: ${summary}`)
      assert.strictEqual(outcomes.timedOut, 0, summary)
      for (const status of Object.keys(outcomes.statuses)) assert.include(["200", "503"], status, summary)
    } finally {
      server.child.kill("SIGTERM")
      await server.exited
    }
  }, 120_000)

  it("on SIGTERM stops accepting, lets in-flight requests finish and exits 0 within 10 s", () => drainsOnSigterm(direct), 150_000)

  // What the README tells users to run: the signal goes to npm's process, as a supervisor would send it.
  it.runIf(process.platform === "linux")("`npm start` on SIGTERM drains the same way, and no server process outlives it", async () => {
    const left = await drainsOnSigterm(["npm", "start", "--silent"])
    assert.deepStrictEqual(left.filter(alive), [], "a process started by npm outlived it")
    assert.isFalse(await listening(left.port), "the API port still accepts connections after npm exited")
  }, 150_000)


  // Needs the server's database from outside to see the job; embedded mode keeps it in the process.
  it.runIf(process.env.DATABASE_URL)("on SIGTERM lets a job in flight finish (or hands it back), leaves none leased and exits 0 within 10 s", async () => {
    const tg = new TelegramFake()
    await tg.http.start()
    const db = ManagedRuntime.make(PgClient.layer({ url: Redacted.make(process.env.DATABASE_URL!), maxConnections: 1 }).pipe(Layer.orDie))
    const jobOf = (companyId: number) =>
      db.runPromise(Effect.gen(function*() {
        const sql = yield* SqlClient.SqlClient
        const rows = yield* sql<{ status: string; lease_owner: string | null; result: { outcome?: string } | null }>`
          SELECT status, lease_owner, result FROM jobs WHERE kind = 'sticker.import' AND company_id = ${companyId}`
        return rows[0]
      }).pipe(Effect.orDie))
    const server = await launch({ TELEGRAM_API_BASE: tg.http.url })
    try {
      await untilReady(server)
      const asServer = { url: server.url, platformKey: server.platformKey } as unknown as RunningServer
      const company = await createCompany(asServer)
      await telegramChannel(asServer, tg, company.token)
      const set = await stickerSet(tg, ["static", "static"])
      // A slow Bot API: each sticker (getFile, then the download) takes about 0.4 s, so the import is in flight for a while.
      tg.http.delayMs = 200
      const queued = await request(asServer, "POST", "/v1/sticker-packs/import/telegram", { token: company.token, body: { link: set.name } })
      assert.strictEqual(queued.status, 202, JSON.stringify(queued.body))
      const deadline = Date.now() + 20_000
      while ((await jobOf(company.id))?.status !== "running") {
        assert.isBelow(Date.now(), deadline, `the import never started:\n${server.output()}`)
        await sleep(20)
      }
      const signalled = Date.now()
      server.child.kill("SIGTERM")
      const exit = await Promise.race([server.exited, sleep(12_000).then(() => undefined)])
      assert.isDefined(exit, `still running 12 s after SIGTERM:\n${server.output()}`)
      assert.strictEqual(exit!.code, 0, server.output())
      assert.isBelow(exit!.at - signalled, 10_000, server.output())
      const job = await jobOf(company.id)
      assert.isNull(job.lease_owner, `left leased: ${JSON.stringify(job)}`)
      // Two stickers fit in the drain budget: the import finished rather than being handed back.
      assert.deepStrictEqual([job.status, job.result?.outcome], ["finished", "success"], `${JSON.stringify(job)}\n${server.output()}`)
    } finally {
      if (server.child.exitCode === null) server.child.kill("SIGKILL")
      await server.exited
      await db.dispose()
      await tg.http.close()
    }
  }, 150_000)
})
