import { isThumbnailable } from "./Domain.ts"
import type { SignedUrls } from "../platform/files/SignedUrls.ts"

/** The signed media route of an attachment (its company rides in the signed query). */
export const attachmentMediaPath = (messageId: number, attachmentId: number) =>
  `/v1/messages/${messageId}/attachments/${attachmentId}/media`

/** The stable, permanent link to a stored attachment's bytes. */
export const attachmentUrl = (signed: SignedUrls["Service"], companyId: number, messageId: number, attachmentId: number, width?: number) =>
  signed.sign(attachmentMediaPath(messageId, attachmentId), {
    params: width === undefined ? { c: String(companyId) } : { c: String(companyId), w: String(width) }
  })

/**
 * An attachment as the API shows it: once its bytes are stored locally, `url` is the signed
 * media link (computed on read, so rotating the key changes it) and `thumbnail_url` the same
 * link with `w=640` for raster images, unless the provider gave a thumbnail.
 */
export const withLinks = <A extends {
  readonly id: number
  readonly url: string | null
  readonly thumbnail_url: string | null
  readonly storage_path: string | null
  readonly mime_type: string | null
}>(signed: SignedUrls["Service"], companyId: number, messageId: number, attachment: A): A => {
  if (attachment.storage_path === null) return attachment
  return {
    ...attachment,
    url: attachmentUrl(signed, companyId, messageId, attachment.id),
    thumbnail_url: attachment.thumbnail_url ??
      (isThumbnailable(attachment.mime_type) ? attachmentUrl(signed, companyId, messageId, attachment.id, 640) : null)
  }
}
