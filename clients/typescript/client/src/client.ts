// The client: typed calls of the three services over the Connect protocol,
// with several endpoints, writes sent to the leader, failover and the store's
// retry rules (docs/design.md#retries-and-outcomes).

import * as c from './codec.js'
import type { JsonValue } from './codec.js'
import { serverStream, unary, type CallOptions } from './connect.js'
import { SessionStoreError } from './errors.js'
import type * as t from './types.js'
import { Watch, type WatchOptions } from './watch.js'

const PERSISTENCE = 'sessionstore.v1.SessionPersistence'
const PLAN = 'sessionstore.v1.PlanMode'
const CLUSTER = 'sessionstore.v1.Cluster'

export interface ClientOptions {
  /** Base URLs of the nodes' HTTP ports, e.g. `http://127.0.0.1:7480`. At least one. */
  endpoints: readonly string[]
  /** Sent as `authorization: Bearer <token>` (servers started with --auth-token-file). */
  token?: string
  /** Extra request headers. */
  headers?: Readonly<Record<string, string>>
  /** Time limit of one attempt, told to the server too (default 15 s). */
  attemptTimeoutMs?: number
  /** Attempts per call, the first included (default 10). */
  maxAttempts?: number
  /** First wait between attempts; it doubles up to maxBackoffMs (defaults 50 ms, 2 s). */
  initialBackoffMs?: number
  maxBackoffMs?: number
}

/** Options of one call. */
export interface CallOpts {
  /** Aborting rejects the call with the signal's reason. */
  signal?: AbortSignal
}

/**
 * How a failed attempt may be retried.
 * - mutating: Append (idempotent by content) and every rpc with a request id:
 *   resent with the same bytes, hence the same id, also after OUTCOME_UNKNOWN,
 *   a timeout or a broken connection.
 * - read: changes nothing, so any unavailability is retried.
 * - once: changes the cluster without a request id: retried only after a
 *   definite NO_LEADER or SHUTTING_DOWN.
 */
export type Policy = 'mutating' | 'read' | 'once'

/** Whether err, from an attempt of a call under p, may be sent again. */
export function retryable(p: Policy, err: SessionStoreError): boolean {
  if (err.reason !== undefined) {
    if (err.reason === 'NO_LEADER' || err.reason === 'SHUTTING_DOWN') return true
    if (err.reason === 'OUTCOME_UNKNOWN') return p === 'mutating'
    return false // definite
  }
  if (p === 'once') return false
  return err.code === 'unavailable' || err.code === 'deadline_exceeded'
}

/** Whether another node may serve the call better than the one that failed it. */
function failover(err: SessionStoreError): boolean {
  return err.reason === 'NO_LEADER' || err.reason === 'SHUTTING_DOWN' ||
    (err.reason === undefined && (err.code === 'unavailable' || err.code === 'deadline_exceeded'))
}

/** Response headers of the client hints (docs/api.md#failover). */
const HINT_NODE = 'sessionstore-node'
const HINT_LEADER = 'sessionstore-leader'

/** An endpoint that failed over is not sent writes as the leader's for this long. */
const AVOID_MS = 1_000
/** The health checks that learn which node an endpoint reaches: time limit, and least time between rounds. */
const PROBE_TIMEOUT_MS = 3_000
const PROBE_INTERVAL_MS = 5_000

/** A fresh request id: 128 random bits as 32 hex digits. */
export function newRequestId(): string {
  return crypto.randomUUID().replace(/-/g, '')
}

/** Rejects with the signal's reason when it is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted === true) { reject(signal.reason); return }
    const onAbort = (): void => { clearTimeout(timer); reject(signal?.reason) }
    const timer = setTimeout(() => { signal?.removeEventListener('abort', onAbort); resolve() }, ms)
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** Whether signal is aborted now (a call, so that no earlier check narrows it). */
function isAborted(signal: AbortSignal | undefined): boolean {
  return signal?.aborted === true
}

/** A SessionStoreError for anything an attempt threw. */
function asStoreError(e: unknown, endpoint: string, timedOut: boolean): SessionStoreError {
  if (e instanceof SessionStoreError) return e
  if (timedOut) return new SessionStoreError('deadline_exceeded', `no answer from ${endpoint} in time`, { endpoint, cause: e })
  const msg = e instanceof Error ? e.message : String(e)
  return new SessionStoreError('unavailable', `${endpoint}: ${msg}`, { endpoint, cause: e })
}

