package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// startMixedCluster boots a 3-node cluster whose n3 applies commands up to
// version (as a build of that version would; its FSM panics on anything
// newer). It skips under -short.
func startMixedCluster(t *testing.T, version uint32) []*clNode {
	t.Helper()
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	return startClusterWith(t, 3, func(c *serveConfig) {
		if c.Cluster.NodeID == "n3" {
			c.Cluster.CommandVersion = version
		}
	})
}

// upgradeNode restarts nd on this build's command version.
func upgradeNode(nd *clNode) {
	old := nd.tune
	nd.tune = func(c *serveConfig) { old(c); c.Cluster.CommandVersion = 0 }
	nd.testNode = nd.Restart()
}

// upEveryNodeAt waits until every node's own state (STALE) lists session id
// (under cwd prefix) at revision.
func upEveryNodeAt(ctx context.Context, t *testing.T, nodes []*clNode, phase, prefix, id, revision string) {
	t.Helper()
	for _, nd := range nodes {
		nc := nd.Client
		dlEventually(t, phase+": "+nd.id+" holds "+id+" at revision "+revision, func() bool {
			l, err := nc.ListSnapshots(ctx, &sessionpb.ListSnapshotsRequest{Consistency: sessionpb.Consistency_STALE, CwdPrefix: prefix})
			if err != nil {
				return false
			}
			for _, s := range l.GetSnapshots() {
				if s.GetHeader().GetId() == id {
					return s.GetRevision() == revision
				}
			}
			return false
		})
	}
}

// A rolling upgrade: one voter still runs the previous release's command
// version (2: plan mode, no quotas, no Delete; its FSM panics on anything
// newer, as that build would). Nothing breaks: creates, appends and plan-mode
// calls go on and every node applies them; Delete and the quota stamps are
// held back. Once the node restarts on this build's version, Delete works
// and reaches it too.
func TestUpgrade_NewCommandsWaitForEveryVoter(t *testing.T) {
	nodes := startMixedCluster(t, 2)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := nodes[0].Client
	for _, id := range []string{"up/a", "up/b"} {
		if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w/up")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.PlanSet(ctx, &sessionpb.PlanSetRequest{SessionId: "up/a", Active: true}); err != nil {
		t.Fatalf("plan mode (version 2) on a mixed cluster: %v", err)
	}
	_, err := c.WithOptions(client.Options{MaxAttempts: 1}).Delete(ctx, &sessionpb.DeleteRequest{SessionId: "up/b"})
	if auReason(err) != sessionstore.ReasonFormatUnsupported {
		t.Fatalf("delete while n3 runs version 2: %v", err)
	}
	// Everything reached the old node, nothing it cannot apply did.
	for _, nd := range nodes {
		nc := nd.Client
		dlEventually(t, nd.id+" holds both sessions", func() bool {
			l, err := nc.List(ctx, &sessionpb.ListRequest{Consistency: sessionpb.Consistency_STALE})
			return err == nil && len(l.Headers) == 2
		})
	}

	// n3 is upgraded: a restart on this build's version.
	upgradeNode(nodes[2])
	dlEventually(t, "delete accepted once n3 advertises version 4", func() bool {
		_, err := c.WithOptions(client.Options{MaxAttempts: 1}).Delete(ctx, &sessionpb.DeleteRequest{SessionId: "up/b", RequestId: "del-up-b"})
		return err == nil
	})
	for _, nd := range nodes {
		nc := nd.Client
		dlEventually(t, nd.id+" applies the delete", func() bool {
			l, err := nc.List(ctx, &sessionpb.ListRequest{Consistency: sessionpb.Consistency_STALE})
			return err == nil && len(l.Headers) == 1 && l.Headers[0].Id == "up/a"
		})
	}
}

// Strict appends (command version 7) on a cluster with a voter of version 6:
// the leader checks them against its own log before proposing and proposes
// version-6 appends, so the old voter applies everything; once it runs this
// version, the same refusals come from Apply.
func TestUpgrade_StrictAppendsOnAMixedCluster(t *testing.T) {
	nodes := startMixedCluster(t, 6)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := nodes[0].Client
	unknown := ctEv("future/event", 6, 99, `{"payload":1}`)
	check := func(phase, id string) {
		t.Helper()
		if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w/up")}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()}); err != nil {
			t.Fatalf("%s: strict append of a readable turn: %v", phase, err)
		}
		_, err := c.WithOptions(client.Options{MaxAttempts: 1}).Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{unknown}})
		if auReason(err) != sessionstore.ReasonFormatUnsupported {
			t.Fatalf("%s: strict append of an unknown type: %v, want FORMAT_UNSUPPORTED", phase, err)
		}
		r, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{unknown}, Validation: sessionpb.Validation_VALIDATION_REFERENCE})
		if err != nil || r.GetReadable() || r.GetUnreadableReason() != string(sessionstore.ReasonFormatUnsupported) || r.GetNextSeq() != 7 {
			t.Fatalf("%s: reference append of an unknown type: %v %v", phase, r, err)
		}
		// Every node applied all of it (the old one panics on an entry it
		// cannot apply) and stands at the same revision.
		upEveryNodeAt(ctx, t, nodes, phase, "/w/up", id, r.GetRevision())
	}
	check("mixed", "strict/a")

	upgradeNode(nodes[2])
	check("upgraded", "strict/b")
}

// Packed entries (command version 8) on a cluster with a voter of version 7:
// the leader proposes entries as they are until that voter runs this
// version, then compressed; every node applies every entry (the old one
// panics on one it cannot apply) and holds the same revision.
func TestUpgrade_PackedEntriesWaitForEveryVoter(t *testing.T) {
	nodes := startMixedCluster(t, 7)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := nodes[0].Client
	text := strings.Repeat("the agent ran the tests again and they passed; ", 40)
	seqs := map[string]int64{}
	appendOne := func(id string) *sessionpb.AppendResponse {
		t.Helper()
		if _, ok := seqs[id]; !ok {
			if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w/pack")}); err != nil {
				t.Fatal(err)
			}
		}
		r, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{clEvent(seqs[id], text)}})
		if err != nil {
			t.Fatalf("append to %s: %v", id, err)
		}
		seqs[id]++
		return r
	}
	everyNodeAt := func(phase, id, revision string) {
		t.Helper()
		upEveryNodeAt(ctx, t, nodes, phase, "/w/pack", id, revision)
	}
	// entryBytes reads the leader's count of proposed entry bytes, as encoded
	// and as proposed.
	entryBytes := func() (encoded, proposed float64) {
		t.Helper()
		var l *clNode
		dlEventually(t, "a leader", func() bool { l = leaderOf(nodes); return l != nil })
		return dfMetric(t, l.srv.httpAddr, "sessionstore_cluster_entry_bytes_total", "form", "encoded"),
			dfMetric(t, l.srv.httpAddr, "sessionstore_cluster_entry_bytes_total", "form", "proposed")
	}

	var r *sessionpb.AppendResponse
	for range 5 {
		r = appendOne("pack/a")
	}
	everyNodeAt("mixed", "pack/a", r.GetRevision())
	if enc, prop := entryBytes(); enc == 0 || prop != enc {
		t.Fatalf("while n3 runs version 7 the leader proposed %v bytes of %v encoded, want them unpacked", prop, enc)
	}

	upgradeNode(nodes[2])
	dlEventually(t, "entries packed once n3 advertises version 8", func() bool {
		r = appendOne("pack/b")
		enc, prop := entryBytes()
		return prop < enc*0.9
	})
	r = appendOne("pack/b")
	everyNodeAt("upgraded", "pack/b", r.GetRevision())
}
