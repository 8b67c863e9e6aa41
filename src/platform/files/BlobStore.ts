import { Context, Effect, Layer, Option, Schema, type Scope, Stream } from "effect"
import { randomUUID } from "node:crypto"
import { createReadStream } from "node:fs"
import { mkdir, mkdtemp, open, readFile, rename, rm, stat, unlink } from "node:fs/promises"
import { tmpdir } from "node:os"
import { dirname, join, resolve, sep } from "node:path"
import { AppConfig } from "../Config.ts"

/** The file system refused an operation (missing file, disk full, bad path). */
export class BlobError extends Schema.TaggedError<BlobError>()("BlobError", {
  message: Schema.String
}) {}

/** A streamed write went past its byte limit; the partial file is already gone. */
export class BlobTooLarge extends Schema.TaggedError<BlobTooLarge>()("BlobTooLarge", {
  limit: Schema.Number
}) {}

/** Bytes `start` to `end` of a file, both inclusive (as in `Content-Range`). */
export interface ByteRange {
  readonly start: number
  readonly end: number
}

export interface BlobStat {
  readonly size: number
  readonly modifiedAt: Date
}

/** `c<company>/<folder>/<name>`: relative, company first, no `..`, no empty or hidden segments. */
const storagePathPattern = /^c[1-9]\d*(\/[A-Za-z0-9_-][A-Za-z0-9._-]*)+$/

export const isStoragePath = (path: string) => storagePathPattern.test(path) && !path.split("/").includes("..")

/** True when `path` is a storage path inside `companyId`'s namespace. */
export const ownedBy = (companyId: number, path: string) => isStoragePath(path) && path.startsWith(`c${companyId}/`)

/**
 * Files under `STORAGE_DIR`, addressed by relative storage paths namespaced by company
 * (`c<company>/<folder>/<file>`). Writes land in a temporary sibling first and are renamed
 * into place, so a reader never sees half a file and two writers of one path do not mix.
 */
