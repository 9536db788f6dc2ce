// Protobuf's canonical JSON mapping for this API, both ways. Requests are
// typed objects whose 64-bit integer fields are numbers; on the wire those
// fields are strings. Responses leave out fields at their default value, so
// every decoder fills them in.

import type * as t from './types.js'

export type JsonValue = null | boolean | number | string | JsonValue[] | JsonObject
export interface JsonObject { [key: string]: JsonValue }

/** The 64-bit integer fields of the API's messages, by JSON name. */
const INT64_FIELDS = new Set([
  'createdAt', 'seedLength', 'nextSeq', 'epoch', 'expiresAtUnixMs', 'ttlMs', 'fromSeq', 'leaseEpoch',
  'appliedIndex', 'expectedNextSeq', 'term', 'commitIndex', 'timeUnixMs', 'dbBytes', 'streamBytes',
  'lastAppendUnixMs', 'lastContactMs', 'diskFreeBytes',
])

/** A request in JSON text: int64 fields as decimal strings, undefined fields left out. */
export function encodeRequest(req: object): string {
  return JSON.stringify(req, (key, value: unknown) => {
    if (INT64_FIELDS.has(key) && typeof value === 'number') {
      if (!Number.isSafeInteger(value)) throw new TypeError(`${key} must be a safe integer, got ${String(value)}`)
      return String(value)
    }
    return value
  })
}

/** Raised when a response does not have the shape this API gives it. */
export class DecodeError extends Error {
  constructor(message: string) {
    super(`malformed response: ${message}`)
    this.name = 'DecodeError'
  }
}

export function asObject(v: JsonValue | undefined, what: string): JsonObject {
  if (v === undefined || v === null) return {}
  if (typeof v !== 'object' || Array.isArray(v)) throw new DecodeError(`${what} is not an object`)
  return v
}

function str(o: JsonObject, k: string): string {
  const v = o[k]
  if (v === undefined || v === null) return ''
  if (typeof v !== 'string') throw new DecodeError(`${k} is not a string`)
  return v
}

function optStr(o: JsonObject, k: string): string | undefined {
  return o[k] === undefined || o[k] === null ? undefined : str(o, k)
}

function int(o: JsonObject, k: string): number {
  const v = o[k]
  if (v === undefined || v === null) return 0
  const n = typeof v === 'string' && /^-?\d+$/.test(v) ? Number(v) : v
  if (typeof n !== 'number' || !Number.isSafeInteger(n)) throw new DecodeError(`${k} is not a safe integer`)
  return n
}

function optInt(o: JsonObject, k: string): number | undefined {
  return o[k] === undefined || o[k] === null ? undefined : int(o, k)
}

function bool(o: JsonObject, k: string): boolean {
  const v = o[k]
  if (v === undefined || v === null) return false
  if (typeof v !== 'boolean') throw new DecodeError(`${k} is not a boolean`)
  return v
}

function optBool(o: JsonObject, k: string): boolean | undefined {
  return o[k] === undefined || o[k] === null ? undefined : bool(o, k)
}

function strings(o: JsonObject, k: string): string[] {
  const v = o[k]
  if (v === undefined || v === null) return []
  if (!Array.isArray(v) || v.some(e => typeof e !== 'string')) throw new DecodeError(`${k} is not a list of strings`)
  return v as string[]
}

function list<T>(o: JsonObject, k: string, each: (v: JsonObject) => T): T[] {
  const v = o[k]
  if (v === undefined || v === null) return []
  if (!Array.isArray(v)) throw new DecodeError(`${k} is not a list`)
  return v.map(e => each(asObject(e, k)))
}

/** Decodes protobuf JSON bytes (standard or URL-safe base64). */
export function decodeBase64(s: string): Uint8Array {
  const bin = atob(s.replace(/-/g, '+').replace(/_/g, '/'))
  const out = new Uint8Array(bin.length)
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i)
  return out
}

export function header(v: JsonValue | undefined): t.SessionHeader {
  const o = asObject(v, 'header')
  const h: t.SessionHeader = { version: int(o, 'version'), id: str(o, 'id'), createdAt: int(o, 'createdAt') }
  const cwd = optStr(o, 'cwd'); if (cwd !== undefined) h.cwd = cwd
  const parent = optStr(o, 'parentSession'); if (parent !== undefined) h.parentSession = parent
  const seed = optInt(o, 'seedLength'); if (seed !== undefined) h.seedLength = seed
  const origin = optStr(o, 'origin'); if (origin !== undefined) h.origin = origin
  const depth = optInt(o, 'delegationDepth'); if (depth !== undefined) h.delegationDepth = depth
  const preset = optStr(o, 'agentPreset'); if (preset !== undefined) h.agentPreset = preset
  return h
}

