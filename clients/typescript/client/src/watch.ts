// Watch with resumption: a stream that breaks, ends, or stays silent longer
// than the server's progress messages allow is opened again on the next
// endpoint from the seq after the last event delivered, so the caller sees
// every event once, in order, across nodes.

import * as c from './codec.js'
import { serverStream } from './connect.js'
import { SessionStoreError } from './errors.js'
import type { Client } from './client.js'
import type * as t from './types.js'

export interface WatchOptions {
  signal?: AbortSignal
  /**
   * A stream silent for this long is taken as dead and resumed elsewhere
   * (default 65 s; the server sends a progress message at least every 30 s).
   */
  idleTimeoutMs?: number
  /** Consecutive failed openings before the watch gives up (default 20). */
  maxAttempts?: number
  /** Called on each resumption, with the error that caused it. */
  onResume?: (err: SessionStoreError, nextSeq: number) => void
}

/** One message of a watch, with the seq of its first event. */
export interface WatchBatch extends t.WatchResponse {
  /** The seq of events[0] (for a progress message: the next seq expected). */
  fromSeq: number
  /** The endpoint that served it. */
  endpoint: string
}

export class Watch implements AsyncIterable<WatchBatch> {
  /** The seq of the next event to be delivered. */
  nextSeq: number
  /** How many times the stream was opened again. */
  resumes = 0
  private readonly ac = new AbortController()

  constructor(private readonly client: Client, private readonly req: t.WatchRequest, private readonly opts: WatchOptions = {}) {
    this.nextSeq = req.fromSeq ?? 0
    const outer = opts.signal
    if (outer !== undefined) {
      if (outer.aborted) this.ac.abort(outer.reason)
      else outer.addEventListener('abort', () => this.ac.abort(outer.reason), { once: true })
    }
  }

  /** Ends the watch; the iteration finishes. */
  close(): void {
    this.ac.abort(new Error('watch closed'))
  }

  async * [Symbol.asyncIterator](): AsyncGenerator<WatchBatch> {
    const idleMs = this.opts.idleTimeoutMs ?? 65_000
    const maxAttempts = this.opts.maxAttempts ?? 20
    const closedByCaller = (): boolean => this.ac.signal.aborted
    let failures = 0
    for (;;) {
      if (closedByCaller()) return
      const endpoint = this.client.endpoint
      const a = this.client.attemptOptions(endpoint, this.ac.signal, 0)
      // attemptOptions' signal follows this.ac; the idle timer needs its own
      // way to end just this attempt.
      const local = new AbortController()
      a.o.signal.addEventListener('abort', () => local.abort(a.o.signal.reason), { once: true })
      let idle = false
      let timer: NodeTimer | undefined
      const arm = (): void => {
        clearTimeout(timer)
        timer = setTimeout(() => { idle = true; local.abort(new Error('watch idle')) }, idleMs)
      }
      const body = c.encodeRequest({ sessionId: this.req.sessionId, fromSeq: this.nextSeq })
      let err: SessionStoreError
      try {
        arm()
        for await (const m of serverStream(endpoint, '/sessionstore.v1.SessionPersistence/Watch', body, { ...a.o, signal: local.signal })) {
          arm()
          failures = 0
          const w = c.watchResponse(m)
          const batch: WatchBatch = { ...w, fromSeq: this.nextSeq, endpoint }
          this.nextSeq += w.events.length
          yield batch
        }
        err = new SessionStoreError('unavailable', 'watch stream ended', { endpoint })
      } catch (e: unknown) {
        if (closedByCaller()) return
        if (e instanceof SessionStoreError) err = e
        else if (idle) err = new SessionStoreError('deadline_exceeded', `watch on ${endpoint} silent for ${idleMs} ms`, { endpoint, cause: e })
        else err = new SessionStoreError('unavailable', `${endpoint}: ${e instanceof Error ? e.message : String(e)}`, { endpoint, cause: e })
      } finally {
        clearTimeout(timer)
        a.done()
      }
      const resumable = err.reason === undefined
        ? err.code === 'unavailable' || err.code === 'deadline_exceeded'
        : err.reason === 'NO_LEADER' || err.reason === 'SHUTTING_DOWN' || err.reason === 'OUTCOME_UNKNOWN'
      failures++
      if (!resumable || failures >= maxAttempts) throw err
      this.client.rotate(endpoint)
      this.resumes++
      this.opts.onResume?.(err, this.nextSeq)
      await new Promise<void>(resolve => { setTimeout(resolve, this.client.backoff(failures - 1)) })
    }
  }
}