export class Client {
  readonly endpoints: readonly string[]
  private current = 0
  // What the answers' hints told: the node each endpoint reaches, the
  // leader's node id ('': not known), and endpoints that failed lately.
  private readonly nodeOf = new Map<string, string>()
  private leader = ''
  private readonly avoidUntil = new Map<string, number>()
  private probing = false
  private lastProbe = -Infinity
  private readonly headers: Record<string, string>
  private readonly attemptTimeoutMs: number
  private readonly maxAttempts: number
  private readonly initialBackoffMs: number
  private readonly maxBackoffMs: number

  constructor(opts: ClientOptions) {
    if (opts.endpoints.length === 0) throw new TypeError('Client needs at least one endpoint')
    this.endpoints = opts.endpoints.map(e => e.replace(/\/+$/, ''))
    this.headers = { ...opts.headers }
    if (opts.token !== undefined) this.headers.authorization = `Bearer ${opts.token}`
    this.attemptTimeoutMs = opts.attemptTimeoutMs ?? 15_000
    this.maxAttempts = Math.max(1, opts.maxAttempts ?? 10)
    this.initialBackoffMs = opts.initialBackoffMs ?? 50
    this.maxBackoffMs = opts.maxBackoffMs ?? 2_000
  }

  /** The endpoint the next call goes to first. */
  get endpoint(): string { return this.endpoints[this.current] }

  /**
   * Moves on to the next endpoint after a failure of `from`, which is no
   * longer sent writes as the leader's for a while.
   */
  rotate(from: string): void {
    if (this.endpoints[this.current] === from) this.current = (this.current + 1) % this.endpoints.length
    this.avoidUntil.set(from, Date.now() + AVOID_MS)
    if (this.leader !== '' && this.nodeOf.get(from) === this.leader) this.leader = ''
  }

  /**
   * Folds in the hints of an answer from endpoint: the node it reaches and
   * the leader that node knows (none: the header is absent).
   */
  observe(endpoint: string, h: Headers): void {
    const node = h.get(HINT_NODE)
    if (node === null || node === '') return // not a node's answer (a proxy's error, an older node)
    this.nodeOf.set(endpoint, node)
    const leader = h.get(HINT_LEADER)
    this.leader = leader === null ? '' : leader.split('=')[0]
  }

  /**
   * The endpoint for the next attempt of a call under p: a write (p
   * mutating) goes to the endpoint of the leader an answer named, so that no
   * follower has to forward it, unless that endpoint failed lately; anything
   * else, and a write while no endpoint is known to reach the leader, goes to
   * the current endpoint. Configured endpoints only: a hinted address may not
   * be reachable from here.
   */
  pick(p: Policy): string {
    if (p === 'mutating' && this.leader !== '') {
      const now = Date.now()
      for (const e of this.endpoints) {
        if (this.nodeOf.get(e) === this.leader && (this.avoidUntil.get(e) ?? 0) <= now) return e
      }
      this.probe()
    }
    return this.endpoint
  }

  /**
   * Learns which node each endpoint not yet known reaches, from the hints of
   * its GET /healthz (open to anyone, as probes are): one round at a time, at
   * most every PROBE_INTERVAL_MS, never awaited by a call.
   */
  private probe(): void {
    const now = Date.now()
    const unknown = this.endpoints.filter(e => !this.nodeOf.has(e))
    if (this.probing || unknown.length === 0 || now - this.lastProbe < PROBE_INTERVAL_MS) return
    this.probing = true
    this.lastProbe = now
    void Promise.allSettled(unknown.map(async e => {
      const res = await fetch(e + '/healthz', { headers: this.headers, signal: AbortSignal.timeout(PROBE_TIMEOUT_MS) })
      this.observe(e, res.headers)
      await res.body?.cancel()
    })).finally(() => { this.probing = false })
  }

  /** The wait after attempt (0-based): doubling, capped, drawn from its upper half. */
  backoff(attempt: number): number {
    const d = Math.min(this.maxBackoffMs, this.initialBackoffMs * 2 ** Math.min(attempt, 30))
    return d / 2 + Math.random() * (d / 2)
  }

