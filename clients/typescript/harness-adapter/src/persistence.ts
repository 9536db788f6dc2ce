// The harness's persistence service (docs/contract.md) served by a
// sessionstore cluster. The server applies the contract's rules for the whole
// cluster — crash repair committed through Raft, revisions, format refusals,
// the reference's texts — so this class translates calls and owns only the
// live-write path: write-behind batching, and a lease per live Session so that
// a second host taking the session over fences this one.

import { Client, LeaseKeeper, SessionStoreError, type ClientOptions, type SessionHeader as WireHeader } from '@sessionstore/client'
import type { SessionEvent, SessionHeader, SessionId } from '@deepseek-ai/dsh-session'
import type {
  SessionInspection, SessionLocation, SessionPersistenceRevision, SessionPersistenceSnapshot, SessionRawArtifact,
} from '@deepseek-ai/dsh-session-persistence'
import { harnessError, standaloneErrorClasses, type ErrorClasses, type Operation } from './errors.js'
import { losslessProblem } from './lossless.js'

/** The harness's default write-behind window. */
export const DEFAULT_WRITE_BATCH_MAX_DELAY_MS = 200
/** The lease a live Session holds, renewed every third of it. */
export const DEFAULT_LEASE_TTL_MS = 30_000

export interface RemotePersistenceConfig {
  /** Base URLs of the nodes' HTTP ports (Connect protocol). */
  endpoints: string[]
  /** Bearer token, for servers started with --auth-token-file. */
  token?: string
  /**
   * The lease owner this host writes as. Keep it stable across plugin reloads
   * in one process (a reload then adopts its own live sessions); two hosts must
   * never share one. Default: one random name per process.
   */
  owner?: string
  /** The lease ttl of a live Session (default 30 s; at least 100 ms). */
  leaseTtlMs?: number
  /** The write-behind window of live events (default 200 ms, as the harness). */
  writeBatchMaxDelayMs?: number
  /** Per-attempt time limit and attempts of each call (the client's defaults otherwise). */
  attemptTimeoutMs?: number
  maxAttempts?: number
}

/** The live Session members the write path reads (the harness's Session has them). */
export interface LiveSession {
  readonly header: SessionHeader
  readonly events: readonly SessionEvent[]
}

/** Where diagnostics go (the harness's ctx.logger). */
export interface Logger {
  warn(message: string): void
}

/** A process-wide default owner, so that a plugin reload keeps it. */
const processOwner = `harness-${crypto.randomUUID()}`

function deepFreeze<T>(v: T): T {
  if (v !== null && typeof v === 'object' && !Object.isFrozen(v)) {
    Object.freeze(v)
    for (const e of Object.values(v)) deepFreeze(e)
  }
  return v
}

function toHarnessHeader(h: WireHeader | undefined, id: string): SessionHeader {
  if (h === undefined) throw new Error(`session "${id}": the server answered without a header`)
  return { ...h } as SessionHeader
}

function toWireHeader(meta: SessionHeader): WireHeader {
  const h: WireHeader = { version: meta.version, id: meta.id, createdAt: meta.createdAt }
  if (meta.cwd !== undefined) h.cwd = meta.cwd
  if (meta.parentSession !== undefined) h.parentSession = meta.parentSession
  if (meta.seedLength !== undefined) h.seedLength = meta.seedLength
  if (meta.origin !== undefined) h.origin = meta.origin
  if (meta.delegationDepth !== undefined) h.delegationDepth = meta.delegationDepth
  if (meta.agentPreset !== undefined) h.agentPreset = meta.agentPreset
  return h
}

function parseEvents(texts: readonly string[]): SessionEvent[] {
  return texts.map(t => JSON.parse(t) as SessionEvent)
}

function preAborted(signal: AbortSignal | undefined): Promise<never> | undefined {
  return signal?.aborted === true ? Promise.reject(signal.reason) : undefined
}

/** One live Session's write path. */
interface Live {
  readonly session: LiveSession
  readonly id: string
  /** Events with a lower seq are stored. */
  cursor: number
  /** Binding: registration, lease, the seed beyond what is stored. */
  init: Promise<void>
  /** Admitted events (JSON text) not yet written. */
  pending: Array<{ seq: number; text: string }>
  timer: NodeTimer | undefined
  /** The window ran out while a write was in flight. */
  due: boolean
  writing: Promise<void> | undefined
  flushing: Promise<void> | undefined
  keeper: LeaseKeeper | undefined
  /** Set once a write was fenced: every later write fails with it. */
  fenced: Error | undefined
  /** A turn is open in the stored log (a lease is taken only on a balanced log). */
  openTurn: boolean
}

