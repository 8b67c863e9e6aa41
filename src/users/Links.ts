import type { SignedUrls } from "../platform/files/SignedUrls.ts"

/** The signed photo route of a user; the company rides in the signed query (`c`), the photo's version in `v`. */
export const userPhotoPath = (userId: number) => `/v1/users/${userId}/photo`

/**
 * `photo_url` of a user as seen from `companyId`: a permanent signed link, or null without a photo
 * (`version` is null then). A new photo has a new version, hence a new link and no stale cache.
 */
export const userPhotoUrl = (signed: SignedUrls["Service"], companyId: number, userId: number, version: number | null) =>
  version === null ? null : signed.sign(userPhotoPath(userId), { params: { c: String(companyId), v: String(version) } })
