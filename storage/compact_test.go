package storage

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// cpDump reads every session record and event of a state database.
func cpDump(t *testing.T, s *StateDB) map[string][][]byte {
	t.Helper()
	out := map[string][][]byte{}
	err := s.View(func(tx *Tx) error {
		return tx.ForEachSession("", false, func(id string, rec []byte) error {
			entry := [][]byte{bytes.Clone(rec)}
			err := tx.ForEachEvent(id, 7, 0, tx.SumsEnd(id), func(_ int64, ev []byte) error {
				entry = append(entry, bytes.Clone(ev))
				return nil
			})
			out[id] = entry
			return err
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// cpFill writes sessions whose records are rewritten many times (as the FSM
// rewrites a session record on every append), first large and at last small,
// which leaves most of the file's pages free.
func cpFill(t *testing.T, s *StateDB, sessions, rounds int) {
	t.Helper()
	big := bytes.Repeat([]byte("r"), 48<<10)
	for r := 0; r < rounds; r++ {
		err := s.Update(func(tx *Tx) error {
			for i := 0; i < sessions; i++ {
				id := fmt.Sprintf("s%03d", i)
				rec := append([]byte(fmt.Sprintf("record %s round %d ", id, r)), big...)
				if r == rounds-1 {
					rec = []byte(fmt.Sprintf("record %s final", id))
				}
				if err := tx.PutRecord(id, rec, nil); err != nil {
					return err
				}
				ev := []byte(fmt.Sprintf(`{"type":"x","seq":%d,"data":%q}`, r, bytes.Repeat([]byte("e"), 200)))
				if err := tx.PutEvents(id, 7, int64(r), [][]byte{ev}); err != nil {
					return err
				}
			}
			return tx.SetApplied(uint64(r+1), 1)
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestCompactState_ShrinksAndKeepsContent(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s, err := OpenState(path, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cpFill(t, s, 100, 20)
	want := cpDump(t, s)
	stats := s.Stats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}

	res, err := CompactState(path)
	if err != nil {
		t.Fatalf("compact: %v", err)
	}
	t.Logf("state.db: %d -> %d bytes (free before: %d bytes)", res.Before, res.After, stats.FreeBytes)
	if res.After >= res.Before/2 {
		t.Errorf("file did not shrink enough: %d -> %d bytes", res.Before, res.After)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != res.After {
		t.Errorf("file on disk: %v, %v; want %d bytes", st, err, res.After)
	}
	for _, left := range []string{path + PrecompactSuffix, path + compactTmpSuffix} {
		if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left behind: %v", left, err)
		}
	}

	s, err = OpenState(path, DefaultStateOptions())
	if err != nil {
		t.Fatalf("open the compacted file: %v", err)
	}
	defer s.Close()
	if idx, _, err := s.AppliedIndex(); err != nil || idx != 20 {
		t.Errorf("applied index %d, %v; want 20", idx, err)
	}
	got := cpDump(t, s)
	if len(got) != len(want) {
		t.Fatalf("%d sessions after, %d before", len(got), len(want))
	}
	for id, w := range want {
		g := got[id]
		if len(g) != len(w) {
			t.Fatalf("session %s: %d entries after, %d before", id, len(g), len(w))
		}
		for i := range w {
			if !bytes.Equal(g[i], w[i]) {
				t.Fatalf("session %s entry %d differs", id, i)
			}
		}
	}
	// The compacted file takes writes as usual.
	cpFill(t, s, 3, 1)
	if err := s.Check(); err != nil {
		t.Fatal(err)
	}
}

func TestCompact_RefusesAFileInUse(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "state.db")
	s, err := OpenState(path, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	cpFill(t, s, 2, 2)
	if _, err := CompactState(path); !errors.Is(err, ErrInUse) {
		t.Fatalf("compact of an open file: %v, want ErrInUse", err)
	}
	rs, err := OpenRaftStore(filepath.Join(dir, "raft.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if _, err := CompactRaftStore(rs.Path()); !errors.Is(err, ErrInUse) {
		t.Fatalf("compact of an open raft store: %v, want ErrInUse", err)
	}
	// Nothing was created beside them; a missing file is refused, not created.
	if m, _ := filepath.Glob(filepath.Join(dir, "*.compact.tmp")); len(m) > 0 {
		t.Errorf("leftovers: %v", m)
	}
	if _, err := CompactState(filepath.Join(dir, "missing.db")); err == nil {
		t.Error("compact of a missing file succeeded")
	}
	if _, err := os.Stat(filepath.Join(dir, "missing.db")); !errors.Is(err, os.ErrNotExist) {
		t.Error("compact created a missing file")
	}
}

func TestCompactRaftStore_KeepsTermAndBuckets(t *testing.T) {
	path := filepath.Join(t.TempDir(), "raft.db")
	rs, err := OpenRaftStore(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := uint64(1); i <= 500; i++ {
		if err := rs.SetUint64([]byte("CurrentTerm"), i); err != nil {
			t.Fatal(err)
		}
		if err := rs.Set([]byte(fmt.Sprintf("k%d", i%7)), bytes.Repeat([]byte{byte(i)}, 8<<10)); err != nil {
			t.Fatal(err)
		}
	}
	if err := rs.Close(); err != nil {
		t.Fatal(err)
	}
	res, err := CompactRaftStore(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("raft.db: %d -> %d bytes", res.Before, res.After)
	rs, err = OpenRaftStore(path)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	if v, err := rs.GetUint64([]byte("CurrentTerm")); err != nil || v != 500 {
		t.Fatalf("term %d, %v", v, err)
	}
	if v, err := rs.Get([]byte("k3")); err != nil || !bytes.Equal(v, bytes.Repeat([]byte{byte(500 % 256)}, 8<<10)) {
		t.Fatalf("k3: %d bytes, %v", len(v), err)
	}
}
