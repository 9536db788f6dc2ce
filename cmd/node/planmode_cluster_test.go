package main

// The PlanMode service on an in-process three-node cluster: the pending
// selection and the approved exit are replicated state that survives the
// loss of the leader, and concurrent Set, PreStep and Append calls from
// several clients never apply one selection twice, never lose one, and never
// break the agent's own seq. Every top-level name here starts with "pmc".

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

const (
	pmcCwd        = "/w/planmode-cluster"
	pmcHeaderData = `{"header":{"config":{"provider":"test","model":"test-model"}},"reason":%q}`
)

// pmcEvent is pmEv for an event the agent writes: time is derived from seq.
func pmcEvent(typ string, seq int64, data string) string {
	return pmEv(typ, seq, 1_700_000_000_000+seq, data)
}

// pmcParsed is the part of a stored event these tests look at.
type pmcParsed struct {
	Type string          `json:"type"`
	Seq  int64           `json:"seq"`
	Data json.RawMessage `json:"data"`
}

func pmcParse(t testing.TB, ev string) pmcParsed {
	t.Helper()
	var p pmcParsed
	if err := json.Unmarshal([]byte(ev), &p); err != nil {
		t.Fatalf("event is not JSON: %v: %s", err, ev)
	}
	return p
}

// pmcPlanActive returns data.active of a plan/mode event (ok false for any
// other type).
func pmcPlanActive(t testing.TB, ev string) (active, ok bool) {
	t.Helper()
	p := pmcParse(t, ev)
	if p.Type != "plan/mode" {
		return false, false
	}
	var d struct {
		Active *bool `json:"active"`
	}
	if err := json.Unmarshal(p.Data, &d); err != nil || d.Active == nil {
		t.Fatalf("plan/mode without a boolean active: %s", ev)
	}
	return *d.Active, true
}

// pmcSummary is the independent fold of a log prefix: the plan state, an
// open turn, and the state the last request/header told the model.
type pmcSummary struct {
	fold, open, told, hasTold bool
}

func pmcSummarize(t testing.TB, events []string) pmcSummary {
	t.Helper()
	var s pmcSummary
	for _, ev := range events {
		if v, ok := pmcPlanActive(t, ev); ok {
			s.fold = v
			continue
		}
		switch pmcParse(t, ev).Type {
		case "turn/start":
			s.open = true
		case "turn/end":
			s.open = false
		case "request/header":
			s.told, s.hasTold = s.fold, true
		}
	}
	return s
}

// pmcClaim is an event some call says it wrote at seq.
type pmcClaim struct {
	seq  int64
	ev   string
	from string
}

// pmcStep is one accepted PreStep: where the agent's next seq was when it
// was called, and its (first) response.
type pmcStep struct {
	pos    int64
	resp   *pb.PlanPreStepResponse
	silent bool // an approved exit was pending: never narrated
}

// pmcAgent is the session's owner: it numbers its events itself, appends
// them with its lease epoch, and calls PreStep at each step.
type pmcAgent struct {
	t     testing.TB
	c     *client.Client
	id    string
	epoch uint64

	seq    int64
	mirror atomic.Int64 // seq, for other goroutines to read
	turn   int
	step   int
	told   bool
	hasTld bool
	nreq   int

	acked  []pmcClaim // every event acknowledged to the agent, in order
	claims []pmcClaim // events the server said it appended for the agent's calls
	steps  []pmcStep

	appendMismatch  map[string]int // SEQ_MISMATCH on Append, by event type
	preStepMismatch int
	// silentNext: the next pre-step applies an approved exit (no notice).
	silentNext bool
}

func pmcNewAgent(t testing.TB, c *client.Client, id string, epoch uint64) *pmcAgent {
	return &pmcAgent{t: t, c: c, id: id, epoch: epoch, appendMismatch: map[string]int{}}
}

func (a *pmcAgent) setSeq(s int64) {
	a.seq = s
	a.mirror.Store(s)
}

// relearn reads the stored next seq (linearizable) after a SEQ_MISMATCH.
func (a *pmcAgent) relearn(ctx context.Context) error {
	g, err := a.c.PlanGet(ctx, &pb.PlanGetRequest{SessionId: a.id})
	if err != nil {
		return fmt.Errorf("re-learn next seq: %w", err)
	}
	a.setSeq(g.NextSeq)
	return nil
}

// append writes one event built for the agent's next seq; on SEQ_MISMATCH
// (another writer took the seq) it re-learns the next seq and rebuilds.
func (a *pmcAgent) append(ctx context.Context, typ string, build func(seq int64) string) error {
	for attempt := 0; attempt < 20; attempt++ {
		ev := build(a.seq)
		resp, err := a.c.Append(ctx, &pb.AppendRequest{SessionId: a.id, Events: []string{ev}, LeaseEpoch: a.epoch})
		if errors.Is(err, sessionstore.ErrSeqMismatch) {
			a.appendMismatch[typ]++
			if err := a.relearn(ctx); err != nil {
				return err
			}
			continue
		}
		if err != nil {
			return fmt.Errorf("append %s at %d: %w", typ, a.seq, err)
		}
		if resp.NextSeq != a.seq+1 {
			return fmt.Errorf("append %s at %d: next_seq %d, want %d", typ, a.seq, resp.NextSeq, a.seq+1)
		}
		a.acked = append(a.acked, pmcClaim{seq: a.seq, ev: ev, from: "agent " + typ})
		a.setSeq(a.seq + 1)
		return nil
	}
	return fmt.Errorf("append %s: SEQ_MISMATCH 20 times in a row", typ)
}

