import type { CompanyId } from "../auth/Domain.ts"
import { Context, Effect, Layer, Option } from "effect"
import type { HttpServerResponse } from "effect/http"
import { lookup } from "node:dns/promises"
import { BlockList, isIP } from "node:net"
import { ownedBy } from "../platform/files/BlobStore.ts"
import { PhotoFiles } from "../media/PhotoFiles.ts"
import { AppConfig } from "../platform/Config.ts"
import { type NotFound, notFound } from "../platform/Errors.ts"
import { contactNotFound } from "./Contacts.ts"
import { ContactsRepo } from "./Repo.ts"

/** A remote account picture larger than this is not fetched. */
const remoteLimitBytes = 5 * 1024 * 1024

const photoNotFound = () => notFound("Photo not found.")

/** Hosts a server-side fetch must not reach: loopback, private, link-local, CGNAT, multicast and reserved ranges. */
const internal = new BlockList()
for (const [net, prefix] of [
  ["0.0.0.0", 8],
  ["10.0.0.0", 8],
  ["100.64.0.0", 10],
  ["127.0.0.0", 8],
  ["169.254.0.0", 16],
  ["172.16.0.0", 12],
  ["192.168.0.0", 16],
  ["224.0.0.0", 3]
] as const) internal.addSubnet(net, prefix, "ipv4")
for (const [net, prefix] of [["::", 127], ["fc00::", 7], ["fe80::", 10], ["ff00::", 8]] as const) internal.addSubnet(net, prefix, "ipv6")

const isInternal = (address: string) => {
  const mapped = /^::ffff:(\d+\.\d+\.\d+\.\d+)$/i.exec(address)
  if (mapped !== null) return internal.check(mapped[1], "ipv4")
  return internal.check(address, isIP(address) === 6 ? "ipv6" : "ipv4")
}

/**
 * `GET /v1/contacts/{id}/photo` once its signature is checked: the contact's own photo, else the
 * newest linked account's picture (a stored file, or an http(s) URL fetched server-side from a
 * public host). Wider than 256 px and decodable: a WebP preview; otherwise the original.
 */
export class ContactPhotos extends Context.Service<ContactPhotos, {
  serve(companyId: CompanyId, contactId: number): Effect.Effect<HttpServerResponse.HttpServerResponse, NotFound>
}>()("crm/contacts/ContactPhotos") {
  static readonly layerNoDeps = Layer.effect(
    ContactPhotos,
    Effect.gen(function*() {
      const repo = yield* ContactsRepo
      const config = yield* AppConfig
      const files = yield* PhotoFiles

      const download = (url: string) =>
        Effect.gen(function*() {
          const parsed = yield* Effect.try(() => new URL(url))
          if (parsed.protocol !== "http:" && parsed.protocol !== "https:") return Option.none<Uint8Array>()
          if (!config.photoFetchAllowPrivate) {
            const host = parsed.hostname.replace(/^\[|\]$/g, "")
            const addresses = isIP(host) !== 0 ? [host] : (yield* Effect.tryPromise(() => lookup(host, { all: true }))).map((a) => a.address)
            if (addresses.length === 0 || addresses.some(isInternal)) return Option.none<Uint8Array>()
          }
          // Redirects are refused: one could point at an internal host after the check above.
          const response = yield* Effect.tryPromise(() =>
            fetch(parsed, { redirect: "error", signal: AbortSignal.timeout(config.providerTimeoutMs) })
          )
          if (!response.ok || response.body === null) return Option.none<Uint8Array>()
          const chunks: Array<Uint8Array> = []
          let size = 0
          const reader = response.body.getReader()
          while (true) {
            const { done, value } = yield* Effect.tryPromise(() => reader.read())
            if (done) break
            size += value.byteLength
            if (size > remoteLimitBytes) {
              yield* Effect.promise(() => reader.cancel())
              return Option.none<Uint8Array>()
            }
            chunks.push(value)
          }
          return Option.some(new Uint8Array(Buffer.concat(chunks)))
        }).pipe(Effect.orElseSucceed(() => Option.none<Uint8Array>()))

      const serve = Effect.fn("ContactPhotos.serve")(function*(companyId: CompanyId, contactId: number) {
        const found = yield* repo.find(companyId, contactId)
        if (Option.isNone(found)) return yield* contactNotFound()
        const contact = found.value
        if (contact.photo_path !== null && ownedBy(companyId, contact.photo_path)) {
          const own = yield* files.stored(contact.photo_path, contact.photo_mime_type)
          if (Option.isSome(own)) return own.value
        }
        for (const picture of contact.pictures) {
          const answer = ownedBy(companyId, picture)
            ? yield* files.stored(picture, null)
            : yield* Effect.flatMap(download(picture), Option.match({ onNone: () => Effect.succeedNone, onSome: files.bytes }))
          if (Option.isSome(answer)) return answer.value
        }
        return yield* photoNotFound()
      })

      return ContactPhotos.of({ serve })
    })
  )

  static readonly layer = this.layerNoDeps.pipe(Layer.provide([ContactsRepo.layer, PhotoFiles.layer]))
}
