package storage

import (
	"encoding/binary"
	"errors"
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
