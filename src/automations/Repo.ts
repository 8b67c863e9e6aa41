import { Context, Effect, Layer, Option } from "effect"
import { SqlClient, type Statement } from "effect/sql"
import type { CompanyId } from "../auth/Domain.ts"
import type { Automation, AutomationStatus, Edge, Node, Run, RunStatus, Step, StoredGraph, Trigger } from "./Domain.ts"

interface AutomationRow {
  readonly id: string
  readonly company_id: number
  readonly name: string
  readonly description: string | null
  readonly status: AutomationStatus
  readonly health: "ok" | "degraded" | "failing"
  readonly active_version_id: string | null
  readonly latest_version_id: string | null
  readonly template_id: string | null
  readonly executions_count: number
  readonly last_run_at: Date | null
  readonly created_at: Date
  readonly updated_at: Date
  readonly created_by: number | null
  readonly updated_by: number | null
}

const iso = (d: Date | null) => (d === null ? null : d.toISOString())

const toAutomation = (r: AutomationRow): Automation => ({
  id: r.id,
  companyId: Number(r.company_id),
  name: r.name,
  description: r.description,
  status: r.status,
  healthStatus: r.health,
  activeVersionId: r.active_version_id,
  latestVersionId: r.latest_version_id,
  templateId: r.template_id,
  executionsCount: r.executions_count,
  lastRunAt: iso(r.last_run_at),
  createdAt: r.created_at.toISOString(),
  updatedAt: r.updated_at.toISOString(),
  createdBy: r.created_by === null ? null : Number(r.created_by),
  updatedBy: r.updated_by === null ? null : Number(r.updated_by)
})

interface RunRow {
  readonly id: string
  readonly automation_id: string
  readonly version_id: string
  readonly status: RunStatus
  readonly trigger_event: string
  readonly trigger_payload: unknown
  readonly started_at: Date
  readonly finished_at: Date | null
  readonly total_cost_usd: string | number
  readonly total_tokens: number
  readonly error: string | null
}

const toRun = (r: RunRow): Run => ({
  id: r.id,
  automation_id: r.automation_id,
  version_id: r.version_id,
  status: r.status,
  trigger_event: r.trigger_event,
  trigger_payload: r.trigger_payload,
  started_at: r.started_at.toISOString(),
  finished_at: iso(r.finished_at),
  duration_ms: r.finished_at === null ? null : r.finished_at.getTime() - r.started_at.getTime(),
  pii_redacted: true,
  total_cost_usd: Number(r.total_cost_usd),
  total_tokens: r.total_tokens,
  error: r.error
})

interface StepRow {
  readonly id: number
  readonly node_id: string
  readonly action_id: string
  readonly status: Step["status"]
  readonly attempt: number
  readonly started_at: Date
  readonly finished_at: Date
  readonly output: unknown
  readonly error: string | null
}

const toStep = (r: StepRow): Step => ({
  id: Number(r.id),
  node_id: r.node_id,
  action_id: r.action_id,
  status: r.status,
  attempt: r.attempt,
  started_at: r.started_at.toISOString(),
  finished_at: r.finished_at.toISOString(),
  duration_ms: r.finished_at.getTime() - r.started_at.getTime(),
  output: r.output,
  error: r.error
})

export interface VersionRow {
  readonly id: string
  readonly automation_id: string
  readonly number: number
  readonly nodes: ReadonlyArray<Node>
  readonly edges: ReadonlyArray<Edge>
  readonly triggers: ReadonlyArray<Trigger>
  readonly created_at: Date
}

/** An active automation's published triggers: what the in-memory index of a company is built from. */
export interface PublishedRow {
  readonly automation_id: string
  readonly version_id: string
  readonly triggers: ReadonlyArray<Trigger>
}

