import { assert } from "@effect/vitest"
import ExcelJS from "exceljs"
import { Effect } from "effect"
import { Jobs } from "../../src/platform/Jobs.ts"
import { createChannel, createSegment, createTag } from "../segments/support.ts"
import { query } from "../support/Sql.ts"
import { request, type RunningServer } from "../support/TestServer.ts"

/** Asks this process's runners to look for work now (instead of at the next adoption round). */
export const wake = (server: RunningServer) => server.runInApp(Effect.gen(function*() {
    const jobs = yield* Jobs
    yield* jobs.wake
  }))

export const createExport = async (server: RunningServer, token: string, body: Record<string, unknown>) => {
  const res = await request(server, "POST", "/v1/exports", { token, body })
  assert.strictEqual(res.status, 201, JSON.stringify(res.body))
  return res.body.data.export
}

/** Polls until the export leaves pending/processing. */
export const settled = async (server: RunningServer, token: string, id: number, within = 20_000) => {
  const until = Date.now() + within
  while (Date.now() < until) {
    const res = await request(server, "GET", `/v1/exports/${id}`, { token })
    assert.strictEqual(res.status, 200, JSON.stringify(res.body))
    const found = res.body.data.export
    if (found.status !== "pending" && found.status !== "processing") return found
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
  throw new Error(`export ${id} did not finish`)
}

export const fetchBytes = async (server: RunningServer, path: string, token?: string) => {
  const response = await fetch(server.url + path, { headers: token === undefined ? {} : { authorization: `Bearer ${token}` } })
  return { status: response.status, headers: response.headers, bytes: Buffer.from(await response.arrayBuffer()) }
}

/** RFC 4180 reader: quoted fields, doubled quotes, CRLF records (or `newline`'s). */
export const parseCsv = (text: string, newline: "\r\n" | "\n" = "\r\n"): Array<Array<string>> => {
  const rows: Array<Array<string>> = []
  let row: Array<string> = []
  let field = ""
  let quoted = false
  for (let i = 0; i < text.length; i++) {
    const ch = text[i]
    if (quoted) {
      if (ch === "\"" && text[i + 1] === "\"") {
        field += "\""
        i++
      } else if (ch === "\"") quoted = false
      else field += ch
    } else if (ch === "\"") quoted = true
    else if (ch === ",") {
      row.push(field)
      field = ""
    } else if (text.startsWith(newline, i)) {
      row.push(field)
      rows.push(row)
      row = []
      field = ""
      i += newline.length - 1
    } else field += ch
  }
  if (field !== "" || row.length > 0) throw new Error(`CSV does not end with ${JSON.stringify(newline)}`)
  return rows
}

export const parseXlsx = async (bytes: Buffer): Promise<Array<Array<unknown>>> => {
  const workbook = new ExcelJS.Workbook()
  await workbook.xlsx.load(bytes as any)
  const sheet = workbook.worksheets[0]
  const rows: Array<Array<unknown>> = []
  const width = sheet.getRow(1).cellCount
  sheet.eachRow({ includeEmpty: true }, (row) => {
    const cells: Array<unknown> = []
    for (let i = 1; i <= width; i++) cells.push(row.getCell(i).value)
    rows.push(cells)
  })
  return rows
}

/** Text as a CSV cell shows it: null and "" alike, numbers and dates as text. */
export const norm = (value: unknown): string =>
  value === null || value === undefined ? "" : value instanceof Date ? value.toISOString() : String(value)

/**
 * A company's data to export: two channels, contacts with every flattened field (and
 * formula-looking and quoted text), a deleted contact, a group chat and messages over four days.
 */
export const seed = async (server: RunningServer, company: { id: number; token: string }) => {
  const q = (text: string, params: ReadonlyArray<unknown>) => query<any>(server, text, params)
  const chA = await createChannel(server, company.id, "msgr_a", "Main A")
  const chB = await createChannel(server, company.id, "msgr_b", "Side, \"B\"")
  const contact = async (c: Record<string, unknown>) =>
    (await q(
      `INSERT INTO contacts (company_id, first_name, last_name, display_name, company_name, status, custom_fields, deleted_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7::jsonb, $8) RETURNING id`,
      [company.id, c.first ?? null, c.last ?? null, c.display ?? null, c.company ?? null, c.status ?? "lead", JSON.stringify(c.custom ?? {}), c.deleted ?? null]
    ))[0].id as number
  const alice = await contact({ first: "Alice", last: "Ames", display: "Alice Ames", company: "Acme", status: "active", custom: { tier: "gold" } })
  const formula = await contact({ first: "+1 trick", last: "-minus", display: "=SUM(A1:A2)", company: "@corp" })
  const carol = await contact({ first: "Ünïcødé 🎉", display: "Carol, \"the\" Third\nline2" })
  await contact({ display: "Gone", deleted: new Date("2026-01-01T00:00:00Z") })

  await q("INSERT INTO contact_phones (company_id, contact_id, phone, position) VALUES ($1, $2, '8 800 555', 1), ($1, $2, '+7 916 000 0001', 0)", [company.id, alice])
  await q("INSERT INTO contact_emails (company_id, contact_id, email) VALUES ($1, $2, 'alice@example.test')", [company.id, alice])
  const vip = await createTag(server, company.token, "vip")
  const beta = await createTag(server, company.token, "beta")
  await q("INSERT INTO contact_tags (company_id, contact_id, tag_id) VALUES ($1, $2, $3), ($1, $2, $4), ($1, $5, $4)", [company.id, alice, vip, beta, carol])
  const account = async (contactId: number, type: string, external: string) =>
    (await q("INSERT INTO contact_accounts (company_id, contact_id, channel_type, external_id) VALUES ($1, $2, $3, $4) RETURNING id", [company.id, contactId, type, external]))[0].id as number
  const aliceAccount = await account(alice, "msgr_a", "a-1")
  const formulaAccount = await account(formula, "msgr_b", "b-1")

  const conversation = async (contactId: number) =>
    (await q("INSERT INTO conversations (company_id, contact_id) VALUES ($1, $2) RETURNING id", [company.id, contactId]))[0].id as number
  const convAlice = await conversation(alice)
  const convFormula = await conversation(formula)
  const convCarol = await conversation(carol)
  const thread = async (conversationId: number, channelId: number, accountId: number | null, group: string | null) =>
    (await q(
      "INSERT INTO threads (company_id, conversation_id, channel_id, contact_account_id, is_group, external_thread_id) VALUES ($1, $2, $3, $4, $5, $6) RETURNING id",
      [company.id, conversationId, channelId, accountId, group !== null, group]
    ))[0].id as number
  const tAlice = await thread(convAlice, chA, aliceAccount, null)
  const tFormula = await thread(convFormula, chB, formulaAccount, null)
  const group = await thread(convCarol, chB, null, "g-1")
  const message = async (conversationId: number, threadId: number, channelId: number, direction: string, text: string, at: string, deleted = false) =>
    (await q(
      `INSERT INTO messages (company_id, conversation_id, thread_id, channel_id, direction, message_content, "timestamp", deleted_at)
       VALUES ($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id`,
      [company.id, conversationId, threadId, channelId, direction, text, at, deleted ? at : null]
    ))[0].id as number
  const m1 = await message(convAlice, tAlice, chA, "inbound", "hello", "2026-01-10T10:00:00Z")
  const m2 = await message(convAlice, tAlice, chA, "outbound", "=cmd|' /C calc'!A0", "2026-01-11T10:00:00Z")
  const m3 = await message(convFormula, tFormula, chB, "inbound", "-10 apples, \"fresh\"\r\nnext line", "2026-01-12T23:59:59Z")
  const m4 = await message(convCarol, group, chB, "outbound", "group hi", "2026-01-13T00:00:00Z")
  await message(convAlice, tAlice, chA, "inbound", "deleted", "2026-01-12T12:00:00Z", true)

  const vipSegment = await createSegment(server, company.token, { name: "VIPs", conditions: [{ type: "tag", operator: "has_any", value: [vip] }] })
  const betaSegment = await createSegment(server, company.token, { name: "Beta", conditions: [{ type: "tag", operator: "has_any", value: [beta] }] })
  return {
    channels: { a: chA, b: chB },
    contacts: { alice, formula, carol },
    conversations: { alice: convAlice, formula: convFormula, carol: convCarol },
    group,
    messages: { m1, m2, m3, m4 },
    segments: { vip: vipSegment.id as number, beta: betaSegment.id as number }
  }
}

/** The contacts rows as the test reads them from the database, independently of the exporter. */
export const expectedContacts = async (server: RunningServer, companyId: number, ids: ReadonlyArray<number>) =>
  query<any>(server, `
    SELECT c.id, c.display_name, c.first_name, c.last_name, c.company_name, c.status,
      array_to_string(ARRAY(SELECT phone FROM contact_phones WHERE contact_id = c.id ORDER BY position, id), '; ') AS phones,
      array_to_string(ARRAY(SELECT email FROM contact_emails WHERE contact_id = c.id ORDER BY position, id), '; ') AS emails,
      array_to_string(ARRAY(SELECT t.name FROM contact_tags x JOIN tags t ON t.id = x.tag_id WHERE x.contact_id = c.id ORDER BY lower(t.name)), '; ') AS tags,
      array_to_string(ARRAY(SELECT channel_type || ':' || external_id FROM contact_accounts WHERE contact_id = c.id ORDER BY id), '; ') AS accounts,
      c.custom_fields::text AS custom_fields, c.blocked_at, c.blocked_reason, c.opted_out_at, c.created_at, c.updated_at
    FROM contacts c WHERE c.company_id = $1 AND c.id = ANY($2::bigint[]) ORDER BY c.id`, [companyId, ids])

export const expectedMessages = async (server: RunningServer, companyId: number, ids: ReadonlyArray<number>) =>
  query<any>(server, `
    SELECT m.id, m."timestamp", m.direction, m.message_type, m.message_content, m.status, m.conversation_id,
      c.display_name AS conversation_name, c.id AS contact_id, c.display_name AS contact_name, m.channel_id,
      ch.name AS channel_name, ch.type AS channel_type, CASE WHEN t.is_group THEN t.id END AS group_chat_id,
      m.sender_user_id, m.created_at
    FROM messages m, conversations v, contacts c, channels ch, threads t
    WHERE m.company_id = $1 AND m.id = ANY($2::bigint[]) AND v.id = m.conversation_id AND c.id = v.contact_id
      AND ch.id = m.channel_id AND t.id = m.thread_id
    ORDER BY m.id`, [companyId, ids])
