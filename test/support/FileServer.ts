import { afterAll, beforeAll } from "vitest"
import type { AppConfigShape } from "../../src/platform/Config.ts"
import type { FakeHttp } from "../fakes/FakeHttp.ts"
import { type RunningServer, startServer } from "./TestServer.ts"

/**
 * The server of one test file: `beforeAll` starts the provider fakes it talks to, then the app
 * configured by `config` (read once they listen, so it can name their urls); `afterAll` closes all.
 * The answer stands for the running server from `beforeAll` on.
 */
export const fileServer = (config: () => Partial<AppConfigShape> = () => ({}), fakes: ReadonlyArray<FakeHttp> = []): RunningServer => {
  let running: RunningServer | undefined
  beforeAll(async () => {
    for (const fake of fakes) await fake.start()
    running = await startServer(config())
  })
  afterAll(async () => {
    await running?.close()
    for (const fake of fakes) await fake.close()
  })
  const current = () => {
    if (running === undefined) throw new Error("the file's server is not running (it starts in beforeAll)")
    return running
  }
  return {
    get url() {
      return current().url
    },
    get platformKey() {
      return current().platformKey
    },
    get realtimePort() {
      return current().realtimePort
    },
    get pusherAppKey() {
      return current().pusherAppKey
    },
    runInApp: (effect) => current().runInApp(effect),
    close: () => current().close()
  }
}
