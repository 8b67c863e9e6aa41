import { assert, describe, it } from "@effect/vitest"
import { Effect, Layer } from "effect"
import { SqlError, StatementTimeoutError, UnknownError } from "effect/sql/SqlError"
import { type Actor, type CompanyId, CurrentActor, type UserId } from "../../src/auth/Domain.ts"
import { rolePermissions } from "../../src/auth/Permissions.ts"
import { snippetOf } from "../../src/search/Domain.ts"
import { SearchRepo } from "../../src/search/Repo.ts"
import { Search } from "../../src/search/Search.ts"
import { AppConfig, type AppConfigShape } from "../../src/platform/Config.ts"
import { ServiceUnavailable } from "../../src/platform/Errors.ts"
import { RateLimiter } from "../../src/platform/RateLimiter.ts"
import { ChannelAccess } from "../../src/auth/ChannelAccess.ts"
import { accountOf } from "../auth/support.ts"

const words = (n: number, prefix = "w") => Array.from({ length: n }, (_, i) => `${prefix}${i}`).join(" ")

describe("snippetOf", () => {
  it("keeps a text of up to 240 characters whole", () => {
    const text = "x".repeat(240)
    assert.strictEqual(snippetOf(text, "zz"), text)
  })

  it("centres on the match and cuts at word boundaries with ... on both sides", () => {
    const text = `${words(80, "a")} target ${words(80, "b")}`
    const snippet = snippetOf(text, "TARGET")
    assert.ok(snippet.startsWith("...") && snippet.endsWith("..."), snippet)
    const body = snippet.slice(3, -3)
    assert.ok(text.includes(body))
    assert.ok(body.length <= 240 && body.length >= 200, `${body.length}`)
    assert.match(body, /^a\d+ /, "starts on a word")
    assert.match(body, / b\d+$/, "ends on a word")
    const at = body.indexOf("target")
    assert.ok(Math.abs(at - (body.length - at - "target".length)) <= 45, `${at} / ${body.length}`)
  })

  it("shifts the window instead of centring when the match is near either end", () => {
    const start = snippetOf(`target ${words(100)}`, "target")
    assert.ok(start.startsWith("target ") && start.endsWith("..."), start)
    const end = snippetOf(`${words(100)} target`, "target")
    assert.ok(end.startsWith("...") && end.endsWith(" target"), end)
  })

  it("prefers the whole phrase, else the earliest word, matched at a word start", () => {
    const text = `${words(50)} gamma ${words(30)} alpha beta ${words(50)}`
    assert.include(snippetOf(text, "alpha  beta"), "alpha beta")
    const byWord = snippetOf(`${words(50)} beta ${words(60)} alpha ${words(60)}`, "alpha beta")
    assert.include(byWord, "beta")
    // "pha" occurs only inside "alpha": not a textual match at a word start.
    assert.strictEqual(snippetOf(`${words(50)} alpha ${words(50)}`, "pha"), `${`${words(50)} alpha ${words(50)}`.slice(0, 240).replace(/\s+\S*$/, "")}...`)
  })

  it("falls back to the first 240 characters without a textual match", () => {
    const text = `${words(40)} ordered ${words(40)}`
    const snippet = snippetOf(text, "orders")
    assert.ok(snippet.endsWith("...") && !snippet.startsWith("..."), snippet)
    assert.ok(text.startsWith(snippet.slice(0, -3)))
  })

  it("counts characters, not UTF-16 units, and never splits a surrogate pair", () => {
    const text = `${"😀 ".repeat(100)}привет ${"🙂 ".repeat(100)}`
    const snippet = snippetOf(text, "Привет")
    assert.include(snippet, "привет")
    assert.notMatch(snippet, /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/)
    assert.ok(Array.from(snippet.slice(3, -3)).length <= 240)
  })

  it("treats regular-expression characters in the query literally", () => {
    const text = `${words(60)} price (EUR) is 5.00 ${words(60)}`
    assert.include(snippetOf(text, "(eur)"), "(EUR)")
    assert.strictEqual(snippetOf("a+b".repeat(100), ".*").startsWith("a+b"), true)
  })
})

describe("Search service", () => {
  const actor: Actor = {
    userId: 1 as UserId,
    email: null,
    isServiceAccount: true,
    kind: "service",
    tokenId: 7,
    sessionId: null,
    abilities: ["*"],
    account: accountOf(1, null, true),
    company: { id: 3 as CompanyId, plan: "business", role: "admin", permissions: rolePermissions.admin }
  }

  const run = (failure: SqlError) =>
    Effect.gen(function*() {
      const search = yield* Search
      return yield* search.messages({ q: "hello" })
    }).pipe(
      Effect.provide(Search.layerNoDeps.pipe(Layer.provide([
        Layer.mock(SearchRepo, {
          conversationVisible: () => Effect.succeed(true),
          search: () => Effect.fail(failure),
          statement: () => ["", []]
        }),
        Layer.mock(ChannelAccess, { visible: () => Effect.succeed("all" as const) }),
        Layer.mock(RateLimiter, { heavy: () => Effect.succeed({ allowed: true, remaining: 1, retryAfterMs: 0 }) }),
        Layer.succeed(AppConfig, { heavyRateLimitPerMinute: 120, searchTimeoutMs: 2000, searchCountCap: 1000 } as AppConfigShape)
      ]))),
      Effect.provideService(CurrentActor, actor)
    )

  it.effect("answers 503 with a clear message when the statement timeout stops the search", () =>
    Effect.gen(function*() {
      const error = yield* Effect.flip(run(new SqlError({ reason: new StatementTimeoutError({ cause: new Error("canceling statement due to statement timeout") }) })))
      assert.instanceOf(error, ServiceUnavailable)
      assert.match(error.message, /took too long/)
    }))

  it.effect("lets any other database failure die (a 500, logged), never a client error", () =>
    Effect.gen(function*() {
      const exit = yield* Effect.exit(run(new SqlError({ reason: new UnknownError({ cause: new Error("boom") }) })))
      assert.strictEqual(exit._tag, "Failure")
      if (exit._tag === "Failure") assert.strictEqual(exit.cause.reasons[0]?._tag, "Die")
    }))
})
