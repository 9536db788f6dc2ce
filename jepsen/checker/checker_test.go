package checker

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// hb builds a synthetic history: records get consecutive indices and times
// 10 ms apart, in the order the builder is called.
type hb struct {
	ops   []history.Op
	t     int64
	id    int
	final history.Final
}

func newHB() *hb {
	return &hb{final: history.Final{Logs: map[string][]string{}, Revisions: map[string]string{}, Nodes: map[string]map[string]history.NodeCopy{}}}
}

func (b *hb) rec(o history.Op) history.Op {
	b.t += int64(10 * time.Millisecond)
	o.Index, o.Time = len(b.ops), b.t
	b.ops = append(b.ops, o)
	return o
}

// invoke starts an operation and returns its invoke record.
func (b *hb) invoke(o history.Op) history.Op {
	b.id++
	o.ID, o.Type = b.id, history.Invoke
	if o.Node == "" {
		o.Node = "n1"
	}
	return b.rec(o)
}

// complete ends inv with c (its Type and completion values).
func (b *hb) complete(inv, c history.Op) history.Op {
	c.ID, c.Process, c.F, c.Node, c.Session = inv.ID, inv.Process, inv.F, inv.Node, inv.Session
	return b.rec(c)
}

// do is an operation that completes before the next one starts.
func (b *hb) do(inv, c history.Op) { b.complete(b.invoke(inv), c) }

func (b *hb) nemesis(action string, ok bool) {
	raw, _ := json.Marshal(NemesisValue{Action: action, Fault: "isolate-leader", Targets: []string{"n2"}, OK: ok})
	b.id++
	b.rec(history.Op{ID: b.id, Type: history.Info, Process: history.NemesisProcess, F: history.FNemesis, Value: raw})
}

// setFinal records the final log of s and identical copies on n1..n3.
func (b *hb) setFinal(s, rev string, ids ...string) {
	b.final.Logs[s] = ids
	b.final.Revisions[s] = rev
	for _, n := range []string{"n1", "n2", "n3"} {
		if b.final.Nodes[n] == nil {
			b.final.Nodes[n] = map[string]history.NodeCopy{}
		}
		b.final.Nodes[n][s] = history.NodeCopy{Events: ids, Revision: rev, ArtifactSHA256: "sha-" + s + "-" + rev}
	}
}

// Operation shorthands.

func app(p int, s string, seq int64, epoch uint64, ids ...string) history.Op {
	return history.Op{Process: p, F: history.FAppend, Session: s, Seq: seq, Epoch: epoch, Events: ids}
}
func appOK(next int64, rev string) history.Op {
	return history.Op{Type: history.OK, NextSeq: next, Revision: rev}
}
func appDup(next int64, rev string) history.Op {
	return history.Op{Type: history.OK, NextSeq: next, Revision: rev, Duplicate: true}
}
func fail(reason string) history.Op { return history.Op{Type: history.Fail, Reason: reason} }
func info() history.Op              { return history.Op{Type: history.Info, Error: "deadline exceeded"} }
func read(p int, s string) history.Op {
	return history.Op{Process: p, F: history.FRead, Session: s}
}
func readOK(rev string, ids ...string) history.Op {
	return history.Op{Type: history.OK, Events: ids, Revision: rev}
}
func op(p int, f history.F, s string) history.Op { return history.Op{Process: p, F: f, Session: s} }
func boolp(v bool) *bool                         { return &v }

