package main

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
)

// clFreeAddr reserves a loopback port (TCP and UDP free at the moment) for a
// node to bind later. It picks below the kernel's ephemeral range
// (ip_local_port_range starts at 32768 here): a port from port 0 is released
// before the node binds it, and meanwhile any outgoing connection on the
// machine (clients, docker-proxy, other test packages) may take it; ports
// below that range are only ever taken by explicit binds.
func clFreeAddr(t testing.TB) string {
	t.Helper()
	for i := 0; i < 200; i++ {
		// A port handed out before is never handed out again in this
		// process: tests running in parallel would otherwise race to bind
		// the same one between this check and their node's listen.
		clPortsMu.Lock()
		port := 20000 + clPortRand.IntN(12000)
		taken := clPortsGiven[port]
		clPortsGiven[port] = true
		clPortsMu.Unlock()
		if taken {
			continue
		}
		addr := fmt.Sprintf("127.0.0.1:%d", port)
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue
		}
		u, err := net.ListenPacket("udp", addr)
		l.Close()
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	t.Fatal("no free port between 20000 and 32000")
	return ""
}

var clPortRand = rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), uint64(os.Getpid())))

var (
	clPortsMu    sync.Mutex
	clPortsGiven = map[int]bool{}
)

type clNode struct {
	*testNode
	id string
}

// startCluster boots n in-process nodes that find each other through gossip
// (each joins the first) and bootstrap one cluster with --bootstrap-expect n.
func startCluster(t *testing.T, n int) []*clNode {
	t.Helper()
	return startClusterWith(t, n, nil)
}

func startClusterWith(t *testing.T, n int, extra func(*serveConfig)) []*clNode {
	t.Helper()
	return startClusterOpts(t, n, nodeOpts{tune: extra})
}

// startClusterOpts boots n nodes n1..n as startCluster does, each with o and
// o.tune applied after the cluster's settings.
func startClusterOpts(t *testing.T, n int, o nodeOpts) []*clNode {
	t.Helper()
	gossip := make([]string, n)
	for i := range gossip {
		gossip[i] = clFreeAddr(t)
	}
	nodes := make([]*clNode, n)
	for i := range nodes {
		// Ports picked once, here: a restarted node binds the same ones.
		raftAddr, grpcAddr, httpAddr := clFreeAddr(t), clFreeAddr(t), clFreeAddr(t)
		join := strings.Join(slices.Delete(slices.Clone(gossip), i, i+1), ",")
		no := o
		no.id = fmt.Sprintf("n%d", i+1)
		no.tune = func(c *serveConfig) {
			c.Cluster.RaftAddr, c.Cluster.GossipAddr = raftAddr, gossip[i]
			c.GRPCAddr, c.HTTPAddr = grpcAddr, httpAddr
			c.Join = join
			c.Cluster.BootstrapExpect = n
			if o.tune != nil {
				o.tune(c)
			}
		}
		nodes[i] = &clNode{testNode: startNode(t, no), id: no.id}
	}
	for _, nd := range nodes {
		nd.waitReady(false)
	}
	waitVoters(t, nodes, n)
	return nodes
}

// waitVoters waits until the leader's configuration has want voters.
func waitVoters(t *testing.T, nodes []*clNode, want int) {
	t.Helper()
	clustertest.Eventually(t, 30*time.Second, func() error {
		for _, nd := range nodes {
			if nd.srv == nil || nd.srv.node.Raft().State() != raft.Leader {
				continue
			}
			f := nd.srv.node.Raft().GetConfiguration()
			if f.Error() != nil {
				continue
			}
			v := 0
			for _, s := range f.Configuration().Servers {
				if s.Suffrage == raft.Voter {
					v++
				}
			}
			if v == want {
				return nil
			}
		}
		return fmt.Errorf("no leader with %d voters", want)
	})
}

// followerOf returns the leader and the first node that is not the leader,
// failing the test when there is no leader.
func followerOf(t *testing.T, nodes []*clNode) (leader, follower *clNode) {
	t.Helper()
	if leader = leaderOf(nodes); leader == nil {
		t.Fatal("no leader")
	}
	for _, nd := range nodes {
		if nd != leader {
			return leader, nd
		}
	}
	return leader, nil
}

