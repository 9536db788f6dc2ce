package checker

import (
	"fmt"
	"io"
	"math"
	"runtime"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Linearizable checks each session on its own with porcupine (sessions are
// independent, so this is exact) against a sequential model whose state is
// the session's identity list. The model, per operation:
//
//   - append OK, not Duplicate: legal iff len(state) == Seq; state += Events.
//   - append OK, Duplicate: legal iff len(state) >= Seq+len(Events) (the
//     events were already stored; no change). (Which events sit there is
//     checked by Lost against the final log.)
//   - append Fail: dropped (it had no effect).
//   - append Info or never completed (Return = +inf), patched from the final
//     log F: if none of its identities is anywhere in F it never took effect
//     and is dropped (F is read after every operation was invoked and logs
//     only grow); if all of them are in F at Seq+i and no other append sent
//     any of them, it certainly applied: "len(state) == Seq; state +=
//     Events", with an unknown time; otherwise it may or may not have
//     applied: {state} or, when len(state) == Seq, also {state+Events}.
//   - read OK: state == Events. get-mode OK: len(state) == NextSeq and
//     fold(state) == Active. Failed, unknown reads and get-modes: dropped.
//   - pre-step / set-mode OK (they report what they appended, empty =
//     nothing), and load / prepare OK with a non-empty Appended: legal iff
//     len(state) == NextSeq-len(Appended); state += Appended; for pre-step
//     fold(new state) == Active when Active is set.
//   - create: dropped (it writes no event).
//   - every other server-writing operation (load / prepare OK that do not
//     list their closers; Info or unfinished pre-step, set-mode, load,
//     prepare and kinds this package does not know): dropped, and what
//     they may have written is modelled by ghosts. A ghost is made for each
//     seq p of F holding a server-written identity (one with a ':') that no
//     OK operation claims (an OK append or a reporting server write with
//     that identity at p) and that no Info append carrying that identity at
//     p could have written; the ghost has the interval [0, +inf) and is
//     "legal iff len(state) == p; state += F[p]". Ghosts are sound because F
//     is the true final log and logs only grow: whatever wrote F[p] did so
//     when the log was p long, at some time (the ghost is free to be placed
//     at any time, and one ghost per event never forces two events to
//     appear together). They only weaken the check: events of a repair are
//     not required to appear atomically.
//   - the final read: state == F, after every other operation.
//
// A session without a final log whose history needs that patching (a
// server-writing operation that is not a reporting OK) is "unknown" with
// the reason in Stats["unknown_sessions"]; so is a session the search did
// not decide within the time budget (timeout is shared by all sessions).
// On Illegal, the witness names the operation that could not be placed
// after the longest linearizable prefix porcupine found.
//
// Assumptions: identities are unique per logical write (an identical retry
// resends the same identities; server-written identities are digests of
// bytes that include their seq); the response of an OK server-writing
// operation describes that operation's own effect.
func Linearizable(h *History, timeout time.Duration) Result {
	v := h.newVerdict(NameLinearizable)
	if timeout <= 0 {
		timeout = 60 * time.Second
	}
	start := time.Now()
	deadline := start.Add(timeout)

	type job struct {
		s     string
		model *sessionModel
	}
	type outcome struct {
		s       string
		res     porcupine.CheckResult
		model   *sessionModel
		witness *Witness
	}
	var jobs []job
	unknownSessions := map[string]string{}
	totals := map[string]int{}
	for _, s := range h.sessionNames {
		m, reason := buildSessionModel(h, h.sessions[s])
		if reason != "" {
			unknownSessions[s] = reason
			v.unknown(s, nil, "session %s cannot be checked for linearizability: %s", s, reason)
			continue
		}
		for k, n := range m.counts {
			totals[k] += n
		}
		if len(m.ops) > 0 {
			jobs = append(jobs, job{s, m})
		}
	}

	results := make([]outcome, len(jobs))
	var wg sync.WaitGroup
	next := make(chan int)
	workers := runtime.GOMAXPROCS(0)
	if workers > len(jobs) {
		workers = len(jobs)
	}
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				j := jobs[i]
				left := time.Until(deadline)
				if left <= 0 {
					results[i] = outcome{s: j.s, res: porcupine.Unknown, model: j.model}
					continue
				}
				pm := j.model.porcupineModel()
				res := porcupine.CheckOperationsTimeout(pm, j.model.ops, left)
				o := outcome{s: j.s, res: res, model: j.model}
				if res == porcupine.Illegal {
					o.witness = j.model.explain(pm, time.Until(deadline))
				}
				results[i] = o
			}
		}()
	}
	for i := range jobs {
		next <- i
	}
	close(next)
	wg.Wait()

	var illegal []string
	for _, o := range results {
		switch o.res {
		case porcupine.Illegal:
			illegal = append(illegal, o.s)
			w := o.witness
			if w == nil {
				w = &Witness{Text: fmt.Sprintf("session %s has no linearizable order of its %d operations", o.s, len(o.model.ops))}
			}
			w.Session = o.s
			v.fail(o.s, w.Ops, "%s", w.Text)
		case porcupine.Unknown:
			unknownSessions[o.s] = "not decided within the time budget"
			v.unknown(o.s, nil, "session %s: the linearizability search did not finish within %s", o.s, timeout)
		}
	}
	v.stats["sessions"] = len(h.sessionNames)
	v.stats["sessions_checked"] = len(jobs)
	v.stats["check_ms"] = time.Since(start).Milliseconds()
	for k, n := range totals {
		v.stats[k] = n
	}
	if len(unknownSessions) > 0 {
		v.stats["unknown_sessions"] = unknownSessions
	}
	if len(illegal) > 0 {
		sort.Strings(illegal)
		v.stats["illegal_sessions"] = illegal
	}
	return v.result()
}

