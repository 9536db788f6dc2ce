package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// newTestFSM is an FSM on a new state in the format a new cluster reaches:
// 4 (layout 2, packed events, rows keyed by session number); newTestFSM1
// keeps layout 1, newTestFSMLayout any format.
func newTestFSM(t *testing.T) (*FSM, *storage.StateDB) {
	t.Helper()
	return newTestFSMLayout(t, 4)
}

func newTestFSM1(t *testing.T) (*FSM, *storage.StateDB) {
	t.Helper()
	return newTestFSMLayout(t, 1)
}

func newTestFSMLayout(t testing.TB, layout int) (*FSM, *storage.StateDB) {
	t.Helper()
	db, err := storage.OpenState(filepath.Join(t.TempDir(), "state.db"), storage.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	if layout >= 2 {
		err := db.Update(func(tx *storage.Tx) error {
			if _, err := ConvertLayout(tx, 1, nil); err != nil || layout == 2 {
				return err
			}
			if err := tx.FinishLayout3(); err != nil || layout == 3 {
				return err
			}
			if _, err := tx.ConvertLayout4(); err != nil || layout == 4 {
				return err
			}
			return tx.FinishFormat5()
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	f, err := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return f, db
}

func entry(t testing.TB, index uint64, now int64, cmds ...*fsmpb.Command) *raft.Log {
	t.Helper()
	data, err := Encode(&fsmpb.Entry{NowUnixMs: now, Commands: cmds})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func createCmd(id string) *fsmpb.Command {
	cwd := "/w"
	return &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
		Header: &fsmpb.Header{Id: id, CreatedAt: 1000, Cwd: &cwd}}}}
}

func appendCmd(id string, first int64, events ...string) *fsmpb.Command {
	a := &fsmpb.Append{SessionId: id, FirstSeq: first}
	for _, e := range events {
		a.Events = append(a.Events, []byte(e))
	}
	return &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: a}}
}

func repairCmd(id string, mode fsmpb.Repair_Mode, owner string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_Repair{Repair: &fsmpb.Repair{
		SessionId: id, Mode: mode, Owner: owner, TtlMs: 1000}}}
}

