package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// clFreeAddr reserves a loopback port (TCP and UDP free at the moment).
func clFreeAddr(t *testing.T) string {
	t.Helper()
	for i := 0; i < 20; i++ {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addr := l.Addr().String()
		l.Close()
		u, err := net.ListenPacket("udp", addr)
		if err != nil {
			continue
		}
		u.Close()
		return addr
	}
	t.Fatal("no free port")
	return ""
}

type clNode struct {
	*testNode
	id string
}

// startCluster boots n in-process nodes that find each other through gossip
// (each joins the first) and bootstrap one cluster with --bootstrap-expect n.
func startCluster(t *testing.T, n int) []*clNode {
	t.Helper()
	gossip := make([]string, n)
	for i := range gossip {
		gossip[i] = clFreeAddr(t)
	}
	nodes := make([]*clNode, n)
	for i := range nodes {
		id := fmt.Sprintf("n%d", i+1)
		raftAddr, grpcAddr, httpAddr, gossipAddr := clFreeAddr(t), clFreeAddr(t), clFreeAddr(t), gossip[i]
		var seeds []string
		for j, g := range gossip {
			if j != i {
				seeds = append(seeds, g)
			}
		}
		join := strings.Join(seeds, ",")
		tune := func(c *serveConfig) {
			c.Cluster.NodeID = id
			c.Cluster.RaftAddr, c.Cluster.GossipAddr = raftAddr, gossipAddr
			c.GRPCAddr, c.HTTPAddr = grpcAddr, httpAddr
			c.Join = join
			c.Cluster.BootstrapExpect = n
		}
		nodes[i] = &clNode{testNode: startTestNodeWith(t, "", tune), id: id}
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
	deadline := time.Now().Add(30 * time.Second)
	for {
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
				return
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("no leader with %d voters after 30s", want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func leaderOf(nodes []*clNode) *clNode {
	for _, nd := range nodes {
		if nd.srv != nil && nd.srv.node.Raft().State() == raft.Leader {
			return nd
		}
	}
	return nil
}

func clEvent(seq int64, marker string) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"m":%q},"ignorable":true}`, seq, 1000+seq, marker)
}

// A 3-node cluster forms from gossip alone, any node accepts any request
// (followers forward to the leader), losing the leader costs an election and
// nothing else, and once healed every node holds the same events and
// byte-identical artifacts.
func TestCluster_ThreeNodesFormForwardAndSurviveLeaderLoss(t *testing.T) {
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

	// Write one session through each node, followers included.
	next := map[string]int64{}
	for i, nd := range nodes {
		id := fmt.Sprintf("s%d", i)
		cwd := "/w/cluster"
		if err := nd.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}}); err != nil {
			t.Fatalf("create through %s: %v", nd.id, err)
		}
		for k := int64(0); k < 3; k++ {
			if _, err := nd.Client.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{clEvent(k, fmt.Sprintf("%s-%d", id, k))}}); err != nil {
				t.Fatalf("append through %s: %v", nd.id, err)
			}
		}
		next[id] = 3
	}
	// Linearizable reads through every node see every write.
	for _, nd := range nodes {
		for id := range next {
			r, err := nd.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id})
			if err != nil || len(r.Events) != 3 {
				t.Fatalf("read %s through %s: %d events, %v", id, nd.id, len(r.GetEvents()), err)
			}
		}
	}

	// Kill the leader; writes through the survivors resume after an election.
	old := leaderOf(nodes)
	if old == nil {
		t.Fatal("no leader")
	}
	old.Close()
	var survivor *clNode
	for _, nd := range nodes {
		if nd != old {
			survivor = nd
			break
		}
	}
	start := time.Now()
	for {
		_, err := survivor.Client.Append(ctx, &pb.AppendRequest{SessionId: "s0", Events: []string{clEvent(next["s0"], "after-failover")}})
		if err == nil {
			next["s0"]++
			break
		}
		if ctx.Err() != nil {
			t.Fatalf("no write succeeded after the leader died: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	t.Logf("writes resumed %v after the leader stopped", time.Since(start).Round(time.Millisecond))

	// Restart the old leader on its data dir; it catches up.
	restarted := &clNode{testNode: old.Restart(), id: old.id}
	for i, nd := range nodes {
		if nd == old {
			nodes[i] = restarted
		}
	}
	restarted.waitReady(false)
	waitVoters(t, nodes, 3)
	if _, err := restarted.Client.Append(ctx, &pb.AppendRequest{SessionId: "s1", Events: []string{clEvent(next["s1"], "via-restarted")}}); err != nil {
		t.Fatalf("append through the restarted node: %v", err)
	}
	next["s1"]++

	// Every node converges: the same events (stale local reads) and
	// byte-identical artifacts.
	deadline := time.Now().Add(30 * time.Second)
	for {
		if clConverged(t, ctx, nodes, next) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("nodes did not converge within 30s")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// clConverged reports whether every node holds exactly the expected number
// of events, the same events, and the same artifact bytes for every session.
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
			arts[id] = b
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
