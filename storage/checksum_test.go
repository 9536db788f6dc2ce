package storage

import (
	"errors"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
)

// Every kind of damage to a session's stored events is a CORRUPTION error on
// read, never bytes: a value, a key, a checksum, a sums entry's key, a missing
// sums entry; and the sum covers the incarnation and the session id.
func TestEventChecksums(t *testing.T) {
	evs := [][]byte{[]byte(`{"a":0}`), []byte(`{"a":1}`), []byte(`{"a":2}`), []byte(`{"a":3}`)}
	for _, tc := range []struct {
		name   string
		damage func(s *bbolt.Bucket) error // the session's bucket
		inc    uint64                      // read as incarnation (stored: 1)
		ok     bool
	}{
		{"intact", func(*bbolt.Bucket) error { return nil }, 1, true},
		{"other incarnation", func(*bbolt.Bucket) error { return nil }, 2, false},
		{"value flipped", func(s *bbolt.Bucket) error { return s.Bucket(bucketEvents).Put(u64(2), []byte(`{"a":7}`)) }, 1, false},
		{"key moved past the end", func(s *bbolt.Bucket) error {
			e := s.Bucket(bucketEvents)
			if err := e.Delete(u64(3)); err != nil {
				return err
			}
			return e.Put(u64(11), evs[3])
		}, 1, false},
		{"key moved inside", func(s *bbolt.Bucket) error { return s.Bucket(bucketEvents).Delete(u64(1)) }, 1, false},
		{"checksum flipped", func(s *bbolt.Bucket) error {
			c := s.Bucket(bucketSums)
			v := append([]byte(nil), c.Get(u64(2))...)
			v[5] ^= 1
			return c.Put(u64(2), v)
		}, 1, false},
		{"sums entry moved", func(s *bbolt.Bucket) error {
			c := s.Bucket(bucketSums)
			v := append([]byte(nil), c.Get(u64(2))...)
			if err := c.Delete(u64(2)); err != nil {
				return err
			}
			return c.Put(u64(3), v)
		}, 1, false},
		{"sums entry missing", func(s *bbolt.Bucket) error { return s.Bucket(bucketSums).Delete(u64(0)) }, 1, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			db, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			err = db.Update(func(tx *Tx) error {
				if err := tx.PutRecord("s", []byte("rec"), nil); err != nil {
					return err
				}
				if err := tx.PutEvents("s", 1, 0, evs[:2]); err != nil {
					return err
				}
				if err := tx.PutEvents("s", 1, 2, evs[2:]); err != nil {
					return err
				}
				return tc.damage(tx.tx.Bucket(bucketSessions).Bucket([]byte("s")))
			})
			if err != nil {
				t.Fatal(err)
			}
			var got [][]byte
			err = db.View(func(tx *Tx) error {
				got, err = tx.Events("s", tc.inc, 0, 4)
				return err
			})
			if tc.ok {
				if err != nil || len(got) != 4 {
					t.Fatalf("Events = %q, %v; want the 4 events", got, err)
				}
				return
			}
			var ce *ChecksumError
			if !errors.As(err, &ce) || !errors.Is(err, sessionstore.ErrCorruption) || got != nil {
				t.Fatalf("Events = %q, %v; want a CORRUPTION *ChecksumError and no events", got, err)
			}
			if db.ChecksumFailures() != 1 {
				t.Errorf("ChecksumFailures = %d, want 1", db.ChecksumFailures())
			}
		})
	}
}

// A record is verified together with its session id: moved to another id
// (a flipped bucket key) or changed, it fails.
func TestRecordChecksum(t *testing.T) {
	db, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *Tx) error {
		if err := tx.PutRecord("s", []byte("rec"), nil); err != nil {
			return err
		}
		s := tx.tx.Bucket(bucketSessions).Bucket([]byte("s"))
		moved, err := tx.tx.Bucket(bucketSessions).CreateBucket([]byte("t"))
		if err != nil {
			return err
		}
		if err := moved.Put(keyRecord, s.Get(keyRecord)); err != nil {
			return err
		}
		return moved.Put(keyRecordSum, s.Get(keyRecordSum))
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = db.View(func(tx *Tx) error {
		if rec, err := tx.Record("s"); err != nil || string(rec) != "rec" {
			t.Errorf("Record(s) = %q, %v", rec, err)
		}
		if _, err := tx.Record("t"); !errors.Is(err, sessionstore.ErrCorruption) {
			t.Errorf("Record of a record moved to another id = %v, want CORRUPTION", err)
		}
		if err := tx.ForEachSession("", false, func(string, []byte) error { return nil }); !errors.Is(err, sessionstore.ErrCorruption) {
			t.Errorf("ForEachSession over a moved record = %v, want CORRUPTION", err)
		}
		return nil
	})
}