var openTurn = []string{
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
	`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
}

// results extracts the per-command results of applied entries.
func results(t *testing.T, out []interface{}) []*fsmpb.Result {
	t.Helper()
	var rs []*fsmpb.Result
	for _, o := range out {
		if o == nil {
			continue
		}
		rs = append(rs, o.(*GroupResult).Results...)
	}
	return rs
}

func TestApplyCreateAppendRepair(t *testing.T) {
	f, db := newTestFSM(t)
	out := f.ApplyBatch([]*raft.Log{
		entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
		entry(t, 2, 100, createCmd("s")),
		entry(t, 3, 100, appendCmd("s", 0, openTurn...)),
		entry(t, 4, 100, appendCmd("s", 5, `{"type":"turn/end","seq":5,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`)),
		entry(t, 5, 100, repairCmd("s", fsmpb.Repair_LOAD, "")),
	})
	rs := results(t, out)
	if got := rs[2].Revision; got != "c1:2:3" {
		t.Errorf("append revision = %q, want c1:2:3", got)
	}
	if rs[3].Reason != "SEQ_MISMATCH" || rs[3].Message != `append seq mismatch for "s": expected 2 at index 0, got 5` {
		t.Errorf("gap result = %v", rs[3])
	}
	if !rs[4].Repaired || rs[4].NextSeq != 4 || rs[4].Revision != "c1:2:5" {
		t.Errorf("repair result = %v, want repaired, next 4, revision c1:2:5", rs[4])
	}
	if f.AppliedIndex() != 5 {
		t.Errorf("applied = %d, want 5", f.AppliedIndex())
	}
	_ = db.View(func(tx *storage.Tx) error {
		rec, _ := ReadRecord(tx, "s")
		evs, _ := tx.Events("s", rec.Incarnation, 0, rec.NextSeq)
		if len(evs) != 4 || !strings.Contains(string(evs[3]), `"interrupted"`) {
			t.Errorf("stored events = %q", evs)
		}
		if got := tx.FrameEnds("s", rec.Incarnation); fmt.Sprint(got) != "[2 4]" {
			t.Errorf("frame ends = %v, want [2 4]", got)
		}
		return nil
	})
}

// Entries at or below the stored applied index are skipped: raft replays them
// after a restart (NoSnapshotRestoreOnStart) and they must not apply twice.
func TestReplayIsSkipped(t *testing.T) {
	f, db := newTestFSM(t)
	logs := []*raft.Log{entry(t, 1, 1, createCmd("s")), entry(t, 2, 1, appendCmd("s", 0, openTurn[0]))}
	f.ApplyBatch(logs)
	out := f.ApplyBatch(append(logs, entry(t, 3, 1, appendCmd("s", 1, openTurn[1]))))
	if out[0] != nil || out[1] != nil || out[2] == nil {
		t.Fatalf("replayed entries should be skipped, got %v", out)
	}
	_ = db.View(func(tx *storage.Tx) error {
		rec, _ := ReadRecord(tx, "s")
		evs, _ := tx.Events("s", rec.Incarnation, 0, rec.NextSeq)
		if len(evs) != 2 {
			t.Errorf("events = %d, want 2", len(evs))
		}
		return nil
	})
}

// Replicas see the same log in different ApplyBatch partitions; their logical
// state must be identical.
func TestDeterministicAcrossBatching(t *testing.T) {
	var logs []*raft.Log
	idx := uint64(0)
	add := func(now int64, c ...*fsmpb.Command) {
		idx++
		logs = append(logs, entry(t, idx, now, c...))
	}
	add(10, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c"}}})
	for i := 0; i < 20; i++ {
		id := fmt.Sprintf("s%d", i%5)
		switch i / 5 {
		case 0:
			add(int64(20+i), createCmd(id))
		case 1:
			add(int64(20+i), appendCmd(id, 0, openTurn...))
		case 2:
			add(int64(5), repairCmd(id, fsmpb.Repair_PREPARE, "o")) // clock never goes back
		default:
			add(int64(40+i), appendCmd(id, 4, `{"type":"turn/start","seq":4,"time":9,"data":{"turn":2}}`))
		}
	}
	var events string // s0's events, batch by batch
	dump := func(batch int) string {
		f, db := newTestFSM(t)
		for i := 0; i < len(logs); i += batch {
			f.ApplyBatch(logs[i:min(i+batch, len(logs))])
		}
		_ = db.View(func(tx *storage.Tx) error {
			rec, _ := ReadRecord(tx, "s0")
			evs, err := tx.Events("s0", rec.Incarnation, 0, rec.NextSeq)
			events = fmt.Sprintf("%s%q %v\n", events, evs, err)
			return nil
		})
		return logicalDump(t, db)
	}
	one, seven, all := dump(1), dump(7), dump(len(logs))
	if one != seven || one != all {
		t.Fatalf("state differs by batching:\n1: %s\n7: %s\nall: %s", one, seven, all)
	}
	if !strings.Contains(events, "interrupted") {
		t.Fatalf("expected committed closers in state: %s", events)
	}
}

// logicalDump renders every key and value of the state database in order.
func logicalDump(t *testing.T, db *storage.StateDB) string {
	t.Helper()
	sn, err := db.BeginSnapshot()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := sn.WriteTo(&buf); err != nil {
		t.Fatal(err)
	}
	sn.Release()
	path := filepath.Join(t.TempDir(), "restored.db")
	tmp, err := storage.RestoreFile(&buf, path)
	if err != nil {
		t.Fatal(err)
	}
	bdb, err := bbolt.Open(tmp, 0o600, &bbolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer bdb.Close()
	var lines []string
	var walk func(prefix string, b *bbolt.Bucket)
	walk = func(prefix string, b *bbolt.Bucket) {
		_ = b.ForEach(func(k, v []byte) error {
			if v == nil {
				walk(prefix+string(k)+"/", b.Bucket(k))
				return nil
			}
			lines = append(lines, fmt.Sprintf("%s%q=%q", prefix, k, v))
			return nil
		})
	}
	_ = bdb.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			walk(string(name)+"/", b)
			return nil
		})
	})
	sort.Strings(lines)
	return strings.Join(lines, "\n")
}

// A snapshot restored into a fresh FSM gives the same logical state.
func TestSnapshotRestore(t *testing.T) {
	f, db := newTestFSM(t)
	f.ApplyBatch([]*raft.Log{entry(t, 1, 1, createCmd("s")), entry(t, 2, 1, appendCmd("s", 0, openTurn...))})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &memSink{}
	if err := snap.Persist(sink); err != nil {
		t.Fatal(err)
	}
	snap.Release()
	g, db2 := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 2 {
		t.Errorf("restored applied index = %d, want 2", g.AppliedIndex())
	}
	if a, b := logicalDump(t, db), logicalDump(t, db2); a != b {
		t.Errorf("restored state differs:\n%s\n---\n%s", a, b)
	}
	if err := g.Restore(io.NopCloser(strings.NewReader("garbage"))); err == nil {
		t.Error("restoring garbage should fail")
	}
	if g.AppliedIndex() != 2 {
		t.Error("a failed restore must leave the state as it was")
	}
}

type memSink struct{ bytes.Buffer }

func (s *memSink) ID() string    { return "mem" }
func (s *memSink) Cancel() error { return nil }
func (s *memSink) Close() error  { return nil }

func FuzzDecodeCommand(f *testing.F) {
	good, _ := Encode(&fsmpb.Entry{NowUnixMs: 5, Commands: []*fsmpb.Command{createCmd("x"), appendCmd("x", 0, openTurn...)}})
	f.Add(good)
	plan, _ := Encode(&fsmpb.Entry{NowUnixMs: 5, Commands: []*fsmpb.Command{planSetCmd("x", true, 1, 2, "r"),
		preStepCmd("x", 1, 3, "p", "n"), {Cmd: &fsmpb.Command_PlanExit{PlanExit: &fsmpb.PlanExit{SessionId: "x", Plan: "# p",
			Answer: &fsmpb.ReviewAnswer{Answers: []*fsmpb.AnswerItem{{Id: "plan-review", Selected: []string{"Approve"}}}}}}}}})
	f.Add(plan)
	big, _ := Encode(&fsmpb.Entry{NowUnixMs: 5, Commands: []*fsmpb.Command{proseTurn("x", 0, 12)}})
	f.Add(Pack(big))
	f.Add([]byte{})
	f.Add([]byte{0x08, 0x63})
	f.Fuzz(func(t *testing.T, data []byte) {
		e, err := Decode(data)
		if err != nil {
			return
		}
		again, err := Encode(e)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := Decode(again); err != nil {
			t.Fatalf("decode of re-encoded entry: %v", err)
		}
	})
}

// Reads decide at fsm.Now what Apply decides at its clamped clock: a wall
// clock behind the latest applied time does not revive an expired lease.
func TestNowAndLeaseLiveAgreeWithApply(t *testing.T) {
	f, db := newTestFSM(t)
	applyAll(t, f, 5000, createCmd("s"))
	rec := &fsmpb.SessionRecord{Lease: &fsmpb.Lease{ExpiresAtUnixMs: 4000}}
	err := db.View(func(tx *storage.Tx) error {
		for _, c := range []struct{ wall, want int64 }{{1000, 5000}, {5000, 5000}, {9000, 9000}} {
			now := Now(tx, c.wall)
			if now != c.want {
				t.Errorf("Now(wall %d) = %d, want %d", c.wall, now, c.want)
			}
			if LeaseLive(rec, now) {
				t.Errorf("a lease expiring at 4000 is live at %d (wall %d)", now, c.wall)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if LeaseLive(&fsmpb.SessionRecord{}, 0) || !LeaseLive(rec, 3999) {
		t.Error("LeaseLive: no lease is never live; a lease is live before it expires")
	}
}

// A read sees a session as Apply answered it: the revision of the last
// change, registrations hidden, and a read spanning transactions refused
// once the incarnation it began with is gone.
func TestReadSessionAgreesWithApply(t *testing.T) {
	f, db := newTestFSM(t)
	rs := applyAll(t, f, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}},
		createCmd("s"), createCmd("r"), appendCmd("s", 0, openTurn...))
	var first *Session
	err := db.View(func(tx *storage.Tx) error {
		s, err := ReadSession(tx, "s")
		if err != nil || !s.Visible() || s.Revision != rs[3].Revision || s.Header.ID != "s" {
			t.Fatalf("ReadSession(s) = %+v, %v; want visible, revision %s", s, err, rs[3].Revision)
		}
		raw, _ := tx.Record("r")
		if r, err := DecodeSession(tx.ClusterID(), raw); err != nil || r.Visible() || r.Snapshot(0).Header.ID != "r" {
			t.Errorf("registration r: %+v, %v; want decoded, not visible", r, err)
		}
		if none, err := ReadSession(tx, "nope"); none != nil || err != nil || none.Visible() {
			t.Errorf("unknown session: %+v, %v", none, err)
		}
		first = s
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch([]*raft.Log{entry(t, 5, 100, deleteCmd("s", "", "")), entry(t, 6, 100, createCmd("s"))})
	_ = db.View(func(tx *storage.Tx) error {
		_, err := ReadIncarnation(tx, "s", first.Record.Incarnation, first.Revision)
		if !errors.Is(err, sessionstore.ErrNotFound) || !strings.Contains(err.Error(), "belongs to revision "+first.Revision) {
			t.Errorf("read of a re-created session: %v; want NOT_FOUND naming %s", err, first.Revision)
		}
		return nil
	})
}
