import "./platform/RuntimeGuard.ts"
import * as nodeModule from "node:module"

// Compiled modules are kept on disk (the system's temporary directory) and reused by the next start:
// compiling the app's modules is most of a start's CPU. A static import would be compiled before this
// line runs, hence the dynamic one. Deno has no such cache.
nodeModule.enableCompileCache?.()
await import("./Launch.ts")
