package main

// Who may talk Raft with whom (issue 13, items 1, 8, 9): a node on another
// cluster's data directory, a data directory under another node id, and a
// process without the cluster's Raft credential, with real node processes
// (the "pc" and "cr" harnesses).

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// peCreate creates session id through nd.
func peCreate(t *testing.T, nd *pcNode, id string) {
	t.Helper()
	cwd := "/w/peers"
	h := &sessionpb.SessionHeader{Id: id, CreatedAt: crTime0, Cwd: &cwd}
	if err := nd.C.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: h}); err != nil {
		t.Fatalf("create %q through %s: %v", id, nd.ID, err)
	}
	if _, err := nd.C.Append(crCtx(t, 30*time.Second), &sessionpb.AppendRequest{SessionId: id, Events: []string{pcEvent(0, 0)}}); err != nil {
		t.Fatalf("append to %q through %s: %v", id, nd.ID, err)
	}
}

// peExists reports whether a linearizable read of id through nd finds it.
func peExists(t *testing.T, nd *pcNode, id string) bool {
	t.Helper()
	_, err := nd.C.ReadFrom(crCtx(t, 20*time.Second), &sessionpb.ReadFromRequest{SessionId: id})
	if errors.Is(err, sessionstore.ErrNotFound) {
		return false
	}
	if err != nil {
		t.Fatalf("load %q through %s: %v", id, nd.ID, err)
	}
	return true
}

func peForm(t *testing.T, nodes []*pcNode, what string) int {
	t.Helper()
	for _, nd := range nodes {
		nd.Start()
	}
	for _, nd := range nodes {
		nd.WaitReady(nd.C)
	}
	return pcWaitLeader(t, nodes, []int{0, 1, 2}, what)
}

func peStop(nodes []*pcNode) {
	for _, nd := range nodes {
		if nd.cur != nil {
			nd.Term()
		}
	}
}

// TestProcCluster_ForeignVolumeNeverJoins is issue 13's item 1: clusters A
// and B with the same node ids and addresses; A's n2 and n3 are started with
// n1 on B's data directory. n1 must never follow A's leader, vote in A or
// apply A's entries: A goes on with n2 and n3, and B, started again, has
// only its own sessions.
func TestProcCluster_ForeignVolumeNeverJoins(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: runs two three-process clusters")
	}
	bin := crBinary(t)
	nodes := pcNewCluster(t, bin, 3)
	dirsB := []string{nodes[0].Dir, nodes[1].Dir, nodes[2].Dir}
	peForm(t, nodes, "cluster B")
	peCreate(t, nodes[0], "pe-b")
	peStop(nodes)

	dirsA := []string{t.TempDir(), t.TempDir(), t.TempDir()}
	for i, nd := range nodes {
		nd.Dir = dirsA[i]
	}
	peForm(t, nodes, "cluster A")
	peCreate(t, nodes[0], "pe-a")
	peStop(nodes)

	// A's n2 and n3, and n1 on B's volume.
	nodes[0].Dir = dirsB[0]
	for _, nd := range nodes {
		nd.Start()
	}
	nodes[1].WaitReady(nodes[1].C)
	if !peExists(t, nodes[1], "pe-a") {
		t.Fatalf("cluster A lost session pe-a")
	}
	// A writes while n1 runs: its leader replicates (or tries to) to n1.
	deadline := time.Now().Add(8 * time.Second)
	for i := 0; time.Now().Before(deadline); i++ {
		if i < 5 {
			peCreate(t, nodes[1+i%2], "pe-a"+strings.Repeat("x", i+1))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		st, err := nodes[0].C.Status(ctx)
		cancel()
		if err == nil && st.GetLeaderId() != "" {
			t.Fatalf("n1 on cluster B's data directory follows leader %q of cluster A", st.GetLeaderId())
		}
		time.Sleep(200 * time.Millisecond)
	}
	if !strings.Contains(nodes[1].Log()+nodes[2].Log(), "refused by the handshake") {
		t.Errorf("cluster A's nodes do not log the refused handshake of n1")
	}
	peStop(nodes)

	// B again: its own session, none of A's.
	for i, nd := range nodes {
		nd.Dir = dirsB[i]
	}
	peForm(t, nodes, "cluster B again")
	if !peExists(t, nodes[0], "pe-b") || peExists(t, nodes[0], "pe-a") || peExists(t, nodes[0], "pe-ax") {
		t.Fatalf("cluster B after n1 ran beside cluster A: has pe-b %v, pe-a %v, pe-ax %v (want only pe-b)",
			peExists(t, nodes[0], "pe-b"), peExists(t, nodes[0], "pe-a"), peExists(t, nodes[0], "pe-ax"))
	}
	peStop(nodes)
}

// TestProcNode_OtherNodeIDRefused is issue 13's item 9: a data directory
// restarted under another --node-id is refused at start, naming the stored id.
func TestProcNode_OtherNodeIDRefused(t *testing.T) {
	bin := crBinary(t)
	nd := crNewNode(t, bin, t.TempDir(), "--node-id", "first")
	c := crDial(t, nd.GRPCAddr)
	nd.Start()
	nd.WaitReady(c)
	nd.Term()
	nd.Extra = []string{"--node-id", "second"}
	nd.Start()
	select {
	case <-nd.cur.exited:
	case <-time.After(20 * time.Second):
		t.Fatalf("the node started on the data directory of node \"first\" under --node-id second")
	}
	nd.cur = nil
	if log := nd.Log(); !strings.Contains(log, `belongs to node "first"`) {
		t.Fatalf("refusal does not name the stored node id:\n%s", log)
	}
	nd.Extra = []string{"--node-id", "first"}
	nd.Start()
	nd.WaitReady(c)
	nd.Term()
}
