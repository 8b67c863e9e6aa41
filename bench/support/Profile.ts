import { existsSync, readdirSync, readFileSync } from "node:fs"
import { join, relative } from "node:path"
import { root } from "./Processes.ts"

interface ProfileNode {
  readonly id: number
  readonly callFrame: { readonly functionName: string; readonly url: string; readonly lineNumber: number }
  readonly children?: ReadonlyArray<number>
}

export interface SummaryOptions {
  /** Said after "s sampled" in the heading, e.g. what part of the process the profile covers. */
  readonly note?: string
  /** Adds inclusive time by file (any frame of the file on the synchronous stack). */
  readonly inclusiveByFile?: boolean
}

/** Prints self time per package/file and per function (and optionally inclusive time per file) for each .cpuprofile in `dir`. */
export const summarizeProfile = (dir: string, options: SummaryOptions = {}) => {
  if (!existsSync(dir)) return console.log(`  (no profile written in ${dir})`)
  for (const file of readdirSync(dir).filter((f) => f.endsWith(".cpuprofile"))) {
    const profile = JSON.parse(readFileSync(join(dir, file), "utf8")) as {
      nodes: Array<ProfileNode>
      samples: Array<number>
      timeDeltas: Array<number>
    }
    const byId = new Map(profile.nodes.map((n) => [n.id, n]))
    const parent = new Map<number, number>()
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
    const fileOf = (node: ProfileNode) => {
      const url = node.callFrame.url.replace(/^file:\/\//, "")
      return url === "" ? "" : url.includes("node_modules/") ? url.slice(url.lastIndexOf("node_modules/") + 13) : relative(root, url)
    }
    const inclusiveByFile = new Map<string, number>()
    const selfByFn = new Map<string, number>()
    const selfByModule = new Map<string, number>()
    let total = 0
    profile.samples.forEach((id, i) => {
      const node = byId.get(id)!
      const dt = profile.timeDeltas[i] ?? 0
      total += dt
      const url = node.callFrame.url.replace(/^file:\/\//, "")
      const where = url === "" ? "" : relative(root, url)
      const fn = `${node.callFrame.functionName || "(anonymous)"} ${where}:${node.callFrame.lineNumber + 1}`
      selfByFn.set(fn, (selfByFn.get(fn) ?? 0) + dt)
      const module = where === ""
        ? node.callFrame.functionName || "(native)"
        : where.includes("node_modules/")
        ? where.split("node_modules/").pop()!.split("/").slice(0, where.includes("node_modules/@") ? 2 : 1).join("/")
        : where.startsWith("node:")
        ? "node internals"
        : where
      selfByModule.set(module, (selfByModule.get(module) ?? 0) + dt)
      if (!options.inclusiveByFile) return
      const seen = new Set<string>()
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const file = fileOf(byId.get(at)!)
        if (file !== "" && !file.startsWith("node:") && !seen.has(file)) {
          seen.add(file)
          inclusiveByFile.set(file, (inclusiveByFile.get(file) ?? 0) + dt)
        }
      }
    })
    const top = (m: Map<string, number>, n: number) =>
      [...m].sort((a, b) => b[1] - a[1]).slice(0, n).map(([k, v]) => `  ${((v / total) * 100).toFixed(1).padStart(5)}%  ${k}`)
    console.log(`\nCPU profile ${file} (${(total / 1e6).toFixed(1)} s sampled${options.note === undefined ? "" : `, ${options.note}`})`)
    console.log("self time by package / file:")
    console.log(top(selfByModule, 15).join("\n"))
    console.log("self time by function:")
    console.log(top(selfByFn, 25).join("\n"))
    if (options.inclusiveByFile) {
      console.log("inclusive time by file (any frame of the file on the synchronous stack):")
      console.log(top(inclusiveByFile, 30).join("\n"))
    }
  }
}