// validHistory mixes every operation kind; every checker must pass it.
func validHistory() (*hb, Options) {
	b := newHB()
	const s1, s2 = "s1", "s2"
	b.do(history.Op{Process: 1, F: history.FCreate, Session: s1, Owner: "c1"}, history.Op{Type: history.OK})
	b.do(history.Op{Process: 2, F: history.FCreate, Session: s1, Owner: "c2"}, fail("ALREADY_EXISTS"))
	b.do(history.Op{Process: 1, F: history.FCreate, Session: s1, Owner: "c1"}, history.Op{Type: history.OK}) // idempotent retry
	b.do(app(1, s1, 0, 0, "p1-1"), appOK(1, "c:5:10"))
	b.do(app(2, s1, 1, 0, "p2-1"), info())              // applied, response lost
	b.do(app(3, s1, 1, 0, "p2-1"), appDup(2, "c:5:11")) // identical retry finds it
	b.do(read(1, s1), readOK("c:5:11", "p1-1", "p2-1"))
	b.nemesis(ActionInject, true)
	b.do(app(1, s1, 2, 0, "p1-2", "p1-3"), info()) // never applied
	b.do(app(4, s1, 1, 0, "p4-1"), fail("SEQ_MISMATCH"))
	// Prepare commits a crash closer it does not report, and bumps the epoch.
	b.do(history.Op{Process: 5, F: history.FPrepare, Session: s1, Owner: "o1"},
		history.Op{Type: history.OK, Epoch: 1, Owner: "o1", NextSeq: 3, Revision: "c:5:12"})
	b.do(app(6, s1, 3, 0, "p6-1"), fail("LEASE_FENCED"))
	b.nemesis(ActionHeal, true)
	b.do(app(1, s1, 3, 1, "p1-4"), appOK(4, "c:5:13"))
	b.do(history.Op{Process: 6, F: history.FSetMode, Session: s1, Active: boolp(true)},
		history.Op{Type: history.OK, Outcome: "QUEUED", NextSeq: 4, Revision: "c:5:13"})
	b.do(history.Op{Process: 5, F: history.FPreStep, Session: s1, Epoch: 1},
		history.Op{Type: history.OK, Active: boolp(true), Appended: []string{"plan/mode=true:aa11"}, NextSeq: 5, Revision: "c:5:14"})
	b.do(op(1, history.FGetMode, s1), history.Op{Type: history.OK, Active: boolp(true), NextSeq: 5})
	rd := readOK("c:5:14", "p1-1", "p2-1", "turn/end:0a1b2c", "p1-4", "plan/mode=true:aa11")
	rd.Active = boolp(true)
	b.do(read(1, s1), rd)
	b.invoke(app(7, s1, 5, 1, "p7-1")) // never completes; applied

	// s2: concurrent operations, a load that repairs, an unknown pre-step
	// that applied a pending selection.
	a := b.invoke(app(9, s2, 0, 0, "p9-1"))
	r := b.invoke(read(10, s2))
	b.complete(a, appOK(1, "c:9:20"))
	b.complete(r, readOK("")) // linearized before the append
	b.do(read(10, s2), readOK("c:9:20", "p9-1"))
	b.do(op(11, history.FLoad, s2), history.Op{Type: history.OK, NextSeq: 2, Revision: "c:9:21"})
	b.do(history.Op{Process: 12, F: history.FSetMode, Session: s2, Active: boolp(true)},
		history.Op{Type: history.OK, Outcome: "QUEUED", NextSeq: 2, Revision: "c:9:21"})
	b.do(op(12, history.FPreStep, s2), info())
	b.do(op(13, history.FGetMode, s2), history.Op{Type: history.OK, Active: boolp(true), NextSeq: 3})
	b.do(read(13, s2), history.Op{Type: history.Fail, Reason: "NO_LEADER"})
	b.do(app(13, s2, 3, 0, "p13-1"), appOK(4, "c:9:23"))

	b.setFinal(s1, "c:5:15", "p1-1", "p2-1", "turn/end:0a1b2c", "p1-4", "plan/mode=true:aa11", "p7-1")
	b.setFinal(s2, "c:9:23", "p9-1", "turn/end:ffee01", "plan/mode=true:bb22", "p13-1")
	return b, Options{MinOKBeforeFaults: 3, MinFaults: 1, LinearizableTimeout: 30 * time.Second}
}

func TestCheckersValidHistory(t *testing.T) {
	b, opt := validHistory()
	rep := Check(b.ops, b.final, opt)
	for _, r := range rep.Results {
		if r.Valid != True {
			t.Errorf("%s: %s", r.Name, r.Valid)
			for _, w := range r.Witnesses {
				t.Errorf("  %s", w.Text)
			}
		}
	}
	if rep.Valid != True {
		t.Fatalf("report valid = %s, want true", rep.Valid)
	}
	lin := rep.Result(NameLinearizable)
	if lin.Stats["ghost_events"] != 3 || lin.Stats["info_appends_applied"] != 1 || lin.Stats["info_appends_not_applied"] != 1 {
		t.Errorf("linearizable stats = %v, want 3 ghosts (2 closers, 1 plan/mode), 1 info append applied, 1 dropped", lin.Stats)
	}
	if len(rep.Results) != 12 {
		t.Errorf("%d results, want 12", len(rep.Results))
	}
}

