package sessionstore

// FormatVersion is the only log format this build reads (docs/events.md#format-version).
const FormatVersion = 0

// Header is a session's immutable metadata (docs/events.md#header). Optional
// fields are pointers: absent and zero are different things on disk (the header
// line omits absent fields, never writing null).
type Header struct {
	Version         int64
	ID              string
	CreatedAt       int64
	Cwd             *string
	ParentSession   *string
	SeedLength      *int64
	Origin          *string
	DelegationDepth *int64
	AgentPreset     *string
}

// Equal reports whether two headers carry the same fields.
func (h Header) Equal(o Header) bool {
	return h.Version == o.Version && h.ID == o.ID && h.CreatedAt == o.CreatedAt &&
		eqStr(h.Cwd, o.Cwd) && eqStr(h.ParentSession, o.ParentSession) &&
		eqInt(h.SeedLength, o.SeedLength) && eqStr(h.Origin, o.Origin) &&
		eqInt(h.DelegationDepth, o.DelegationDepth) && eqStr(h.AgentPreset, o.AgentPreset)
}

func eqStr(a, b *string) bool { return (a == nil) == (b == nil) && (a == nil || *a == *b) }
func eqInt(a, b *int64) bool  { return (a == nil) == (b == nil) && (a == nil || *a == *b) }

// Consistency selects how fresh a read must be.
type Consistency int

const (
	// Linearizable reflects every write acknowledged before the read began.
	Linearizable Consistency = 0
	// Stale serves this node's applied state.
	Stale Consistency = 1
)

// MaxSafeInteger is JavaScript's Number.MAX_SAFE_INTEGER (2^53-1): the largest
// integer every reader of the log can hold exactly.
const MaxSafeInteger = 1<<53 - 1

// Lease is an agent host's ownership of a session (docs/design.md "Ownership").
type Lease struct {
	SessionID       string
	Owner           string
	Epoch           uint64
	ExpiresAtUnixMs int64
}

// View is what Load, Inspect and Prepare return: the header, the balanced
// (legacy-normalised) events, and the revision they were read at.
type View struct {
	Header   Header
	Events   [][]byte
	Revision string
	// Repaired is true when this call durably committed a crash repair.
	Repaired bool
	// NextSeq is the seq the next append must use.
	NextSeq int64
	Lease   *Lease
}

// AppendResult is the outcome of a successful Append.
type AppendResult struct {
	Revision  string
	NextSeq   int64
	Duplicate bool
	// Unreadable is the error a read of the log now fails with, nil while it
	// reads. Only a ValidateReference write can leave a log unreadable.
	Unreadable *Error
}

// CreateResult is the answer to a Create.
type CreateResult struct {
	// Unreadable: as in AppendResult (a ValidateReference Create whose header
	// a read refuses).
	Unreadable *Error
}

// Validation is how a Create or Append is checked (docs/api.md "Validation").
type Validation int

const (
	// ValidateStrict refuses, with nothing written, a write after which a
	// read of the log would refuse it: the write rule is the read rule.
	ValidateStrict Validation = iota
	// ValidateReference keeps the reference harness's own write rules, which
	// accept logs a read refuses (unknown types, foreign format versions,
	// malformed shapes); the answer says when the log has become unreadable.
	ValidateReference
)

// Snapshot is one listed session: its header, current revision and what
// its record says of its activity.
type Snapshot struct {
	Header   Header
	Revision string
	// NextSeq is the seq the next append must use (the number of events).
	NextSeq int64
	// LastAppendUnixMs is the leader time of the last append or crash
	// repair (the creation time on records from before it was kept).
	LastAppendUnixMs int64
	// LeaseHeld is set when a lease is live at the time of the read.
	LeaseHeld bool
	// Title is the last session/title event's title, cut to 256 bytes (""
	// if none, and on every session before the state is in format 5).
	Title string
}

// ListOrder is the order of a listing.
type ListOrder int

const (
	// ListByID lists in session id order (bytes).
	ListByID ListOrder = 0
	// ListByLastAppend lists by last append, newest first, ties by id.
	ListByLastAppend ListOrder = 1
)

// ListQuery selects and pages a listing (List, ListSnapshots). A session
// is listed when it matches both prefixes.
type ListQuery struct {
	Consistency Consistency
	PageSize    int    // 0: the default
	PageToken   string // "": the first page; else a NextPageToken of the same order
	CwdPrefix   string
	IDPrefix    string
	Order       ListOrder
}

// WatchEvent is one message of a Watch stream: newly committed events (none
// for a progress message), the revision after them and the applied index.
type WatchEvent struct {
	Events       [][]byte
	Revision     string
	AppliedIndex uint64
}

// NodeStatus is one node's view of the cluster (the Cluster service's Status).
type NodeStatus struct {
	NodeID        string
	State         string // Leader, Follower, Candidate, Shutdown
	LeaderID      string
	LeaderAddress string // the leader's gRPC API address
	Term          uint64
	CommitIndex   uint64
	AppliedIndex  uint64
	ClusterID     string
}

// ClientHints tell a client where the leader and the other voters are
// (docs/api.md "Failover"): every answer carries them as response header
// metadata, so a client learns them without the Cluster service's admin
// permission. Addresses are the nodes' client addresses
// (--advertise-client-addr), each as "id=host:port".
type ClientHints struct {
	// NodeID is the serving node's id.
	NodeID string
	// Leader is the leader as "id=addr" ("" while none is known; "id=" when
	// its address is not known yet).
	Leader string
	// Endpoints lists the voters as "id=addr", comma-separated, in id order
	// (a voter whose address gossip has not told yet is left out).
	Endpoints string
}

// The response header metadata keys of the client hints, set on every
// answer (errors included) of the gRPC API.
const (
	HintNodeKey      = "sessionstore-node"
	HintLeaderKey    = "sessionstore-leader"
	HintEndpointsKey = "sessionstore-endpoints"
)

// Member is one server of the Raft configuration joined with gossip health.
type Member struct {
	NodeID      string
	RaftAddress string
	APIAddress  string
	Suffrage    string // Voter, Nonvoter
	Health      string // alive, suspect, dead, left, unknown

	// What the member gossips about itself (about a second old; the serving
	// node's own values are live), nil when not known: a member on an older
	// build, or not heard from in gossip yet.
	AppliedIndex   *uint64
	LastContactMs  *int64 // since it last heard from the leader; 0 on the leader
	DiskFreeBytes  *int64
	DiskLow        *bool
	CommandVersion *uint32
}

// Suffix is a read of a session's stored events from a seq on, with the
// revision and next seq of the log it was read from.
type Suffix struct {
	Header   Header
	Events   [][]byte
	Revision string
	NextSeq  int64
}
