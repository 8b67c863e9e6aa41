import { assert, describe, it } from "@effect/vitest"
import { Effect, Exit, Option, Stream } from "effect"
import { TestClock } from "effect/testing"
import { readdirSync } from "node:fs"
import { BlobStore, isStoragePath, ownedBy } from "../../src/platform/files/BlobStore.ts"
import { contentDisposition } from "../../src/platform/files/FileResponse.ts"
import { deriveKey, SignedUrls } from "../../src/platform/files/SignedUrls.ts"
import { acceptsDeclared, demuxerOf } from "../../src/media/Voice.ts"
import type { RateLimiter } from "../../src/platform/RateLimiter.ts"
import { tempDir } from "./support.ts"

const noLimiter = {} as RateLimiter["Service"]
const chunks = (sizes: ReadonlyArray<number>) => Stream.fromIterable(sizes.map((n) => new Uint8Array(n).fill(1)))

describe("BlobStore", () => {
  it.effect("streams within the limit; past it the write fails and leaves no file at all", () =>
    Effect.gen(function*() {
      const root = tempDir()
      const store = BlobStore.make(root)
      const path = store.newPath(3, "uploads", ".bin")
      assert.match(path, /^c3\/uploads\/[0-9a-f-]{36}\.bin$/)
      assert.deepStrictEqual(yield* store.writeStream(path, chunks([4, 4, 2]), 10), { size: 10 })
      assert.deepStrictEqual(yield* store.size(path), Option.some(10))
      const over = store.newPath(3, "uploads", ".bin")
      const failed = yield* Effect.exit(store.writeStream(over, chunks([4, 4, 3]), 10))
      assert.ok(Exit.isFailure(failed))
      assert.strictEqual(Exit.findErrorOption(failed).pipe(Option.map((e) => e._tag), Option.getOrNull), "BlobTooLarge")
      assert.deepStrictEqual(yield* store.size(over), Option.none())
      assert.deepStrictEqual(readdirSync(`${root}/c3/uploads`), [path.split("/").pop()])
    }))

  it.effect("accepts only company-namespaced relative paths", () =>
    Effect.gen(function*() {
      const store = BlobStore.make(tempDir())
      for (const bad of ["../etc/passwd", "/etc/passwd", "c1/../c2/x", "c0/x", "x/y", "c1/.hidden", "c1//x", "c1"]) {
        assert.isFalse(isStoragePath(bad), bad)
        assert.ok(Exit.isFailure(yield* Effect.exit(store.absolute(bad))), bad)
      }
      assert.isTrue(ownedBy(12, "c12/uploads/a.png"))
      assert.isFalse(ownedBy(1, "c12/uploads/a.png"))
    }))
})

describe("SignedUrls", () => {
  const make = (key: string) => SignedUrls.make(deriveKey(key), "https://app.test/", noLimiter)

  it.effect("verifies what it signed, whatever the query order, and nothing else", () =>
    Effect.gen(function*() {
      const signed = make("k1")
      const link = new URL(signed.sign("/v1/x/1/media", { params: { w: "640", c: "5" } }))
      assert.strictEqual(link.origin, "https://app.test")
      const pathAndQuery = link.pathname + link.search
      assert.isTrue(yield* signed.verify(pathAndQuery))
      const reordered = `${link.pathname}?signature=${link.searchParams.get("signature")}&w=640&c=5`
      assert.isTrue(yield* signed.verify(reordered))
      assert.isFalse(yield* signed.verify(pathAndQuery.replace("w=640", "w=256")))
      assert.isFalse(yield* signed.verify(`${pathAndQuery}&signature=again`))
      assert.isFalse(yield* signed.verify(link.pathname))
      assert.isFalse(yield* make("k2").verify(pathAndQuery), "another key revokes the link")
    }))

  it.effect("refuses a link once its expiry has passed", () =>
    Effect.gen(function*() {
      const signed = make("k1")
      const link = new URL(signed.sign("/v1/x", { expiresAt: 60 }))
      const pathAndQuery = link.pathname + link.search
      assert.isTrue(yield* signed.verify(pathAndQuery))
      yield* TestClock.adjust("61 seconds")
      assert.isFalse(yield* signed.verify(pathAndQuery))
    }))
})

describe("voice input checks", () => {
  it("forces a demuxer from the leading bytes and refuses playlists and unknown data", () => {
    const bytes = (text: string) => new TextEncoder().encode(text)
    assert.deepStrictEqual(demuxerOf(bytes("OggS\0\x02")), { value: "ogg" })
    assert.deepStrictEqual(demuxerOf(new Uint8Array([0x1a, 0x45, 0xdf, 0xa3, 1])), { value: "matroska" })
    assert.deepStrictEqual(demuxerOf(bytes("RIFF\x10\0\0\0WAVEfmt ")), { value: "wav" })
    assert.deepStrictEqual(demuxerOf(bytes("\0\0\0\x20ftypM4A ")), { value: "mov" })
    assert.deepStrictEqual(demuxerOf(bytes("ID3\x04")), { value: "mp3" })
    assert.deepStrictEqual(demuxerOf(new Uint8Array([0xff, 0xf1, 0x50])), { value: "aac" })
    assert.deepStrictEqual(demuxerOf(new Uint8Array([0xff, 0xfb, 0x90])), { value: "mp3" })
    for (const playlist of ["#EXTM3U\n", "  #EXT-X-VERSION:3", "ffconcat version 1.0", "[playlist]\nFile1=x"]) {
      assert.match(demuxerOf(bytes(playlist)).error ?? "", /Playlists/, playlist)
    }
    assert.match(demuxerOf(bytes("hello world")).error ?? "", /not audio/)
  })

  it("checks declared names and types", () => {
    assert.deepStrictEqual(acceptsDeclared("a.webm", "video/webm"), Option.none())
    assert.deepStrictEqual(acceptsDeclared("recording", "audio/x-m4a"), Option.none())
    assert.deepStrictEqual(acceptsDeclared("a.aac", "application/octet-stream"), Option.none())
    assert.isTrue(Option.isSome(acceptsDeclared("a.m3u8", "audio/ogg")))
    assert.isTrue(Option.isSome(acceptsDeclared("a.ogg", "application/x-mpegURL")))
    assert.isTrue(Option.isSome(acceptsDeclared("concat:a.ogg", "audio/ogg")))
    assert.isTrue(Option.isSome(acceptsDeclared("a.flac", "audio/flac")))
  })
})

describe("content disposition", () => {
  it("keeps quotes and non-ASCII out of the plain filename and gives the exact name as filename*", () => {
    assert.strictEqual(contentDisposition("attachment", null), "attachment")
    assert.strictEqual(
      contentDisposition("attachment", `отчёт "1".txt`),
      `attachment; filename="_____ _1_.txt"; filename*=UTF-8''${encodeURIComponent(`отчёт "1".txt`)}`
    )
  })
})