// anomaly is one bad history and the checker that must catch it.
type anomaly struct {
	name    string
	checker string
	want    Valid
	opt     Options
	build   func(b *hb)
}

var anomalies = []anomaly{
	{name: "lost append", checker: NameLost, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(2, "s", 0, 0, "p2-1"), info())
		b.setFinal("s", "c:1:10", "p2-1")
	}},
	{name: "lost on one node", checker: NameLost, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.setFinal("s", "c:1:10", "p1-1")
		b.final.Nodes["n3"]["s"] = history.NodeCopy{Events: nil, Revision: "c:1:10", ArtifactSHA256: "sha-s-c:1:10"}
	}},
	{name: "duplicate marker", checker: NameDuplicates, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(1, "s", 1, 0, "p1-2"), appOK(2, "c:1:11"))
		b.do(read(2, "s"), readOK("c:1:12", "p1-1", "p1-2", "p1-1"))
		b.setFinal("s", "c:1:12", "p1-1", "p1-2", "p1-1")
	}},
	{name: "reorder", checker: NamePrefix, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), info())
		b.do(app(2, "s", 0, 0, "p2-1"), info())
		b.do(read(3, "s"), readOK("c:1:10", "p1-1"))
		b.do(read(4, "s"), readOK("c:1:10", "p2-1"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "gap", checker: NameContiguous, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(1, "s", 1, 0, "p1-2"), appOK(2, "c:1:11"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "wrong next seq", checker: NameContiguous, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1", "p1-2"), appOK(3, "c:1:10"))
		b.setFinal("s", "c:1:10", "p1-1", "p1-2")
	}},
	{name: "stale read", checker: NameLinearizable, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(read(2, "s"), readOK("c:1:9"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "phantom from failed append", checker: NamePhantom, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), fail("SEQ_MISMATCH"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "marker never sent", checker: NamePhantom, want: False, build: func(b *hb) {
		b.do(read(1, "s"), readOK("c:1:10", "p9-9"))
		b.setFinal("s", "c:1:10", "p9-9")
	}},
	{name: "two OK appends at one seq", checker: NamePhantom, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(2, "s", 0, 0, "p2-1"), appOK(1, "c:1:11"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "fenced writer got through", checker: NameFencing, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(history.Op{Process: 2, F: history.FPrepare, Session: "s", Owner: "o1"}, history.Op{Type: history.OK, Epoch: 1, Owner: "o1", NextSeq: 1, Revision: "c:1:10"})
		b.do(history.Op{Process: 3, F: history.FPrepare, Session: "s", Owner: "o2"}, history.Op{Type: history.OK, Epoch: 2, Owner: "o2", NextSeq: 1, Revision: "c:1:10"})
		b.do(app(2, "s", 1, 1, "p2-1"), appOK(2, "c:1:11"))
		b.setFinal("s", "c:1:11", "p1-1", "p2-1")
	}},
	{name: "epochs backwards in the log", checker: NameFencing, want: False, build: func(b *hb) {
		x := b.invoke(app(1, "s", 0, 2, "p1-1"))
		y := b.invoke(app(2, "s", 1, 1, "p2-1"))
		b.complete(x, appOK(1, "c:1:10"))
		b.complete(y, appOK(2, "c:1:11"))
		b.setFinal("s", "c:1:11", "p1-1", "p2-1")
	}},
	{name: "revision going backwards", checker: NameRevisions, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(1, "s", 1, 0, "p1-2"), appOK(2, "c:1:12"))
		b.do(read(1, "s"), readOK("c:1:11", "p1-1", "p1-2"))
		b.setFinal("s", "c:1:12", "p1-1", "p1-2")
	}},
	{name: "divergent node copy", checker: NameConverge, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.do(app(2, "s", 1, 0, "p2-1"), info())
		b.setFinal("s", "c:1:10", "p1-1")
		b.final.Nodes["n2"]["s"] = history.NodeCopy{Events: []string{"p1-1", "p2-1"}, Revision: "c:1:11", ArtifactSHA256: "sha-other"}
	}},
	{name: "divergent artifact digest", checker: NameConverge, want: False, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.setFinal("s", "c:1:10", "p1-1")
		cp := b.final.Nodes["n3"]["s"]
		cp.ArtifactSHA256 = "sha-corrupt"
		b.final.Nodes["n3"]["s"] = cp
	}},
	{name: "missing artifact digest", checker: NameConverge, want: Unknown, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.setFinal("s", "c:1:10", "p1-1")
		cp := b.final.Nodes["n3"]["s"]
		cp.ArtifactSHA256 = ""
		b.final.Nodes["n3"]["s"] = cp
	}},
	{name: "plan-mode projection mismatch", checker: NamePlanMode, want: False, build: func(b *hb) {
		b.do(history.Op{Process: 1, F: history.FSetMode, Session: "s", Active: boolp(true)},
			history.Op{Type: history.OK, Outcome: "COMMITTED", Appended: []string{"plan/mode=true:01"}, NextSeq: 1, Revision: "c:1:10"})
		b.do(app(1, "s", 1, 0, "p1-1"), appOK(2, "c:1:11"))
		b.do(op(2, history.FGetMode, "s"), history.Op{Type: history.OK, Active: boolp(false), NextSeq: 2})
		b.setFinal("s", "c:1:11", "plan/mode=true:01", "p1-1")
	}},
	{name: "plan selection applied twice", checker: NamePlanMode, want: False, build: func(b *hb) {
		b.do(history.Op{Process: 1, F: history.FSetMode, Session: "s", Active: boolp(true)},
			history.Op{Type: history.OK, Outcome: "QUEUED", NextSeq: 0})
		b.do(op(1, history.FPreStep, "s"),
			history.Op{Type: history.OK, Active: boolp(true), Appended: []string{"plan/mode=true:01", "plan/mode=true:02"}, NextSeq: 2, Revision: "c:1:10"})
		b.setFinal("s", "c:1:10", "plan/mode=true:01", "plan/mode=true:02")
	}},
	{name: "plan-mode append missing from the log", checker: NamePlanMode, want: False, build: func(b *hb) {
		b.do(op(1, history.FPreStep, "s"),
			history.Op{Type: history.OK, Active: boolp(true), Appended: []string{"plan/mode=true:01"}, NextSeq: 1, Revision: "c:1:10"})
		b.do(app(2, "s", 0, 0, "p2-1"), info())
		b.setFinal("s", "c:1:10", "p2-1")
	}},
	{name: "two winning creators", checker: NameCreators, want: False, build: func(b *hb) {
		b.do(history.Op{Process: 1, F: history.FCreate, Session: "s", Owner: "c1"}, history.Op{Type: history.OK})
		b.do(history.Op{Process: 2, F: history.FCreate, Session: "s", Owner: "c2"}, history.Op{Type: history.OK})
		b.setFinal("s", "")
	}},
	{name: "liveness shortfall", checker: NameLiveness, want: Unknown, opt: Options{MinOKBeforeFaults: 5, MinFaults: 1}, build: func(b *hb) {
		b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
		b.nemesis(ActionInject, false)
		b.do(read(1, "s"), fail("NO_LEADER"))
		b.nemesis(ActionHeal, true)
		b.do(read(1, "s"), info())
		b.setFinal("s", "c:1:10", "p1-1")
	}},
	{name: "a node never serves after the last fault", checker: NameLiveness, want: Unknown, opt: Options{MinOKBeforeFaults: 1, MinFaults: 1}, build: func(b *hb) {
		on := func(o history.Op, n string) history.Op { o.Node = n; return o }
		b.do(on(app(1, "s", 0, 0, "p1-1"), "n1"), appOK(1, "c:1:10"))
		b.nemesis(ActionInject, true)
		b.nemesis(ActionHeal, true)
		b.do(on(read(1, "s"), "n1"), readOK("c:1:10", "p1-1"))
		b.do(on(read(2, "s"), "n2"), info())
		b.do(on(read(2, "s"), "n2"), fail("NO_LEADER"))
		b.setFinal("s", "c:1:10", "p1-1")
	}},
}