// linKind is what a modelled operation does.
type linKind int

const (
	linAppend      linKind = iota // must apply at seq (OK, or Info proven applied)
	linAppendMaybe                // Info: may apply at seq, or not
	linDuplicate                  // OK duplicate: already stored
	linRead                       // state must equal the list
	linGetMode                    // length and fold
	linServerWrite                // OK server write reporting its events
	linGhost                      // an unattributed server-written event at seq
	linFinal                      // the final read
)

// evHash is an identity's two independent 64-bit hashes.
type evHash struct{ a, b uint64 }

// linState is the model state: the identity list, as its length, two
// chained hashes (order-sensitive; a false match needs a 128-bit collision)
// and its plan-mode fold.
type linState struct {
	n      int64
	a, b   uint64
	active bool
}

func (s linState) extend(evs []evHash, modes []int8) linState {
	for i, e := range evs {
		s.a = mix64(s.a*0x100000001b3 + e.a)
		s.b = mix64((s.b ^ e.b) * 0x9e3779b97f4a7c15)
		s.n++
		if modes[i] >= 0 {
			s.active = modes[i] == 1
		}
	}
	return s
}

// linOp is a modelled operation (porcupine's Input; Output is unused).
type linOp struct {
	kind   linKind
	seq    int64 // append: expected seq; ghost: its seq; server write: NextSeq-len(Appended)
	ids    []string
	evs    []evHash
	modes  []int8 // per event: -1 not plan/mode, 0 false, 1 true
	want   linState
	active *bool // get-mode / pre-step: the reported fold
	next   int64 // get-mode: NextSeq
	pair   int   // index into History.Pairs, -1 for ghosts and the final read
}

// sessionModel is one session's porcupine history and what explains it.
type sessionModel struct {
	h       *History
	session string
	ops     []porcupine.Operation
	counts  map[string]int
}

func (m *sessionModel) porcupineModel() porcupine.Model {
	nm := porcupine.NondeterministicModel{
		Init: func() []any { return []any{linState{}} },
		Step: func(state, input, _ any) []any {
			return linStep(state.(linState), input.(*linOp))
		},
		Hash: func(state any) uint64 {
			s := state.(linState)
			return s.a ^ uint64(s.n)
		},
		DescribeOperation: func(input, _ any) string { return m.describeOp(input.(*linOp)) },
		DescribeState: func(state any) string {
			return fmt.Sprintf("%d events", state.(linState).n)
		},
	}
	return nm.ToModel()
}

