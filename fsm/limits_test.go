package fsm

import (
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func withLimits(c *fsmpb.Command, principal string, l *fsmpb.Limits) *fsmpb.Command {
	c.Principal, c.Limits = principal, l
	return c
}

// Quotas are decided from the stamped principal and limits; a refused
// command writes nothing; repair closers are exempt.
func TestApplyQuotas(t *testing.T) {
	f, db := newTestFSM(t)
	lim := &fsmpb.Limits{MaxSessionEvents: 3, MaxSessionBytes: 200, MaxPrincipalSessions: 2}
	ev := func(seq int, pad int) string {
		return `{"type":"x","seq":` + string(rune('0'+seq)) + `,"time":1,"data":{"p":"` + strings.Repeat("a", pad) + `"}}`
	}
	steps := []struct {
		name   string
		cmd    *fsmpb.Command
		reason string
	}{
		{"alice's first", withLimits(createCmd("a1"), "alice", lim), ""},
		{"alice's second", withLimits(createCmd("a2"), "alice", lim), ""},
		{"alice's third is over her quota", withLimits(createCmd("a3"), "alice", lim), "QUOTA_EXCEEDED"},
		{"bob is counted apart", withLimits(createCmd("b1"), "bob", lim), ""},
		{"a per-principal override", withLimits(createCmd("a3"), "alice", &fsmpb.Limits{MaxPrincipalSessions: 3}), ""},
		{"two events", withLimits(appendCmd("a1", 0, ev(0, 10), ev(1, 10)), "alice", lim), ""},
		{"two more pass the event quota", withLimits(appendCmd("a1", 2, ev(2, 10), ev(3, 10)), "alice", lim), "QUOTA_EXCEEDED"},
		{"one more fits", withLimits(appendCmd("a1", 2, ev(2, 10)), "alice", lim), ""},
		{"a big event passes the byte quota", withLimits(appendCmd("a2", 0, ev(0, 190)), "alice", lim), "QUOTA_EXCEEDED"},
		{"unstamped commands are unlimited", appendCmd("a2", 0, ev(0, 190), ev(1, 10), ev(2, 10), ev(3, 10)), ""},
	}
	for i, s := range steps {
		rs := results(t, f.ApplyBatch([]*raft.Log{entry(t, uint64(i+1), 1000, s.cmd)}))
		if rs[0].Reason != s.reason {
			t.Fatalf("%s: reason %q (%s), want %q", s.name, rs[0].Reason, rs[0].Message, s.reason)
		}
	}
	_ = db.View(func(tx *storage.Tx) error {
		if !tx.HasSession("a3") || tx.PrincipalSessions("alice") != 3 || tx.PrincipalSessions("bob") != 1 {
			t.Fatalf("principal counts: alice %d bob %d", tx.PrincipalSessions("alice"), tx.PrincipalSessions("bob"))
		}
		rec, _ := ReadRecord(tx, "a1")
		if rec.NextSeq != 3 || rec.GetEventBytes() == 0 || rec.Creator != "alice" {
			t.Fatalf("a1: next %d bytes %d creator %q", rec.NextSeq, rec.GetEventBytes(), rec.Creator)
		}
		return nil
	})
}

func TestApplyQuotaClosersExempt(t *testing.T) {
	f, db := newTestFSM(t)
	lim := &fsmpb.Limits{MaxSessionEvents: 2}
	rs := results(t, f.ApplyBatch([]*raft.Log{
		entry(t, 1, 1000, withLimits(createCmd("s"), "", lim)),
		entry(t, 2, 1000, withLimits(appendCmd("s", 0, openTurn...), "", lim)),
		entry(t, 3, 1000, repairCmd("s", fsmpb.Repair_LOAD, "")),
	}))
	for _, r := range rs {
		if r.Reason != "" {
			t.Fatalf("%s: %s", r.Reason, r.Message)
		}
	}
	_ = db.View(func(tx *storage.Tx) error {
		rec, _ := ReadRecord(tx, "s")
		if rec.NextSeq <= 2 {
			t.Fatalf("closers were not appended past the quota: next seq %d", rec.NextSeq)
		}
		return nil
	})
}

// Old records (no stored size) are summed from the log once.
func TestEventBytesOfOldRecords(t *testing.T) {
	f, db := newTestFSM(t)
	results(t, f.ApplyBatch([]*raft.Log{
		entry(t, 1, 1000, createCmd("s")),
		entry(t, 2, 1000, appendCmd("s", 0, openTurn...)),
	}))
	want := int64(len(openTurn[0]) + len(openTurn[1]))
	// Forget the size as a record of an older build would.
	err := db.Update(func(tx *storage.Tx) error {
		rec, _ := ReadRecord(tx, "s")
		if rec.GetEventBytes() != want {
			t.Fatalf("stored size %d, want %d", rec.GetEventBytes(), want)
		}
		rec.EventBytes = nil
		b, err := proto.Marshal(rec)
		if err != nil {
			return err
		}
		return tx.PutRecord("s", b, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	rs := results(t, f.ApplyBatch([]*raft.Log{
		entry(t, 3, 1000, withLimits(appendCmd("s", 2, ev3()), "", &fsmpb.Limits{MaxSessionBytes: want + int64(len(ev3())) - 1})),
	}))
	if rs[0].Reason != "QUOTA_EXCEEDED" {
		t.Fatalf("want the summed size to refuse the append, got %q", rs[0].Reason)
	}
}

func ev3() string { return `{"type":"x","seq":2,"time":1,"data":{}}` }