func leaderOf(nodes []*clNode) *clNode {
	for _, nd := range nodes {
		if nd.srv != nil && nd.srv.node.Raft().State() == raft.Leader {
			return nd
		}
	}
	return nil
}

// clWriteSessions creates sessions prefix0…prefix<count-1> (with cwd unless
// empty) through c and appends perSession events to each, one per call,
// made by event; it returns each session's events and its ReadRaw text.
func clWriteSessions(t *testing.T, ctx context.Context, c *client.Client, prefix, cwd string, count int, perSession int64,
	event func(id string, k int64) string) (map[string][]string, map[string][]byte) {
	t.Helper()
	want, raw := map[string][]string{}, map[string][]byte{}
	for i := 0; i < count; i++ {
		id := fmt.Sprintf("%s%d", prefix, i)
		h := &pb.SessionHeader{Id: id, CreatedAt: 1}
		if cwd != "" {
			h.Cwd = &cwd
		}
		if _, err := c.Create(ctx, &pb.CreateRequest{Header: h}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		for k := int64(0); k < perSession; k++ {
			ev := event(id, k)
			if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{ev}}); err != nil {
				t.Fatalf("append to %s: %v", id, err)
			}
			want[id] = append(want[id], ev)
		}
	}
	for id := range want {
		r, err := c.ReadRaw(ctx, &pb.ReadRawRequest{SessionId: id})
		if err != nil {
			t.Fatalf("read raw %s: %v", id, err)
		}
		raw[id] = r.Content
	}
	return want, raw
}

