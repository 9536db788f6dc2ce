package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/api/client"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// ptTable is the nftables table this test owns; it is removed afterwards.
const ptTable = "sessionstore_partition_test"

// ptRequireNft returns false (after skipping) when the test cannot cut the
// network; under CI it fails instead.
func ptRequireNft(t *testing.T) {
	t.Helper()
	_, err := exec.LookPath("nft")
	if err != nil || os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatalf("partition tests need root and nft (apt-get install -y nftables): %v", err)
		}
		t.Skip("partition tests need root and nft")
	}
}

func ptNft(t *testing.T, script string) {
	t.Helper()
	cmd := exec.Command("nft", "-f", "-")
	cmd.Stdin = strings.NewReader(script)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("nft: %v: %s\n%s", err, out, script)
	}
}

// ptIsolate drops every packet between ip and the other nodes' addresses
// (both directions), leaving each node reachable from its own address, so a
// client can still talk to the isolated node.
func ptIsolate(t *testing.T, ip string, others []string) {
	t.Helper()
	set := strings.Join(others, ", ")
	ptNft(t, fmt.Sprintf(`table inet %[1]s {
	chain input {
		type filter hook input priority -150; policy accept;
		ip saddr %[2]s ip daddr { %[3]s } drop
		ip saddr { %[3]s } ip daddr %[2]s drop
	}
}
`, ptTable, ip, set))
}

func ptHeal(t *testing.T) {
	t.Helper()
	_ = exec.Command("nft", "delete", "table", "inet", ptTable).Run()
}

// A leader cut off from the other two acknowledges nothing; they elect a new
// leader and keep accepting writes; after healing, the old leader converges to
// the same logs and artifacts.
func TestCluster_IsolatedLeaderAcknowledgesNothing(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes and cuts the network")
	}
	ptRequireNft(t)
	ptHeal(t)
	t.Cleanup(func() { ptHeal(t) })

	// Each node on its own loopback address, so the network can be cut between them.
	ips := []string{"127.0.0.21", "127.0.0.22", "127.0.0.23"}
	gossip := make([]string, 3)
	for i, ip := range ips {
		gossip[i] = ip + ":7402"
	}
	nodes := make([]*clNode, 3)
	for i, ip := range ips {
		id := fmt.Sprintf("p%d", i+1)
		var seeds []string
		for j, g := range gossip {
			if j != i {
				seeds = append(seeds, g)
			}
		}
		tune := func(c *serveConfig) {
			c.Cluster.NodeID = id
			c.Cluster.RaftAddr, c.Cluster.GossipAddr = ip+":7401", ip+":7402"
			c.GRPCAddr, c.HTTPAddr = ip+":7400", ip+":7480"
			c.Join = strings.Join(seeds, ",")
			c.Cluster.BootstrapExpect = 3
		}
		nodes[i] = &clNode{testNode: startTestNodeWith(t, "", tune), id: id}
	}
	for _, nd := range nodes {
		nd.waitReady(false)
	}
	waitVoters(t, nodes, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	cwd := "/w/cluster"
	if _, err := nodes[0].Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "iso", CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatal(err)
	}
	next := int64(0)
	appendVia := func(c *client.Client, marker string) error {
		_, err := c.Append(ctx, &pb.AppendRequest{SessionId: "iso", Events: []string{clEvent(next, marker)}})
		if err == nil {
			next++
		}
		return err
	}
	for i := 0; i < 5; i++ {
		if err := appendVia(nodes[i%3].Client, "before"); err != nil {
			t.Fatal(err)
		}
	}

	old := leaderOf(nodes)
	var others []string
	var rest []*clNode
	oldIP := ""
	for i, nd := range nodes {
		if nd == old {
			oldIP = ips[i]
		} else {
			others = append(others, ips[i])
			rest = append(rest, nd)
		}
	}
	ptIsolate(t, oldIP, others)
	isolatedAt := time.Now()

	// Writes through the isolated old leader, one attempt each, for a while:
	// none may be acknowledged.
	once := old.Client.WithOptions(client.Options{MaxAttempts: 1})
	for time.Since(isolatedAt) < 4*time.Second {
		wctx, wcancel := context.WithTimeout(ctx, time.Second)
		_, err := once.Append(wctx, &pb.AppendRequest{SessionId: "iso", Events: []string{clEvent(next, "isolated")}})
		wcancel()
		if err == nil {
			t.Fatalf("the isolated old leader acknowledged an append after %v", time.Since(isolatedAt))
		}
	}

	// The majority elects a new leader and accepts writes.
	var newLeader *clNode
	deadline, _ := ctx.Deadline()
	clustertest.Eventually(t, time.Until(deadline), func() error {
		for _, nd := range rest {
			if nd.srv.node.Raft().State() == raft.Leader {
				newLeader = nd
				return nil
			}
		}
		return errors.New("no new leader among the majority")
	})
	t.Logf("new leader %s elected %v after the isolation", newLeader.id, time.Since(isolatedAt).Round(time.Millisecond))
	for i := 0; i < 5; i++ {
		if err := appendVia(rest[i%2].Client, "majority"); err != nil {
			t.Fatalf("write through the majority: %v", err)
		}
	}

	ptHeal(t)
	clustertest.Eventually(t, 30*time.Second, func() error {
		if !clConverged(t, ctx, nodes, map[string]int64{"iso": next}) {
			return errors.New("the old leader did not converge after healing")
		}
		return nil
	})
	r, err := old.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: "iso", Consistency: pb.Consistency_STALE})
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range r.Events {
		if strings.Contains(e, `"isolated"`) {
			t.Fatalf("an unacknowledged write from the isolation survived: %s", e)
		}
	}
}
