import { Cause, Exit, Option, Schema, type SchemaIssue } from "effect"
import { actionById } from "./Actions.ts"
import type { Condition, Edge, Graph, Node, StoredGraph, Trigger } from "./Domain.ts"

/** Free-form `data` of a node or edge is capped like every other free-form object. */
export const dataLimitBytes = 16 * 1024
export const regexMaxLength = 200

/**
 * A pattern is refused when it is long, uses backreferences or lookarounds, or repeats a group that
 * itself repeats (`(a+)+`, the classic catastrophic backtracking shape); matching also reads at most
 * the first 4096 characters of the text.
 */
export const unsafeRegex = (pattern: string): string | null => {
  if (pattern.length > regexMaxLength) return `The pattern must not be greater than ${regexMaxLength} characters.`
  if (/\\[1-9]|\\k<|\(\?<?[=!]/.test(pattern)) return "The pattern must not use backreferences or lookarounds."
  if (/\((?:[^()\\]|\\.)*[+*}](?:[^()\\]|\\.)*\)\s*(?:[+*]|\{\d+,?\d*\})/.test(pattern)) {
    return "The pattern must not repeat a group that itself repeats."
  }
  try {
    new RegExp(pattern, "iu")
  } catch {
    return "The pattern is not a valid regular expression."
  }
  return null
}

export const conditionErrors = (conditions: ReadonlyArray<Condition>, at: string, errors: Record<string, Array<string>>) => {
  conditions.forEach((c, i) => {
    const field = `${at}.${i}.value`
    const needsText = c.type !== "is_first_message"
    if (needsText && (c.value === undefined || c.value === null || String(c.value) === "")) {
      errors[field] = [`The value is required for ${c.type}.`]
      return
    }
    if (c.type === "text_matches") {
      const problem = unsafeRegex(String(c.value))
      if (problem !== null) errors[field] = [problem]
    }
    if ((c.type === "has_tag" || c.type === "deal_stage_is") && !Number.isSafeInteger(Number(c.value))) {
      errors[field] = [`The value of ${c.type} must be an id.`]
    }
    if (c.type === "contact_field_equals" && (c.field === undefined || c.field === "")) {
      errors[`${at}.${i}.field`] = ["The field is required for contact_field_equals."]
    }
  })
}

const issueText = (issue: SchemaIssue.Issue) => {
  const text = String(issue).split("\n").map((l) => l.trim()).filter((l) => l !== "").join(" ")
  return text.length > 300 ? `${text.slice(0, 300)}…` : text
}

/** The successors of a node, with the handle of each edge. */
export const successors = (graph: StoredGraph, nodeId: string) => graph.edges.filter((e) => e.source === nodeId)

/**
 * The builder's checks, each error naming the node or edge it is about: one trigger node, unique
 * ids, known actions with valid `data`, edges between existing nodes, condition edges on `true` /
 * `false`, every node reachable from the trigger, no cycle that does not pass a `wait`.
 */
