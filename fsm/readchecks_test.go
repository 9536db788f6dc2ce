package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func strictAppendCmd(id string, first int64, events ...string) *fsmpb.Command {
	c := appendCmd(id, first, events...)
	c.GetAppend().Strict = true
	return c
}

func nextSeq(t *testing.T, db *storage.StateDB, id string) int64 {
	t.Helper()
	var n int64
	if err := db.View(func(tx *storage.Tx) error {
		rec, err := ReadRecord(tx, id)
		if rec != nil {
			n = rec.NextSeq
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return n
}

// A strict append after which a read would refuse the log is refused with
// nothing written; a reference append is written and says the log no longer
// reads; a strict append to that log is refused. The decision is the same
// whether the session's check was kept or rebuilt (a fresh FSM on the same
// state, an eviction, plan-mode writes in between).
func TestApplyStrictAppend(t *testing.T) {
	unknown := `{"type":"future/event","seq":2,"time":3,"data":{}}`
	closeTurn := `{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`
	for _, keep := range []int{maxReadChecks, 0} {
		f, db := newTestFSM(t)
		f.checks = newReadChecks(max(keep, 1))
		out := f.ApplyBatch([]*raft.Log{
			entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
			entry(t, 2, 100, createCmd("s"), createCmd("other")),
			entry(t, 3, 100, strictAppendCmd("s", 0, openTurn...)),
			entry(t, 4, 100, strictAppendCmd("other", 0, openTurn...)), // evicts "s" when one check is kept
			entry(t, 5, 100, strictAppendCmd("s", 2, unknown)),
		})
		rs := results(t, out)
		// rs: cluster id, two creates, then the appends.
		if rs[3].Reason != "" || rs[3].UnreadableReason != "" {
			t.Fatalf("keep %d: strict append of an open turn: %v", keep, rs[3])
		}
		if rs[5].Reason != "FORMAT_UNSUPPORTED" || nextSeq(t, db, "s") != 2 {
			t.Fatalf("keep %d: strict append of an unknown type: %v, next seq %d (want refused, 2)", keep, rs[5], nextSeq(t, db, "s"))
		}
		// A fresh FSM (a restart) rebuilds the check from the stored log.
		f2, err := New(db, f.logger, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		rs = results(t, f2.ApplyBatch([]*raft.Log{
			entry(t, 6, 100, appendCmd("s", 2, unknown)),
			entry(t, 7, 100, strictAppendCmd("s", 3, `{"type":"turn/end","seq":3,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`)),
			entry(t, 8, 100, appendCmd("s", 2, unknown)), // a duplicate reports readability too
		}))
		if rs[0].Reason != "" || rs[0].UnreadableReason != "FORMAT_UNSUPPORTED" || nextSeq(t, db, "s") != 3 {
			t.Fatalf("keep %d: reference append of an unknown type: %v", keep, rs[0])
		}
		if rs[1].Reason != "FORMAT_UNSUPPORTED" || nextSeq(t, db, "s") != 3 {
			t.Fatalf("keep %d: strict append to an unreadable log: %v", keep, rs[1])
		}
		if !rs[2].Duplicate || rs[2].UnreadableReason != "FORMAT_UNSUPPORTED" {
			t.Fatalf("keep %d: duplicate: %v", keep, rs[2])
		}
		// The other session reads, and a strict close of its turn is taken.
		rs = results(t, f2.ApplyBatch([]*raft.Log{entry(t, 9, 100, strictAppendCmd("other", 2, closeTurn))}))
		if rs[0].Reason != "" || rs[0].UnreadableReason != "" || nextSeq(t, db, "other") != 3 {
			t.Fatalf("keep %d: strict close of a turn: %v", keep, rs[0])
		}
	}
}

// Entries that carry a strict append are stamped with the version that
// knows the rule, so an older replica refuses them instead of applying them
// without it.
func TestEncodeStampsStrictVersion(t *testing.T) {
	data, err := Encode(&fsmpb.Entry{Commands: []*fsmpb.Command{strictAppendCmd("s", 0, openTurn...)}})
	if err != nil {
		t.Fatal(err)
	}
	e, err := Decode(data)
	if err != nil || e.Version != StrictVersion {
		t.Fatalf("version %d, %v; want %d", e.GetVersion(), err, StrictVersion)
	}
	data, _ = Encode(&fsmpb.Entry{Commands: []*fsmpb.Command{appendCmd("s", 0, openTurn...)}})
	if e, _ := Decode(data); e.Version >= StrictVersion {
		t.Fatalf("a reference append is stamped %d", e.Version)
	}
}

// BenchmarkStrictAppend: one strict append of a one-event batch to a session
// already holding n events (a turn each of 10 events), with its check kept:
// the cost must not grow with n.
func BenchmarkStrictAppend(b *testing.B) {
	for _, n := range []int{100, 10_000, 100_000} {
		b.Run(fmt.Sprintf("events=%d", n), func(b *testing.B) {
			f, _ := newTestFSMLayout(b, 2)
			index := uint64(1)
			apply := func(cmds ...*fsmpb.Command) []*fsmpb.Result {
				index++
				out := f.ApplyBatch([]*raft.Log{entry(b, index, 100, cmds...)})
				return out[0].(*GroupResult).Results
			}
			apply(createCmd("s"))
			seq := int64(0)
			turn := func(k int) []string {
				var evs []string
				for i := 0; i < k; i++ {
					switch {
					case i == 0:
						evs = append(evs, fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1}}`, seq))
					case i == k-1:
						evs = append(evs, fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":1,"data":{"turn":1,"reason":{"kind":"completed"}}}`, seq))
					default:
						evs = append(evs, fmt.Sprintf(`{"type":"x-bench/note","seq":%d,"time":1,"data":{"i":%d},"ignorable":true}`, seq, i))
					}
					seq++
				}
				return evs
			}
			for seq < int64(n) {
				first := seq
				if r := apply(strictAppendCmd("s", first, turn(10)...)); r[0].Reason != "" {
					b.Fatal(r[0])
				}
			}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				ev := fmt.Sprintf(`{"type":"x-bench/note","seq":%d,"time":1,"data":{"i":%d},"ignorable":true}`, seq, i)
				if r := apply(strictAppendCmd("s", seq, ev)); r[0].Reason != "" {
					b.Fatal(r[0])
				}
				seq++
			}
		})
	}
}
