package main

// Who may talk Raft with whom (issue 13, items 1, 8, 9): a node on another
// cluster's data directory, a data directory under another node id, and a
// process without the cluster's Raft credential, with real node processes
// (the "pc" and "cr" harnesses).

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// peClusterKey writes a new cluster key file (as 'sessionstore certs --keys-only'
// does) and returns its path.
func peClusterKey(t testing.TB) string {
	t.Helper()
	k, err := tlsconf.NewGossipKey()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "cluster.key")
	if err := os.WriteFile(path, []byte(tlsconf.EncodeGossipKey(k)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// peCreate creates session id through nd.
func peCreate(t *testing.T, nd *pcNode, id string) {
	t.Helper()
	cwd := "/w/peers"
	h := &sessionpb.SessionHeader{Id: id, CreatedAt: crTime0, Cwd: &cwd}
	if _, err := nd.C.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: h}); err != nil {
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
	// refused starts the node and waits for its exit, a refusal naming want.
	refused := func(when, want, what string) {
		t.Helper()
		nd.Start()
		select {
		case <-nd.cur.exited:
		case <-time.After(20 * time.Second):
			t.Fatalf("%sthe node started on the data directory of node \"first\" under --node-id second", when)
		}
		nd.cur = nil
		if log := nd.Log(); !strings.Contains(log, want) {
			t.Fatalf("refusal does not name the %s node id:\n%s", what, log)
		}
	}
	refused("", `belongs to node "first"`, "stored")
	// A directory of 2f2e872 has no identity.json: the Raft configuration,
	// which lists "first" at this address, is the evidence.
	if err := os.Remove(filepath.Join(nd.Dir, "identity.json")); err != nil {
		t.Fatal(err)
	}
	refused("without identity.json, ", `belongs to node "first" (its Raft configuration lists "first"`, "configured")
	if _, err := os.Stat(filepath.Join(nd.Dir, "identity.json")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the refused start left identity.json: %v", err)
	}
	nd.Extra = []string{"--node-id", "first"}
	nd.Start()
	nd.WaitReady(c)
	nd.Term()
}

// TestProcCluster_GossipKeyWithoutRaftCredential is issue 13's item 8
// acceptance: in a cluster with a gossip key and a cluster key, a process
// that holds the gossip key but not the cluster key is never added, and no
// Raft RPC without the handshake's proof is accepted.
func TestProcCluster_GossipKeyWithoutRaftCredential(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: runs four node processes")
	}
	bin := crBinary(t)
	keys := t.TempDir()
	var out strings.Builder
	if err := certsCmd(context.Background(), []string{"--out", keys, "--keys-only"}, &out, &out); err != nil {
		t.Fatalf("sessionstore certs --keys-only: %v\n%s", err, out.String())
	}
	gossipKey, clusterKey := filepath.Join(keys, "gossip.key"), filepath.Join(keys, "cluster.key")
	nodes := pcNewCluster(t, bin, 3)
	var seeds []string
	for _, nd := range nodes {
		nd.Extra = []string{"--gossip-key-file", gossipKey, "--cluster-key-file", clusterKey}
		seeds = append(seeds, nd.GossipAddr)
	}
	li := peForm(t, nodes, "formation with keys")
	peCreate(t, nodes[li], "pe-secret")

	intruder := crNewNode(t, bin, t.TempDir(), "--node-id", "n4", "--gossip-key-file", gossipKey, "--join", strings.Join(seeds, ","))
	intruder.Start()
	clustertest.Eventually(t, 60*time.Second, func() error {
		if strings.Contains(nodes[li].Log(), "failed the TLS check or the handshake") && strings.Contains(nodes[li].Log(), "peer_id=n4") {
			return nil
		}
		if intruder.Exited() {
			t.Fatalf("the intruder exited: %s", intruder.Log())
		}
		return fmt.Errorf("no sign that leader %s refused n4 at the handshake", nodes[li].ID)
	})
	// Still three members, and the cluster serves.
	peCreate(t, nodes[(li+1)%3], "pe-after")
	ms, err := nodes[li].C.Members(crCtx(t, 10*time.Second))
	if err != nil || len(ms) != 3 {
		t.Fatalf("members after the intruder: %v, %v", ms, err)
	}
	for _, m := range ms {
		if m.GetNodeId() == "n4" {
			t.Fatalf("the intruder is a member: %v", ms)
		}
	}

	// A Raft RPC straight to each node's Raft port, as hashicorp/raft sends
	// it (no handshake), is never answered.
	tr, err := raft.NewTCPTransport("127.0.0.1:0", nil, 1, 3*time.Second, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	for _, nd := range nodes {
		var vr raft.RequestVoteResponse
		err := tr.RequestVote(raft.ServerID(nd.ID), raft.ServerAddress(nd.RaftAddr), &raft.RequestVoteRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("n4"), Addr: []byte(intruder.RaftAddr)}, Term: 1 << 40, LastLogIndex: 1 << 40, LastLogTerm: 1 << 40}, &vr)
		if err == nil {
			t.Errorf("%s answered a RequestVote without handshake: %+v", nd.ID, vr)
		}
		var ar raft.AppendEntriesResponse
		err = tr.AppendEntries(raft.ServerID(nd.ID), raft.ServerAddress(nd.RaftAddr), &raft.AppendEntriesRequest{
			RPCHeader: raft.RPCHeader{ID: []byte("n4"), Addr: []byte(intruder.RaftAddr)}, Term: 1 << 40, LeaderCommitIndex: 1 << 40}, &ar)
		if err == nil {
			t.Errorf("%s answered an AppendEntries without handshake: %+v", nd.ID, ar)
		}
	}
	if !peExists(t, nodes[li], "pe-secret") {
		t.Fatal("the cluster lost pe-secret")
	}
	for _, nd := range nodes {
		resp, err := http.Get("http://" + nd.HTTPAddr + "/metrics")
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !strings.Contains(string(b), `sessionstore_raft_handshake_refusals_total{direction="incoming"}`) {
			t.Errorf("%s does not count the refused incoming handshakes", nd.ID)
		}
	}
	intruder.Term()
	peStop(nodes)
}

