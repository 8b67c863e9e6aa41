import { assert, describe, it } from "@effect/vitest"
import { Effect } from "effect"
import { afterAll, beforeAll } from "vitest"
import { foldCounts } from "../../src/conversations/CountFold.ts"
import { ConversationsRepo } from "../../src/conversations/Repo.ts"
import { addUser, mobileLogin } from "../auth/support.ts"
import { conversationOn, externalIdOf, inbound } from "../messages/support.ts"
import { query } from "../support/Sql.ts"
import { createCompany, request, type RunningServer, startServer } from "../support/TestServer.ts"
import { act, agentIn, list } from "./support.ts"

let server: RunningServer
// Building a server (migrations on PGlite) is slow on a loaded machine.
beforeAll(async () => {
  server = await startServer()
}, 300_000)
afterAll(() => server?.close())

const again = async (token: string, c: { channelId: number; threadId: number }) =>
  inbound(server, token, c.channelId, { from: { external_id: await externalIdOf(server, c.threadId) }, text: "again" })

const fold = () => server.runInApp(foldCounts.pipe(Effect.provide(ConversationsRepo.layer)))

const mixes = [
  "",
  "?status=open",
  "?status=resolved",
  "?unread=true",
  "?status=open&unread=1",
  "?priority=urgent",
  "?priority=none&unread=true",
  "?assignee=me&unread=true",
  "?assignee=unassigned"
]

/**
 * The meta counts and total, which sum count groups, against the conversations the same filters list
 * (every one on one page): mine, unassigned and all counted from the listed items without the assignee.
 */
const expectCountsMatchList = async (token: string, userId: number, label: string) => {
  for (const params of mixes) {
    const withoutAssignee = params.replace(/[?&]assignee=[^&]*/, "").replace(/^&/, "?")
    const everyone = await list(server, token, `${withoutAssignee}${withoutAssignee === "" ? "?" : "&"}perPage=100`)
    const filtered = await list(server, token, `${params}${params === "" ? "?" : "&"}perPage=100`)
    assert.strictEqual(filtered.status, 200, JSON.stringify(filtered.body))
    const items: Array<any> = everyone.body.data.items
    assert.deepStrictEqual(filtered.body.data.meta, {
      mine: items.filter((c) => c.assignee?.id === userId).length,
      unassigned: items.filter((c) => c.assignee === null).length,
      all: items.length
    }, `${label} ${params}`)
    assert.strictEqual(filtered.body.data.pagination.total, filtered.body.data.items.length, `${label} ${params}`)
  }
}

describe("inbox counts", () => {
  it("follow assignment, status, priority, reads, inbound messages and a merge, before and after folding", async () => {
    const a = await createCompany(server)
    const me = await addUser(server, a.id, { role: "manager" })
    const meToken = (await mobileLogin(server, me.email, me.password)).body.data.token as string
    const c1 = await conversationOn(server, a.token)
    const c2 = await conversationOn(server, a.token)
    const c3 = await conversationOn(server, a.token, "msgr_a")
    const c4 = await conversationOn(server, a.token)
    const agent = await agentIn(server, a.id, [c1.channelId, c2.channelId])
    // Another company's conversations are never counted here.
    const b = await createCompany(server)
    await conversationOn(server, b.token)

    await act(server, a.token, c1.conversationId, "assignment", { assignee_id: me.id })
    await act(server, a.token, c2.conversationId, "assignment", { assignee_id: agent.id, team_id: agent.teamId })
    await act(server, a.token, c2.conversationId, "priority", { priority: "urgent" })
    await act(server, a.token, c3.conversationId, "status", { status: "resolved" })
    for (const c of [c1, c2, c3]) assert.strictEqual((await act(server, meToken, c.conversationId, "read", {})).status, 200)
    await expectCountsMatchList(meToken, me.id, "after reads")
    assert.strictEqual((await list(server, meToken, "?unread=true")).body.data.meta.all, 1, "only c4 is unread")

    // New inbound messages leave the reader behind; c3 reopens.
    await again(a.token, c1)
    await again(a.token, c3)
    await expectCountsMatchList(meToken, me.id, "after inbound")
    await act(server, meToken, c3.conversationId, "read", {})
    await act(server, a.token, c1.conversationId, "assignment", { assignee_id: null })

    // c4's contact merges into c2's: c4's conversation goes, its messages join c2.
    const [{ source, target }] = await query<{ source: number; target: number }>(
      server,
      "SELECT (SELECT contact_id FROM conversations WHERE id = $1) AS source, (SELECT contact_id FROM conversations WHERE id = $2) AS target",
      [c4.conversationId, c2.conversationId]
    )
    const merged = await request(server, "POST", `/v1/contacts/${source}/merge`, { token: a.token, body: { target_contact_id: target } })
    assert.strictEqual(merged.status, 200, JSON.stringify(merged.body))
    await expectCountsMatchList(meToken, me.id, "after merge")
    await expectCountsMatchList(agent.token, agent.id, "the agent, after merge")

    await fold()
    await expectCountsMatchList(meToken, me.id, "after folding")
    const [pending] = await query<{ n: number }>(server, "SELECT count(*)::int AS n FROM conversation_count_deltas WHERE company_id = $1", [a.id])
    assert.strictEqual(pending.n, 0)
    const [company] = await query<{ counted: number; rows: number }>(
      server,
      `SELECT (SELECT sum(n)::int FROM conversation_counts WHERE company_id = $1 AND reader_id = 0) AS counted,
              (SELECT count(*)::int FROM conversations WHERE company_id = $1) AS rows`,
      [a.id]
    )
    assert.deepStrictEqual(company, { counted: 3, rows: 3 })
    const other = await list(server, b.token)
    assert.deepStrictEqual(other.body.data.meta.all, 1)
    assert.strictEqual((await act(server, b.token, c1.conversationId, "read", {})).status, 404)
  }, 240_000)
})
