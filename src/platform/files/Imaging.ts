import { Context, Effect, Layer, Semaphore } from "effect"
import { lazyModule } from "../LazyModule.ts"

/** libvips and its bindings, loaded by the first image a request decodes. */
export const loadSharp = lazyModule(() => import("sharp").then((module) => module.default))

/** The spec's decode budget (also the sticker limit): larger images are refused or get no preview. */
export const maxDecodePixels = 25_000_000

/** Where the kept WebP of `width` px sits: next to its source, made once. */
export const thumbnailPath = (storagePath: string, width: number) => `${storagePath}.w${width}.webp`

/** A WebP `width` px wide (never enlarged), turned upright; fails when the input does not decode within the budget. */
export const webpOfWidth = (input: string | Uint8Array, width: number) =>
  Effect.flatMap(loadSharp, (sharp) =>
    Effect.tryPromise(() =>
      sharp(input, { limitInputPixels: maxDecodePixels, failOn: "error", animated: false })
        .rotate()
        .resize({ width, withoutEnlargement: true })
        .webp({ quality: 80 })
        .toBuffer()
    )).pipe(Effect.map((buffer) => new Uint8Array(buffer)))

/**
 * The runner's image decoding budget: thumbnails, photo previews and sticker conversions take a
 * permit each, at most two at a time (a 25-megapixel decode holds about 100 MB).
 */
export class Imaging extends Context.Service<Imaging, {
  run<A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R>
}>()("crm/media/Imaging") {
  static readonly layer = Layer.effect(
    Imaging,
    Effect.map(Semaphore.make(2), (permits) => Imaging.of({ run: permits.withPermits(1) }))
  )
}
