package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// rcRaftAddr is the Raft address a cluster test node was started with.
func rcRaftAddr(n *clNode) string {
	c := defaultServeConfig()
	n.tune(&c)
	return c.Cluster.RaftAddr
}

// rcRun runs `sessionstore recover` (or any subcommand) in-process.
func rcRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = run(context.Background(), args, &out, &errb)
	t.Logf("sessionstore %s -> exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out.String(), errb.String())
	return code, out.String(), errb.String()
}

// rcVoters returns the voters of n's Raft configuration.
func rcVoters(t *testing.T, n *testNode) []raft.Server {
	t.Helper()
	f := n.srv.node.Raft().GetConfiguration()
	if err := f.Error(); err != nil {
		t.Fatal(err)
	}
	var v []raft.Server
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			v = append(v, s)
		}
	}
	return v
}

// Quorum loss: two of three nodes are destroyed (stopped, data deleted); the
// survivor cannot elect a leader. `sessionstore recover` with only the survivor in
// --peers makes it a one-voter cluster that serves every event committed on
// it, byte for byte, and takes new writes.
func TestRecover_SurvivorOfQuorumLossServesAgain(t *testing.T) {
	rcQuorumLoss(t, 5, nil)
}

// The same with a survivor whose log was compacted past a snapshot: recovery
// restores the snapshot and replays the log past it.
func TestRecover_SurvivorWithSnapshotServesAgain(t *testing.T) {
	rcQuorumLoss(t, 80, clSmallSnapshots)
}

func rcQuorumLoss(t *testing.T, perSession int64, tune func(*serveConfig)) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startClusterWith(t, 3, tune)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	// The survivor is a follower: it holds only what was replicated to it.
	leader, survivor := followerOf(t, nodes)

	// Sessions written through the leader.
	want, raw := clWriteSessions(t, ctx, leader.Client, "rc-", "/w/recover", 4, perSession, func(id string, k int64) string {
		return clEvent(k, fmt.Sprintf("%s-%d", id, k))
	})
	// Wait until the survivor has applied all of it (its own state).
	clustertest.Eventually(t, 30*time.Second, func() error {
		for id, evs := range want {
			r, err := survivor.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id, Consistency: pb.Consistency_STALE})
			if err != nil || len(r.Events) != len(evs) {
				return fmt.Errorf("survivor did not apply %s: %v", id, err)
			}
		}
		return nil
	})
	survivor.WaitArtifacts()
	if tune != nil {
		m := crWaitSnapshot(t, survivor.dir, 0, nil)
		t.Logf("survivor's latest snapshot before recovery: index %d", m.Index)
	}

	// Destroy the other two, stop the survivor.
	for _, nd := range nodes {
		if nd != survivor {
			nd.Close()
			if err := os.RemoveAll(nd.dir); err != nil {
				t.Fatal(err)
			}
		}
	}
	survivor.Close()

	// Without --peers the command refuses (usage error).
	if code, _, _ := rcRun(t, "recover", "--data-dir", survivor.dir, "--yes"); code != 2 {
		t.Fatalf("recover without --peers: exit %d, want 2", code)
	}
	peers := survivor.id + "=" + rcRaftAddr(survivor)
	code, out, _ := rcRun(t, "recover", "--data-dir", survivor.dir, "--node-id", survivor.id, "--peers", peers, "--yes")
	if code != 0 {
		t.Fatalf("recover: exit %d", code)
	}
	if !strings.Contains(out, "old configuration (3 servers)") || !strings.Contains(out, "new configuration (1 servers)") {
		t.Errorf("recover output lacks the old and new configurations:\n%s", out)
	}

	// Start it again on the same data directory and addresses.
	back := &clNode{testNode: survivor.Restart(), id: survivor.id}
	back.waitReady(true)
	if st := back.srv.node.Raft().State(); st != raft.Leader {
		t.Fatalf("recovered node is %v, want Leader", st)
	}
	if v := rcVoters(t, back.testNode); len(v) != 1 || string(v[0].ID) != survivor.id {
		t.Fatalf("voters after recovery: %+v", v)
	}
	for id, evs := range want {
		r, err := back.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id})
		if err != nil {
			t.Fatalf("read %s: %v", id, err)
		}
		if strings.Join(r.Events, "\n") != strings.Join(evs, "\n") {
			t.Fatalf("session %s after recovery:\n%v\nwant\n%v", id, r.Events, evs)
		}
		rr, err := back.Client.ReadRaw(ctx, &pb.ReadRawRequest{SessionId: id})
		if err != nil || !bytes.Equal(rr.Content, raw[id]) {
			t.Fatalf("raw %s after recovery differs (%v):\n%s\nwant\n%s", id, err, rr.GetContent(), raw[id])
		}
	}
	// New writes are accepted and read back.
	ev := clEvent(perSession, "after-recovery")
	if _, err := back.Client.Append(ctx, &pb.AppendRequest{SessionId: "rc-0", Events: []string{ev}}); err != nil {
		t.Fatalf("append after recovery: %v", err)
	}
	r, err := back.Client.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: "rc-0", FromSeq: perSession})
	if err != nil || len(r.Events) != 1 || r.Events[0] != ev {
		t.Fatalf("read after recovery: %v, %v", r.GetEvents(), err)
	}
	back.WaitArtifacts()
}

