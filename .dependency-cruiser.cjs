/**
 * The layering the house style asks for, checked in CI (`npm run lint:deps`):
 * cluster/ -> areas -> providers/, auth/ -> platform/; contracts import only schemas.
 */
/** Modules a contract (`Api.ts`) may import: schemas, error schemas and the auth middleware's declaration. */
const schemaOnly = "(^src/[^/]+/Domain\\.ts$)|(^src/platform/(Errors|Envelope|Pagination|FreeForm|PhoneSchemas)\\.ts$)|(^src/platform/files/SignedQuery\\.ts$)|(^src/auth/(Middleware|Permissions|Plans)\\.ts$)|(^src/[^/]+/Api\\.ts$)|(^src/channels/HooksApi\\.ts$)"

module.exports = {
  forbidden: [
    {
      name: "no-folder-cycles",
      comment: "Folders depend one way: a loop between two folders means a port is missing.",
      severity: "error",
      scope: "folder",
      from: { path: "^(src/.+|cluster)$" },
      to: { circular: true }
    },
    {
      name: "src-not-above-cluster",
      comment: "cluster/ sits above the areas: declare a port in the area and implement it in cluster/ (App.ts wires it).",
      severity: "error",
      from: { path: "^src/", pathNot: "^src/(App|main)\\.ts$" },
      to: { path: "^cluster/" }
    },
    {
      name: "platform-below-areas",
      comment: "platform/ is the kernel every area builds on; it knows no area.",
      severity: "error",
      from: { path: "^src/platform/" },
      to: { path: "^src/", pathNot: "^src/platform/" }
    },
    {
      name: "contracts-import-schemas-only",
      comment: "An Api.ts is the contract: it imports effect and schema modules, never a service, repo, SQL or node built-in.",
      severity: "error",
      from: { path: "(^src/[^/]+/Api\\.ts$)|(^src/channels/HooksApi\\.ts$)" },
      to: { pathNot: [schemaOnly, "^node_modules/effect/"], dependencyTypesNot: ["type-only"] }
    },
    {
      name: "schemas-stay-schemas",
      comment: "What a contract imports must itself stay free of services, SQL and node built-ins.",
      severity: "error",
      from: { path: schemaOnly, pathNot: "(^src/[^/]+/Api\\.ts$)|(^src/channels/HooksApi\\.ts$)" },
      to: { pathNot: [schemaOnly, "^node_modules/effect/"], dependencyTypesNot: ["type-only"] }
    }
  ],
  options: {
    doNotFollow: { path: "node_modules" },
    // The composition root (src/App.ts, Api.ts, Http.ts, main.ts, Launch.ts, admin.ts) wires every area and may import anything.
    exclude: { path: "^src/[^/]+\\.ts$" },
    parser: "swc",
    tsPreCompilationDeps: true,
    tsConfig: { fileName: "tsconfig.json" },
    enhancedResolveOptions: { exportsFields: ["exports"], conditionNames: ["import", "require", "node", "default"], extensions: [".ts", ".js", ".mjs"] }
  }
}
