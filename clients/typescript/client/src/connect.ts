// The Connect protocol over fetch (https://connectrpc.com/docs/protocol):
// unary calls as POST application/json, server streams as POST
// application/connect+json with enveloped messages. One attempt against one
// endpoint; retries and failover are the client's (client.ts).

import type { JsonValue } from './codec.js'
import { codeForHTTPStatus, fromConnectError, SessionStoreError } from './errors.js'

/** Flag of the end-of-stream envelope. */
const END_STREAM = 0x02
/** Flag of a compressed envelope (never asked for by this client). */
const COMPRESSED = 0x01

export interface Frame {
  flags: number
  data: Uint8Array
}

/**
 * Splits a byte stream into Connect envelopes: 1 flag byte, a 4-byte
 * big-endian length, then that many bytes. push() takes the bytes as they
 * arrive and returns every envelope completed by them.
 */
export class EnvelopeReader {
  private buf = new Uint8Array(0)

  push(chunk: Uint8Array): Frame[] {
    if (this.buf.length === 0) {
      this.buf = chunk
    } else {
      const joined = new Uint8Array(this.buf.length + chunk.length)
      joined.set(this.buf)
      joined.set(chunk, this.buf.length)
      this.buf = joined
    }
    const frames: Frame[] = []
    while (this.buf.length >= 5) {
      const len = ((this.buf[1] << 24) >>> 0) + (this.buf[2] << 16) + (this.buf[3] << 8) + this.buf[4]
      if (this.buf.length < 5 + len) break
      frames.push({ flags: this.buf[0], data: this.buf.slice(5, 5 + len) })
      this.buf = this.buf.subarray(5 + len)
    }
    return frames
  }

  /** Bytes of an envelope not yet complete. */
  get pending(): number { return this.buf.length }
}

/** One envelope around a message's JSON text. */
export function envelope(json: string, flags = 0): Uint8Array {
  const data = new TextEncoder().encode(json)
  const out = new Uint8Array(5 + data.length)
  out[0] = flags
  out[1] = (data.length >>> 24) & 0xff
  out[2] = (data.length >>> 16) & 0xff
  out[3] = (data.length >>> 8) & 0xff
  out[4] = data.length & 0xff
  out.set(data, 5)
  return out
}

export interface CallOptions {
  headers: Record<string, string>
  signal: AbortSignal
  /** Connect-Timeout-Ms, told to the server (0: none). */
  timeoutMs: number
  /** Sees the response headers of every answer, errors included (the client hints). */
  onHeaders?: (h: Headers) => void
}

const decoder = new TextDecoder()

function parseJSON(text: string, endpoint: string): JsonValue {
  try {
    return JSON.parse(text) as JsonValue
  } catch {
    throw new SessionStoreError('internal', `response is not JSON: ${text.slice(0, 200)}`, { endpoint })
  }
}

function requestHeaders(o: CallOptions, contentType: string): Record<string, string> {
  const h: Record<string, string> = { ...o.headers, 'content-type': contentType, 'connect-protocol-version': '1' }
  if (o.timeoutMs > 0) h['connect-timeout-ms'] = String(Math.ceil(o.timeoutMs))
  return h
}

/** Whether a Connect error object's code came with the response (JSON body). */
async function httpError(res: Response, endpoint: string): Promise<SessionStoreError> {
  const text = await res.text()
  const fallback = codeForHTTPStatus(res.status)
  const ct = res.headers.get('content-type') ?? ''
  if (ct.startsWith('application/json')) {
    try {
      return fromConnectError(JSON.parse(text) as JsonValue, endpoint, fallback)
    } catch {
      // not JSON after all: fall through
    }
  }
  return new SessionStoreError(fallback, `HTTP ${res.status}: ${text.slice(0, 200)}`, { endpoint })
}

/** A unary call: the response message, or a SessionStoreError. */
export async function unary(endpoint: string, path: string, body: string, o: CallOptions): Promise<JsonValue> {
  const res = await fetch(endpoint + path, { method: 'POST', headers: requestHeaders(o, 'application/json'), body, signal: o.signal })
  o.onHeaders?.(res.headers)
  if (res.status !== 200) throw await httpError(res, endpoint)
  return parseJSON(await res.text(), endpoint)
}

/**
 * A server-streaming call: yields each message; ends normally after an
 * end-of-stream envelope without an error, throws its error otherwise. A body
 * that ends without that envelope is a broken stream (code unavailable, no
 * reason: its outcome is unknown).
 */
export async function * serverStream(endpoint: string, path: string, body: string, o: CallOptions): AsyncGenerator<JsonValue> {
  const res = await fetch(endpoint + path, {
    method: 'POST', headers: requestHeaders(o, 'application/connect+json'), body: envelope(body), signal: o.signal,
  })
  o.onHeaders?.(res.headers)
  if (res.status !== 200 || res.body === null) throw await httpError(res, endpoint)
  const reader = res.body.getReader()
  const frames = new EnvelopeReader()
  try {
    for (;;) {
      const { done, value } = await reader.read()
      if (done) break
      if (value === undefined) continue
      for (const f of frames.push(value)) {
        if ((f.flags & COMPRESSED) !== 0) throw new SessionStoreError('internal', 'compressed envelope, none was asked for', { endpoint })
        const msg = parseJSON(decoder.decode(f.data), endpoint)
        if ((f.flags & END_STREAM) !== 0) {
          const end = msg !== null && typeof msg === 'object' && !Array.isArray(msg) ? msg : {}
          if (end.error !== undefined && end.error !== null) throw fromConnectError(end.error, endpoint, 'unknown')
          return
        }
        yield msg
      }
    }
  } finally {
    reader.cancel().catch(() => { /* the stream is done with either way */ })
  }
  throw new SessionStoreError('unavailable', 'stream ended without its end-of-stream message', { endpoint })
}
