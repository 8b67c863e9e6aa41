/**
 * Imported first by `src/main.ts`, before any module that needs a newer runtime: below the supported
 * Node major the process stops with one JSON line saying what to run instead. Deno reports its own
 * versions and is checked by its own smoke test.
 */
export const SUPPORTED_NODE_MAJOR = 24

const versions = process.versions as NodeJS.ProcessVersions & { readonly deno?: string; readonly bun?: string }
const major = Number(versions.node.split(".")[0])

if (versions.deno === undefined && versions.bun === undefined && major < SUPPORTED_NODE_MAJOR) {
  process.stderr.write(`${JSON.stringify({
    level: 60,
    time: new Date().toISOString(),
    msg: `Node ${process.version} is not supported: this server needs Node ${SUPPORTED_NODE_MAJOR} or later. ` +
      "`npm start` runs the Node pinned in package.json (node_modules/.bin/node); run `npm install` first, " +
      "or start it with `npx node --import tsx src/main.ts`.",
    node: process.version,
    required: `>=${SUPPORTED_NODE_MAJOR}`
  })}\n`)
  process.exit(1)
}
