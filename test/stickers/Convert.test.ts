import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import sharp from "sharp"
import { convertToSticker, isWebp, maxOutputBytes, sniffFormat } from "../../src/stickers/Convert.ts"
import * as images from "../support/Images.ts"

const convert = (bytes: Uint8Array) => Effect.runPromise(Effect.result(convertToSticker(bytes)))

const alphaGrid = async (webp: Uint8Array) => {
  const { data, info } = await sharp(webp).ensureAlpha().raw().toBuffer({ resolveWithObject: true })
  return (x: number, y: number) => data[(y * info.width + x) * info.channels + 3]
}

describe("sticker conversion", () => {
  it("recognizes the accepted formats by their bytes only", async () => {
    assert.strictEqual(sniffFormat(await images.png()), "png")
    assert.strictEqual(sniffFormat(await images.jpeg()), "jpeg")
    assert.strictEqual(sniffFormat(await images.webp()), "webp")
    assert.strictEqual(sniffFormat(await sharp(await images.png()).gif().toBuffer()), null)
    assert.strictEqual(sniffFormat(images.svg), null)
    const wav = Buffer.concat([Buffer.from("RIFF"), Buffer.alloc(4), Buffer.from("WAVEfmt ")])
    assert.isFalse(isWebp(wav))
    assert.isTrue(isWebp(await images.webp()))
    assert.isFalse(isWebp(Buffer.from("RIFF")))
  })

  it("fits a wide image inside 512x512 on a transparent canvas", async () => {
    const result = await convert(await images.png(1000, 250))
    assert.isTrue(result._tag === "Success")
    if (result._tag !== "Success") return
    assert.deepStrictEqual([result.success.width, result.success.height], [512, 512])
    const alpha = await alphaGrid(result.success.bytes)
    // 1000x250 scales to 512x128: rows above and below the picture stay clear.
    assert.deepStrictEqual([alpha(256, 5), alpha(256, 506), alpha(256, 256) > 0], [0, 0, true])
  })

  it("applies the EXIF orientation before fitting", async () => {
    const sideways = await sharp({ create: { width: 400, height: 100, channels: 3, background: "#ff0000" } })
      .jpeg()
      .withMetadata({ orientation: 6 })
      .toBuffer()
    const result = await convert(sideways)
    if (result._tag !== "Success") return assert.fail("conversion failed")
    const alpha = await alphaGrid(result.success.bytes)
    // Upright it is 100x400: the picture is a tall strip in the middle, the sides are clear.
    assert.deepStrictEqual([alpha(10, 256), alpha(500, 256), alpha(256, 10) > 0, alpha(256, 500) > 0], [0, 0, true, true])
  })

  it("keeps only the first frame of an animated WebP", async () => {
    const frame = (colour: string) => sharp({ create: { width: 64, height: 64, channels: 4, background: colour } }).png().toBuffer()
    const animated = await sharp([await frame("#ff0000"), await frame("#00ff00")], { join: { animated: true } }).webp().toBuffer()
    assert.strictEqual((await sharp(animated).metadata()).pages, 2)
    const result = await convert(animated)
    if (result._tag !== "Success") return assert.fail("conversion failed")
    const meta = await sharp(result.success.bytes).metadata()
    assert.strictEqual(meta.pages ?? 1, 1)
    const { data } = await sharp(result.success.bytes).raw().toBuffer({ resolveWithObject: true })
    const centre = (256 * 512 + 256) * 4
    assert.isTrue(data[centre] > 200 && data[centre + 1] < 50, "red, the first frame")
  })

  it("refuses beyond 25 megapixels from the header, and says why for each bad input", async () => {
    const cases: Array<[string, Uint8Array, string]> = [
      ["pixel flood", await images.pixelFlood(), "too_many_pixels"],
      ["truncated", await images.truncated(), "unreadable_image"],
      ["text", images.text, "unsupported_format"],
      ["svg", images.svg, "unsupported_format"],
      ["over 5 MB", new Uint8Array(5 * 1024 * 1024 + 1), "file_too_large"]
    ]
    for (const [label, bytes, reason] of cases) {
      const result = await convert(bytes)
      assert.isTrue(result._tag === "Failure" && result.failure.reason === reason, `${label}: ${JSON.stringify(result)}`)
    }
  })

  it("keeps every output within the WhatsApp sticker budget", async () => {
    for (const input of [await images.noise(1200), await images.jpeg(2000, 2000), await images.png(10, 10)]) {
      const result = await convert(input)
      if (result._tag !== "Success") return assert.fail("conversion failed")
      assert.isAtMost(result.success.size, maxOutputBytes)
      assert.strictEqual(result.success.bytes.byteLength, result.success.size)
    }
  })
})
