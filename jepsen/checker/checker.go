// Package checker decides whether a recorded history (package
// jepsen/history) is consistent with the store's contract. Each checker is one
// exported function over an indexed History that returns a Result: "true"
// (no anomaly), "false" (an anomaly, with minimal plain-language witnesses)
// or "unknown" (the run cannot tell: a timeout, missing ground truth, or a run
// too weak to prove anything). Check runs them all and folds the verdicts into
// a Report.
//
// Everything except Linearizable is linear (or n log n) in the history.
// Every rule is sound: on a history of a correct store no checker returns
// "false". Where soundness needs an assumption about how the runner records
// things, the checker's doc comment states it.
//
// Facts the checkers rely on (docs/design.md "Retries and outcomes", docs/api.md):
//   - a session log is append-only; events are at seqs 0..n-1;
//   - a workload event's identity is its marker (p<process>-<n>), unique to
//     one logical append (an identical retry after an unknown outcome sends
//     the same markers again); server-written events have identities with a
//     ':' (history.Identity);
//   - Final.Logs[s] is a linearizable read taken after every other operation
//     of the run was invoked and after the cluster healed;
//   - an append is idempotent by content: a byte-identical re-send succeeds
//     with Duplicate=true before the lease and seq checks;
//   - a revision is <cluster-id>:<incarnation>:<raft index of the last change>
//     and changes exactly when the log grows (fsm writeFrame).
package checker

