package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"
)

// stateCheckFixture writes a real state database (OpenState's options) with
// nested buckets, inline buckets and enough keys for branch pages, closes it
// (Close writes the freelist) and returns its path and bytes.
func stateCheckFixture(t testing.TB, dir string, sessions, events int) (string, []byte) {
	t.Helper()
	path := filepath.Join(dir, "state.db")
	s, err := OpenState(path, StateOptions{NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	err = s.db.Update(func(tx *bbolt.Tx) error {
		root := tx.Bucket(bucketSessions)
		for i := range sessions {
			b, err := root.CreateBucket(fmt.Appendf(nil, "session-%04d", i))
			if err != nil {
				return err
			}
			if _, err := b.CreateBucket([]byte("inline")); err != nil { // empty: stays inline
				return err
			}
			ev, err := b.CreateBucket([]byte("events"))
			if err != nil {
				return err
			}
			for j := range events {
				if err := ev.Put(binary.BigEndian.AppendUint64(nil, uint64(j)), fmt.Appendf(nil, `{"seq":%d,"pad":"%0200d"}`, j, j)); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return path, b
}

// statePagesByType lists the reachable (not free) pages of a state file by
// type ("branch", "leaf", ...), opened read-only by bbolt.
func statePagesByType(t testing.TB, path string) map[string][]int {
	t.Helper()
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	out := map[string][]int{}
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil {
				return err
			}
			if info == nil {
				return nil
			}
			out[info.Type] = append(out[info.Type], id)
			id += info.OverflowCount
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCheckStateFile flips real bytes of a real state database. Structural
// damage bbolt's Open would panic or fault on (several cases panicked inside
// bbolt.Open's goroutine, uncatchable, before the check existed) is an
// ErrStateDamaged naming the page; damage bbolt survives (one meta page, a
// value's bytes) passes, and bbolt opens the file.
func TestCheckStateFile(t *testing.T) {
	dir := t.TempDir()
	path, pristine := stateCheckFixture(t, dir, 12, 60)
	pages := statePagesByType(t, path)
	if len(pages["branch"]) == 0 || len(pages["leaf"]) < 2 {
		t.Fatalf("fixture has no branch page or too few leaf pages: %v", pages)
	}
	const ps = 4096
	branch, leaf := pages["branch"][0], pages["leaf"][len(pages["leaf"])-1]
	ne := binary.NativeEndian
	cases := []struct {
		name    string
		damage  func(b []byte) []byte
		damaged bool
	}{
		{"untouched", func(b []byte) []byte { return b }, false},
		{"leaf page zeroed (the issue's 'Page expected to be: N, but self identifies as 0')", func(b []byte) []byte {
			clear(b[leaf*ps : (leaf+1)*ps])
			return b
		}, true},
		{"leaf page header id off by one", func(b []byte) []byte { b[leaf*ps] ^= 1; return b }, true},
		{"branch page type flags flipped", func(b []byte) []byte { b[branch*ps+8] ^= 0x04; return b }, true},
		{"branch element's child page id past the file", func(b []byte) []byte {
			ne.PutUint64(b[branch*ps+16+8:], uint64(len(b)/ps+5))
			return b
		}, true},
		{"branch element's child pointing at a meta page", func(b []byte) []byte {
			ne.PutUint64(b[branch*ps+16+8:], 1)
			return b
		}, true},
		{"branch element count inflated", func(b []byte) []byte { ne.PutUint16(b[branch*ps+10:], 0xFFFF); return b }, true},
		{"leaf element's key position past the page", func(b []byte) []byte {
			ne.PutUint32(b[leaf*ps+16+4:], 1<<20)
			return b
		}, true},
		{"leaf page overflow past the end", func(b []byte) []byte { ne.PutUint32(b[leaf*ps+12:], 1<<20); return b }, true},
		{"both meta pages flipped", func(b []byte) []byte { b[16+20] ^= 1; b[ps+16+20] ^= 1; return b }, true},
		{"file cut in the middle of the tree", func(b []byte) []byte { return b[:max(branch, leaf)*ps] }, true},
		{"one meta page flipped (bbolt takes the other)", func(b []byte) []byte { b[16+20] ^= 1; return b }, false},
		{"a value byte flipped (not structure: item of the read path)", func(b []byte) []byte {
			// The last byte of the leaf page's last element's value.
			n := int(ne.Uint16(b[leaf*ps+10:]))
			e := leaf*ps + 16 + (n-1)*16
			pos, ks, vs := int(ne.Uint32(b[e+4:])), int(ne.Uint32(b[e+8:])), int(ne.Uint32(b[e+12:]))
			b[e+pos+ks+vs-2] ^= 0x01
			return b
		}, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(p, tc.damage(append([]byte(nil), pristine...)), 0o600); err != nil {
				t.Fatal(err)
			}
			err := CheckStateFile(p)
			if !tc.damaged {
				if err != nil {
					t.Fatalf("CheckStateFile: %v, want nil", err)
				}
				s, err := OpenState(p, StateOptions{})
				if err != nil {
					t.Fatalf("the check passed but OpenState failed: %v", err)
				}
				if err := s.Check(); err != nil {
					t.Errorf("the check passed but bbolt's Check fails: %v", err)
				}
				s.Close()
				return
			}
			if !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("CheckStateFile = %v, want ErrStateDamaged", err)
			}
			t.Logf("%v", err)
		})
	}
}

// TestCheckStateFileEmpty: a 0-byte file passes (bbolt initialises it); a
// missing file is the open error.
func TestCheckStateFileEmpty(t *testing.T) {
	p := filepath.Join(t.TempDir(), "state.db")
	if err := CheckStateFile(p); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	if err := os.WriteFile(p, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(p); err != nil {
		t.Fatalf("empty file: %v", err)
	}
	if err := os.WriteFile(p, []byte("not a database"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(p); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("short garbage: %v", err)
	}
}

// FuzzCheckStateFile: any bytes as a state database give an error or pass;
// what passes opens in bbolt without a panic (a panic inside bbolt.Open's
// goroutine kills the fuzz worker, which the fuzzer reports) and, if its format
// key survived, passes bbolt's full Check.
func FuzzCheckStateFile(f *testing.F) {
	// A small seed: 1 KiB pages, three buckets (one inline), a branch page.
	path := filepath.Join(f.TempDir(), "seed.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 1024, NoFreelistSync: true})
	if err != nil {
		f.Fatal(err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucket([]byte("sessions"))
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket([]byte("inline")); err != nil {
			return err
		}
		for j := range 24 {
			if err := b.Put([]byte{byte(j)}, make([]byte, 100)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		f.Fatal(err)
	}
	var hwm int
	_ = db.View(func(tx *bbolt.Tx) error { hwm = int(tx.Size()); return nil })
	db.Close()
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	// bbolt grows files in large steps: the pages below the high-water mark
	// are the database (a shorter file is valid; bbolt grows it again).
	f.Add(seed[:hwm])
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := CheckStateFile(p); err != nil {
			if !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("error %v is not ErrStateDamaged", err)
			}
			return
		}
		s, err := OpenState(p, StateOptions{})
		if err != nil {
			return // e.g. a flipped format value: an error, not a crash
		}
		defer s.Close()
		if err := s.Check(); err != nil {
			t.Fatalf("the check passed, bbolt's Check fails: %v", err)
		}
	})
}

// TestRestoreFileRefusesDamagedPages: a snapshot stream (checksums intact)
// carrying a database with a zeroed page is refused before it can replace the
// live file; bbolt's read-only open, the only check before, does not read it.
func TestRestoreFileRefusesDamagedPages(t *testing.T) {
	dir := t.TempDir()
	path, pristine := stateCheckFixture(t, dir, 4, 40)
	leaf := statePagesByType(t, path)["leaf"][0]
	for _, damaged := range []bool{false, true} {
		b := append([]byte(nil), pristine...)
		if damaged {
			clear(b[leaf*4096 : (leaf+1)*4096])
		}
		var stream bytes.Buffer
		stream.Write(append(append([]byte(nil), snapshotMagic...), StateFormatVersion))
		enc, err := zstd.NewWriter(&stream, zstd.WithEncoderCRC(true))
		if err != nil {
			t.Fatal(err)
		}
		enc.Write(b)
		enc.Close()
		tmp, err := RestoreFile(&stream, filepath.Join(dir, "restored.db"))
		if !damaged {
			if err != nil {
				t.Fatalf("undamaged: %v", err)
			}
			os.Remove(tmp)
			continue
		}
		if !errors.Is(err, ErrStateDamaged) {
			t.Fatalf("RestoreFile of a database with zeroed page %d = %q, %v; want ErrStateDamaged", leaf, tmp, err)
		}
		if left, _ := filepath.Glob(filepath.Join(dir, "restored.db.restore-*")); len(left) > 0 {
			t.Errorf("temporary files left: %v", left)
		}
	}
}

// TestCompactStateRefusesDamagedPages: the offline compaction checks the file
// before bbolt opens it, so a damaged page is an error naming the damage, not
// a crash of the command inside bbolt, and the original is left as it was.
func TestCompactStateRefusesDamagedPages(t *testing.T) {
	path, pristine := stateCheckFixture(t, t.TempDir(), 4, 40)
	leaf := statePagesByType(t, path)["leaf"][0]
	b := append([]byte(nil), pristine...)
	clear(b[leaf*4096 : (leaf+1)*4096])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := CompactState(path); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("CompactState of a file with zeroed page %d: %v, want ErrStateDamaged", leaf, err)
	}
	if after, err := os.ReadFile(path); err != nil || !bytes.Equal(after, b) {
		t.Errorf("the damaged original was changed (%v)", err)
	}
}
