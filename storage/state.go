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
	berrors "go.etcd.io/bbolt/errors"
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

	// Deferred commits (UpdateDeferred): the write transaction that applied
	// batches accumulate in until the next commit, and how many it holds.
	// hasPending lets readers skip wmu when nothing waits; failed is the
	// error of a commit that lost batches already applied (sticky).
	// pendingStaged is what those batches keep of their sessions in memory
	// (staged: hot records written once, at the commit).
	wmu           sync.Mutex
	pending       *bbolt.Tx
	pendingStaged staged
	batches       int
	hasPending    atomic.Bool
	failed        error
	hasFailed     atomic.Bool

	fails atomic.Uint64 // checksum failures found by reads (ChecksumFailures)
}

// maxDeferredBatches bounds the batches one deferred commit holds (memory,
// and the work a process crash leaves Raft to replay), whatever the period
// of the caller's Sync.
const maxDeferredBatches = 256

// ErrStateFailed is returned by every call after a commit of deferred
// batches failed: the database no longer holds everything the FSM applied
// and must not serve or apply anything more. The entries are in the Raft
// log; a restart applies them again.
var ErrStateFailed = errors.New("state database: a commit of applied entries failed; the node must restart")

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
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open state database %s: %w", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open state database %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(bucketMeta)
		if err != nil {
			return err
		}
		switch v := meta.Get(keyFormat); {
		case v == nil:
			if _, err := tx.CreateBucketIfNotExists(bucketSessions); err != nil {
				return err
			}
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
	if err := s.commitPending(); err != nil {
		return errors.Join(err, s.db.Close())
	}
	_ = persistFreelist(s.db)
	return errors.Join(s.db.Sync(), s.db.Close())
}

// Sync commits deferred batches and flushes committed transactions to disk
// (fdatasync).
func (s *StateDB) Sync() error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.commitPending(); err != nil {
		return err
	}
	return s.db.Sync()
}

// UpdateDeferred runs fn as Update does, but in a write transaction that
// stays open for the next calls: it is committed by the next Sync, by any
// read (View, BeginSnapshot, Update, Close) or once it holds
// maxDeferredBatches. A group of applied Raft entries then costs its puts
// and no commit of its own: bbolt's commit (spill, a pwrite per dirty page,
// the meta page) is paid once per Sync period instead of once per batch,
// and pages several batches dirty (a session's hot record, the log's right
// edge) are written once. A session's hot record is staged decoded for the
// whole period and put once, at the commit: an active session's appends
// read and write it in memory. Readers never see less than was applied before
// they started: they commit first.
//
// An error rolls back every batch since the last commit, not only fn's: the
// caller (the FSM) has answered those, so it must stop, as it does for any
// failed apply; the Raft log still holds the entries.
func (s *StateDB) UpdateDeferred(fn func(*Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.failed != nil {
		return s.failed
	}
	if s.pending == nil {
		tx, err := s.db.Begin(true)
		if err != nil {
			return err
		}
		s.pending = tx
	}
	t := newTx(s.pending, &s.fails)
	t.stage, t.staged = true, s.pendingStaged
	if err := fn(t); err != nil {
		s.fail(err) // before the flag clears: readers must not find a clean state
		_ = s.pending.Rollback()
		s.pending, s.pendingStaged, s.batches = nil, staged{}, 0
		s.hasPending.Store(false)
		return err
	}
	s.pendingStaged = t.staged
	s.batches++
	s.hasPending.Store(true)
	if s.batches >= maxDeferredBatches {
		return s.commitLocked()
	}
	return nil
}

// commitPending commits deferred batches, if any. The caller holds mu.
func (s *StateDB) commitPending() error {
	if !s.hasPending.Load() && !s.hasFailed.Load() {
		return nil
	}
	s.wmu.Lock()
	defer s.wmu.Unlock()
	return s.commitLocked()
}

// commitLocked commits the pending transaction; the caller holds wmu.
func (s *StateDB) commitLocked() error {
	if s.failed != nil {
		return s.failed
	}
	if s.pending == nil {
		return nil
	}
	tx, st := s.pending, s.pendingStaged
	s.pending, s.pendingStaged, s.batches = nil, staged{}, 0
	t := newTx(tx, &s.fails)
	t.hots = st.hots
	err := t.flushHot()
	if err == nil {
		err = tx.Commit()
	} else {
		_ = tx.Rollback()
	}
	if err != nil {
		s.fail(err) // before the flag clears, as in UpdateDeferred
	}
	// Only now: a reader that finds the flag clear reads without wmu, so it
	// must not begin before the commit is complete.
	s.hasPending.Store(false)
	if err != nil {
		return s.failed
	}
	return nil
}

// fail records that applied batches were lost; the caller holds wmu.
func (s *StateDB) fail(err error) {
	if s.failed == nil {
		s.failed = fmt.Errorf("%w: %w", ErrStateFailed, err)
		s.hasFailed.Store(true)
	}
}

// dropPending discards deferred batches (the database is being replaced or
// closed as it is on disk). The caller holds mu for writing.
func (s *StateDB) dropPending() {
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.pending != nil {
		_ = s.pending.Rollback()
		s.pending, s.pendingStaged, s.batches = nil, staged{}, 0
		s.hasPending.Store(false)
	}
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

// Update runs fn in one write transaction, committed on success (after the
// deferred batches before it).
func (s *StateDB) Update(fn func(*Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if err := s.commitLocked(); err != nil {
		return err
	}
	return s.db.Update(func(tx *bbolt.Tx) error {
		t := newTx(tx, &s.fails)
		if err := fn(t); err != nil {
			return err
		}
		return t.flushHot()
	})
}

// Layout is the state format (1 to 5) of everything applied so far,
// deferred batches included, read without committing them: the leader asks
// every 100 ms, and a View would commit the deferred batches each time.
func (s *StateDB) Layout() int {
	s.mu.RLock()
	defer s.mu.RUnlock()
	s.wmu.Lock()
	defer s.wmu.Unlock()
	if s.pending != nil {
		return newTx(s.pending, &s.fails).Layout()
	}
	layout := 1
	_ = s.db.View(func(tx *bbolt.Tx) error { layout = newTx(tx, &s.fails).Layout(); return nil })
	return layout
}

// View runs fn in a read transaction, which sees everything applied before
// it began.
func (s *StateDB) View(fn func(*Tx) error) error {
	s.mu.RLock()
	defer s.mu.RUnlock()
	if err := s.commitPending(); err != nil {
		return err
	}
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
	if err := s.commitPending(); err != nil {
		s.mu.RUnlock()
		return nil, err
	}
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
	s.dropPending() // replaced by the snapshot's state
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
