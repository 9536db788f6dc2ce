package fsm

import (
	"errors"
	"fmt"
	"regexp"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/encoding/prototext"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/storage"
)

func convertCmd() *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: 2}}}
}

// history is a mix of every command that writes: sessions with more frames
// than an index block, a repair, a lease, a plan-mode flip, a delete and a
// re-create, request ids.
func history(t *testing.T, first uint64) []*raft.Log {
	var logs []*raft.Log
	i := first
	add := func(cmds ...*fsmpb.Command) {
		logs = append(logs, entry(t, i, int64(1000+i), cmds...))
		i++
	}
	add(createCmd("long"), createCmd("short"), createCmd("gone"))
	seq := int64(0)
	for n := range 40 {
		var evs []string
		for k := range 1 + n%3 {
			ev := fmt.Sprintf(`{"type":"message","seq":%d,"time":%d,"data":{"n":%d}}`, seq+int64(k), 10+seq, k)
			if k == 0 && (n == 4 || n == 20) { // titles, the last one wins (format 5)
				ev = fmt.Sprintf(`{"type":"session/title","seq":%d,"time":%d,"data":{"title":"long %d"}}`, seq, 10+seq, n)
			}
			evs = append(evs, ev)
		}
		cmds := []*fsmpb.Command{appendCmd("long", seq, evs...)}
		seq += int64(len(evs))
		if n < 3 {
			ev := fmt.Sprintf(`{"type":"message","seq":%d,"time":1,"data":{}}`, n)
			if n == 1 { // the deleted incarnation's title is not the new one's
				ev = `{"type":"session/title","seq":1,"time":1,"data":{"title":"gone"}}`
			}
			cmds = append(cmds, appendCmd("gone", int64(n), ev))
		}
		add(cmds...)
	}
	add(appendCmd("short", 0, openTurn...))
	prep := repairCmd("short", fsmpb.Repair_PREPARE, "host-a")
	prep.GetRepair().RequestId = "prep-1" // a kept request result moves too
	add(prep)
	add(keepAliveCmd("short", "host-a", 1))
	add(deleteCmd("gone", "", "del-1"))
	add(createCmd("gone"))
	return logs
}