// TestCheckPeers: beyond loopback a node refuses to start unless Raft and
// gossip authenticate their peers, or --insecure-peers says otherwise (and is
// logged loudly); with client authentication it joins no unauthenticated
// peers, and alone it admits none.
func TestCheckPeers(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	tests := []struct {
		name         string
		raft, gossip string
		join         string
		expect       int
		clientAuth   bool
		sec          transportSecurity
		errHas       string // "" : starts
		closed       bool   // ClosedMembership set
		loud         bool   // the --insecure-peers error line
	}{
		{name: "loopback plaintext", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", join: "127.0.0.1:7412"},
		{name: "exposed plaintext", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402", errHas: "Raft on 0.0.0.0:7401 needs --cluster-key-file or TLS"},
		{name: "exposed, gossip key only", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402", sec: transportSecurity{gossipKey: key}, errHas: "Raft on 0.0.0.0:7401"},
		{name: "exposed, cluster key only", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402", sec: transportSecurity{clusterKey: key}, errHas: "gossip on 0.0.0.0:7402"},
		{name: "exposed, both keys", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402", sec: transportSecurity{clusterKey: key, gossipKey: key}},
		{name: "exposed, optional cluster key", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402",
			sec: transportSecurity{clusterKey: key, gossipKey: key, cfg: transportConfig{ClusterKeyOptional: true}}, errHas: "Raft on"},
		{name: "exposed, gossip accepts plaintext", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402",
			sec: transportSecurity{clusterKey: key, gossipKey: key, cfg: transportConfig{GossipPlaintextIn: true}}, errHas: "gossip on"},
		{name: "exposed plaintext, opted out", raft: "0.0.0.0:7401", gossip: "0.0.0.0:7402", sec: transportSecurity{cfg: transportConfig{InsecurePeers: true}}, loud: true},
		{name: "client auth, joining plaintext peers", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", join: "127.0.0.1:7412", clientAuth: true, errHas: "--auth-token-file is set"},
		{name: "client auth, bootstrap-expect 3", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", expect: 3, clientAuth: true, errHas: "--auth-token-file is set"},
		{name: "client auth, lone node", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", clientAuth: true, closed: true},
		{name: "client auth, cluster key", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", join: "127.0.0.1:7412", clientAuth: true, sec: transportSecurity{clusterKey: key}},
		{name: "client auth, opted out", raft: "127.0.0.1:7401", gossip: "127.0.0.1:7402", join: "x:1", clientAuth: true, sec: transportSecurity{cfg: transportConfig{InsecurePeers: true}}, loud: true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var logs strings.Builder
			logger := slog.New(slog.NewTextHandler(&logs, nil))
			c := cluster.Config{RaftAddr: tc.raft, GossipAddr: tc.gossip, BootstrapExpect: tc.expect}
			err := tc.sec.checkPeers(&c, tc.join, tc.clientAuth, logger)
			if tc.errHas == "" && err != nil {
				t.Fatalf("refused: %v", err)
			}
			if tc.errHas != "" && (err == nil || !strings.Contains(err.Error(), tc.errHas) || !strings.Contains(err.Error(), "--insecure-peers")) {
				t.Fatalf("checkPeers = %v, want a refusal containing %q and naming --insecure-peers", err, tc.errHas)
			}
			if c.ClosedMembership != tc.closed {
				t.Errorf("ClosedMembership = %v, want %v", c.ClosedMembership, tc.closed)
			}
			if loud := strings.Contains(logs.String(), "level=ERROR") && strings.Contains(logs.String(), "NOT authenticated"); loud != tc.loud {
				t.Errorf("loud --insecure-peers line: %v, want %v\n%s", loud, tc.loud, logs.String())
			}
		})
	}
}

// TestProcCluster_TurnOnPeerAuthentication follows README "Turning on
// node-to-node authentication" on a running plaintext cluster: three rolling
// restarts, after each single restart every node is a live voter of one
// cluster and writes go through.
func TestProcCluster_TurnOnPeerAuthentication(t *testing.T) {
	if testing.Short() {
		t.Skip("cluster test: restarts three node processes nine times")
	}
	bin := crBinary(t)
	keys := t.TempDir()
	var out strings.Builder
	if err := certsCmd(context.Background(), []string{"--out", keys, "--keys-only"}, &out, &out); err != nil {
		t.Fatalf("sessionstore certs --keys-only: %v\n%s", err, out.String())
	}
	withKeys := []string{"--gossip-key-file", filepath.Join(keys, "gossip.key"), "--cluster-key-file", filepath.Join(keys, "cluster.key")}
	nodes := pcNewCluster(t, bin, 3)
	peForm(t, nodes, "plaintext formation")
	peCreate(t, nodes[0], "pe-plain")
	steps := []struct {
		name  string
		extra []string
	}{
		{"1: keys, nothing required", append([]string{"--gossip-verify-incoming=false", "--gossip-verify-outgoing=false", "--cluster-key-optional"}, withKeys...)},
		{"2: gossip sent encrypted", append([]string{"--gossip-verify-incoming=false", "--cluster-key-optional"}, withKeys...)},
		{"3: everything required", withKeys},
	}
	for s, step := range steps {
		for i, nd := range nodes {
			nd.Term()
			nd.Extra = step.extra
			nd.Start()
			nd.WaitReady(nd.C)
			li := pcWaitLeader(t, nodes, []int{0, 1, 2}, fmt.Sprintf("step %s, %s restarted", step.name, nd.ID))
			peCreate(t, nodes[(li+i+1)%3], fmt.Sprintf("pe-step%d-%d", s+1, i))
		}
	}
	for _, nd := range nodes {
		if !peExists(t, nd, "pe-plain") || !peExists(t, nd, "pe-step3-2") {
			t.Fatalf("%s lost sessions during the switch-over", nd.ID)
		}
	}
	// Now a process without the cluster key is refused.
	intruder := crNewNode(t, bin, t.TempDir(), "--node-id", "n4", "--gossip-key-file", filepath.Join(keys, "gossip.key"), "--join", nodes[0].GossipAddr)
	intruder.Start()
	clustertest.Eventually(t, 60*time.Second, func() error {
		if !strings.Contains(nodes[0].Log()+nodes[1].Log()+nodes[2].Log(), "peer_id=n4") {
			return errors.New("no node refused the intruder n4")
		}
		return nil
	})
	intruder.Term()
	peStop(nodes)
}

// TestCertsKeysOnlyAndKeep: what a deployment runs on every start: the keys
// alone (--keys-only), or everything with --keep, which issues only what is
// missing and never replaces a key or certificate.
func TestCertsKeysOnlyAndKeep(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "creds")
	runCerts := func(args ...string) string {
		t.Helper()
		var out, errb strings.Builder
		if code := run(context.Background(), append([]string{"certs", "--out", dir}, args...), &out, &errb); code != 0 {
			t.Fatalf("certs %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	read := func(name string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	runCerts("--keys-only")
	if entries, _ := os.ReadDir(dir); len(entries) != 2 {
		t.Fatalf("--keys-only wrote %d files, want gossip.key and cluster.key", len(entries))
	}
	gk, ck := read("gossip.key"), read("cluster.key")
	if gk == ck {
		t.Fatal("the gossip key and the cluster key are the same")
	}
	if out := runCerts("--keys-only"); !strings.Contains(out, "kept") || read("gossip.key") != gk || read("cluster.key") != ck {
		t.Fatalf("a second --keys-only replaced a key:\n%s", out)
	}
	runCerts("--nodes", "node1,node2", "--keep")
	n1 := read("node1.pem")
	runCerts("--nodes", "node1,node2,node3", "--keep")
	if read("node1.pem") != n1 || read("gossip.key") != gk || read("cluster.key") != ck {
		t.Fatal("--keep replaced an existing file")
	}
	if _, err := tlsconf.LoadNode(filepath.Join(dir, "node3.pem"), filepath.Join(dir, "node3-key.pem"), filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatalf("node3 issued by --keep: %v", err)
	}
}

// TestProcNode_StateOfAnotherClusterRefused is issue 13's item 1 at start: a
// state.db copied from another cluster into a node's data directory is
// refused, naming both cluster ids, with the identity file (this build) and
// without it (a directory of 2f2e872: the Raft log's SetClusterId entry).
func TestProcNode_StateOfAnotherClusterRefused(t *testing.T) {
	bin := crBinary(t)
	for _, withFile := range []bool{true, false} {
		t.Run(fmt.Sprintf("identity file %v", withFile), func(t *testing.T) {
			a := crNewNode(t, bin, t.TempDir(), "--node-id", "n1")
			b := crNewNode(t, bin, t.TempDir(), "--node-id", "n1")
			ids := map[*crNode]string{}
			for _, nd := range []*crNode{a, b} {
				c := crDial(t, nd.GRPCAddr)
				nd.Start()
				nd.WaitReady(c)
				st, err := c.Status(crCtx(t, 10*time.Second))
				if err != nil || st.GetClusterId() == "" {
					t.Fatalf("status: %v, %v", st, err)
				}
				ids[nd] = st.GetClusterId()
				nd.Term()
			}
			state, err := os.ReadFile(filepath.Join(b.Dir, "state.db"))
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(filepath.Join(a.Dir, "state.db"), state, 0o600); err != nil {
				t.Fatal(err)
			}
			if !withFile {
				if err := os.Remove(filepath.Join(a.Dir, "identity.json")); err != nil {
					t.Fatal(err)
				}
			}
			a.Start()
			select {
			case <-a.cur.exited:
			case <-time.After(20 * time.Second):
				t.Fatalf("node started on a state.db of cluster %s beside its own cluster %s's log", ids[b], ids[a])
			}
			a.cur = nil
			if log := a.Log(); !strings.Contains(log, "cluster "+ids[a]) || !strings.Contains(log, "cluster "+ids[b]) || !strings.Contains(log, "refusing to start") {
				t.Fatalf("the refusal does not name both clusters %s and %s:\n%s", ids[a], ids[b], log)
			}
		})
	}
}
