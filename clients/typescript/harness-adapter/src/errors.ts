// The store's error reasons mapped to the harness's error classes and texts
// (docs/api.md#errors; the texts are the server's, which already are the
// reference harness's). Clients branch on the reason, the harness on the class.

import { SessionStoreError } from '@sessionstore/client'
import type { SessionLocation } from '@deepseek-ai/dsh-session-persistence'

/** Makes the harness's two persistence error classes (its own, when loaded as a plugin). */
export interface ErrorClasses {
  formatUnsupported(message: string, location?: SessionLocation): Error
  corruption(message: string, options: { cause: unknown }): Error
}

/** Stand-ins with the harness's names and fields, for use outside the harness. */
export class SessionFormatUnsupportedError extends Error {
  constructor(message: string, readonly location?: SessionLocation) {
    super(message)
    this.name = 'SessionFormatUnsupportedError'
  }
}

export class SessionPersistenceCorruptionError extends Error {
  constructor(message: string, options: { cause: unknown }) {
    super(message, options)
    this.name = 'SessionPersistenceCorruptionError'
  }
}

export const standaloneErrorClasses: ErrorClasses = {
  formatUnsupported: (message, location) => new SessionFormatUnsupportedError(message, location),
  corruption: (message, options) => new SessionPersistenceCorruptionError(message, options),
}

/** Which service method failed: the load path wraps validation failures, readFrom does not. */
export type Operation = 'create' | 'append' | 'load' | 'inspect' | 'readFrom' | 'readRaw' | 'list' | 'listSnapshots' | 'live'

const RAW_LOG = / \(raw log: (.+)\)$/

/** Records the store's reason on an error without making it enumerable. */
function withReason<E extends Error>(e: E, err: SessionStoreError): E {
  Object.defineProperty(e, 'reason', { value: err.reason, enumerable: false })
  return e
}

/**
 * The harness's error for a failed call: SessionFormatUnsupportedError for
 * FORMAT_UNSUPPORTED (with the raw log's location when the text names one);
 * SessionPersistenceCorruptionError for a stored log that fails validation on
 * the load path (load, inspect, prepare), with the validation failure as its
 * cause; TypeError for refused arguments (NOT_JSON, the lossless-JSON check,
 * INVALID_HEADER, INVALID_ARGUMENT, INVALID_SESSION_ID); a plain Error with
 * the server's text for everything else. Errors that are not the store's
 * (an abort reason, say) pass through.
 */
export function harnessError(e: unknown, op: Operation, classes: ErrorClasses): unknown {
  if (!(e instanceof SessionStoreError)) return e
  const msg = e.message
  switch (e.reason) {
    case 'FORMAT_UNSUPPORTED': {
      const m = RAW_LOG.exec(msg)
      return withReason(classes.formatUnsupported(msg, m === null ? undefined : { kind: 'jsonl', path: m[1] }), e)
    }
    case 'INVALID_STORED_EVENT': {
      const m = /^stored session ".*?" failed validation: (Error|TypeError): ([\s\S]*)$/.exec(msg)
      if (m !== null && (op === 'load' || op === 'inspect')) {
        const cause = m[1] === 'TypeError' ? new TypeError(m[2]) : new Error(m[2])
        return withReason(classes.corruption(msg, { cause }), e)
      }
      return withReason(new Error(msg, { cause: e }), e)
    }
    case 'NOT_JSON':
    case 'INVALID_HEADER':
    case 'INVALID_ARGUMENT':
    case 'INVALID_SESSION_ID':
      return withReason(new TypeError(msg, { cause: e }), e)
    case 'INVALID_EVENT':
      return withReason(/losslessly JSON-serializable/.test(msg) ? new TypeError(msg, { cause: e }) : new Error(msg, { cause: e }), e)
    default:
      return withReason(new Error(msg, { cause: e }), e)
  }
}
