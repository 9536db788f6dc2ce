package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

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

// testRaftLog builds a deterministic entry whose fields vary with the index:
// empty and nil Data, Extensions present or not, zero and non-zero AppendedAt with
// nanoseconds, every log type.
func testRaftLog(index uint64) *raft.Log {
	l := &raft.Log{
		Index: index,
		Term:  1 + index/7 + (index%3)<<40,
		Type:  raft.LogType(index % 6),
	}
	switch index % 4 {
	case 0: // nil Data
	case 1:
		l.Data = []byte{}
	default:
		l.Data = bytes.Repeat([]byte{byte(index)}, int(index%300)+1)
	}
	if index%5 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if index%2 == 1 {
		l.AppendedAt = time.Date(2025, 11, 29, 23, 58, 0, int(index)*1_000_003%1_000_000_000, time.FixedZone("x", 3600))
	}
	return l
}

func testRaftLogs(from, to uint64) []*raft.Log {
	logs := make([]*raft.Log, 0, to-from+1)
	for i := from; i <= to; i++ {
		logs = append(logs, testRaftLog(i))
	}
	return logs
}

// checkRaftLogEqual reports every field of got that differs from want.
func checkRaftLogEqual(tb testing.TB, got, want *raft.Log) {
	tb.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type {
		tb.Errorf("log %d: got index %d term %d type %v, want index %d term %d type %v",
			want.Index, got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	}
	if !bytes.Equal(got.Data, want.Data) {
		tb.Errorf("log %d: got data %q, want %q", want.Index, got.Data, want.Data)
	}
	if !bytes.Equal(got.Extensions, want.Extensions) {
		tb.Errorf("log %d: got extensions %q, want %q", want.Index, got.Extensions, want.Extensions)
	}
	if !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
		tb.Errorf("log %d: got appended_at %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
	}
}

// checkRaftLogBounds checks FirstIndex and LastIndex.
func checkRaftLogBounds(tb testing.TB, s *RaftStore, first, last uint64) {
	tb.Helper()
	if got, err := s.FirstIndex(); err != nil || got != first {
		tb.Errorf("FirstIndex() = %d, %v; want %d, nil", got, err, first)
	}
	if got, err := s.LastIndex(); err != nil || got != last {
		tb.Errorf("LastIndex() = %d, %v; want %d, nil", got, err, last)
	}
}

func TestRaftStore_Empty(t *testing.T) {
	s := openTestRaftStore(t)
	checkRaftLogBounds(t, s, 0, 0)

	for _, idx := range []uint64{0, 1, 1 << 63} {
		var l raft.Log
		if err := s.GetLog(idx, &l); err != raft.ErrLogNotFound {
			t.Errorf("GetLog(%d) = %v, want raft.ErrLogNotFound (compared with ==, as raft does)", idx, err)
		}
	}

	// raft.StableStore: a missing key is the zero value without an error. NewRaft
	// reads CurrentTerm of a fresh store and must start.
	if v, err := s.GetUint64([]byte("CurrentTerm")); err != nil || v != 0 {
		t.Errorf("GetUint64(missing) = %d, %v; want 0, nil", v, err)
	}
	if v, err := s.Get([]byte("LastVoteCand")); err != nil || v != nil {
		t.Errorf("Get(missing) = %q, %v; want nil, nil", v, err)
	}
	if ok, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || ok {
		t.Errorf("raft.HasExistingState(fresh store) = %v, %v; want false, nil", ok, err)
	}
	if err := s.DeleteRange(1, 10); err != nil {
		t.Errorf("DeleteRange on an empty log: %v", err)
	}
	if err := s.StoreLogs(nil); err != nil {
		t.Errorf("StoreLogs(nil): %v", err)
	}
	checkRaftLogBounds(t, s, 0, 0)
}

func TestRaftStore_StoreAndGet(t *testing.T) {
	tests := []struct {
		name  string
		last  uint64
		batch int // entries per StoreLogs call; 0 means StoreLog one at a time
	}{
		{"one entry StoreLog", 1, 0},
		{"one entry StoreLogs", 1, 1},
		{"10 entries one at a time", 10, 0},
		{"1000 entries in one call", 1000, 1000},
		{"1000 entries in batches of 64", 1000, 64},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestRaftStore(t)
			want := testRaftLogs(1, tt.last)
			if tt.batch == 0 {
				for _, l := range want {
					if err := s.StoreLog(l); err != nil {
						t.Fatalf("StoreLog(%d): %v", l.Index, err)
					}
				}
			} else {
				for i := 0; i < len(want); i += tt.batch {
					if err := s.StoreLogs(want[i:min(i+tt.batch, len(want))]); err != nil {
						t.Fatalf("StoreLogs(from %d): %v", want[i].Index, err)
					}
				}
			}
			checkRaftLogBounds(t, s, 1, tt.last)
			for _, w := range want {
				var got raft.Log
				if err := s.GetLog(w.Index, &got); err != nil {
					t.Fatalf("GetLog(%d): %v", w.Index, err)
				}
				checkRaftLogEqual(t, &got, w)
			}
			var l raft.Log
			if err := s.GetLog(tt.last+1, &l); err != raft.ErrLogNotFound {
				t.Errorf("GetLog(last+1) = %v, want raft.ErrLogNotFound", err)
			}
		})
	}
}

