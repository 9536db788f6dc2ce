package cluster_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// The cluster's own tests: real nodes in one process, Raft over the
// in-memory network of clustertest (partitions without root).

const testCwd = "/w/cluster"

func mark(seq int64, m string) []byte {
	return fmt.Appendf(nil, `{"type":"x-test/mark","seq":%d,"time":%d,"data":{"m":%q},"ignorable":true}`, seq, 1000+seq, m)
}

func create(t *testing.T, nd *clustertest.Node, id string) {
	t.Helper()
	cwd := testCwd
	if _, err := nd.Sessions().Create(context.Background(), sessionstore.Header{ID: id, CreatedAt: 1, Cwd: &cwd}, "", sessionstore.ValidateStrict); err != nil {
		t.Fatalf("create %s on %s: %v", id, nd.ID, err)
	}
}

func appendMarks(t *testing.T, nd *clustertest.Node, id string, from, n int64) {
	t.Helper()
	for k := from; k < from+n; k++ {
		if _, err := nd.Sessions().Append(context.Background(), id, [][]byte{mark(k, id)}, 0, "", sessionstore.ValidateStrict); err != nil {
			t.Fatalf("append %s/%d on %s: %v", id, k, nd.ID, err)
		}
	}
}

// converged reports (as an error, for Eventually) whether every running node
// holds exactly next[id] events of each session, the same events, and a whole
// artifact of the same text.
func converged(c *clustertest.Cluster, next map[string]int64) error {
	var ref map[string]string
	for _, nd := range c.Running() {
		got := map[string]string{}
		for id, want := range next {
			var s sessionstore.Suffix
			err := nd.Sessions().ReadFrom(context.Background(), id, 0, sessionstore.Stale, func(x sessionstore.Suffix) error {
				s.Events = append(s.Events, x.Events...)
				return nil
			})
			if err != nil || int64(len(s.Events)) != want {
				return fmt.Errorf("%s holds %d events of %s (%v), want %d", nd.ID, len(s.Events), id, err, want)
			}
			b, err := os.ReadFile(filepath.Join(nd.Dir, "artifacts", "--w-cluster--", id, storage.ArtifactName))
			if err != nil {
				return fmt.Errorf("%s: artifact of %s: %v", nd.ID, id, err)
			}
			text, err := storage.ArtifactText(b)
			if err != nil {
				return fmt.Errorf("%s: artifact of %s is being written: %v", nd.ID, id, err)
			}
			got[id] = fmt.Sprintf("%q|%s", s.Events, text)
		}
		if ref == nil {
			ref = got
		} else if !maps(ref, got) {
			return fmt.Errorf("%s differs from the first node", nd.ID)
		}
	}
	return nil
}

func maps(a, b map[string]string) bool {
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return len(a) == len(b)
}

// smallSnapshots makes nodes snapshot and compact their log after a few
// hundred entries, so catch-up by snapshot install is quick to reach.
func smallSnapshots(c *cluster.Config) {
	c.SnapshotThreshold = 200
	c.SnapshotInterval = 200 * time.Millisecond
	c.TrailingLogs = 50
}

// A follower refuses a write with the leader's address (the API forwards
// there); losing the leader costs an election, after which the survivors take
// writes; the old leader, restarted, catches up.
func TestLeaderLossAndNotLeader(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, 3, nil)
	leader := c.Leader()
	create(t, leader, "s")
	appendMarks(t, leader, "s", 0, 3)

	f := c.Followers(leader)[0]
	_, err := f.Sessions().Append(context.Background(), "s", [][]byte{mark(3, "s")}, 0, "", sessionstore.ValidateStrict)
	var nl *sessionstore.NotLeaderError
	if !errors.As(err, &nl) || nl.LeaderID != leader.ID || nl.LeaderAPI != leader.API {
		t.Fatalf("append on follower %s: %v, want not-leader naming %s at %s", f.ID, err, leader.ID, leader.API)
	}

	leader.Stop()
	next := c.Leader()
	if next == leader {
		t.Fatal("the stopped node still leads")
	}
	appendMarks(t, next, "s", 3, 2)
	leader.Start()
	c.WaitVoters(3)
	clustertest.Eventually(t, 30*time.Second, func() error { return converged(c, map[string]int64{"s": 5}) })
}

