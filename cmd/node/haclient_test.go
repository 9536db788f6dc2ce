package main

// The Go client survives node loss (README "Using the Go client", docs/api.md
// "Failover"): a writer and a watcher, each a client.Open of all three
// nodes with a token limited to one session prefix (the writer's may only
// write), run while the node the watcher reads from, then the node the
// writer writes to (the leader), then the new leader are SIGKILLed and
// restarted. The writer's calls never return an error, nothing acknowledged
// is lost or stored twice, and the watcher sees every event once, in order.
// Every name starts with "ha".

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

const (
	haWriterToken  = "ha-writer-0123456789abcdef"
	haWatcherToken = "ha-watcher-0123456789abcdef"
	haAdminToken   = "ha-admin-0123456789abcdef"
	haTokens       = haWriterToken + "  writer   write            ha/\n" +
		haWatcherToken + " watcher  read             ha/\n" +
		haAdminToken + "   admin    read,write,admin *\n"
	// haCallBudget is the deadline of each of the writer's calls.
	haCallBudget = 20 * time.Second
)

// haDialOptions are a client's connection options: its token, and a quick
// reconnect to a restarted node (gRPC's default backoff grows to minutes).
func haDialOptions(token string) []grpc.DialOption {
	return []grpc.DialOption{grpc.WithPerRPCCredentials(client.BearerToken(token)), crQuickReconnect}
}

// haWriter appends marker events to one session under a lease, one batch at
// a time, and records what was acknowledged and every error a call returned.
type haWriter struct {
	c     *client.Client
	k     *client.LeaseKeeper
	id    string
	mu    sync.Mutex
	acked []string
	errs  []string
	calls int
}

func (w *haWriter) run(stop <-chan struct{}) {
	for n := 0; ; n++ {
		select {
		case <-stop:
			return
		default:
		}
		w.mu.Lock()
		next := int64(len(w.acked))
		w.mu.Unlock()
		evs := []string{pcEvent(1, next)}
		if n%3 == 2 {
			evs = append(evs, pcEvent(1, next+1))
		}
		ctx, cancel := context.WithTimeout(context.Background(), haCallBudget)
		start := time.Now()
		resp, err := w.k.Append(ctx, &sessionpb.AppendRequest{SessionId: w.id, Events: evs})
		cancel()
		w.mu.Lock()
		w.calls++
		switch {
		case err != nil:
			w.errs = append(w.errs, fmt.Sprintf("seq %d after %v: %v", next, time.Since(start).Round(time.Millisecond), err))
		case resp.GetNextSeq() != next+int64(len(evs)):
			w.errs = append(w.errs, fmt.Sprintf("seq %d: next_seq %d, want %d", next, resp.GetNextSeq(), next+int64(len(evs))))
		default:
			w.acked = append(w.acked, evs...)
		}
		failed := err != nil
		w.mu.Unlock()
		if failed {
			return // the batch's outcome is not known: stop rather than guess
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (w *haWriter) ackedCount() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.acked)
}

// haWatcher follows the session and records every event it is given.
type haWatcher struct {
	f    *client.Follower
	mu   sync.Mutex
	seen []string
	err  error
}

func (w *haWatcher) run() {
	for {
		m, err := w.f.Next()
		w.mu.Lock()
		if err != nil {
			w.err = err
			w.mu.Unlock()
			return
		}
		w.seen = append(w.seen, m.GetEvents()...)
		w.mu.Unlock()
	}
}

func (w *haWatcher) count() int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return len(w.seen)
}

// haNodeOf is the node id of the endpoint c reads from (current) or, with
// leader, the leader as c knows it.
func haNodeOf(t *testing.T, c *client.Client, leader bool) string {
	t.Helper()
	eps, l := c.Endpoints()
	if leader {
		return l
	}
	for _, e := range eps {
		if e.Current {
			return e.NodeID
		}
	}
	t.Fatalf("no current endpoint: %+v", eps)
	return ""
}

// haWaitProgress waits until the writer has acknowledged more events than
// after (-1: does not wait for that), and the watcher has seen every one
// acknowledged by then.
func haWaitProgress(t *testing.T, w *haWriter, wt *haWatcher, after int, what string) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	clustertest.Eventually(t, 30*time.Second, func() error {
		if after < 0 || w.ackedCount() > after+5 {
			return nil
		}
		w.mu.Lock()
		errs := w.errs
		w.mu.Unlock()
		if len(errs) > 0 {
			t.Fatalf("%s: the writer got an error: %v", what, errs)
		}
		return fmt.Errorf("%s: the writer acknowledged %d events, no progress past %d", what, w.ackedCount(), after)
	})
	want := w.ackedCount()
	clustertest.Eventually(t, time.Until(deadline), func() error { // what is left of the 30 s
		if wt.count() >= want {
			return nil
		}
		wt.mu.Lock()
		err := wt.err
		wt.mu.Unlock()
		if err != nil {
			t.Fatalf("%s: the watcher stopped: %v", what, err)
		}
		return fmt.Errorf("%s: the watcher saw %d events, %d acknowledged", what, wt.count(), want)
	})
}