func TestRaftStore_FieldRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		log  raft.Log
	}{
		{"zero entry", raft.Log{Index: 1}},
		{"empty data, empty extensions", raft.Log{Index: 2, Term: 1, Data: []byte{}, Extensions: []byte{}}},
		{"all fields", raft.Log{Index: 3, Term: 9, Type: raft.LogConfiguration, Data: []byte("cmd"), Extensions: []byte{0, 1, 2}, AppendedAt: at}},
		{"appended_at with monotonic reading", raft.Log{Index: 4, Term: 9, Data: []byte{0}, AppendedAt: time.Now()}},
		{"appended_at before 1970", raft.Log{Index: 5, Term: 9, AppendedAt: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)}},
		{"appended_at beyond int64 nanoseconds", raft.Log{Index: 6, AppendedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{"max index and term", raft.Log{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: 255, Data: bytes.Repeat([]byte{0xff}, 1<<16)}},
		{"binary data", raft.Log{Index: 8, Term: 2, Data: []byte{0, 0xff, '\n', 0x80}, Extensions: []byte("x")}},
	}
	s := openTestRaftStore(t)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.StoreLog(&tt.log); err != nil {
				t.Fatalf("StoreLog: %v", err)
			}
			got := raft.Log{Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: time.Now()}
			if err := s.GetLog(tt.log.Index, &got); err != nil {
				t.Fatalf("GetLog: %v", err)
			}
			checkRaftLogEqual(t, &got, &tt.log)

			// The codec alone, too: decode(encode(l)) == l.
			var dec raft.Log
			if err := decodeRaftLog(appendRaftLog(nil, &tt.log), &dec); err != nil {
				t.Fatalf("decodeRaftLog(appendRaftLog): %v", err)
			}
			checkRaftLogEqual(t, &dec, &tt.log)
			if n, max := len(appendRaftLog(nil, &tt.log)), raftLogMaxSize(&tt.log); n > max {
				t.Errorf("encoded %d bytes, raftLogMaxSize says at most %d", n, max)
			}
		})
	}
}

// GetLog hands out copies: neither the caller's slices nor later writes alias
// the database.
func TestRaftStore_GetLogCopies(t *testing.T) {
	s := openTestRaftStore(t)
	in := &raft.Log{Index: 1, Term: 1, Data: []byte("abc"), Extensions: []byte("ext")}
	if err := s.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	in.Data[0] = 'X' // the store must have copied at StoreLog
	var a raft.Log
	if err := s.GetLog(1, &a); err != nil {
		t.Fatal(err)
	}
	a.Data[1] = 'Y'
	a.Extensions[0] = 'Z'
	var b raft.Log
	if err := s.GetLog(1, &b); err != nil {
		t.Fatal(err)
	}
	if string(b.Data) != "abc" || string(b.Extensions) != "ext" {
		t.Errorf("GetLog after caller edits = %q/%q, want abc/ext", b.Data, b.Extensions)
	}
}