// A leader cut off from both followers acknowledges nothing: its write ends
// in an error, never a success, while the majority elects a leader that takes
// writes. Healed, the old leader follows and holds exactly what the majority
// acknowledged: its own write, never committed, is gone.
func TestIsolatedLeaderAcknowledgesNothing(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, 3, nil)
	old := c.Leader()
	create(t, old, "p")
	appendMarks(t, old, "p", 0, 1)
	others := c.Followers(old)
	c.Net.Partition(
		[]raft.ServerAddress{old.Addr},
		[]raft.ServerAddress{others[0].Addr, others[1].Addr})

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_, err := old.Sessions().Append(ctx, "p", [][]byte{mark(1, "isolated")}, 0, "", sessionstore.ValidateStrict)
	cancel()
	if err == nil {
		t.Fatal("the isolated leader acknowledged a write")
	}
	var maj *clustertest.Node
	clustertest.Eventually(t, 30*time.Second, func() error {
		for _, nd := range others {
			if nd.ReadyForReads() {
				maj = nd
				return nil
			}
		}
		return errors.New("the majority has no ready leader")
	})
	// The isolated write may still be in the old leader's log; the majority's
	// next seq tells, and the majority writes from there.
	var have int64
	if err := maj.Sessions().ReadFrom(context.Background(), "p", 0, sessionstore.Linearizable, func(s sessionstore.Suffix) error {
		have = s.NextSeq
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if have != 1 {
		t.Fatalf("the majority holds %d events, want 1 (the isolated write cannot have committed)", have)
	}
	appendMarks(t, maj, "p", 1, 2)
	c.Net.Heal()
	clustertest.Eventually(t, 30*time.Second, func() error { return converged(c, map[string]int64{"p": 3}) })
}

// A node that missed more than a snapshot's worth of entries (the log was
// compacted past them) catches up by snapshot install: a follower that was
// down, and a fourth, empty node that joins and is made a voter.
func TestCatchUpBySnapshot(t *testing.T) {
	for _, joins := range []bool{false, true} {
		t.Run(map[bool]string{false: "lagging follower", true: "new node"}[joins], func(t *testing.T) {
			t.Parallel()
			c := clustertest.Start(t, 3, smallSnapshots)
			leader := c.Leader()
			var behind *clustertest.Node
			if !joins {
				behind = c.Followers(leader)[0]
				behind.Stop()
			}
			next := map[string]int64{}
			for s := range 10 {
				id := fmt.Sprintf("snap-%d", s)
				create(t, leader, id)
				appendMarks(t, leader, id, 0, 40)
				next[id] = 40
			}
			if err := leader.Snapshot(); err != nil {
				t.Fatalf("snapshot: %v", err)
			}
			if first, err := leader.FirstLogIndex(); err != nil || first < 100 {
				t.Fatalf("the leader's log should be compacted past the missed entries (first index %d, %v)", first, err)
			}
			if joins {
				behind = c.Add()
				c.WaitVoters(4)
			} else {
				behind.Start()
			}
			clustertest.Eventually(t, 30*time.Second, func() error { return converged(c, next) })
			if behind.SnapshotRestores() == 0 {
				t.Errorf("%s caught up without installing a snapshot", behind.ID)
			}
		})
	}
}

// Leave on a follower asks the leader to remove it; the leader does not add
// it back from gossip, and the two remaining voters take writes.
func TestLeaveRemovesTheNode(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, 3, nil)
	leader := c.Leader()
	leaving := c.Followers(leader)[0]
	if err := leaving.Leave(context.Background()); err != nil {
		t.Fatalf("leave: %v", err)
	}
	members := func() []string {
		ms, _ := leader.Members(context.Background())
		var ids []string
		for _, m := range ms {
			ids = append(ids, m.NodeID)
		}
		return ids
	}
	clustertest.Eventually(t, 20*time.Second, func() error {
		if got := members(); len(got) != 2 || slices.Contains(got, leaving.ID) {
			return fmt.Errorf("members after leave: %v", got)
		}
		return nil
	})
	// Several reconcile rounds later it is still out.
	time.Sleep(3 * time.Second)
	if got := members(); len(got) != 2 {
		t.Fatalf("the node that left was added back: %v", got)
	}
	create(t, leader, "after-leave")
	appendMarks(t, leader, "after-leave", 0, 1)
}

