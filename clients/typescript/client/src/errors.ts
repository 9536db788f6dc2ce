// Errors of the Connect protocol and the store's reasons (docs/api.md#errors).

import { asObject, decodeBase64, type JsonValue } from './codec.js'

/** The Connect (and gRPC) status codes, as the Connect protocol spells them. */
export type Code =
  | 'canceled' | 'unknown' | 'invalid_argument' | 'deadline_exceeded' | 'not_found' | 'already_exists'
  | 'permission_denied' | 'resource_exhausted' | 'failed_precondition' | 'aborted' | 'out_of_range'
  | 'unimplemented' | 'internal' | 'unavailable' | 'data_loss' | 'unauthenticated'

const CODES: readonly Code[] = [
  'canceled', 'unknown', 'invalid_argument', 'deadline_exceeded', 'not_found', 'already_exists',
  'permission_denied', 'resource_exhausted', 'failed_precondition', 'aborted', 'out_of_range',
  'unimplemented', 'internal', 'unavailable', 'data_loss', 'unauthenticated',
]

/** The store's error reasons (the ErrorInfo reason of domain "sessionstore"). */
export type Reason =
  | 'NOT_FOUND' | 'ALREADY_EXISTS' | 'SEQ_MISMATCH' | 'REVISION_MISMATCH' | 'LIVE_TURN_OPEN' | 'SESSION_LIVE'
  | 'LEASE_FENCED' | 'FORMAT_UNSUPPORTED' | 'INVALID_STORED_EVENT' | 'NOT_JSON' | 'INVALID_EVENT'
  | 'INVALID_HEADER' | 'INVALID_SESSION_ID' | 'INVALID_ARGUMENT' | 'CORRUPTION' | 'TOO_LARGE'
  | 'QUOTA_EXCEEDED' | 'UNAUTHENTICATED' | 'PERMISSION_DENIED' | 'NO_LEADER' | 'SHUTTING_DOWN'
  | 'OUTCOME_UNKNOWN'

/** The ErrorInfo domain of the store's errors. */
export const ERROR_DOMAIN = 'sessionstore'

/**
 * An rpc's failure. `reason` is set when the server attached the store's
 * ErrorInfo; clients branch on it, never on the text. A failure is definite
 * (the call certainly changed nothing) only when it has a reason other than
 * OUTCOME_UNKNOWN; everything else — a transport error, a timeout, a broken
 * stream, OUTCOME_UNKNOWN — leaves the outcome unknown.
 */
export class SessionStoreError extends Error {
  readonly code: Code
  readonly reason: Reason | undefined
  /** The ErrorInfo metadata, if any. */
  readonly metadata: Readonly<Record<string, string>>
  /** The endpoint that answered (or failed to). */
  readonly endpoint: string

  constructor(code: Code, message: string, options: { reason?: Reason; metadata?: Record<string, string>; endpoint?: string; cause?: unknown } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause })
    this.name = 'SessionStoreError'
    this.code = code
    this.reason = options.reason
    this.metadata = options.metadata ?? {}
    this.endpoint = options.endpoint ?? ''
  }

  /** The call certainly did not take effect (a reason other than OUTCOME_UNKNOWN). */
  get definite(): boolean {
    return this.reason !== undefined && this.reason !== 'OUTCOME_UNKNOWN'
  }
}

/** The Connect code of an HTTP status when the body is not a Connect error. */
export function codeForHTTPStatus(status: number): Code {
  switch (status) {
    case 400: return 'internal'
    case 401: return 'unauthenticated'
    case 403: return 'permission_denied'
    case 404: return 'unimplemented'
    case 429: case 502: case 503: case 504: return 'unavailable'
    default: return 'unknown'
  }
}

/**
 * Builds the error of a Connect error object ({code, message, details}),
 * reading the store's reason from a google.rpc.ErrorInfo detail.
 */
export function fromConnectError(v: JsonValue | undefined, endpoint: string, fallback: Code): SessionStoreError {
  let o
  try {
    o = asObject(v, 'error')
  } catch {
    return new SessionStoreError(fallback, 'malformed error', { endpoint })
  }
  const code = typeof o.code === 'string' && (CODES as readonly string[]).includes(o.code) ? o.code as Code : fallback
  const message = typeof o.message === 'string' ? o.message : ''
  let reason: Reason | undefined
  let metadata: Record<string, string> | undefined
  const details = Array.isArray(o.details) ? o.details : []
  for (const d of details) {
    if (d === null || typeof d !== 'object' || Array.isArray(d)) continue
    if (d.type !== 'google.rpc.ErrorInfo' || typeof d.value !== 'string') continue
    try {
      const info = decodeErrorInfo(decodeBase64(d.value))
      if (info.domain === ERROR_DOMAIN && info.reason !== '') {
        reason = info.reason as Reason
        metadata = info.metadata
        break
      }
    } catch {
      // A detail that does not decode is skipped, as an unknown one is.
    }
  }
  return new SessionStoreError(code, message, { reason, metadata, endpoint })
}

/** google.rpc.ErrorInfo: reason = 1, domain = 2, map<string, string> metadata = 3. */
export function decodeErrorInfo(b: Uint8Array): { reason: string; domain: string; metadata: Record<string, string> } {
  const out = { reason: '', domain: '', metadata: {} as Record<string, string> }
  for (const [field, value] of fields(b)) {
    if (field === 1) out.reason = utf8(value)
    else if (field === 2) out.domain = utf8(value)
    else if (field === 3) {
      let k = ''
      let v = ''
      for (const [f, e] of fields(value)) {
        if (f === 1) k = utf8(e)
        else if (f === 2) v = utf8(e)
      }
      out.metadata[k] = v
    }
  }
  return out
}

const decoder = new TextDecoder('utf-8', { fatal: true })
function utf8(b: Uint8Array): string { return decoder.decode(b) }

/** The length-delimited fields of a protobuf message; other wire types are skipped. */
function * fields(b: Uint8Array): Generator<[number, Uint8Array]> {
  let i = 0
  const varint = (): number => {
    let n = 0
    let mul = 1
    for (;;) {
      if (i >= b.length) throw new Error('truncated varint')
      const c = b[i++]
      n += (c & 0x7f) * mul
      if ((c & 0x80) === 0) return n
      mul *= 128
      if (mul > 2 ** 56) throw new Error('varint too long')
    }
  }
  while (i < b.length) {
    const key = varint()
    const field = Math.floor(key / 8)
    switch (key & 7) {
      case 0: varint(); break
      case 1: i += 8; break
      case 5: i += 4; break
      case 2: {
        const n = varint()
        if (i + n > b.length) throw new Error('truncated field')
        yield [field, b.subarray(i, i + n)]
        i += n
        break
      }
      default: throw new Error(`unsupported wire type ${key & 7}`)
    }
  }
}