func TestCheckersAnomalies(t *testing.T) {
	for _, a := range anomalies {
		t.Run(strings.ReplaceAll(a.name, " ", "_"), func(t *testing.T) {
			b := newHB()
			a.build(b)
			rep := Check(b.ops, b.final, a.opt)
			r := rep.Result(a.checker)
			if r == nil {
				t.Fatalf("no result named %s", a.checker)
			}
			if r.Valid != a.want {
				t.Fatalf("%s = %s, want %s; report:\n%s", a.checker, r.Valid, a.want, dump(rep))
			}
			if rep.Valid != a.want {
				t.Errorf("report valid = %s, want %s", rep.Valid, a.want)
			}
			if len(r.Witnesses) == 0 {
				t.Errorf("%s has no witness", a.checker)
			}
			for _, w := range r.Witnesses {
				if w.Text == "" {
					t.Errorf("empty witness text")
				}
			}
			t.Logf("%s: %s", a.checker, r.Witnesses[0].Text)
		})
	}
}

// TestCheckersLinearizableWitness checks that an Illegal session names the
// read that could not be placed.
func TestCheckersLinearizableWitness(t *testing.T) {
	b := newHB()
	b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
	b.do(read(2, "s"), readOK("c:1:9"))
	b.setFinal("s", "c:1:10", "p1-1")
	r := Linearizable(NewHistory(b.ops, b.final), 10*time.Second)
	if r.Valid != False || len(r.Witnesses) != 1 {
		t.Fatalf("got %s with %d witnesses", r.Valid, len(r.Witnesses))
	}
	w := r.Witnesses[0]
	if !strings.Contains(w.Text, "read by process 2") || len(w.Ops) == 0 {
		t.Errorf("witness does not name the stale read: %+v", w)
	}
	for _, i := range w.Ops {
		if i < 0 || i >= len(b.ops) {
			t.Errorf("witness op index %d out of range", i)
		}
	}
}