// Members reports what each member gossips about itself (the serving node's
// own values live), seen from the leader and from a follower.
func TestMembersGossipTheirState(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, 3, nil)
	leader := c.Leader()
	create(t, leader, "m")
	appendMarks(t, leader, "m", 0, 1)
	for _, nd := range []*clustertest.Node{leader, c.Followers(leader)[0]} {
		clustertest.Eventually(t, 20*time.Second, func() error {
			ms, err := nd.Members(context.Background())
			if err != nil || len(ms) != 3 {
				return fmt.Errorf("members from %s: %d, %v", nd.ID, len(ms), err)
			}
			for _, m := range ms {
				if m.AppliedIndex == nil || *m.AppliedIndex == 0 || m.LastContactMs == nil || m.DiskFreeBytes == nil || *m.DiskFreeBytes <= 0 ||
					m.DiskLow == nil || *m.DiskLow || m.CommandVersion == nil || *m.CommandVersion != fsm.CommandVersion {
					return fmt.Errorf("from %s: member %s: %s", nd.ID, m.NodeID, memberValues(m))
				}
				if m.NodeID == leader.ID && *m.LastContactMs != 0 {
					return fmt.Errorf("from %s: the leader %s last heard from a leader %d ms ago, want 0", nd.ID, m.NodeID, *m.LastContactMs)
				}
			}
			return nil
		})
	}
}

func memberValues(m sessionstore.Member) string {
	return fmt.Sprintf("applied %s, last contact %s ms, free %s, low %s, command version %s",
		known(m.AppliedIndex), known(m.LastContactMs), known(m.DiskFreeBytes), known(m.DiskLow), known(m.CommandVersion))
}

func known[T any](p *T) string {
	if p == nil {
		return "unknown"
	}
	return fmt.Sprint(*p)
}

