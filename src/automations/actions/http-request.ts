import { Effect } from "effect"
import { HttpData } from "../Actions.ts"
import { defineAction, doneWith, permanent, transient } from "./Action.ts"

const httpBodyLimit = 4096

/** A JSON body is kept parsed, any other as text. */
const bodyOf = (body: string | undefined): unknown => {
  if (typeof body !== "string" || body === "") return body ?? null
  try {
    return JSON.parse(body)
  } catch {
    return body
  }
}

export const httpRequest = defineAction({
  ids: ["http-request"],
  data: HttpData,
  run: Effect.fnUntraced(function*(data, input, services) {
    const { run } = input
    const response = yield* services.http.request({
      url: data.url,
      method: data.method ?? "POST",
      headers: { "content-type": "application/json", "user-agent": "crm-automations/1", ...data.headers },
      ...(data.body !== undefined ? { body: data.body } : data.method === "GET" ? {} : { body: JSON.stringify({ automation_id: run.automation_id, run_id: run.id, trigger: run.context.payload }) }),
      timeoutMs: (data.timeout_seconds ?? 10) * 1000,
      allowPrivate: services.config.webhookAllowPrivate,
      keepBodyBytes: httpBodyLimit
    }).pipe(Effect.mapError((e) => (e.reason === "timeout" || e.reason === "connection" ? transient(e.message) : permanent(e.message))))
    if (response.status >= 500) return yield* transient(`The server answered HTTP ${response.status}.`)
    if (response.status >= 400) return yield* permanent(`The server answered HTTP ${response.status}.`)
    return doneWith({ status: response.status, body: bodyOf(response.body), duration_ms: response.durationMs })
  })
})
