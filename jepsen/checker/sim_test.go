package checker

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// A tiny in-memory simulator of a correct store, driven by concurrent
// workers with random interleaving: every operation is invoked, takes effect
// atomically at one later step, and completes at a still later step, so the
// history it records is linearizable by construction. Unknown outcomes (the
// effect applied or not, the response lost), identical retries, fencing,
// crash closers, plan-mode selections and racing creators are all exercised.
// An injected bug makes it misbehave once.

type simBug int

const (
	bugNone      simBug = iota
	bugDropAck          // acknowledge one append without applying it
	bugStaleRead        // serve one read from before an acknowledged append
)

type simSession struct {
	name       string
	inc        int
	log        []string
	revAt      map[int]string // revision at each length
	epoch      uint64
	pending    *bool
	creator    string
	acks       []simAck // appends acknowledged OK, with their completion time
	lastChange int64
}

type simAck struct {
	start int // the length before the append
	at    int64
}

func (s *simSession) rev() string { return s.revAt[len(s.log)] }

type simWorker struct {
	proc       int
	phase      int // 0 idle, 1 invoked, 2 took effect (or not), waiting to complete
	inv        history.Op
	res        history.Op
	retry      *history.Op
	knownNext  map[string]int64
	knownEpoch map[string]uint64
	counter    int
}

type sim struct {
	rng      *rand.Rand
	b        *hb
	sessions []*simSession
	byName   map[string]*simSession
	index    int64 // raft index
	minted   int
	nextProc int
	bug      simBug
	bugged   bool
	okOps    int
}

func newSim(seed int64, nSessions int, bug simBug) *sim {
	s := &sim{rng: rand.New(rand.NewSource(seed)), b: newHB(), byName: map[string]*simSession{}, bug: bug, index: 100}
	for i := 0; i < nSessions; i++ {
		ss := &simSession{name: fmt.Sprintf("s%02d", i), inc: 10 + i, revAt: map[int]string{}}
		ss.revAt[0] = fmt.Sprintf("c1:%d:%d", ss.inc, ss.inc)
		s.sessions = append(s.sessions, ss)
		s.byName[ss.name] = ss
	}
	return s
}

func (s *sim) mint(kind string) string {
	s.minted++
	return fmt.Sprintf("%s:%012x", kind, s.minted)
}

// write appends server- or client-supplied identities and bumps the revision.
func (s *sim) write(ss *simSession, ids []string) {
	ss.log = append(ss.log, ids...)
	s.index++
	ss.revAt[len(ss.log)] = fmt.Sprintf("c1:%d:%d", ss.inc, s.index)
}

func (s *sim) newWorker() *simWorker {
	s.nextProc++
	return &simWorker{proc: s.nextProc, knownNext: map[string]int64{}, knownEpoch: map[string]uint64{}}
}

// start picks and invokes an operation.
func (s *sim) start(w *simWorker) {
	if w.retry != nil {
		inv := *w.retry
		inv.Process = w.proc
		w.retry = nil
		w.inv = s.b.invoke(inv)
		w.phase = 1
		return
	}
	ss := s.sessions[s.rng.Intn(len(s.sessions))]
	o := history.Op{Process: w.proc, Session: ss.name, Node: fmt.Sprintf("n%d", 1+s.rng.Intn(3))}
	switch x := s.rng.Intn(100); {
	case x < 45:
		o.F = history.FAppend
		o.Seq = w.knownNext[ss.name]
		if s.rng.Intn(10) == 0 && o.Seq > 0 {
			o.Seq-- // stale on purpose
		}
		o.Epoch = w.knownEpoch[ss.name]
		n := 1 + s.rng.Intn(3)
		for i := 0; i < n; i++ {
			w.counter++
			o.Events = append(o.Events, fmt.Sprintf("p%d-%d", w.proc, w.counter))
		}
	case x < 70:
		o.F = history.FRead
	case x < 76:
		o.F = history.FGetMode
	case x < 82:
		o.F = history.FSetMode
		o.Active = boolp(s.rng.Intn(2) == 0)
		if s.rng.Intn(2) == 0 {
			o.Epoch = w.knownEpoch[ss.name]
		}
	case x < 88:
		o.F = history.FPreStep
		o.Epoch = w.knownEpoch[ss.name]
	case x < 91:
		o.F = history.FPrepare
		o.Owner = fmt.Sprintf("o%d", w.proc)
	case x < 94:
		o.F = history.FLoad
	default:
		o.F = history.FCreate
		o.Owner = fmt.Sprintf("c%d", 1+s.rng.Intn(3))
		if ss.creator != "" && s.rng.Intn(2) == 0 {
			o.Owner = ss.creator
		}
	}
	w.inv = s.b.invoke(o)
	w.phase = 1
}

