import { assert } from "@effect/vitest"
import { createContact } from "../contacts/support.ts"
import { request, type RunningServer } from "../support/TestServer.ts"
import { query } from "../support/Sql.ts"

export const ok = async (server: RunningServer, method: string, path: string, token: string, body?: unknown, status = 200) => {
  const res = await request(server, method, path, { token, body })
  assert.strictEqual(res.status, status, `${method} ${path}: ${JSON.stringify(res.body)}`)
  return res.body.data
}

export const createFunnel = (server: RunningServer, token: string, body: Record<string, unknown> = {}) =>
  ok(server, "POST", "/v1/funnels", token, { name: "Sales", ...body }, 201)

/** A company's funnel (New/Won/Lost) and a contact to file deals for. */
export const dealSetup = async (server: RunningServer, token: string) => {
  const funnel = await createFunnel(server, token)
  const contact = await createContact(server, token, { firstName: "Dana", lastName: "Deal" })
  const [open, won, lost] = funnel.stages as Array<{ id: number }>
  return { funnel, contact, open, won, lost }
}

export const createDeal = (server: RunningServer, token: string, body: Record<string, unknown>) =>
  ok(server, "POST", "/v1/deals", token, { title: "Deal", ...body }, 201)

export const activitiesOf = async (server: RunningServer, token: string, dealId: number) =>
  (await ok(server, "GET", `/v1/deals/${dealId}/activities?perPage=100`, token)).items as Array<any>

export const eventsOf = (server: RunningServer, companyId: number, key: string) =>
  query<{ payload: any }>(server, "SELECT payload FROM events WHERE company_id = $1 AND key = $2 ORDER BY id", [companyId, key])
