package jepsen

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// The "creators-planmode" and "lease" workloads. Their roles are fixed per
// worker (a stable index; the process number changes after an unknown
// write), and their state machines keep what each agent believes: its lease
// epoch, its next seq, whether its turn is open.

// seedSession registers a session and writes its first event through a
// recorded set-up process (every marker in a log must come from a recorded
// append), retrying until both are acknowledged.
func seedSession(ctx context.Context, r *run, id string) (next int64, err error) {
	p := &proc{id: r.newProcess(), rng: r.rng}
	for attempt := 0; attempt < 30; attempt++ {
		p.node = r.leader(ctx)
		done := r.op(ctx, p, history.Op{F: history.FCreate, Session: id, Owner: "setup"}, true,
			func(ctx context.Context, c *client.Client) (history.Op, error) {
				_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: header(id), RequestId: "setup-" + id})
				return history.Op{}, err
			})
		if done.Type != history.OK {
			time.Sleep(200 * time.Millisecond)
			continue
		}
		m := r.marker(p.id)
		ev := history.WorkloadEvent(m, 0, time.Now().UnixMilli())
		for a := 0; a < 30; a++ {
			done = r.op(ctx, p, history.Op{F: history.FAppend, Session: id, Seq: 0, Events: []string{m}}, true,
				func(ctx context.Context, c *client.Client) (history.Op, error) {
					res, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{ev}})
					return history.Op{NextSeq: res.GetNextSeq(), Revision: res.GetRevision(), Duplicate: res.GetDuplicate()}, err
				})
			if done.Type == history.OK {
				return done.NextSeq, nil
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	return 0, fmt.Errorf("could not seed session %s", id)
}

// prepareOp takes ownership of a session for owner with ttl.
func prepareOp(ctx context.Context, r *run, p *proc, id, owner string, ttl time.Duration) history.Op {
	reqID := fmt.Sprintf("prep-%s-%d", owner, r.markers.Add(1))
	return r.op(ctx, p, history.Op{F: history.FPrepare, Session: id, Owner: owner}, true,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			v, l, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: id, Owner: owner, TtlMs: ttl.Milliseconds(), RequestId: reqID})
			return history.Op{Epoch: l.GetEpoch(), Owner: owner, NextSeq: v.GetNextSeq(), Revision: v.GetRevision()}, err
		})
}

// appendOp appends events (JSON texts with their identities) at seq.
func appendOp(ctx context.Context, r *run, p *proc, id string, seq int64, epoch uint64, events, ids []string) history.Op {
	return r.op(ctx, p, history.Op{F: history.FAppend, Session: id, Seq: seq, Events: ids, Epoch: epoch}, true,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			res, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: events, LeaseEpoch: epoch})
			return history.Op{NextSeq: res.GetNextSeq(), Revision: res.GetRevision(), Duplicate: res.GetDuplicate()}, err
		})
}

// agent is what one agent worker believes about its session.
type agent struct {
	session  string
	owner    string
	epoch    uint64
	next     int64
	sync     bool   // the next seq is unknown: read it first
	inTurn   bool   //
	turn     int    //
	steps    int    // steps left in the open turn
	preStep  bool   // this step's PreStep is done
	unsure   string // identity of an append with an unknown outcome
	unsureTo bool   // the turn state that append would set
}

// creatorsPlanMode: concurrent creators racing for the same session ids,
// and agents running turns on owned sessions while UIs on every node switch
// plan mode (through Set without the lease epoch) and readers read it.
type creatorsPlanMode struct {
	mu       sync.Mutex
	agents   map[int]*agent
	contests map[int]int // creator worker → next contest index
	maxIDs   int
	created  map[string]bool
}

func newCreatorsPlanMode() *creatorsPlanMode {
	return &creatorsPlanMode{agents: map[int]*agent{}, contests: map[int]int{}, maxIDs: 80, created: map[string]bool{}}
}

func (w *creatorsPlanMode) faults() []string {
	return []string{"isolate-leader", "kill-leader", "pause-leader", "kill-one"}
}

func (w *creatorsPlanMode) sessions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.agents {
		out = append(out, a.session)
	}
	for id := range w.created {
		out = append(out, id)
	}
	sort.Strings(out)
	return out
}

