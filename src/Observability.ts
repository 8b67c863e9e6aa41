import { Config, Effect, Layer, Option } from "effect"
import { FetchHttpClient } from "effect/http"
import { OtlpSerialization, OtlpTracer, PrometheusMetrics } from "effect/observability"
import { SqlClient } from "effect/sql"
import { createServer } from "node:http"
import { AppConfig } from "./platform/Config.ts"
import { scrapedGauge } from "./platform/Metrics.ts"
import { RealtimeGateway } from "./realtime/Gateway.ts"

/**
 * `/metrics` in Prometheus text on a port of its own (METRICS_PORT, default 9464, 0: none), not on the
 * API port: it needs no key because it is meant for a scraper on a private network, and the API port
 * never shows it. Queue depths and ages are read from PostgreSQL at scrape time, so every runner
 * reports the cluster's figures; request, send and socket figures are this process's own.
 */
// Config.Port refuses 0, which here means "no metrics server".
const metricsPort = Config.Int("METRICS_PORT").pipe(Config.withDefault(9464))

const jobsPending = scrapedGauge("jobs_pending", "Jobs queued or running, by kind and status (cluster-wide)")
const jobsAge = scrapedGauge("jobs_oldest_age_seconds", "Age of the oldest due job, by kind and status (cluster-wide)")
const outboxPending = scrapedGauge("webhook_outbox_pending", "Webhook deliveries waiting for an attempt (cluster-wide)")
const outboxAge = scrapedGauge("webhook_outbox_oldest_age_seconds", "Age of the oldest pending webhook delivery (cluster-wide)")
const outboxBehind = scrapedGauge("webhook_events_behind", "Numbered events active webhook integrations have not taken yet (cluster-wide)")
const unnumbered = scrapedGauge("events_unnumbered", "Committed events still waiting for their per-company sequence number (cluster-wide)")
const numberingLag = scrapedGauge("events_numbering_lag_seconds", "Age of the oldest event without a sequence number (cluster-wide)")
const recipients = scrapedGauge("broadcast_recipients", "Recipients of processing or paused broadcast runs, by status (cluster-wide)")
const dbConnections = scrapedGauge("db_connections", "The app's PostgreSQL connections by state, every runner together (server mode)")
const dbPoolMax = scrapedGauge("db_pool_max_connections", "Connections this process's pool may open")
const sockets = scrapedGauge("realtime_sockets", "WebSocket connections open on this process's gateway")

const recipientStatuses = ["pending", "sending", "sent", "failed", "skipped"]

interface Row {
  readonly label?: string
  readonly status?: string
  readonly n: number
  readonly age: number | null
}

/** Reads the cluster's queues and this process's sockets into the gauges. */
const collect = Effect.fnUntraced(function*(server: boolean) {
  const sql = yield* SqlClient.SqlClient
  const gateway = yield* RealtimeGateway
  const age = (column: string) => sql.literal(`COALESCE(GREATEST(0, extract(epoch FROM now() - min(${column}))), 0)::float8`)
  const [jobs, outbox, behind, events, byStatus, connections] = yield* Effect.all([
    sql<Row>`SELECT kind AS label, status, count(*)::int AS n, ${age("run_after")} AS age FROM jobs WHERE status IN ('queued', 'running') GROUP BY kind, status`,
    sql<Row>`SELECT count(*)::int AS n, ${age("created_at")} AS age FROM webhook_deliveries WHERE state = 'pending'`,
    sql<Row>`SELECT COALESCE(sum(GREATEST(0, c.event_seq - w.cursor_seq)), 0)::float8 AS n, NULL AS age
      FROM webhook_cursors w JOIN integrations i ON i.id = w.integration_id JOIN companies c ON c.id = i.company_id WHERE i.status = 'active'`,
    sql<Row>`SELECT count(*)::int AS n, ${age("created_at")} AS age FROM events WHERE seq IS NULL`,
    sql<Row>`SELECT r.status, count(*)::int AS n, NULL AS age FROM broadcast_runs b JOIN broadcast_recipients r ON r.run_id = b.id
      WHERE b.status IN ('processing', 'paused') GROUP BY r.status`,
    server
      ? sql<Row>`SELECT COALESCE(state, 'unknown') AS status, count(*)::int AS n, NULL AS age FROM pg_stat_activity WHERE application_name = 'crm' GROUP BY 1`
      : Effect.succeed<ReadonlyArray<Row>>([])
  ], { concurrency: "unbounded" })
  for (const job of jobs) {
    jobsPending(job.n, { kind: job.label!, status: job.status! })
    jobsAge(job.age ?? 0, { kind: job.label!, status: job.status! })
  }
  outboxPending(outbox[0].n)
  outboxAge(outbox[0].age ?? 0)
  outboxBehind(behind[0].n)
  unnumbered(events[0].n)
  numberingLag(events[0].age ?? 0)
  for (const status of recipientStatuses) recipients(byStatus.find((r) => r.status === status)?.n ?? 0, { status })
  for (const c of connections) dbConnections(c.n, { state: c.status! })
  dbPoolMax(server ? 10 : 1)
  sockets(yield* gateway.connections)
})

