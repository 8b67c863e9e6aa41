import { assert, describe, it } from "@effect/vitest"
import { loggablePath } from "../../src/platform/Logging.ts"

describe("access log paths", () => {
  it("cuts the values of signatures, tokens and codes, keeping the rest of the link", () => {
    assert.strictEqual(
      loggablePath("/v1/messages/1/attachments/2/media?c=7&w=256&signature=abc123"),
      "/v1/messages/1/attachments/2/media?c=7&w=256&signature=%5Bredacted%5D"
    )
    assert.strictEqual(loggablePath("/v1/x?token=t&Code=123456"), "/v1/x?token=%5Bredacted%5D&Code=%5Bredacted%5D")
    assert.strictEqual(loggablePath("/v1/contacts?search=ann&page=2"), "/v1/contacts?search=ann&page=2")
    assert.strictEqual(loggablePath("/health"), "/health")
  })
})