// apply makes the operation take effect (or not) and prepares its completion.
func (s *sim) apply(w *simWorker) {
	inv := w.inv
	ss := s.byName[inv.Session]
	isWrite := inv.F != history.FRead && inv.F != history.FGetMode
	w.phase = 2
	if isWrite && s.rng.Intn(30) == 0 {
		w.res = info() // lost before taking effect
		return
	}
	if !isWrite && s.rng.Intn(40) == 0 {
		w.res = fail("NO_LEADER")
		return
	}
	var r history.Op
	bugFired := s.bugged
	switch inv.F {
	case history.FAppend:
		n := len(inv.Events)
		seq := int(inv.Seq)
		switch {
		case seq+n <= len(ss.log) && equal(ss.log[seq:seq+n], inv.Events):
			r = appDup(int64(len(ss.log)), ss.rev())
		case ss.epoch > 0 && inv.Epoch != ss.epoch:
			r = fail("LEASE_FENCED")
			w.knownEpoch[ss.name] = ss.epoch
		case seq != len(ss.log):
			r = fail("SEQ_MISMATCH")
			w.knownNext[ss.name] = int64(len(ss.log))
		case s.bug == bugDropAck && !s.bugged && s.okOps > 500:
			s.bugged = true
			r = appOK(int64(seq+n), fmt.Sprintf("c1:%d:%d", ss.inc, s.index+1))
		default:
			s.write(ss, inv.Events)
			r = appOK(int64(len(ss.log)), ss.rev())
		}
	case history.FRead:
		r = readOK(ss.rev(), append([]string(nil), ss.log...)...)
		if s.bug == bugStaleRead && !s.bugged && s.okOps > 500 {
			for i := len(ss.acks) - 1; i >= 0; i-- {
				if ss.acks[i].at < inv.Time {
					s.bugged = true
					r = readOK(ss.revAt[ss.acks[i].start], append([]string(nil), ss.log[:ss.acks[i].start]...)...)
					break
				}
			}
		}
		r.Active = boolp(foldPlanMode(r.Events))
	case history.FGetMode:
		r = history.Op{Type: history.OK, Active: boolp(foldPlanMode(ss.log)), NextSeq: int64(len(ss.log)), Pending: ss.pending}
	case history.FSetMode:
		r = history.Op{Type: history.OK, NextSeq: int64(len(ss.log)), Revision: ss.rev()}
		switch {
		case ss.epoch > 0 && inv.Epoch != ss.epoch && inv.Epoch != 0:
			r = fail("LEASE_FENCED")
		case ss.epoch > 0 && inv.Epoch == 0:
			ss.pending = inv.Active
			r.Outcome = "QUEUED"
		case foldPlanMode(ss.log) == *inv.Active:
			ss.pending = nil
			r.Outcome = "NOOP"
		default:
			id := s.mint(fmt.Sprintf("plan/mode=%t", *inv.Active))
			s.write(ss, []string{id})
			ss.pending = nil
			r.Outcome, r.Appended, r.NextSeq, r.Revision = "COMMITTED", []string{id}, int64(len(ss.log)), ss.rev()
		}
	case history.FPreStep:
		if ss.epoch > 0 && inv.Epoch != ss.epoch {
			r = fail("LEASE_FENCED")
			w.knownEpoch[ss.name] = ss.epoch
			break
		}
		var appended []string
		if ss.pending != nil {
			if *ss.pending != foldPlanMode(ss.log) {
				id := s.mint(fmt.Sprintf("plan/mode=%t", *ss.pending))
				s.write(ss, []string{id})
				appended = []string{id}
			}
			ss.pending = nil
		}
		r = history.Op{Type: history.OK, Active: boolp(foldPlanMode(ss.log)), Appended: appended, NextSeq: int64(len(ss.log)), Revision: ss.rev()}
	case history.FPrepare:
		if s.rng.Intn(2) == 0 {
			s.write(ss, []string{s.mint("turn/end")})
		}
		ss.epoch++
		r = history.Op{Type: history.OK, Epoch: ss.epoch, Owner: inv.Owner, NextSeq: int64(len(ss.log)), Revision: ss.rev()}
	case history.FLoad:
		if ss.epoch == 0 && s.rng.Intn(3) == 0 {
			s.write(ss, []string{s.mint("turn/end")})
		}
		r = history.Op{Type: history.OK, NextSeq: int64(len(ss.log)), Revision: ss.rev()}
	case history.FCreate:
		switch ss.creator {
		case "", inv.Owner:
			ss.creator = inv.Owner
			r = history.Op{Type: history.OK}
		default:
			r = fail("ALREADY_EXISTS")
		}
	}
	if isWrite && r.Type == history.OK && s.rng.Intn(30) == 0 && bugFired == s.bugged {
		r = info() // took effect, response lost
	}
	w.res = r
}

