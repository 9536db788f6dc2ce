package artifacts

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/storage"
)

// A flipped byte of an event value, of an event key (layout 1) or of a
// session record in state.db is never served: the read is a CORRUPTION
// error, the failure is counted, a snapshot is refused, and a damaged event
// is rewritten from the node's artifact with exactly the bytes first stored.
// In layout 1 and in format 4 (where the event is stored packed).
func TestStateDamageIsCaughtAndRepaired(t *testing.T) {
	ev1 := []byte(openTurn[1])
	packed, ok := storage.PackedEvent(ev1)
	if !ok {
		t.Fatal("the test event does not pack")
	}
	for _, tc := range []struct {
		name       string
		format     uint32
		damage     func(t *testing.T, path string)
		repairable bool
	}{
		{"event value", 1, func(t *testing.T, path string) {
			corrupt.FlipAll(t, path, ev1, len(ev1)/2, nil)
		}, true},
		{"event key", 1, func(t *testing.T, path string) {
			// bbolt stores a key right before its value: seq 1 becomes seq 5.
			corrupt.FlipAll(t, path, ev1, -1, func(b []byte, at int) bool {
				return at >= 8 && binary.BigEndian.Uint64(b[at-8:at]) == 1
			})
		}, true},
		{"session record", 1, func(t *testing.T, path string) {
			corrupt.FlipAll(t, path, []byte("/w"), 1, nil) // the record's header cwd
		}, false},
		{"packed event", 4, func(t *testing.T, path string) {
			corrupt.FlipAll(t, path, packed, len(packed)/2, nil)
		}, true},
		{"session record", 4, func(t *testing.T, path string) {
			corrupt.FlipAll(t, path, []byte("/w"), 1, nil) // the record's header cwd (and the cwd index key)
		}, false},
	} {
		t.Run(fmt.Sprintf("format %d %s", tc.format, tc.name), func(t *testing.T) {
			dir := t.TempDir()
			n := openArtifactNode(t, dir)
			n.fsm.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
				entry(t, 2, 100, &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: tc.format}}}),
				entry(t, 3, 100, createCmd("s")),
				entry(t, 4, 100, appendCmd("s", 0, openTurn...)),
			})
			n.idle(t)
			n.close()
			tc.damage(t, filepath.Join(dir, "state.db"))
			n = openArtifactNode(t, dir)
			n.marksLoaded(t) // the writer may fail on the damage (and retry): no idle
			if got := n.db.Layout(); got != int(tc.format) {
				t.Fatalf("state format %d, want %d", got, tc.format)
			}

			read := func() ([][]byte, error) {
				var evs [][]byte
				err := n.db.View(func(tx *storage.Tx) error {
					rec, err := fsm.ReadRecord(tx, "s")
					if err != nil {
						return err
					}
					evs, err = tx.Events("s", rec.Incarnation, 0, rec.NextSeq)
					return err
				})
				return evs, err
			}
			evs, err := read()
			var ce *storage.ChecksumError
			if !errors.As(err, &ce) || !errors.Is(err, sessionstore.ErrCorruption) || evs != nil {
				t.Fatalf("read of damaged state = %q, %v; want a CORRUPTION *storage.ChecksumError and no bytes", evs, err)
			}
			if got := n.db.ChecksumFailures(); got == 0 {
				t.Error("ChecksumFailures() = 0 after a failed read")
			}
			sn, err := n.fsm.Snapshot()
			if err != nil {
				t.Fatal(err)
			}
			if err := sn.Persist(&discardSink{}); err == nil {
				t.Error("a snapshot of damaged state was persisted")
			}
			sn.Release()

			// The repair cluster runs after such a read, from this node's artifact.
			fixed := 0
			err = n.db.Update(func(tx *storage.Tx) error {
				rec, err := fsm.ReadRecord(tx, "s")
				if err != nil {
					return err
				}
				fixed, err = n.arts.RepairEvents(tx, "s", rec.Incarnation, rec.NextSeq)
				return err
			})
			if !tc.repairable {
				if err == nil && fixed > 0 {
					t.Fatalf("repair of a damaged record rewrote %d events", fixed)
				}
				if _, err := read(); !errors.Is(err, sessionstore.ErrCorruption) {
					t.Fatalf("read after a failed repair = %v, want CORRUPTION", err)
				}
				return
			}
			if err != nil || fixed != 1 {
				t.Fatalf("RepairEvents = %d, %v; want 1 event rewritten", fixed, err)
			}
			evs, err = read()
			if err != nil || len(evs) != 2 || string(evs[0]) != openTurn[0] || string(evs[1]) != openTurn[1] {
				t.Fatalf("read after the repair = %q, %v; want the stored events", evs, err)
			}
		})
	}
}

type discardSink struct{ bytes.Buffer }

func (*discardSink) ID() string    { return "test" }
func (*discardSink) Cancel() error { return nil }
func (*discardSink) Close() error  { return nil }

// marksLoaded waits until the artifact writer's first pass has loaded the
// watermarks (whether or not the pass succeeded).
func (n *artifactNode) marksLoaded(t *testing.T) {
	t.Helper()
	for {
		n.arts.in.mu.Lock()
		loaded := n.arts.marks.Load() != nil && !n.arts.in.running
		n.arts.in.mu.Unlock()
		if loaded {
			return
		}
		time.Sleep(time.Millisecond)
	}
}

// A damaged event met while applying (here: a re-sent append, whose events are
// compared with the stored ones) is rewritten from the artifact within the
// apply, so the command gets the answer every other replica gives: duplicate.
func TestApplyRepairsDamagedEventFromArtifact(t *testing.T) {
	dir := t.TempDir()
	n := openArtifactNode(t, dir)
	n.fsm.ApplyBatch([]*raft.Log{
		entry(t, 1, 100, createCmd("s")),
		entry(t, 2, 100, appendCmd("s", 0, openTurn...)),
	})
	n.idle(t)
	n.close()
	corrupt.FlipAll(t, filepath.Join(dir, "state.db"), []byte(openTurn[1]), 12, nil)
	n = openArtifactNode(t, dir)
	n.idle(t)
	out := n.fsm.ApplyBatch([]*raft.Log{entry(t, 3, 100, appendCmd("s", 0, openTurn...))})
	rs := out[0].(*fsm.GroupResult).Results
	if len(rs) != 1 || !rs[0].Duplicate {
		t.Fatalf("re-sent append over a damaged event = %v, want duplicate", rs)
	}
	if n.db.ChecksumFailures() == 0 {
		t.Error("the damage met while applying was not counted")
	}
	err := n.db.View(func(tx *storage.Tx) error {
		evs, err := tx.Events("s", 0, 0, 2) // 0 is not the incarnation of s
		if err == nil {
			t.Errorf("events read under a wrong incarnation: %q", evs)
		}
		return fsm.VerifyAll(tx)
	})
	if err != nil {
		t.Fatalf("state after the apply: %v", err)
	}
}
