import { assert, describe, it } from "@effect/vitest"
import { Exit, Result, Schema } from "effect"
import { ActionCatalog, type ActionId } from "../../src/automations/Actions.ts"
import { actions, registry } from "../../src/automations/actions/Registry.ts"
import { contactPatch } from "../../src/automations/actions/update-contact-field.ts"

/** `wait` ends a segment, so the executor runs it itself. */
const runByTheExecutor: ReadonlyArray<ActionId> = ["wait"]

/** One valid `data` per catalogue action: a new action fails the type check until it has one here. */
const examples: Record<ActionId, unknown> = {
  "msgr_a-send-message": { text: "Hello" },
  "msgr_b-send-message": { voice_mode: "upload", media_id: 7 },
  "send-message": { text: "Hello", channel_id: 3 },
  "send-template": { template_id: 5, language: "en", variables: { "1": "Ada" } },
  "add-tag": { tag_id: 1 },
  "remove-tag": { tag_id: 1 },
  "assign-conversation": { team_id: 2 },
  "update-contact-field": { field: "company", value: "Acme" },
  "opt-out-contact": {},
  "create-deal": { title: "Lead", amount: 120 },
  "move-deal-stage": { funnel_stage_id: 4 },
  "notify-user": { user_id: 9, message: "New lead" },
  "http-request": { url: "https://example.com/hook", method: "GET" },
  condition: { conditions: [{ type: "text_contains", value: "order" }] },
  wait: { duration: 5, unit: "minutes" }
}

describe("action registry", () => {
  it("runs every catalogue action with exactly one definition, and nothing else", () => {
    const counts = new Map<string, number>()
    for (const action of actions) for (const id of action.ids) counts.set(id, (counts.get(id) ?? 0) + 1)
    const stepIds = ActionCatalog.map((a) => a.id).filter((id) => !runByTheExecutor.includes(id))
    assert.deepStrictEqual([...counts.keys()].sort(), [...stepIds].sort())
    for (const id of stepIds) {
      assert.strictEqual(counts.get(id), 1, `${id} is run by ${counts.get(id) ?? 0} definitions`)
      assert.strictEqual(registry.get(id)?.entry.id, id)
    }
    for (const id of runByTheExecutor) assert.isUndefined(registry.get(id))
  })

  it("decodes a step's data with the schema the builder validated it with", () => {
    for (const entry of ActionCatalog) {
      const found = registry.get(entry.id)
      if (found !== undefined) assert.strictEqual(found.action.data, entry.data, `${entry.id} decodes with another schema than its catalogue entry`)
      const decoded = Schema.decodeUnknownExit(found?.action.data ?? entry.data)(examples[entry.id])
      assert.isTrue(Exit.isSuccess(decoded), `${entry.id}: ${String(decoded)}`)
    }
  })

  it("updates one contact field, and refuses a status contacts do not have", () => {
    assert.deepStrictEqual(Result.getOrThrow(contactPatch({ field: "company", value: "Acme" })), { company: "Acme" })
    assert.deepStrictEqual(Result.getOrThrow(contactPatch({ field: "firstName", value: null })), { firstName: null })
    assert.deepStrictEqual(Result.getOrThrow(contactPatch({ field: "status", value: "active" })), { status: "active" })
    const refused = contactPatch({ field: "status", value: "asleep" })
    assert.isTrue(Result.isFailure(refused) && !refused.failure.transient && /lead, active, inactive/.test(refused.failure.message))
  })
})
