import { mkdirSync, writeFileSync } from "node:fs"
import { join, relative } from "node:path"
import { root } from "./Processes.ts"
import { machine } from "./Report.ts"

/** A point of a chart: `[x, y]`, with an optional label written beside its marker. */
export type Point = readonly [number, number] | readonly [number, number, string]

export interface ChartSpec {
  readonly title: string
  readonly x: string
  readonly y: string
  readonly logX?: boolean
  readonly logY?: boolean
  /** Markers only: the points of a series are not joined (figures of unrelated targets). */
  readonly scatter?: boolean
}

interface Run {
  readonly date: string
  readonly series: Array<{ readonly name: string; readonly points: Array<Point> }>
  readonly figures: Array<unknown>
}

const runs = new Map<string, Run>()

/**
 * Records figures of this bench run and rewrites `bench/results/<bench>.json` (the date, the machine line with
 * its reference loop, the command, every series and figure so far) and `bench/results/<bench>.svg` (the chart).
 * A bench calls it once per mode or target as it finishes them, so a run that stops half-way keeps what it
 * measured. Points given under a series name already recorded extend that series (a bench may record rate by
 * rate); a new run starts afresh.
 */
export const recordResults = (
  bench: string,
  chart: ChartSpec,
  series: Readonly<Record<string, ReadonlyArray<Point>>>,
  figures?: unknown
) => {
  const run = runs.get(bench) ?? { date: new Date().toISOString(), series: [], figures: [] }
  runs.set(bench, run)
  for (const [name, points] of Object.entries(series)) {
    const known = run.series.find((s) => s.name === name)
    if (known === undefined) run.series.push({ name, points: [...points] })
    else known.points.push(...points)
  }
  if (figures !== undefined) run.figures.push(figures)
  const command = ["npx tsx", relative(root, process.argv[1] ?? ""), ...process.argv.slice(2)].join(" ")
  const env = Object.fromEntries(Object.entries(process.env).filter(([k]) => /^(BENCH_|REALTIME_|SOAK_|CHAOS_|SOCKETS$|EVENTS$)/.test(k)))
  const dir = join(root, "bench", "results")
  mkdirSync(dir, { recursive: true })
  const doc = { bench, date: run.date, machine: machine(), node: process.version, command, env, chart: { ...chart, series: run.series }, figures: run.figures }
  writeFileSync(join(dir, `${bench}.json`), `${JSON.stringify(doc, jsonReplacer, 2)}\n`)
  writeFileSync(join(dir, `${bench}.svg`), svgChart(chart, run.series, `${run.date.slice(0, 10)} · ${machine()}`))
}

/** Maps become objects, non-finite numbers null: JSON of what a bench keeps in memory. */
const jsonReplacer = (_key: string, value: unknown) =>
  value instanceof Map ? Object.fromEntries(value) : typeof value === "number" && !Number.isFinite(value) ? null : value

// ---------------------------------------------------------------- the chart

const W = 760
const H = 440
const M = { left: 70, right: 180, top: 48, bottom: 70 }
const COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#ff7f0e", "#9467bd", "#8c564b", "#e377c2", "#17becf"]

interface Axis {
  readonly toPx: (v: number) => number
  readonly ticks: ReadonlyArray<number>
}

const escape = (s: string) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;")

const tickLabel = (v: number) =>
  Math.abs(v) >= 10_000 ? `${(v / 1000).toFixed(0)}k` : Math.abs(v) >= 100 || Number.isInteger(v) ? v.toFixed(0) : v.toPrecision(2)

const linearTicks = (lo: number, hi: number) => {
  const step0 = (hi - lo) / 5 || 1
  const mag = 10 ** Math.floor(Math.log10(step0))
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => s >= step0) ?? 10 * mag
  const ticks: Array<number> = []
  for (let t = Math.ceil(lo / step) * step; t <= hi + step / 1e6; t += step) ticks.push(Number(t.toPrecision(12)))
  return ticks
}

const logTicks = (lo: number, hi: number) => {
  const ticks: Array<number> = []
  for (let e = Math.floor(Math.log10(lo)); e <= Math.ceil(Math.log10(hi)); e++) {
    for (const m of hi / lo > 1000 ? [1] : [1, 2, 5]) {
      const t = m * 10 ** e
      if (t >= lo && t <= hi) ticks.push(t)
    }
  }
  return ticks
}