func linStep(s linState, op *linOp) []any {
	switch op.kind {
	case linAppend, linGhost:
		if s.n == op.seq {
			return []any{s.extend(op.evs, op.modes)}
		}
	case linAppendMaybe:
		if s.n == op.seq {
			return []any{s, s.extend(op.evs, op.modes)}
		}
		return []any{s}
	case linDuplicate:
		if s.n >= op.seq+int64(len(op.evs)) {
			return []any{s}
		}
	case linRead, linFinal:
		if s.n == op.want.n && s.a == op.want.a && s.b == op.want.b {
			return []any{s}
		}
	case linGetMode:
		if s.n == op.next && (op.active == nil || *op.active == s.active) {
			return []any{s}
		}
	case linServerWrite:
		if s.n == op.seq {
			t := s.extend(op.evs, op.modes)
			if op.active == nil || *op.active == t.active {
				return []any{t}
			}
		}
	}
	return nil
}

func newLinOp(kind linKind, seq int64, ids []string, pair int) *linOp {
	op := &linOp{kind: kind, seq: seq, ids: ids, pair: pair}
	op.evs = make([]evHash, len(ids))
	op.modes = make([]int8, len(ids))
	for i, id := range ids {
		op.evs[i] = hashID(id)
		op.modes[i] = -1
		if v, ok := planModeValue(id); ok {
			op.modes[i] = 0
			if v {
				op.modes[i] = 1
			}
		}
	}
	if kind == linRead || kind == linFinal {
		op.want = linState{}.extend(op.evs, op.modes)
	}
	return op
}

// buildSessionModel turns one session's operations into porcupine
// operations; reason is non-empty when the session cannot be modelled
// soundly.
func buildSessionModel(h *History, sv *sessionView) (*sessionModel, string) {
	m := &sessionModel{h: h, session: sv.name, counts: map[string]int{}}
	F := sv.final

	// Which operations could have written what.
	senders := appendSenders(h, sv)
	needsFinal := false
	for _, pi := range sv.pairs {
		p := h.Pairs[pi]
		if serverWriter(p.Invoke.F) && p.Outcome() != history.Fail {
			if c := ok(p); c == nil || !reportsAppended(c) {
				needsFinal = true
			}
		}
	}
	if !sv.hasFinal && needsFinal {
		return nil, "no final log to attribute the events written by unreported or unknown server-writing operations"
	}

	matchesFinal := func(seq int64, ids []string) bool {
		if !sv.hasFinal || seq < 0 || seq+int64(len(ids)) > int64(len(F)) {
			return false
		}
		for i, id := range ids {
			if F[seq+int64(i)] != id {
				return false
			}
		}
		return true
	}
	claimed := make([]bool, len(F))
	coverable := make([]bool, len(F)) // some maybe-append could have written it
	claim := func(seq int64, ids []string, into []bool) {
		for i, id := range ids {
			p := seq + int64(i)
			if p >= 0 && p < int64(len(F)) && F[p] == id {
				into[p] = true
			}
		}
	}

	clients := map[int]int{}
	clientID := func(process int) int {
		id, seen := clients[process]
		if !seen {
			id = len(clients)
			clients[process] = id
		}
		return id
	}
	add := func(op *linOp, call, ret int64, process int) {
		if ret < call {
			ret = call
		}
		m.ops = append(m.ops, porcupine.Operation{ClientId: clientID(process), Input: op, Call: call, Return: ret})
	}
	const inf = math.MaxInt64

	for _, pi := range sv.pairs {
		p := h.Pairs[pi]
		inv, c := p.Invoke, p.Complete
		switch p.Outcome() {
		case history.Fail:
			m.counts["ops_failed_dropped"]++
			continue
		case history.OK:
			switch {
			case inv.F == history.FAppend && c.Duplicate:
				add(newLinOp(linDuplicate, inv.Seq, inv.Events, pi), inv.Time, c.Time, inv.Process)
			case inv.F == history.FAppend:
				claim(inv.Seq, inv.Events, claimed)
				add(newLinOp(linAppend, inv.Seq, inv.Events, pi), inv.Time, c.Time, inv.Process)
			case inv.F == history.FRead:
				add(newLinOp(linRead, 0, c.Events, pi), inv.Time, c.Time, inv.Process)
			case inv.F == history.FGetMode:
				op := newLinOp(linGetMode, 0, nil, pi)
				op.next, op.active = c.NextSeq, c.Active
				add(op, inv.Time, c.Time, inv.Process)
			case serverWriter(inv.F) && reportsAppended(c):
				seq := c.NextSeq - int64(len(c.Appended))
				claim(seq, c.Appended, claimed)
				op := newLinOp(linServerWrite, seq, c.Appended, pi)
				if inv.F == history.FPreStep {
					op.active = c.Active
				}
				add(op, inv.Time, c.Time, inv.Process)
			default:
				m.counts["ops_without_constraint"]++ // create; unreported load/prepare (ghosts)
			}
		default: // Info or never completed
			if inv.F != history.FAppend || len(inv.Events) == 0 {
				m.counts["ops_unknown_dropped"]++ // no side effect, or modelled by ghosts
				continue
			}
			if sv.hasFinal {
				absent := true
				for _, id := range inv.Events {
					if len(sv.finalPos[id]) > 0 {
						absent = false
						break
					}
				}
				if absent {
					m.counts["info_appends_not_applied"]++
					continue
				}
			}
			if provenApplied(sv, inv, senders) {
				m.counts["info_appends_applied"]++
				claim(inv.Seq, inv.Events, claimed)
				add(newLinOp(linAppend, inv.Seq, inv.Events, pi), inv.Time, inf, inv.Process)
				continue
			}
			m.counts["info_appends_maybe"]++
			if matchesFinal(inv.Seq, inv.Events) {
				claim(inv.Seq, inv.Events, coverable)
			}
			add(newLinOp(linAppendMaybe, inv.Seq, inv.Events, pi), inv.Time, inf, inv.Process)
		}
	}
	if sv.hasFinal {
		const ghostProcess, finalProcess = -1 << 30, -1<<30 + 1 // pseudo-processes
		for i, id := range F {
			if claimed[i] || coverable[i] || history.IsMarker(id) {
				continue
			}
			m.counts["ghost_events"]++
			add(newLinOp(linGhost, int64(i), []string{id}, -1), 0, inf, ghostProcess)
		}
		add(newLinOp(linFinal, 0, F, -1), h.Horizon, h.Horizon, finalProcess)
	}
	m.counts["ops_modelled"] = len(m.ops)
	return m, ""
}

