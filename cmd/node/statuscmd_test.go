package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

func TestStatusRenderThreeNodes(t *testing.T) {
	st := &sessionpb.StatusResponse{NodeId: "node1", State: "Leader", LeaderId: "node1", LeaderAddress: "127.0.0.1:7400",
		Term: 2, CommitIndex: 1234, AppliedIndex: 1233, ClusterId: "3f2a9c0d11aa22bb"}
	members := []*sessionpb.Member{ // out of order: the table sorts by id
		{NodeId: "node3", RaftAddress: "10.0.0.3:7401", ApiAddress: "", Suffrage: "Nonvoter", Health: "suspect"},
		{NodeId: "node1", RaftAddress: "127.0.0.1:7401", ApiAddress: "127.0.0.1:7400", Suffrage: "Voter", Health: "alive"},
		{NodeId: "node2", RaftAddress: "10.0.0.2:7401", ApiAddress: "10.0.0.2:7400", Suffrage: "Voter", Health: "dead"},
	}
	want := `node      node1 (Leader)
leader    node1 at 127.0.0.1:7400
cluster   3f2a9c0d11aa22bb   term 2   commit 1234   applied 1233

NODE    SUFFRAGE   HEALTH    RAFT             API
node1   Voter      alive     127.0.0.1:7401   127.0.0.1:7400
node2   Voter      dead      10.0.0.2:7401    10.0.0.2:7400
node3   Nonvoter   suspect   10.0.0.3:7401    -
`
	if got := renderStatus(st, members); got != want {
		t.Errorf("renderStatus =\n%s\nwant\n%s", got, want)
	}
	if members[0].GetNodeId() != "node3" {
		t.Error("renderStatus reordered the caller's slice")
	}
}

func TestStatusRenderWithoutLeader(t *testing.T) {
	for _, c := range []struct {
		name string
		st   *sessionpb.StatusResponse
		want string
	}{
		{"none", &sessionpb.StatusResponse{NodeId: "node2", State: "Candidate", Term: 5},
			"node      node2 (Candidate)\nleader    none known\ncluster   -   term 5   commit 0   applied 0\n"},
		{"no address", &sessionpb.StatusResponse{NodeId: "node2", State: "Follower", LeaderId: "node1", ClusterId: "c"},
			"node      node2 (Follower)\nleader    node1 (address unknown)\ncluster   c   term 0   commit 0   applied 0\n"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if got := renderStatus(c.st, nil); got != c.want {
				t.Errorf("renderStatus =\n%s\nwant\n%s", got, c.want)
			}
		})
	}
}

func TestStatusRenderNoMembers(t *testing.T) {
	got := renderStatus(&sessionpb.StatusResponse{NodeId: "n", State: "Follower"}, []*sessionpb.Member{})
	if !strings.HasSuffix(got, "\nno members: the node is in no cluster configuration yet\n") || strings.Contains(got, "NODE") {
		t.Errorf("renderStatus with an empty configuration =\n%s", got)
	}
}

func TestStatusJSON(t *testing.T) {
	st := &sessionpb.StatusResponse{NodeId: "node1", State: "Leader", LeaderId: "node1", LeaderAddress: "a:1",
		Term: 2, CommitIndex: 9, AppliedIndex: 8, ClusterId: "c"}
	b, err := json.Marshal(statusJSON(st, []*sessionpb.Member{{NodeId: "node1", RaftAddress: "a:2", ApiAddress: "a:1", Suffrage: "Voter", Health: "alive"}}))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"node":{"node_id":"node1","state":"Leader","leader_id":"node1","leader_address":"a:1","term":2,"commit_index":9,"applied_index":8,"cluster_id":"c"},` +
		`"members":[{"node_id":"node1","raft_address":"a:2","api_address":"a:1","suffrage":"Voter","health":"alive"}]}`
	if string(b) != want {
		t.Errorf("statusJSON = %s\nwant %s", b, want)
	}
	b, _ = json.Marshal(statusJSON(&sessionpb.StatusResponse{}, nil))
	if !strings.HasSuffix(string(b), `"members":[]}`) {
		t.Errorf("statusJSON without members = %s, want an empty list", b)
	}
}

// --help prints the usage and exits 0; bad flags exit 2; neither dials.
func TestStatusAndLeaveHelpAndUsage(t *testing.T) {
	for _, cmd := range []string{"status", "leave"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{cmd, "--help"}, &out, &errOut); code != 0 {
			t.Errorf("sessionstore %s --help: exit %d", cmd, code)
		}
		if !strings.Contains(errOut.String(), "Usage: sessionstore "+cmd) || !strings.Contains(errOut.String(), "-addr") {
			t.Errorf("sessionstore %s --help printed %q", cmd, errOut.String())
		}
		for _, bad := range [][]string{{"--nope"}, {"extra"}, {"--timeout", "0s"}} {
			out.Reset()
			errOut.Reset()
			if code := run(context.Background(), append([]string{cmd}, bad...), &out, &errOut); code != 2 {
				t.Errorf("sessionstore %s %v: exit %d, want 2 (stderr %q)", cmd, bad, code, errOut.String())
			}
		}
	}
	var out, errOut bytes.Buffer
	run(context.Background(), []string{"help"}, &out, &errOut)
	for _, line := range []string{"sessionstore status [flags]", "sessionstore leave [flags]"} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("usage lacks %q", line)
		}
	}
}

func TestStatusLeaveOutcomeUnknown(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{sessionstore.Errorf(sessionstore.ReasonOutcomeUnknown, "x"), true},
		{sessionstore.Errorf(sessionstore.ReasonNoLeader, "x"), false},
		{sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "x"), false},
		{context.DeadlineExceeded, true},
		{errors.New("transport"), true},
	} {
		if got := outcomeUnknown(c.err); got != c.want {
			t.Errorf("outcomeUnknown(%v) = %v, want %v", c.err, got, c.want)
		}
	}
}