/** What the executor reads of a run. */
export interface RunState {
  readonly id: string
  readonly company_id: number
  readonly automation_id: string
  readonly version_id: string
  readonly status: RunStatus
  readonly context: Record<string, any>
  readonly state: { readonly pending: ReadonlyArray<string>; readonly visits: Record<string, number>; readonly outputs: Record<string, unknown> }
  readonly started_at: Date
  /** Where `wait {until}` reads the time of day: the contact's timezone, else the company's. */
  readonly timezone: string
  /** Who the steps act as: the automation's creator while a member, else the company's first admin (null: no member). */
  readonly actor: { readonly userId: number; readonly plan: string; readonly timezone: string; readonly email: string | null; readonly name: string } | null
  readonly nodes: ReadonlyArray<Node>
  readonly edges: ReadonlyArray<Edge>
}

export interface NewRun {
  readonly id: string
  readonly automationId: string
  readonly versionId: string
  readonly contactId: number | null
  readonly event: string
  readonly eventId: number | null
  readonly triggerPayload: unknown
  readonly context: unknown
  readonly state: unknown
  readonly at: Date
}

export interface NewStep {
  readonly runId: string
  readonly nodeId: string
  readonly visit: number
  readonly actionId: string
  readonly status: Step["status"]
  readonly attempt: number
  readonly output: unknown
  readonly error: string | null
  readonly startedAt: Date
  readonly finishedAt: Date
}

/** A run as its admission wrote it: `actor` and `timezone` are what its steps need (see `loadRun`). */
export interface Admitted {
  readonly status: RunStatus
  readonly jobId: number | null
  readonly actor: RunState["actor"]
  readonly timezone: string
}

/** A run's end: its state is kept when `state` is null. */
export interface RunEnd {
  readonly runId: string
  readonly status: RunStatus
  readonly error: string | null
  readonly at: Date
  readonly state: unknown
}

const json = (v: unknown) => JSON.stringify(v ?? null)