// explain re-runs the failing session verbosely and names the operation
// that cannot be placed after the longest linearizable prefix.
func (m *sessionModel) explain(pm porcupine.Model, left time.Duration) *Witness {
	if left < time.Second {
		left = time.Second
	}
	res, info := porcupine.CheckOperationsVerbose(pm, m.ops, left)
	if res != porcupine.Illegal {
		return nil
	}
	parts := info.PartialLinearizations()
	if len(parts) == 0 {
		return nil
	}
	var longest []int
	for _, seq := range parts[0] {
		if len(seq) > len(longest) {
			longest = seq
		}
	}
	placed := make([]bool, len(m.ops))
	for _, id := range longest {
		if id >= 0 && id < len(m.ops) {
			placed[id] = true
		}
	}
	culprit := -1
	for i, o := range m.ops {
		if placed[i] {
			continue
		}
		if culprit < 0 || o.Return < m.ops[culprit].Return || (o.Return == m.ops[culprit].Return && o.Call < m.ops[culprit].Call) {
			culprit = i
		}
	}
	// Replay the prefix with concrete lists to describe the state(s).
	states := map[linState][]string{{}: nil}
	for _, id := range longest {
		op := m.ops[id].Input.(*linOp)
		nextStates := map[linState][]string{}
		for s, list := range states {
			for _, t := range linStep(s, op) {
				ts := t.(linState)
				if ts.n == s.n {
					nextStates[ts] = list
				} else {
					nextStates[ts] = append(append([]string(nil), list...), op.ids...)
				}
			}
		}
		states = nextStates
	}
	var stateText []string
	for _, list := range states {
		d := fmt.Sprintf("%d events", len(list))
		if len(list) > 0 {
			d += " ending in " + list[len(list)-1]
		}
		stateText = append(stateText, d)
	}
	sort.Strings(stateText)
	var ops []int
	text := fmt.Sprintf("session %s has no linearizable order: the longest valid order places %d of %d operations, leaving the log at %s",
		m.session, len(longest), len(m.ops), strings.Join(stateText, " or "))
	if culprit >= 0 {
		op := m.ops[culprit].Input.(*linOp)
		text += "; then " + m.describeOp(op) + " cannot take effect"
		if op.pair >= 0 {
			ops = append(ops, recs(m.h.Pairs[op.pair])...)
		}
	}
	if len(longest) > 0 {
		last := m.ops[longest[len(longest)-1]].Input.(*linOp)
		text += " (last placed: " + m.describeOp(last) + ")"
		if last.pair >= 0 {
			ops = append(ops, recs(m.h.Pairs[last.pair])...)
		}
	}
	return &Witness{Session: m.session, Ops: ops, Text: text}
}