import (
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Valid is a checker's verdict.
type Valid string

const (
	True    Valid = "true"
	False   Valid = "false"
	Unknown Valid = "unknown"
)

// Witness is one piece of evidence for a verdict other than "true".
type Witness struct {
	Session string `json:"session,omitempty"`
	// Ops are the record indices (Op.Index) involved: for each operation its
	// invoke record and, when it completed, its completion record.
	Ops  []int  `json:"ops,omitempty"`
	Text string `json:"text"` // plain language
}

// Result is one checker's verdict.
type Result struct {
	Name      string         `json:"name"`
	Valid     Valid          `json:"valid"`
	Witnesses []Witness      `json:"witnesses,omitempty"`
	Stats     map[string]any `json:"stats,omitempty"`
}

// Report is every checker's verdict. Valid is "false" if any result is
// false, else "unknown" if any is unknown, else "true".
type Report struct {
	Valid   Valid    `json:"valid"`
	Results []Result `json:"results"`
}

// Result returns the result of the named checker (nil when absent).
func (r Report) Result(name string) *Result {
	for i := range r.Results {
		if r.Results[i].Name == name {
			return &r.Results[i]
		}
	}
	return nil
}

// Options tunes Check.
type Options struct {
	// MinOKBeforeFaults is how many OK client operations Liveness requires
	// before the first injected fault.
	MinOKBeforeFaults int
	// MinFaults is how many successfully injected faults Liveness requires.
	MinFaults int
	// LinearizableTimeout bounds the whole porcupine search (all sessions);
	// 0 means 60 s. A session not decided within it is "unknown".
	LinearizableTimeout time.Duration
	// MaxWitnesses caps the witnesses kept per checker (0 means 20); the rest
	// are counted in Stats["witnesses_omitted"].
	MaxWitnesses int
}

func (o Options) withDefaults() Options {
	if o.LinearizableTimeout <= 0 {
		o.LinearizableTimeout = 60 * time.Second
	}
	if o.MaxWitnesses <= 0 {
		o.MaxWitnesses = defaultMaxWitnesses
	}
	return o
}

const defaultMaxWitnesses = 20

// Checker names, as they appear in Result.Name and summary.json.
const (
	NameLost         = "lost"
	NameDuplicates   = "duplicates"
	NamePrefix       = "prefix"
	NameContiguous   = "contiguous"
	NamePhantom      = "phantom"
	NameLinearizable = "linearizable"
	NameRevisions    = "revisions"
	NameFencing      = "fencing"
	NameConverge     = "converge"
	NameLiveness     = "liveness"
	NameCreators     = "creators"
	NamePlanMode     = "plan-mode"
)

// Check indexes the history and runs every checker.
func Check(ops []history.Op, final history.Final, opt Options) Report {
	opt = opt.withDefaults()
	h := NewHistory(ops, final)
	h.maxWitnesses = opt.MaxWitnesses
	results := []Result{
		Lost(h),
		Duplicates(h),
		Prefix(h),
		Contiguous(h),
		Phantom(h),
		Linearizable(h, opt.LinearizableTimeout),
		Revisions(h),
		Fencing(h),
		Converge(h),
		Creators(h),
		PlanMode(h),
		Liveness(h, opt),
	}
	return Combine(results...)
}

// Combine folds results into a Report.
func Combine(results ...Result) Report {
	r := Report{Valid: True, Results: results}
	for _, res := range results {
		switch res.Valid {
		case False:
			r.Valid = False
		case Unknown:
			if r.Valid == True {
				r.Valid = Unknown
			}
		}
	}
	return r
}

// History is an indexed view of a run: the operations paired, grouped by
// session, with the final state. Checkers only read it.
type History struct {
	Ops   []history.Op
	Final history.Final
	// Pairs are the client operations (invoke + completion) in invocation
	// order; nemesis and status records are not in it.
	Pairs []history.Pair
	// Horizon is one nanosecond after the last record: the completion time
	// used for operations that never completed.
	Horizon int64

	sessions     map[string]*sessionView
	sessionNames []string // sorted
	maxWitnesses int
}

// sessionView is one session's operations and final log.
type sessionView struct {
	name     string
	pairs    []int // indices into History.Pairs, in invocation order
	final    []string
	hasFinal bool
	finalPos map[string][]int // identity -> seqs in the final log
}

// NewHistory indexes ops and final for the checkers.
func NewHistory(ops []history.Op, final history.Final) *History {
	h := &History{Ops: ops, Final: final, Pairs: history.Pairs(ops), sessions: map[string]*sessionView{}, maxWitnesses: defaultMaxWitnesses}
	for _, o := range ops {
		if o.Time >= h.Horizon {
			h.Horizon = o.Time + 1
		}
	}
	view := func(s string) *sessionView {
		v := h.sessions[s]
		if v == nil {
			v = &sessionView{name: s}
			h.sessions[s] = v
		}
		return v
	}
	for i, p := range h.Pairs {
		if p.Invoke.Session != "" {
			v := view(p.Invoke.Session)
			v.pairs = append(v.pairs, i)
		}
	}
	for s, log := range final.Logs {
		v := view(s)
		v.final, v.hasFinal = log, true
		v.finalPos = make(map[string][]int, len(log))
		for i, id := range log {
			v.finalPos[id] = append(v.finalPos[id], i)
		}
	}
	for _, copies := range final.Nodes {
		for s := range copies {
			view(s)
		}
	}
	for s := range h.sessions {
		h.sessionNames = append(h.sessionNames, s)
	}
	sort.Strings(h.sessionNames)
	return h
}

// nodeNames are the nodes with copies in Final, sorted.
func (h *History) nodeNames() []string {
	var ns []string
	for n := range h.Final.Nodes {
		ns = append(ns, n)
	}
	sort.Strings(ns)
	return ns
}

// recs are the record indices of operations, for Witness.Ops.
func recs(ps ...history.Pair) []int {
	var out []int
	for _, p := range ps {
		out = append(out, p.Invoke.Index)
		if p.Complete != nil {
			out = append(out, p.Complete.Index)
		}
	}
	return out
}

// verdict accumulates one checker's witnesses and verdict.
type verdict struct {
	name      string
	valid     Valid
	witnesses []Witness
	omitted   int
	max       int
	stats     map[string]any
}

func (h *History) newVerdict(name string) *verdict {
	max := h.maxWitnesses
	if max <= 0 {
		max = defaultMaxWitnesses
	}
	return &verdict{name: name, valid: True, max: max, stats: map[string]any{}}
}

func (v *verdict) add(w Witness) {
	if len(v.witnesses) < v.max {
		v.witnesses = append(v.witnesses, w)
	} else {
		v.omitted++
	}
}

// fail records an anomaly.
func (v *verdict) fail(session string, ops []int, format string, args ...any) {
	v.valid = False
	v.add(Witness{Session: session, Ops: ops, Text: fmt.Sprintf(format, args...)})
}

// unknown records why part of the check could not be decided.
func (v *verdict) unknown(session string, ops []int, format string, args ...any) {
	if v.valid == True {
		v.valid = Unknown
	}
	v.add(Witness{Session: session, Ops: ops, Text: fmt.Sprintf(format, args...)})
}

func (v *verdict) result() Result {
	if v.omitted > 0 {
		v.stats["witnesses_omitted"] = v.omitted
	}
	return Result{Name: v.name, Valid: v.valid, Witnesses: v.witnesses, Stats: v.stats}
}

// Plain-language helpers.

func secs(t int64) string { return fmt.Sprintf("%.1f s", float64(t)/1e9) }

// describe names an operation: "append p3-17 by process 4 on n2".
func describe(p history.Pair) string {
	o := p.Invoke
	var b strings.Builder
	b.WriteString(string(o.F))
	if o.F == history.FAppend && len(o.Events) > 0 {
		b.WriteString(" " + listIDs(o.Events, 3))
	}
	fmt.Fprintf(&b, " (process %d", o.Process)
	if o.Node != "" {
		b.WriteString(" on " + o.Node)
	}
	b.WriteString(")")
	return b.String()
}

// when is "invoked at 10.2 s, ok at 10.4 s".
func when(p history.Pair) string {
	if p.Complete == nil {
		return "invoked at " + secs(p.Invoke.Time) + ", never completed"
	}
	return fmt.Sprintf("invoked at %s, %s at %s", secs(p.Invoke.Time), p.Complete.Type, secs(p.Complete.Time))
}

func listIDs(ids []string, max int) string {
	if len(ids) <= max {
		return strings.Join(ids, ",")
	}
	return strings.Join(ids[:max], ",") + fmt.Sprintf(",… (%d events)", len(ids))
}

// at describes what a log holds at seq.
func at(log []string, seq int64) string {
	if seq < 0 || seq >= int64(len(log)) {
		return fmt.Sprintf("only %d events", len(log))
	}
	return fmt.Sprintf("%s at seq %d", log[seq], seq)
}

// ok is the completion of p when p completed OK.
func ok(p history.Pair) *history.Op {
	if p.Complete != nil && p.Complete.Type == history.OK {
		return p.Complete
	}
	return nil
}

// isClient reports whether a record is a client operation's record.
func isClient(o history.Op) bool {
	return o.Process != history.NemesisProcess && o.F != history.FNemesis && o.F != history.FStatus
}

// serverWriter reports whether an operation of kind f may append
// server-written events (anything that is not an append, a read, a create
// or a get-mode, including kinds this package does not know).
func serverWriter(f history.F) bool {
	switch f {
	case history.FAppend, history.FRead, history.FCreate, history.FGetMode, history.FNemesis, history.FStatus:
		return false
	}
	return true
}

// reportsAppended reports whether an OK operation of kind f reports every
// event it appended in Appended (empty = appended nothing): plan-mode calls
// do; Load and Prepare report closers only when Appended is non-empty.
func reportsAppended(c *history.Op) bool {
	switch c.F {
	case history.FSetMode, history.FPreStep:
		return true
	case history.FPrepare, history.FLoad:
		return len(c.Appended) > 0
	}
	return len(c.Appended) > 0 && c.NextSeq > 0
}

// foldPlanMode is the plan mode after ids: the last plan/mode=<v> wins,
// default inactive.
func foldPlanMode(ids []string) bool {
	active := false
	for _, id := range ids {
		if v, ok := planModeValue(id); ok {
			active = v
		}
	}
	return active
}

// planModeValue parses a plan/mode identity ("plan/mode=true:<digest>").
func planModeValue(id string) (bool, bool) {
	switch {
	case strings.HasPrefix(id, "plan/mode=true:"):
		return true, true
	case strings.HasPrefix(id, "plan/mode=false:"):
		return false, true
	}
	return false, false
}
