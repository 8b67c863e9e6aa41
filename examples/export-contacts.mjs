// Exports a company's contacts to CSV and downloads the file through its signed link.
//   API=http://localhost:8080 node examples/export-contacts.mjs
import { API, call, newCompany, until } from "./lib.mjs"

const company = await newCompany()
for (const [firstName, phone] of [["Ann", "+14155550123"], ["Bob", "+14155550124"], ["Cleo", "+14155550125"]]) {
  await call(company.token, "POST", "/v1/contacts", { firstName, lastName: "Example", phones: [{ phone, type: "mobile" }] })
}
const created = (await call(company.token, "POST", "/v1/exports", { type: "contacts", format: "csv", name: "All contacts" })).data.export
const done = await until("the export", async () => {
  const current = (await call(company.token, "GET", `/v1/exports/${created.id}`)).data.export
  if (current.status === "failed") throw new Error(`export failed: ${current.error_message}`)
  return current.status === "completed" ? current : undefined
}, 60_000)

// download_url is signed: no Authorization header, valid until expires_at.
const link = new URL(done.download_url)
const file = await fetch(`${API}${link.pathname}${link.search}`)
if (file.status !== 200) throw new Error(`download: ${file.status}`)
const csv = (await file.text()).replace(/^\uFEFF/, "")
const lines = csv.trim().split(/\r?\n/)
if (lines.length !== 4 || !["Ann", "Bob", "Cleo"].every((name) => csv.includes(name))) throw new Error(`unexpected file:\n${csv}`)
console.log(`export ${done.id}: ${done.row_count} contacts, ${lines.length} lines of CSV downloaded (${lines[0].slice(0, 60)}…)`)