// A listing selects by id prefix and cwd prefix together, in id order or by
// last append (newest first), a page at a time; each row says its event
// count, last append, whether a lease is held and its title, on every node.
// A page token is refused by a listing in the other order.
func TestListOrdersAndPrefixes(t *testing.T) {
	t.Parallel()
	c := clustertest.Start(t, 3, nil)
	leader := c.Leader()
	ss := leader.Sessions()
	for _, id := range []string{"l-a", "l-b", "l-c", "m-a", "l-lazy"} {
		create(t, leader, id)
	}
	other := "/w/other"
	if _, err := ss.Create(context.Background(), sessionstore.Header{ID: "l-other", CreatedAt: 1, Cwd: &other}, "", sessionstore.ValidateStrict); err != nil {
		t.Fatal(err)
	}
	// Appends a few ms apart, so that the leader's times tell them apart.
	for i, id := range []string{"l-other", "l-b", "m-a", "l-a", "l-c"} {
		time.Sleep(5 * time.Millisecond)
		appendMarks(t, leader, id, 0, int64(i+1))
		if id == "l-other" { // two titles: the last one is kept
			titles := [][]byte{
				fmt.Appendf(nil, `{"type":"session/title","seq":1,"time":1,"data":{"title":"first"}}`),
				fmt.Appendf(nil, `{"type":"session/title","seq":2,"time":1,"data":{"title":"<b>second</b> \u00e9"}}`),
			}
			if _, err := ss.Append(context.Background(), id, titles, 0, "", sessionstore.ValidateStrict); err != nil {
				t.Fatal(err)
			}
		}
	}
	// Titles are kept from state format 5 on: every node converts once all
	// three run this build. A follower's own (stale) listing shows them
	// once it has applied the appends.
	clustertest.Eventually(t, 10*time.Second, func() error {
		for _, nd := range c.Running() {
			if l := nd.State().Layout(); l != storage.StateFormatVersion {
				return fmt.Errorf("%s: state format %d", nd.ID, l)
			}
			page, _, err := nd.Sessions().List(context.Background(), sessionstore.ListQuery{Consistency: sessionstore.Stale, IDPrefix: "l-"})
			if err != nil {
				return err
			}
			for _, s := range page {
				if want := map[string]string{"l-other": "<b>second</b> é"}[s.Header.ID]; s.Title != want {
					return fmt.Errorf("%s: title of %s %q, want %q", nd.ID, s.Header.ID, s.Title, want)
				}
			}
		}
		return nil
	})
	if err := ss.PrepareStream(context.Background(), "l-c", "owner", time.Hour, "", sessionstore.ViewLimit{}, func(sessionstore.View) error { return nil }); err != nil {
		t.Fatal(err)
	}
	list := func(q sessionstore.ListQuery) ([]string, error) {
		var ids []string
		for {
			page, next, err := ss.List(context.Background(), q)
			if err != nil {
				return ids, err
			}
			for _, s := range page {
				ids = append(ids, s.Header.ID)
			}
			if next == "" {
				return ids, nil
			}
			q.PageToken = next
		}
	}
	byLast := sessionstore.ListByLastAppend
	for _, tc := range []struct {
		q    sessionstore.ListQuery
		want []string
	}{
		{sessionstore.ListQuery{}, []string{"l-a", "l-b", "l-c", "l-other", "m-a"}},
		{sessionstore.ListQuery{PageSize: 1, IDPrefix: "l-"}, []string{"l-a", "l-b", "l-c", "l-other"}},
		{sessionstore.ListQuery{PageSize: 2, IDPrefix: "l-", CwdPrefix: testCwd}, []string{"l-a", "l-b", "l-c"}},
		{sessionstore.ListQuery{PageSize: 2, IDPrefix: "l-b", CwdPrefix: testCwd}, []string{"l-b"}},
		{sessionstore.ListQuery{Order: byLast}, []string{"l-c", "l-a", "m-a", "l-b", "l-other"}},
		{sessionstore.ListQuery{Order: byLast, PageSize: 2, IDPrefix: "l-"}, []string{"l-c", "l-a", "l-b", "l-other"}},
		{sessionstore.ListQuery{Order: byLast, PageSize: 1, IDPrefix: "l-", CwdPrefix: testCwd}, []string{"l-c", "l-a", "l-b"}},
		{sessionstore.ListQuery{Order: byLast, IDPrefix: "n"}, nil},
	} {
		if got, err := list(tc.q); err != nil || !slices.Equal(got, tc.want) {
			t.Errorf("list %+v: %q, %v; want %q", tc.q, got, err, tc.want)
		}
	}

	page, _, err := ss.List(context.Background(), sessionstore.ListQuery{Order: byLast, PageSize: 2})
	if err != nil || len(page) != 2 {
		t.Fatalf("first page by last append: %v, %v", page, err)
	}
	if s := page[0]; s.Header.ID != "l-c" || s.NextSeq != 5 || !s.LeaseHeld || s.Revision == "" {
		t.Errorf("row of l-c: %+v, want 5 events under a lease", s)
	}
	if s := page[1]; s.Header.ID != "l-a" || s.NextSeq != 4 || s.LeaseHeld || s.LastAppendUnixMs >= page[0].LastAppendUnixMs || s.LastAppendUnixMs <= 0 {
		t.Errorf("row of l-a: %+v, want 4 events, no lease, appended before l-c (%d)", s, page[0].LastAppendUnixMs)
	}
	_, next, _ := ss.List(context.Background(), sessionstore.ListQuery{Order: byLast, PageSize: 1})
	for _, tok := range []string{next, next[:len(next)-1] + "!"} {
		if _, _, err := ss.List(context.Background(), sessionstore.ListQuery{PageToken: tok}); !errors.Is(err, sessionstore.ErrInvalidArgument) {
			t.Errorf("id-order list with page token %q: %v, want INVALID_ARGUMENT", tok, err)
		}
	}
	if _, _, err := ss.List(context.Background(), sessionstore.ListQuery{Order: byLast, PageToken: "l-a"}); !errors.Is(err, sessionstore.ErrInvalidArgument) {
		t.Errorf("last-append list with an older build's token: %v, want INVALID_ARGUMENT", err)
	}
	// An older build's token (the escaped id of the last row) pages on in id order.
	if page, _, err := ss.List(context.Background(), sessionstore.ListQuery{PageToken: "l-a", PageSize: 1}); err != nil || len(page) != 1 || page[0].Header.ID <= "l-a" {
		t.Errorf("id-order list after an older build's token \"l-a\": %+v, %v", page, err)
	}
}
