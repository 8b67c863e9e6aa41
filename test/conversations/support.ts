import { addUser, mobileLogin } from "../auth/support.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

/** An agent of the company in a team of its own that sees `channelIds`; its id and a mobile token. */
export const agentIn = async (server: RunningServer, companyId: number, channelIds: ReadonlyArray<number>) => {
  const agent = await addUser(server, companyId, { role: "agent" })
  const token = (await mobileLogin(server, agent.email, agent.password)).body.data.token as string
  const [team] = await query<{ id: number }>(server, "INSERT INTO teams (company_id, name) VALUES ($1, 'Team') RETURNING id", [companyId])
  await query(server, "INSERT INTO team_members (company_id, team_id, user_id) VALUES ($1, $2, $3)", [companyId, team.id, agent.id])
  for (const channelId of channelIds) {
    await query(server, "INSERT INTO team_channels (company_id, team_id, channel_id) VALUES ($1, $2, $3)", [companyId, team.id, channelId])
  }
  return { id: agent.id, token, teamId: team.id }
}

export const list = (server: RunningServer, token: string, params = "") => request(server, "GET", `/v1/conversations${params}`, { token })

export const conversation = async (server: RunningServer, token: string, id: number) => {
  const res = await request(server, "GET", `/v1/conversations/${id}`, { token })
  if (res.status !== 200) throw new Error(`conversation ${id}: ${res.status} ${JSON.stringify(res.body)}`)
  return res.body.data
}

export const act = (server: RunningServer, token: string, id: number, route: "assignment" | "status" | "priority" | "read", body: unknown) =>
  request(server, "POST", `/v1/conversations/${id}/${route}`, { token, body })

/** Polls `check` until it holds (background work: the sequencer, a sweep), failing after `ms`. */
export const eventually = async <A>(check: () => Promise<A | undefined>, ms = 10_000): Promise<A> => {
  const deadline = performance.now() + ms
  while (true) {
    const value = await check()
    if (value !== undefined) return value
    if (performance.now() > deadline) throw new Error("condition not met in time")
    await new Promise((resolve) => setTimeout(resolve, 100))
  }
}
