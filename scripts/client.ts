/**
 * Writes the fetch client (`src/client/fetch/Client.ts`) from the OpenAPI document.
 *
 *   npm run client:generate                          from the contract in this checkout (what /openapi.json serves)
 *   npm run client:generate -- --from http://localhost:8080/openapi.json   from a running server (or a file)
 *   npm run client:generate -- --out my/Client.ts    elsewhere (copy src/client/fetch/Runtime.ts beside it)
 *   npm run client:generate -- --check               exit 1 when the committed client differs from the contract
 */
import { readFileSync, writeFileSync } from "node:fs"
import { parseArgs } from "node:util"
import { type Document, generate } from "./client/Generate.ts"

export const CLIENT_PATH = "src/client/fetch/Client.ts"

const documentFrom = async (from: string | undefined): Promise<Document> => {
  if (from === undefined) {
    const [{ OpenApi }, { Api }] = await Promise.all([import("effect/http-api"), import("../src/Api.ts")])
    return OpenApi.fromApi(Api) as unknown as Document
  }
  if (/^https?:\/\//.test(from)) {
    const response = await fetch(from)
    if (!response.ok) throw new Error(`${from}: ${response.status}`)
    return (await response.json()) as Document
  }
  return JSON.parse(readFileSync(from, "utf8")) as Document
}

const main = async () => {
  const { values } = parseArgs({
    options: { from: { type: "string" }, out: { type: "string" }, check: { type: "boolean" } },
    args: process.argv.slice(2)
  })
  const out = values.out ?? CLIENT_PATH
  const source = generate(await documentFrom(values.from))
  if (values.check === true) {
    const current = readFileSync(out, "utf8")
    if (current !== source) {
      console.error(`${out} differs from the contract: run npm run client:generate and commit it`)
      return 1
    }
    console.log(`${out} matches the contract`)
    return 0
  }
  writeFileSync(out, source)
  console.log(`wrote ${out} (${source.length} characters)`)
  return 0
}

main().then((code) => process.exit(code), (error: unknown) => {
  console.error(error)
  process.exit(1)
})
