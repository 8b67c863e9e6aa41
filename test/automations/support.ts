import { assert } from "@effect/vitest"
import { query } from "../support/Sql.ts"
import { request, type TestServer } from "../support/TestServer.ts"

export const ok = async (server: TestServer, method: string, path: string, token: string, body?: unknown, status = 200) => {
  const res = await request(server, method, path, { token, body })
  assert.strictEqual(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`)
  return res.body.data
}

export const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms))

/** The last value a probe saw, for the timeout message. */
export const last: { value: unknown } = { value: undefined }

export const waitFor = async <A>(what: string, probe: () => Promise<A | undefined>, timeoutMs = 15_000): Promise<A> => {
  const deadline = Date.now() + timeoutMs
  while (true) {
    const value = await probe()
    if (value !== undefined) return value
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what} (last: ${JSON.stringify(last.value)})`)
    await sleep(100)
  }
}

export const triggerNode = { id: "t", type: "trigger", position: { x: 0, y: 0 } }
export const actionNode = (id: string, actionId: string, data: Record<string, unknown> = {}) => ({
  id,
  type: "action",
  position: { x: 0, y: 100 },
  actionId,
  data
})
export const edge = (source: string, target: string, sourceHandle?: string) => ({
  id: `${source}-${target}${sourceHandle ? `-${sourceHandle}` : ""}`,
  source,
  target,
  ...(sourceHandle !== undefined ? { sourceHandle } : {})
})

/** A chain trigger → nodes[0] → nodes[1] → … */
export const chain = (nodes: ReadonlyArray<ReturnType<typeof actionNode>>) => ({
  nodes: [triggerNode, ...nodes],
  edges: nodes.map((n, i) => edge(i === 0 ? "t" : nodes[i - 1].id, n.id))
})

export const trigger = (event: string, extra: Record<string, unknown> = {}) => ({ id: "tr1", event, conditionsJoiner: "and", conditions: [], ...extra })

/** An active automation with this graph and trigger. */
export const activeAutomation = async (
  server: TestServer,
  token: string,
  graph: { nodes: ReadonlyArray<unknown>; edges: ReadonlyArray<unknown> },
  triggers: ReadonlyArray<unknown>,
  name = "Flow"
) => {
  const created = await ok(server, "POST", "/v1/automations", token, { name, description: null, status: "draft" }, 201)
  await ok(server, "PATCH", `/v1/automations/${created.id}/builder`, token, { ...graph, triggers })
  return ok(server, "PATCH", `/v1/automations/${created.id}`, token, { status: "active" })
}

export const runsOf = async (server: TestServer, token: string, automationId: string) =>
  (await ok(server, "GET", `/v1/automations/${automationId}/runs?perPage=100`, token)).items as Array<any>

/** The automation's runs once `n` have ended (succeeded, failed or cancelled), with their steps. */
export const finishedRuns = async (server: TestServer, token: string, automationId: string, n = 1, timeoutMs = 15_000) => {
  const runs = await waitFor(`${n} finished runs`, async () => {
    const all = await runsOf(server, token, automationId)
    const ended = all.filter((r) => ["succeeded", "failed", "cancelled"].includes(r.status))
    return ended.length >= n ? ended : undefined
  }, timeoutMs)
  return Promise.all(runs.map((r) => ok(server, "GET", `/v1/automations/${automationId}/runs/${r.id}`, token)))
}

export const outboundTexts = async (server: Parameters<typeof query>[0], conversationId: number) =>
  (await query<{ message_content: string | null; message_type: string }>(
    server,
    "SELECT message_content, message_type FROM messages WHERE conversation_id = $1 AND direction = 'outbound' ORDER BY id",
    [conversationId]
  ))
