// The public types this adapter uses from the reference harness's packages at
// the pinned version 0.1.0-rc.8, written by hand so that the adapter is
// type-checked without the packages (no npm registry here). Only the members
// the adapter touches are declared; the shapes follow the packages' own
// declarations at that version.

declare module '@deepseek-ai/dsh-brand' {
  const BRAND: unique symbol
  export type Branded<B extends string> = string & { readonly [BRAND]: B }
}

declare module '@deepseek-ai/dsh-session' {
  import type { Branded } from '@deepseek-ai/dsh-brand'

  export type SessionId = Branded<'SessionId'>
  export function SessionId(id: string): SessionId

  export interface SessionHeader {
    readonly version: number
    readonly id: SessionId
    readonly createdAt: number
    readonly cwd?: string
    readonly parentSession?: SessionId
    readonly seedLength?: number
    readonly origin?: 'subagent'
    readonly delegationDepth?: number
    readonly agentPreset?: string
  }

  export type SurfaceOp = 'append' | { op: 'replace'; start: number; end: number }

  /**
   * One event of a session's log. The package types `data` per event type
   * (SessionEventMap); the adapter only moves events, so `data` is the JSON
   * value it is on the wire.
   */
  export interface SessionEvent {
    type: string
    seq: number
    time: number
    data: unknown
    ignorable?: true
    sourceEventSeqs?: number[]
    surfaceOp?: SurfaceOp
  }

  /** A live session: its header, its event log, and where its live writes begin. */
  export class Session {
    readonly header: SessionHeader
    get id(): SessionId
    readonly firstLiveSeq: number
    get events(): readonly SessionEvent[]
  }

  export class SessionPreparation {
    readonly session: Session
  }

  /** `ctx.sessions`. */
  export class SessionStore {
    get(id: SessionId): Session | undefined
    list(): Session[]
  }
}

declare module '@deepseek-ai/cordis' {
  import type { Session, SessionEvent, SessionStore } from '@deepseek-ai/dsh-session'

  export interface Logger {
    warn(format: unknown, ...param: unknown[]): void
    info(format: unknown, ...param: unknown[]): void
  }

  /** The event map; the `session/*` events are the ones @deepseek-ai/dsh-session adds. */
  export interface Events {
    'session/created'(session: Session): void
    'session/disposed'(session: Session): void
    'session/event'(session: Session, event: SessionEvent): void
    'session/flush'(session: Session): Promise<void> | void
  }

  export interface Context {
    readonly logger: Logger
    readonly sessions: SessionStore
    on<K extends keyof Events>(name: K, listener: Events[K]): () => boolean
    /** Registers a disposer run when the plugin's fiber is torn down. */
    effect(execute: () => () => unknown, label?: string): void
  }

  export abstract class Service {
    protected ctx: Context
    constructor(ctx: Context, name: string)
  }
}

declare module '@deepseek-ai/dsh-session-persistence' {
  import { Context, Service } from '@deepseek-ai/cordis'
  import type { Branded } from '@deepseek-ai/dsh-brand'
  import type { SessionEvent, SessionHeader, SessionId, SessionPreparation } from '@deepseek-ai/dsh-session'

  export type { SessionHeader }
  export type SessionPersistenceRevision = Branded<'SessionPersistenceRevision'>
  export function SessionPersistenceRevision(value: string): SessionPersistenceRevision

  export interface SessionPersistenceSnapshot {
    header: SessionHeader
    revision: SessionPersistenceRevision
  }
  export interface SessionInspection {
    readonly meta: SessionHeader
    readonly events: readonly SessionEvent[]
  }
  export interface SessionRawArtifact {
    readonly meta: SessionHeader
    readonly filename: string
    readonly content: string
  }
  export interface SessionLocation {
    readonly kind: string
    readonly path: string
  }

  export class SessionPersistenceCorruptionError extends Error {
    constructor(message: string, options: ErrorOptions)
  }
  export class SessionFormatUnsupportedError extends Error {
    readonly location?: SessionLocation
    constructor(message: string, location?: SessionLocation)
  }

  export abstract class SessionPersistence extends Service {
    constructor(ctx: Context)
    abstract locate(meta: SessionHeader): SessionLocation | undefined
    abstract readonly supportsRawArtifacts: boolean
    readRaw(id: SessionId, signal?: AbortSignal): Promise<SessionRawArtifact | undefined>
    abstract create(meta: SessionHeader): Promise<void>
    abstract append(id: SessionId, events: readonly SessionEvent[]): Promise<void>
    prepare(id: SessionId, signal?: AbortSignal): Promise<SessionPreparation>
    abstract load(id: SessionId): Promise<SessionInspection>
    abstract inspect(id: SessionId, signal?: AbortSignal): Promise<SessionInspection>
    abstract readFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<{ meta: SessionHeader; events: SessionEvent[] }>
    abstract list(signal?: AbortSignal): Promise<SessionHeader[]>
    abstract listSnapshots(signal?: AbortSignal): Promise<SessionPersistenceSnapshot[]>
  }
  export default SessionPersistence
}