/** The metrics port; gauges that no longer have rows (a kind drained) keep reading their last value until set again. */
export const MetricsLayer = Layer.effectDiscard(Effect.gen(function*() {
  const port = yield* metricsPort.pipe(Effect.orDie)
  if (port === 0) return
  const config = yield* AppConfig
  const context = yield* Effect.context<SqlClient.SqlClient | RealtimeGateway>()
  const scrape = collect(Option.isSome(config.databaseUrl)).pipe(
    Effect.catchCause((cause) => Effect.logWarning("metrics: the database figures could not be read", cause)),
    Effect.andThen(PrometheusMetrics.format()),
    Effect.provide(context)
  )
  const server = createServer((req, res) => {
    if (req.method !== "GET" || (req.url ?? "").split("?", 1)[0] !== "/metrics") {
      res.writeHead(404).end()
      return
    }
    Effect.runPromise(scrape).then(
      (text) => res.writeHead(200, { "content-type": "text/plain; version=0.0.4; charset=utf-8" }).end(text),
      () => res.writeHead(500).end()
    )
  })
  yield* Effect.acquireRelease(
    Effect.callback<void, Error>((resume) => {
      server.once("error", (error) => resume(Effect.fail(error)))
      server.listen(port, config.host, () => resume(Effect.void))
    }),
    () => Effect.callback<void>((resume) => void server.close(() => resume(Effect.void)))
  ).pipe(Effect.orDie)
  server.unref()
  const address = server.address()
  yield* Effect.logInfo("metrics listening").pipe(Effect.annotateLogs({ port: typeof address === "object" && address !== null ? address.port : port, path: "/metrics" }))
}))

/**
 * Traces through Effect's tracer, exported over OTLP/HTTP (JSON) when OTEL_EXPORTER_OTLP_TRACES_ENDPOINT
 * (a full URL) or OTEL_EXPORTER_OTLP_ENDPOINT (a base, `/v1/traces` appended) is set; none otherwise.
 */
export const TracingLayer = Layer.unwrap(Effect.gen(function*() {
  const traces = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")).pipe(Effect.orDie)
  const base = yield* Config.option(Config.String("OTEL_EXPORTER_OTLP_ENDPOINT")).pipe(Effect.orDie)
  const serviceName = yield* Config.String("OTEL_SERVICE_NAME").pipe(Config.withDefault("crm"), Effect.orDie)
  const url = Option.orElse(traces, () => Option.map(base, (b) => `${b.replace(/\/$/, "")}/v1/traces`))
  if (Option.isNone(url)) return Layer.empty
  yield* Effect.logInfo("tracing: exporting spans over OTLP").pipe(Effect.annotateLogs({ url: url.value, service: serviceName }))
  return OtlpTracer.layer({ url: url.value, resource: { serviceName }, exportInterval: "1 second" }).pipe(
    Layer.provide(OtlpSerialization.layerJson),
    Layer.provide(FetchHttpClient.layer)
  )
}))
