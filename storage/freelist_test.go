package storage

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"
)

// cleanFixture is stateCheckFixture written twice (so some pages are free),
// closed by Close.
func cleanFixture(t testing.TB, sessions, events int) (string, []byte) {
	t.Helper()
	path, _ := stateCheckFixture(t, t.TempDir(), sessions, events)
	s, err := OpenState(path, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx *Tx) error {
		return tx.tx.Bucket(bucketSessions).Bucket([]byte("session-0000")).Bucket([]byte("events")).Put([]byte("x"), make([]byte, 5000))
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

// fileMeta returns the meta bbolt would use of the state file at path.
func fileMeta(t testing.TB, path string) boltMeta {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	const ps = 4096
	m0, err0 := parseBoltMeta(b[:ps])
	m1, err1 := parseBoltMeta(b[ps : 2*ps])
	switch {
	case err0 != nil && err1 != nil:
		t.Fatalf("no valid meta: %v; %v", err0, err1)
	case err0 != nil || (err1 == nil && m1.txid > m0.txid):
		return m1
	}
	return m0
}

// TestCloseWritesFreelist: Close leaves the freelist in the file (the next
// Open reads it instead of walking every page) and the first write after an
// Open drops it again, so a file left by a process that did not Close has
// none; bbolt's own check agrees with the written freelist.
func TestCloseWritesFreelist(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts StateOptions
	}{
		{"fsynced commits", StateOptions{}},
		{"shipped options (NoSync)", StateOptions{InitialMmapSize: 1 << 20, NoSync: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "state.db")
			for round := range 3 {
				s, err := OpenState(path, tc.opts)
				if err != nil {
					t.Fatal(err)
				}
				if round > 0 {
					// Written when Close ran, read by this Open (bbolt's
					// loadFreelist): bbolt's check compares it with the tree.
					if err := s.Check(); err != nil {
						t.Fatalf("round %d: bbolt's check of the written freelist: %v", round, err)
					}
				}
				err = s.Update(func(tx *Tx) error {
					return tx.tx.Bucket(bucketSessions).Put(fmt.Appendf(nil, "k%d", round), make([]byte, 3000))
				})
				if err != nil {
					t.Fatal(err)
				}
				if err := s.Sync(); err != nil {
					t.Fatal(err)
				}
				if m := fileMeta(t, path); m.freelist != boltNoFreelist {
					t.Fatalf("round %d: an open file that was written has a synced freelist (page %d): a crash now would leave it", round, m.freelist)
				}
				if err := s.Close(); err != nil {
					t.Fatal(err)
				}
				m := fileMeta(t, path)
				if m.freelist == boltNoFreelist {
					t.Fatalf("round %d: no synced freelist after Close", round)
				}
				if deep, err := CheckStateFileQuick(path); err != nil || deep {
					t.Fatalf("round %d: CheckStateFileQuick = %v, %v; want a quick pass", round, deep, err)
				}
			}
		})
	}
}

// TestOpenAfterCloseDoesNotWalk: a file closed by Close opens without bbolt
// walking its buckets. The probe is a leaf page deep in a session's events
// whose keys are out of order: bbolt's walk at Open reports that, and Open
// then panics (in the caller's goroutine, so the test recovers it). The quick
// check passes such a file (that page is read when a read reaches it); the
// full check does not.
func TestOpenAfterCloseDoesNotWalk(t *testing.T) {
	path, b := cleanFixture(t, 6, 60)
	if fileMeta(t, path).freelist == boltNoFreelist {
		t.Fatal("the fixture, closed by Close, has no synced freelist")
	}
	leaf := eventLeaf(t, path, b)
	// Element 1's key zeroed: below element 0's.
	const ps = 4096
	e := leaf*ps + 16 + 16
	pos, ks := int(ne.Uint32(b[e+4:])), int(ne.Uint32(b[e+8:]))
	clear(b[e+pos : e+pos+ks])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(path); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("CheckStateFile = %v, want ErrStateDamaged (the probe must be damage a walk sees)", err)
	}
	if deep, err := CheckStateFileQuick(path); err != nil || deep {
		t.Fatalf("CheckStateFileQuick = %v, %v; want a quick pass", deep, err)
	}
	func() {
		defer func() {
			if r := recover(); r != nil {
				t.Fatalf("OpenState walked the file: %v", r)
			}
		}()
		s, err := OpenState(path, StateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		s.CloseUnchanged()
	}()
}