func (a *pmcAgent) turnStart(ctx context.Context) error {
	a.turn++
	a.step = 0
	return a.append(ctx, "turn/start", func(s int64) string {
		return pmcEvent("turn/start", s, fmt.Sprintf(`{"turn":%d}`, a.turn))
	})
}

func (a *pmcAgent) turnEnd(ctx context.Context) error {
	return a.append(ctx, "turn/end", func(s int64) string {
		return pmcEvent("turn/end", s, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, a.turn))
	})
}

// preStep is the agent's accepted pre-step with expected_next_seq = its own
// next seq. With repeat, the identical request (same request id) is sent a
// second time and must get the identical response.
func (a *pmcAgent) preStep(ctx context.Context, repeat bool) (*pb.PlanPreStepResponse, error) {
	for attempt := 0; attempt < 20; attempt++ {
		a.nreq++
		req := &pb.PlanPreStepRequest{SessionId: a.id, LeaseEpoch: a.epoch, ExpectedNextSeq: a.seq,
			RequestId: fmt.Sprintf("pmc-%s-prestep-%d", a.id, a.nreq)}
		resp, err := a.c.PlanPreStep(ctx, req)
		if errors.Is(err, sessionstore.ErrSeqMismatch) {
			a.preStepMismatch++
			if err := a.relearn(ctx); err != nil {
				return nil, err
			}
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("pre-step at %d: %w", a.seq, err)
		}
		if repeat {
			again, err := a.c.PlanPreStep(ctx, req)
			if err != nil {
				return nil, fmt.Errorf("repeated pre-step %s: %w", req.RequestId, err)
			}
			if !proto.Equal(again, resp) {
				return nil, fmt.Errorf("repeated pre-step %s: got %v, first response %v", req.RequestId, again, resp)
			}
		}
		if want := a.seq + int64(len(resp.AppendedEvents)); resp.NextSeq != want {
			return nil, fmt.Errorf("pre-step at %d appended %d events but next_seq is %d, want %d",
				a.seq, len(resp.AppendedEvents), resp.NextSeq, want)
		}
		a.steps = append(a.steps, pmcStep{pos: a.seq, resp: resp, silent: a.silentNext})
		a.silentNext = false
		for i, ev := range resp.AppendedEvents {
			a.claims = append(a.claims, pmcClaim{seq: a.seq + int64(i), ev: ev, from: "pre-step " + req.RequestId})
		}
		a.setSeq(resp.NextSeq)
		return resp, nil
	}
	return nil, errors.New("pre-step: SEQ_MISMATCH 20 times in a row")
}

