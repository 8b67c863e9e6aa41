/**
 * Writes the generated OpenAPI document (what `/openapi.json` serves) to the path given, or stdout.
 * CI lints it: `npx tsx scripts/openapi.ts openapi.json && npx redocly lint openapi.json`.
 */
import { OpenApi } from "effect/http-api"
import { writeFileSync } from "node:fs"
import { Api } from "../src/Api.ts"

const document = JSON.stringify(OpenApi.fromApi(Api), null, 2)
const target = process.argv[2]
if (target === undefined) process.stdout.write(document + "\n")
else writeFileSync(target, document + "\n")
