// @sessionstore/client: the session store's three services over the Connect
// protocol, with no dependencies beyond Node.js >= 20.

export { Client, newRequestId, retryable, sleep } from './client.js'
export type { CallOpts, ClientOptions, Policy } from './client.js'
export { SessionStoreError, ERROR_DOMAIN, decodeErrorInfo, fromConnectError } from './errors.js'
export type { Code, Reason } from './errors.js'
export { EnvelopeReader, envelope } from './connect.js'
export { LeaseKeeper } from './lease.js'
export type { LeaseKeeperOptions } from './lease.js'
export { Watch } from './watch.js'
export type { WatchBatch, WatchOptions } from './watch.js'
export * from './types.js'
