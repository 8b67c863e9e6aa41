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

/** What a bucket's owner answers a runner asking for a slice of its budget. */
export interface LeaseGrant {
  /** Units the runner may spend until its hold ends; 0 is a refusal. */
  readonly granted: number
  /** Budget left in the window once this slice (and every other outstanding one) counts as used. */
  readonly remaining: number
  readonly retryAfterMs: number
  /** Names the slice when its unspent units are handed back. */
  readonly lease: number
}

interface Slice {
  readonly id: number
  readonly leasedAt: number
  /** When the slice's last unit may have been spent: the hits count in the window until `at + windowMs`. */
  at: number
  count: number
}

/**
 * A sliding-window log whose hits are handed out in slices: a slice leased at `now` for `holdMs`
 * counts as `count` hits at `now + holdMs` (the latest moment one of them can be spent), so the
 * limit holds in any window however the holders spend their slices. Unspent units handed back
 * stop counting, and a holder that says how soon it spent the last unit moves the slice back to then.
 */
export class LeasedLog {
  private slices: Array<Slice> = []
  private head = 0
  private used = 0
  private next = 0
  private pausedUntil = 0

  /** No slice is granted before `until` (a provider's throttle answer backs the whole bucket off). */
  pause(until: number) {
    this.pausedUntil = Math.max(this.pausedUntil, until)
  }

  private prune(now: number, windowMs: number) {
    const from = now - windowMs
    while (this.head < this.slices.length && this.slices[this.head].at <= from) {
      this.used -= this.slices[this.head].count
      this.head++
    }
    if (this.head > 256 && this.head * 2 > this.slices.length) {
      this.slices = this.slices.slice(this.head)
      this.head = 0
    }
  }

  /** A slice of at most `want` units, smaller as the free budget shrinks (an eighth of it, at least one). */
  lease(now: number, limit: number, windowMs: number, holdMs: number, want: number): LeaseGrant {
    this.prune(now, windowMs)
    if (now < this.pausedUntil) return { granted: 0, remaining: 0, retryAfterMs: this.pausedUntil - now, lease: 0 }
    const free = limit - this.used
    if (free <= 0) {
      // The window frees a unit when enough of the oldest slices have left it.
      let excess = this.used - limit + 1
      let retryAfterMs = windowMs
      for (let i = this.head; i < this.slices.length; i++) {
        excess -= this.slices[i].count
        if (excess <= 0) {
          retryAfterMs = this.slices[i].at + windowMs - now
          break
        }
      }
      return { granted: 0, remaining: 0, retryAfterMs: Math.max(1, retryAfterMs), lease: 0 }
    }
    const granted = Math.max(1, Math.min(want, Math.floor(free / 8)))
    const id = ++this.next
    this.slices.push({ id, leasedAt: now, at: now + holdMs, count: granted })
    this.used += granted
    return { granted, remaining: free - granted, retryAfterMs: 0, lease: id }
  }

  /**
   * Settles slice `lease`: `units` unspent units come back, and the spent ones were all spent within
   * `spentWithinMs` of the lease (measured by the holder from before it asked, so never later than here).
   */
  release(lease: number, units: number, spentWithinMs: number) {
    for (let i = this.slices.length - 1; i >= this.head; i--) {
      const slice = this.slices[i]
      if (slice.id !== lease) continue
      const back = Math.max(0, Math.min(units, slice.count))
      slice.count -= back
      this.used -= back
      slice.at = Math.min(slice.at, slice.leasedAt + Math.max(0, spentWithinMs))
      return
    }
  }

  idleSince(now: number, windowMs: number): boolean {
    return now >= this.pausedUntil &&
      (this.slices.length === this.head || this.slices[this.slices.length - 1].at <= now - windowMs)
  }
}

/** A set of leased logs keyed by bucket, pruning idle buckets as it goes. */
export class LeasedLogs {
  private readonly logs = new Map<string, LeasedLog>()
  private sweepAt = 0

  lease(bucket: string, now: number, limit: number, windowMs: number, holdMs: number, want: number): LeaseGrant {
    let log = this.logs.get(bucket)
    if (log === undefined) {
      log = new LeasedLog()
      this.logs.set(bucket, log)
    }
    const grant = log.lease(now, limit, windowMs, holdMs, want)
    if (now >= this.sweepAt) {
      this.sweepAt = now + 60_000
      for (const [key, value] of this.logs) if (value.idleSince(now, 86_400_000)) this.logs.delete(key)
    }
    return grant
  }

  release(bucket: string, lease: number, units: number, spentWithinMs: number) {
    this.logs.get(bucket)?.release(lease, units, spentWithinMs)
  }

  pause(bucket: string, until: number) {
    let log = this.logs.get(bucket)
    if (log === undefined) {
      log = new LeasedLog()
      this.logs.set(bucket, log)
    }
    log.pause(until)
  }
}