function optHeader(o: JsonObject, k: string): t.SessionHeader | undefined {
  return o[k] === undefined || o[k] === null ? undefined : header(o[k])
}

export function view(v: JsonValue | undefined): t.SessionView {
  const o = asObject(v, 'view')
  return {
    header: optHeader(o, 'header'),
    events: strings(o, 'events'),
    revision: str(o, 'revision'),
    repaired: bool(o, 'repaired'),
    nextSeq: int(o, 'nextSeq'),
  }
}

export function lease(v: JsonValue | undefined): t.Lease {
  const o = asObject(v, 'lease')
  return { sessionId: str(o, 'sessionId'), owner: str(o, 'owner'), epoch: int(o, 'epoch'), expiresAtUnixMs: int(o, 'expiresAtUnixMs') }
}

export function locateResponse(v: JsonValue): t.LocateResponse {
  const o = asObject(v, 'response')
  return { kind: str(o, 'kind'), path: str(o, 'path'), url: str(o, 'url') }
}

export function createResponse(v: JsonValue): t.CreateResponse {
  const o = asObject(v, 'response')
  return { readable: optBool(o, 'readable'), unreadableReason: str(o, 'unreadableReason'), unreadableMessage: str(o, 'unreadableMessage') }
}

export function appendResponse(v: JsonValue): t.AppendResponse {
  const o = asObject(v, 'response')
  return {
    revision: str(o, 'revision'),
    nextSeq: int(o, 'nextSeq'),
    duplicate: bool(o, 'duplicate'),
    readable: optBool(o, 'readable'),
    unreadableReason: str(o, 'unreadableReason'),
    unreadableMessage: str(o, 'unreadableMessage'),
  }
}

export function prepareResponse(v: JsonValue): t.PrepareResponse {
  const o = asObject(v, 'response')
  return { view: view(o.view), lease: lease(o.lease) }
}

/** One SessionViewPart of LoadStream, InspectStream or PrepareStream. */
export function viewPart(v: JsonValue): { view: t.SessionView; lease?: t.Lease } {
  const o = asObject(v, 'response')
  return { view: view(o.viewPart), lease: o.lease === undefined || o.lease === null ? undefined : lease(o.lease) }
}

export function keepAliveResponse(v: JsonValue): t.KeepAliveResponse {
  return { lease: lease(asObject(v, 'response').lease) }
}

export function deleteResponse(v: JsonValue): t.DeleteResponse {
  return { revision: str(asObject(v, 'response'), 'revision') }
}

export function readFromPart(v: JsonValue): t.ReadFromResult {
  const o = asObject(v, 'response')
  return { header: optHeader(o, 'header'), events: strings(o, 'events'), revision: str(o, 'revision'), nextSeq: int(o, 'nextSeq') }
}

export function readRawPart(v: JsonValue): { header?: t.SessionHeader; filename: string; content: Uint8Array; revision: string } {
  const o = asObject(v, 'response')
  const content = str(o, 'content')
  return { header: optHeader(o, 'header'), filename: str(o, 'filename'), content: decodeBase64(content), revision: str(o, 'revision') }
}

export function listResponse(v: JsonValue): t.ListResponse {
  const o = asObject(v, 'response')
  return { headers: list(o, 'headers', header), nextPageToken: str(o, 'nextPageToken') }
}

export function listSnapshotsResponse(v: JsonValue): t.ListSnapshotsResponse {
  const o = asObject(v, 'response')
  return {
    snapshots: list(o, 'snapshots', s => ({
      header: header(s.header), revision: str(s, 'revision'), nextSeq: int(s, 'nextSeq'),
      lastAppendUnixMs: int(s, 'lastAppendUnixMs'), leaseHeld: bool(s, 'leaseHeld'), title: str(s, 'title'),
    })),
    nextPageToken: str(o, 'nextPageToken'),
  }
}

export function watchResponse(v: JsonValue): t.WatchResponse {
  const o = asObject(v, 'response')
  return { events: strings(o, 'events'), revision: str(o, 'revision'), appliedIndex: int(o, 'appliedIndex') }
}