// runStep is one step of the agent loop: PreStep, step/start, the notices as
// user messages, a request/header when the state differs from the one last
// told (or none was sent yet), mid (the step's tool calls), step/end.
func (a *pmcAgent) runStep(ctx context.Context, repeat bool, mid func() error) (*pb.PlanPreStepResponse, error) {
	r, err := a.preStep(ctx, repeat)
	if err != nil {
		return nil, err
	}
	a.step++
	turn, step := a.turn, a.step
	if err := a.append(ctx, "step/start", func(s int64) string {
		return pmcEvent("step/start", s, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
	}); err != nil {
		return nil, err
	}
	for _, n := range r.Notices {
		if err := a.append(ctx, "user/message", func(s int64) string { return pmSurf("user/message", s, 1_700_000_000_000+s, n) }); err != nil {
			return nil, err
		}
	}
	if !a.hasTld || a.told != r.Active {
		reason := "change"
		if !a.hasTld {
			reason = "initial"
		}
		if err := a.append(ctx, "request/header", func(s int64) string {
			return pmcEvent("request/header", s, fmt.Sprintf(pmcHeaderData, reason))
		}); err != nil {
			return nil, err
		}
		a.told, a.hasTld = r.Active, true
	}
	if mid != nil {
		if err := mid(); err != nil {
			return nil, err
		}
	}
	if err := a.append(ctx, "step/end", func(s int64) string {
		return pmcEvent("step/end", s, fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
	}); err != nil {
		return nil, err
	}
	return r, nil
}

// pmcKill stops a node without the leadership hand-over testNode.Close
// performs: Raft is shut down first, as if the process had died, so the
// others must notice the silence and elect a new leader; then the rest of the
// node is closed.
func pmcKill(t *testing.T, nd *clNode) {
	t.Helper()
	if err := nd.srv.node.Raft().Shutdown().Error(); err != nil {
		t.Fatalf("shut down raft on %s: %v", nd.id, err)
	}
	nd.Close()
}

// pmcWaitLeader waits until one of the running nodes is the leader and every
// running node knows a leader.
func pmcWaitLeader(t *testing.T, nodes []*clNode) *clNode {
	t.Helper()
	var l *clNode
	var live []*clNode
	clustertest.Eventually(t, 30*time.Second, func() error {
		live = nil
		for _, nd := range nodes {
			if nd.srv != nil {
				live = append(live, nd)
			}
		}
		if l = leaderOf(live); l == nil {
			return errors.New("no leader among the running nodes")
		}
		return nil
	})
	for _, nd := range live {
		nd.waitReady(false)
	}
	return l
}

// pmcLive returns a running node other than not (nil for none).
func pmcLive(nodes []*clNode, not *clNode) *clNode {
	for _, nd := range nodes {
		if nd.srv != nil && nd != not {
			return nd
		}
	}
	return nil
}

// pmcRestart restarts a closed node on its data directory, puts it in nodes,
// and waits until it is a voter of a cluster with a leader.
func pmcRestart(t *testing.T, nodes []*clNode, old *clNode) *clNode {
	t.Helper()
	back := &clNode{testNode: old.Restart(), id: old.id}
	for i, nd := range nodes {
		if nd == old {
			nodes[i] = back
		}
	}
	back.waitReady(false)
	waitVoters(t, nodes, len(nodes))
	return back
}

// pmcWaitCaughtUp waits until every running node has applied everything the
// leader had committed when called.
func pmcWaitCaughtUp(t *testing.T, ctx context.Context, nodes []*clNode) {
	t.Helper()
	leader := pmcWaitLeader(t, nodes)
	st, err := leader.Client.Status(ctx)
	if err != nil {
		t.Fatalf("status of the leader %s: %v", leader.id, err)
	}
	clustertest.Eventually(t, 30*time.Second, func() error {
		for _, nd := range nodes {
			if nd.srv == nil {
				continue
			}
			if s, err := nd.Client.Status(ctx); err != nil || s.AppliedIndex < st.CommitIndex {
				return fmt.Errorf("%s did not apply up to %d (%v, %v)", nd.id, st.CommitIndex, s, err)
			}
		}
		return nil
	})
}

// pmcGet is PlanGet through c, failing the test on error.
func pmcGet(t *testing.T, ctx context.Context, c *client.Client, id string) *pb.PlanGetResponse {
	t.Helper()
	g, err := c.PlanGet(ctx, &pb.PlanGetRequest{SessionId: id})
	if err != nil {
		t.Fatalf("plan get: %v", err)
	}
	return g
}

// pmcCheckGet checks a Get answer: active, pending (nil = absent) and, when
// nextSeq >= 0, next_seq.
func pmcCheckGet(t *testing.T, what string, g *pb.PlanGetResponse, active bool, pending *bool, nextSeq int64) {
	t.Helper()
	okPending := (pending == nil) == (g.Pending == nil) && (pending == nil || *pending == *g.Pending)
	if g.Active != active || !okPending || (nextSeq >= 0 && g.NextSeq != nextSeq) {
		want := "absent"
		if pending != nil {
			want = fmt.Sprint(*pending)
		}
		t.Fatalf("%s: plan get = %v, want active=%v pending=%s next_seq=%d", what, g, active, want, nextSeq)
	}
}

func pmcBool(b bool) *bool { return &b }

// pmcConverge waits until every node holds the same n events (stale local
// reads), then checks that every node's stale Inspect shows those events,
// the same revision and next_seq n. It returns the log.
func pmcConverge(t *testing.T, ctx context.Context, nodes []*clNode, id string, n int64) []string {
	t.Helper()
	var ref []string
	clustertest.Eventually(t, 30*time.Second, func() error {
		ref = nil
		for _, nd := range nodes {
			r, err := nd.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id, Consistency: pb.Consistency_STALE})
			if err != nil || int64(len(r.Events)) != n {
				return fmt.Errorf("nodes did not converge on %d events", n)
			}
			if ref == nil {
				ref = r.Events
			} else if strings.Join(ref, "\n") != strings.Join(r.Events, "\n") {
				return fmt.Errorf("nodes did not converge on %d events", n)
			}
		}
		return nil
	})
	var rev string
	for i, nd := range nodes {
		v, err := nd.Client.Inspect(ctx, &pb.InspectRequest{SessionId: id, Consistency: pb.Consistency_STALE})
		if err != nil {
			t.Fatalf("inspect on %s: %v", nd.id, err)
		}
		if v.NextSeq != n || strings.Join(v.Events, "\n") != strings.Join(ref, "\n") {
			t.Fatalf("inspect on %s: next_seq %d and %d events, want %d and the stored log", nd.id, v.NextSeq, len(v.Events), n)
		}
		if i == 0 {
			rev = v.Revision
		} else if v.Revision != rev {
			t.Fatalf("inspect on %s: revision %q, on %s %q", nd.id, v.Revision, nodes[0].id, rev)
		}
	}
	return ref
}