// TestCheckersUnknownWithoutFinal: a session whose server-written events
// cannot be attributed without a final log is unknown, not false.
func TestCheckersUnknownWithoutFinal(t *testing.T) {
	b := newHB()
	b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
	b.do(op(2, history.FLoad, "s"), history.Op{Type: history.OK, NextSeq: 2, Revision: "c:1:11"})
	b.do(read(3, "s"), readOK("c:1:11", "p1-1", "turn/end:01"))
	r := Linearizable(NewHistory(b.ops, history.Final{}), 10*time.Second)
	if r.Valid != Unknown {
		t.Fatalf("linearizable = %s, want unknown", r.Valid)
	}
	if _, ok := r.Stats["unknown_sessions"].(map[string]string)["s"]; !ok {
		t.Errorf("stats lack the reason: %v", r.Stats)
	}
}

func TestCheckersWitnessCap(t *testing.T) {
	b := newHB()
	for i := 0; i < 30; i++ {
		b.do(app(1, "s", int64(i), 0, fmt.Sprintf("p1-%d", i)), appOK(int64(i+1), ""))
	}
	b.setFinal("s", "")
	r := Lost(NewHistory(b.ops, b.final))
	if r.Valid != False || len(r.Witnesses) != defaultMaxWitnesses || r.Stats["witnesses_omitted"] != 30*4-defaultMaxWitnesses {
		t.Fatalf("got %s, %d witnesses, stats %v", r.Valid, len(r.Witnesses), r.Stats)
	}
}

func dump(rep Report) string {
	var sb strings.Builder
	for _, r := range rep.Results {
		fmt.Fprintf(&sb, "  %s: %s\n", r.Name, r.Valid)
		for _, w := range r.Witnesses {
			fmt.Fprintf(&sb, "    %s\n", w.Text)
		}
	}
	return sb.String()
}

func TestCheckersVisualizeSession(t *testing.T) {
	b := newHB()
	b.do(app(1, "s", 0, 0, "p1-1"), appOK(1, "c:1:10"))
	b.do(read(2, "s"), readOK("c:1:9"))
	b.setFinal("s", "c:1:10", "p1-1")
	var sb strings.Builder
	if err := VisualizeSession(NewHistory(b.ops, b.final), "s", &sb, 10*time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(sb.String(), "<html") {
		t.Errorf("not an HTML page (%d bytes)", sb.Len())
	}
}
