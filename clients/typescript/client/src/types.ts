// The messages of api/sessionpb/session.proto (docs/api.md), as TypeScript
// types. Field names are the JSON names (lowerCamelCase). 64-bit integers are
// JavaScript numbers here (they travel as strings and are checked to be safe
// integers on the way in); events are JSON text, one string per event, kept
// exactly as stored.

/** `enum Consistency`: how fresh a read must be. */
export type Consistency = 'LINEARIZABLE' | 'STALE'

/** `enum Validation`: how a Create or Append is checked (docs/api.md#validation). */
export type Validation = 'VALIDATION_STRICT' | 'VALIDATION_REFERENCE'

/** `enum ListOrder`: by id (the default) or by last append, newest first (docs/api.md#listing). */
export type ListOrder = 'LIST_ORDER_ID' | 'LIST_ORDER_LAST_APPEND'

/** `enum Outcome` of PlanMode.Set. */
export type Outcome = 'OUTCOME_UNSPECIFIED' | 'COMMITTED' | 'QUEUED' | 'CANCELLED' | 'NOOP'

export interface SessionHeader {
  version: number
  id: string
  /** Unix ms. */
  createdAt: number
  cwd?: string
  parentSession?: string
  seedLength?: number
  origin?: string
  delegationDepth?: number
  agentPreset?: string
}

export interface SessionView {
  header?: SessionHeader
  /** The balanced view's events, one JSON text each. */
  events: string[]
  revision: string
  /** This call durably committed a crash repair. */
  repaired: boolean
  /** The seq the next append must use. */
  nextSeq: number
}

export interface Lease {
  sessionId: string
  owner: string
  epoch: number
  /** Leader time, Unix ms. */
  expiresAtUnixMs: number
}

// --- SessionPersistence ---

export interface LocateRequest { header: SessionHeader }
export interface LocateResponse { kind: string; path: string; url: string }

export interface CreateRequest { header: SessionHeader; requestId?: string; validation?: Validation }
export interface CreateResponse {
  /** Absent from servers older than validation. */
  readable?: boolean
  unreadableReason: string
  unreadableMessage: string
}

export interface AppendRequest {
  sessionId: string
  events: string[]
  leaseEpoch?: number
  expectedRevision?: string
  validation?: Validation
}
export interface AppendResponse {
  revision: string
  nextSeq: number
  duplicate: boolean
  readable?: boolean
  unreadableReason: string
  unreadableMessage: string
}

export interface LoadRequest { sessionId: string; requestId?: string }
export interface InspectRequest { sessionId: string; consistency?: Consistency }
export interface PrepareRequest { sessionId: string; owner: string; ttlMs: number; requestId?: string }
export interface PrepareResponse { view: SessionView; lease: Lease }
export interface KeepAliveRequest { lease: Lease; requestId?: string }
export interface KeepAliveResponse { lease: Lease }
export interface ReleaseRequest { sessionId: string; leaseEpoch: number; requestId?: string }
export interface DeleteRequest { sessionId: string; expectedRevision?: string; requestId?: string }
export interface DeleteResponse { revision: string }

export interface ReadFromRequest { sessionId: string; fromSeq: number; consistency?: Consistency }
/** ReadFrom's messages joined: the header, revision and next seq of the first, every event. */
export interface ReadFromResult { header?: SessionHeader; events: string[]; revision: string; nextSeq: number }

export interface ReadRawRequest { sessionId: string }
/** ReadRaw's messages joined: the artifact's text as bytes, and its metadata. */
export interface ReadRawResult { header?: SessionHeader; filename: string; content: Uint8Array; revision: string }

export interface ListRequest {
  consistency?: Consistency
  pageSize?: number
  /** A nextPageToken of a listing in the same order, unchanged. */
  pageToken?: string
  cwdPrefix?: string
  idPrefix?: string
  order?: ListOrder
}
export interface ListResponse { headers: SessionHeader[]; nextPageToken: string }
export interface SessionSnapshot {
  header: SessionHeader
  revision: string
  /** The seq the next append must use (the number of events). */
  nextSeq: number
  /** Leader time of the last append or repair, Unix ms (the creation time on older records). */
  lastAppendUnixMs: number
  /** A lease is live at the time of the read. */
  leaseHeld: boolean
  /** The last session/title event's title, cut to 256 bytes ("" if none; "" on every session until the cluster's state is in format 5). */
  title: string
}
export interface ListSnapshotsResponse { snapshots: SessionSnapshot[]; nextPageToken: string }

export interface WatchRequest { sessionId: string; fromSeq?: number }
export interface WatchResponse { events: string[]; revision: string; appliedIndex: number }

// --- PlanMode ---

export interface PlanGetRequest { sessionId: string }
export interface PlanGetResponse { active: boolean; pending?: boolean; nextSeq: number }
export interface PlanSetRequest { sessionId: string; active: boolean; leaseEpoch?: number; expectedNextSeq?: number; requestId?: string }
export interface PlanSetResponse { outcome: Outcome; appendedEvents: string[]; nextSeq: number; revision: string }
export interface PlanPreStepRequest { sessionId: string; leaseEpoch?: number; expectedNextSeq?: number; requestId?: string }
export interface PlanPreStepResponse { active: boolean; appendedEvents: string[]; notices: string[]; nextSeq: number; revision: string }
export interface PlanCommandRequest {
  sessionId: string
  rawInput: string
  imageBlocks?: string[]
  leaseEpoch?: number
  expectedNextSeq?: number
  requestId?: string
}
export interface PlanCommandResponse {
  kind: string
  text: string
  steerText?: string
  appendedEvents: string[]
  nextSeq: number
  steerContent: string
  revision: string
}
export interface AnswerItem { id: string; selected?: string[]; custom?: string }
export interface ReviewAnswer { answers?: AnswerItem[]; dismissed?: boolean }
export interface PlanExitRequest { sessionId: string; plan: string; answer?: ReviewAnswer; leaseEpoch?: number; requestId?: string }
export interface PlanExitResponse { approved: boolean; text: string; isError: boolean; needsReview: boolean; reviewQuestion: string }
export interface PlanProjectionRequest { sessionId: string }
export interface PlanProjectionResponse { active: boolean; pending: boolean }

// --- Cluster ---

export interface StatusResponse {
  nodeId: string
  state: string
  leaderId: string
  leaderAddress: string
  term: number
  commitIndex: number
  appliedIndex: number
  clusterId: string
}
/**
 * One server of the configuration. The optional fields are what the member
 * gossips about itself (about a second old; the serving node's own are live),
 * absent when the serving node does not know them.
 */
export interface Member {
  nodeId: string
  raftAddress: string
  apiAddress: string
  suffrage: string
  health: string
  appliedIndex?: number
  /** Since it last heard from the leader: 0 on the leader; peers' in whole seconds. */
  lastContactMs?: number
  /** Peers' in whole MiB. */
  diskFreeBytes?: number
  diskLow?: boolean
  commandVersion?: number
}
export interface MembersResponse { members: Member[] }

export interface BackupMeta {
  clusterId: string
  appliedIndex: number
  term: number
  timeUnixMs: number
  dbBytes: number
  nodeId: string
  stateFormat: number
}
export interface BackupTrailer { dbBytes: number; streamBytes: number; dbSha256: Uint8Array }
/** One message of Backup: exactly one part is set. */
export interface BackupChunk { meta?: BackupMeta; data?: Uint8Array; trailer?: BackupTrailer }
