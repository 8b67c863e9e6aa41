import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll } from "vitest"
import { addUser, mobileLogin } from "../auth/support.ts"
import { connectPusher, listen, next, subscribe } from "../support/PusherClient.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { activitiesOf, createDeal, dealSetup, eventsOf, ok } from "./support.ts"
import { query } from "../support/Sql.ts"

let server: RunningServer
beforeAll(async () => {
  server = await startServer()
})
afterAll(() => server?.close())

const inHours = (hours: number) => new Date(Date.now() + hours * 3_600_000).toISOString()

const person = async (companyId: number, role: "agent" | "manager" = "agent") => {
  const user = await addUser(server, companyId, { role })
  const token = (await mobileLogin(server, user.email, user.password)).body.data.token as string
  return { ...user, token }
}

describe("deal tasks", () => {
  it("creates, reads per deal, updates any field, completes, reopens and deletes tasks with timeline entries and events", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const deal = await createDeal(server, company.token, { contact_id: contact.id })
    const me = await ok(server, "GET", "/v1/me", company.token)
    const task = await ok(server, "POST", "/v1/deal-tasks", company.token, {
      deal_id: deal.id,
      title: " Call back ",
      due_at: inHours(24),
      description: "Ask about the budget"
    }, 201)
    assert.deepStrictEqual(Object.keys(task).sort(), [
      "assigned_user_id", "company_id", "completed_at", "contact_id", "created_at", "deal_id", "description", "due_at", "id",
      "overdue", "remind_at", "status", "title", "type", "updated_at"
    ])
    assert.deepStrictEqual(
      [task.title, task.type, task.status, task.assigned_user_id, task.contact_id, task.overdue, task.completed_at],
      ["Call back", "call", "open", me.id, contact.id, false, null]
    )
    assert.deepStrictEqual((await ok(server, "GET", `/v1/deals/${deal.id}/tasks`, company.token)).map((t: any) => t.id), [task.id])

    const edited = await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { type: "meeting", title: "Meet", due_at: inHours(-1) })
    assert.deepStrictEqual([edited.type, edited.title, edited.overdue], ["meeting", "Meet", true])

    const done = await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { status: "done" })
    assert.deepStrictEqual([done.status, typeof done.completed_at, done.overdue], ["done", "string", false])
    const reopened = await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { status: "open" })
    assert.deepStrictEqual([reopened.status, reopened.completed_at, reopened.overdue], ["open", null, true])
    const cancelled = await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { status: "cancelled" })
    assert.deepStrictEqual([cancelled.status, typeof cancelled.completed_at], ["cancelled", "string"])

    const entries = (await activitiesOf(server, company.token, deal.id)).filter((a) => a.type.startsWith("task_"))
    assert.deepStrictEqual(entries.map((a) => [a.type, a.metadata.task_id, a.metadata.status ?? null]).reverse(), [
      ["task_created", task.id, null],
      ["task_completed", task.id, "done"],
      ["task_completed", task.id, "cancelled"]
    ])
    assert.strictEqual((await eventsOf(server, company.id, "deal_task.created"))[0].payload.task.id, task.id)
    const updates = await eventsOf(server, company.id, "deal_task.updated")
    assert.deepStrictEqual(updates.map((e) => e.payload.changes.sort()), [
      ["due_at", "title", "type"],
      ["completed_at", "status"],
      ["completed_at", "status"],
      ["completed_at", "status"]
    ])

    const bad = await request(server, "POST", "/v1/deal-tasks", {
      token: company.token,
      body: { deal_id: deal.id, title: "x", type: "lunch", due_at: "tomorrow", status: "done" }
    })
    assert.strictEqual(bad.status, 422)
    assert.ok(bad.body.errors.type && bad.body.errors.due_at, JSON.stringify(bad.body))
    const noDeal = await request(server, "POST", "/v1/deal-tasks", { token: company.token, body: { deal_id: 999999999, title: "x" } })
    assert.deepStrictEqual(noDeal.body.errors, { deal_id: ["The selected deal_id is invalid."] })
    const stranger = await request(server, "POST", "/v1/deal-tasks", { token: company.token, body: { deal_id: deal.id, title: "x", assigned_user_id: 999999999 } })
    assert.deepStrictEqual(stranger.body.errors, { assigned_user_id: ["The selected assigned_user_id is invalid."] })

    assert.deepStrictEqual(await ok(server, "DELETE", `/v1/deal-tasks/${task.id}`, company.token), { message: "Task deleted." })
    assert.strictEqual((await request(server, "PATCH", `/v1/deal-tasks/${task.id}`, { token: company.token, body: { title: "x" } })).status, 404)
    assert.deepStrictEqual(await ok(server, "GET", `/v1/deals/${deal.id}/tasks`, company.token), [])
  })

  it("lists with the status, assigned_user_id, deal_id, overdue and mine filters and perPage", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const agent = await person(company.id)
    const a = await createDeal(server, company.token, { contact_id: contact.id })
    const b = await createDeal(server, company.token, { contact_id: contact.id })
    const late = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: a.id, title: "late", due_at: inHours(-2) }, 201)
    const soon = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: a.id, title: "soon", due_at: inHours(2), assigned_user_id: agent.id }, 201)
    const undated = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: b.id, title: "undated", assigned_user_id: agent.id }, 201)
    const lateDone = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: b.id, title: "late but done", due_at: inHours(-3) }, 201)
    await ok(server, "PATCH", `/v1/deal-tasks/${lateDone.id}`, company.token, { status: "done" })

    const ids = async (query: string, token = company.token) =>
      (await ok(server, "GET", `/v1/deal-tasks${query}`, token)).items.map((t: any) => t.id)
    assert.deepStrictEqual(await ids(""), [lateDone.id, late.id, soon.id, undated.id])
    assert.deepStrictEqual(await ids("?overdue=1"), [late.id])
    assert.deepStrictEqual(await ids("?overdue=0"), [lateDone.id, soon.id, undated.id])
    assert.deepStrictEqual(await ids("?status=done"), [lateDone.id])
    assert.deepStrictEqual(await ids("?status=open&deal_id=" + a.id), [late.id, soon.id])
    assert.deepStrictEqual(await ids(`?assigned_user_id=${agent.id}`), [soon.id, undated.id])
    assert.deepStrictEqual(await ids("?mine=1", agent.token), [soon.id, undated.id])
    assert.deepStrictEqual(await ids("?mine=1"), [lateDone.id, late.id])
    const page = await ok(server, "GET", "/v1/deal-tasks?perPage=3&page=2", company.token)
    assert.deepStrictEqual([page.items.map((t: any) => t.id), page.pagination], [[undated.id], { page: 2, perPage: 3, total: 4, lastPage: 2 }])
    const listed = (await ok(server, "GET", "/v1/deal-tasks?overdue=1", company.token)).items[0]
    assert.strictEqual(listed.overdue, true)
    assert.strictEqual((await request(server, "GET", "/v1/deal-tasks?status=late", { token: company.token })).status, 422)

    // Tasks of a soft-deleted deal leave the lists.
    await ok(server, "DELETE", `/v1/deals/${b.id}`, company.token)
    assert.deepStrictEqual(await ids(""), [late.id, soon.id])
  })

  it("a new assignee gets deal_task.assigned on their user channel, unless their preferences hold it back", async () => {
    const company = await createCompany(server)
    const { contact } = await dealSetup(server, company.token)
    const deal = await createDeal(server, company.token, { contact_id: contact.id })
    const ann = await person(company.id)
    const bob = await person(company.id, "manager")
    const assignedTo = async () => (await eventsOf(server, company.id, "deal_task.assigned")).map((e) => [e.payload.user_id, e.payload.task.id])

    // Assigning oneself is no news.
    const own = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: deal.id, title: "mine" }, 201)
    assert.deepStrictEqual(await assignedTo(), [])
    const task = await ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: deal.id, title: "for Ann", assigned_user_id: ann.id }, 201)
    assert.deepStrictEqual(await assignedTo(), [[ann.id, task.id]])
    await ok(server, "PATCH", `/v1/deal-tasks/${own.id}`, company.token, { assigned_user_id: ann.id })
    await ok(server, "PATCH", `/v1/deal-tasks/${own.id}`, company.token, { title: "same assignee" })
    assert.deepStrictEqual(await assignedTo(), [[ann.id, task.id], [ann.id, own.id]])

    // Bob turned in-app (push) notices off: the task is his, the notice is not sent.
    const prefs = await request(server, "PUT", "/v1/me/notification-preferences", { token: bob.token, body: { channels: { push: false } } })
    assert.strictEqual(prefs.status, 200, JSON.stringify(prefs.body))
    const toBob = await ok(server, "PATCH", `/v1/deal-tasks/${task.id}`, company.token, { assigned_user_id: bob.id })
    assert.strictEqual(toBob.assigned_user_id, bob.id)
    assert.deepStrictEqual(await assignedTo(), [[ann.id, task.id], [ann.id, own.id]])

    const [event] = await eventsOf(server, company.id, "deal_task.assigned")
    assert.deepStrictEqual(Object.keys(event.payload).sort(), ["assigned_by_user_id", "task", "user_id"])
  })

  it.live("the assignee hears deal_task.assigned on their private-user channel", () =>
    Effect.gen(function*() {
      const company = yield* Effect.promise(() => createCompany(server))
      const { contact } = yield* Effect.promise(() => dealSetup(server, company.token))
      const deal = yield* Effect.promise(() => createDeal(server, company.token, { contact_id: contact.id }))
      const ann = yield* Effect.promise(() => person(company.id))
      const client = yield* connectPusher({ realtimePort: server.realtimePort, appKey: server.pusherAppKey, apiUrl: server.url, token: ann.token })
      const channel = yield* subscribe(client, `private-user.${ann.id}`)
      const assigned = yield* listen(channel, "deal_task.assigned")
      const task = yield* Effect.promise(() =>
        ok(server, "POST", "/v1/deal-tasks", company.token, { deal_id: deal.id, title: "for Ann", assigned_user_id: ann.id }, 201)
      )
      const event = (yield* next(assigned)) as any
      assert.deepStrictEqual([event.event, event.data.user_id, event.data.task.id, event.data.task.assigned_user_id], [
        "deal_task.assigned",
        ann.id,
        task.id,
        ann.id
      ])
    }))

  it("another company's task and deal are 404 or invalid on every task route", async () => {
    const owner = await createCompany(server)
    const other = await createCompany(server)
    const { contact } = await dealSetup(server, owner.token)
    const deal = await createDeal(server, owner.token, { contact_id: contact.id })
    const task = await ok(server, "POST", "/v1/deal-tasks", owner.token, { deal_id: deal.id, title: "private" }, 201)
    for (const [method, body] of [["PATCH", { title: "stolen" }], ["DELETE"]] as const) {
      const res = await request(server, method, `/v1/deal-tasks/${task.id}`, { token: other.token, body })
      assert.deepStrictEqual([res.status, res.body], [404, { message: "Task not found." }], method)
    }
    const foreign = await request(server, "POST", "/v1/deal-tasks", { token: other.token, body: { deal_id: deal.id, title: "x" } })
    assert.deepStrictEqual(foreign.body.errors, { deal_id: ["The selected deal_id is invalid."] })
    assert.deepStrictEqual((await ok(server, "GET", `/v1/deal-tasks?deal_id=${deal.id}`, other.token)).items, [])
    assert.strictEqual((await request(server, "GET", `/v1/deals/${deal.id}/tasks`, { token: other.token })).status, 404)
    const [row] = await query(server, "SELECT title FROM deal_tasks WHERE id = $1", [task.id])
    assert.strictEqual(row.title, "private")
  })
})
