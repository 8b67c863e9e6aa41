import { Clock, Context, DateTime, Effect, Layer, Option, Predicate, Schedule } from "effect"
import { SqlClient } from "effect/sql"
import { CompanyId, type Actor, UserId } from "../auth/Domain.ts"
import { rolePermissions } from "../auth/Permissions.ts"
import type { Plan } from "../auth/Plans.ts"
import { Events } from "../events/Events.ts"
import { makeBatcher } from "../platform/Batcher.ts"
import { Jobs, jobHandler } from "../platform/Jobs.ts"
import type { WaitData } from "./Actions.ts"
import { type Done, permanent, type StepError, type StepInput, transient, wireMessage } from "./actions/Action.ts"
import { ActionServices } from "./actions/ActionServices.ts"
import { registry } from "./actions/Registry.ts"
import type { Edge, Node } from "./Domain.ts"
import { AutomationsRepo, type NewStep, type RunState } from "./Repo.ts"
import { directHoldMs, firstState, RunJob } from "./Runs.ts"
import type { Started, StartRequest } from "./Starter.ts"

export const stepAttempts = 3
/** Version graphs kept in memory. */
const graphsKept = 1_000
const outputLimit = 4096

/** Step outputs are capped: a long one keeps its first 4 KB as text. */
const capped = (output: unknown) => {
  const text = JSON.stringify(output ?? null)
  return text.length <= outputLimit ? output : { truncated: true, preview: text.slice(0, outputLimit) }
}

const unitMs = { seconds: 1000, minutes: 60_000, hours: 3600_000, days: 86_400_000 } as const

/** When a wait ends: after its duration, or at the next HH:MM in `timezone`. */
export const wakeAt = (data: WaitData, now: number, timezone: string): number => {
  if ("duration" in data) return now + data.duration * unitMs[data.unit]
  const [h, m] = data.until.split(":").map(Number)
  let parts: Record<string, string>
  try {
    parts = Object.fromEntries(
      new Intl.DateTimeFormat("en-US", { timeZone: timezone, hour12: false, hour: "2-digit", minute: "2-digit", second: "2-digit" })
        .formatToParts(new Date(now)).map((p) => [p.type, p.value])
    )
  } catch {
    return wakeAt(data, now, "UTC")
  }
  const local = (Number(parts.hour) % 24) * 3600 + Number(parts.minute) * 60 + Number(parts.second)
  let delta = h * 3600 + m * 60 - local
  if (delta <= 0) delta += 86_400
  return now + delta * 1000
}

const systemActor = (companyId: CompanyId, who: { userId: number; plan: string; timezone: string; email: string | null; name: string }): Actor => ({
  userId: UserId.make(who.userId),
  email: who.email,
  isServiceAccount: false,
  kind: "service",
  tokenId: null,
  sessionId: null,
  abilities: ["*"],
  account: {
    id: who.userId,
    name: who.name,
    lastname: null,
    email: who.email,
    email_verified_at: null,
    phone: null,
    phone_verified: false,
    timezone: who.timezone,
    locale: "en",
    availability: "online",
    is_service_account: false,
    current_company_id: companyId,
    photo_version: null
  },
  company: { id: companyId, plan: who.plan as Plan, role: "admin", permissions: rolePermissions.admin }
})

/** Runs ending written in one batch at most. */
const batchMax = 256

interface Ending {
  readonly companyId: CompanyId
  readonly run: RunState
  readonly status: "succeeded" | "failed"
  readonly error: string | null
  readonly jobId: number | null
  readonly steps: ReadonlyArray<NewStep>
  readonly state: unknown
  readonly at: Date
}

/** A segment of a run under way. */
interface Walk {
  readonly companyId: CompanyId
  readonly run: RunState
  readonly actor: Actor
  readonly nodes: ReadonlyMap<string, Node>
  readonly jobId: number | null
  readonly state: { pending: Array<string>; visits: Record<string, number>; outputs: Record<string, unknown>; segment: number }
  /** Rows of steps a replay repeats harmlessly (`replayable`), written with the run's next write. */
  unwritten: Array<NewStep>
}

const written = (walk: Walk) => {
  const rows = walk.unwritten
  walk.unwritten = []
  return rows
}