  /** Call options for one attempt on endpoint: headers, hints observed, and a signal that also ends at the attempt timeout. */
  attemptOptions(endpoint: string, signal: AbortSignal | undefined, timeoutMs = this.attemptTimeoutMs): { o: CallOptions; timedOut: () => boolean; done: () => void } {
    const ac = new AbortController()
    let timedOut = false
    const timer = timeoutMs > 0 ? setTimeout(() => { timedOut = true; ac.abort(new Error('attempt timed out')) }, timeoutMs) : undefined
    const onAbort = (): void => ac.abort(signal?.reason)
    signal?.addEventListener('abort', onAbort, { once: true })
    return {
      o: { headers: this.headers, signal: ac.signal, timeoutMs, onHeaders: h => this.observe(endpoint, h) },
      timedOut: () => timedOut,
      done: () => { clearTimeout(timer); signal?.removeEventListener('abort', onAbort) },
    }
  }

  /**
   * Runs attempt until it succeeds, fails definitely, or the attempts run out,
   * on the endpoint pick chooses, moving to the next endpoint after an
   * unavailability. The body is encoded once, so every attempt sends the
   * same bytes.
   */
  async run<T>(p: Policy, opts: CallOpts | undefined, attempt: (endpoint: string, o: CallOptions) => Promise<T>): Promise<T> {
    const signal = opts?.signal
    for (let n = 0; ; n++) {
      if (signal?.aborted === true) throw signal.reason
      const endpoint = this.pick(p)
      const a = this.attemptOptions(endpoint, signal)
      try {
        return await attempt(endpoint, a.o)
      } catch (e: unknown) {
        if (isAborted(signal)) throw signal?.reason
        const err = asStoreError(e, endpoint, a.timedOut())
        if (failover(err)) this.rotate(endpoint)
        if (n + 1 >= this.maxAttempts || !retryable(p, err)) throw err
      } finally {
        a.done()
      }
      await sleep(this.backoff(n), signal)
    }
  }

  /** A unary call of service/method with req. */
  unary<T>(service: string, method: string, req: object, p: Policy, decode: (v: JsonValue) => T, opts?: CallOpts): Promise<T> {
    const body = c.encodeRequest(req)
    return this.run(p, opts, async (endpoint, o) => decode(await unary(endpoint, `/${service}/${method}`, body, o)))
  }

  /** A server-streaming call whose messages are all collected (each attempt starts over). */
  collect<T>(service: string, method: string, req: object, p: Policy, decode: (v: JsonValue) => T, opts?: CallOpts): Promise<T[]> {
    const body = c.encodeRequest(req)
    return this.run(p, opts, async (endpoint, o) => {
      const out: T[] = []
      for await (const m of serverStream(endpoint, `/${service}/${method}`, body, o)) out.push(decode(m))
      return out
    })
  }

  // --- SessionPersistence ---

  /** Where the serving node keeps the session's artifact (a hint from the header alone). */
  locate(req: t.LocateRequest, opts?: CallOpts): Promise<t.LocateResponse> {
    return this.unary(PERSISTENCE, 'Locate', req, 'read', c.locateResponse, opts)
  }

  /** Registers a session. A missing requestId gets a fresh one, kept by every retry. */
  create(req: t.CreateRequest, opts?: CallOpts): Promise<t.CreateResponse> {
    return this.unary(PERSISTENCE, 'Create', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', c.createResponse, opts)
  }

  /** Appends a batch; a retry resends the identical batch (answered duplicate = true if applied). */
  append(req: t.AppendRequest, opts?: CallOpts): Promise<t.AppendResponse> {
    return this.unary(PERSISTENCE, 'Append', req, 'mutating', c.appendResponse, opts)
  }

  /** The balanced view, committing a cold session's crash repair; a view too large for one message is streamed. */
  async load(req: t.LoadRequest, opts?: CallOpts): Promise<t.SessionView> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    try {
      return await this.unary(PERSISTENCE, 'Load', r, 'mutating', c.view, opts)
    } catch (e: unknown) {
      if (e instanceof SessionStoreError && e.reason === 'TOO_LARGE') return this.loadStream(r, opts)
      throw e
    }
  }

  /** The view without committing anything; a view too large for one message is streamed. */
  async inspect(req: t.InspectRequest, opts?: CallOpts): Promise<t.SessionView> {
    try {
      return await this.unary(PERSISTENCE, 'Inspect', req, 'read', c.view, opts)
    } catch (e: unknown) {
      if (e instanceof SessionStoreError && e.reason === 'TOO_LARGE') return this.inspectStream(req, opts)
      throw e
    }
  }