// finish records the completion.
func (s *sim) finish(w *simWorker) {
	c := s.b.complete(w.inv, w.res)
	w.phase = 0
	ss := s.byName[w.inv.Session]
	switch c.Type {
	case history.OK:
		s.okOps++
		switch w.inv.F {
		case history.FAppend:
			w.knownNext[ss.name] = c.NextSeq
			if !c.Duplicate {
				ss.acks = append(ss.acks, simAck{start: int(w.inv.Seq), at: c.Time})
			}
		case history.FRead, history.FGetMode, history.FPreStep, history.FSetMode, history.FLoad:
			w.knownNext[ss.name] = c.NextSeq
			if w.inv.F == history.FRead {
				w.knownNext[ss.name] = int64(len(c.Events))
			}
		case history.FPrepare:
			w.knownEpoch[ss.name] = c.Epoch
			w.knownNext[ss.name] = c.NextSeq
		}
	case history.Info:
		// A crashed process: continue as a new one, maybe retrying the
		// identical append.
		nw := s.newWorker()
		w.proc, w.counter = nw.proc, 0
		if w.inv.F == history.FAppend && s.rng.Intn(2) == 0 {
			retry := w.inv
			retry.Index, retry.ID, retry.Time, retry.Type = 0, 0, 0, ""
			w.retry = &retry
		}
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// run drives nWorkers until about opsTotal operations were invoked, with
// two faults, and returns the history and final state; operations still in
// flight at the end never complete.
func (s *sim) run(nWorkers, opsTotal int) ([]history.Op, history.Final) {
	workers := make([]*simWorker, nWorkers)
	for i := range workers {
		workers[i] = s.newWorker()
	}
	invoked := 0
	schedule := map[int]string{opsTotal / 5: ActionInject, opsTotal/5 + 200: ActionHeal, opsTotal / 2: ActionInject, opsTotal/2 + 200: ActionHeal}
	for invoked < opsTotal {
		if action, due := schedule[invoked]; due {
			s.b.nemesis(action, true)
			delete(schedule, invoked)
		}
		w := workers[s.rng.Intn(nWorkers)]
		switch w.phase {
		case 0:
			s.start(w)
			invoked++
		case 1:
			s.apply(w)
		case 2:
			s.finish(w)
		}
	}
	for _, ss := range s.sessions {
		log := append([]string(nil), ss.log...)
		sum := sha256.Sum256([]byte(strings.Join(log, "\n")))
		s.b.setFinal(ss.name, ss.rev(), log...)
		for n := range s.b.final.Nodes {
			cp := s.b.final.Nodes[n][ss.name]
			cp.ArtifactSHA256 = hex.EncodeToString(sum[:])
			s.b.final.Nodes[n][ss.name] = cp
		}
	}
	return s.b.ops, s.b.final
}

var simOptions = Options{MinOKBeforeFaults: 100, MinFaults: 2, LinearizableTimeout: 60 * time.Second}

func TestCheckersSimulatedValid(t *testing.T) {
	for _, seed := range []int64{1, 2} {
		s := newSim(seed, 20, bugNone)
		ops, final := s.run(16, 20*500)
		start := time.Now()
		rep := Check(ops, final, simOptions)
		t.Logf("seed %d: %d records checked in %s; linearizable stats %v", seed, len(ops), time.Since(start).Round(time.Millisecond), rep.Result(NameLinearizable).Stats)
		if rep.Valid != True {
			t.Fatalf("seed %d: report = %s, want true:\n%s", seed, rep.Valid, dump(rep))
		}
	}
}

func TestCheckersSimulatedBugs(t *testing.T) {
	cases := []struct {
		name    string
		bug     simBug
		checker string
	}{
		{"drop an acknowledged append", bugDropAck, NameLost},
		{"stale read", bugStaleRead, NameLinearizable},
	}
	for _, c := range cases {
		t.Run(strings.ReplaceAll(c.name, " ", "_"), func(t *testing.T) {
			s := newSim(7, 20, c.bug)
			ops, final := s.run(16, 20*500)
			if !s.bugged {
				t.Fatal("the bug never fired")
			}
			rep := Check(ops, final, simOptions)
			if rep.Valid != False {
				t.Fatalf("report = %s, want false:\n%s", rep.Valid, dump(rep))
			}
			r := rep.Result(c.checker)
			if r.Valid != False {
				t.Fatalf("%s = %s, want false:\n%s", c.checker, r.Valid, dump(rep))
			}
			t.Logf("%s: %s", c.checker, r.Witnesses[0].Text)
		})
	}
}