export const validate = (graph: Graph): Record<string, Array<string>> => {
  const errors: Record<string, Array<string>> = {}
  const add = (field: string, message: string) => {
    ;(errors[field] ??= []).push(message)
  }
  const nodes = graph.nodes
  const edges = graph.edges ?? []
  const byId = new Map<string, Node>()
  nodes.forEach((n, i) => {
    if (byId.has(n.id)) add(`nodes.${i}.id`, `The node id ${n.id} is used twice.`)
    byId.set(n.id, n)
    if (n.data !== undefined && n.data !== null && JSON.stringify(n.data).length > dataLimitBytes) {
      add(`nodes.${i}.data`, `The data of node ${n.id} must not be larger than 16 KB.`)
      return
    }
    if (n.type === "trigger") return
    const spec = n.actionId === undefined || n.actionId === null ? undefined : actionById.get(n.actionId)
    if (spec === undefined) {
      add(`nodes.${i}.actionId`, `Node ${n.id} has an unknown actionId${n.actionId ? ` ${n.actionId}` : ""}.`)
      return
    }
    const decoded = Schema.decodeUnknownExit(spec.data)(n.data ?? {})
    if (Exit.isFailure(decoded)) {
      const error = Cause.findErrorOption(decoded.cause)
      add(`nodes.${i}.data`, `The data of node ${n.id} is invalid for ${spec.id}: ${Option.isSome(error) ? issueText(error.value.issue) : "invalid"}`)
      return
    }
    if (spec.id === "assign-conversation") {
      const d = decoded.value as { user_id?: number; team_id?: number }
      if ((d.user_id === undefined) === (d.team_id === undefined)) add(`nodes.${i}.data`, `Node ${n.id} needs exactly one of user_id or team_id.`)
    }
    if (spec.id === "condition") conditionErrors((decoded.value as { conditions: ReadonlyArray<Condition> }).conditions, `nodes.${i}.data.conditions`, errors)
  })
  const triggers = nodes.filter((n) => n.type === "trigger")
  if (triggers.length !== 1) add("nodes", `The graph needs exactly one trigger node; it has ${triggers.length}.`)

  const edgeIds = new Set<string>()
  edges.forEach((e, i) => {
    if (edgeIds.has(e.id)) add(`edges.${i}.id`, `The edge id ${e.id} is used twice.`)
    edgeIds.add(e.id)
    if (e.data !== undefined && e.data !== null && JSON.stringify(e.data).length > dataLimitBytes) add(`edges.${i}.data`, `The data of edge ${e.id} must not be larger than 16 KB.`)
    const source = byId.get(e.source)
    if (source === undefined) add(`edges.${i}.source`, `Edge ${e.id} starts at node ${e.source}, which does not exist.`)
    if (!byId.has(e.target)) add(`edges.${i}.target`, `Edge ${e.id} ends at node ${e.target}, which does not exist.`)
    if (byId.get(e.target)?.type === "trigger") add(`edges.${i}.target`, `Edge ${e.id} must not lead into the trigger node.`)
    if (source?.actionId === "condition" && e.sourceHandle !== "true" && e.sourceHandle !== "false") {
      add(`edges.${i}.sourceHandle`, `Edge ${e.id} leaves condition node ${e.source}: its sourceHandle must be true or false.`)
    }
  })
  ;(graph.triggers ?? []).forEach((t, i) => {
    if (t.conditions !== undefined) conditionErrors(t.conditions, `triggers.${i}.conditions`, errors)
  })
  if (Object.keys(errors).length > 0 || triggers.length !== 1) return errors

  const out = new Map<string, Array<Edge>>()
  for (const e of edges) out.set(e.source, [...(out.get(e.source) ?? []), e])
  const reached = new Set<string>([triggers[0].id])
  const queue = [triggers[0].id]
  while (queue.length > 0) {
    for (const e of out.get(queue.shift()!) ?? []) {
      if (!reached.has(e.target)) {
        reached.add(e.target)
        queue.push(e.target)
      }
    }
  }
  nodes.forEach((n, i) => {
    if (!reached.has(n.id)) add(`nodes.${i}`, `Node ${n.id} is not reachable from the trigger.`)
  })

  // A cycle must pass a wait: among non-wait nodes the edges must form no cycle.
  const isWait = (id: string) => byId.get(id)?.actionId === "wait"
  const color = new Map<string, 1 | 2>()
  const edgeIndex = new Map(edges.map((e, i) => [e, i]))
  const visit = (id: string): boolean => {
    color.set(id, 1)
    for (const e of out.get(id) ?? []) {
      if (isWait(e.target)) continue
      const c = color.get(e.target)
      if (c === 1) {
        add(`edges.${edgeIndex.get(e)}`, `Edge ${e.id} closes a cycle without a wait node.`)
        return true
      }
      if (c === undefined && visit(e.target)) return true
    }
    color.set(id, 2)
    return false
  }
  for (const n of nodes) if (!isWait(n.id) && !color.has(n.id) && visit(n.id)) break
  return errors
}

export const triggerNode = (graph: StoredGraph) => graph.nodes.find((n) => n.type === "trigger")!

export type { Trigger }