export class RemoteSessionPersistence {
  /** Backend label in diagnostics. */
  readonly name = 'session-persistence-sessionstore'
  readonly supportsRawArtifacts = true
  readonly client: Client
  readonly owner: string
  private readonly leaseTtlMs: number
  private readonly windowMs: number
  private readonly live = new Map<LiveSession, Live>()
  private readonly retirements = new Map<string, Promise<void>>()

  constructor(config: RemotePersistenceConfig, private readonly logger: Logger = { warn: () => {} }, private readonly classes: ErrorClasses = standaloneErrorClasses) {
    const opts: ClientOptions = { endpoints: config.endpoints, token: config.token, attemptTimeoutMs: config.attemptTimeoutMs, maxAttempts: config.maxAttempts }
    this.client = new Client(opts)
    this.owner = config.owner ?? processOwner
    this.leaseTtlMs = config.leaseTtlMs ?? DEFAULT_LEASE_TTL_MS
    if (!Number.isSafeInteger(this.leaseTtlMs) || this.leaseTtlMs < 100) throw new TypeError('leaseTtlMs must be an integer of at least 100')
    this.windowMs = config.writeBatchMaxDelayMs ?? DEFAULT_WRITE_BATCH_MAX_DELAY_MS
    if (!Number.isInteger(this.windowMs) || this.windowMs < 1 || this.windowMs > 2147483647) {
      throw new TypeError('writeBatchMaxDelayMs must be an integer between 1 and 2147483647')
    }
  }

  private fail(e: unknown, op: Operation): never {
    throw harnessError(e, op, this.classes)
  }

  /** Waits for a disposed live Session of id to finish writing. */
  private async settled(id: string): Promise<void> {
    await this.retirements.get(id)?.catch(() => { /* reported by retire */ })
  }

  private liveById(id: string): Live | undefined {
    for (const l of this.live.values()) if (l.id === id) return l
    return undefined
  }

  // --- the persistence service (docs/contract.md) ---

  /**
   * Artifacts live on the cluster's nodes, not on this host, so there is no
   * local path to give: undefined, as the harness's backends without a
   * per-session local artifact answer. locateRemote asks a node.
   */
  locate(_meta: SessionHeader): SessionLocation | undefined {
    return undefined
  }

  /** Where a node keeps the artifact, and its HTTP download URL. */
  async locateRemote(meta: SessionHeader, signal?: AbortSignal): Promise<{ kind: string; path: string; url: string }> {
    return this.client.locate({ header: toWireHeader(meta) }, { signal })
  }

  /** The artifact's text as stored (header line, one line per event); undefined for an unknown session. */
  async readRaw(id: SessionId, signal?: AbortSignal): Promise<SessionRawArtifact | undefined> {
    const early = preAborted(signal); if (early) return early
    await this.settled(id)
    try {
      const raw = await this.client.readRaw({ sessionId: id }, { signal })
      return { meta: toHarnessHeader(raw.header, id), filename: raw.filename, content: new TextDecoder().decode(raw.content) }
    } catch (e: unknown) {
      if (e instanceof SessionStoreError && e.reason === 'NOT_FOUND') return undefined
      this.fail(e, 'readRaw')
    }
  }

  /** Registers a session (materialised by its first non-empty append). */
  async create(meta: SessionHeader): Promise<void> {
    if (losslessProblem(meta) !== undefined) throw new TypeError('session metadata must be losslessly JSON-serializable')
    if (!Number.isSafeInteger(meta.createdAt) || meta.createdAt < 0) {
      throw new TypeError('session metadata createdAt must be a non-negative safe integer')
    }
    try {
      await this.client.create({ header: toWireHeader(meta), validation: 'VALIDATION_REFERENCE' })
    } catch (e: unknown) {
      this.fail(e, 'create')
    }
  }