// Roles by worker index: 0 mod 3 agents, 1 mod 3 UIs and readers, 2 mod 3
// creators.
func (w *creatorsPlanMode) setup(ctx context.Context, r *run) error {
	workers := r.cfg.Processes*len(r.b.Nodes()) + r.cfg.Processes
	p := &proc{id: r.newProcess(), rng: r.rng}
	for i := 0; i < workers; i += 3 {
		a := &agent{session: fmt.Sprintf("pm-%02d", i), owner: fmt.Sprintf("agent-%02d", i)}
		next, err := seedSession(ctx, r, a.session)
		if err != nil {
			return err
		}
		a.next = next
		for attempt := 0; a.epoch == 0; attempt++ {
			if attempt == 30 {
				return fmt.Errorf("could not prepare %s", a.session)
			}
			p.node = r.leader(ctx)
			done := prepareOp(ctx, r, p, a.session, a.owner, 10*time.Minute)
			if done.Type == history.OK {
				a.epoch, a.next = done.Epoch, done.NextSeq
			} else {
				time.Sleep(200 * time.Millisecond)
			}
		}
		w.agents[i] = a
	}
	return nil
}

func (w *creatorsPlanMode) planSessions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, a := range w.agents {
		out = append(out, a.session)
	}
	sort.Strings(out)
	return out
}

func (w *creatorsPlanMode) step(ctx context.Context, r *run, p *proc) {
	switch p.worker % 3 {
	case 0:
		w.mu.Lock()
		a := w.agents[p.worker]
		w.mu.Unlock()
		if a != nil {
			agentStep(ctx, r, p, a)
		}
	case 1:
		id := w.randomPlanSession(p)
		if p.rng.Intn(2) == 0 {
			setModeOp(ctx, r, p, id, p.rng.Intn(2) == 0)
		} else {
			getModeOp(ctx, r, p, id)
		}
	default:
		w.createStep(ctx, r, p)
	}
}

// createStep races for contest id c-<k>: every creator tries every id in
// order, with its own header (only one can win), then appends at seq 0
// (at most one append can land there).
func (w *creatorsPlanMode) createStep(ctx context.Context, r *run, p *proc) {
	w.mu.Lock()
	k := w.contests[p.worker]
	if k >= w.maxIDs {
		w.mu.Unlock()
		getModeOp(ctx, r, p, w.randomPlanSession(p))
		return
	}
	w.contests[p.worker] = k + 1
	id := fmt.Sprintf("c-%03d", k)
	w.created[id] = true
	w.mu.Unlock()
	owner := fmt.Sprintf("w%02d", p.worker)
	cwd := "/creator/" + owner
	h := &sessionpb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}
	r.op(ctx, p, history.Op{F: history.FCreate, Session: id, Owner: owner}, true,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: h, RequestId: "create-" + id + "-" + owner})
			return history.Op{Owner: owner}, err
		})
	m := r.marker(p.id)
	appendOp(ctx, r, p, id, 0, 0, []string{history.WorkloadEvent(m, 0, time.Now().UnixMilli())}, []string{m})
}

func (w *creatorsPlanMode) randomPlanSession(p *proc) string {
	ss := w.planSessions()
	return ss[p.rng.Intn(len(ss))]
}

func (w *creatorsPlanMode) final(ctx context.Context, r *run) error {
	w.mu.Lock()
	epochs := map[string]uint64{}
	for _, a := range w.agents {
		epochs[a.session] = a.epoch
	}
	w.mu.Unlock()
	return tombstones(ctx, r, w.sessions(), func(id string) uint64 { return epochs[id] })
}

func setModeOp(ctx context.Context, r *run, p *proc, id string, want bool) history.Op {
	v := want
	reqID := fmt.Sprintf("set-%d", r.markers.Add(1))
	return r.op(ctx, p, history.Op{F: history.FSetMode, Session: id, Active: &v}, true,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			res, err := c.PlanSet(ctx, &sessionpb.PlanSetRequest{SessionId: id, Active: want, RequestId: reqID})
			return history.Op{Outcome: res.GetOutcome().String(), NextSeq: res.GetNextSeq(), Revision: res.GetRevision(),
				Appended: identities(res.GetAppendedEvents())}, err
		})
}

func getModeOp(ctx context.Context, r *run, p *proc, id string) history.Op {
	return r.op(ctx, p, history.Op{F: history.FGetMode, Session: id}, false,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			res, err := c.PlanGet(ctx, &sessionpb.PlanGetRequest{SessionId: id})
			if err != nil {
				return history.Op{}, err
			}
			active := res.GetActive()
			return history.Op{Active: &active, Pending: res.Pending, NextSeq: res.GetNextSeq()}, nil
		})
}

