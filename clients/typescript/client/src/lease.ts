// A lease keeper: holds a lease taken with Prepare by renewing it with
// KeepAlive, and reports when it is lost (docs/design.md#ownership-leases-fencing-crash-repair).

import type { Client } from './client.js'
import { SessionStoreError } from './errors.js'
import type { Lease } from './types.js'

export interface LeaseKeeperOptions {
  /** The ttl the lease was granted with (renewals happen every ttl/3). */
  ttlMs: number
  /**
   * Called once when the lease is lost: LEASE_FENCED (another owner took the
   * session, or it was repaired and re-epoched) or NOT_FOUND (deleted).
   * Transient failures are retried until then; an expired but not superseded
   * lease can still be renewed, so expiry alone is not a loss.
   */
  onLost?: (err: SessionStoreError) => void
  /** Called after each failed renewal that will be retried. */
  onRenewError?: (err: unknown) => void
}

export class LeaseKeeper {
  private current: Lease
  private timer: NodeTimer | undefined
  private stopped = false
  private lostError: SessionStoreError | undefined
  private readonly ac = new AbortController()
  private renewing: Promise<void> | undefined

  constructor(private readonly client: Client, lease: Lease, private readonly opts: LeaseKeeperOptions) {
    if (!(opts.ttlMs >= 100)) throw new TypeError('LeaseKeeper ttlMs must be at least 100')
    this.current = lease
    this.schedule(opts.ttlMs / 3)
  }

  /** The lease as last granted or renewed. */
  get lease(): Lease { return this.current }
  /** The epoch every write under this lease must carry. */
  get epoch(): number { return this.current.epoch }
  /** The error that ended the lease, if it was lost. */
  get lost(): SessionStoreError | undefined { return this.lostError }

  private schedule(ms: number): void {
    if (this.stopped) return
    this.timer = setTimeout(() => { this.renewing = this.renew() }, ms)
    this.timer.unref()
  }

  private async renew(): Promise<void> {
    try {
      this.current = await this.client.keepAlive({ lease: this.current }, { signal: this.ac.signal })
      this.schedule(this.opts.ttlMs / 3)
    } catch (e: unknown) {
      if (this.stopped) return
      if (e instanceof SessionStoreError && (e.reason === 'LEASE_FENCED' || e.reason === 'NOT_FOUND')) {
        this.lostError = e
        this.stopped = true
        this.opts.onLost?.(e)
        return
      }
      this.opts.onRenewError?.(e)
      this.schedule(Math.min(1000, this.opts.ttlMs / 10))
    }
  }

  /** Stops renewing (the lease runs out at its expiry unless released). */
  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    this.ac.abort(new Error('lease keeper stopped'))
    await this.renewing?.catch(() => { /* reported through onRenewError / onLost */ })
  }

  /** Stops renewing and releases the lease (a fenced lease is not released: it is no longer ours). */
  async release(): Promise<void> {
    await this.stop()
    if (this.lostError !== undefined) return
    await this.client.release({ sessionId: this.current.sessionId, leaseEpoch: this.current.epoch })
  }
}