/** An axis over `values` mapped onto `[from, to]` pixels; log axes drop values ≤ 0. */
const axis = (values: ReadonlyArray<number>, log: boolean, from: number, to: number): Axis => {
  const usable = values.filter((v) => Number.isFinite(v) && (!log || v > 0))
  let lo = usable.length === 0 ? (log ? 1 : 0) : Math.min(...usable)
  let hi = usable.length === 0 ? 10 : Math.max(...usable)
  if (!log) lo = Math.min(0, lo)
  if (hi === lo) hi = log ? lo * 10 : lo + 1
  if (log) {
    lo = 10 ** Math.floor(Math.log10(lo))
    hi = 10 ** Math.ceil(Math.log10(hi))
  }
  const f = log ? Math.log10 : (v: number) => v
  const toPx = (v: number) => from + ((f(v) - f(lo)) / (f(hi) - f(lo))) * (to - from)
  return { toPx, ticks: log ? logTicks(lo, hi) : linearTicks(lo, hi) }
}

const axesSvg = (chart: ChartSpec, xs: Axis, ys: Axis) => {
  const out: Array<string> = []
  const [x0, x1, y0, y1] = [M.left, W - M.right, H - M.bottom, M.top]
  for (const t of ys.ticks) {
    const y = ys.toPx(t).toFixed(1)
    out.push(`<line x1="${x0}" x2="${x1}" y1="${y}" y2="${y}" stroke="#e5e5e5"/>`)
    out.push(`<text x="${x0 - 6}" y="${y}" text-anchor="end" dominant-baseline="middle">${tickLabel(t)}</text>`)
  }
  for (const t of xs.ticks) {
    const x = xs.toPx(t).toFixed(1)
    out.push(`<line x1="${x}" x2="${x}" y1="${y0}" y2="${y1}" stroke="#f0f0f0"/>`)
    out.push(`<text x="${x}" y="${y0 + 16}" text-anchor="middle">${tickLabel(t)}</text>`)
  }
  out.push(`<rect x="${x0}" y="${y1}" width="${x1 - x0}" height="${y0 - y1}" fill="none" stroke="#888"/>`)
  out.push(`<text x="${(x0 + x1) / 2}" y="${y0 + 38}" text-anchor="middle">${escape(chart.x)}${chart.logX ? " (log)" : ""}</text>`)
  out.push(`<text transform="translate(16 ${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle">${escape(chart.y)}${chart.logY ? " (log)" : ""}</text>`)
  return out
}

const seriesSvg = (chart: ChartSpec, xs: Axis, ys: Axis, points: ReadonlyArray<Point>, color: string) => {
  const visible = points.filter(([x, y]) => Number.isFinite(x) && Number.isFinite(y) && (!chart.logX || x > 0) && (!chart.logY || y > 0))
  const px = visible.map((p) => [xs.toPx(p[0]), ys.toPx(p[1]), p[2]] as const)
  const out: Array<string> = []
  if (!chart.scatter && px.length > 1) {
    out.push(`<polyline fill="none" stroke="${color}" stroke-width="2" points="${px.map(([x, y]) => `${x.toFixed(1)},${y.toFixed(1)}`).join(" ")}"/>`)
  }
  if (px.length <= 200) {
    for (const [x, y, label] of px) {
      out.push(`<circle cx="${x.toFixed(1)}" cy="${y.toFixed(1)}" r="3.5" fill="${color}"/>`)
      if (label !== undefined) out.push(`<text x="${(x + 6).toFixed(1)}" y="${(y - 6).toFixed(1)}" fill="${color}">${escape(label)}</text>`)
    }
  }
  return out
}

/** A line (or scatter) chart of the series, with a legend on the right and the run's date and machine below. */
export const svgChart = (chart: ChartSpec, series: ReadonlyArray<{ readonly name: string; readonly points: ReadonlyArray<Point> }>, footer: string) => {
  const all = series.flatMap((s) => s.points)
  const xs = axis(all.map((p) => p[0]), chart.logX === true, M.left, W - M.right)
  const ys = axis(all.map((p) => p[1]), chart.logY === true, H - M.bottom, M.top)
  const body = [...axesSvg(chart, xs, ys)]
  series.forEach((s, i) => {
    const color = COLORS[i % COLORS.length]
    body.push(...seriesSvg(chart, xs, ys, s.points, color))
    const ly = M.top + 8 + i * 20
    body.push(`<rect x="${W - M.right + 14}" y="${ly - 6}" width="12" height="12" fill="${color}"/>`)
    body.push(`<text x="${W - M.right + 32}" y="${ly}" dominant-baseline="middle">${escape(s.name)}</text>`)
  })
  return [
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
    `<rect width="100%" height="100%" fill="#fff"/>`,
    `<text x="${M.left}" y="24" font-size="15" font-weight="bold">${escape(chart.title)}</text>`,
    ...body,
    `<text x="${M.left}" y="${H - 12}" font-size="10" fill="#666">${escape(footer)}</text>`,
    `</svg>`,
    ""
  ].join("\n")
}
