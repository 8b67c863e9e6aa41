import { Context, Metric } from "effect"

/**
 * The process's metrics, in Effect's metric registry (the one `PrometheusMetrics.format` reads). Hot
 * paths update through prebuilt series (one per label set, made once and kept), so a request costs a
 * map lookup and two updates, with no allocation of attributes per call.
 */
const registry = Context.empty()

const latencyBoundaries = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30]

const requestsTotal = Metric.counter("http_requests_total", { description: "HTTP requests answered, by route template and status", incremental: true })
const requestSeconds = Metric.histogram("http_request_duration_seconds", { description: "Time from a request's arrival to its answer, by route template", boundaries: latencyBoundaries })
const sendsTotal = Metric.counter("messages_sent_total", { description: "Provider sends by channel type and outcome (sent, delivered, failed …)", incremental: true })

interface RequestSeries {
  readonly count: Metric.Metric<number, unknown>
  readonly seconds: Metric.Metric<number, unknown>
}

const requestSeries = new Map<string, RequestSeries>()
const sendSeries = new Map<string, Metric.Metric<number, unknown>>()

/** One answered request: `route` is the template (`/v1/contacts/{id}`), never the raw path. */
export const observeRequest = (method: string, route: string, status: number, seconds: number) => {
  const key = `${method} ${route} ${status}`
  let series = requestSeries.get(key)
  if (series === undefined) {
    const attributes = { method, route, status: String(status) }
    series = { count: Metric.withAttributes(requestsTotal, attributes), seconds: Metric.withAttributes(requestSeconds, { method, route }) }
    requestSeries.set(key, series)
  }
  series.count.updateUnsafe(1, registry)
  series.seconds.updateUnsafe(seconds, registry)
}

/** One provider send with its recorded outcome. */
export const countSend = (channel: string, outcome: string) => {
  const key = `${channel} ${outcome}`
  let series = sendSeries.get(key)
  if (series === undefined) {
    series = Metric.withAttributes(sendsTotal, { channel, outcome })
    sendSeries.set(key, series)
  }
  series.updateUnsafe(1, registry)
}

/** A gauge set at scrape time, one series per label set. */
export const scrapedGauge = (name: string, description: string) => {
  const gauge = Metric.gauge(name, { description })
  const series = new Map<string, Metric.Metric<number, unknown>>()
  return (value: number, attributes: Record<string, string> = {}) => {
    const key = JSON.stringify(attributes)
    let one = series.get(key)
    if (one === undefined) {
      one = Metric.withAttributes(gauge, attributes)
      series.set(key, one)
    }
    one.updateUnsafe(value, registry)
  }
}
