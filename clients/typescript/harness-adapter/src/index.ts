// @sessionstore/harness-adapter: the reference harness's session persistence
// served by a sessionstore cluster. The default export is the plugin.

export { SessionStorePersistence, SessionStorePersistence as default } from './plugin.js'
export type { Config } from './plugin.js'
export { RemoteSessionPersistence, DEFAULT_LEASE_TTL_MS, DEFAULT_WRITE_BATCH_MAX_DELAY_MS } from './persistence.js'
export type { LiveSession, Logger, RemotePersistenceConfig } from './persistence.js'
export { harnessError, standaloneErrorClasses, SessionFormatUnsupportedError, SessionPersistenceCorruptionError } from './errors.js'
export type { ErrorClasses, Operation } from './errors.js'
export { losslessProblem } from './lossless.js'