export class BlobStore extends Context.Service<BlobStore, {
  /** A fresh storage path `c<company>/<folder>/<uuid><extension>` (extension with its dot, or ""). */
  newPath(companyId: number, folder: string, extension: string): string
  /** Absolute file path of a storage path; fails for anything that is not a storage path. */
  absolute(path: string): Effect.Effect<string, BlobError>
  /** Streams into `path`; past `maxBytes` the partial file is removed and the write fails with BlobTooLarge. */
  writeStream<E, R>(path: string, content: Stream.Stream<Uint8Array, E, R>, maxBytes: number): Effect.Effect<{ readonly size: number }, E | BlobError | BlobTooLarge, R>
  /** Writes `bytes` to `path` (replacing any file there). */
  write(path: string, bytes: Uint8Array): Effect.Effect<void, BlobError>
  /** Moves a local file (say, a transcoder's output) to `path`. */
  moveIn(localFile: string, path: string): Effect.Effect<void, BlobError>
  /** The file's bytes as a stream (for responses); with `range`, only bytes `start`..`end` (both inclusive). */
  read(path: string, range?: ByteRange): Stream.Stream<Uint8Array, BlobError>
  /** The whole file in memory: for small files and image processing only. */
  readBytes(path: string): Effect.Effect<Uint8Array, BlobError>
  /** Size in bytes, or None when there is no such file. */
  size(path: string): Effect.Effect<Option.Option<number>, BlobError>
  /** Size and last modification, or None when there is no such file. */
  stat(path: string): Effect.Effect<Option.Option<BlobStat>, BlobError>
  /** Removes the file; a missing file is not an error. */
  remove(path: string): Effect.Effect<void, BlobError>
  /** A scratch directory outside the storage tree, removed when the scope closes. */
  scratchDir: Effect.Effect<string, BlobError, Scope.Scope>
}>()("crm/media/BlobStore") {
  static readonly make = (root: string) => {
    const base = resolve(root)
    const fail = (what: string) => (cause: unknown) =>
      new BlobError({ message: `${what}: ${cause instanceof Error ? cause.message : String(cause)}` })

    const absolute = (path: string) =>
      isStoragePath(path) ? Effect.succeed(join(base, ...path.split("/"))) : Effect.fail(new BlobError({ message: `Not a storage path: ${path}` }))

    const temporaryFor = (file: string) => `${file}.part-${randomUUID()}`

    const prepared = (path: string) =>
      Effect.flatMap(absolute(path), (file) =>
        Effect.as(Effect.tryPromise({ try: () => mkdir(dirname(file), { recursive: true }), catch: fail("mkdir") }), file))

    const writeStream = <E, R>(
      path: string,
      content: Stream.Stream<Uint8Array, E, R>,
      maxBytes: number
    ): Effect.Effect<{ readonly size: number }, E | BlobError | BlobTooLarge, R> =>
      Effect.gen(function*() {
        const file = yield* prepared(path)
        const temporary = temporaryFor(file)
        const handle = yield* Effect.acquireRelease(
          Effect.tryPromise({ try: () => open(temporary, "wx", 0o640), catch: fail("open") }),
          (h) => Effect.promise(() => h.close())
        )
        let size = 0
        const written = yield* Stream.runForEach(content, (chunk): Effect.Effect<void, BlobError | BlobTooLarge> => {
          size += chunk.byteLength
          if (size > maxBytes) return Effect.fail(new BlobTooLarge({ limit: maxBytes }))
          return Effect.asVoid(Effect.tryPromise({ try: () => handle.write(chunk), catch: fail("write") }))
        }).pipe(
          Effect.andThen(Effect.tryPromise({ try: () => handle.sync(), catch: fail("sync") })),
          Effect.onError(() => Effect.promise(() => unlink(temporary).catch(() => undefined))),
          Effect.map(() => ({ size }))
        )
        yield* Effect.tryPromise({ try: () => rename(temporary, file), catch: fail("rename") }).pipe(
          Effect.tapError(() => Effect.promise(() => unlink(temporary).catch(() => undefined)))
        )
        return written
      }).pipe(Effect.scoped)

    const write = (path: string, bytes: Uint8Array) =>
      Effect.flatMap(prepared(path), (file) => {
        const temporary = temporaryFor(file)
        return Effect.tryPromise({
          try: async () => {
            const handle = await open(temporary, "wx", 0o640)
            try {
              await handle.write(bytes)
            } finally {
              await handle.close()
            }
            await rename(temporary, file)
          },
          catch: fail("write")
        }).pipe(Effect.tapError(() => Effect.promise(() => unlink(temporary).catch(() => undefined))))
      })

    const moveIn = (localFile: string, path: string) =>
      Effect.flatMap(prepared(path), (file) =>
        Effect.tryPromise({ try: () => rename(localFile, file), catch: fail("rename") }).pipe(
          // Across devices a rename fails; copy through a temporary sibling instead.
          Effect.catch(() =>
            Effect.flatMap(Effect.tryPromise({ try: () => readFile(localFile), catch: fail("read") }), (bytes) => write(path, bytes))
          )
        ))

    const read = (path: string, range?: ByteRange) =>
      Stream.unwrap(Effect.map(absolute(path), (file) =>
        Stream.fromAsyncIterable(
          createReadStream(file, range === undefined ? undefined : { start: range.start, end: range.end }) as AsyncIterable<Uint8Array>,
          fail("read")
        )))

    const readBytes = (path: string) =>
      Effect.flatMap(absolute(path), (file) =>
        Effect.tryPromise({ try: () => readFile(file).then((b) => new Uint8Array(b.buffer, b.byteOffset, b.byteLength)), catch: fail("read") }))

    const statOf = (path: string) =>
      Effect.flatMap(absolute(path), (file) =>
        Effect.tryPromise({
          try: () =>
            stat(file).then((s) => (s.isFile() ? Option.some<BlobStat>({ size: s.size, modifiedAt: s.mtime }) : Option.none<BlobStat>())),
          catch: (e) => e
        }).pipe(Effect.catch((e) =>
          (e as NodeJS.ErrnoException).code === "ENOENT" ? Effect.succeedNone : Effect.fail(fail("stat")(e))
        )))

    const size = (path: string) => Effect.map(statOf(path), Option.map((s: BlobStat) => s.size))

    const remove = (path: string) =>
      Effect.flatMap(absolute(path), (file) => Effect.tryPromise({ try: () => rm(file, { force: true }), catch: fail("remove") }))

    const scratchDir = Effect.acquireRelease(
      Effect.tryPromise({ try: () => mkdtemp(join(tmpdir(), "crm-media-")), catch: fail("mkdtemp") }),
      (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
    )

    return BlobStore.of({
      newPath: (companyId, folder, extension) => `c${companyId}/${folder}/${randomUUID()}${extension}`,
      absolute,
      writeStream,
      write,
      moveIn,
      read,
      readBytes,
      size,
      stat: statOf,
      remove,
      scratchDir
    })
  }

  /**
   * `STORAGE_DIR`; the in-memory mode (`DATA_DIR=memory://`, tests) gets a temporary
   * directory removed when the app stops.
   */
  static readonly layer = Layer.effect(
    BlobStore,
    Effect.gen(function*() {
      const config = yield* AppConfig
      const root = config.storageDir.startsWith("memory://")
        ? yield* Effect.acquireRelease(
          Effect.promise(() => mkdtemp(join(tmpdir(), "crm-files-"))),
          (dir) => Effect.promise(() => rm(dir, { recursive: true, force: true }))
        )
        : config.storageDir
      yield* Effect.promise(() => mkdir(root, { recursive: true }))
      return BlobStore.make(root.endsWith(sep) ? root.slice(0, -1) : root)
    })
  )
}