/** Automations, versions, runs and steps of one company; every statement carries the company id. */
export class AutomationsRepo extends Context.Service<AutomationsRepo, {
  list(companyId: CompanyId, now: Date): Effect.Effect<ReadonlyArray<Automation>>
  find(companyId: CompanyId, id: string, now: Date): Effect.Effect<Option.Option<Automation>>
  insert(companyId: CompanyId, input: { id: string; name: string; description: string | null; status: AutomationStatus; userId: number }): Effect.Effect<void>
  update(companyId: CompanyId, id: string, patch: { name?: string; description?: string | null; status?: AutomationStatus }, userId: number): Effect.Effect<boolean>
  delete(companyId: CompanyId, id: string): Effect.Effect<boolean>
  insertVersion(companyId: CompanyId, automationId: string, id: string, graph: StoredGraph, userId: number): Effect.Effect<void>
  latestVersion(companyId: CompanyId, automationId: string): Effect.Effect<Option.Option<VersionRow>>
  versions(companyId: CompanyId): Effect.Effect<ReadonlyArray<VersionRow>>
  published(companyId: CompanyId): Effect.Effect<ReadonlyArray<PublishedRow>>
  runs(companyId: CompanyId, automationId: string | null, page: number, perPage: number): Effect.Effect<{ items: ReadonlyArray<Run>; total: number }>
  run(companyId: CompanyId, automationId: string, runId: string): Effect.Effect<Option.Option<Run & { steps: ReadonlyArray<Step> }>>
  /**
   * Writes runs, each `cancelled` with `guard.skipped` as its error when its contact started `guard.limit`
   * runs of its automation since `guard.since` (the loop guard, counting the batch's earlier runs too),
   * in one statement. A run absent from the answer was not written: its event already started a run of
   * its automation (replayed, or another runner saw it too). `fallback`, job inserts conditional on
   * `admitted` and returning each job's `payload` (whose `runId` names its run), is written in the same
   * statement.
   */
  admitRuns(
    companyId: CompanyId,
    runs: ReadonlyArray<NewRun>,
    guard: { readonly since: Date; readonly limit: number; readonly skipped: string },
    fallback: Statement.Fragment
  ): Effect.Effect<ReadonlyMap<string, Admitted>>
  /** In `admitRuns`'s statement, for a fallback job whose key (`p.key`) is its run's id: the run was admitted to run. */
  readonly admitted: Statement.Fragment
  loadRun(companyId: CompanyId, runId: string): Effect.Effect<Option.Option<RunState>>
  /** A version's graph (versions never change once written). */
  graph(companyId: CompanyId, versionId: string): Effect.Effect<Option.Option<{ readonly nodes: ReadonlyArray<Node>; readonly edges: ReadonlyArray<Edge> }>>
  step(companyId: CompanyId, runId: string, nodeId: string, visit: number): Effect.Effect<Option.Option<{ status: Step["status"]; output: unknown; error: string | null }>>
  saveState(companyId: CompanyId, runId: string, status: RunStatus, state: unknown, resumeAt: Date | null): Effect.Effect<void>
  /** Step rows (in order) and the run's state after them, in one statement. */
  recordSteps(companyId: CompanyId, runId: string, steps: ReadonlyArray<NewStep>, status: RunStatus, state: unknown, resumeAt: Date | null): Effect.Effect<void>
  /**
   * Runs' ends with their last step rows (in order) and states (null: kept), as data-modifying CTEs to
   * write with the events that announce them.
   */
  finishRuns(companyId: CompanyId, ends: ReadonlyArray<RunEnd>, steps: ReadonlyArray<NewStep>): Statement.Fragment
}>()("crm/automations/AutomationsRepo") {
  static readonly layer = Layer.effect(
    AutomationsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const select = (companyId: CompanyId, now: Date) => sql`
        SELECT a.*,
          CASE
            WHEN (SELECT count(*) FILTER (WHERE x.status = 'failed') FROM (
              SELECT r.status FROM automation_runs r
              WHERE r.company_id = ${companyId} AND r.automation_id = a.id AND r.status IN ('succeeded', 'failed')
              ORDER BY r.started_at DESC LIMIT 5) x) = 5 THEN 'failing'
            WHEN EXISTS (SELECT 1 FROM automation_runs r WHERE r.company_id = ${companyId} AND r.automation_id = a.id
              AND r.status = 'failed' AND r.finished_at > ${new Date(now.getTime() - 24 * 3600_000)}) THEN 'degraded'
            ELSE 'ok' END AS health
        FROM automations a WHERE a.company_id = ${companyId}`

      const list = (companyId: CompanyId, now: Date) =>
        sql<AutomationRow>`${select(companyId, now)} ORDER BY a.created_at DESC, a.id`.pipe(Effect.map((rows) => rows.map(toAutomation)), Effect.orDie)

      const find = (companyId: CompanyId, id: string, now: Date) =>
        sql<AutomationRow>`${select(companyId, now)} AND a.id = ${id}`.pipe(
          Effect.map((rows) => Option.map(Option.fromNullishOr(rows[0]), toAutomation)),
          Effect.orDie
        )

      const insert = (companyId: CompanyId, input: { id: string; name: string; description: string | null; status: AutomationStatus; userId: number }) =>
        sql`
          INSERT INTO automations (id, company_id, name, description, status, created_by, updated_by)
          VALUES (${input.id}, ${companyId}, ${input.name}, ${input.description}, ${input.status}, ${input.userId}, ${input.userId})`.pipe(Effect.asVoid, Effect.orDie)

      const update = (companyId: CompanyId, id: string, patch: { name?: string; description?: string | null; status?: AutomationStatus }, userId: number) =>
        Effect.gen(function*() {
          const rows = yield* sql<{ id: string }>`
            UPDATE automations SET
              name = COALESCE(${patch.name ?? null}, name),
              description = ${patch.description === undefined ? sql`description` : sql`${patch.description}`},
              status = COALESCE(${patch.status ?? null}, status),
              active_version_id = CASE WHEN COALESCE(${patch.status ?? null}, status) = 'active' THEN latest_version_id ELSE active_version_id END,
              updated_by = ${userId}, updated_at = now()
            WHERE company_id = ${companyId} AND id = ${id} RETURNING id`
          if (rows.length > 0 && patch.status === "active") {
            // The trigger consumer's cursor starts at the company's current event when its first automation goes live.
            yield* sql`
              INSERT INTO automation_trigger_cursors (company_id, cursor_seq)
              SELECT id, event_seq FROM companies WHERE id = ${companyId}
              ON CONFLICT (company_id) DO NOTHING`
          }
          return rows.length > 0
        }).pipe(Effect.orDie)

      const remove = (companyId: CompanyId, id: string) =>
        sql<{ id: string }>`DELETE FROM automations WHERE company_id = ${companyId} AND id = ${id} RETURNING id`.pipe(
          Effect.map((rows) => rows.length > 0),
          Effect.orDie
        )

      const insertVersion = (companyId: CompanyId, automationId: string, id: string, graph: StoredGraph, userId: number) =>
        Effect.gen(function*() {
          yield* sql`
            INSERT INTO automation_versions (id, company_id, automation_id, number, nodes, edges, triggers, created_by)
            SELECT ${id}, ${companyId}, ${automationId}, COALESCE(max(number), 0) + 1,
              ${json(graph.nodes)}::jsonb, ${json(graph.edges)}::jsonb, ${json(graph.triggers)}::jsonb, ${userId}
            FROM automation_versions WHERE company_id = ${companyId} AND automation_id = ${automationId}`
          yield* sql`
            UPDATE automations SET latest_version_id = ${id},
              active_version_id = CASE WHEN status = 'active' THEN ${id}::uuid ELSE active_version_id END,
              updated_by = ${userId}, updated_at = now()
            WHERE company_id = ${companyId} AND id = ${automationId}`
        }).pipe(Effect.orDie)

      const latestVersion = (companyId: CompanyId, automationId: string) =>
        sql<VersionRow>`
          SELECT v.id, v.automation_id, v.number, v.nodes, v.edges, v.triggers, v.created_at
          FROM automations a JOIN automation_versions v ON v.company_id = a.company_id AND v.id = a.latest_version_id
          WHERE a.company_id = ${companyId} AND a.id = ${automationId}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)

      const versions = (companyId: CompanyId) =>
        sql<VersionRow>`
          SELECT v.id, v.automation_id, v.number, v.nodes, v.edges, v.triggers, v.created_at
          FROM automations a JOIN automation_versions v ON v.company_id = a.company_id AND v.id = a.latest_version_id
          WHERE a.company_id = ${companyId} ORDER BY a.created_at DESC`.pipe(Effect.orDie)

      const published = (companyId: CompanyId) =>
        sql<PublishedRow>`
          SELECT a.id AS automation_id, v.id AS version_id, v.triggers
          FROM automations a JOIN automation_versions v ON v.company_id = a.company_id AND v.id = a.active_version_id
          WHERE a.company_id = ${companyId} AND a.status = 'active'`.pipe(Effect.orDie)

      const runs = (companyId: CompanyId, automationId: string | null, page: number, perPage: number) =>
        Effect.gen(function*() {
          const scope = automationId === null ? sql`` : sql`AND automation_id = ${automationId}`
          const rows = yield* sql<RunRow>`
            SELECT * FROM automation_runs WHERE company_id = ${companyId} ${scope}
            ORDER BY started_at DESC, id LIMIT ${perPage} OFFSET ${(page - 1) * perPage}`
          const [{ n }] = yield* sql<{ n: number }>`SELECT count(*)::int AS n FROM automation_runs WHERE company_id = ${companyId} ${scope}`
          return { items: rows.map(toRun), total: n }
        }).pipe(Effect.orDie)

      const run = (companyId: CompanyId, automationId: string, runId: string) =>
        Effect.gen(function*() {
          const rows = yield* sql<RunRow>`
            SELECT * FROM automation_runs WHERE company_id = ${companyId} AND automation_id = ${automationId} AND id = ${runId}`
          if (rows.length === 0) return Option.none()
          const steps = yield* sql<StepRow>`
            SELECT * FROM automation_run_steps WHERE company_id = ${companyId} AND run_id = ${runId} ORDER BY id`
          return Option.some({ ...toRun(rows[0]), steps: steps.map(toStep) })
        }).pipe(Effect.orDie)

      const admitted = sql`p.key IN (SELECT id::text FROM ins WHERE status = 'running')`

      /** Who a run's steps act as: the automation's creator while a member, else the company's first admin (null: no member). */
      const actorOf = (automationId: Statement.Fragment, company: Statement.Fragment) => sql`(
        SELECT json_build_object('userId', u.id, 'plan', co.plan, 'timezone', u.timezone, 'email', u.email, 'name', u.name)
        FROM memberships m JOIN users u ON u.id = m.user_id JOIN companies co ON co.id = m.company_id
        LEFT JOIN automations a ON a.company_id = m.company_id AND a.id = ${automationId}
        WHERE m.company_id = ${company}
        ORDER BY (u.id = a.created_by) DESC, (m.role = 'admin') DESC, u.id LIMIT 1)`
      /** Where `wait {until}` reads the time of day: the contact's timezone, else the company's. */
      const timezoneOf = (company: Statement.Fragment, contactId: Statement.Fragment) => sql`(
        SELECT COALESCE(NULLIF(ct.timezone, ''), co.timezone, 'UTC')
        FROM companies co LEFT JOIN contacts ct ON ct.company_id = co.id AND ct.id = ${contactId}
        WHERE co.id = ${company})`

      const admitRuns = (
        companyId: CompanyId,
        runs: ReadonlyArray<NewRun>,
        guard: { readonly since: Date; readonly limit: number; readonly skipped: string },
        fallback: Statement.Fragment
      ) =>
        sql<{ id: string; status: RunStatus; job_id: number | null; actor: RunState["actor"]; timezone: string }>`
          WITH req AS (
            SELECT r.*, CASE WHEN r.contact_id IS NULL THEN 0
              ELSE count(*) OVER (PARTITION BY r.automation_id, r.contact_id ORDER BY r.n) - 1 END AS earlier
            FROM ROWS FROM (jsonb_to_recordset(${json(runs.map((r) => ({
              id: r.id,
              automation_id: r.automationId,
              version_id: r.versionId,
              contact_id: r.contactId,
              event: r.event,
              event_id: r.eventId,
              trigger_payload: r.triggerPayload,
              context: r.context,
              state: r.state,
              at: r.at.toISOString()
            })))}::jsonb) AS (id uuid, automation_id uuid, version_id uuid, contact_id bigint, event text, event_id bigint,
              trigger_payload jsonb, context jsonb, state jsonb, at timestamptz))
              WITH ORDINALITY AS r(id, automation_id, version_id, contact_id, event, event_id, trigger_payload, context, state, at, n)
          ), guarded AS (
            SELECT req.*, req.earlier + (
              SELECT count(*)::int FROM automation_runs x
              WHERE x.company_id = ${companyId} AND x.automation_id = req.automation_id AND x.contact_id = req.contact_id
                AND x.status <> 'cancelled' AND x.started_at > ${guard.since}) >= ${guard.limit}::int AS skipped
            FROM req
          ), ins AS (
            INSERT INTO automation_runs (id, company_id, automation_id, version_id, contact_id, trigger_event, trigger_event_id, status,
              trigger_payload, context, state, error, started_at, finished_at)
            SELECT g.id, ${companyId}::bigint, g.automation_id, g.version_id, g.contact_id, g.event, g.event_id,
              CASE WHEN g.skipped THEN 'cancelled' ELSE 'running' END, g.trigger_payload, g.context, g.state,
              CASE WHEN g.skipped THEN ${guard.skipped}::text END, g.at, CASE WHEN g.skipped THEN g.at END
            FROM guarded g ORDER BY g.n
            ON CONFLICT DO NOTHING RETURNING id, automation_id, contact_id, status, started_at
          ), counted AS (
            UPDATE automations a SET executions_count = a.executions_count + c.n, last_run_at = c.at
            FROM (SELECT automation_id, count(*)::int AS n, max(started_at) AS at FROM ins WHERE status = 'running' GROUP BY automation_id) c
            WHERE a.company_id = ${companyId} AND a.id = c.automation_id
          ), fallback AS (${fallback})
          SELECT ins.id, ins.status, f.id AS job_id, ${actorOf(sql`ins.automation_id`, sql`${companyId}::bigint`)} AS actor,
            ${timezoneOf(sql`${companyId}::bigint`, sql`ins.contact_id`)} AS timezone
          FROM ins LEFT JOIN fallback f ON f.payload->>'runId' = ins.id::text`.pipe(
          Effect.map((rows) =>
            new Map(rows.map((row) => [String(row.id), {
              status: row.status,
              jobId: row.job_id === null ? null : Number(row.job_id),
              actor: row.actor,
              timezone: row.timezone
            }]))
          ),
          Effect.orDie
        )

      const loadRun = (companyId: CompanyId, runId: string) =>
        sql<RunState>`
          SELECT r.id, r.company_id, r.automation_id, r.version_id, r.status, r.context, r.state, r.started_at, v.nodes, v.edges,
            ${timezoneOf(sql`r.company_id`, sql`r.contact_id`)} AS timezone, ${actorOf(sql`r.automation_id`, sql`r.company_id`)} AS actor
          FROM automation_runs r
          JOIN automation_versions v ON v.company_id = r.company_id AND v.id = r.version_id
          WHERE r.company_id = ${companyId} AND r.id = ${runId}`.pipe(Effect.map((rows) => Option.fromNullishOr(rows[0])), Effect.orDie)

      const graph = (companyId: CompanyId, versionId: string) =>
        sql<{ nodes: ReadonlyArray<Node>; edges: ReadonlyArray<Edge> }>`
          SELECT nodes, edges FROM automation_versions WHERE company_id = ${companyId} AND id = ${versionId}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const step = (companyId: CompanyId, runId: string, nodeId: string, visit: number) =>
        sql<{ status: Step["status"]; output: unknown; error: string | null }>`
          SELECT status, output, error FROM automation_run_steps
          WHERE company_id = ${companyId} AND run_id = ${runId} AND node_id = ${nodeId} AND visit = ${visit}`.pipe(
          Effect.map((rows) => Option.fromNullishOr(rows[0])),
          Effect.orDie
        )

      const saveState = (companyId: CompanyId, runId: string, status: RunStatus, state: unknown, resumeAt: Date | null) =>
        sql`
          UPDATE automation_runs SET status = ${status}, state = ${json(state)}::jsonb, resume_at = ${resumeAt}
          WHERE company_id = ${companyId} AND id = ${runId}`.pipe(Effect.asVoid, Effect.orDie)

      const stepRows = (companyId: CompanyId, steps: ReadonlyArray<NewStep>) =>
        steps.length === 0 ? sql`` : sql`steps AS (
          INSERT INTO automation_run_steps (company_id, run_id, node_id, visit, action_id, status, attempt, output, error, started_at, finished_at)
          SELECT ${companyId}, s.run_id, s.node_id, s.visit, s.action_id, s.status, s.attempt, s.output, s.error, s.started_at, s.finished_at
          FROM ROWS FROM (jsonb_to_recordset(${json(steps.map((st) => ({
            run_id: st.runId,
            node_id: st.nodeId,
            visit: st.visit,
            action_id: st.actionId,
            status: st.status,
            attempt: st.attempt,
            output: st.output ?? null,
            error: st.error,
            started_at: st.startedAt.toISOString(),
            finished_at: st.finishedAt.toISOString()
          })))}::jsonb) AS (run_id uuid, node_id text, visit int, action_id text, status text, attempt int, output jsonb, error text,
            started_at timestamptz, finished_at timestamptz)) WITH ORDINALITY AS s(run_id, node_id, visit, action_id, status, attempt, output, error, started_at, finished_at, n)
          ORDER BY s.n
          ON CONFLICT (run_id, node_id, visit) DO NOTHING),`

      const recordSteps = (companyId: CompanyId, runId: string, steps: ReadonlyArray<NewStep>, status: RunStatus, state: unknown, resumeAt: Date | null) =>
        sql`
          WITH ${stepRows(companyId, steps)} run AS (
            UPDATE automation_runs SET status = ${status}, state = ${json(state)}::jsonb, resume_at = ${resumeAt}
            WHERE company_id = ${companyId} AND id = ${runId})
          SELECT 1`.pipe(Effect.asVoid, Effect.orDie)

      const finishRuns = (companyId: CompanyId, ends: ReadonlyArray<RunEnd>, steps: ReadonlyArray<NewStep>) =>
        sql`${stepRows(companyId, steps)} finished AS (
          UPDATE automation_runs r SET status = e.status, error = e.error, finished_at = e.at, resume_at = NULL,
            state = CASE WHEN e.keep THEN r.state ELSE e.state END
          FROM ROWS FROM (jsonb_to_recordset(${json(ends.map((end) => ({
            run_id: end.runId,
            status: end.status,
            error: end.error,
            at: end.at.toISOString(),
            keep: end.state === null,
            state: end.state
          })))}::jsonb) AS (run_id uuid, status text, error text, at timestamptz, keep boolean, state jsonb)) AS e
          WHERE r.company_id = ${companyId} AND r.id = e.run_id)`

      return AutomationsRepo.of({
        list, find, insert, update, delete: remove, insertVersion, latestVersion, versions, published, runs, run,
        admitRuns, admitted, loadRun, graph, step, saveState, recordSteps, finishRuns
      })
    })
  )
}