  /** Takes ownership: repairs, bumps the epoch, grants a lease. */
  async prepare(req: t.PrepareRequest, opts?: CallOpts): Promise<t.PrepareResponse> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    try {
      return await this.unary(PERSISTENCE, 'Prepare', r, 'mutating', c.prepareResponse, opts)
    } catch (e: unknown) {
      if (e instanceof SessionStoreError && e.reason === 'TOO_LARGE') return this.prepareStream(r, opts)
      throw e
    }
  }

  async loadStream(req: t.LoadRequest, opts?: CallOpts): Promise<t.SessionView> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    return joinView(await this.collect(PERSISTENCE, 'LoadStream', r, 'mutating', c.viewPart, opts)).view
  }

  async inspectStream(req: t.InspectRequest, opts?: CallOpts): Promise<t.SessionView> {
    return joinView(await this.collect(PERSISTENCE, 'InspectStream', req, 'read', c.viewPart, opts)).view
  }

  async prepareStream(req: t.PrepareRequest, opts?: CallOpts): Promise<t.PrepareResponse> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    const { view, lease } = joinView(await this.collect(PERSISTENCE, 'PrepareStream', r, 'mutating', c.viewPart, opts))
    if (lease === undefined) throw new SessionStoreError('internal', 'PrepareStream answered without a lease', { endpoint: this.endpoint })
    return { view, lease }
  }

  /** Extends a lease by its ttl (a fresh request id per call unless given). */
  async keepAlive(req: t.KeepAliveRequest, opts?: CallOpts): Promise<t.Lease> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    return (await this.unary(PERSISTENCE, 'KeepAlive', r, 'mutating', c.keepAliveResponse, opts)).lease
  }

  /** Ends a lease (releasing twice succeeds). */
  async release(req: t.ReleaseRequest, opts?: CallOpts): Promise<void> {
    await this.unary(PERSISTENCE, 'Release', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', () => undefined, opts)
  }

  /** Deletes a session; returns the revision it had. */
  async delete(req: t.DeleteRequest, opts?: CallOpts): Promise<string> {
    const r = { ...req, requestId: req.requestId ?? newRequestId() }
    return (await this.unary(PERSISTENCE, 'Delete', r, 'mutating', c.deleteResponse, opts)).revision
  }

  /** The stored events with seq >= fromSeq (every message of the stream joined). */
  async readFrom(req: t.ReadFromRequest, opts?: CallOpts): Promise<t.ReadFromResult> {
    const parts = await this.collect(PERSISTENCE, 'ReadFrom', req, 'read', c.readFromPart, opts)
    const first = parts[0] ?? { events: [], revision: '', nextSeq: 0 }
    return { header: first.header, revision: first.revision, nextSeq: first.nextSeq, events: parts.flatMap(p => p.events) }
  }

  /** The artifact's text (header line, then one line per stored event), as bytes. */
  async readRaw(req: t.ReadRawRequest, opts?: CallOpts): Promise<t.ReadRawResult> {
    const parts = await this.collect(PERSISTENCE, 'ReadRaw', req, 'read', c.readRawPart, opts)
    const size = parts.reduce((n, p) => n + p.content.length, 0)
    const content = new Uint8Array(size)
    let at = 0
    for (const p of parts) { content.set(p.content, at); at += p.content.length }
    const first = parts[0]
    return { header: first?.header, filename: first?.filename ?? '', revision: first?.revision ?? '', content }
  }

  /**
   * One page of materialised sessions' headers, selected by cwd and id
   * prefix, by id or by last append (req.order; its page tokens are its own).
   */
  list(req: t.ListRequest = {}, opts?: CallOpts): Promise<t.ListResponse> {
    return this.unary(PERSISTENCE, 'List', req, 'read', c.listResponse, opts)
  }

  /** As list, each session with its revision, event count, last append and lease. */
  listSnapshots(req: t.ListRequest = {}, opts?: CallOpts): Promise<t.ListSnapshotsResponse> {
    return this.unary(PERSISTENCE, 'ListSnapshots', req, 'read', c.listSnapshotsResponse, opts)
  }

  /** Every page of List. */
  async listAll(req: t.ListRequest = {}, opts?: CallOpts): Promise<t.SessionHeader[]> {
    const out: t.SessionHeader[] = []
    let pageToken = ''
    do {
      const page = await this.list({ ...req, pageToken }, opts)
      out.push(...page.headers)
      pageToken = page.nextPageToken
    } while (pageToken !== '')
    return out
  }

  /** Every page of ListSnapshots. */
  async listSnapshotsAll(req: t.ListRequest = {}, opts?: CallOpts): Promise<t.SessionSnapshot[]> {
    const out: t.SessionSnapshot[] = []
    let pageToken = ''
    do {
      const page = await this.listSnapshots({ ...req, pageToken }, opts)
      out.push(...page.snapshots)
      pageToken = page.nextPageToken
    } while (pageToken !== '')
    return out
  }

  /**
   * Watches a session from req.fromSeq: every stored event, then each new
   * batch, in order, resuming on another node (from the next seq) when a
   * stream breaks or goes quiet.
   */
  watch(req: t.WatchRequest, opts?: WatchOptions): Watch {
    return new Watch(this, req, opts)
  }

  // --- PlanMode ---

  planGet(req: t.PlanGetRequest, opts?: CallOpts): Promise<t.PlanGetResponse> {
    return this.unary(PLAN, 'Get', req, 'read', c.planGetResponse, opts)
  }

  planSet(req: t.PlanSetRequest, opts?: CallOpts): Promise<t.PlanSetResponse> {
    return this.unary(PLAN, 'Set', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', c.planSetResponse, opts)
  }

  planPreStep(req: t.PlanPreStepRequest, opts?: CallOpts): Promise<t.PlanPreStepResponse> {
    return this.unary(PLAN, 'PreStep', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', c.planPreStepResponse, opts)
  }

  planCommand(req: t.PlanCommandRequest, opts?: CallOpts): Promise<t.PlanCommandResponse> {
    return this.unary(PLAN, 'Command', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', c.planCommandResponse, opts)
  }

  exitPlan(req: t.PlanExitRequest, opts?: CallOpts): Promise<t.PlanExitResponse> {
    return this.unary(PLAN, 'ExitPlan', { ...req, requestId: req.requestId ?? newRequestId() }, 'mutating', c.planExitResponse, opts)
  }

  planProjection(req: t.PlanProjectionRequest, opts?: CallOpts): Promise<t.PlanProjectionResponse> {
    return this.unary(PLAN, 'Projection', req, 'read', c.planProjectionResponse, opts)
  }

  // --- Cluster (admin) ---

  /** The serving node's view of the cluster (of this.endpoint, or the next one after a failure). */
  status(opts?: CallOpts): Promise<t.StatusResponse> {
    return this.unary(CLUSTER, 'Status', {}, 'read', c.statusResponse, opts)
  }

  members(opts?: CallOpts): Promise<t.Member[]> {
    return this.unary(CLUSTER, 'Members', {}, 'read', v => c.membersResponse(v).members, opts)
  }

  /** Never resent after an unknown outcome: check status() before calling again. */
  async transferLeadership(toNodeId = '', opts?: CallOpts): Promise<void> {
    await this.unary(CLUSTER, 'TransferLeadership', { toNodeId }, 'once', () => undefined, opts)
  }

  async removeMember(nodeId: string, opts?: CallOpts): Promise<void> {
    await this.unary(CLUSTER, 'RemoveMember', { nodeId }, 'once', () => undefined, opts)
  }

  async leave(opts?: CallOpts): Promise<void> {
    await this.unary(CLUSTER, 'Leave', {}, 'once', () => undefined, opts)
  }

  /** Applies the retention policies now (dryRun: only lists); returns the session ids. */
  retention(dryRun = false, opts?: CallOpts): Promise<string[]> {
    return this.unary(CLUSTER, 'Retention', { dryRun }, 'once', v => {
      const ids = c.asObject(v, 'response').sessionIds
      return Array.isArray(ids) ? ids.filter((s): s is string => typeof s === 'string') : []
    }, opts)
  }

  /**
   * The Backup stream, message by message (meta, data chunks, trailer), from
   * this.endpoint; not retried (a broken backup is simply taken again).
   */
  async * backup(opts?: CallOpts): AsyncGenerator<t.BackupChunk> {
    const endpoint = this.endpoint
    const a = this.attemptOptions(endpoint, opts?.signal, 0)
    try {
      for await (const m of serverStream(endpoint, `/${CLUSTER}/Backup`, '{}', a.o)) yield c.backupChunk(m)
    } finally {
      a.done()
    }
  }
}

/** Joins the parts of a view stream: metadata (and lease) from the first, every event. */
function joinView(parts: Array<{ view: t.SessionView; lease?: t.Lease }>): { view: t.SessionView; lease?: t.Lease } {
  const first = parts[0]
  if (first === undefined) throw new SessionStoreError('internal', 'view stream without a message')
  return { view: { ...first.view, events: parts.flatMap(p => p.view.events) }, lease: first.lease }
}
