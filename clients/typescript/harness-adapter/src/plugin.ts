// The harness plugin: registers as ctx.sessionPersistence and serves the
// service from a sessionstore cluster (RemoteSessionPersistence). The
// harness's own write-path coordinator is not used: the cluster applies the
// contract's rules, and this plugin installs its own live-write listeners.

import type { Context } from '@deepseek-ai/cordis'
import type { SessionEvent, SessionHeader, SessionId } from '@deepseek-ai/dsh-session'
import {
  SessionFormatUnsupportedError, SessionPersistence, SessionPersistenceCorruptionError,
  type SessionInspection, type SessionLocation, type SessionPersistenceSnapshot, type SessionRawArtifact,
} from '@deepseek-ai/dsh-session-persistence'
import { RemoteSessionPersistence, type RemotePersistenceConfig } from './persistence.js'

export type Config = RemotePersistenceConfig

export class SessionStorePersistence extends SessionPersistence {
  static inject = ['sessions']

  readonly supportsRawArtifacts = true
  /** The service itself, also usable without the harness. */
  readonly remote: RemoteSessionPersistence

  constructor(ctx: Context, public config: Config) {
    super(ctx)
    this.remote = new RemoteSessionPersistence(config, { warn: message => ctx.logger.warn(message) }, {
      formatUnsupported: (message, location) => new SessionFormatUnsupportedError(message, location),
      corruption: (message, options) => new SessionPersistenceCorruptionError(message, options),
    })
    // The disposer first, so that the listeners are gone before the final drain.
    ctx.effect(() => () => this.remote.close(), 'sessionstore write path')
    ctx.on('session/created', session => { this.remote.bind(session) })
    ctx.on('session/event', (session, event) => { this.remote.admit(session, event) })
    ctx.on('session/flush', session => this.remote.flush(session))
    ctx.on('session/disposed', session => { this.remote.retire(session) })
    // A hot reload does not announce existing sessions again.
    for (const session of ctx.sessions.list()) this.remote.bind(session)
  }

  locate(meta: SessionHeader): SessionLocation | undefined {
    return this.remote.locate(meta)
  }

  override readRaw(id: SessionId, signal?: AbortSignal): Promise<SessionRawArtifact | undefined> {
    return this.remote.readRaw(id, signal)
  }

  create(meta: SessionHeader): Promise<void> {
    return this.remote.create(meta)
  }

  append(id: SessionId, events: readonly SessionEvent[]): Promise<void> {
    return this.remote.append(id, events)
  }

  // prepare: the base class's, which loads (the cluster commits the repair)
  // and builds the unpublished Session; binding it takes the lease.

  load(id: SessionId): Promise<SessionInspection> {
    return this.remote.load(id)
  }

  inspect(id: SessionId, signal?: AbortSignal): Promise<SessionInspection> {
    return this.remote.inspect(id, signal)
  }

  readFrom(id: SessionId, fromSeq: number, signal?: AbortSignal): Promise<{ meta: SessionHeader; events: SessionEvent[] }> {
    return this.remote.readFrom(id, fromSeq, signal)
  }

  list(signal?: AbortSignal): Promise<SessionHeader[]> {
    return this.remote.list(signal)
  }

  listSnapshots(signal?: AbortSignal): Promise<SessionPersistenceSnapshot[]> {
    return this.remote.listSnapshots(signal)
  }
}

export default SessionStorePersistence
