package jepsen

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/storage"
)

// The corrupt-disk fault's flips, on files the store's own code wrote, must
// be damage the store's own checks see: otherwise a scenario would
// "verify" a fault that damaged nothing that matters.

// writeWAL writes entries 1..last into a fresh Raft log in dir.
func writeWAL(t *testing.T, dir string, last uint64) {
	t.Helper()
	w, err := storage.OpenRaftWAL(dir, 0)
	if err != nil {
		t.Fatal(err)
	}
	var logs []*raft.Log
	for i := uint64(1); i <= last; i++ {
		logs = append(logs, &raft.Log{Index: i, Term: 1, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("entry %d", i))})
	}
	if err := w.StoreLogs(logs); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestFlipLastWALRecord(t *testing.T) {
	for _, tc := range []struct {
		name      string
		committed uint64 // what the node knows was committed when it opens the log
		refused   bool
	}{
		{"above the committed index: a torn tail, cut", 9, false},
		{"at the committed index: refused", 10, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for seed := int64(0); seed < 20; seed++ {
				dir := t.TempDir()
				writeWAL(t, dir, 10)
				_, index, err := flipLastWALRecord(dir, rand.New(rand.NewSource(seed)))
				if err != nil || index != 10 {
					t.Fatalf("seed %d: flip: index %d, %v", seed, index, err)
				}
				w, err := storage.OpenRaftWAL(dir, tc.committed)
				if tc.refused {
					if !errors.Is(err, storage.ErrWALCommitted) {
						t.Fatalf("seed %d: open = %v, want ErrWALCommitted", seed, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("seed %d: open: %v", seed, err)
				}
				tr, ok := w.Truncation()
				last, _ := w.LastIndex()
				w.Close()
				if !ok || tr.Index != 10 || last != 9 {
					t.Fatalf("seed %d: truncation %+v (%v), last %d; want the record 10 cut", seed, tr, ok, last)
				}
			}
		})
	}
}

func TestFlipLastWALRecord_NothingToFlip(t *testing.T) {
	dir := t.TempDir()
	w, err := storage.OpenRaftWAL(dir, 0) // an empty log, as a repair leaves it
	if err != nil {
		t.Fatal(err)
	}
	w.Close()
	if _, _, err := flipLastWALRecord(dir, rand.New(rand.NewSource(1))); !errors.Is(err, errNothingToFlip) {
		t.Fatalf("empty log: %v, want errNothingToFlip", err)
	}
}

func TestFlipStatePages(t *testing.T) {
	for seed := int64(0); seed < 20; seed++ {
		path := filepath.Join(t.TempDir(), "state.db")
		db, err := storage.OpenState(path, storage.StateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for i := uint64(1); i <= 50; i++ {
			if err := db.Update(func(tx *storage.Tx) error { return tx.SetApplied(i, 1) }); err != nil {
				t.Fatal(err)
			}
		}
		db.Close()
		if err := storage.CheckStateFile(path); err != nil {
			t.Fatalf("before the flip: %v", err)
		}
		applied, err := committedEvidence(filepath.Dir(path))
		if err != nil || applied != 50 {
			t.Fatalf("committed evidence %d, %v; want 50", applied, err)
		}
		if _, err := flipStatePages(path, rand.New(rand.NewSource(seed))); err != nil {
			t.Fatal(err)
		}
		if err := storage.CheckStateFile(path); !errors.Is(err, storage.ErrStateDamaged) {
			t.Fatalf("seed %d: after the flip: %v, want ErrStateDamaged", seed, err)
		}
	}
}

// The artifact damage flips a bit of the original, and half the time also
// changes the file's size (what the start-up pass notices).
func TestDamageArtifact(t *testing.T) {
	sizes := map[bool]int{}
	for seed := int64(0); seed < 20; seed++ {
		dir := t.TempDir()
		path := filepath.Join(dir, "artifacts", "ab", "s-1", "session.jsonl.zstd")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		orig := storage.EncodeFrame(nil, []byte(`{"type":"header"}`+"\n"))
		orig = storage.EncodeFrame(orig, []byte(`{"type":"user","seq":0}`+"\n"))
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		dmg := &diskDamage{}
		if err := damageArtifact(dir, rand.New(rand.NewSource(seed)), dmg); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if dmg.artPath != path || len(got) != dmg.artTotal || len(got) < len(orig) || bytes.HasPrefix(got, orig[:dmg.artFlip+1]) {
			t.Fatalf("seed %d: damage %+v left %d bytes of %d, flipped byte intact: %v", seed, dmg, len(got), len(orig), bytes.HasPrefix(got, orig[:dmg.artFlip+1]))
		}
		sizes[len(got) == len(orig)]++
	}
	if sameSizeArtifactFlips && (sizes[true] == 0 || sizes[false] == 0) {
		t.Fatalf("same size / grown: %v; want both", sizes)
	}
	if !sameSizeArtifactFlips && sizes[true] > 0 {
		t.Fatalf("%d same-size damages although they are off", sizes[true])
	}
}
