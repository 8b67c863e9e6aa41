/**
 * Exact sliding-window log: at most `limit` hits are allowed in ANY window of
 * `windowMs` (a fixed window would allow 2× at a boundary). Memory grows only
 * with the hits actually inside the window.
 */
export interface Decision {
  readonly allowed: boolean
  readonly remaining: number
  readonly retryAfterMs: number
}

export class SlidingLog {
  private hits: Array<number> = []
  private head = 0

  consume(now: number, limit: number, windowMs: number): Decision {
    const from = now - windowMs
    while (this.head < this.hits.length && this.hits[this.head] <= from) this.head++
    if (this.head > 1024 && this.head * 2 > this.hits.length) {
      this.hits = this.hits.slice(this.head)
      this.head = 0
    }
    const inWindow = this.hits.length - this.head
    if (inWindow >= limit) {
      const oldest = this.hits[this.hits.length - limit]
      return { allowed: false, remaining: 0, retryAfterMs: Math.max(1, oldest + windowMs - now) }
    }
    this.hits.push(now)
    return { allowed: true, remaining: limit - inWindow - 1, retryAfterMs: 0 }
  }

  idleSince(now: number, windowMs: number): boolean {
    return this.hits.length === 0 || this.hits[this.hits.length - 1] <= now - windowMs
  }
}

/** A set of logs keyed by bucket, pruning idle buckets as it goes. */
export class SlidingLogs {
  private readonly logs = new Map<string, SlidingLog>()
  private sweepAt = 0

  consume(bucket: string, now: number, limit: number, windowMs: number): Decision {
    let log = this.logs.get(bucket)
    if (log === undefined) {
      log = new SlidingLog()
      this.logs.set(bucket, log)
    }
    const decision = log.consume(now, limit, windowMs)
    if (now >= this.sweepAt) {
      this.sweepAt = now + 60_000
      for (const [key, value] of this.logs) if (value.idleSince(now, 86_400_000)) this.logs.delete(key)
    }
    return decision
  }
}
