package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"go.etcd.io/bbolt"
)

// StateOptions tune the state database.
type StateOptions struct {
	// InitialMmapSize is reserved address space for the mmap. A long snapshot read
	// transaction blocks any write that must remap the file, so this is large: a
	// remap during a snapshot would stall Apply for the whole transfer (bbolt DB.Begin).
	InitialMmapSize int
	// NoSync skips the fdatasync of each commit. Durability then comes from the
	// Raft log (fsynced before an entry commits): after a crash the state
	// database is at some applied index and Raft replays the entries above it.
	// The caller must call Sync periodically and before Close, and must verify
	// the file after an operating-system crash (see cluster's start-up guard),
	// because without fsync the page writes of one commit may reach the disk in
	// any order.
	NoSync bool
}

// DefaultStateOptions returns the shipped settings.
func DefaultStateOptions() StateOptions {
	return StateOptions{InitialMmapSize: 8 << 30, NoSync: true}
}

// StateDB is the FSM's source of truth: session records, events, frames and
// request-id results, plus the last applied Raft index in the same transactions.
type StateDB struct {
	path string
	opts StateOptions

	mu sync.RWMutex // guards db against the swap in Restore
	db *bbolt.DB

	fails atomic.Uint64 // checksum failures found by reads (ChecksumFailures)
}

// ChecksumFailures counts the stored values that failed their checksum when
// read, since the database was opened (sessionstore_checksum_failures_total).
func (s *StateDB) ChecksumFailures() uint64 { return s.fails.Load() }

// ErrStateMissing is returned by OpenState with mustExist when there is no file.
var ErrStateMissing = errors.New("state database missing")

// OpenState opens (or creates) the state database at path and checks its format.
func OpenState(path string, opts StateOptions) (*StateDB, error) {
	db, err := openStateFile(path, opts)
	if err != nil {
		return nil, err
	}
	return &StateDB{path: path, opts: opts, db: db}, nil
}

func openStateFile(path string, opts StateOptions) (*bbolt.DB, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:         time.Second,
		InitialMmapSize: opts.InitialMmapSize,
		NoFreelistSync:  true,
		FreelistType:    bbolt.FreelistMapType,
		NoSync:          opts.NoSync,
	})
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(bucketSessions); err != nil {
			return err
		}
		switch v := meta.Get(keyFormat); {
		case v == nil:
			// A new file: nothing lacks a checksum (sums at applied index 0).
			if err := meta.Put(keySums, u64(0)); err != nil {
				return err
			}
			// Layout 1 until the cluster converts (ConvertLayout): a new
			// replica of a cluster with older voters must send them
			// snapshots they read.
			return meta.Put(keyFormat, u64(1))
		case len(v) != 8 || binary.BigEndian.Uint64(v) < 1 || binary.BigEndian.Uint64(v) > StateFormatVersion:
			return fmt.Errorf("state database format %x is not one this build reads (1 to %d)", v, StateFormatVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("check state database %s: %w", path, err)
	}
	return db, nil
}

// Path is the database file.
func (s *StateDB) Path() string { return s.path }

// Close writes the freelist (persistFreelist: the next Open need not walk the
// file), flushes and closes the database. Failing to write the freelist only
// costs the next Open its walk: it is not an error of Close.
func (s *StateDB) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	_ = persistFreelist(s.db)
	return errors.Join(s.db.Sync(), s.db.Close())
}

// Sync flushes committed transactions to disk (fdatasync).
func (s *StateDB) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.Sync()
}

// Check walks every page of the database and reports the first inconsistency.
func (s *StateDB) Check() error {
	return s.View(func(tx *Tx) error {
		var first error
		for err := range tx.tx.Check() { // drain: the checker runs until it closes the channel
			if first == nil {
				first = err
			}
		}
		return first
	})
}

