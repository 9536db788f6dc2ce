package main

// A three-process cluster of the real binary (docs/design.md "Cluster", "Retries
// and outcomes"): the nodes find each other through gossip alone
// (--join, --bootstrap-expect 3), the leader is SIGKILLed under a write load
// through every node, and afterwards every node holds every acknowledged
// event and artifacts of the same text. Every name starts with "pc"; the process
// handling (build, logs, kill, readiness), the session records and the
// artifact check are the "cr" helpers of crash_helpers_test.go.

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
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

const (
	// pcFormTimeout bounds the cluster's formation (all ready, one leader
	// with three voters) and the restarted node's return.
	pcFormTimeout = 30 * time.Second
	// pcResolveTimeout bounds the re-sending of one batch whose outcome was
	// unknown (shorter than crResolveTimeout: the whole test should take
	// about a minute).
	pcResolveTimeout = 20 * time.Second
)

// pcNode is one node process of the cluster: a crNode (ports, runs, logs,
// Start, Kill, WaitReady, and the clean-up that kills it and prints its logs
// on failure) with its own node id, the cluster flags and two clients.
type pcNode struct {
	*crNode
	C  *client.Client // connected to this node's gRPC address, default options
	WC *client.Client // the same connection, few retries (for the writers)
}

// pcNewCluster prepares (does not start) n nodes "n1".."nN", each joining the
// others' gossip addresses with --bootstrap-expect 3.
func pcNewCluster(t *testing.T, bin string, n int) []*pcNode {
	t.Helper()
	nodes := make([]*pcNode, n)
	for i := range nodes {
		nodes[i] = &pcNode{crNode: crNewNode(t, bin, t.TempDir())}
		nodes[i].ID = fmt.Sprintf("n%d", i+1)
	}
	for i, nd := range nodes {
		var seeds []string
		for j, o := range nodes {
			if j != i {
				seeds = append(seeds, o.GossipAddr)
			}
		}
		nd.Cluster = []string{"--join", strings.Join(seeds, ","), "--bootstrap-expect", "3"}
		nd.C = crDial(t, nd.GRPCAddr)
		// Few attempts per call, so that a writer sees the unknown outcome
		// of a dead node quickly and moves to another node.
		nd.WC = nd.C.WithOptions(client.Options{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	}
	return nodes
}

// pcWaitLeader waits until every node in want reports the same leader, that
// leader reports itself leader, and its Members lists exactly the three
// nodes, all voters, those in want alive. It returns the leader's index.
func pcWaitLeader(t *testing.T, nodes []*pcNode, want []int, what string) int {
	t.Helper()
	var idx int
	clustertest.Eventually(t, pcFormTimeout, func() error {
		var why string
		if idx, why = pcLeaderCheck(nodes, want); idx < 0 {
			return fmt.Errorf("%s: no leader with %d alive voters: %s", what, len(nodes), why)
		}
		return nil
	})
	return idx
}

func pcLeaderCheck(nodes []*pcNode, want []int) (int, string) {
	leader := ""
	for _, i := range want {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := nodes[i].C.Status(ctx)
		cancel()
		if err != nil {
			return -1, fmt.Sprintf("status of %s: %v", nodes[i].ID, err)
		}
		if st.GetNodeId() != nodes[i].ID {
			return -1, fmt.Sprintf("status of %s names node %q", nodes[i].ID, st.GetNodeId())
		}
		if st.GetLeaderId() == "" || (leader != "" && st.GetLeaderId() != leader) {
			return -1, fmt.Sprintf("%s sees leader %q, others %q", nodes[i].ID, st.GetLeaderId(), leader)
		}
		leader = st.GetLeaderId()
	}
	li := -1
	for _, i := range want {
		if nodes[i].ID == leader {
			li = i
		}
	}
	if li < 0 {
		return -1, fmt.Sprintf("leader %q is not one of the live nodes", leader)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	st, err := nodes[li].C.Status(ctx)
	if err != nil || st.GetState() != "Leader" {
		return -1, fmt.Sprintf("leader %s reports state %q (%v)", leader, st.GetState(), err)
	}
	ms, err := nodes[li].C.Members(ctx)
	if err != nil {
		return -1, fmt.Sprintf("members via %s: %v", leader, err)
	}
	if len(ms) != len(nodes) {
		return -1, fmt.Sprintf("members via %s: %d, want %d: %v", leader, len(ms), len(nodes), ms)
	}
	alive := map[string]bool{}
	for _, i := range want {
		alive[nodes[i].ID] = true
	}
	for _, m := range ms {
		if m.GetSuffrage() != "Voter" {
			return -1, fmt.Sprintf("member %s is %s", m.GetNodeId(), m.GetSuffrage())
		}
		if alive[m.GetNodeId()] && (m.GetHealth() != "alive" || m.GetApiAddress() == "") {
			return -1, fmt.Sprintf("member %s: health %q api %q", m.GetNodeId(), m.GetHealth(), m.GetApiAddress())
		}
	}
	return li, ""
}

// pcEvent is one marker event of writer w at seq (the writers of this file
// send crEvent's).
func pcEvent(w int, seq int64) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"w":%d,"n":%d},"ignorable":true}`,
		seq, crTime0+seq, w, seq)
}

// pcFailover records the kill of the leader and the first append, sent
// after it, that succeeded through a surviving node.
type pcFailover struct {
	mu     sync.Mutex
	killed int // index of the killed node, -1 before the kill
	at     time.Time
	first  time.Time
	how    string
}

func (f *pcFailover) kill(i int) {
	f.mu.Lock()
	f.killed, f.at = i, time.Now()
	f.mu.Unlock()
}

func (f *pcFailover) ok(node int, sent time.Time, how string) {
	now := time.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.killed < 0 || node == f.killed || sent.Before(f.at) || !f.first.IsZero() {
		return
	}
	f.first, f.how = now, how
}

// pcWriter appends to one session through one node at a time; when that
// node does not answer (a transport error, no ErrorInfo) it moves on to the
// next node.
type pcWriter struct {
	s     *crSession
	nodes []*pcNode
	cur   int
	fo    *pcFailover // never nil
	moves []string
}

// pcTransport reports an error the node did not answer (a dead or
// unreachable node; a deadline passed).
func pcTransport(err error) bool {
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return false
	}
	st, ok := status.FromError(err)
	return !ok || st.Code() == codes.Unavailable || st.Code() == codes.DeadlineExceeded
}

// appendBatch appends k new events (crSession.appendVia), starting at the
// current node and moving on to the next one when a node does not answer.
// A stored batch sent after the kill through a survivor ends the failover.
func (w *pcWriter) appendBatch(k int) error {
	via := func(int) (*client.Client, string) { return w.nodes[w.cur].WC, w.nodes[w.cur].ID }
	return w.s.appendVia(k, pcResolveTimeout, via, func(node string, sent time.Time, sends int, dup bool, err error) {
		i := w.cur
		switch {
		case err == nil:
			next := len(w.s.Acked()) // the batch is not recorded yet
			w.fo.ok(i, sent, fmt.Sprintf("writer %d through %s, seqs %d..%d, send %d, duplicate=%v", w.s.W, node, next, next+k-1, sends, dup))
		case pcTransport(err):
			w.cur = (i + 1) % len(w.nodes)
			w.moves = append(w.moves, fmt.Sprintf("%s→%s at +%v (%s)", node, w.nodes[w.cur].ID,
				time.Since(w.fo.start()).Round(time.Millisecond), crErrKind(err)))
		}
	})
}

// start is the time of the kill (zero before it), for the writers' logs.
func (f *pcFailover) start() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.at.IsZero() {
		return time.Now()
	}
	return f.at
}

// pcMark is the part of a marker event the check decodes.
type pcMark struct {
	Type string `json:"type"`
	Seq  int64  `json:"seq"`
	Data struct {
		W int   `json:"w"`
		N int64 `json:"n"`
	} `json:"data"`
}

// pcCheckStale reads every session from nd's own state (STALE, so the node
// answers itself instead of forwarding to the leader), polling until it has
// caught up, and checks the stored events are exactly the acknowledged ones:
// in order, seqs contiguous from 0, no duplicate, nothing else.
func pcCheckStale(t *testing.T, nd *pcNode, ss []*crSession) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range ss {
		want := s.Acked()
		var got []string
		clustertest.Eventually(t, time.Until(deadline), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			rf, err := nd.C.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: s.ID, Consistency: sessionpb.Consistency_STALE})
			cancel()
			if err != nil {
				return fmt.Errorf("node %s: STALE ReadFrom(%q): %v", nd.ID, s.ID, err)
			}
			if h := rf.GetHeader(); h.GetId() != s.ID || h.GetCwd() != s.Cwd {
				t.Errorf("node %s: session %q: header id %q cwd %q, want %q %q", nd.ID, s.ID, h.GetId(), h.GetCwd(), s.ID, s.Cwd)
			}
			if got = rf.GetEvents(); len(got) < len(want) {
				return fmt.Errorf("node %s: session %q: %d events stored, %d acknowledged", nd.ID, s.ID, len(got), len(want))
			}
			return nil
		})
		seen := map[int64]int{}
		for i, e := range got {
			var m pcMark
			if err := json.Unmarshal([]byte(e), &m); err != nil || m.Type != "x-test/mark" {
				t.Errorf("node %s: session %q: event %d is not a marker (%v): %.200s", nd.ID, s.ID, i, err, e)
				continue
			}
			if j, dup := seen[m.Seq]; dup {
				t.Errorf("node %s: session %q: seq %d stored twice (events %d and %d)", nd.ID, s.ID, m.Seq, j, i)
			}
			seen[m.Seq] = i
			if m.Seq != int64(i) || m.Data.N != int64(i) || m.Data.W != s.W {
				t.Errorf("node %s: session %q: event %d has seq %d n %d w %d, want seq %d n %d w %d",
					nd.ID, s.ID, i, m.Seq, m.Data.N, m.Data.W, i, i, s.W)
			}
		}
		if i := crFirstDiff(got, want); i >= 0 || len(got) != len(want) {
			t.Errorf("node %s: session %q: %d events stored, %d acknowledged; first difference at %d:\n stored: %s\n acked:  %s",
				nd.ID, s.ID, len(got), len(want), i, crAt(got, max(i, 0)), crAt(want, max(i, 0)))
		}
	}
}

// pcCheckSameText waits (20 s) until every session's artifact file decodes
// (no torn tail) on every node to ReadRaw's content. The text, not the
// bytes: where each node cut its zstd frames depends on its writer's timing
// (and on its build, for nodes of different builds).
func pcCheckSameText(t *testing.T, nodes []*pcNode, ss []*crSession) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for _, s := range ss {
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rr, err := nodes[0].C.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: s.ID})
		cancel()
		if err != nil {
			t.Errorf("ReadRaw(%q): %v", s.ID, err)
			continue
		}
		raw := rr.GetContent()
		clustertest.Eventually(t, time.Until(deadline), func() error {
			for _, nd := range nodes {
				if d := crArtifactDiff(crArtifactPath(t, nd.Dir, s), raw); d != "" {
					return fmt.Errorf("artifacts of %q never converged to ReadRaw: node %s: %s", s.ID, nd.ID, d)
				}
			}
			return nil
		})
	}
}

// TestProcCluster_KillLeaderUnderLoad starts three node processes that form
// a cluster through gossip, writes through every node, SIGKILLs the leader
// under four concurrent writers (clients on different nodes, the leader's
// included), restarts it on its data directory, and checks that every node
// holds exactly the acknowledged events and artifacts of the same text. The
// time from the kill to the first append served through a survivor is
// logged, not asserted (the goal is ≤ 3 s).
func TestProcCluster_KillLeaderUnderLoad(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: builds and runs three node processes and kills one")
	}
	start := time.Now()
	seed := crSeed(t)
	bin := crBinary(t)
	nodes := pcNewCluster(t, bin, 3)
	// Every node ready and serving a linearizable read, one leader of three voters.
	li := peForm(t, nodes, "formation")
	all := []int{0, 1, 2}
	t.Logf("cluster formed in %v: leader %s", time.Since(start).Round(time.Millisecond), nodes[li].ID)

	// Create the sessions through different nodes, then append through every
	// node, followers included; linearizable reads through every node see
	// every write.
	ss := crMakeSessions("pc", 4, "/w/proccluster")
	for i, s := range ss {
		nd := nodes[i%len(nodes)]
		cwd := s.Cwd
		h := &sessionpb.SessionHeader{Version: 0, Id: s.ID, CreatedAt: crTime0 - 1, Cwd: &cwd}
		if _, err := nd.C.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: h}); err != nil {
			t.Fatalf("create %q through %s: %v", s.ID, nd.ID, err)
		}
	}
	for round := range 2 {
		for j := range nodes {
			for _, s := range ss {
				w := &pcWriter{s: s, nodes: nodes, cur: j, fo: &pcFailover{killed: -1}}
				if err := w.appendBatch(1 + round); err != nil {
					t.Fatalf("warm-up append through %s: %v", nodes[j].ID, err)
				}
				if w.cur != j {
					t.Logf("warm-up append through %s: the node did not answer, the batch went elsewhere: %v", nodes[j].ID, w.moves)
				}
			}
		}
	}
	for _, nd := range nodes {
		for _, s := range ss {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			rf, err := nd.C.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: s.ID})
			cancel()
			if err != nil {
				t.Fatalf("linearizable ReadFrom(%q) through %s: %v", s.ID, nd.ID, err)
			}
			if got, want := rf.GetEvents(), s.Acked(); crFirstDiff(got, want) >= 0 || len(got) != len(want) {
				t.Fatalf("linearizable ReadFrom(%q) through %s: %d events, want the %d acknowledged", s.ID, nd.ID, len(got), len(want))
			}
		}
	}
	_, warm := crSumStats(ss)
	t.Logf("warm-up: %d events through every node", warm)

	// Four writers, one session each: two through the leader, one through
	// each follower.
	var followers []int
	for i := range nodes {
		if i != li {
			followers = append(followers, i)
		}
	}
	home := []int{li, followers[0], followers[1], li}
	fo := &pcFailover{killed: -1}
	writers := make([]*pcWriter, len(ss))
	for i, s := range ss {
		writers[i] = &pcWriter{s: s, nodes: nodes, cur: home[i], fo: fo}
	}
	stopWriters := crRunWriters(t, ss, seed, func(s *crSession, rng *rand.Rand) error { return writers[s.W].appendBatch(1 + rng.IntN(3)) })
	defer stopWriters()

	time.Sleep(1500 * time.Millisecond)
	_, beforeKill := crSumStats(ss)
	fo.kill(li)
	nodes[li].Kill()
	t.Logf("SIGKILLed leader %s (%d events acknowledged before the kill); writers %v were on it",
		nodes[li].ID, beforeKill, []int{0, 3})

	// Keep writing through the survivors for ~2 s (at least until the first
	// append after the kill succeeded, up to 15 s).
	time.Sleep(2 * time.Second)
	for wait := time.Now().Add(15 * time.Second); ; {
		fo.mu.Lock()
		done := !fo.first.IsZero()
		fo.mu.Unlock()
		if done || time.Now().After(wait) || t.Failed() {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	fo.mu.Lock()
	failover, how := fo.first.Sub(fo.at), fo.how
	if fo.first.IsZero() {
		failover, how = -1, "none within 17 s"
	}
	fo.mu.Unlock()
	if failover >= 0 {
		t.Logf("FAILOVER: first append through a surviving node %v after the SIGKILL (goal ≤ 3 s): %s", failover.Round(time.Millisecond), how)
	} else {
		t.Errorf("no append succeeded through a surviving node after the SIGKILL: %s", how)
	}
	if t.Failed() {
		t.FailNow()
	}
	survivors := followers
	nl := pcWaitLeader(t, nodes, survivors, "after the kill")
	_, atRestart := crSumStats(ss)
	t.Logf("new leader %s; %d events acknowledged when restarting %s", nodes[nl].ID, atRestart, nodes[li].ID)

	// Restart the killed node on its data directory with the same flags; the
	// writers keep going until it is ready and a voter again.
	restartAt := time.Now()
	nodes[li].Start()
	nodes[li].WaitReady(nodes[li].C)
	nl = pcWaitLeader(t, nodes, all, "after the restart")
	// Caught up: the restarted node has applied what the leader had
	// committed once it was back.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	lst, err := nodes[nl].C.Status(ctx)
	cancel()
	if err != nil {
		t.Fatalf("status of leader %s: %v", nodes[nl].ID, err)
	}
	clustertest.Eventually(t, pcFormTimeout, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := nodes[li].C.Status(ctx)
		if err != nil || st.GetLeaderId() == "" || st.GetAppliedIndex() < lst.GetCommitIndex() {
			return fmt.Errorf("restarted node %s did not catch up to commit index %d: %+v, %v", nodes[li].ID, lst.GetCommitIndex(), st, err)
		}
		return nil
	})
	t.Logf("%s restarted, ready, a voter and caught up in %v (leader %s)", nodes[li].ID, time.Since(restartAt).Round(time.Millisecond), nodes[nl].ID)
	stopWriters()
	if t.Failed() {
		t.FailNow()
	}
	st, events := crSumStats(ss)
	t.Logf("writers: %d batches, %d events acknowledged (%d after the warm-up); %d batches with an unknown outcome (errors %v), %d re-sends; "+
		"resolved by a re-send as duplicate %d, as newly stored %d; first call answered duplicate %d",
		st.Batches, events, events-warm, st.Unknown, st.Errs, st.Resends, st.ResolvedDup, st.ResolvedFresh, st.FirstDup)
	for _, w := range writers {
		if len(w.moves) > 0 {
			t.Logf("writer %d moved: %s", w.s.W, strings.Join(w.moves, ", "))
		}
	}

	// Every node holds exactly the acknowledged events, read from its own
	// state, and artifacts that decode to ReadRaw's content.
	for _, nd := range nodes {
		pcCheckStale(t, nd, ss)
	}
	for _, nd := range nodes {
		crCheckArtifacts(t, nd.C, nd.Dir, ss)
	}
	pcCheckSameText(t, nodes, ss)
	var sizes []string
	for _, s := range ss {
		if b, err := os.ReadFile(crArtifactPath(t, nodes[0].Dir, s)); err == nil {
			sizes = append(sizes, strconv.Itoa(len(b)))
		}
	}
	t.Logf("artifact sizes (bytes): %s; done in %v", strings.Join(sizes, ", "), time.Since(start).Round(time.Millisecond))
}