function outcome(o: JsonObject): t.Outcome {
  const v = o.outcome
  if (v === undefined || v === null || v === 0) return 'OUTCOME_UNSPECIFIED'
  const names: t.Outcome[] = ['OUTCOME_UNSPECIFIED', 'COMMITTED', 'QUEUED', 'CANCELLED', 'NOOP']
  if (typeof v === 'number' && names[v] !== undefined) return names[v]
  if (typeof v === 'string' && (names as string[]).includes(v)) return v as t.Outcome
  throw new DecodeError('outcome is not an Outcome')
}

export function planGetResponse(v: JsonValue): t.PlanGetResponse {
  const o = asObject(v, 'response')
  return { active: bool(o, 'active'), pending: optBool(o, 'pending'), nextSeq: int(o, 'nextSeq') }
}

export function planSetResponse(v: JsonValue): t.PlanSetResponse {
  const o = asObject(v, 'response')
  return { outcome: outcome(o), appendedEvents: strings(o, 'appendedEvents'), nextSeq: int(o, 'nextSeq'), revision: str(o, 'revision') }
}

export function planPreStepResponse(v: JsonValue): t.PlanPreStepResponse {
  const o = asObject(v, 'response')
  return {
    active: bool(o, 'active'), appendedEvents: strings(o, 'appendedEvents'), notices: strings(o, 'notices'),
    nextSeq: int(o, 'nextSeq'), revision: str(o, 'revision'),
  }
}

export function planCommandResponse(v: JsonValue): t.PlanCommandResponse {
  const o = asObject(v, 'response')
  return {
    kind: str(o, 'kind'), text: str(o, 'text'), steerText: optStr(o, 'steerText'),
    appendedEvents: strings(o, 'appendedEvents'), nextSeq: int(o, 'nextSeq'),
    steerContent: str(o, 'steerContent'), revision: str(o, 'revision'),
  }
}

export function planExitResponse(v: JsonValue): t.PlanExitResponse {
  const o = asObject(v, 'response')
  return {
    approved: bool(o, 'approved'), text: str(o, 'text'), isError: bool(o, 'isError'),
    needsReview: bool(o, 'needsReview'), reviewQuestion: str(o, 'reviewQuestion'),
  }
}

export function planProjectionResponse(v: JsonValue): t.PlanProjectionResponse {
  const o = asObject(v, 'response')
  return { active: bool(o, 'active'), pending: bool(o, 'pending') }
}

export function statusResponse(v: JsonValue): t.StatusResponse {
  const o = asObject(v, 'response')
  return {
    nodeId: str(o, 'nodeId'), state: str(o, 'state'), leaderId: str(o, 'leaderId'), leaderAddress: str(o, 'leaderAddress'),
    term: int(o, 'term'), commitIndex: int(o, 'commitIndex'), appliedIndex: int(o, 'appliedIndex'), clusterId: str(o, 'clusterId'),
  }
}

export function membersResponse(v: JsonValue): t.MembersResponse {
  const o = asObject(v, 'response')
  return {
    members: list(o, 'members', m => ({
      nodeId: str(m, 'nodeId'), raftAddress: str(m, 'raftAddress'), apiAddress: str(m, 'apiAddress'),
      suffrage: str(m, 'suffrage'), health: str(m, 'health'),
      appliedIndex: optInt(m, 'appliedIndex'), lastContactMs: optInt(m, 'lastContactMs'),
      diskFreeBytes: optInt(m, 'diskFreeBytes'), diskLow: optBool(m, 'diskLow'), commandVersion: optInt(m, 'commandVersion'),
    })),
  }
}

export function backupChunk(v: JsonValue): t.BackupChunk {
  const o = asObject(v, 'response')
  if (o.meta !== undefined && o.meta !== null) {
    const m = asObject(o.meta, 'meta')
    return {
      meta: {
        clusterId: str(m, 'clusterId'), appliedIndex: int(m, 'appliedIndex'), term: int(m, 'term'),
        timeUnixMs: int(m, 'timeUnixMs'), dbBytes: int(m, 'dbBytes'), nodeId: str(m, 'nodeId'), stateFormat: int(m, 'stateFormat'),
      },
    }
  }
  if (o.trailer !== undefined && o.trailer !== null) {
    const tr = asObject(o.trailer, 'trailer')
    return { trailer: { dbBytes: int(tr, 'dbBytes'), streamBytes: int(tr, 'streamBytes'), dbSha256: decodeBase64(str(tr, 'dbSha256')) } }
  }
  return { data: decodeBase64(str(o, 'data')) }
}
