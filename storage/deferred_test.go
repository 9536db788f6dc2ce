package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
)

// Readers see every batch applied before they began, however deferred
// commits and other readers' commits interleave with them: a writer applies
// numbered batches and publishes each number once UpdateDeferred returns;
// readers on other goroutines read the latest published number and must
// find its key.
func TestUpdateDeferredReadersSeeEverythingApplied(t *testing.T) {
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	key := func(i uint64) []byte { return binary.BigEndian.AppendUint64([]byte("t-"), i) }
	const batches = 3000
	var applied atomic.Uint64
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for r := 0; r < 4; r++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				want := applied.Load()
				if want == 0 {
					continue
				}
				err := s.View(func(tx *Tx) error {
					if tx.meta().Get(key(want)) == nil {
						return errors.New("missing")
					}
					return nil
				})
				if err != nil {
					t.Errorf("batch %d applied before the read began: %v", want, err)
					return
				}
			}
		}()
	}
	for i := uint64(1); i <= batches; i++ {
		if err := s.UpdateDeferred(func(tx *Tx) error { return tx.meta().Put(key(i), []byte("v")) }); err != nil {
			t.Fatal(err)
		}
		applied.Store(i)
		if i%100 == 0 {
			if err := s.Sync(); err != nil { // the node's periodic flush
				t.Fatal(err)
			}
		}
	}
	close(stop)
	wg.Wait()
}

// A batch that fails rolls back every batch since the last commit; from then
// on the database refuses everything, so nothing reads a state that lacks
// batches already answered.
func TestUpdateDeferredFailureIsSticky(t *testing.T) {
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.UpdateDeferred(func(tx *Tx) error { return tx.meta().Put([]byte("t-a"), []byte("v")) }); err != nil {
		t.Fatal(err)
	}
	boom := errors.New("boom")
	if err := s.UpdateDeferred(func(tx *Tx) error { return boom }); !errors.Is(err, boom) {
		t.Fatalf("failing batch: %v", err)
	}
	for name, call := range map[string]func() error{
		"View":           func() error { return s.View(func(*Tx) error { return nil }) },
		"Update":         func() error { return s.Update(func(*Tx) error { return nil }) },
		"UpdateDeferred": func() error { return s.UpdateDeferred(func(*Tx) error { return nil }) },
		"Sync":           s.Sync,
		"BeginSnapshot":  func() error { _, err := s.BeginSnapshot(); return err },
	} {
		if err := call(); !errors.Is(err, ErrStateFailed) {
			t.Errorf("%s after a failed batch: %v, want ErrStateFailed", name, err)
		}
	}
}

// Deferred batches share the sessions' staged records until the commit: each
// batch reads what the previous ones wrote (cold and hot records, the size
// of request results), a session deleted
// in a later batch is gone for the next batches and is not brought back by
// its staged counters at the commit, and after the commit readers find
// exactly the last state.
func TestUpdateDeferredStagesRecordsUntilTheCommit(t *testing.T) {
	s := openLayout2(t)
	var index uint64
	batch := func(fn func(tx *Tx) error) {
		t.Helper()
		if err := s.UpdateDeferred(func(tx *Tx) error {
			index++
			tx.BeginEntry(index)
			return fn(tx)
		}); err != nil {
			t.Fatal(err)
		}
	}
	want := func(tx *Tx, id, rec string) error {
		got, err := tx.Record(id)
		if err != nil || string(got) != rec {
			return fmt.Errorf("record of %s: %q, %v; want %q", id, got, err, rec)
		}
		return nil
	}
	batch(func(tx *Tx) error {
		if err := tx.PutRecord("a", []byte("C1"), []byte("H1")); err != nil {
			return err
		}
		return tx.PutRecord("b", []byte("B1"), []byte("h1"))
	})
	for i := range 3 {
		batch(func(tx *Tx) error {
			if err := want(tx, "a", fmt.Sprintf("C1H%d", i+1)); err != nil {
				return err
			}
			h, _, err := tx.hot2("a")
			if err != nil {
				return err
			}
			if err := tx.AppendFrame("a", 1, h.frames+1, h.end, [][]byte{fmt.Appendf(nil, `{"seq":%d}`, h.end)}); err != nil {
				return err
			}
			return tx.PutRecord("a", []byte("C1"), fmt.Appendf(nil, "H%d", i+2))
		})
	}
	batch(func(tx *Tx) error {
		if err := want(tx, "b", "B1h1"); err != nil {
			return err
		}
		if err := tx.PutRecord("b", []byte("B2"), []byte("h2")); err != nil { // the cold part changes
			return err
		}
		return want(tx, "b", "B2h2")
	})
	batch(func(tx *Tx) error {
		if n := tx.RequestBytes("a"); n != 0 {
			return fmt.Errorf("a keeps %d bytes of request results, want 0", n)
		}
		return tx.PutRequestResult("a", "r1", 1, []byte("xyz"), true)
	})
	batch(func(tx *Tx) error {
		if n := tx.RequestBytes("a"); n != 5 { // "r1" and "xyz"
			return fmt.Errorf("a keeps %d bytes of request results, want 5", n)
		}
		if err := want(tx, "a", "C1H4"); err != nil {
			return err
		}
		return tx.DeleteSession("b", 0)
	})
	batch(func(tx *Tx) error { return want(tx, "b", "") })
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	err := s.View(func(tx *Tx) error {
		if err := want(tx, "a", "C1H4"); err != nil {
			return err
		}
		if err := want(tx, "b", ""); err != nil {
			return err
		}
		if n := tx.tx.Bucket(bucketHot).Stats().KeyN; n != 1 {
			return fmt.Errorf("%d hot records after the commit, want 1 (a's)", n)
		}
		evs, err := tx.Events("a", 1, 0, 3)
		if err != nil || len(evs) != 3 || string(evs[2]) != `{"seq":2}` {
			return fmt.Errorf("a's events %q, %v", evs, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Layout reports a conversion still held in deferred batches, and leaves
// them uncommitted (the leader asks every 100 ms).
func TestLayoutSeesDeferredBatchesWithoutCommitting(t *testing.T) {
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if got := s.Layout(); got != 1 {
		t.Fatalf("a new state database is in layout %d, want 1", got)
	}
	err = s.UpdateDeferred(func(tx *Tx) error {
		if err := tx.PrepareLayout2(); err != nil {
			return err
		}
		return tx.FinishLayout2()
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := s.Layout(); got != 2 {
		t.Fatalf("after a deferred conversion: layout %d, want 2", got)
	}
	if !s.hasPending.Load() || s.pending == nil {
		t.Fatal("Layout committed the deferred batches")
	}
	if err := s.Sync(); err != nil {
		t.Fatal(err)
	}
	if got := s.Layout(); got != 2 {
		t.Fatalf("after the commit: layout %d, want 2", got)
	}
}
