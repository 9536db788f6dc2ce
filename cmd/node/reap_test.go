package main

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// pcMemberIDs lists the members a node reports, sorted.
func pcMemberIDs(t *testing.T, nd *pcNode) []string {
	t.Helper()
	ms, err := nd.C.Members(crCtx(t, 5*time.Second))
	if err != nil {
		return nil
	}
	var ids []string
	for _, m := range ms {
		ids = append(ids, m.NodeId+"/"+m.Suffrage)
	}
	sort.Strings(ids)
	return ids
}

// --reap-dead-after removes a server that died (SIGKILL, no graceful leave)
// once it has been dead that long, but never takes the voters below
// --bootstrap-expect.
func TestProcCluster_ReapDeadAfter(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: runs four node processes")
	}
	bin := crBinary(t)
	nodes := pcNewCluster(t, bin, 4)
	// The fourth node joins the formed cluster (pcNewCluster lists every
	// other node as a seed); everyone reaps after 3 s.
	for _, nd := range nodes {
		nd.Extra = append(nd.Extra, "--reap-dead-after", "3s")
	}
	for _, nd := range nodes[:3] {
		nd.Start()
	}
	pcWaitLeader(t, nodes[:3], []int{0, 1, 2}, "formation")
	nodes[3].Start()
	want4 := []string{"n1/Voter", "n2/Voter", "n3/Voter", "n4/Voter"}
	clustertest.Eventually(t, 40*time.Second, func() error {
		if got := pcMemberIDs(t, nodes[0]); fmt.Sprint(got) != fmt.Sprint(want4) {
			return fmt.Errorf("the fourth node is not promoted: members %v", got)
		}
		return nil
	})

	// Kill n4: it is reaped (4 voters > 3 expected).
	nodes[3].Kill()
	want3 := []string{"n1/Voter", "n2/Voter", "n3/Voter"}
	clustertest.Eventually(t, 60*time.Second, func() error {
		if got := pcMemberIDs(t, nodes[0]); fmt.Sprint(got) != fmt.Sprint(want3) {
			return fmt.Errorf("the dead fourth node is not reaped: members %v", got)
		}
		return nil
	})

	// Kill a follower of the remaining three: reaping it would leave fewer
	// voters than --bootstrap-expect, so it stays (checked well past 3 s).
	li := pcWaitLeader(t, nodes[:3], []int{0, 1, 2}, "after the reap")
	victim := (li + 1) % 3
	nodes[victim].Kill()
	keep := time.Now().Add(10 * time.Second)
	for time.Now().Before(keep) {
		got := pcMemberIDs(t, nodes[li])
		if got != nil && fmt.Sprint(got) != fmt.Sprint(want3) {
			t.Fatalf("members changed to %v: a voter was reaped below --bootstrap-expect", got)
		}
		time.Sleep(500 * time.Millisecond)
	}
}