// dump renders what a reader sees of a state: every record, every event,
// the frame boundaries, tombstones and request results, and the sessions
// List finds under a cwd (from the index, or in layout 1 by a scan).
func dump(t *testing.T, db *storage.StateDB) string {
	t.Helper()
	var b strings.Builder
	err := db.View(func(tx *storage.Tx) error {
		var under []string
		if tx.CwdIndexed() {
			under = tx.SessionsUnderCwd("/w")
		} else {
			err := tx.ForEachSession("", false, func(id string, raw []byte) error {
				rec, err := DecodeRecord(raw)
				if err == nil && strings.HasPrefix(rec.GetHeader().GetCwd(), "/w") {
					under = append(under, id)
				}
				return err
			})
			if err != nil {
				return err
			}
		}
		fmt.Fprintf(&b, "under /w: %q\n", under)
		return tx.ForEachSession("", false, func(id string, raw []byte) error {
			rec, err := DecodeRecord(raw)
			if err != nil {
				return err
			}
			fmt.Fprintf(&b, "%s: %s\n", id, prototext.Format(rec))
			evs, err := tx.Events(id, rec.Incarnation, 0, rec.NextSeq)
			if err != nil {
				return err
			}
			for _, ev := range evs {
				fmt.Fprintf(&b, "  %s\n", ev)
			}
			fmt.Fprintf(&b, "  frames %v\n", tx.FrameEnds(id, rec.Incarnation))
			for n := uint64(0); n <= rec.Frames; n++ {
				fmt.Fprintf(&b, "  frame %d ends %d\n", n, tx.FrameEnd(id, rec.Incarnation, n))
			}
			fmt.Fprintf(&b, "  del-1 %x prep-1 %x (%d bytes kept) tombstone %x\n", tx.RequestResult(id, "del-1"),
				tx.RequestResult(id, "prep-1"), tx.RequestBytes(id), tx.Tombstone(id))
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}

// A layout-1 state converted by ConvertLayout reads exactly as before, and
// as a state that was layout 2 from the start; writes after the conversion
// land alike in both.
func TestConvertLayoutKeepsWhatReadersSee(t *testing.T) {
	old, oldDB := newTestFSM1(t)
	fresh, freshDB := newTestFSM(t)
	logs := history(t, 1)
	old.ApplyBatch(logs)
	fresh.ApplyBatch(logs)
	before := dump(t, oldDB)
	if !regexp.MustCompile(`prep-1 [0-9a-f]+ \([1-9][0-9]* bytes kept\)`).MatchString(before) {
		t.Fatalf("the history keeps no request result to convert:\n%s", before)
	}
	if before != dump(t, freshDB) {
		t.Fatalf("layout 1 and layout 2 differ after the same entries:\n%s\n---\n%s", before, dump(t, freshDB))
	}
	next := uint64(len(logs) + 1)
	old.ApplyBatch([]*raft.Log{entry(t, next, 5000, convertCmd())})
	fresh.ApplyBatch([]*raft.Log{entry(t, next, 5000, convertCmd())}) // already layout 2: nothing changes
	_ = oldDB.View(func(tx *storage.Tx) error {
		if tx.Layout() != 2 {
			t.Fatalf("layout %d after ConvertLayout", tx.Layout())
		}
		return nil
	})
	if got := dump(t, oldDB); got != before {
		t.Fatalf("converted state reads differently:\n%s\n--- before:\n%s", got, before)
	}
	if err := oldDB.View(VerifyAll); err != nil {
		t.Fatalf("verify after the conversion: %v", err)
	}
	for _, l := range []*raft.Log{
		entry(t, next+1, 6000, appendCmd("long", 80, `{"type":"message","seq":80,"time":1,"data":{}}`)),
		entry(t, next+2, 6000, appendCmd("gone", 0, `{"type":"message","seq":0,"time":1,"data":{}}`)),
		entry(t, next+3, 6000, deleteCmd("long", "", "del-1")),
	} {
		old.ApplyBatch([]*raft.Log{l})
		fresh.ApplyBatch([]*raft.Log{l})
	}
	if a, b := dump(t, oldDB), dump(t, freshDB); a != b {
		t.Fatalf("after more writes, converted and native layout 2 differ:\n%s\n---\n%s", a, b)
	}
}

// State format 3 (new frames pack their events) reads exactly as layout 2,
// and format 4 (rows keyed by session number) as format 3: states in every
// older format converted by ConvertLayout, and a state in the target format
// from the start, read alike after the same entries, and after more writes
// (which the converted ones now store in the new format).
func TestConvertToFormat3KeepsWhatReadersSee(t *testing.T) { testConvertKeepsWhatReadersSee(t, 3) }

func TestConvertToFormat4KeepsWhatReadersSee(t *testing.T) { testConvertKeepsWhatReadersSee(t, 4) }

// Format 5 records keep their title: before the conversion only a state in
// format 5 from the start has them, and the conversion fills in exactly the
// titles it kept.
func TestConvertToFormat5KeepsWhatReadersSee(t *testing.T) { testConvertKeepsWhatReadersSee(t, 5) }

var titleField = regexp.MustCompile(`(?m)^[ \t]*title:[ \t]*"[^"\n]*"\n`)

// untitled is a dump without the records' titles.
func untitled(dump string) string { return titleField.ReplaceAllString(dump, "") }

func testConvertKeepsWhatReadersSee(t *testing.T, target int) {
	var fsms []*FSM
	var dbs []*storage.StateDB
	for format := 1; format <= target; format++ {
		f, db := newTestFSMLayout(t, format)
		fsms, dbs = append(fsms, f), append(dbs, db)
	}
	native := dbs[len(dbs)-1]
	logs := history(t, 1)
	for _, f := range fsms {
		f.ApplyBatch(logs)
	}
	before := dump(t, native)
	titles := titleField.FindAllString(before, -1)
	if want := map[bool]int{true: 1, false: 0}[target >= 5]; len(titles) != want || want == 1 && !strings.Contains(titles[0], `"long 20"`) {
		t.Fatalf("titles kept in format %d: %q, want %d (long's last)", target, titles, want)
	}
	for i, db := range dbs[:len(dbs)-1] {
		if got := dump(t, db); untitled(got) != untitled(before) {
			t.Fatalf("format %d and format %d differ after the same entries:\n%s\n---\n%s", i+1, target, got, before)
		}
	}
	next := uint64(len(logs) + 1)
	conv := &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: uint32(target)}}}
	for _, f := range fsms {
		f.ApplyBatch([]*raft.Log{entry(t, next, 5000, conv)})
	}
	for i, db := range dbs {
		_ = db.View(func(tx *storage.Tx) error {
			if tx.Layout() != target {
				t.Fatalf("state %d: format %d after ConvertLayout to %d", i+1, tx.Layout(), target)
			}
			return nil
		})
		if got := dump(t, db); got != before {
			t.Fatalf("state %d reads differently after the conversion:\n%s\n--- before:\n%s", i+1, got, before)
		}
		if err := db.View(VerifyAll); err != nil {
			t.Fatalf("state %d: verify after the conversion: %v", i+1, err)
		}
	}
	for _, l := range []*raft.Log{
		entry(t, next+1, 6000, appendCmd("long", 80, `{"type":"message","seq":80,"time":1,"data":{"text":"the tests pass now"}}`)),
		entry(t, next+2, 6000, appendCmd("gone", 0, `{"type":"message","seq":0,"time":1,"data":{}}`)),
		entry(t, next+3, 6000, deleteCmd("short", "", "del-2")),
		entry(t, next+4, 6000, createCmd("new")),
		entry(t, next+5, 6000, keepAliveCmd("long", "host-b", 0)),
		entry(t, next+6, 6000, appendCmd("long", 81, `{"type":"session/title","seq":81,"time":2,"data":{"title":"after"}}`)),
	} {
		for _, f := range fsms {
			f.ApplyBatch([]*raft.Log{l})
		}
	}
	after := dump(t, native)
	for i, db := range dbs[:len(dbs)-1] {
		if got := dump(t, db); got != after {
			t.Fatalf("after more writes, converted state %d and native format %d differ:\n%s\n---\n%s", i+1, target, got, after)
		}
	}
}

// ConvertLayout to each newer format is a command of that format's
// version: a replica that applies only older versions refuses it as that
// build would, by panicking, instead of writing what the older voters'
// snapshots could not hold (or, for format 5, leaving titles behind).
func TestConvertLayoutNeedsItsVersion(t *testing.T) {
	for _, tc := range []struct {
		layout, from int
		version      uint32
	}{
		{2, 1, LayoutVersion},
		{3, 2, PackedEventsVersion},
		{4, 3, NumberedRowsVersion},
		{5, 4, TitleVersion},
	} {
		t.Run(fmt.Sprint("format ", tc.layout), func(t *testing.T) {
			l := entry(t, 2, 100, &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: uint32(tc.layout)}}})
			if e, err := Decode(l.Data); err != nil || e.Version != tc.version {
				t.Fatalf("the entry is version %d (%v), want %d", e.GetVersion(), err, tc.version)
			}
			old, _ := newTestFSMLayout(t, tc.from)
			old.LimitVersion(tc.version - 1)
			// Something applied first, as on a live node (the state then has
			// a batch open, which the test's cleanup commits after the panic).
			old.ApplyBatch([]*raft.Log{entry(t, 1, 100, createCmd("s"))})
			defer func() {
				if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), fmt.Sprintf("command version %d not supported", tc.version)) {
					t.Fatalf("a version-%d node applying ConvertLayout to %d: recovered %v, want a version panic", tc.version-1, tc.layout, r)
				}
			}()
			old.ApplyBatch([]*raft.Log{l})
		})
	}
}