// describeOp is a plain-language name of a modelled operation.
func (m *sessionModel) describeOp(op *linOp) string {
	var who string
	if op.pair >= 0 {
		p := m.h.Pairs[op.pair]
		who = fmt.Sprintf(" by process %d on %s (%s)", p.Invoke.Process, nodeOr(p.Invoke.Node), when(p))
	}
	switch op.kind {
	case linAppend:
		return fmt.Sprintf("append %s at seq %d%s", listIDs(op.ids, 3), op.seq, who)
	case linAppendMaybe:
		return fmt.Sprintf("unknown-outcome append %s at seq %d%s", listIDs(op.ids, 3), op.seq, who)
	case linDuplicate:
		return fmt.Sprintf("duplicate append %s at seq %d%s", listIDs(op.ids, 3), op.seq, who)
	case linRead:
		if len(op.ids) == 0 {
			return fmt.Sprintf("read%s returning an empty log", who)
		}
		return fmt.Sprintf("read%s returning %d events ending in %s", who, len(op.ids), op.ids[len(op.ids)-1])
	case linGetMode:
		a := "unset"
		if op.active != nil {
			a = fmt.Sprint(*op.active)
		}
		return fmt.Sprintf("get-mode%s returning next seq %d, active %s", who, op.next, a)
	case linServerWrite:
		return fmt.Sprintf("server write of %s at seq %d%s", listIDs(op.ids, 3), op.seq, who)
	case linGhost:
		return fmt.Sprintf("server-written event %s at seq %d of the final log", op.ids[0], op.seq)
	case linFinal:
		return fmt.Sprintf("the final read of %d events", len(op.ids))
	}
	return "operation"
}

// hashID hashes an identity twice (FNV-1a and a differently seeded FNV-1
// variant, both finalised).
func hashID(id string) evHash {
	a := uint64(0xcbf29ce484222325)
	b := uint64(0x84222325cbf29ce4)
	for i := 0; i < len(id); i++ {
		a ^= uint64(id[i])
		a *= 0x100000001b3
		b *= 0x100000001b3
		b ^= uint64(id[i]) + 0x9e
	}
	return evHash{mix64(a ^ uint64(len(id))), mix64(b + uint64(len(id))<<32)}
}

// mix64 is the splitmix64 finaliser.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// VisualizeSession writes porcupine's HTML visualization of one session's
// linearizability check (the longest partial linearizations and the state
// after each operation) to w, for linearizability/<session>.html. It
// re-runs the check with the given timeout.
func VisualizeSession(h *History, session string, w io.Writer, timeout time.Duration) error {
	sv := h.sessions[session]
	if sv == nil {
		return fmt.Errorf("no session %q in the history", session)
	}
	m, reason := buildSessionModel(h, sv)
	if reason != "" {
		return fmt.Errorf("session %q cannot be modelled: %s", session, reason)
	}
	pm := m.porcupineModel()
	_, info := porcupine.CheckOperationsVerbose(pm, m.ops, timeout)
	return porcupine.Visualize(pm, info, w)
}
