import { assert, describe, it } from "@effect/vitest"
import { afterAll, beforeAll } from "vitest"
import { addUser } from "../auth/support.ts"
import { call, type Caller, mobileCaller, sessionCaller } from "../me/support.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const path = "/v1/me/notification-preferences"

const defaults = {
  channels: { mail: true, push: true, msgr_a: true },
  categories: {
    transactional: { enabled: true, label: "Transactional", controllable: false },
    onboarding: { enabled: true, label: "Onboarding", controllable: true },
    trial: { enabled: true, label: "Trial", controllable: true },
    billing: { enabled: true, label: "Billing", controllable: false },
    win_back: { enabled: true, label: "Win-back", controllable: true },
    engagement: { enabled: true, label: "Engagement", controllable: true }
  },
  push_triggers: {
    chat_message_new: true,
    conversation_assigned: true,
    call_missed: true,
    call_incoming: true,
    company_unassigned: false
  },
  quiet_hours: { enabled: false, start: null, end: null }
}

const someone = async () => {
  const company = await createCompany(server)
  const user = await addUser(server, company.id)
  return { company, user, caller: await mobileCaller(server, user.email, user.password) }
}

const read = async (caller: Caller) => {
  const res = await call(server, caller, "GET", path)
  assert.strictEqual(res.status, 200, JSON.stringify(res.body))
  return res.body.data
}

describe("GET /v1/me/notification-preferences", () => {
  it("answers the four blocks with the spec's defaults", async () => {
    const { caller } = await someone()
    assert.deepStrictEqual(await read(caller), defaults)
  })
})

