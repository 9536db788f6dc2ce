package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
)

// dlArtifact is where node nd keeps the artifact of a session with header h.
func dlArtifact(t *testing.T, nd *clNode, h *sessionpb.SessionHeader) string {
	t.Helper()
	p, err := storage.ArtifactPath(nd.srv.node.Artifacts().Root(), h.Domain())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// dlEventually polls cond until it holds (30 s).
func dlEventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	clustertest.Eventually(t, 30*time.Second, func() error {
		if cond() {
			return nil
		}
		return fmt.Errorf("%s: not yet", what)
	})
}

// Delete through a follower: the session is gone from every read, list,
// export and artifact on all three nodes; a stale expected revision is
// refused; the id can be created again as a new incarnation.
func TestDeleteCluster_GoneEverywhere(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	nodes := startCluster(t, 3)
	_, follower := followerOf(t, nodes)
	c := follower.Client
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	doomed, kept := ctMeta("doomed/ü\u20281", "/w/del"), ctMeta("kept", "/w/del")
	for _, h := range []*sessionpb.SessionHeader{doomed, kept} {
		if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: h}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: h.Id, Events: ctOneTurnLog()}); err != nil {
			t.Fatal(err)
		}
	}
	raw, err := c.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: doomed.Id})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		nd.WaitArtifacts()
		dlEventually(t, nd.id+" writes the artifact", func() bool {
			_, err := os.Stat(dlArtifact(t, nd, doomed))
			return err == nil
		})
	}

	// A stale revision is refused and deletes nothing.
	if _, err := c.Delete(ctx, &sessionpb.DeleteRequest{SessionId: doomed.Id, ExpectedRevision: raw.Revision + "0"}); auReason(err) != sessionstore.ReasonRevisionMismatch {
		t.Fatalf("delete with a stale revision: %v", err)
	}
	rev, err := c.Delete(ctx, &sessionpb.DeleteRequest{SessionId: doomed.Id, ExpectedRevision: raw.Revision})
	if err != nil || rev != raw.Revision {
		t.Fatalf("delete: %q %v", rev, err)
	}
	if _, err := c.Delete(ctx, &sessionpb.DeleteRequest{SessionId: doomed.Id}); auReason(err) != sessionstore.ReasonNotFound {
		t.Fatalf("second delete: %v", err)
	}

	for _, nd := range nodes {
		nc := nd.Client
		dlEventually(t, nd.id+" applies the delete", func() bool {
			_, err := nc.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: doomed.Id, Consistency: sessionpb.Consistency_STALE})
			return auReason(err) == sessionstore.ReasonNotFound
		})
		for name, call := range map[string]func() error{
			"Inspect": func() error { _, err := nc.Inspect(ctx, &sessionpb.InspectRequest{SessionId: doomed.Id}); return err },
			"Load":    func() error { _, err := nc.Load(ctx, &sessionpb.LoadRequest{SessionId: doomed.Id}); return err },
			"ReadRaw": func() error { _, err := nc.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: doomed.Id}); return err },
			"Append": func() error {
				_, err := nc.Append(ctx, &sessionpb.AppendRequest{SessionId: doomed.Id, Events: ctOneTurnLog()[:1]})
				return err
			},
		} {
			if err := call(); auReason(err) != sessionstore.ReasonNotFound {
				t.Errorf("%s: %s after the delete: %v", nd.id, name, err)
			}
		}
		for _, cons := range []sessionpb.Consistency{sessionpb.Consistency_LINEARIZABLE, sessionpb.Consistency_STALE} {
			l, err := nc.List(ctx, &sessionpb.ListRequest{Consistency: cons})
			if err != nil || len(l.Headers) != 1 || l.Headers[0].Id != "kept" {
				t.Errorf("%s: list (%v) after the delete: %v %v", nd.id, cons, l, err)
			}
		}
		nd.WaitArtifacts()
		path := dlArtifact(t, nd, doomed)
		dlEventually(t, nd.id+" removes the artifact", func() bool {
			_, err := os.Stat(path)
			return os.IsNotExist(err)
		})
		if _, err := os.Stat(dlArtifact(t, nd, kept)); err != nil {
			t.Errorf("%s: the other session's artifact: %v", nd.id, err)
		}
	}
	res, _ := eiExport(t, follower.testNode, nil, "--out", filepath.Join(t.TempDir(), "export"))
	if res.Sessions != 1 {
		t.Errorf("export after the delete holds %d sessions, want 1", res.Sessions)
	}

	// A new incarnation: its own revisions, its own artifact.
	if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: doomed}); err != nil {
		t.Fatalf("create again: %v", err)
	}
	ar, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: doomed.Id, Events: ctOneTurnLog()[:2]})
	if err != nil {
		t.Fatal(err)
	}
	if ar.Revision == raw.Revision || ar.NextSeq != 2 {
		t.Fatalf("new incarnation: revision %s (old %s), next seq %d", ar.Revision, raw.Revision, ar.NextSeq)
	}
	again, err := c.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: doomed.Id})
	if err != nil {
		t.Fatal(err)
	}
	for _, nd := range nodes {
		nd.WaitArtifacts()
		path := dlArtifact(t, nd, doomed)
		dlEventually(t, nd.id+" writes the new incarnation's artifact", func() bool {
			data, err := os.ReadFile(path)
			if err != nil {
				return false
			}
			d, err := storage.DecodeArtifact(data)
			return err == nil && string(d.Text) == string(again.Content)
		})
	}
}