/**
 * The trigger consumer's cursors over the event log. The consumer reads every company's events, so
 * these statements run across companies, each row naming its own.
 */
export class TriggerCursorsRepo extends Context.Service<TriggerCursorsRepo, {
  /** Companies with events after their cursor: what a runner that starts replays, up to `head`. */
  readonly behind: Effect.Effect<ReadonlyArray<{ readonly companyId: number; readonly cursor: number; readonly head: number }>>
  /** Moves cursors forward (never back); a company without a cursor row has nothing to keep. */
  advance(cursors: ReadonlyArray<{ readonly companyId: number; readonly seq: number }>): Effect.Effect<void>
}>()("crm/automations/TriggerCursorsRepo") {
  static readonly layer = Layer.effect(
    TriggerCursorsRepo,
    Effect.gen(function*() {
      const sql = yield* SqlClient.SqlClient
      const behind = sql<{ company_id: number; cursor_seq: number; event_seq: number }>`
        SELECT t.company_id, t.cursor_seq, c.event_seq FROM automation_trigger_cursors t JOIN companies c ON c.id = t.company_id
        WHERE c.event_seq > t.cursor_seq`.pipe(
        Effect.map((rows) => rows.map((r) => ({ companyId: Number(r.company_id), cursor: Number(r.cursor_seq), head: Number(r.event_seq) }))),
        Effect.orDie
      )
      const advance = (cursors: ReadonlyArray<{ readonly companyId: number; readonly seq: number }>) =>
        cursors.length === 0 ? Effect.void : sql`
          UPDATE automation_trigger_cursors t SET cursor_seq = v.seq, updated_at = now()
          FROM jsonb_to_recordset(${JSON.stringify(cursors.map((c) => ({ company_id: c.companyId, seq: c.seq })))}::jsonb)
            AS v(company_id bigint, seq bigint)
          WHERE t.company_id = v.company_id AND t.cursor_seq < v.seq`.pipe(Effect.asVoid, Effect.orDie)
      return TriggerCursorsRepo.of({ behind, advance })
    })
  )
}