func TestRaftStore_DeleteRange(t *testing.T) {
	type deletion struct{ min, max uint64 }
	tests := []struct {
		name        string
		deletes     []deletion
		first, last uint64
		present     []uint64
		absent      []uint64
	}{
		{"head", []deletion{{1, 5}}, 6, 10, []uint64{6, 7, 10}, []uint64{1, 3, 5}},
		{"tail", []deletion{{8, 10}}, 1, 7, []uint64{1, 7}, []uint64{8, 9, 10}},
		{"head then tail", []deletion{{1, 5}, {8, 10}}, 6, 7, []uint64{6, 7}, []uint64{1, 5, 8, 10}},
		{"middle leaves a gap", []deletion{{4, 6}}, 1, 10, []uint64{1, 3, 7, 10}, []uint64{4, 5, 6}},
		{"single entry", []deletion{{5, 5}}, 1, 10, []uint64{4, 6}, []uint64{5}},
		{"everything", []deletion{{1, 10}}, 0, 0, nil, []uint64{1, 10}},
		{"range wider than the log", []deletion{{0, 1 << 63}}, 0, 0, nil, []uint64{1, 10}},
		{"range beyond the log", []deletion{{11, 20}}, 1, 10, []uint64{1, 10}, []uint64{11}},
		{"min above max deletes nothing", []deletion{{7, 3}}, 1, 10, []uint64{3, 5, 7}, nil},
		{"max index", []deletion{{9, 1<<64 - 1}}, 1, 8, []uint64{8}, []uint64{9, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := openTestRaftStore(t)
			if err := s.StoreLogs(testRaftLogs(1, 10)); err != nil {
				t.Fatal(err)
			}
			for _, d := range tt.deletes {
				if err := s.DeleteRange(d.min, d.max); err != nil {
					t.Fatalf("DeleteRange(%d, %d): %v", d.min, d.max, err)
				}
			}
			checkRaftLogBounds(t, s, tt.first, tt.last)
			for _, idx := range tt.present {
				var l raft.Log
				if err := s.GetLog(idx, &l); err != nil {
					t.Errorf("GetLog(%d): %v", idx, err)
					continue
				}
				checkRaftLogEqual(t, &l, testRaftLog(idx))
			}
			for _, idx := range tt.absent {
				var l raft.Log
				if err := s.GetLog(idx, &l); err != raft.ErrLogNotFound {
					t.Errorf("GetLog(%d) in a deleted range = %v, want raft.ErrLogNotFound", idx, err)
				}
			}
		})
	}
}

