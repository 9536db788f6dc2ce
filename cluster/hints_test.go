package cluster

import (
	"testing"

	"github.com/hashicorp/raft"
)

func TestComputeHints(t *testing.T) {
	servers := []raft.Server{
		{ID: "n3", Suffrage: raft.Voter},
		{ID: "n1", Suffrage: raft.Voter},
		{ID: "n2", Suffrage: raft.Voter},
		{ID: "n4", Suffrage: raft.Nonvoter},
	}
	peers := map[string]peer{
		"n1": {meta: memberMeta{ID: "n1", API: "node1:7400", Client: "127.0.0.1:7410"}},
		"n2": {meta: memberMeta{ID: "n2", API: "node2:7400"}}, // an older build: no client address
		"n4": {meta: memberMeta{ID: "n4", API: "node4:7400", Client: "c4:1"}},
	}
	cases := []struct {
		name                string
		leader              raft.ServerID
		wantLeader, wantEps string
	}{
		{"leader with a client address", "n1", "n1=127.0.0.1:7410", "n1=127.0.0.1:7410,n2=node2:7400"},
		{"leader from an older build", "n2", "n2=node2:7400", "n1=127.0.0.1:7410,n2=node2:7400"},
		{"leader gossip has not told", "n3", "n3=", "n1=127.0.0.1:7410,n2=node2:7400"},
		{"no leader", "", "", "n1=127.0.0.1:7410,n2=node2:7400"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := computeHints("n2", tc.leader, servers, peers)
			if h.NodeID != "n2" || h.Leader != tc.wantLeader || h.Endpoints != tc.wantEps {
				t.Fatalf("hints = node %q leader %q endpoints %q, want n2 %q %q", h.NodeID, h.Leader, h.Endpoints, tc.wantLeader, tc.wantEps)
			}
		})
	}
}
