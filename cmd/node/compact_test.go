package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// `sessionstore compact` refuses a running node's data directory; on a stopped node it
// rewrites state.db and raft/raft.db, and the node starts on them with every
// event and artifact as before.
func TestCompactCmd_OfflineOnly(t *testing.T) {
	n := startTestNode(t, "")
	ctx := n.ctx()
	want, raw := clWriteSessions(t, ctx, n.Client, "cp-", "", 5, 20, func(_ string, k int64) string {
		return clEvent(k, strings.Repeat("x", 500))
	})
	code, _, stderr := rcRun(t, "compact", "--data-dir", n.dir)
	if code != 1 || !strings.Contains(stderr, "stop the node first") {
		t.Fatalf("compact of a running node: exit %d, stderr %q", code, stderr)
	}
	n.Close()
	code, out, _ := rcRun(t, "compact", "--data-dir", n.dir)
	if code != 0 || !strings.Contains(out, "state.db") || !strings.Contains(out, "raft.db") {
		t.Fatalf("compact: exit %d, stdout %q", code, out)
	}
	back := n.Restart()
	for id, evs := range want {
		r, err := back.Client.ReadFrom(back.ctx(), &pb.ReadFromRequest{SessionId: id})
		if err != nil || strings.Join(r.Events, "\n") != strings.Join(evs, "\n") {
			t.Fatalf("session %s after compaction: %d events, %v", id, len(r.GetEvents()), err)
		}
		rr, err := back.Client.ReadRaw(back.ctx(), &pb.ReadRawRequest{SessionId: id})
		if err != nil || string(rr.Content) != string(raw[id]) {
			t.Fatalf("raw %s after compaction differs: %v", id, err)
		}
	}
	if _, err := back.Client.Append(back.ctx(), &pb.AppendRequest{SessionId: "cp-0", Events: []string{clEvent(20, "after")}}); err != nil {
		t.Fatalf("append after compaction: %v", err)
	}
}

// After deletes, `sessionstore compact` gives the space back: the state database
// shrinks and what was kept is intact.
func TestCompactCmd_ShrinksAfterDeletes(t *testing.T) {
	n := startTestNode(t, "")
	ctx := n.ctx()
	big := strings.Repeat("y", 64<<10)
	for i := 0; i < 40; i++ {
		id := fmt.Sprintf("del-%02d", i)
		if _, err := n.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1}}); err != nil {
			t.Fatal(err)
		}
		var evs []string
		for k := int64(0); k < 8; k++ {
			evs = append(evs, clEvent(k, big))
		}
		if _, err := n.Client.Append(ctx, &pb.AppendRequest{SessionId: id, Events: evs}); err != nil {
			t.Fatal(err)
		}
	}
	for i := 1; i < 40; i++ {
		if _, err := n.Client.Delete(ctx, &pb.DeleteRequest{SessionId: fmt.Sprintf("del-%02d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	kept, err := n.Client.ReadRaw(ctx, &pb.ReadRawRequest{SessionId: "del-00"})
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	state := filepath.Join(n.dir, "state.db")
	before := cpSize(t, state)
	if code, out, errOut := rcRun(t, "compact", "--data-dir", n.dir); code != 0 {
		t.Fatalf("compact: exit %d\n%s\n%s", code, out, errOut)
	}
	after := cpSize(t, state)
	t.Logf("state.db after deleting 39 of 40 sessions of 512 KiB: %d bytes before compaction, %d after", before, after)
	if after >= before/2 {
		t.Fatalf("state.db did not shrink: %d → %d bytes", before, after)
	}
	back := n.Restart()
	r, err := back.Client.ReadRaw(back.ctx(), &pb.ReadRawRequest{SessionId: "del-00"})
	if err != nil || string(r.Content) != string(kept.Content) {
		t.Fatalf("the kept session after compaction: %v", err)
	}
}

func cpSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}