// After a conflicting suffix is deleted, new entries of a later term replace it.
func TestRaftStore_OverwriteAfterTruncate(t *testing.T) {
	s := openTestRaftStore(t)
	if err := s.StoreLogs(testRaftLogs(1, 10)); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(6, 10); err != nil {
		t.Fatal(err)
	}
	repl := []*raft.Log{{Index: 6, Term: 99, Data: []byte("six")}, {Index: 7, Term: 99, Data: []byte("seven")}}
	if err := s.StoreLogs(repl); err != nil {
		t.Fatal(err)
	}
	checkRaftLogBounds(t, s, 1, 7)
	for _, w := range repl {
		var got raft.Log
		if err := s.GetLog(w.Index, &got); err != nil {
			t.Fatal(err)
		}
		checkRaftLogEqual(t, &got, w)
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
	t.Run("stable keys are not log entries", func(t *testing.T) {
		checkRaftLogBounds(t, s, 0, 0)
	})
}

func TestRaftStore_Restart(t *testing.T) {
	s := openTestRaftStore(t)
	want := testRaftLogs(1, 300)
	if err := s.StoreLogs(want); err != nil {
		t.Fatal(err)
	}
	if err := s.DeleteRange(1, 49); err != nil {
		t.Fatal(err)
	}
	want = want[49:]
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
		checkRaftLogBounds(t, s, 50, 300)
		for _, w := range want {
			var got raft.Log
			if err := s.GetLog(w.Index, &got); err != nil {
				t.Fatalf("round %d: GetLog(%d): %v", round, w.Index, err)
			}
			checkRaftLogEqual(t, &got, w)
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
// survive a restart; they do not disturb the log.
func TestRaftStore_UpdateView(t *testing.T) {
	s := openTestRaftStore(t)
	bucket, key := []byte("artifact_watermarks"), []byte("session-a")
	if err := s.StoreLogs(testRaftLogs(1, 3)); err != nil {
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
	checkRaftLogBounds(t, s, 1, 3)
}

// raftLogWithCRC appends a valid checksum to body, so that a test reaches the
// field checks behind it.
func raftLogWithCRC(body ...byte) []byte {
	return binary.BigEndian.AppendUint32(body, crc32.Checksum(body, raftLogCRCTable))
}

func TestDecodeRaftLog_Corrupt(t *testing.T) {
	valid := appendRaftLog(nil, &raft.Log{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("data"), Extensions: []byte("e"), AppendedAt: time.Unix(1, 2)})
	flipped := bytes.Clone(valid)
	flipped[len(flipped)/2] ^= 0x10
	tests := []struct {
		name    string
		value   []byte
		wantErr error
	}{
		{"empty", nil, errRaftLogCorrupt},
		{"version 0", append([]byte{0}, valid[1:]...), errRaftLogVersion},
		{"version 2", append([]byte{2}, valid[1:]...), errRaftLogVersion},
		{"version byte only", []byte{raftLogVersion}, errRaftLogCorrupt},
		{"flipped bit", flipped, errRaftLogCorrupt},
		{"checksum removed", valid[:len(valid)-4], errRaftLogCorrupt},
		{"trailing byte", append(bytes.Clone(valid), 0), errRaftLogCorrupt},
		{"trailing byte under a valid checksum", raftLogWithCRC(1, 1, 1, 0, 0, 0, 0, 9), errRaftLogCorrupt},
		{"unknown flag", raftLogWithCRC(1, 1, 1, 0, 2, 0, 0), errRaftLogCorrupt},
		{"nanos out of range", raftLogWithCRC(append([]byte{1, 1, 1, 0, 1, 0}, binary.AppendUvarint(nil, 1e9)...)...), errRaftLogCorrupt},
		{"data length beyond the value", raftLogWithCRC(1, 1, 1, 0, 0, 5, 'a', 0), errRaftLogCorrupt},
		{"data length overflows int", raftLogWithCRC(append([]byte{1, 1, 1, 0, 0}, binary.AppendUvarint(nil, 1<<63+5)...)...), errRaftLogCorrupt},
		{"varint overflow", raftLogWithCRC(1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 0, 0, 0, 0), errRaftLogCorrupt},
		{"extensions missing", raftLogWithCRC(1, 1, 1, 0, 0, 0), errRaftLogCorrupt},
	}
	for n := 1; n < len(valid); n++ {
		tests = append(tests, struct {
			name    string
			value   []byte
			wantErr error
		}{fmt.Sprintf("truncated to %d bytes", n), valid[:n], errRaftLogCorrupt})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := raft.Log{Index: 123}
			err := decodeRaftLog(tt.value, &l)
			if !errors.Is(err, tt.wantErr) {
				t.Fatalf("decodeRaftLog(%x) = %v, want %v", tt.value, err, tt.wantErr)
			}
			if l.Index != 123 {
				t.Errorf("decodeRaftLog wrote into the log on failure: %+v", l)
			}
		})
	}
	// The minimal valid encoding, for contrast: the cases above fail on the field
	// they name, not on something else.
	var l raft.Log
	if err := decodeRaftLog(raftLogWithCRC(1, 1, 1, 0, 0, 0, 0), &l); err != nil || l.Index != 1 || l.Term != 1 {
		t.Errorf("decodeRaftLog(minimal) = %+v, %v; want index 1 term 1", l, err)
	}
}

// A damaged value in the file is an error from GetLog, never a panic, and an
// entry under the wrong key is caught by the index check.
func TestRaftStore_GetLogCorrupt(t *testing.T) {
	s := openTestRaftStore(t)
	if err := s.StoreLogs(testRaftLogs(1, 3)); err != nil {
		t.Fatal(err)
	}
	moved := appendRaftLog(nil, testRaftLog(3))
	err := s.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(raftBucketLog)
		if err := b.Put(binary.BigEndian.AppendUint64(nil, 1), []byte{raftLogVersion, 0xde, 0xad}); err != nil {
			return err
		}
		return b.Put(binary.BigEndian.AppendUint64(nil, 2), moved)
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, idx := range []uint64{1, 2} {
		var l raft.Log
		if err := s.GetLog(idx, &l); !errors.Is(err, errRaftLogCorrupt) {
			t.Errorf("GetLog(%d) of a damaged entry = %v, want errRaftLogCorrupt", idx, err)
		}
	}
	var l raft.Log
	if err := s.GetLog(3, &l); err != nil {
		t.Errorf("GetLog(3) of an intact entry: %v", err)
	}

	// A key that is not 8 bytes cannot be an index: one sorting first, one inside
	// the range to delete (between 2 and 3).
	err = s.Update(func(tx *bbolt.Tx) error {
		if err := tx.Bucket(raftBucketLog).Put([]byte{0}, []byte("x")); err != nil {
			return err
		}
		return tx.Bucket(raftBucketLog).Put([]byte{0, 0, 0, 0, 0, 0, 0, 2, 1}, []byte("x"))
	})
	if err != nil {
		t.Fatal(err)
	}
	if idx, err := s.FirstIndex(); !errors.Is(err, errRaftLogCorrupt) {
		t.Errorf("FirstIndex with a 1-byte key = %d, %v; want errRaftLogCorrupt", idx, err)
	}
	if err := s.DeleteRange(0, 5); !errors.Is(err, errRaftLogCorrupt) {
		t.Errorf("DeleteRange over a 1-byte key = %v, want errRaftLogCorrupt", err)
	}
	if err := s.GetLog(3, &l); err != nil {
		t.Errorf("GetLog(3) after the failed DeleteRange: %v (the transaction must roll back)", err)
	}
}

func FuzzDecodeLog(f *testing.F) {
	for _, l := range []*raft.Log{
		{},
		{Index: 1, Term: 1, Type: raft.LogNoop},
		{Index: 1 << 40, Term: 7, Type: raft.LogConfiguration, Data: []byte("config"), Extensions: []byte{1}, AppendedAt: time.Unix(1764460680, 999)},
		testRaftLog(1), testRaftLog(2), testRaftLog(5),
	} {
		f.Add(appendRaftLog(nil, l))
	}
	f.Add([]byte{})
	f.Add([]byte{raftLogVersion})
	f.Add(raftLogWithCRC(1, 1, 1, 0, 0, 5, 'a', 0))
	f.Add([]byte{1, 1, 1, 0, 1, 0x80, 0x01, 0x05, 0, 0}) // a body: flags, time, lengths
	f.Fuzz(func(t *testing.T, v []byte) {
		// v as stored, and v as a body under a valid checksum: random mutations
		// rarely keep the CRC intact, and the field parser behind it must be fuzzed too.
		for _, value := range [][]byte{v, raftLogWithCRC(bytes.Clone(v)...)} {
			var l raft.Log
			if err := decodeRaftLog(value, &l); err != nil {
				if !errors.Is(err, errRaftLogCorrupt) && !errors.Is(err, errRaftLogVersion) {
					t.Fatalf("decodeRaftLog error %v wraps neither errRaftLogCorrupt nor errRaftLogVersion", err)
				}
				continue
			}
			// Whatever decodes re-encodes to an equal entry.
			var again raft.Log
			if err := decodeRaftLog(appendRaftLog(nil, &l), &again); err != nil {
				t.Fatalf("re-encoded entry does not decode: %v", err)
			}
			checkRaftLogEqual(t, &again, &l)
		}
	})
}

// raftTestFSM counts applied commands; its snapshot is the count.
type raftTestFSM struct {
	mu    sync.Mutex
	count uint64
}

func (f *raftTestFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	return f.count
}

func (f *raftTestFSM) Count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *raftTestFSM) Snapshot() (raft.FSMSnapshot, error) {
	return raftTestFSMSnapshot(f.Count()), nil
}

func (f *raftTestFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count = binary.BigEndian.Uint64(b[:])
	return nil
}

type raftTestFSMSnapshot uint64

func (s raftTestFSMSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (raftTestFSMSnapshot) Release() {}

// waitForRaft polls cond until it holds or the deadline passes.
func waitForRaft(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// startTestRaft starts a single-voter raft on s with fresh in-memory transport and
// snapshots, and waits until it leads.
func startTestRaft(tb testing.TB, s *RaftStore, bootstrap bool) (*raft.Raft, *raftTestFSM) {
	tb.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "node-1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.Logger = hclog.NewNullLogger()
	addr, trans := raft.NewInmemTransport("node-1")
	fsm := &raftTestFSM{}
	r, err := raft.NewRaft(conf, fsm, s, s, raft.NewInmemSnapshotStore(), trans)
	if err != nil {
		tb.Fatalf("raft.NewRaft: %v", err)
	}
	tb.Cleanup(func() { r.Shutdown().Error() })
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := r.BootstrapCluster(cfg).Error(); err != nil {
			tb.Fatalf("BootstrapCluster: %v", err)
		}
	}
	waitForRaft(tb, 10*time.Second, "leadership", func() bool { return r.State() == raft.Leader })
	return r, fsm
}

// A real hashicorp/raft node runs on RaftStore, and after a restart on the same
// file replays its log into a fresh FSM.
func TestRaftStore_WithRaft(t *testing.T) {
	const commands = 100
	s := openTestRaftStore(t)
	if ok, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || ok {
		t.Fatalf("HasExistingState(fresh) = %v, %v; want false, nil", ok, err)
	}
	r, fsm := startTestRaft(t, s, true)
	for i := 0; i < commands; i++ {
		f := r.Apply([]byte(fmt.Sprintf("cmd-%d", i)), 5*time.Second)
		if err := f.Error(); err != nil {
			t.Fatalf("Apply %d: %v", i, err)
		}
		if got := f.Response(); got != uint64(i+1) {
			t.Fatalf("Apply %d response = %v, want %d", i, got, i+1)
		}
	}
	if got := fsm.Count(); got != commands {
		t.Fatalf("FSM count = %d, want %d", got, commands)
	}
	lastBefore := r.LastIndex()
	if err := r.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	s = reopenTestRaftStore(t, s)
	last, err := s.LastIndex()
	if err != nil || last < commands || last < lastBefore {
		t.Fatalf("LastIndex after restart = %d, %v; want ≥ %d and ≥ %d", last, err, commands, lastBefore)
	}
	if term, err := s.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
		t.Errorf("stable CurrentTerm after restart = %d, %v; want > 0", term, err)
	}
	if ok, err := raft.HasExistingState(s, s, raft.NewInmemSnapshotStore()); err != nil || !ok {
		t.Fatalf("HasExistingState(after run) = %v, %v; want true, nil", ok, err)
	}
	var l raft.Log
	if err := s.GetLog(last, &l); err != nil {
		t.Fatalf("GetLog(last %d): %v", last, err)
	}

	// No bootstrap: the configuration comes from the log. The new leader commits
	// a no-op of its new term, which commits and applies everything before it.
	r2, fsm2 := startTestRaft(t, s, false)
	waitForRaft(t, 10*time.Second, "the FSM to replay", func() bool { return fsm2.Count() >= commands })
	if got := fsm2.Count(); got != commands {
		t.Errorf("replayed FSM count = %d, want %d", got, commands)
	}
	if err := r2.Apply([]byte("after restart"), 5*time.Second).Error(); err != nil {
		t.Fatalf("Apply after restart: %v", err)
	}
	if got := fsm2.Count(); got != commands+1 {
		t.Errorf("FSM count after one more Apply = %d, want %d", got, commands+1)
	}
	if err := r2.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
}

func BenchmarkStoreLogs(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 1024)
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			s := openTestRaftStore(b)
			logs := make([]*raft.Log, batch)
			for i := range logs {
				logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			}
			b.SetBytes(int64(batch * len(data)))
			b.ReportAllocs()
			next := uint64(1)
			for b.Loop() {
				for _, l := range logs {
					l.Index = next
					next++
				}
				if err := s.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next-1), "ns/entry")
		})
	}
}