func clEvent(seq int64, marker string) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"m":%q},"ignorable":true}`, seq, 1000+seq, marker)
}

// A 3-node cluster forms from gossip alone, every node reports the same
// members and leader, and any node accepts any request over the API
// (followers forward to the leader).
func TestCluster_ThreeNodesFormAndForward(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()

	// Every node reports the same three voters, alive, and one leader.
	for _, nd := range nodes {
		ms, err := nd.Client.Members(ctx)
		if err != nil || len(ms) != 3 {
			t.Fatalf("members via %s: %v, %v", nd.id, ms, err)
		}
		for _, m := range ms {
			if m.Suffrage != "Voter" || m.ApiAddress == "" {
				t.Errorf("member via %s: %+v, want an alive voter with an API address", nd.id, m)
			}
		}
		st, err := nd.Client.Status(ctx)
		if err != nil || st.LeaderId == "" || st.ClusterId == "" {
			t.Fatalf("status via %s: %+v, %v", nd.id, st, err)
		}
	}

	// Write one session through each node, followers included: linearizable
	// reads through every node see every write.
	for i, nd := range nodes {
		clWriteAndReadEverywhere(t, ctx, nd.Client, nodes, fmt.Sprintf("s%d", i))
	}

	// Losing the leader, the election, the restarted node's catch-up and
	// the replicas converging are cluster's TestLeaderLossAndNotLeader.
}

// clWriteAndReadEverywhere writes a session of three events through via and
// reads it back, linearizably and from each node's own state, through every
// node.
func clWriteAndReadEverywhere(t *testing.T, ctx context.Context, via *client.Client, nodes []*clNode, id string) {
	t.Helper()
	cwd := "/w/cluster"
	if _, err := via.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatalf("create %s: %v", id, err)
	}
	for k := int64(0); k < 3; k++ {
		if _, err := via.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{clEvent(k, fmt.Sprintf("%s-%d", id, k))}}); err != nil {
			t.Fatalf("append to %s: %v", id, err)
		}
	}
	for _, nd := range nodes {
		r, err := nd.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id})
		if err != nil || len(r.Events) != 3 {
			t.Fatalf("linearizable read of %s through %s: %d events, %v", id, nd.id, len(r.GetEvents()), err)
		}
		clustertest.Eventually(t, 30*time.Second, func() error {
			r, err := nd.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id, Consistency: pb.Consistency_STALE})
			if err != nil || len(r.Events) != 3 {
				return fmt.Errorf("%s's own state never held %s: %d events, %v", nd.id, id, len(r.GetEvents()), err)
			}
			return nil
		})
	}
}

// clConverged reports whether every node holds exactly the expected number
// of events, the same events, and whole artifacts of the same text for every
// session.
func clConverged(t *testing.T, ctx context.Context, nodes []*clNode, next map[string]int64) bool {
	t.Helper()
	var refEvents map[string][]string
	var refArts map[string][]byte
	for _, nd := range nodes {
		events, arts := map[string][]string{}, map[string][]byte{}
		for id, want := range next {
			r, err := nd.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id, Consistency: pb.Consistency_STALE})
			if err != nil || int64(len(r.Events)) != want {
				return false
			}
			events[id] = r.Events
			b, err := os.ReadFile(filepath.Join(nd.dir, "artifacts", "--w-cluster--", id, "session.jsonl.zstd"))
			if err != nil {
				return false
			}
			text, err := storage.ArtifactText(b)
			if err != nil {
				return false // being written
			}
			arts[id] = text
		}
		if refEvents == nil {
			refEvents, refArts = events, arts
			continue
		}
		for id := range next {
			if strings.Join(events[id], "\n") != strings.Join(refEvents[id], "\n") || string(arts[id]) != string(refArts[id]) {
				return false
			}
		}
	}
	return true
}

// clSmallSnapshots makes a node snapshot and compact its log after a few
// hundred entries, so catch-up by snapshot install can be tested quickly.
func clSmallSnapshots(c *serveConfig) {
	c.Cluster.SnapshotThreshold = 200
	c.Cluster.SnapshotInterval = 200 * time.Millisecond
	c.Cluster.TrailingLogs = 50
}

// A restart skips the entries the state database already holds (applied-index
// skip with NoSnapshotRestoreOnStart), so start-up time does not grow with the
// length of the log. The durations are reported, not asserted.
func TestCluster_RestartTimeWithLongLog(t *testing.T) {
	if testing.Short() {
		t.Skip("writes a long log")
	}
	n := startTestNode(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	cwd := "/w/cluster"
	if _, err := n.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "long", CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatal(err)
	}
	seq := int64(0)
	grow := func(entries int) {
		for i := 0; i < entries; i++ {
			if _, err := n.Client.Append(ctx, &pb.AppendRequest{SessionId: "long", Events: []string{clEvent(seq, "x")}}); err != nil {
				t.Fatal(err)
			}
			seq++
		}
	}
	restart := func() time.Duration {
		start := time.Now()
		n = n.Restart()
		return time.Since(start)
	}
	grow(200)
	short := restart()
	grow(3000)
	long := restart()
	r, err := n.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: "long"})
	if err != nil || int64(len(r.Events)) != seq {
		t.Fatalf("after restarts: %d events, %v; want %d", len(r.GetEvents()), err, seq)
	}
	first, _ := n.srv.node.FirstLogIndex()
	t.Logf("restart to ready: %v with a 200-entry log, %v with a %d-entry log (first log index %d; no snapshot taken)",
		short.Round(time.Millisecond), long.Round(time.Millisecond), seq, first)
}

// Leases and fencing hold across a leader change (expiry is decided from
// leader-stamped time in the log), and a Watch on a follower streams every
// event, in order, across the change.
func TestCluster_LeasesAndWatchAcrossLeaderChange(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c := nodes[0].Client
	cwd := "/w/cluster"
	if _, err := c.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "lease", CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: "lease", Events: []string{clEvent(0, "first")}}); err != nil {
		t.Fatal(err)
	}
	_, lease, err := c.Prepare(ctx, &pb.PrepareRequest{SessionId: "lease", Owner: "agent-a", TtlMs: 60_000})
	if err != nil {
		t.Fatal(err)
	}

	// Watch from a follower.
	_, follower := followerOf(t, nodes)
	wctx, wcancel := context.WithCancel(ctx)
	defer wcancel()
	recv, err := follower.Client.Watch(wctx, &pb.WatchRequest{SessionId: "lease"})
	if err != nil {
		t.Fatal(err)
	}
	got := make(chan string, 100)
	go func() {
		for {
			m, err := recv()
			if err != nil {
				close(got)
				return
			}
			for _, e := range m.Events {
				got <- e
			}
		}
	}()

	// Move leadership.
	old := leaderOf(nodes)
	if err := old.Client.TransferLeadership(ctx, ""); err != nil {
		t.Fatalf("transfer leadership: %v", err)
	}
	clustertest.Eventually(t, 20*time.Second, func() error {
		if l := leaderOf(nodes); l == nil || l == old {
			return errors.New("leadership did not move")
		}
		return nil
	})

	// The owner keeps its lease and keeps writing under the new leader.
	if _, err := c.KeepAlive(ctx, &pb.KeepAliveRequest{Lease: lease}); err != nil {
		t.Fatalf("keep-alive after the leader change: %v", err)
	}
	if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: "lease", LeaseEpoch: lease.Epoch, Events: []string{clEvent(1, "second")}}); err != nil {
		t.Fatalf("owner append after the leader change: %v", err)
	}
	// Another owner is refused while the lease is live, and a writer without
	// the epoch is fenced.
	_, _, err = nodes[2].Client.Prepare(ctx, &pb.PrepareRequest{SessionId: "lease", Owner: "agent-b", TtlMs: 1000})
	if !errors.Is(err, sessionstore.ErrSessionLive) {
		t.Fatalf("prepare by another owner: %v, want SESSION_LIVE", err)
	}
	_, err = nodes[1].Client.Append(ctx, &pb.AppendRequest{SessionId: "lease", Events: []string{clEvent(2, "intruder")}})
	if !errors.Is(err, sessionstore.ErrLeaseFenced) {
		t.Fatalf("append without the epoch: %v, want LEASE_FENCED", err)
	}
	if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: "lease", LeaseEpoch: lease.Epoch, Events: []string{clEvent(2, "third")}}); err != nil {
		t.Fatal(err)
	}

	// The follower's watch saw all three events, in order, once each.
	want := []string{"first", "second", "third"}
	for i, w := range want {
		select {
		case e, ok := <-got:
			if !ok {
				t.Fatalf("watch ended after %d events", i)
			}
			if !strings.Contains(e, fmt.Sprintf(`"m":%q`, w)) || !strings.Contains(e, fmt.Sprintf(`"seq":%d`, i)) {
				t.Fatalf("watch event %d = %s, want %q at seq %d", i, e, w, i)
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("watch delivered %d of %d events", i, len(want))
		}
	}
	select {
	case e, ok := <-got:
		if ok {
			t.Fatalf("unexpected extra watch event %s", e)
		}
	case <-time.After(200 * time.Millisecond):
	}
}

// sessionstore leave on a follower reaches the leader's RemoveMember over its
// API (the remover serve.go wires in); the Raft side of leaving (not added
// back, the rest keep taking writes) is cluster's TestLeaveRemovesTheNode.
func TestCluster_LeaveRemovesTheNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	leader, leaving := followerOf(t, nodes)
	if err := leaving.Client.Leave(ctx); err != nil {
		t.Fatalf("leave: %v", err)
	}
	clustertest.Eventually(t, 20*time.Second, func() error {
		ms, err := leader.Client.Members(ctx)
		for _, m := range ms {
			if m.NodeId == leaving.id {
				err = fmt.Errorf("%s is still a member", leaving.id)
			}
		}
		return err
	})
}

// On a lone node, handing leadership over or removing the only voter are
// certain refusals (INVALID_ARGUMENT), not outcomes the client must guess.
func TestCluster_LoneNodeAdminRefusalsAreDefinite(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	ctx := n.ctx()
	c := n.Client.WithOptions(client.Options{MaxAttempts: 1})
	for what, err := range map[string]error{
		"transfer to anyone":    c.TransferLeadership(ctx, ""),
		"transfer to itself":    c.TransferLeadership(ctx, "test-node"),
		"remove the only voter": c.RemoveMember(ctx, "test-node"),
	} {
		if auReason(err) != sessionstore.ReasonInvalidArgument {
			t.Errorf("%s: %v, want INVALID_ARGUMENT", what, err)
		}
	}
}

// wholeArtifactText is the text of an artifact's bytes; anything but a whole
// artifact (an error, a torn tail) fails the test.
func wholeArtifactText(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	text, err := storage.ArtifactText(data)
	if err != nil {
		t.Fatalf("artifact %s: %v", name, err)
	}
	return text
}
