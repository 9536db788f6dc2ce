package fsm

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"log/slog"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/internal/corrupt"
	"github.com/sessionstore/sessionstore/storage"
)

// A snapshot stream holding damage is refused before it replaces the state.
func TestRestoreRefusesDamagedSnapshot(t *testing.T) {
	f, db := newTestFSM1(t)
	f.ApplyBatch([]*raft.Log{
		entry(t, 1, 100, createCmd("s")),
		entry(t, 2, 100, appendCmd("s", 0, openTurn...)),
	})
	path := db.Path()
	db.Close()
	corrupt.FlipAll(t, path, []byte(openTurn[1]), 3, nil)
	db, err := storage.OpenState(path, storage.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	sn, err := db.BeginSnapshot() // storage level: fsm's Persist would refuse
	if err != nil {
		t.Fatal(err)
	}
	var stream bytes.Buffer
	_, err = sn.WriteTo(&stream)
	sn.Release()
	if err != nil {
		t.Fatal(err)
	}

	g, db2 := newTestFSM(t)
	g.ApplyBatch([]*raft.Log{entry(t, 1, 100, createCmd("other"))})
	if err := g.Restore(io.NopCloser(&stream)); !errors.Is(err, sessionstore.ErrCorruption) {
		t.Fatalf("Restore of a damaged snapshot = %v, want CORRUPTION", err)
	}
	_ = db2.View(func(tx *storage.Tx) error {
		if !tx.HasSession("other") || tx.HasSession("s") {
			t.Error("the refused snapshot replaced the state")
		}
		return nil
	})
}

// stripSums makes a state database look as 2f2e872 (or an old voter) left it:
// no record checksums, no sums of the events from seq keepBelow on, and
// meta/sums behind the applied index (or absent).
func stripSums(t *testing.T, path string, keepBelow uint64) {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		if keepBelow == 0 {
			if err := tx.Bucket([]byte("meta")).Delete([]byte("sums")); err != nil {
				return err
			}
		} else if err := tx.Bucket([]byte("meta")).Put([]byte("sums"), binary.BigEndian.AppendUint64(nil, 1)); err != nil {
			return err
		}
		return tx.Bucket([]byte("sessions")).ForEachBucket(func(id []byte) error {
			s := tx.Bucket([]byte("sessions")).Bucket(id)
			if err := s.Delete([]byte("s")); err != nil {
				return err
			}
			c := s.Bucket([]byte("c"))
			if c == nil {
				return nil
			}
			var drop [][]byte
			_ = c.ForEach(func(k, _ []byte) error {
				if binary.BigEndian.Uint64(k) >= keepBelow {
					drop = append(drop, bytes.Clone(k))
				}
				return nil
			})
			for _, k := range drop {
				if err := c.Delete(k); err != nil {
					return err
				}
			}
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
}

// State written without checksums (2f2e872: none at all; an old voter after a
// new snapshot: none past some seq) is converted when the FSM opens it: reads
// then verify, and a byte flipped afterwards is caught.
func TestChecksumsAddedToOldState(t *testing.T) {
	for _, tc := range []struct {
		name      string
		keepBelow uint64
	}{
		{"written by 2f2e872", 0},
		{"appended by an old voter", 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f, db := newTestFSM1(t) // checksums were missing only in layout 1
			f.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, createCmd("s")),
				entry(t, 2, 100, appendCmd("s", 0, openTurn...)),
				entry(t, 3, 100, appendCmd("s", 2, `{"type":"step/end","seq":2,"time":3,"data":{"turn":1,"step":1}}`)),
			})
			path := db.Path()
			db.Close()
			stripSums(t, path, tc.keepBelow)

			db, err := storage.OpenState(path, storage.StateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if _, err := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil); err != nil {
				t.Fatal(err)
			}
			err = db.View(func(tx *storage.Tx) error {
				if !tx.SumsCurrent() {
					t.Error("checksums not current after the conversion")
				}
				return VerifyAll(tx)
			})
			if err != nil {
				t.Fatalf("verify after the conversion: %v", err)
			}
			db.Close()
			corrupt.FlipAll(t, path, []byte(`"step/end"`), 2, nil)
			db, err = storage.OpenState(path, storage.StateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			if err := db.View(VerifyAll); !errors.Is(err, sessionstore.ErrCorruption) {
				t.Fatalf("verify of converted state with a flipped event = %v, want CORRUPTION", err)
			}
		})
	}
}