// pmcVerifyLog checks a final log against what every writer was told:
// contiguous seqs; each event acknowledged to the agent at its seq, in the
// agent's order; each event a call said it appended at the seq it claims;
// every position accounted for exactly once; plan/mode written only by the
// server, never twice in a row with the same value; each PreStep's answer
// equal to the fold at its next_seq, at most one plan/mode per PreStep, and a
// notice exactly when the narration rule asks for one (a header was sent and
// it told the other state; never when applying an approved exit). It returns
// the plan/mode events of the log.
func pmcVerifyLog(t *testing.T, log []string, a *pmcAgent, other []pmcClaim) []string {
	t.Helper()
	for i, ev := range log {
		if p := pmcParse(t, ev); p.Seq != int64(i) {
			t.Fatalf("log[%d] has seq %d: %s", i, p.Seq, ev)
		}
	}
	owner := make([]string, len(log))
	claim := func(c pmcClaim, serverWrite bool) {
		if c.seq < 0 || c.seq >= int64(len(log)) {
			t.Fatalf("%s claims seq %d beyond the log (%d events): %s", c.from, c.seq, len(log), c.ev)
		}
		if log[c.seq] != c.ev {
			t.Fatalf("%s claims %s at seq %d; the log holds %s", c.from, c.ev, c.seq, log[c.seq])
		}
		if owner[c.seq] != "" {
			t.Fatalf("seq %d is claimed by %s and by %s", c.seq, owner[c.seq], c.from)
		}
		if serverWrite != (pmcParse(t, c.ev).Type == "plan/mode" || pmcParse(t, c.ev).Type == "command/run" ||
			pmcParse(t, c.ev).Type == "command/done") {
			t.Fatalf("%s wrote %s", c.from, c.ev)
		}
		owner[c.seq] = c.from
	}
	last := int64(-1)
	for _, c := range a.acked {
		if c.seq <= last {
			t.Fatalf("the agent's acknowledged seqs are not increasing: %d after %d", c.seq, last)
		}
		last = c.seq
		claim(c, false)
	}
	for _, c := range a.claims {
		claim(c, true)
	}
	for _, c := range other {
		claim(c, true)
	}
	var modes []string
	var prev *bool
	for i, ev := range log {
		if owner[i] == "" {
			t.Fatalf("log[%d] was written by no call anyone was told of: %s", i, ev)
		}
		v, ok := pmcPlanActive(t, ev)
		if !ok {
			continue
		}
		modes = append(modes, ev)
		if (prev == nil && !v) || (prev != nil && *prev == v) {
			t.Fatalf("plan/mode at seq %d repeats the state before it (active %v): a selection applied twice", i, v)
		}
		prev = pmcBool(v)
	}
	for _, st := range a.steps {
		r := st.resp
		if len(r.AppendedEvents) > 1 {
			t.Fatalf("a pre-step at %d appended %d events: %v", st.pos, len(r.AppendedEvents), r.AppendedEvents)
		}
		for _, ev := range r.AppendedEvents {
			v, ok := pmcPlanActive(t, ev)
			if !ok || v != r.Active {
				t.Fatalf("a pre-step at %d answered active %v but appended %s", st.pos, r.Active, ev)
			}
		}
		if fold := pmcSummarize(t, log[:r.NextSeq]).fold; fold != r.Active {
			t.Fatalf("a pre-step at %d answered active %v; the log folds to %v at its next_seq %d", st.pos, r.Active, fold, r.NextSeq)
		}
		before := pmcSummarize(t, log[:st.pos])
		wantNotice := before.hasTold && before.told != r.Active && !st.silent
		if wantNotice != (len(r.Notices) > 0) || len(r.Notices) > 1 {
			t.Fatalf("a pre-step at %d (told %v, header %v, active %v) returned notices %v, want a notice: %v",
				st.pos, before.told, before.hasTold, r.Active, r.Notices, wantNotice)
		}
		for _, n := range r.Notices {
			want := pmNoticeExit
			if r.Active {
				want = pmNoticeEnter
			}
			pmCheckNoticeShape(t, n)
			if got := pmNoticeText(t, n); got != want {
				t.Fatalf("a pre-step at %d answered active %v with the notice %q", st.pos, r.Active, got)
			}
		}
	}
	return modes
}

// pmcSetup creates and prepares a session through c and returns the agent.
func pmcSetup(t *testing.T, ctx context.Context, c *client.Client, id string) *pmcAgent {
	t.Helper()
	cwd := pmcCwd
	if _, err := c.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	// A session is materialised (and can be prepared) by its first append.
	first := strings.TrimSuffix(pmcEvent("x-test/mark", 0, `{"m":"created"}`), "}") + `,"ignorable":true}`
	if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{first}}); err != nil {
		t.Fatalf("first append: %v", err)
	}
	view, lease, err := c.Prepare(ctx, &pb.PrepareRequest{SessionId: id, Owner: "agent-1", TtlMs: 10 * 60 * 1000})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if lease.Epoch == 0 || view.NextSeq != 1 {
		t.Fatalf("prepare: lease %v, next_seq %d; want an epoch and next_seq 1", lease, view.NextSeq)
	}
	a := pmcNewAgent(t, c, id, lease.Epoch)
	a.acked = append(a.acked, pmcClaim{seq: 0, ev: first, from: "agent x-test/mark"})
	a.setSeq(1)
	return a
}