// haCluster is what the scenario needs of a running cluster.
type haCluster struct {
	// addrs are the nodes' gRPC addresses as the test reaches them, ids
	// their node ids.
	addrs, ids []string
	// admin is a client of one node (by node id) with admin permission.
	admin map[string]*client.Client
	// kill SIGKILLs a node; restart starts it again and waits until it is
	// ready and a voter, and the cluster has a leader.
	kill, restart func(id string)
	// leaderHint is the leader hint every node is expected to send.
	leaderHint func(leaderID string) string
}

// haLeader asks node id who leads (waiting for a leader).
func haLeader(t *testing.T, hc haCluster, id string) string {
	t.Helper()
	var leader string
	clustertest.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		st, err := hc.admin[id].Status(ctx)
		if err != nil || st.GetLeaderId() == "" {
			return fmt.Errorf("node %s knows no leader: %v, %v", id, st, err)
		}
		leader = st.GetLeaderId()
		return nil
	})
	return leader
}

// haRun is the scenario of the top of the file on a formed cluster.
func haRun(t *testing.T, hc haCluster) {
	start := time.Now()
	var anyID string
	for id := range hc.admin {
		anyID = id
	}
	leader := haLeader(t, hc, anyID)

	// Every answer carries the hints, whatever the caller may call.
	var hdr metadata.MD
	_, _ = sessionpb.NewSessionPersistenceClient(hc.admin[anyID].Conn()).List(crCtx(t, 5*time.Second), &sessionpb.ListRequest{}, grpc.Header(&hdr))
	if got, want := hdr.Get(sessionstore.HintLeaderKey), hc.leaderHint(leader); len(got) != 1 || got[0] != want {
		t.Fatalf("leader hint %q, want %q (all hints: %v)", got, want, hdr)
	}

	// The writer: write permission on ha/ only. The watcher: read on ha/,
	// its endpoints listed from the leader's successor on, so that it reads
	// from a node other than the writer's.
	ctx := crCtx(t, 3*time.Minute)
	wc, err := client.Open(ctx, client.Config{Endpoints: hc.addrs, DialOptions: haDialOptions(haWriterToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer wc.Close()
	li := slices.Index(hc.ids, leader)
	if li < 0 {
		t.Fatalf("leader %s is none of %v", leader, hc.addrs)
	}
	order := []string{hc.addrs[(li+1)%3], hc.addrs[(li+2)%3], hc.addrs[li]}
	rc, err := client.Open(ctx, client.Config{Endpoints: order, DialOptions: haDialOptions(haWatcherToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()

	const id = "ha/s1"
	cwd := "/w/ha"
	if _, err := wc.Create(crCtx(t, haCallBudget), &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Version: 0, Id: id, CreatedAt: crTime0 - 1, Cwd: &cwd}}); err != nil {
		t.Fatalf("create: %v", err)
	}
	// A session is Prepared once it has an event (lazy materialisation).
	first := pcEvent(1, 0)
	if _, err := wc.Append(crCtx(t, haCallBudget), &sessionpb.AppendRequest{SessionId: id, Events: []string{first}}); err != nil {
		t.Fatalf("first append: %v", err)
	}
	k, _, err := wc.KeepLease(crCtx(t, haCallBudget), &sessionpb.PrepareRequest{SessionId: id, Owner: "ha-writer", TtlMs: 15000})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	defer k.Stop()
	if _, err := wc.List(crCtx(t, 5*time.Second), &sessionpb.ListRequest{}); err == nil {
		t.Fatal("the write-only token may List")
	}
	w := &haWriter{c: wc, k: k, id: id, acked: []string{first}}
	watchCtx, stopWatch := context.WithCancel(ctx)
	wt := &haWatcher{f: rc.Follow(watchCtx, &sessionpb.WatchRequest{SessionId: id})}
	stop := make(chan struct{})
	var writing, watching sync.WaitGroup
	writing.Add(1)
	watching.Add(1)
	go func() { defer writing.Done(); w.run(stop) }()
	go func() { defer watching.Done(); wt.run() }()
	stopWriter := sync.OnceFunc(func() { close(stop); writing.Wait() })
	stopWatcher := sync.OnceFunc(func() { stopWatch(); watching.Wait() })
	defer stopWatcher()
	defer stopWriter()
	haWaitProgress(t, w, wt, 0, "warm-up")

	// kill SIGKILLs one node, waits for progress without it, restarts it
	// and waits until it is a ready voter again.
	kill := func(victim, why string) {
		t.Helper()
		before := w.ackedCount()
		killedAt := time.Now()
		hc.kill(victim)
		haWaitProgress(t, w, wt, before, "after killing "+victim)
		t.Logf("killed %s (%s): the writer went on after %v (%d events acknowledged then)", victim, why,
			time.Since(killedAt).Round(time.Millisecond), w.ackedCount())
		hc.restart(victim)
	}
	watcherNode := haNodeOf(t, rc, false)
	writerNode := haNodeOf(t, wc, true)
	if writerNode != leader {
		t.Fatalf("the writer's client names leader %q, the cluster %q", writerNode, leader)
	}
	if watcherNode == writerNode || watcherNode == "" {
		t.Fatalf("the watcher reads from %q, the writer writes to %q", watcherNode, writerNode)
	}
	kill(watcherNode, "the watcher's node")
	kill(haNodeOf(t, wc, true), "the writer's node, the leader")
	kill(haLeader(t, hc, watcherNode), "the new leader")
	haWaitProgress(t, w, wt, w.ackedCount(), "after the restarts")
	stopWriter()
	haWaitProgress(t, w, wt, -1, "after the writer stopped")
	stopWatcher()

	w.mu.Lock()
	acked, errs, calls := w.acked, w.errs, w.calls
	w.mu.Unlock()
	if len(errs) > 0 {
		t.Fatalf("the writer's calls returned errors: %v", errs)
	}
	if err := k.Err(); err != nil {
		t.Fatalf("the lease was lost: %v", err)
	}
	if err := k.Release(crCtx(t, haCallBudget)); err != nil {
		t.Fatalf("release: %v", err)
	}
	// The watcher: every acknowledged event once, in order.
	if i := crFirstDiff(wt.seen, acked); i >= 0 || len(wt.seen) != len(acked) {
		t.Fatalf("the watcher saw %d events, %d acknowledged; first difference at %d", len(wt.seen), len(acked), i)
	}
	// Every node stores exactly the acknowledged events.
	for nodeID, c := range hc.admin {
		pcCheckStale(t, &pcNode{crNode: &crNode{ID: nodeID}, C: c}, []*crSession{{ID: id, Cwd: cwd, W: 1, acked: acked}})
	}
	// Every node is configured: no client dialled a hinted address.
	for _, c := range []*client.Client{wc, rc} {
		eps, _ := c.Endpoints()
		for _, e := range eps {
			if !e.Configured {
				t.Fatalf("a client dialled a hinted address although every node is configured: %+v", eps)
			}
		}
	}
	t.Logf("%d calls, %d events acknowledged and watched once in order; scenario done in %v", calls, len(acked), time.Since(start).Round(time.Millisecond))
}

// TestProcCluster_ClientSurvivesNodeLoss: see the top of the file.
func TestProcCluster_ClientSurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: builds and runs three node processes and kills them in turn")
	}
	start := time.Now()
	bin := crBinary(t)
	dir := t.TempDir()
	var out strings.Builder
	if err := certsCmd(context.Background(), []string{"--out", dir, "--keys-only"}, &out, &out); err != nil {
		t.Fatalf("sessionstore certs --keys-only: %v\n%s", err, out.String())
	}
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte(haTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	nodes := pcNewCluster(t, bin, 3)
	hc := haCluster{admin: map[string]*client.Client{}}
	byID := map[string]*pcNode{}
	for _, nd := range nodes {
		// Clients are told the nodes are at localhost:port, an address the
		// test never configures: the configured 127.0.0.1 ones must win.
		_, port, _ := strings.Cut(nd.GRPCAddr, ":")
		nd.Extra = []string{"--auth-token-file", tokens, "--cluster-key-file", filepath.Join(dir, "cluster.key"),
			"--gossip-key-file", filepath.Join(dir, "gossip.key"), "--advertise-client-addr", "localhost:" + port}
		nd.C = crDial(t, nd.GRPCAddr, grpc.WithPerRPCCredentials(client.BearerToken(haAdminToken)))
		byID[nd.ID] = nd
		hc.addrs, hc.ids = append(hc.addrs, nd.GRPCAddr), append(hc.ids, nd.ID)
		hc.admin[nd.ID] = nd.C
	}
	li := peForm(t, nodes, "formation")
	all := []int{0, 1, 2}
	t.Logf("cluster formed in %v: leader %s", time.Since(start).Round(time.Millisecond), nodes[li].ID)
	hc.kill = func(id string) { byID[id].Kill() }
	hc.restart = func(id string) {
		byID[id].Start()
		byID[id].WaitReady(byID[id].C)
		pcWaitLeader(t, nodes, all, "after restarting "+id)
	}
	hc.leaderHint = func(id string) string {
		_, port, _ := strings.Cut(byID[id].GRPCAddr, ":")
		return id + "=localhost:" + port
	}
	haRun(t, hc)
}