const nextOf = (run: RunState, nodeId: string, handle: string | null) =>
  run.edges.filter((e) => e.source === nodeId && (handle === null || e.sourceHandle === handle)).map((e) => e.target)

const advance = (walk: Walk, nodeId: string, visit: number, output: unknown, handle: string | null) => {
  const { state } = walk
  state.pending = [...state.pending.slice(1), ...nextOf(walk.run, nodeId, handle)]
  state.visits[nodeId] = visit
  state.outputs[nodeId] = output
}

const handleOf = (actionId: string, output: unknown) =>
  actionId === "condition" ? String(Predicate.hasProperty(output, "result") && output.result === true) : null

interface RunStateJson {
  readonly pending: ReadonlyArray<string>
  readonly visits: Record<string, number>
  readonly outputs: Record<string, unknown>
  readonly started?: boolean
  readonly segment?: number
}

/**
 * Runs a run's steps from where it stands until it ends or waits: a first segment at once in the
 * process that admitted the run (`direct`), later segments and fallbacks as `automation.run` jobs.
 */
export class RunExecutor extends Context.Service<RunExecutor, {
  /**
   * `fresh`: nothing after the run's checkpoint has been written yet (the segment's first execution).
   * `jobId`: the segment's queued fallback job, dismissed with the segment's last write.
   */
  execute(companyId: CompanyId, runId: string, segment: number, fresh: boolean, jobId: number | null): Effect.Effect<void>
  /**
   * A run's first segment, now, in this process; its fallback job is held off while it runs. Should
   * the hold be lost (the job was claimed, this process stalled), the segment stops and the job's
   * runner carries on from the steps written.
   */
  direct(companyId: CompanyId, started: Started, request: StartRequest): Effect.Effect<void>
}>()("crm/automations/RunExecutor") {
  static readonly layer = Layer.effect(RunExecutor, Effect.gen(function*() {
    const repo = yield* AutomationsRepo
    const sql = yield* SqlClient.SqlClient
    const jobs = yield* Jobs
    const events = yield* Events
    const services = yield* ActionServices

    const nowDate = Effect.map(Clock.currentTimeMillis, (ms) => new Date(ms))

    const execute = (companyId: CompanyId, runId: string, segment: number, fresh: boolean, jobId: number | null) =>
      Effect.flatMap(repo.loadRun(companyId, runId), (found) => Option.isNone(found) ? Effect.void : executeRun(companyId, found.value, segment, fresh, jobId))

    // Versions never change once written, so their graphs are kept: a first segment then reads nothing of its run.
    const graphs = new Map<string, { readonly nodes: ReadonlyArray<Node>; readonly edges: ReadonlyArray<Edge> }>()
    const graphOf = (companyId: CompanyId, versionId: string) => {
      const known = graphs.get(versionId)
      if (known !== undefined) return Effect.succeed(Option.some(known))
      return Effect.tap(repo.graph(companyId, versionId), (found) =>
        Effect.sync(() => {
          if (Option.isNone(found)) return
          if (graphs.size >= graphsKept) graphs.delete(graphs.keys().next().value!)
          graphs.set(versionId, found.value)
        }))
    }

    const executeRun = Effect.fnUntraced(function*(companyId: CompanyId, run: RunState, segment: number, fresh: boolean, jobId: number | null) {
      if (run.status === "succeeded" || run.status === "failed" || run.status === "cancelled") return
      const stored = run.state as RunStateJson
      if ((stored.segment ?? 0) !== segment) return
      if (run.actor === null) return yield* finish(companyId, run, "failed", "The company has no member to act for.", jobId, [], null)
      const trigger = run.nodes.find((n) => n.type === "trigger")!
      const walk: Walk = {
        companyId,
        run,
        actor: systemActor(companyId, run.actor),
        nodes: new Map(run.nodes.map((n) => [n.id, n])),
        jobId,
        state: {
          pending: stored.started ? [...stored.pending] : nextOf(run, trigger.id, null),
          visits: { ...stored.visits },
          outputs: { ...stored.outputs },
          segment
        },
        unwritten: []
      }
      if (run.status === "waiting") yield* repo.saveState(companyId, run.id, "running", { ...walk.state, started: true }, null)
      while (walk.state.pending.length > 0) {
        const nodeId = walk.state.pending[0]
        const node = walk.nodes.get(nodeId)!
        const actionId = node.actionId ?? "unknown"
        const visit = (walk.state.visits[nodeId] ?? 0) + 1
        const done = fresh ? Option.none() : yield* repo.step(companyId, run.id, nodeId, visit)
        if (Option.isSome(done)) {
          if (done.value.status === "failed") return yield* finish(companyId, run, "failed", done.value.error, jobId, written(walk), null)
          advance(walk, nodeId, visit, done.value.output, handleOf(actionId, done.value.output))
          continue
        }
        const startedAt = yield* nowDate
        if (actionId === "wait") return yield* waitFor(walk, node, visit, startedAt)
        const { result, attempt } = yield* attempted(node, { companyId, run, actor: walk.actor, nodeId, visit, outputs: walk.state.outputs })
        const finishedAt = yield* nowDate
        if (result._tag === "Failure") {
          const failed: NewStep = { runId: run.id, nodeId, visit, actionId, status: "failed", attempt, output: null, error: result.failure.message, startedAt, finishedAt }
          return yield* finish(companyId, run, "failed", `Step ${nodeId} (${actionId}) failed: ${result.failure.message}`, jobId, [...written(walk), failed], null)
        }
        const output = capped(result.success.output)
        advance(walk, nodeId, visit, output, handleOf(actionId, output))
        yield* record(walk, { runId: run.id, nodeId, visit, actionId, status: "succeeded", attempt, output, error: null, startedAt, finishedAt }, result.success)
      }
      return yield* finish(companyId, run, "succeeded", null, jobId, written(walk), { ...walk.state, started: true })
    })

    // A wait ends the segment: its step, the run's checkpoint and the next segment's job in one transaction.
    const waitFor = Effect.fnUntraced(function*(walk: Walk, node: Node, visit: number, startedAt: Date) {
      const { companyId, run, state, jobId } = walk
      const segment = state.segment
      const wake = new Date(wakeAt(node.data as WaitData, startedAt.getTime(), run.timezone))
      const output = { resume_at: wake.toISOString() }
      advance(walk, node.id, visit, output, null)
      state.segment = segment + 1
      const rows = [...written(walk), { runId: run.id, nodeId: node.id, visit, actionId: "wait", status: "succeeded" as const, attempt: 1, output, error: null, startedAt, finishedAt: startedAt }]
      yield* Effect.gen(function*() {
        yield* repo.recordSteps(companyId, run.id, rows, "waiting", { ...state, started: true }, wake)
        yield* jobs.enqueue(RunJob, companyId, { runId: run.id, segment: segment + 1 }, { runAfter: DateTime.fromDateUnsafe(wake) })
        if (jobId !== null) yield* jobs.dismiss(companyId, jobId)
      }).pipe(sql.withTransaction, Effect.orDie)
    })

    /** A step with its retries: how it ended, and the attempts it took. */
    const attempted = (node: Node, input: Omit<StepInput, "action">) => {
      let attempt = 0
      const once = Effect.suspend(() => {
        attempt++
        return step(node, input)
      })
      return once.pipe(
        Effect.catchDefect((d) => Effect.fail(transient(`Unexpected failure: ${wireMessage(d)}`))),
        Effect.retry({ while: (e: StepError) => e.transient, times: stepAttempts - 1, schedule: Schedule.exponential("200 millis") }),
        Effect.result,
        Effect.map((result) => ({ result, attempt }))
      )
    }

    // A step's row is written with its writes, or later with the run's next write when a replay would repeat it harmlessly.
    const record = (walk: Walk, row: NewStep, done: Done): Effect.Effect<void> => {
      const { companyId, run, state } = walk
      if (done.commit !== Effect.void) {
        return Effect.andThen(done.commit, repo.recordSteps(companyId, run.id, [...written(walk), row], "running", { ...state, started: true }, null)).pipe(
          sql.withTransaction,
          Effect.orDie
        )
      }
      // The run's last step is written with its end.
      if (done.replayable || state.pending.length === 0) {
        walk.unwritten.push(row)
        return Effect.void
      }
      return repo.recordSteps(companyId, run.id, [...written(walk), row], "running", { ...state, started: true }, null)
    }

    // Runs of a company that end while others' ends are being written end together: their last step
    // rows, ends, events and fallback jobs' dismissals in one statement.
    const ends = yield* makeBatcher<Ending, void>({
      key: (e) => String(e.companyId),
      max: batchMax,
      run: (_, items) => {
        const companyId = items[0].companyId
        const jobIds = items.flatMap((e) => (e.jobId === null ? [] : [e.jobId]))
        return events.emitMany(
          companyId,
          items.map((e) => ({
            key: "automation.run.finished",
            payload: {
              automation_id: e.run.automation_id,
              run_id: e.run.id,
              version_id: e.run.version_id,
              status: e.status,
              error: e.error,
              duration_ms: e.at.getTime() - e.run.started_at.getTime()
            }
          })),
          sql`${repo.finishRuns(companyId, items.map((e) => ({ runId: e.run.id, status: e.status, error: e.error, at: e.at, state: e.state })), items.flatMap((e) => e.steps))}${
            jobIds.length === 0 ? sql`` : sql`, dismissed AS (${jobs.dismissing(companyId, jobIds)})`
          }`
        ).pipe(Effect.as(items.map(() => undefined)))
      }
    })

    const finish = Effect.fnUntraced(function*(
      companyId: CompanyId,
      run: RunState,
      status: "succeeded" | "failed",
      error: string | null,
      jobId: number | null,
      steps: ReadonlyArray<NewStep>,
      state: unknown
    ) {
      yield* ends.submit({ companyId, run, status, error, jobId, steps, state, at: yield* nowDate })
    })

    const step = (node: Node, input: Omit<StepInput, "action">): Effect.Effect<Done, StepError> => {
      const found = registry.get(node.actionId ?? "")
      if (found === undefined) return Effect.fail(permanent(`Unknown action ${node.actionId}.`))
      return found.action.step(node.data, { ...input, action: found.entry }, services)
    }

    const hold = (companyId: CompanyId, jobId: number) =>
      Effect.flatMap(Clock.currentTimeMillis, (now) => jobs.postpone(companyId, jobId, DateTime.makeUnsafe(now + directHoldMs)))

    // Renews the hold until it is lost, then ends (which stops the segment racing it).
    const keepHold = (companyId: CompanyId, jobId: number): Effect.Effect<void> =>
      Effect.sleep(directHoldMs / 3).pipe(
        Effect.andThen(hold(companyId, jobId)),
        Effect.flatMap((held) => (held ? keepHold(companyId, jobId) : Effect.logWarning("automation run handed to its fallback job", { job: jobId })))
      )

    const direct = Effect.fnUntraced(function*(companyId: CompanyId, started: Started, request: StartRequest) {
      // Waited long for a slot: the hold is renewed first, and a job a runner already took is left to it.
      if ((yield* Clock.currentTimeMillis) - started.enqueuedAt > directHoldMs / 3 && !(yield* hold(companyId, started.jobId))) return
      const graph = yield* graphOf(companyId, request.versionId)
      // The run as its admission wrote it (what `loadRun` would read back).
      const first = Option.isNone(graph)
        ? execute(companyId, started.runId, 0, true, started.jobId)
        : executeRun(companyId, {
          id: started.runId,
          company_id: companyId,
          automation_id: request.automationId,
          version_id: request.versionId,
          status: "running",
          context: request.context,
          state: firstState,
          started_at: new Date(started.enqueuedAt),
          timezone: started.timezone,
          actor: started.actor,
          nodes: graph.value.nodes,
          edges: graph.value.edges
        }, 0, true, started.jobId)
      yield* Effect.raceFirst(first, keepHold(companyId, started.jobId))
    })

    return RunExecutor.of({ execute, direct })
  })).pipe(Layer.provide(ActionServices.layer))
}

/** The `automation.run` job. A first segment's job is a fallback: steps of the in-process run may be written already. */
export const RunHandler = jobHandler(RunJob, Effect.gen(function*() {
  const executor = yield* RunExecutor
  // A claimed job ends with the runner's own bookkeeping: there is no queued fallback to dismiss.
  return (job) => executor.execute(CompanyId.make(job.companyId), job.payload.runId, job.payload.segment, job.attempt === 1 && job.payload.segment > 0, null)
}))