// eventLeaf returns a leaf page of an events bucket whose first key is not
// all zero bytes and that has at least two elements.
func eventLeaf(t testing.TB, path string, b []byte) int {
	t.Helper()
	const ps = 4096
	for _, id := range statePagesByType(t, path)["leaf"] {
		p := b[id*ps:]
		if ne.Uint16(p[10:]) < 2 || ne.Uint32(p[16:])&boltBucketLeafFlag != 0 {
			continue
		}
		pos, ks := int(ne.Uint32(p[16+4:])), int(ne.Uint32(p[16+8:]))
		if ks == 8 && binary.BigEndian.Uint64(p[16+pos:16+pos+ks]) > 0 {
			return id
		}
	}
	t.Fatal("no events leaf page")
	return 0
}

// TestCheckStateFileQuick damages a file closed by Close: what a start reads
// (meta pages, freelist, root bucket, meta bucket) is checked; event pages are
// not (left to the full check after an unclean stop). A file without a synced
// freelist gets the full check.
func TestCheckStateFileQuick(t *testing.T) {
	path, pristine := cleanFixture(t, 12, 60)
	meta := fileMeta(t, path)
	const ps = 4096
	fl := int(meta.freelist)
	if n := ne.Uint16(pristine[fl*ps+10:]); n < 2 || n == 0xFFFF {
		t.Fatalf("the fixture's freelist lists %d pages, want a few", n)
	}
	root := int(meta.root)
	leaf := eventLeaf(t, path, pristine)

	// The same file as a crash leaves it: the freelist dropped by a write.
	open := filepath.Join(t.TempDir(), "state.db")
	if err := os.WriteFile(open, pristine, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := OpenState(open, StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *Tx) error { return tx.SetClock(7) }); err != nil {
		t.Fatal(err)
	}
	unclean, err := os.ReadFile(open)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()

	cases := []struct {
		name    string
		file    []byte
		damage  func(b []byte)
		deep    bool
		damaged bool
	}{
		{"untouched", pristine, func([]byte) {}, false, false},
		{"an events leaf page zeroed (read later, by the read that reaches it)", pristine, func(b []byte) { clear(b[leaf*ps : (leaf+1)*ps]) }, false, false},
		{"root bucket page zeroed", pristine, func(b []byte) { clear(b[root*ps : (root+1)*ps]) }, false, true},
		{"root bucket page's element count inflated", pristine, func(b []byte) { ne.PutUint16(b[root*ps+10:], 0xFFFF) }, false, true},
		{"freelist page type flags flipped", pristine, func(b []byte) { b[fl*ps+8] ^= 0x02 }, false, true},
		{"freelist lists the root page", pristine, func(b []byte) { ne.PutUint64(b[fl*ps+16:], uint64(root)) }, false, true},
		{"freelist lists a page twice", pristine, func(b []byte) { copy(b[fl*ps+16:fl*ps+24], b[fl*ps+24:fl*ps+32]) }, false, true},
		{"freelist lists a page past the high-water mark", pristine, func(b []byte) { ne.PutUint64(b[fl*ps+16:], meta.pgid) }, false, true},
		{"both meta pages flipped", pristine, func(b []byte) { b[16+20] ^= 1; b[ps+16+20] ^= 1 }, false, true},
		{"no synced freelist, untouched", unclean, func([]byte) {}, true, false},
		{"no synced freelist, an events leaf page zeroed", unclean, func(b []byte) { clear(b[leaf*ps : (leaf+1)*ps]) }, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "state.db")
			b := append([]byte(nil), tc.file...)
			tc.damage(b)
			if err := os.WriteFile(p, b, 0o600); err != nil {
				t.Fatal(err)
			}
			deep, err := CheckStateFileQuick(p)
			if tc.damaged != errors.Is(err, ErrStateDamaged) || (!tc.damaged && err != nil) {
				t.Fatalf("CheckStateFileQuick = %v, damaged: want %v", err, tc.damaged)
			}
			if err == nil && deep != tc.deep {
				t.Fatalf("deep = %v, want %v", deep, tc.deep)
			}
			if err != nil {
				t.Logf("%v", err)
				return
			}
			// What passes opens (the pages Open reads are sound).
			s, err := OpenState(p, StateOptions{})
			if err != nil {
				t.Fatalf("the check passed but OpenState failed: %v", err)
			}
			s.CloseUnchanged()
		})
	}
}

// TestCheckStateFileFreelistInUse: the full check refuses a synced freelist
// that lists a page of the tree (bbolt would hand it out and overwrite it).
func TestCheckStateFileFreelistInUse(t *testing.T) {
	path, b := cleanFixture(t, 4, 40)
	meta := fileMeta(t, path)
	leaf := eventLeaf(t, path, b)
	ne.PutUint64(b[int(meta.freelist)*4096+16:], uint64(leaf))
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := CheckStateFile(path); !errors.Is(err, ErrStateDamaged) {
		t.Fatalf("CheckStateFile = %v, want ErrStateDamaged", err)
	}
}

