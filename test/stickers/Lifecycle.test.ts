import { assert, describe, it } from "@effect/vitest"
import { Option, Redacted } from "effect"
import { mkdtemp, rm } from "node:fs/promises"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { afterAll, beforeAll } from "vitest"
import { type AppConfigShape } from "../../src/platform/Config.ts"
import { TelegramFake } from "../fakes/TelegramFake.ts"
import * as images from "../support/Images.ts"
import { query } from "../support/Sql.ts"
import { createCompany, getLink, type RunningServer, startServer } from "../support/TestServer.ts"
import { createPack, listPacks, uploadStickers } from "./support.ts"
import { eventually, finishedEvents, importSet, stickerSet, telegramChannel } from "./telegram.ts"

/**
 * Restarts need a database that outlives a server, and no other server adopting the job
 * in between: each test here runs its servers one after another on a private embedded
 * database (in both test modes), with files in a private storage directory.
 */
const tg = new TelegramFake()
const dirs: Array<string> = []
beforeAll(() => tg.http.start())
afterAll(async () => {
  await tg.http.close()
  for (const dir of dirs) await rm(dir, { recursive: true, force: true })
})

const privateServer = async (dir: string, overrides: Partial<AppConfigShape> = {}) =>
  startServer({
    databaseUrl: Option.none(),
    dataDir: dir,
    storageDir: join(dir, "files"),
    telegramApiBase: tg.http.url,
    cluster: "single",
    ...overrides
  })

const newDir = async () => {
  const dir = await mkdtemp(join(tmpdir(), "crm-stickers-"))
  dirs.push(dir)
  return dir
}

const jobs = (server: RunningServer, companyId: number) =>
  query<{ id: number; status: string; outcome: string | null; imported: number; failed: number; next_index: number }>(
    server,
    `SELECT id, status, result->>'outcome' AS outcome, (progress->>'imported')::int AS imported, (progress->>'failed')::int AS failed,
       (progress->>'next_index')::int AS next_index
     FROM jobs WHERE kind = 'sticker.import' AND company_id = $1 ORDER BY id`,
    [companyId]
  )

describe("sticker imports survive restarts", () => {
  it("resumes a job cut off by a shutdown where it stopped, on the next start", async () => {
    const dir = await newDir()
    let server = await privateServer(dir)
    const company = await createCompany(server)
    const bot = await telegramChannel(server, tg, company.token)
    const set = await stickerSet(tg, ["static", "static", "static", "static"], { emoji: (i) => ["🐶", "🐱", "🐭", "🐹"][i] })
    // The first download is served, the second never answers: the shutdown comes mid-way.
    tg.http.inject("file", { status: 200, bytes: new Uint8Array(await images.webp(512, 512)), contentType: "image/webp" })
    tg.http.inject("file", "hang")
    const downloads = () => tg.http.calls("file").filter((c) => c.path.startsWith(`/file/bot${bot.botToken}/`)).length
    assert.strictEqual((await importSet(server, company.token, set.name)).status, 202)
    await eventually(async () => (downloads() === 2 ? true : undefined))
    const [midway] = await jobs(server, company.id)
    assert.deepStrictEqual([midway.status, midway.imported, midway.next_index], ["running", 1, 1])
    await server.close()

    server = await privateServer(dir)
    try {
      // Well inside the 60 s lease: the job was handed back at shutdown, not left to expire.
      const event = await eventually(async () => (await finishedEvents(server, company.token))[0], 20_000)
      assert.deepStrictEqual([event.data.outcome, event.data.imported, event.data.failed], ["success", 4, 0])
      assert.strictEqual(downloads(), 5)
      const [pack] = await listPacks(server, company.token)
      assert.deepStrictEqual(pack.stickers.map((s: any) => s.emoji_tags[0]), ["🐶", "🐱", "🐭", "🐹"])
      assert.deepStrictEqual((await jobs(server, company.id)).map((j) => [j.status, j.outcome, j.imported]), [["finished", "success", 4]])
      assert.strictEqual((await finishedEvents(server, company.token)).length, 1)
    } finally {
      await server.close()
    }
  }, 120_000)

  it("adopts at start a queued job and one whose runner died holding its lease", async () => {
    const dir = await newDir()
    let server = await privateServer(dir)
    const company = await createCompany(server)
    const bot = await telegramChannel(server, tg, company.token)
    const queued = await stickerSet(tg, ["static", "static"])
    const orphan = await stickerSet(tg, ["static", "animated", "static", "static"])
    const payload = (set: typeof queued, skipped: number) =>
      JSON.stringify({
        channel_id: bot.id,
        user_id: null,
        set_name: set.name,
        title: set.title,
        items: set.stickers.filter((s) => !s.is_animated).map((s) => ({ file_id: s.file_id, emoji: s.emoji ?? null })),
        skipped_animated: skipped,
        truncated: false
      })
    await query(
      server,
      `INSERT INTO jobs (kind, company_id, payload, status)
       VALUES ('sticker.import', $1, $2::jsonb, 'queued')`,
      [company.id, payload(queued, 0)]
    )
    await query(
      server,
      `INSERT INTO jobs (kind, company_id, payload, status, attempts, lease_owner, lease_until)
       VALUES ('sticker.import', $1, $2::jsonb, 'running', 1, 'a-runner-that-died', now() - interval '1 minute')`,
      [company.id, payload(orphan, 1)]
    )
    await server.close()

    server = await privateServer(dir)
    try {
      const events = await eventually(async () => {
        const found = await finishedEvents(server, company.token)
        return found.length === 2 ? found : undefined
      })
      assert.deepStrictEqual(
        events.map((e) => [e.data.name, e.data.outcome, e.data.imported, e.data.skipped_animated]).sort(),
        [[queued.name, "success", 2, 0], [orphan.name, "success", 3, 1]].sort()
      )
      assert.deepStrictEqual((await listPacks(server, company.token)).map((p) => p.stickers_count).sort(), [2, 3])
      const stranger = await createCompany(server)
      assert.deepStrictEqual([await listPacks(server, stranger.token), await finishedEvents(server, stranger.token)], [[], []])
    } finally {
      await server.close()
    }
  }, 120_000)
})

describe("signed sticker links", () => {
  it("stay valid across restarts and are all revoked by rotating the signing key", async () => {
    const dir = await newDir()
    let server = await privateServer(dir, { signingKey: Option.some(Redacted.make("first-signing-key-0123456789")) })
    const company = await createCompany(server)
    const pack = await createPack(server, company.token)
    const upload = await uploadStickers(server, company.token, pack.id, [{ name: "a.png", bytes: await images.png() }])
    const oldUrl = upload.body.data.created[0].url as string
    await server.close()

    server = await privateServer(dir, { signingKey: Option.some(Redacted.make("first-signing-key-0123456789")) })
    try {
      assert.strictEqual((await getLink(server, oldUrl)).status, 200)
    } finally {
      await server.close()
    }

    server = await privateServer(dir, { signingKey: Option.some(Redacted.make("second-signing-key-9876543210")) })
    try {
      assert.strictEqual((await getLink(server, oldUrl)).status, 403)
      const [listed] = await listPacks(server, company.token)
      const newUrl = listed.stickers[0].url as string
      assert.notStrictEqual(newUrl, oldUrl)
      assert.strictEqual((await getLink(server, newUrl)).status, 200)
    } finally {
      await server.close()
    }
  }, 120_000)
})
