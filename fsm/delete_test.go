package fsm

import (
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func deleteCmd(id, expected, requestID string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_Delete{Delete: &fsmpb.Delete{SessionId: id, ExpectedRevision: expected, RequestId: requestID}}}
}

func TestApplyDelete(t *testing.T) {
	f, db := newTestFSM(t)
	var frames []Frame
	f.observer = func(ap Applied) { frames = append(frames, ap.Frames...) }
	rs := results(t, f.ApplyBatch([]*raft.Log{
		entry(t, 1, 1000, withLimits(createCmd("s"), "alice", &fsmpb.Limits{})),
		entry(t, 2, 1000, appendCmd("s", 0, openTurn...)),
		entry(t, 3, 1000, deleteCmd("s", "stale:1:1", "")),
	}))
	if rs[2].Reason != "REVISION_MISMATCH" {
		t.Fatalf("stale expected revision: %q", rs[2].Reason)
	}
	rev := rs[1].Revision
	steps := []struct {
		cmd    *fsmpb.Command
		reason string
	}{
		{deleteCmd("s", rev, "del-1"), ""},
		{deleteCmd("s", rev, "del-1"), ""},         // a retry: the first answer again
		{deleteCmd("s", "", "del-2"), "NOT_FOUND"}, // another delete: gone
		{appendCmd("s", 2, ev3()), "NOT_FOUND"},    // gone for writes too
		{createCmd("s"), ""},                       // a new incarnation
		{appendCmd("s", 0, openTurn[0]), ""},
	}
	for i, st := range steps {
		r := results(t, f.ApplyBatch([]*raft.Log{entry(t, uint64(4+i), 2000, st.cmd)}))[0]
		if r.Reason != st.reason {
			t.Fatalf("step %d: %q %s, want %q", i, r.Reason, r.Message, st.reason)
		}
		if i <= 1 && r.Revision != rev {
			t.Fatalf("step %d: delete answered revision %q, want %q", i, r.Revision, rev)
		}
	}
	_ = db.View(func(tx *storage.Tx) error {
		rec, _ := ReadRecord(tx, "s")
		if evs, err := tx.Events("s", rec.Incarnation, 0, rec.NextSeq); rec.Incarnation != 8 || rec.NextSeq != 1 || err != nil || len(evs) != 1 {
			t.Fatalf("new incarnation: %+v", rec)
		}
		if tx.PrincipalSessions("alice") != 0 {
			t.Fatalf("alice's count after the delete: %d", tx.PrincipalSessions("alice"))
		}
		if tx.Tombstone("s") == nil {
			t.Fatal("no tombstone")
		}
		return nil
	})
	// The artifact writer saw the deletion between the two incarnations.
	var kinds []string
	for _, fr := range frames {
		if fr.Deleted {
			kinds = append(kinds, "deleted")
		} else {
			kinds = append(kinds, "frame")
		}
	}
	if len(kinds) != 3 || kinds[0] != "frame" || kinds[1] != "deleted" || kinds[2] != "frame" {
		t.Fatalf("frames handed to the writer: %v", kinds)
	}
}