// A registration that never gets an event expires (leader time); one that
// got events stays.
func TestDelete_RegistrationsExpire(t *testing.T) {
	t.Parallel()
	n := startTestNodeWith(t, "", func(c *serveConfig) {
		c.Cluster.RegistrationTTL = time.Second
		c.Cluster.ExpirySweep = 100 * time.Millisecond
	})
	n.waitReady(true)
	ctx := n.ctx()
	for _, id := range []string{"idle", "busy"} {
		if _, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := n.Client.Append(ctx, &sessionpb.AppendRequest{SessionId: "busy", Events: ctOneTurnLog()}); err != nil {
		t.Fatal(err)
	}
	// While registered, another header for the id is refused; once the
	// registration expired it is a new session.
	other := ctMeta("idle", "/elsewhere")
	dlEventually(t, "the idle registration expires", func() bool {
		_, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: other})
		return err == nil
	})
	if _, err := n.Client.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "busy"}); err != nil {
		t.Fatalf("the materialised session: %v", err)
	}
}

// Retention: `sessionstore retention` lists what the policies expire, and --apply
// deletes exactly those (leader time; the longest matching prefix decides).
func TestRetention_DryRunThenApply(t *testing.T) {
	t.Parallel()
	policies, err := cluster.ParseRetention("*=1000h,/tmp/=1s")
	if err != nil {
		t.Fatal(err)
	}
	n := startTestNodeWith(t, "", func(c *serveConfig) { c.Cluster.Retention = policies })
	n.waitReady(true)
	ctx := n.ctx()
	for _, h := range []*sessionpb.SessionHeader{ctMeta("scratch", "/tmp/x"), ctMeta("project", "/w/p"), ctMeta("no-cwd", "")} {
		if h.Id == "no-cwd" {
			h.Cwd = nil
		}
		if _, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: h}); err != nil {
			t.Fatal(err)
		}
		if _, err := n.Client.Append(ctx, &sessionpb.AppendRequest{SessionId: h.Id, Events: ctOneTurnLog()}); err != nil {
			t.Fatal(err)
		}
	}
	cli := func(args ...string) string {
		var out, errb bytes.Buffer
		if code := run(ctx, append([]string{"retention", "--addr", n.srv.grpcAddr}, args...), &out, &errb); code != 0 {
			t.Fatalf("sessionstore retention %v: exit %d: %s", args, code, errb.String())
		}
		return out.String()
	}
	dlEventually(t, "the /tmp/ session expires", func() bool {
		return cli() == "\"scratch\"\n1 sessions expired (dry run; --apply deletes them)\n"
	})
	if got := cli("--apply"); got != "\"scratch\"\n1 sessions deleted\n" {
		t.Fatalf("apply: %q", got)
	}
	l, err := n.Client.List(ctx, &sessionpb.ListRequest{})
	if err != nil || len(l.Headers) != 2 {
		t.Fatalf("after the sweep: %v %v", l, err)
	}
	if got := cli(); got != "0 sessions expired (dry run; --apply deletes them)\n" {
		t.Fatalf("dry run after the sweep: %q", got)
	}
}