// agentStep runs one operation of an agent's loop: turn/start, then steps
// (PreStep, then the step's events), then turn/end.
func agentStep(ctx context.Context, r *run, p *proc, a *agent) {
	if a.sync {
		rd := readOp(ctx, r, p, a.session, nil)
		if rd.Type != history.OK {
			return
		}
		a.next, a.sync = rd.NextSeq, false
		if a.unsure != "" {
			for _, id := range rd.Events {
				if id == a.unsure {
					a.inTurn = a.unsureTo
				}
			}
			a.unsure = ""
		}
		return
	}
	now := time.Now().UnixMilli()
	after := func(done history.Op, ids []string, inTurn bool) bool {
		switch {
		case done.Type == history.OK:
			a.next = done.NextSeq
			return true
		case done.Type == history.Info:
			a.sync, a.unsure, a.unsureTo = true, ids[0], inTurn
		case done.Reason == "SEQ_MISMATCH":
			a.sync = true
		}
		return false
	}
	switch {
	case !a.inTurn:
		a.turn++
		m := r.marker(p.id)
		ev := history.MarkedEvent("turn/start", m, fmt.Sprintf(`"turn":%d`, a.turn), a.next, now)
		if after(appendOp(ctx, r, p, a.session, a.next, a.epoch, []string{ev}, []string{m}), []string{m}, true) {
			a.inTurn, a.steps, a.preStep = true, 1+p.rng.Intn(4), false
		}
	case a.steps > 0 && !a.preStep:
		expected := a.next
		reqID := fmt.Sprintf("pre-%d", r.markers.Add(1))
		done := r.op(ctx, p, history.Op{F: history.FPreStep, Session: a.session, Seq: expected, Epoch: a.epoch}, true,
			func(ctx context.Context, c *client.Client) (history.Op, error) {
				res, err := c.PlanPreStep(ctx, &sessionpb.PlanPreStepRequest{SessionId: a.session, LeaseEpoch: a.epoch,
					ExpectedNextSeq: expected, RequestId: reqID})
				active := res.GetActive()
				return history.Op{Active: &active, Appended: identities(res.GetAppendedEvents()), NextSeq: res.GetNextSeq(),
					Revision: res.GetRevision()}, err
			})
		switch {
		case done.Type == history.OK:
			a.next, a.preStep = done.NextSeq, true
		default:
			a.sync = done.Type == history.Info || done.Reason == "SEQ_MISMATCH"
		}
	case a.steps > 0:
		n := 1 + p.rng.Intn(2)
		var evs, ids []string
		for i := 0; i < n; i++ {
			m := r.marker(p.id)
			evs, ids = append(evs, history.WorkloadEvent(m, a.next+int64(i), now)), append(ids, m)
		}
		if after(appendOp(ctx, r, p, a.session, a.next, a.epoch, evs, ids), ids, true) {
			a.steps--
			a.preStep = false
		}
	default:
		ev := fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"completed"}}}`, a.next, now, a.turn)
		id := history.Identity([]byte(ev))
		if after(appendOp(ctx, r, p, a.session, a.next, a.epoch, []string{ev}, []string{id}), []string{id}, false) {
			a.inTurn = false
		}
	}
}

// leaseWorkload: several writers per session take the lease in turn; a
// writer sometimes stalls past its lease (as a paused agent host would) and
// then writes with its old epoch, which must be fenced once another writer
// has prepared (docs/design.md "Ownership").
type leaseWorkload struct {
	mu      sync.Mutex
	ids     []string
	writers map[int]*agent
	ttl     time.Duration
}

func newLeaseWorkload() *leaseWorkload {
	return &leaseWorkload{writers: map[int]*agent{}, ttl: 1500 * time.Millisecond}
}

func (w *leaseWorkload) faults() []string {
	return []string{"isolate-leader", "kill-leader", "pause-leader"}
}

func (w *leaseWorkload) sessions() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.ids...)
}

func (w *leaseWorkload) setup(ctx context.Context, r *run) error {
	for k := 0; k < 4; k++ {
		id := fmt.Sprintf("ls-%d", k)
		if _, err := seedSession(ctx, r, id); err != nil {
			return err
		}
		w.ids = append(w.ids, id)
	}
	return nil
}

func (w *leaseWorkload) step(ctx context.Context, r *run, p *proc) {
	w.mu.Lock()
	a := w.writers[p.worker]
	if a == nil {
		a = &agent{session: w.ids[p.worker%len(w.ids)], owner: fmt.Sprintf("w%02d", p.worker)}
		w.writers[p.worker] = a
	}
	w.mu.Unlock()
	if a.sync {
		rd := readOp(ctx, r, p, a.session, nil)
		if rd.Type == history.OK {
			a.next, a.sync = rd.NextSeq, false
			if a.unsure != "" {
				// Did the turn/start with the unknown outcome land?
				for _, id := range rd.Events {
					if id == a.unsure {
						a.inTurn = true
					}
				}
				a.unsure = ""
			}
		}
		return
	}
	if a.epoch == 0 {
		done := prepareOp(ctx, r, p, a.session, a.owner, w.ttl)
		if done.Type == history.OK {
			// Prepare committed the crash repair of the previous owner's open
			// turn (its closers); this owner opens its own turn next.
			a.epoch, a.next, a.inTurn = done.Epoch, done.NextSeq, false
		} else {
			time.Sleep(time.Duration(200+p.rng.Intn(600)) * time.Millisecond) // someone else holds it
		}
		return
	}
	if !a.inTurn {
		// Each owner works inside one turn it never closes: the next owner's
		// Prepare must repair it.
		m := r.marker(p.id)
		ev := history.MarkedEvent("turn/start", m, fmt.Sprintf(`"turn":%d`, a.epoch), a.next, time.Now().UnixMilli())
		done := appendOp(ctx, r, p, a.session, a.next, a.epoch, []string{ev}, []string{m})
		switch {
		case done.Type == history.OK:
			a.next, a.inTurn = done.NextSeq, true
		case done.Reason == "LEASE_FENCED":
			a.epoch = 0
		case done.Type == history.Info:
			a.sync, a.unsure = true, m
		case done.Reason == "SEQ_MISMATCH":
			a.sync = true
		}
		return
	}
	switch x := p.rng.Intn(100); {
	case x < 4:
		// Stall past the lease without renewing it, then carry on with the
		// old epoch as a paused agent host would.
		select {
		case <-ctx.Done():
			return
		case <-time.After(w.ttl + time.Duration(500+p.rng.Intn(1500))*time.Millisecond):
		}
	case x < 25:
		reqID := fmt.Sprintf("ka-%d", r.markers.Add(1))
		epoch := a.epoch
		done := r.op(ctx, p, history.Op{F: history.FKeepAlive, Session: a.session, Epoch: epoch, Owner: a.owner}, true,
			func(ctx context.Context, c *client.Client) (history.Op, error) {
				_, err := c.KeepAlive(ctx, &sessionpb.KeepAliveRequest{RequestId: reqID,
					Lease: &sessionpb.Lease{SessionId: a.session, Owner: a.owner, Epoch: epoch}})
				return history.Op{}, err
			})
		if done.Reason == "LEASE_FENCED" {
			a.epoch = 0
		}
	default:
		n := 1 + p.rng.Intn(2)
		var evs, ids []string
		now := time.Now().UnixMilli()
		for i := 0; i < n; i++ {
			m := r.marker(p.id)
			evs, ids = append(evs, history.WorkloadEvent(m, a.next+int64(i), now)), append(ids, m)
		}
		done := appendOp(ctx, r, p, a.session, a.next, a.epoch, evs, ids)
		switch {
		case done.Type == history.OK:
			a.next = done.NextSeq
		case done.Reason == "LEASE_FENCED":
			a.epoch = 0 // taken over: prepare again later
		case done.Type == history.Info || done.Reason == "SEQ_MISMATCH":
			a.sync = true
		}
	}
}

func (w *leaseWorkload) final(ctx context.Context, r *run) error {
	// Take each session over once more through a final owner, so the final
	// appends carry the current epoch.
	p := &proc{id: r.newProcess(), rng: r.rng}
	epochs := map[string]uint64{}
	for _, id := range w.sessions() {
		for attempt := 0; attempt < 40 && epochs[id] == 0; attempt++ {
			p.node = r.leader(ctx)
			done := prepareOp(ctx, r, p, id, "final", time.Minute)
			if done.Type == history.OK {
				epochs[id] = done.Epoch
			} else {
				time.Sleep(250 * time.Millisecond) // a writer's lease is still running out
			}
		}
	}
	return tombstones(ctx, r, w.sessions(), func(id string) uint64 { return epochs[id] })
}
