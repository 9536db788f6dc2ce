package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// The Raft store's file (docs/design.md "Storage layout"): the Raft
// stable store and node-local buckets. The Raft log is not here but in RaftWAL
// (raftwal.go). Changing any bucket, key or encoding below is a format change:
// bump RaftStoreFormatVersion.
//
//	raft_meta/format            RaftStoreFormatVersion, 8 BE
//	raft_stable/<key>           raft.StableStore values, verbatim; SetUint64 values are 8 BE
//	raft_log/...                retired: the Raft log of earlier versions, before
//	                            RaftWAL. Never created, read or written now; a file
//	                            that has it opens as usual and keeps it untouched.
//
// Every other bucket of the file belongs to the file of package storage that
// creates it through RaftStore.Update (e.g. artifacts.go: artifact_watermarks).
const RaftStoreFormatVersion = 1

var (
	raftBucketMeta   = []byte("raft_meta")
	raftBucketStable = []byte("raft_stable")

	raftKeyFormat = []byte("format")
)

// RaftStore is a node's local bbolt file holding the Raft stable store (the
// current term and the vote) and node-local buckets other parts of storage add
// (e.g. artifact watermarks). It is never replicated or snapshotted. The Raft log
// lives in a RaftWAL.
//
// It implements raft.StableStore and is safe for concurrent use. Every write is
// one bbolt transaction, fsynced on commit.
type RaftStore struct {
	path string
	db   *bbolt.DB
}

var _ raft.StableStore = (*RaftStore)(nil)

// OpenRaftStore opens (creating 0600, parent dir must exist) the bbolt file at path
// with NoFreelistSync and the map freelist (fast, the freelist is rebuilt on open),
// a 1 s open timeout, and creates its buckets. A file of another format version is
// refused. A file written while the Raft log still lived here (same format version)
// opens as usual: its raft_log bucket is ignored and left as it is. A second open of
// the same file, from this or another process, fails after the timeout: bbolt holds
// an exclusive file lock while the store is open.
func OpenRaftStore(path string) (*RaftStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if errors.Is(err, berrors.ErrTimeout) {
		return nil, fmt.Errorf("open raft store %s: %w", path, ErrInUse)
	}
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(raftBucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucketIfNotExists(raftBucketStable); err != nil {
			return err
		}
		switch v := meta.Get(raftKeyFormat); {
		case v == nil:
			return meta.Put(raftKeyFormat, binary.BigEndian.AppendUint64(nil, RaftStoreFormatVersion))
		case len(v) != 8 || binary.BigEndian.Uint64(v) != RaftStoreFormatVersion:
			return fmt.Errorf("raft store format %x is not %d", v, RaftStoreFormatVersion)
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("check raft store %s: %w", path, err)
	}
	return &RaftStore{path: path, db: db}, nil
}

// Path is the store's file.
func (s *RaftStore) Path() string { return s.path }

// Close closes the file; a second Close is a no-op. Shut raft down first: every
// later call fails.
func (s *RaftStore) Close() error {
	if err := s.db.Close(); err != nil {
		return fmt.Errorf("close raft store %s: %w", s.path, err)
	}
	return nil
}

// Update runs fn in a write transaction of the store's file, committed (and
// fsynced) if fn returns nil and rolled back otherwise. It is meant for node-local
// buckets owned by other files of package storage, which create their buckets with
// CreateBucketIfNotExists; fn must not touch the raft_* buckets. A write
// transaction excludes Raft's stable-store writes (term, vote) while it runs, so
// keep fn short.
func (s *RaftStore) Update(fn func(tx *bbolt.Tx) error) error { return s.db.Update(fn) }

// View runs fn in a read transaction of the store's file. Byte slices read inside
// fn are valid only until fn returns.
func (s *RaftStore) View(fn func(tx *bbolt.Tx) error) error { return s.db.View(fn) }

// Set stores val under key in the stable store.
func (s *RaftStore) Set(key []byte, val []byte) error {
	err := s.db.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(raftBucketStable).Put(key, val)
	})
	if err != nil {
		return fmt.Errorf("raft stable set %q: %w", key, err)
	}
	return nil
}

// Get returns a copy of the value stored under key. A missing key is (nil, nil),
// as raft.StableStore documents ("an empty byte slice if key was not found"); raft
// v1.8.0 accepts either that or an error whose text is "not found", and tests the
// result against nil (lastVoteCand), so nil it is. A value stored empty comes back
// as a non-nil empty slice.
func (s *RaftStore) Get(key []byte) ([]byte, error) {
	var val []byte
	err := s.db.View(func(tx *bbolt.Tx) error {
		if v := tx.Bucket(raftBucketStable).Get(key); v != nil {
			val = append([]byte{}, v...)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("raft stable get %q: %w", key, err)
	}
	return val, nil
}

// SetUint64 stores val under key as 8 big-endian bytes.
func (s *RaftStore) SetUint64(key []byte, val uint64) error {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], val)
	return s.Set(key, b[:])
}

// GetUint64 returns the value SetUint64 stored under key. A missing key is (0, nil),
// as raft.StableStore documents: NewRaft reads CurrentTerm of a fresh store this
// way. A value that is not 8 bytes long is an error.
func (s *RaftStore) GetUint64(key []byte) (uint64, error) {
	var val uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(raftBucketStable).Get(key)
		switch {
		case v == nil:
		case len(v) != 8:
			return fmt.Errorf("value of %d bytes is not a uint64", len(v))
		default:
			val = binary.BigEndian.Uint64(v)
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("raft stable get uint64 %q: %w", key, err)
	}
	return val, nil
}