// FuzzCheckStateFileQuick: any bytes give an error or pass; a file that passes
// opens without a crash, and one the check walked passes bbolt's Check.
func FuzzCheckStateFileQuick(f *testing.F) {
	// A small seed with a synced freelist: 1 KiB pages, the state's buckets,
	// a session bucket with a branch page, some free pages.
	path := filepath.Join(f.TempDir(), "seed.db")
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{PageSize: 1024})
	if err != nil {
		f.Fatal(err)
	}
	for round := range 2 {
		err = db.Update(func(tx *bbolt.Tx) error {
			m, err := tx.CreateBucketIfNotExists(bucketMeta)
			if err != nil {
				return err
			}
			if err := m.Put(keyFormat, u64(StateFormatVersion)); err != nil {
				return err
			}
			ss, err := tx.CreateBucketIfNotExists(bucketSessions)
			if err != nil {
				return err
			}
			b, err := ss.CreateBucketIfNotExists([]byte("s"))
			if err != nil {
				return err
			}
			for j := range 16 {
				if err := b.Put([]byte{byte(j)}, make([]byte, 100+round)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			f.Fatal(err)
		}
	}
	var hwm int
	_ = db.View(func(tx *bbolt.Tx) error { hwm = int(tx.Size()); return nil })
	db.Close()
	seed, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(seed[:hwm])
	f.Fuzz(func(t *testing.T, data []byte) {
		p := filepath.Join(t.TempDir(), "state.db")
		if err := os.WriteFile(p, data, 0o600); err != nil {
			t.Fatal(err)
		}
		deep, err := CheckStateFileQuick(p)
		if err != nil {
			if !errors.Is(err, ErrStateDamaged) {
				t.Fatalf("error %v is not ErrStateDamaged", err)
			}
			return
		}
		s, err := OpenState(p, StateOptions{})
		if err != nil {
			return // e.g. a flipped format value: an error, not a crash
		}
		defer s.CloseUnchanged()
		if deep {
			if err := s.Check(); err != nil {
				t.Fatalf("the full check passed, bbolt's Check fails: %v", err)
			}
		}
	})
}

// TestCheckPages: the background check of an open database finds the damage
// the quick check leaves to it, passes a sound file while writers go on, and
// stops when its context ends.
func TestCheckPages(t *testing.T) {
	defer func(n int) { trimPages = n }(trimPages)
	trimPages = 3 // the walk unmaps what it read many times
	path, b := cleanFixture(t, 8, 60)
	leaf := eventLeaf(t, path, b)
	damaged := append([]byte(nil), b...)
	clear(damaged[leaf*4096 : (leaf+1)*4096])
	for _, tc := range []struct {
		name    string
		file    []byte
		damaged bool
	}{
		{"sound", b, false},
		{"an events leaf page zeroed", damaged, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := filepath.Join(t.TempDir(), "state.db")
			if err := os.WriteFile(p, tc.file, 0o600); err != nil {
				t.Fatal(err)
			}
			s, err := OpenState(p, StateOptions{NoSync: true}) // no walk: a synced freelist
			if err != nil {
				t.Fatal(err)
			}
			defer s.CloseUnchanged()
			// Writers go on meanwhile (pages the check's transaction sees
			// are not reused).
			stop := make(chan struct{})
			wrote := make(chan struct{})
			go func() {
				defer close(wrote)
				for i := 0; ; i++ {
					select {
					case <-stop:
						return
					default:
					}
					_ = s.Update(func(tx *Tx) error {
						return tx.tx.Bucket(bucketSessions).Put(fmt.Appendf(nil, "w%d", i%50), make([]byte, 2000+i%3000))
					})
				}
			}()
			err = s.CheckPages(context.Background())
			close(stop)
			<-wrote
			if tc.damaged != errors.Is(err, ErrStateDamaged) || (!tc.damaged && err != nil) {
				t.Fatalf("CheckPages = %v, damaged: want %v", err, tc.damaged)
			}
			t.Logf("%v", err)
		})
	}
	t.Run("context ended", func(t *testing.T) {
		s, err := OpenState(path, StateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if err := s.CheckPages(ctx); !errors.Is(err, context.Canceled) {
			t.Fatalf("CheckPages = %v, want context.Canceled", err)
		}
	})
}