// A session whose stored frame boundaries do not describe its events (a
// hand-damaged or very old frame table) keeps every event: the rest becomes
// one frame.
func TestConvertLayoutRepairsFrameBoundaries(t *testing.T) {
	f, db := newTestFSM1(t)
	f.ApplyBatch([]*raft.Log{
		entry(t, 1, 100, createCmd("s")),
		entry(t, 2, 100, appendCmd("s", 0, openTurn[0])),
		entry(t, 3, 100, appendCmd("s", 1, openTurn[1])),
	})
	err := db.Update(func(tx *storage.Tx) error {
		return tx.PutFrame("s", 2, 7) // frame 2 said to end past the log
	})
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch([]*raft.Log{entry(t, 4, 100, convertCmd())})
	_ = db.View(func(tx *storage.Tx) error {
		rec, err := ReadRecord(tx, "s")
		if err != nil {
			t.Fatal(err)
		}
		evs, err := tx.Events("s", rec.Incarnation, 0, rec.NextSeq)
		if err != nil || len(evs) != 2 {
			t.Fatalf("events after the conversion: %q, %v", evs, err)
		}
		if got := fmt.Sprint(tx.FrameEnds("s", rec.Incarnation)); got != "[1 2]" || rec.Frames != 2 {
			t.Fatalf("frames %s (record: %d), want [1 2]", got, rec.Frames)
		}
		return nil
	})
}

// A damaged event is not carried into the new layout: with nothing to
// repair it from, the conversion fails (the node stops, as apply does on
// damage) and leaves layout 1 as it was.
func TestConvertLayoutRefusesDamage(t *testing.T) {
	f, db := newTestFSM1(t)
	f.ApplyBatch([]*raft.Log{
		entry(t, 1, 100, createCmd("s")),
		entry(t, 2, 100, appendCmd("s", 0, openTurn...)),
	})
	path := db.Path()
	db.Close()
	corrupt.FlipAll(t, path, []byte(`"step/start"`), 2, nil)
	db, err := storage.OpenState(path, storage.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var ce *storage.ChecksumError
	err = db.Update(func(tx *storage.Tx) error { _, err := ConvertLayout(tx, 3, nil); return err })
	if !errors.As(err, &ce) {
		t.Fatalf("conversion of a damaged state: %v, want a checksum error", err)
	}
	_ = db.View(func(tx *storage.Tx) error {
		if tx.Layout() != 1 {
			t.Errorf("layout %d after a failed conversion, want 1", tx.Layout())
		}
		return nil
	})
}