// A data directory in use is refused with a clear message and left alone;
// without --yes an answer other than "yes" changes nothing.
func TestRecover_RefusesADataDirInUseAndUnconfirmed(t *testing.T) {
	n := startTestNode(t, "")
	ctx := n.ctx()
	if _, err := n.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "rc-busy", CreatedAt: 1}}); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := rcRun(t, "recover", "--data-dir", n.dir, "--peers", "test-node=127.0.0.1:1", "--yes")
	if code != 1 || !strings.Contains(stderr, "stop the node first") {
		t.Fatalf("recover of a running node's directory: exit %d, stderr %q", code, stderr)
	}
	// The node is unharmed.
	if _, err := n.Client.Append(ctx, &pb.AppendRequest{SessionId: "rc-busy", Events: []string{clEvent(0, "still-running")}}); err != nil {
		t.Fatalf("append after the refused recover: %v", err)
	}
	raftAddr := n.srv.node.Raft().GetConfiguration().Configuration().Servers[0].Address
	n.Close()

	// Not confirmed: nothing changes.
	old := recoverStdin
	recoverStdin = strings.NewReader("no\n")
	defer func() { recoverStdin = old }()
	code, out, stderr := rcRun(t, "recover", "--data-dir", n.dir, "--peers", "other=127.0.0.1:1")
	if code != 1 || !strings.Contains(stderr, "not confirmed") || !strings.Contains(out, "old configuration (1 servers)") {
		t.Fatalf("unconfirmed recover: exit %d, stdout %q, stderr %q", code, out, stderr)
	}
	// A missing data directory is never created.
	missing := n.dir + "-missing"
	if code, _, _ := rcRun(t, "recover", "--data-dir", missing, "--peers", "a=127.0.0.1:1", "--yes"); code != 1 {
		t.Fatalf("recover of a missing directory: exit %d", code)
	}
	if _, err := os.Stat(missing); !os.IsNotExist(err) {
		t.Fatalf("recover created %s: %v", missing, err)
	}

	back := n.Restart()
	if v := rcVoters(t, back); len(v) != 1 || v[0].ID != "test-node" || v[0].Address != raftAddr {
		t.Fatalf("configuration changed by an unconfirmed recover: %+v", v)
	}
	r, err := back.Client.ReadFrom(back.ctx(), &pb.ReadFromRequest{SessionId: "rc-busy"})
	if err != nil || len(r.Events) != 1 {
		t.Fatalf("read after restart: %v, %v", r.GetEvents(), err)
	}
}
