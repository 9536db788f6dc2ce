package cluster

import (
	"encoding/json"
	"io"
	"log/slog"
	"testing"
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

func TestComputeVoterView(t *testing.T) {
	voter := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Voter} }
	nonvoter := func(id string) raft.Server { return raft.Server{ID: raft.ServerID(id), Suffrage: raft.Nonvoter} }
	alive := func(cmds uint32, low bool) peer {
		return peer{meta: memberMeta{Commands: cmds, DiskLow: low}, state: memberlist.StateAlive}
	}
	dead := func(cmds uint32, low bool) peer {
		return peer{meta: memberMeta{Commands: cmds, DiskLow: low}, state: memberlist.StateDead}
	}
	tests := []struct {
		name        string
		servers     []raft.Server
		peers       map[string]peer
		wantVersion uint32
		wantLow     raft.ServerID
	}{
		{name: "no voter", wantVersion: ^uint32(0)},
		{name: "oldest voter wins", servers: []raft.Server{voter("a"), voter("b"), voter("c")},
			peers: map[string]peer{"a": alive(5, false), "b": alive(3, false), "c": alive(6, false)}, wantVersion: 3},
		{name: "a voter never heard from counts as older", servers: []raft.Server{voter("a"), voter("b")},
			peers: map[string]peer{"a": alive(5, false)}, wantVersion: 0},
		{name: "no gossip", servers: []raft.Server{voter("a")}, wantVersion: 0},
		{name: "a stopped voter keeps its version", servers: []raft.Server{voter("a"), voter("b")},
			peers: map[string]peer{"a": alive(5, false), "b": dead(4, false)}, wantVersion: 4},
		{name: "non-voters do not count", servers: []raft.Server{voter("a"), nonvoter("b")},
			peers: map[string]peer{"a": alive(5, false), "b": alive(1, true)}, wantVersion: 5},
		{name: "a voter with a low disk", servers: []raft.Server{voter("a"), voter("b"), voter("c")},
			peers: map[string]peer{"a": alive(5, false), "b": alive(5, false), "c": alive(5, true)}, wantVersion: 5, wantLow: "c"},
		{name: "this node's own gossip is not judged here", servers: []raft.Server{voter("a"), voter("b")},
			peers: map[string]peer{"a": alive(5, true), "b": alive(5, false)}, wantVersion: 5},
		{name: "a dead voter's low disk is not judged", servers: []raft.Server{voter("a"), voter("b")},
			peers: map[string]peer{"a": alive(5, false), "b": dead(5, true)}, wantVersion: 5},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			v := computeVoterView(tc.servers, tc.peers, "a")
			if v.version != tc.wantVersion || v.diskLow != tc.wantLow {
				t.Fatalf("version %d, disk low %q; want %d, %q", v.version, v.diskLow, tc.wantVersion, tc.wantLow)
			}
		})
	}
}

// TestVoterViewFollowsChanges: the view is reused while neither the Raft
// configuration nor gossip changed, and recomputed when either did.
func TestVoterViewFollowsChanges(t *testing.T) {
	rc := raft.DefaultConfig()
	rc.LocalID = "a"
	rc.Logger = nil
	rc.LogOutput = io.Discard
	rc.HeartbeatTimeout, rc.ElectionTimeout, rc.LeaderLeaseTimeout = 50*time.Millisecond, 50*time.Millisecond, 50*time.Millisecond
	store := raft.NewInmemStore()
	_, trans := raft.NewInmemTransport("a")
	r, err := raft.NewRaft(rc, &raft.MockFSM{}, store, store, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = r.Shutdown().Error() }()
	if err := r.BootstrapCluster(raft.Configuration{Servers: []raft.Server{{ID: "a", Address: trans.LocalAddr(), Suffrage: raft.Voter}}}).Error(); err != nil {
		t.Fatal(err)
	}
	for r.State() != raft.Leader {
		time.Sleep(10 * time.Millisecond)
	}
	g := &gossip{logger: slog.New(slog.NewTextHandler(io.Discard, nil)), meta: memberMeta{ID: "a", Commands: 5},
		members: map[string]peer{}, changed: make(chan struct{})}
	ss := &Sessions{members: &membership{cfg: Config{NodeID: "a"}, raft: r, gossip: g}, disk: &diskMonitor{}} // disk: checks disabled

	v1 := ss.members.voterView()
	if v1 == nil || v1.version != 5 {
		t.Fatalf("view %+v, want version 5", v1)
	}
	if v := ss.members.voterView(); v != v1 {
		t.Fatal("nothing changed, yet the view was recomputed")
	}

	// A configuration change: a voter never heard from in gossip.
	// Unreachable, b never lets the change commit, but the latest
	// configuration (the one raft reports) has it once it is appended.
	_ = r.AddVoter("b", "b", 0, time.Second)
	for len(r.GetConfiguration().Configuration().Servers) != 2 {
		time.Sleep(10 * time.Millisecond)
	}
	v2 := ss.members.voterView()
	if v2 == v1 || v2.version != 0 {
		t.Fatalf("after a configuration change: view %+v (same: %v), want version 0", v2, v2 == v1)
	}

	// A gossip change: b advertises version 4 with a low disk.
	meta, _ := json.Marshal(memberMeta{ID: "b", Commands: 4, DiskLow: true})
	g.NotifyJoin(&memberlist.Node{Name: "b", Meta: meta})
	v3 := ss.members.voterView()
	if v3 == v2 || v3.version != 4 || v3.diskLow != "b" {
		t.Fatalf("after a gossip change: view %+v (same: %v), want version 4 and b's disk low", v3, v3 == v2)
	}
	if err := ss.DiskOK(); err == nil {
		t.Fatal("DiskOK accepted a write while voter b gossips a low disk")
	}
	if !ss.members.votersSupport(4) || ss.members.votersSupport(5) {
		t.Fatal("votersSupport does not follow the oldest voter")
	}
}