  /**
   * Durably appends a batch (resolves after quorum commit). Under this host's
   * lease for the session, the batch carries its epoch.
   */
  async append(id: SessionId, events: readonly SessionEvent[]): Promise<void> {
    const texts: string[] = []
    for (const e of events) {
      const p = losslessProblem(e)
      if (p !== undefined) {
        const type = e !== null && typeof e === 'object' && typeof e.type === 'string' ? e.type : String(e?.type)
        throw new TypeError(`session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data (event "${type}" at seq ${String(e?.seq)})`)
      }
      texts.push(JSON.stringify(e))
    }
    if (texts.length === 0) return
    const live = this.liveById(id)
    try {
      await this.client.append({ sessionId: id, events: texts, leaseEpoch: live?.keeper?.epoch ?? 0, validation: 'VALIDATION_REFERENCE' })
    } catch (e: unknown) {
      this.fail(e, 'append')
    }
  }

  /**
   * The balanced view; the cluster commits a cold session's crash repair. A
   * Session live on this host is flushed first, so the view includes its
   * buffered events (an open live turn is then refused by the server).
   */
  async load(id: SessionId): Promise<SessionInspection> {
    await this.settled(id)
    const live = this.liveById(id)
    if (live !== undefined) await this.flushLive(live).catch(() => { /* the load reports what is stored */ })
    try {
      const v = await this.client.load({ sessionId: id })
      return deepFreeze({ meta: toHarnessHeader(v.header, id), events: parseEvents(v.events) })
    } catch (e: unknown) {
      this.fail(e, 'load')
    }
  }

  /**
   * The view without committing anything. A Session live on this host is
   * answered from memory (its header and events), as the harness does.
   */
  async inspect(id: SessionId, signal?: AbortSignal): Promise<SessionInspection> {
    const early = preAborted(signal); if (early) return early
    await this.settled(id)
    const live = this.liveById(id)
    if (live !== undefined) return { meta: live.session.header, events: live.session.events }
    try {
      const v = await this.client.inspect({ sessionId: id }, { signal })
      return deepFreeze({ meta: toHarnessHeader(v.header, id), events: parseEvents(v.events) })
    } catch (e: unknown) {
      this.fail(e, 'inspect')
    }
  }

  /** The stored events with seq >= fromSeq (no repair, no closers). */
  async readFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<{ meta: SessionHeader; events: SessionEvent[] }> {
    if (!Number.isSafeInteger(fromSeq) || fromSeq < 0) {
      throw new TypeError(`readFrom fromSeq must be a non-negative safe integer, got ${String(fromSeq)}`)
    }
    const early = preAborted(signal); if (early) return early
    await this.settled(id)
    try {
      const r = await this.client.readFrom({ sessionId: id, fromSeq }, { signal })
      return { meta: toHarnessHeader(r.header, id), events: parseEvents(r.events) }
    } catch (e: unknown) {
      this.fail(e, 'readFrom')
    }
  }

  /** Headers of the materialised sessions. */
  async list(signal?: AbortSignal): Promise<SessionHeader[]> {
    const early = preAborted(signal); if (early) return early
    try {
      return (await this.client.listAll({}, { signal })).map(h => toHarnessHeader(h, h.id))
    } catch (e: unknown) {
      this.fail(e, 'list')
    }
  }

  /** As list, with each session's revision (the cluster's, source-qualified). */
  async listSnapshots(signal?: AbortSignal): Promise<SessionPersistenceSnapshot[]> {
    const early = preAborted(signal); if (early) return early
    try {
      return (await this.client.listSnapshotsAll({}, { signal })).map(s => ({
        header: toHarnessHeader(s.header, s.header.id),
        revision: s.revision as SessionPersistenceRevision,
      }))
    } catch (e: unknown) {
      this.fail(e, 'listSnapshots')
    }
  }

  // --- the live-write path ---

  /** The lease keeper of a Session live on this host, once it holds a lease. */
  leaseOf(session: LiveSession): LeaseKeeper | undefined {
    return this.live.get(session)?.keeper
  }

  /** session/created: binds the Session once (registration, lease, its seed). */
  bind(session: LiveSession): void {
    this.liveFor(session)
  }

  private liveFor(session: LiveSession): Live {
    const existing = this.live.get(session)
    if (existing !== undefined) return existing
    const l: Live = {
      session, id: session.header.id, cursor: 0, init: Promise.resolve(), pending: [], timer: undefined, due: false,
      writing: undefined, flushing: undefined, keeper: undefined, fenced: undefined, openTurn: false,
    }
    this.live.set(session, l)
    l.init = this.initLive(l, session.events.slice())
    l.init.catch(() => { /* surfaced by flush and by the writes */ })
    return l
  }

