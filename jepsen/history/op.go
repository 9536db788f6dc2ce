// Package history is the record of a Jepsen-style run: every operation a
// client invoked and how it completed, every fault the nemesis injected, and
// the final state read from each node. Checkers and reports read it; the
// runner writes it, one JSON object per line, as the run goes.
package history

import (
	"encoding/json"
	"time"
)

// Type is the kind of a record (Jepsen's :invoke, :ok, :fail, :info).
type Type string

const (
	// Invoke: a client sent the operation.
	Invoke Type = "invoke"
	// OK: the operation took effect (the server acknowledged it).
	OK Type = "ok"
	// Fail: the operation definitely did not take effect (docs/design.md
	// "Retries and outcomes": an ErrorInfo reason other than OUTCOME_UNKNOWN).
	Fail Type = "fail"
	// Info: the outcome is unknown (it may or may not have taken effect);
	// for the nemesis, a fault action.
	Info Type = "info"
)

// F is what an operation does.
type F string

const (
	FAppend    F = "append"     // Append a batch at an expected seq
	FRead      F = "read"       // linearizable read of the whole session log
	FCreate    F = "create"     // Create (concurrent creators)
	FPrepare   F = "prepare"    // take ownership (lease) of a session; repairs
	FLoad      F = "load"       // Load: commits the crash repair of a cold session
	FKeepAlive F = "keep-alive" // KeepAlive of a lease (writes no event)
	FSetMode   F = "set-mode"   // PlanMode.Set
	FPreStep   F = "pre-step"   // PlanMode.PreStep
	FGetMode   F = "get-mode"   // PlanMode.Get
	FNemesis   F = "nemesis"    // a fault injected or healed (process NemesisProcess)
	FStatus    F = "status"     // a poll of each node's Raft state (process NemesisProcess)
)

// NemesisProcess is the process number of nemesis and status records.
const NemesisProcess = -1

// Op is one record. An operation is two records with the same ID: its
// Invoke and its completion (OK, Fail or Info). A process runs one
// operation at a time; after an Info write it continues as a new process
// (Jepsen's crashed process), so an unknown write never overlaps the
// process's later operations.
type Op struct {
	Index   int    `json:"index"`
	ID      int    `json:"id"`             // pairs an invoke with its completion
	Time    int64  `json:"time"`           // nanoseconds since the run began
	Type    Type   `json:"type"`           //
	Process int    `json:"process"`        //
	F       F      `json:"f"`              //
	Node    string `json:"node,omitempty"` // the node the client sent the call to
	Session string `json:"session,omitempty"`

	// Append: the expected first seq and the identities of the events sent,
	// in order (Events[i] goes to Seq+i). Read: the identities of the whole
	// log in seq order (completion only). Create/Prepare/Load: unused.
	Seq    int64    `json:"seq,omitempty"`
	Events []string `json:"events,omitempty"`
	// Epoch is the lease epoch an append or plan call carried, or the epoch
	// a prepare was granted.
	Epoch uint64 `json:"epoch,omitempty"`
	Owner string `json:"owner,omitempty"` // prepare: the lease owner; create: the creator

	// Completion values.
	NextSeq  int64  `json:"next_seq,omitempty"`
	Revision string `json:"revision,omitempty"`
	Active   *bool  `json:"active,omitempty"`  // plan mode: fold (get-mode, pre-step, read), or the selection (set-mode invoke)
	Pending  *bool  `json:"pending,omitempty"` // get-mode
	Outcome  string `json:"outcome,omitempty"` // set-mode: COMMITTED, QUEUED, CANCELLED, NOOP
	// Appended: identities of events a plan-mode call appended (server-written).
	Appended  []string `json:"appended,omitempty"`
	Duplicate bool     `json:"duplicate,omitempty"`
	Reason    string   `json:"reason,omitempty"` // the ErrorInfo reason of a failure
	Error     string   `json:"error,omitempty"`

	// Nemesis and status records: free-form details (fault name, targets,
	// leader and term per node).
	Value json.RawMessage `json:"value,omitempty"`
}

// Duration is the op's time as a duration since the run began.
func (o Op) Duration() time.Duration { return time.Duration(o.Time) }

// Pair is an invoked operation with its completion; Complete is nil when the
// run ended before it completed (treated as Info).
type Pair struct {
	Invoke   Op
	Complete *Op
}

// Outcome is the completion type, Info when the operation never completed.
func (p Pair) Outcome() Type {
	if p.Complete == nil {
		return Info
	}
	return p.Complete.Type
}

// End is the completion time, or the given horizon when never completed.
func (p Pair) End(horizon int64) int64 {
	if p.Complete == nil {
		return horizon
	}
	return p.Complete.Time
}

// Pairs matches invocations with their completions by ID, in invocation
// order. Nemesis and status records (no invoke) are skipped.
func Pairs(ops []Op) []Pair {
	byID := map[int]int{}
	var out []Pair
	for _, o := range ops {
		switch {
		case o.Type == Invoke:
			byID[o.ID] = len(out)
			out = append(out, Pair{Invoke: o})
		default:
			if i, ok := byID[o.ID]; ok && out[i].Complete == nil {
				c := o
				out[i].Complete = &c
			}
		}
	}
	return out
}

// Final is the state read after the run healed: per node, per session, the
// identities of the log in seq order, its revision, and the bytes of the
// node's artifact (for convergence); and the linearizable final read.
type Final struct {
	// Logs[session] is the final linearizable read (through the leader).
	Logs map[string][]string `json:"logs"`
	// Revisions[session] is the revision of that read.
	Revisions map[string]string `json:"revisions,omitempty"`
	// Nodes[node][session] is each node's own applied copy (stale read).
	Nodes map[string]map[string]NodeCopy `json:"nodes"`
}

// NodeCopy is one node's copy of a session.
type NodeCopy struct {
	Events   []string `json:"events"`
	Revision string   `json:"revision"`
	// ArtifactSHA256 is the hex digest of the text of the node's artifact
	// ("" when it could not be read).
	ArtifactSHA256 string `json:"artifact_sha256,omitempty"`
}

// NemesisValue is the Value of a nemesis record (F = FNemesis, Process =
// NemesisProcess):
//
//	{"action":"inject"|"heal","fault":"isolate-leader","targets":["node2"],"ok":true,"error":"","note":""}
//
// Action "inject" starts a fault and "heal" undoes it (fault "all": every
// fault at the end of the run); OK reports whether the action took effect
// (Error says why not). Liveness counts a fault only when an inject record
// has OK true.
type NemesisValue struct {
	Action  string   `json:"action"`
	Fault   string   `json:"fault,omitempty"`
	Targets []string `json:"targets,omitempty"`
	OK      bool     `json:"ok"`
	Error   string   `json:"error,omitempty"`
	Note    string   `json:"note,omitempty"`
}

// Nemesis actions.
const (
	ActionInject = "inject"
	ActionHeal   = "heal"
)