// Update runs fn in one write transaction, committed (and fsynced) on success.
func (s *StateDB) Update(fn func(*Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.Update(func(tx *bbolt.Tx) error {
		t := newTx(tx, &s.fails)
		if err := fn(t); err != nil {
			return err
		}
		return t.flushHot()
	})
}

// View runs fn in a read transaction.
func (s *StateDB) View(fn func(*Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.db.View(func(tx *bbolt.Tx) error { return fn(newTx(tx, &s.fails)) })
}

// Size is the database file's size in bytes.
func (s *StateDB) Size() int64 {
	var n int64
	_ = s.View(func(tx *Tx) error { n = tx.tx.Size(); return nil })
	return n
}

// AppliedIndex reads the last applied Raft index without a caller transaction.
func (s *StateDB) AppliedIndex() (index, term uint64, err error) {
	err = s.View(func(tx *Tx) error { index, term = tx.Applied(); return nil })
	return index, term, err
}

// snapshotMagic starts every snapshot stream; the byte after it is the state format.
var snapshotMagic = []byte("sessionstore-snapshot\n")

// Snapshot is an open read transaction to be streamed. Release must be called.
type Snapshot struct {
	s  *StateDB
	tx *bbolt.Tx
}

// BeginSnapshot starts a point-in-time view of the whole database. It is cheap:
// the I/O happens in WriteTo, while writers continue.
func (s *StateDB) BeginSnapshot() (*Snapshot, error) {
	s.mu.RLock()
	tx, err := s.db.Begin(false)
	if err != nil {
		s.mu.RUnlock()
		return nil, err
	}
	return &Snapshot{s: s, tx: tx}, nil
}

// WriteTo streams the snapshot: a magic line, the format version, then the bbolt
// file through zstd (whose frame checksum covers the uncompressed bytes).
func (sn *Snapshot) WriteTo(w io.Writer) (int64, error) { return sn.writeTo(w, nil) }

// writeTo is WriteTo that also copies the uncompressed database to plain
// (nil: nowhere), e.g. a hash for a backup's checksum.
func (sn *Snapshot) writeTo(w io.Writer, plain io.Writer) (int64, error) {
	cw := &countingWriter{w: w}
	if _, err := cw.Write(append(append([]byte{}, snapshotMagic...), byte(sn.Format()))); err != nil {
		return cw.n, err
	}
	enc, err := zstd.NewWriter(cw, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderCRC(true), zstd.WithEncoderConcurrency(1))
	if err != nil {
		return cw.n, err
	}
	var dst io.Writer = enc
	if plain != nil {
		dst = io.MultiWriter(enc, plain)
	}
	if _, err := sn.tx.WriteTo(dst); err != nil {
		enc.Close()
		return cw.n, fmt.Errorf("write snapshot: %w", err)
	}
	if err := enc.Close(); err != nil {
		return cw.n, fmt.Errorf("write snapshot: %w", err)
	}
	return cw.n, nil
}

// Format is the state format (layout) of the snapshot's database.
func (sn *Snapshot) Format() int { return newTx(sn.tx, nil).Layout() }

// Release ends the read transaction. Safe to call more than once.
func (sn *Snapshot) Release() {
	if sn.tx == nil {
		return
	}
	_ = sn.tx.Rollback()
	sn.tx = nil
	sn.s.mu.RUnlock()
}

type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// Restore replaces the database with the snapshot read from r: it decodes into a
// temporary file beside the live one, fsyncs it, runs check on it (nil: none),
// renames it over the live file and reopens. The previous state is gone
// afterwards. On error, check's included, the live database is left as it was.
func (s *StateDB) Restore(r io.Reader, check func(*Tx) error) error {
	tmp, err := RestoreFile(r, s.path)
	if err != nil {
		return err
	}
	if check != nil {
		if err := s.checkFile(tmp, check); err != nil {
			os.Remove(tmp)
			return fmt.Errorf("restore: snapshot refused: %w", err)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if err := s.db.Close(); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: close state database: %w", err)
	}
	if err := os.Rename(tmp, s.path); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("restore: %w", err)
	}
	if err := syncDir(filepath.Dir(s.path)); err != nil {
		return fmt.Errorf("restore: %w", err)
	}
	db, err := openStateFile(s.path, s.opts)
	if err != nil {
		return fmt.Errorf("restore: reopen: %w", err)
	}
	s.db = db
	return nil
}

func (s *StateDB) checkFile(path string, check func(*Tx) error) error {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return err
	}
	defer db.Close()
	return db.View(func(tx *bbolt.Tx) error { return check(newTx(tx, &s.fails)) })
}

// RestoreFile decodes a snapshot stream into a fsynced temporary file next to
// path and returns the temporary file's name; the caller renames it into place.
func RestoreFile(r io.Reader, path string) (string, error) {
	head := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return "", fmt.Errorf("restore: read snapshot header: %w", err)
	}
	if !bytes.Equal(head[:len(snapshotMagic)], snapshotMagic) {
		return "", errors.New("restore: not a sessionstore snapshot")
	}
	if f := head[len(snapshotMagic)]; f < 1 || f > StateFormatVersion {
		return "", fmt.Errorf("restore: snapshot format %d is not one this build reads (1 to %d)", f, StateFormatVersion)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return "", err
	}
	defer dec.Close()
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".restore-*.tmp")
	if err != nil {
		return "", fmt.Errorf("restore: %w", err)
	}
	tmp := f.Name()
	fail := func(err error) (string, error) {
		f.Close()
		os.Remove(tmp)
		return "", fmt.Errorf("restore: %w", err)
	}
	if _, err := io.Copy(f, dec); err != nil {
		return fail(err)
	}
	if err := f.Sync(); err != nil {
		return fail(err)
	}
	if err := f.Close(); err != nil {
		return fail(err)
	}
	// A snapshot that bbolt cannot open must never replace the live file.
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("restore: snapshot does not hold a database: %w", err)
	}
	db.Close()
	// Nor one whose pages would crash bbolt's read-write Open (which walks them).
	if err := CheckStateFile(tmp); err != nil {
		os.Remove(tmp)
		return "", fmt.Errorf("restore: snapshot holds a damaged database: %w", err)
	}
	return tmp, nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

func u64(v uint64) []byte {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	return b[:]
}

func getU64(b []byte) uint64 {
	if len(b) != 8 {
		return 0
	}
	return binary.BigEndian.Uint64(b)
}