  /**
   * Binding. A new id is registered and its seed (if any) written. An id the
   * cluster already holds is taken with Prepare: the stored log must be the
   * start of the Session's own events and the cwd must match (else the
   * harness's id-collision texts), and the Session's events beyond it are
   * written under the new lease.
   */
  private async initLive(l: Live, seed: SessionEvent[]): Promise<void> {
    const header = l.session.header
    let existing = false
    try {
      await this.client.create({ header: toWireHeader(header), validation: 'VALIDATION_REFERENCE' })
    } catch (e: unknown) {
      if (!(e instanceof SessionStoreError && e.reason === 'ALREADY_EXISTS')) this.fail(e, 'live')
      existing = true
    }
    if (!existing) {
      if (seed.length > 0) await this.writeLive(l, seed.map(e => ({ seq: e.seq, text: JSON.stringify(e) })))
      return
    }
    let prepared
    try {
      prepared = await this.client.prepare({ sessionId: l.id, owner: this.owner, ttlMs: this.leaseTtlMs })
    } catch (e: unknown) {
      this.fail(e, 'live')
    }
    const { view, lease } = prepared
    const release = (): Promise<void> => this.client.release({ sessionId: l.id, leaseEpoch: lease.epoch }).catch(() => { /* expires anyway */ })
    if (view.header?.cwd !== header.cwd) {
      await release()
      throw new Error(`session "${l.id}" is already persisted at a different cwd (persisted: ${String(view.header?.cwd)}, live: ${String(header.cwd)}) (id collision)`)
    }
    const stored = view.events
    if (stored.length > seed.length || stored.some((text, i) => JSON.stringify(seed[i]) !== text)) {
      await release()
      throw new Error(`session "${l.id}" already has a persisted log on disk that does not match this live session (id collision)`)
    }
    l.cursor = view.nextSeq
    l.openTurn = openTurnAfter(false, seed.slice(0, view.nextSeq))
    l.keeper = this.keep(l, lease)
    const suffix = seed.slice(view.nextSeq)
    if (suffix.length > 0) await this.writeLive(l, suffix.map(e => ({ seq: e.seq, text: JSON.stringify(e) })))
  }

  private keep(l: Live, lease: ConstructorParameters<typeof LeaseKeeper>[1]): LeaseKeeper {
    return new LeaseKeeper(this.client, lease, {
      ttlMs: this.leaseTtlMs,
      onLost: err => {
        l.fenced ??= harnessError(err, 'live', this.classes) as Error
        this.logger.warn(`${this.name}: session "${l.id}" lost its lease (epoch ${lease.epoch}): ${err.message}`)
      },
      onRenewError: err => this.logger.warn(`${this.name}: renewing the lease of session "${l.id}" failed (retrying): ${String(err)}`),
    })
  }

  /**
   * Writes a batch of a live Session: events already stored are skipped, the
   * lease's epoch is carried, and once the stored log is balanced a Session
   * without a lease takes one (the server grants leases on materialised
   * sessions only, and Prepare closes an open turn).
   */
  private async writeLive(l: Live, batch: Array<{ seq: number; text: string }>): Promise<void> {
    if (l.fenced !== undefined) throw l.fenced
    const fresh = batch.filter(e => e.seq >= l.cursor)
    if (fresh.length === 0) return
    try {
      const r = await this.client.append({ sessionId: l.id, events: fresh.map(e => e.text), leaseEpoch: l.keeper?.epoch ?? 0, validation: 'VALIDATION_REFERENCE' })
      l.cursor = r.nextSeq
    } catch (e: unknown) {
      const err = harnessError(e, 'live', this.classes)
      if (e instanceof SessionStoreError && e.reason === 'LEASE_FENCED') {
        l.fenced = err as Error
        void l.keeper?.stop()
        this.logger.warn(`${this.name}: session "${l.id}" is fenced (another host holds it now); its writes fail: ${e.message}`)
      }
      throw err
    }
    l.openTurn = openTurnAfter(l.openTurn, fresh.map(e => JSON.parse(e.text) as SessionEvent))
    if (l.keeper === undefined && !l.openTurn) await this.takeLease(l)
  }