// A selection queued mid-turn and an approved exit are replicated state: the
// leader holding them is killed, the new leader still holds them, and the
// agent's next PreStep applies each exactly once.
func TestPlanModeCluster_PendingSurvivesLeaderKill(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 150*time.Second)
	defer cancel()
	const id = "pmc-kill"
	leader := pmcWaitLeader(t, nodes)
	a := pmcSetup(t, ctx, leader.Client, id)
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}

	// Turn 1, step 1: nothing pending, no header yet, so no notice; the
	// header the step sends tells the model plan mode is off.
	must(a.turnStart(ctx))
	r, err := a.runStep(ctx, false, nil)
	must(err)
	if r.Active || len(r.AppendedEvents) != 0 || len(r.Notices) != 0 {
		t.Fatalf("first pre-step: %v, want inactive, nothing appended, no notice", r)
	}

	// A UI on a follower selects plan mode without the epoch: queued.
	ui, err := client.Dial(ctx, pmcLive(nodes, leader).srv.grpcAddr) // a follower
	must(err)
	defer ui.Close()
	set, err := ui.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: true, RequestId: "pmc-ui-1"})
	must(err)
	if set.Outcome != pb.Outcome_QUEUED || len(set.AppendedEvents) != 0 || set.NextSeq != a.seq {
		t.Fatalf("UI set(true) in an open turn: %v, want QUEUED, nothing appended, next_seq %d", set, a.seq)
	}
	for _, nd := range nodes {
		pmcCheckGet(t, "get on "+nd.id+" after the queued selection", pmcGet(t, ctx, nd.Client, id), false, pmcBool(true), a.seq)
	}

	// Kill the leader; the selection is still pending on the new leader and
	// on the other survivor.
	killed := leaderOf(nodes)
	pmcKill(t, killed)
	newLeader := pmcWaitLeader(t, nodes)
	t.Logf("killed leader %s; new leader %s", killed.id, newLeader.id)
	pmcCheckGet(t, "get on the new leader "+newLeader.id, pmcGet(t, ctx, newLeader.Client, id), false, pmcBool(true), a.seq)
	for _, nd := range nodes {
		if nd.srv != nil {
			pmcCheckGet(t, "get on survivor "+nd.id, pmcGet(t, ctx, nd.Client, id), false, pmcBool(true), a.seq)
		}
	}
	// A retry of the UI's request (same id) through a survivor answers the
	// first response and queues nothing new.
	ui2 := pmcLive(nodes, nil).Client
	again, err := ui2.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: true, RequestId: "pmc-ui-1"})
	must(err)
	if !proto.Equal(again, set) {
		t.Fatalf("retried UI set: %v, first response %v", again, set)
	}

	// The agent, through a survivor, runs step 2: the pre-step applies the
	// selection once, at the agent's next seq, and narrates it (the header of
	// step 1 told the model plan mode was off).
	a.c = pmcLive(nodes, newLeader).Client // a follower: forwarded to the new leader
	modeAt := a.seq
	r, err = a.runStep(ctx, true, nil)
	must(err)
	if !r.Active || len(r.AppendedEvents) != 1 || r.AppendedEvents[0] != a.claims[0].ev || a.claims[0].seq != modeAt {
		t.Fatalf("pre-step after the failover: %v, want active and one plan/mode at seq %d", r, modeAt)
	}
	if p := pmcParse(t, r.AppendedEvents[0]); p.Type != "plan/mode" || p.Seq != modeAt || string(p.Data) != `{"active":true}` {
		t.Fatalf("pre-step appended %s, want plan/mode {\"active\":true} at seq %d", r.AppendedEvents[0], modeAt)
	}
	// (pmcVerifyLog checks every notice's shape at the end.)
	if len(r.Notices) != 1 || pmNoticeText(t, r.Notices[0]) != pmNoticeEnter {
		t.Fatalf("pre-step notices %v, want exactly %q", r.Notices, pmNoticeEnter)
	}
	pmcCheckGet(t, "get after the applied selection", pmcGet(t, ctx, a.c, id), true, nil, a.seq)

	// Bring the killed node back and let it catch up, so that the cluster
	// keeps a quorum through the second kill.
	pmcRestart(t, nodes, killed)

	// Step 3: the agent presents a plan; the user approves it. The exit is
	// recorded as pending, silently.
	exitAt := int64(0)
	_, err = a.runStep(ctx, false, func() error {
		check, err := a.c.ExitPlan(ctx, &pb.PlanExitRequest{SessionId: id, Plan: "# Ship it\n\n1. Do the thing.", LeaseEpoch: a.epoch})
		if err != nil {
			return err
		}
		if !check.NeedsReview || check.Approved || check.IsError {
			return fmt.Errorf("exit_plan_mode without an answer: %v, want needs_review", check)
		}
		ex, err := a.c.ExitPlan(ctx, &pb.PlanExitRequest{SessionId: id, Plan: "# Ship it\n\n1. Do the thing.", LeaseEpoch: a.epoch,
			Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{Id: "plan-review", Selected: []string{"Approve"}}}}})
		if err != nil {
			return err
		}
		if !ex.Approved || ex.IsError {
			return fmt.Errorf("approved exit_plan_mode: %v, want approved", ex)
		}
		exitAt = a.seq
		return nil
	})
	must(err)
	pmcCheckGet(t, "get after the approval", pmcGet(t, ctx, a.c, id), true, pmcBool(false), a.seq)
	pmcWaitCaughtUp(t, ctx, nodes)

	// Kill the current leader again.
	killed2 := pmcWaitLeader(t, nodes)
	pmcKill(t, killed2)
	newLeader2 := pmcWaitLeader(t, nodes)
	t.Logf("killed leader %s; new leader %s (exit approved at seq %d)", killed2.id, newLeader2.id, exitAt)
	for _, nd := range nodes {
		if nd.srv != nil {
			pmcCheckGet(t, "get on survivor "+nd.id+" after the second kill", pmcGet(t, ctx, nd.Client, id), true, pmcBool(false), a.seq)
		}
	}

	// Step 4: the pre-step applies the exit silently.
	a.c = newLeader2.Client
	exitModeAt := a.seq
	a.silentNext = true
	r, err = a.runStep(ctx, true, nil)
	must(err)
	if r.Active || len(r.AppendedEvents) != 1 || len(r.Notices) != 0 {
		t.Fatalf("pre-step after the approved exit: %v, want inactive, one plan/mode, no notice", r)
	}
	if p := pmcParse(t, r.AppendedEvents[0]); p.Type != "plan/mode" || p.Seq != exitModeAt || string(p.Data) != `{"active":false}` {
		t.Fatalf("pre-step appended %s, want plan/mode {\"active\":false} at seq %d", r.AppendedEvents[0], exitModeAt)
	}
	pmcCheckGet(t, "get after the applied exit", pmcGet(t, ctx, a.c, id), false, nil, a.seq)
	must(a.turnEnd(ctx))

	// Every node, the second victim restarted, holds the same log: the
	// agent's events and exactly the two plan/mode events.
	pmcRestart(t, nodes, killed2)
	log := pmcConverge(t, ctx, nodes, id, a.seq)
	modes := pmcVerifyLog(t, log, a, nil)
	if len(modes) != 2 || pmcParse(t, modes[0]).Seq != modeAt || pmcParse(t, modes[1]).Seq != exitModeAt {
		t.Fatalf("plan/mode events %v, want one at seq %d and one at seq %d", modes, modeAt, exitModeAt)
	}
	if len(a.steps) != 4 {
		t.Fatalf("%d pre-steps recorded, want 4", len(a.steps))
	}
	for _, nd := range nodes {
		pmcCheckGet(t, "final get on "+nd.id, pmcGet(t, ctx, nd.Client, id), false, nil, a.seq)
	}
}

