import { randomBytes } from "node:crypto"
import sharp from "sharp"

// Real images made with sharp; every call makes fresh bytes.
const bytesOf = (image: ReturnType<typeof sharp>) => image.toBuffer().then((buffer) => new Uint8Array(buffer))

export const png = (width = 800, height = 600) =>
  bytesOf(sharp({ create: { width, height, channels: 4, background: { r: 200, g: 40, b: 40, alpha: 1 } } }).png())

export const jpeg = (width = 300, height = 900) =>
  bytesOf(sharp({ create: { width, height, channels: 3, background: { r: 20, g: 120, b: 200 } } }).jpeg())

export const webp = (width = 512, height = 384) =>
  bytesOf(sharp({ create: { width, height, channels: 4, background: { r: 10, g: 200, b: 10, alpha: 0.5 } } }).webp())

/** Random pixels: the worst case for a WebP size budget. */
export const noise = (side = 1024) => bytesOf(sharp(randomBytes(side * side * 3), { raw: { width: side, height: side, channels: 3 } }).png())

/** 6000x5000 = 30 megapixels in a small PNG (one colour compresses to almost nothing). */
export const pixelFlood = () =>
  bytesOf(sharp({ create: { width: 6000, height: 5000, channels: 3, background: "#000000" } }).png({ compressionLevel: 9 }))

/** The first half of a PNG of random pixels. */
export const truncated = async () => {
  const whole = await noise(400)
  return whole.subarray(0, Math.floor(whole.length / 2))
}

/** An SVG with a script in it: never to be served as an image. */
export const svg = new TextEncoder().encode(
  `<svg xmlns="http://www.w3.org/2000/svg" width="10" height="10"><script>alert(1)</script><rect width="10" height="10"/></svg>`
)

export const text = new TextEncoder().encode("this is not an image\n".repeat(20))