  private async takeLease(l: Live): Promise<void> {
    let prepared
    try {
      prepared = await this.client.prepare({ sessionId: l.id, owner: this.owner, ttlMs: this.leaseTtlMs })
    } catch (e: unknown) {
      const err = harnessError(e, 'live', this.classes) as Error
      l.fenced = err
      this.logger.warn(`${this.name}: session "${l.id}" could not take its lease; its writes fail: ${err.message}`)
      throw err
    }
    l.keeper = this.keep(l, prepared.lease)
    if (prepared.view.nextSeq !== l.cursor) {
      // Someone else wrote between our append and Prepare.
      const err = new Error(`session "${l.id}" was written by another host (stored next seq ${prepared.view.nextSeq}, this host wrote up to ${l.cursor}) (id collision)`)
      l.fenced = err
      await l.keeper.release().catch(() => { /* expires anyway */ })
      throw err
    }
  }

  /** session/event: keeps a copy of the event and starts the batching window. */
  admit(session: LiveSession, event: SessionEvent): void {
    const l = this.liveFor(session)
    l.pending.push({ seq: event.seq, text: JSON.stringify(event) })
    if (l.timer === undefined) {
      l.timer = setTimeout(() => { l.timer = undefined; l.due = true; this.kick(l) }, this.windowMs)
    }
  }

  /** Starts the due batch unless a write is in flight (it starts after it). */
  private kick(l: Live): void {
    if (l.writing !== undefined || l.flushing !== undefined || !l.due || l.pending.length === 0) return
    l.due = false
    const batch = l.pending.splice(0)
    l.writing = (async () => {
      await l.init
      await this.writeLive(l, batch)
    })().catch((err: unknown) => {
      l.pending.unshift(...batch)
      this.logger.warn(`${this.name}: background write for session "${l.id}" failed (buffered events retained): ${String(err)}`)
    }).finally(() => {
      l.writing = undefined
      this.kick(l)
    })
  }

  /** session/flush: writes everything admitted; rejects if a write fails. */
  flush(session: LiveSession): Promise<void> {
    return this.flushLive(this.liveFor(session))
  }

  private flushLive(l: Live): Promise<void> {
    clearTimeout(l.timer)
    l.timer = undefined
    l.due = false
    l.flushing ??= (async () => {
      try {
        await l.init
        for (;;) {
          if (l.writing !== undefined) { await l.writing; continue }
          if (l.pending.length === 0) return
          const batch = l.pending.splice(0)
          try {
            await this.writeLive(l, batch)
          } catch (e: unknown) {
            l.pending.unshift(...batch)
            throw e
          }
        }
      } finally {
        l.flushing = undefined
      }
    })()
    return l.flushing
  }

  /** session/disposed: a final flush, then the lease is released. */
  retire(session: LiveSession): void {
    const l = this.live.get(session)
    if (l === undefined) return
    const done = (async () => {
      try {
        await this.flushLive(l)
      } finally {
        this.live.delete(session)
        await l.keeper?.release().catch((e: unknown) => this.logger.warn(`${this.name}: releasing the lease of session "${l.id}" failed: ${String(e)}`))
      }
    })()
    this.retirements.set(l.id, done)
    done.catch((e: unknown) => this.logger.warn(`${this.name}: session "${l.id}" retirement failed: ${String(e)}`))
      .finally(() => { if (this.retirements.get(l.id) === done) this.retirements.delete(l.id) })
  }

  /** Teardown: flushes every live Session and releases its lease. */
  async close(): Promise<void> {
    const errors: unknown[] = []
    await Promise.all([...this.live.values()].map(async l => {
      try { await this.flushLive(l) } catch (e: unknown) { errors.push(e) }
      await l.keeper?.release().catch(() => { /* expires anyway */ })
    }))
    this.live.clear()
    await Promise.all([...this.retirements.values()].map(r => r.catch(() => {})))
    if (errors.length > 0) throw new AggregateError(errors, `${this.name} dispose failed`)
  }
}

/** Whether a turn is open after events, given whether one was open before. */
function openTurnAfter(open: boolean, events: readonly SessionEvent[]): boolean {
  for (const e of events) {
    if (e.type === 'turn/start') open = true
    else if (e.type === 'turn/end') open = false
  }
  return open
}
