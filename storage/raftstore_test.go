package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// legacyBucketLog is the bucket that held the Raft log before it moved to RaftWAL;
// files written then still have it.
var legacyBucketLog = []byte("raft_log")

// openTestRaftStore opens a RaftStore in a fresh temporary directory and closes it
// when the test ends.
func openTestRaftStore(tb testing.TB) *RaftStore {
	tb.Helper()
	s, err := OpenRaftStore(filepath.Join(tb.TempDir(), "raft.db"))
	if err != nil {
		tb.Fatalf("OpenRaftStore: %v", err)
	}
	tb.Cleanup(func() { s.Close() })
	return s
}

// reopenTestRaftStore closes s and opens its file again.
func reopenTestRaftStore(tb testing.TB, s *RaftStore) *RaftStore {
	tb.Helper()
	if err := s.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	s2, err := OpenRaftStore(s.Path())
	if err != nil {
		tb.Fatalf("reopen %s: %v", s.Path(), err)
	}
	tb.Cleanup(func() { s2.Close() })
	return s2
}

func TestRaftStore_Empty(t *testing.T) {
	s := openTestRaftStore(t)

	// raft.StableStore: a missing key is the zero value without an error. NewRaft
	// reads CurrentTerm of a fresh store and must start.
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 0 {
		t.Errorf("GetUint64(missing) = %d, %v; want 0, nil", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || v != nil {
		t.Errorf("Get(missing) = %q, %v; want nil, nil", v, err)
	}
	// An empty log store, so that only the stable store can report state.
	if ok, err := raft.HasExistingState(raft.NewInmemStore(), s, raft.NewInmemSnapshotStore()); err != nil || ok {
		t.Errorf("raft.HasExistingState(fresh store) = %v, %v; want false, nil", ok, err)
	}
}

func TestRaftStore_StableStore(t *testing.T) {
	s := openTestRaftStore(t)
	bytesCases := []struct {
		name string
		key  []byte
		vals [][]byte // written in order; the last one is read back
	}{
		{"simple", []byte("LastVoteCand"), [][]byte{[]byte("node-1")}},
		{"overwrite", []byte("k"), [][]byte{[]byte("first"), []byte("second")}},
		{"binary key and value", []byte{0, 0xff, 1}, [][]byte{{0, 0, 0}}},
	}
	for _, tt := range bytesCases {
		t.Run("Set/"+tt.name, func(t *testing.T) {
			for _, v := range tt.vals {
				if err := s.Set(tt.key, v); err != nil {
					t.Fatalf("Set(%q, %q): %v", tt.key, v, err)
				}
			}
			want := tt.vals[len(tt.vals)-1]
			got, err := s.Get(tt.key)
			if err != nil || !bytes.Equal(got, want) {
				t.Errorf("Get(%q) = %q, %v; want %q, nil", tt.key, got, err, want)
			}
		})
	}
	t.Run("Set/empty value is present", func(t *testing.T) {
		if err := s.Set([]byte("empty"), nil); err != nil {
			t.Fatal(err)
		}
		got, err := s.Get([]byte("empty"))
		if err != nil || got == nil || len(got) != 0 {
			t.Errorf("Get(empty) = %#v, %v; want non-nil empty slice, nil", got, err)
		}
	})
	t.Run("Set/empty key is an error", func(t *testing.T) {
		if err := s.Set(nil, []byte("v")); err == nil {
			t.Error("Set(nil key) = nil, want an error")
		}
	})
	t.Run("Get returns a copy", func(t *testing.T) {
		if err := s.Set([]byte("copy"), []byte("abc")); err != nil {
			t.Fatal(err)
		}
		got, _ := s.Get([]byte("copy"))
		got[0] = 'X'
		if again, _ := s.Get([]byte("copy")); string(again) != "abc" {
			t.Errorf("Get after editing a result = %q, want abc", again)
		}
	})

	uintCases := []struct {
		name string
		key  string
		vals []uint64
	}{
		{"CurrentTerm", "CurrentTerm", []uint64{1}},
		{"zero", "zero", []uint64{0}},
		{"max", "max", []uint64{1<<64 - 1}},
		{"overwrite down", "LastVoteTerm", []uint64{7, 3}},
	}
	for _, tt := range uintCases {
		t.Run("SetUint64/"+tt.name, func(t *testing.T) {
			for _, v := range tt.vals {
				if err := s.SetUint64([]byte(tt.key), v); err != nil {
					t.Fatalf("SetUint64(%q, %d): %v", tt.key, v, err)
				}
			}
			want := tt.vals[len(tt.vals)-1]
			if got, err := s.GetUint64([]byte(tt.key)); err != nil || got != want {
				t.Errorf("GetUint64(%q) = %d, %v; want %d, nil", tt.key, got, err, want)
			}
		})
	}
	t.Run("GetUint64 of a value that is not 8 bytes", func(t *testing.T) {
		if err := s.Set([]byte("short"), []byte{1, 2, 3}); err != nil {
			t.Fatal(err)
		}
		if got, err := s.GetUint64([]byte("short")); err == nil {
			t.Errorf("GetUint64(3-byte value) = %d, nil; want an error", got)
		}
	})
}

func TestRaftStore_Restart(t *testing.T) {
	s := openTestRaftStore(t)
	if err := s.SetUint64([]byte("CurrentTerm"), 42); err != nil {
		t.Fatal(err)
	}
	if err := s.Set([]byte("LastVoteCand"), []byte("node-2")); err != nil {
		t.Fatal(err)
	}
	path := s.Path()

	for round := 1; round <= 2; round++ {
		s = reopenTestRaftStore(t, s)
		if s.Path() != path {
			t.Errorf("round %d: Path() = %q, want %q", round, s.Path(), path)
		}
		if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 42 {
			t.Errorf("round %d: GetUint64(CurrentTerm) = %d, %v; want 42, nil", round, v, err)
		}
		if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-2" {
			t.Errorf("round %d: Get(LastVoteCand) = %q, %v; want node-2, nil", round, v, err)
		}
	}
}

func TestOpenRaftStore(t *testing.T) {
	t.Run("creates the file 0600", func(t *testing.T) {
		s := openTestRaftStore(t)
		fi, err := os.Stat(s.Path())
		if err != nil {
			t.Fatal(err)
		}
		if perm := fi.Mode().Perm(); perm&^0o600 != 0 {
			t.Errorf("file mode %v, want at most 0600", perm)
		}
	})
	t.Run("parent directory must exist", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "missing", "raft.db")
		if s, err := OpenRaftStore(path); err == nil {
			s.Close()
			t.Fatalf("OpenRaftStore(%s) = nil error, want one", path)
		}
		if _, err := os.Stat(filepath.Dir(path)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("OpenRaftStore created %s (stat: %v)", filepath.Dir(path), err)
		}
	})
	t.Run("other format version is refused", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "raft.db")
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		err = db.Update(func(tx *bbolt.Tx) error {
			b, err := tx.CreateBucket(raftBucketMeta)
			if err != nil {
				return err
			}
			return b.Put(raftKeyFormat, binary.BigEndian.AppendUint64(nil, RaftStoreFormatVersion+1))
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}
		if s, err := OpenRaftStore(path); err == nil {
			s.Close()
			t.Fatal("OpenRaftStore of a format-2 file = nil error, want one")
		}
	})
	t.Run("file of the previous version with a raft_log bucket opens", func(t *testing.T) {
		// The layout written while the Raft log still lived in this file: same format
		// version, a raft_log bucket with an entry, stable values, a node-local bucket.
		path := filepath.Join(t.TempDir(), "raft.db")
		db, err := bbolt.Open(path, 0o600, nil)
		if err != nil {
			t.Fatal(err)
		}
		logKey, logVal := binary.BigEndian.AppendUint64(nil, 7), []byte{1, 7, 1, 0, 0, 0, 0, 0xde, 0xad, 0xbe, 0xef}
		err = db.Update(func(tx *bbolt.Tx) error {
			meta, err := tx.CreateBucket(raftBucketMeta)
			if err != nil {
				return err
			}
			if err := meta.Put(raftKeyFormat, binary.BigEndian.AppendUint64(nil, RaftStoreFormatVersion)); err != nil {
				return err
			}
			log, err := tx.CreateBucket(legacyBucketLog)
			if err != nil {
				return err
			}
			if err := log.Put(logKey, logVal); err != nil {
				return err
			}
			st, err := tx.CreateBucket(raftBucketStable)
			if err != nil {
				return err
			}
			if err := st.Put([]byte("CurrentTerm"), binary.BigEndian.AppendUint64(nil, 5)); err != nil {
				return err
			}
			if err := st.Put([]byte("LastVoteCand"), []byte("node-3")); err != nil {
				return err
			}
			wm, err := tx.CreateBucket(bucketWatermarksV0)
			if err != nil {
				return err
			}
			v0 := binary.BigEndian.AppendUint64(nil, 9)                               // last index
			v0 = binary.BigEndian.AppendUint64(v0, 10)                                // bytes
			v0 = binary.BigEndian.AppendUint64(v0, 2)                                 // frames
			v0 = append(v0, "/old/data/artifacts/_no-cwd/session-a/"+ArtifactName...) // 2f2e872: absolute
			return wm.Put([]byte("session-a"), v0)
		})
		if err != nil {
			t.Fatal(err)
		}
		if err := db.Close(); err != nil {
			t.Fatal(err)
		}

		for round := 1; round <= 2; round++ {
			s, err := OpenRaftStore(path)
			if err != nil {
				t.Fatalf("round %d: OpenRaftStore of a file with a raft_log bucket: %v", round, err)
			}
			if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 5 {
				t.Errorf("round %d: GetUint64(CurrentTerm) = %d, %v; want 5, nil", round, v, err)
			}
			if v, err := s.Get([]byte("LastVoteCand")); err != nil || string(v) != "node-3" {
				t.Errorf("round %d: Get(LastVoteCand) = %q, %v; want node-3, nil", round, v, err)
			}
			wantPath := filepath.Join("/new/artifacts", "_no-cwd", "session-a", ArtifactName)
			if ws, err := s.Watermarks("/new/artifacts"); err != nil || ws["session-a"].LastIndex != 9 || ws["session-a"].Path != wantPath || ws["session-a"].HasSum {
				t.Errorf("round %d: Watermarks() = %v, %v; want session-a at 9 in %s", round, ws, err, wantPath)
			}
			if err := s.SetUint64([]byte("CurrentTerm"), 5); err != nil {
				t.Errorf("round %d: SetUint64: %v", round, err)
			}
			// The old log is left alone, neither deleted nor rewritten.
			err = s.View(func(tx *bbolt.Tx) error {
				b := tx.Bucket(legacyBucketLog)
				if b == nil {
					return errors.New("raft_log bucket is gone")
				}
				if got := b.Get(logKey); !bytes.Equal(got, logVal) {
					return fmt.Errorf("raft_log entry = %x, want %x", got, logVal)
				}
				return nil
			})
			if err != nil {
				t.Errorf("round %d: %v", round, err)
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
		}
	})
	t.Run("a new file has no raft_log bucket", func(t *testing.T) {
		s := openTestRaftStore(t)
		err := s.View(func(tx *bbolt.Tx) error {
			if tx.Bucket(legacyBucketLog) != nil {
				return errors.New("OpenRaftStore created a raft_log bucket")
			}
			return nil
		})
		if err != nil {
			t.Error(err)
		}
	})
	t.Run("second open of an open file fails", func(t *testing.T) {
		if testing.Short() {
			t.Skip("waits for the 1 s lock timeout")
		}
		s := openTestRaftStore(t)
		if s2, err := OpenRaftStore(s.Path()); err == nil {
			s2.Close()
			t.Fatal("second OpenRaftStore of an open file = nil error, want the lock timeout")
		}
	})
}

// Node-local buckets of other files share the file through Update and View and
// survive a restart; they do not disturb the stable store.
func TestRaftStore_UpdateView(t *testing.T) {
	s := openTestRaftStore(t)
	bucket, key := []byte("artifact_watermarks"), []byte("session-a")
	if err := s.SetUint64([]byte("CurrentTerm"), 3); err != nil {
		t.Fatal(err)
	}
	err := s.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucket)
		if err != nil {
			return err
		}
		return b.Put(key, []byte("17"))
	})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	errRollback := errors.New("roll back")
	err = s.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(bucket).Put(key, []byte("99")); err != nil {
			return err
		}
		return errRollback
	})
	if !errors.Is(err, errRollback) {
		t.Fatalf("Update returning an error = %v, want %v", err, errRollback)
	}
	s = reopenTestRaftStore(t, s)
	var got string
	err = s.View(func(tx *bbolt.Tx) error {
		got = string(tx.Bucket(bucket).Get(key))
		return nil
	})
	if err != nil || got != "17" {
		t.Errorf("View after restart = %q, %v; want 17, nil", got, err)
	}
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 3 {
		t.Errorf("GetUint64(CurrentTerm) after restart = %d, %v; want 3, nil", v, err)
	}
}