describe("PUT /v1/me/notification-preferences", () => {
  it("merges partially: untouched keys and blocks keep their values across PUTs", async () => {
    const { caller } = await someone()
    const first = await call(server, caller, "PUT", path, {
      channels: { msgr_a: false },
      push_triggers: { company_unassigned: true },
      quiet_hours: { enabled: true, start: "22:00", end: "07:00" }
    })
    assert.strictEqual(first.status, 200, JSON.stringify(first.body))
    assert.deepStrictEqual(first.body.data, {
      ...defaults,
      channels: { mail: true, push: true, msgr_a: false },
      push_triggers: { ...defaults.push_triggers, company_unassigned: true },
      quiet_hours: { enabled: true, start: "22:00", end: "07:00" }
    })

    const second = await call(server, caller, "PUT", path, {
      channels: { mail: false },
      categories: { onboarding: { enabled: false } },
      quiet_hours: { end: "06:30" }
    })
    assert.strictEqual(second.status, 200, JSON.stringify(second.body))
    const expected = {
      channels: { mail: false, push: true, msgr_a: false },
      categories: { ...defaults.categories, onboarding: { enabled: false, label: "Onboarding", controllable: true } },
      push_triggers: { ...defaults.push_triggers, company_unassigned: true },
      quiet_hours: { enabled: true, start: "22:00", end: "06:30" }
    }
    assert.deepStrictEqual(second.body.data, expected)
    assert.deepStrictEqual(await read(caller), expected)

    // An empty body changes nothing; the snapshot read back can be PUT back as is.
    assert.deepStrictEqual((await call(server, caller, "PUT", path, {})).body.data, expected)
    const roundTrip = await call(server, caller, "PUT", path, expected)
    assert.strictEqual(roundTrip.status, 200, JSON.stringify(roundTrip.body))
    assert.deepStrictEqual(roundTrip.body.data, expected)
  })

  it("transactional (and billing) stay enabled and not controllable: turning them off is 422", async () => {
    const { caller } = await someone()
    for (const key of ["transactional", "billing"]) {
      const res = await call(server, caller, "PUT", path, { categories: { [key]: { enabled: false } }, channels: { push: false } })
      assert.strictEqual(res.status, 422)
      assert.ok(res.body.errors[`categories.${key}.enabled`], JSON.stringify(res.body))
    }
    // Nothing of a refused PUT is kept.
    assert.deepStrictEqual(await read(caller), defaults)
    // Sending the read-only fields back is fine; they cannot be changed.
    const res = await call(server, caller, "PUT", path, {
      categories: { transactional: { enabled: true, controllable: true, label: "Mine" } }
    })
    assert.strictEqual(res.status, 200)
    assert.deepStrictEqual(res.body.data.categories.transactional, defaults.categories.transactional)
  })

  it("refuses unknown keys, wrong types and bad times with 422 naming the field", async () => {
    const { caller } = await someone()
    const cases: ReadonlyArray<readonly [unknown, string]> = [
      [{ channels: { fax: true } }, "channels.fax"],
      [{ sms: { enabled: true } }, "sms"],
      [{ categories: { newsletters: { enabled: false } } }, "categories.newsletters"],
      [{ categories: { onboarding: { enabled: false, colour: "red" } } }, "categories.onboarding.colour"],
      [{ push_triggers: { chat_message_new: "no" } }, "push_triggers.chat_message_new"],
      [{ channels: { mail: null } }, "channels.mail"],
      [{ quiet_hours: { start: "24:00" } }, "quiet_hours.start"],
      [{ quiet_hours: { end: "7:00" } }, "quiet_hours.end"],
      [{ quiet_hours: { enabled: "yes" } }, "quiet_hours.enabled"],
      [{ channels: [] }, "channels"]
    ]
    for (const [body, field] of cases) {
      const res = await call(server, caller, "PUT", path, body)
      assert.strictEqual(res.status, 422, JSON.stringify(body))
      assert.ok(res.body.errors[field], `${JSON.stringify(body)} -> ${JSON.stringify(res.body)}`)
    }
    assert.deepStrictEqual(await read(caller), defaults)
  })

  it("quiet hours need both times while enabled; clearing them needs quiet hours off", async () => {
    const { caller } = await someone()
    const missing = await call(server, caller, "PUT", path, { quiet_hours: { enabled: true } })
    assert.strictEqual(missing.status, 422)
    assert.ok(missing.body.errors["quiet_hours.start"])
    assert.ok(missing.body.errors["quiet_hours.end"])
    assert.strictEqual((await call(server, caller, "PUT", path, { quiet_hours: { enabled: true, start: "23:00", end: "06:00" } })).status, 200)
    assert.strictEqual((await call(server, caller, "PUT", path, { quiet_hours: { start: null } })).status, 422)
    const off = await call(server, caller, "PUT", path, { quiet_hours: { enabled: false, start: null, end: null } })
    assert.strictEqual(off.status, 200)
    assert.deepStrictEqual(off.body.data.quiet_hours, defaults.quiet_hours)
  })

  it("belongs to the person: the same under a session and in every company; others never see it", async () => {
    const a = await createCompany(server)
    const b = await createCompany(server)
    const user = await addUser(server, a.id)
    await addUser(server, b.id, { email: user.email })
    const token = await mobileCaller(server, user.email, user.password)
    const session = await sessionCaller(server, user.email, user.password)
    await call(server, token, "PUT", path, { channels: { push: false } })
    assert.isFalse((await read(session)).channels.push)
    assert.strictEqual((await call(server, token, "PUT", "/v1/me/current-company", { company_id: b.id })).status, 200)
    assert.isFalse((await read(token)).channels.push)

    // Cross-tenant: B's admin (and its service token) read and write only their own preferences.
    const bAdmin = await mobileCaller(server, b.admin.email, b.admin.password)
    assert.deepStrictEqual(await read(bAdmin), defaults)
    assert.strictEqual((await call(server, bAdmin, "PUT", path, { channels: { mail: false }, user_id: user.id })).status, 422)
    assert.strictEqual((await call(server, bAdmin, "PUT", path, { channels: { mail: false } })).status, 200)
    const service = await request(server, "GET", path, { token: b.token })
    assert.strictEqual(service.status, 200)
    assert.deepStrictEqual(service.body.data, defaults)
    const mine = await read(token)
    assert.isTrue(mine.channels.mail)
    assert.isFalse(mine.channels.push)
  })

  it("needs a credential", async () => {
    assert.strictEqual((await request(server, "GET", path)).status, 401)
    assert.strictEqual((await request(server, "PUT", path, { body: {} })).status, 401)
  })
})