// pmcSetCall is one Set a UI made and the response it got.
type pmcSetCall struct {
	req  *pb.PlanSetRequest
	resp *pb.PlanSetResponse
}

// Concurrent Set (UIs without the epoch, and the owner with it), PreStep and
// Append on one session through every node never apply one selection twice,
// never lose one, and never break the agent's seq.
func TestPlanModeCluster_ConcurrentCallersNeverDuplicateOrLose(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	const id = "pmc-race"
	leader := pmcWaitLeader(t, nodes)
	a := pmcSetup(t, ctx, pmcLive(nodes, leader).Client, id) // the agent on a follower
	dial := func(nd *clNode) *client.Client {
		c, err := client.Dial(ctx, nd.srv.grpcAddr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}

	const (
		turns     = 14
		uiCount   = 3
		uiSets    = 40
		ownerSets = 40
	)
	// The seed fixes every random choice (not the interleaving); set
	// SESSIONSTORE_PMC_SEED to replay one.
	seed := uint64(time.Now().UnixNano())
	if v := os.Getenv("SESSIONSTORE_PMC_SEED"); v != "" {
		var err error
		if seed, err = strconv.ParseUint(v, 10, 64); err != nil {
			t.Fatalf("SESSIONSTORE_PMC_SEED: %v", err)
		}
	}
	t.Logf("seed %d", seed)

	var wg sync.WaitGroup
	var failed atomic.Bool
	fail := func(format string, args ...any) {
		failed.Store(true)
		t.Errorf(format, args...)
	}

	// The agent: turns of 1–4 steps, a short idle gap between turns.
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 1))
		for turn := 0; turn < turns && !failed.Load(); turn++ {
			if err := a.turnStart(ctx); err != nil {
				fail("agent: %v", err)
				return
			}
			for s, n := 0, 1+rng.IntN(4); s < n; s++ {
				if _, err := a.runStep(ctx, rng.IntN(4) == 0, nil); err != nil {
					fail("agent: %v", err)
					return
				}
			}
			if err := a.turnEnd(ctx); err != nil {
				fail("agent: %v", err)
				return
			}
			time.Sleep(time.Duration(rng.IntN(8)) * time.Millisecond)
		}
	}()

	// UIs without the epoch, one per node, each with a second connection to
	// the next node for some of its retries.
	uiCalls := make([][]pmcSetCall, uiCount)
	for u := 0; u < uiCount; u++ {
		own, other := dial(nodes[u%len(nodes)]), dial(nodes[(u+1)%len(nodes)])
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(10+u)))
			for k := 0; k < uiSets && !failed.Load(); k++ {
				req := &pb.PlanSetRequest{SessionId: id, Active: rng.IntN(2) == 0, RequestId: fmt.Sprintf("pmc-ui%d-%d", u, k)}
				resp, err := own.PlanSet(ctx, req)
				if err != nil {
					fail("UI %d set %s: %v", u, req.RequestId, err)
					return
				}
				if len(resp.AppendedEvents) != 0 || (resp.Outcome != pb.Outcome_QUEUED && resp.Outcome != pb.Outcome_CANCELLED && resp.Outcome != pb.Outcome_NOOP) {
					fail("UI %d set %s without the epoch: %v, want QUEUED, CANCELLED or NOOP and nothing appended", u, req.RequestId, resp)
					return
				}
				uiCalls[u] = append(uiCalls[u], pmcSetCall{req: req, resp: resp})
				if rng.IntN(4) == 0 {
					// A retry of this or an earlier request, through either node.
					prev := uiCalls[u][rng.IntN(len(uiCalls[u]))]
					c := own
					if rng.IntN(2) == 0 {
						c = other
					}
					again, err := c.PlanSet(ctx, prev.req)
					if err != nil {
						fail("UI %d retry of %s: %v", u, prev.req.RequestId, err)
						return
					}
					if !proto.Equal(again, prev.resp) {
						fail("UI %d retry of %s: %v, first response %v", u, prev.req.RequestId, again, prev.resp)
						return
					}
				}
				time.Sleep(time.Duration(rng.IntN(4)) * time.Millisecond)
			}
		}()
	}

	// The owner's own UI: Set with the epoch and expected_next_seq = the
	// agent's seq as last seen; on SEQ_MISMATCH it re-reads the stored next
	// seq and tries once more. It commits only while idle, at exactly the seq
	// it expects, and then takes the seq the agent meant to use next.
	var ownerClaims []pmcClaim
	ownerOutcomes := map[string]int{}
	ownerC := dial(nodes[2])
	wg.Add(1)
	go func() {
		defer wg.Done()
		rng := rand.New(rand.NewPCG(seed, 99))
		for k := 0; k < ownerSets && !failed.Load(); k++ {
			at, active := a.mirror.Load(), rng.IntN(2) == 0
			for try := 0; try < 2; try++ {
				req := &pb.PlanSetRequest{SessionId: id, Active: active, LeaseEpoch: a.epoch, ExpectedNextSeq: at,
					RequestId: fmt.Sprintf("pmc-owner-%d-%d", k, try)}
				resp, err := ownerC.PlanSet(ctx, req)
				if errors.Is(err, sessionstore.ErrSeqMismatch) {
					ownerOutcomes["SEQ_MISMATCH"]++
					g, err := ownerC.PlanGet(ctx, &pb.PlanGetRequest{SessionId: id})
					if err != nil {
						fail("owner get: %v", err)
						return
					}
					at = g.NextSeq
					continue
				}
				if err != nil {
					fail("owner set %s: %v", req.RequestId, err)
					return
				}
				ownerOutcomes[resp.Outcome.String()]++
				if resp.Outcome == pb.Outcome_COMMITTED {
					if len(resp.AppendedEvents) != 1 || resp.NextSeq != at+1 {
						fail("owner set %s committed at %d: %v, want one event and next_seq %d", req.RequestId, at, resp, at+1)
						return
					}
					ownerClaims = append(ownerClaims, pmcClaim{seq: at, ev: resp.AppendedEvents[0], from: "owner set " + req.RequestId})
				} else if len(resp.AppendedEvents) != 0 {
					fail("owner set %s: %v appended without committing", req.RequestId, resp)
					return
				}
				break
			}
			time.Sleep(time.Duration(rng.IntN(5)) * time.Millisecond)
		}
	}()
	wg.Wait()
	if failed.Load() {
		t.FailNow()
	}
	uiTotal := 0
	for _, c := range uiCalls {
		uiTotal += len(c)
	}
	t.Logf("concurrent phase: %d pre-steps, %d agent events, %d UI sets, owner sets %v, agent append SEQ_MISMATCH %v",
		len(a.steps), len(a.acked), uiTotal, ownerOutcomes, a.appendMismatch)

	// Only an owner's idle commit can take the agent's seq, and only between
	// turns: nothing inside a turn, PreStep included, ever mismatched.
	for typ, n := range a.appendMismatch {
		if typ != "turn/start" {
			t.Errorf("%d SEQ_MISMATCH on appends of %s inside a turn", n, typ)
		}
	}
	if a.preStepMismatch != 0 {
		t.Errorf("%d SEQ_MISMATCH on pre-steps", a.preStepMismatch)
	}
	if n, c := a.appendMismatch["turn/start"], ownerOutcomes["COMMITTED"]; n > c {
		t.Errorf("%d mismatched turn/start appends but only %d owner commits", n, c)
	}

	// No selection lost: the writers have stopped; the next pre-step applies
	// the pending selection if there is one, and leaves the state otherwise.
	check := nodes[2].Client
	g := pmcGet(t, ctx, check, id)
	want := g.Active
	if g.Pending != nil {
		want = *g.Pending
	}
	if err := a.turnStart(ctx); err != nil {
		t.Fatal(err)
	}
	r, err := a.runStep(ctx, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	wantAppended := 0
	if g.Pending != nil && *g.Pending != g.Active {
		wantAppended = 1
	}
	if r.Active != want || len(r.AppendedEvents) != wantAppended {
		t.Fatalf("final pre-step after get %v: %v, want active %v and %d appended", g, r, want, wantAppended)
	}
	pmcCheckGet(t, "get after the final pre-step", pmcGet(t, ctx, check, id), want, nil, a.seq)

	// One more selection, made alone, is applied by the next pre-step.
	ui := dial(nodes[0])
	set, err := ui.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: !want, RequestId: "pmc-last-ui"})
	if err != nil || set.Outcome != pb.Outcome_QUEUED {
		t.Fatalf("last UI set(%v): %v, %v; want QUEUED", !want, set, err)
	}
	pmcCheckGet(t, "get after the last selection", pmcGet(t, ctx, check, id), want, pmcBool(!want), a.seq)
	if r, err = a.runStep(ctx, true, nil); err != nil {
		t.Fatal(err)
	}
	if r.Active != !want || len(r.AppendedEvents) != 1 {
		t.Fatalf("pre-step after the last selection: %v, want active %v and one plan/mode", r, !want)
	}
	if err := a.turnEnd(ctx); err != nil {
		t.Fatal(err)
	}
	fold := !want

	// Idle, the owner's Set commits only at the seq it expects: a stale
	// expected_next_seq is refused and writes nothing; the right one commits
	// at that seq, and the agent's append at the taken seq is refused.
	n := a.seq
	_, err = ownerC.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: !fold, LeaseEpoch: a.epoch, ExpectedNextSeq: n - 1, RequestId: "pmc-idle-stale"})
	if !errors.Is(err, sessionstore.ErrSeqMismatch) {
		t.Fatalf("owner set with a stale expected_next_seq %d (stored %d): %v, want SEQ_MISMATCH", n-1, n, err)
	}
	pmcCheckGet(t, "get after the refused owner set", pmcGet(t, ctx, check, id), fold, nil, n)
	set, err = ownerC.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: !fold, LeaseEpoch: a.epoch, ExpectedNextSeq: n, RequestId: "pmc-idle-commit"})
	if err != nil || set.Outcome != pb.Outcome_COMMITTED || len(set.AppendedEvents) != 1 || set.NextSeq != n+1 {
		t.Fatalf("idle owner set(%v) at %d: %v, %v; want COMMITTED with one event, next_seq %d", !fold, n, set, err, n+1)
	}
	if p := pmcParse(t, set.AppendedEvents[0]); p.Type != "plan/mode" || p.Seq != n || string(p.Data) != fmt.Sprintf(`{"active":%v}`, !fold) {
		t.Fatalf("idle owner set appended %s, want plan/mode {\"active\":%v} at seq %d", set.AppendedEvents[0], !fold, n)
	}
	ownerClaims = append(ownerClaims, pmcClaim{seq: n, ev: set.AppendedEvents[0], from: "owner set pmc-idle-commit"})
	_, err = a.c.Append(ctx, &pb.AppendRequest{SessionId: id, LeaseEpoch: a.epoch, Events: []string{pmcEvent("turn/start", n, fmt.Sprintf(`{"turn":%d}`, a.turn+1))}})
	if !errors.Is(err, sessionstore.ErrSeqMismatch) {
		t.Fatalf("agent append at the seq the owner's set took: %v, want SEQ_MISMATCH", err)
	}
	fold = !fold
	// A UI without the epoch only queues, even while idle.
	set, err = ui.PlanSet(ctx, &pb.PlanSetRequest{SessionId: id, Active: !fold, RequestId: "pmc-idle-ui"})
	if err != nil || set.Outcome != pb.Outcome_QUEUED || len(set.AppendedEvents) != 0 || set.NextSeq != n+1 {
		t.Fatalf("idle UI set(%v): %v, %v; want QUEUED, nothing appended", !fold, set, err)
	}
	pmcCheckGet(t, "get after the idle UI set", pmcGet(t, ctx, check, id), fold, pmcBool(!fold), n+1)
	// The agent's next turn: its stale seq is refused, it re-learns, and the
	// pre-step applies the queued selection.
	mismatches := a.appendMismatch["turn/start"]
	if err := a.turnStart(ctx); err != nil {
		t.Fatal(err)
	}
	if a.appendMismatch["turn/start"] != mismatches+1 {
		t.Fatal("the agent's turn/start at a taken seq was not refused")
	}
	if r, err = a.runStep(ctx, false, nil); err != nil {
		t.Fatal(err)
	}
	if r.Active != !fold || len(r.AppendedEvents) != 1 {
		t.Fatalf("pre-step after the idle UI set: %v, want active %v and one plan/mode", r, !fold)
	}
	if err := a.turnEnd(ctx); err != nil {
		t.Fatal(err)
	}
	pmcCheckGet(t, "final get", pmcGet(t, ctx, check, id), !fold, nil, a.seq)

	// The stored log, identical on every node, accounts for every write.
	log := pmcConverge(t, ctx, nodes, id, a.seq)
	modes := pmcVerifyLog(t, log, a, ownerClaims)
	applied, notices := 0, 0
	for _, st := range a.steps {
		applied += len(st.resp.AppendedEvents)
		notices += len(st.resp.Notices)
	}
	t.Logf("final log: %d events, %d plan/mode (%d by pre-steps, %d by owner sets), %d pre-steps, %d notices",
		len(log), len(modes), applied, len(ownerClaims), len(a.steps), notices)
}
