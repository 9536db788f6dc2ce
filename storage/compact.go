package storage

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// ErrInUse is returned when another process, normally the running node,
// holds a store's lock: by the opens (OpenRaftStore, OpenState, OpenRaftWAL)
// and the offline operations (CompactState, CompactRaftStore).
var ErrInUse = errors.New("the database is in use by another process (is the node running? stop the node first)")

// CompactResult reports one offline compaction.
type CompactResult struct {
	Path   string
	Before int64 // file size before, bytes
	After  int64 // file size after, bytes
	// FreeBefore is what the original's freelist held (free and pending
	// pages, bytes); the rest of Before-After is the file's preallocated tail.
	FreeBefore int64
	Digest     string // SHA-256 over every bucket, key, value and sequence, equal before and after
}

// compactTxMaxSize bounds one write transaction of the copy (bbolt.Compact's
// txMaxSize), so memory stays bounded whatever the size of the file.
const compactTxMaxSize = 64 << 20

// PrecompactSuffix names the original file kept beside the live one while a
// compaction swaps files; it is removed once the swap is durable.
const PrecompactSuffix = ".precompact"

const compactTmpSuffix = ".compact.tmp"

// CompactState rewrites the state database at path (which must exist and not
// be open anywhere: the node must be stopped) into a new file with
// bbolt.Compact, which drops the free pages that bbolt never gives back to the
// file system. The copy is synced, reopened with OpenState and checked (page
// check, the same applied index, the same digest of every bucket, key and
// value) before it replaces the original; the original stays reachable as
// path+PrecompactSuffix until the rename into place and the directory are
// durable, and is then removed.
func CompactState(path string) (CompactResult, error) {
	return compactFile(path,
		func(p string) (*bbolt.DB, error) {
			// bbolt trusts its file: a damaged page would crash the command
			// inside bbolt's Open (statecheck.go).
			if err := CheckStateFile(p); err != nil {
				return nil, err
			}
			return openStateFile(p, StateOptions{})
		},
		func(p string) (func() error, func(*bbolt.DB) (string, error), error) {
			s, err := OpenState(p, StateOptions{})
			if err != nil {
				return nil, nil, err
			}
			return s.Close, func(orig *bbolt.DB) (string, error) {
				var want uint64
				if err := orig.View(func(tx *bbolt.Tx) error { want, _ = (&Tx{tx: tx}).Applied(); return nil }); err != nil {
					return "", err
				}
				got, _, err := s.AppliedIndex()
				if err != nil {
					return "", err
				}
				if got != want {
					return "", fmt.Errorf("applied index of the copy is %d, the original's %d", got, want)
				}
				if err := s.Check(); err != nil {
					return "", fmt.Errorf("page check of the copy: %w", err)
				}
				return boltDigest(s.db)
			}, nil
		})
}

// CompactRaftStore does for the Raft store file (raft/raft.db: term, vote,
// node-local buckets) what CompactState does for the state database; the copy
// is reopened with OpenRaftStore and must hold the same current term and
// digest.
func CompactRaftStore(path string) (CompactResult, error) {
	return compactFile(path,
		func(p string) (*bbolt.DB, error) {
			s, err := OpenRaftStore(p)
			if err != nil {
				return nil, err
			}
			return s.db, nil
		},
		func(p string) (func() error, func(*bbolt.DB) (string, error), error) {
			s, err := OpenRaftStore(p)
			if err != nil {
				return nil, nil, err
			}
			return s.Close, func(orig *bbolt.DB) (string, error) {
				var want []byte
				_ = orig.View(func(tx *bbolt.Tx) error {
					if b := tx.Bucket(raftBucketStable); b != nil {
						want = append([]byte(nil), b.Get([]byte("CurrentTerm"))...)
					}
					return nil
				})
				got, err := s.Get([]byte("CurrentTerm"))
				if err != nil && len(want) > 0 {
					return "", fmt.Errorf("current term of the copy: %w", err)
				}
				if string(got) != string(want) {
					return "", fmt.Errorf("current term of the copy is %x, the original's %x", got, want)
				}
				return boltDigest(s.db)
			}, nil
		})
}

// compactFile is the common procedure: open (exclusively) and check the
// original, copy it, sync, verify the copy with the store's own open function,
// then swap atomically.
func compactFile(path string,
	openSrc func(string) (*bbolt.DB, error),
	openCopy func(string) (closeFn func() error, verify func(orig *bbolt.DB) (string, error), err error),
) (res CompactResult, err error) {
	res.Path = path
	st, err := os.Stat(path)
	if err != nil {
		return res, fmt.Errorf("compact: %w", err) // never create a database here
	}
	res.Before = st.Size()
	dir := filepath.Dir(path)
	tmp, keep := path+compactTmpSuffix, path+PrecompactSuffix

	src, err := openSrc(path)
	if err != nil {
		if errors.Is(err, berrors.ErrTimeout) {
			return res, fmt.Errorf("compact %s: %w", path, ErrInUse)
		}
		return res, fmt.Errorf("compact: %w", err)
	}
	defer func() {
		if src != nil {
			err = errors.Join(err, src.Close())
		}
	}()
	// Left over by an interrupted compaction: path is complete in either case
	// (the swap is one rename), so these are only a copy or the old original.
	for _, p := range []string{tmp, keep} {
		if err := os.Remove(p); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return res, fmt.Errorf("compact: remove leftover %s: %w", p, err)
		}
	}
	var firstErr error
	_ = src.View(func(tx *bbolt.Tx) error {
		for e := range tx.Check() {
			if firstErr == nil {
				firstErr = e
			}
		}
		return nil
	})
	if firstErr != nil {
		return res, fmt.Errorf("compact: %s fails its page check, not compacting it: %w", path, firstErr)
	}
	res.FreeBefore = int64(boltStats(src).FreeBytes)
	want, err := boltDigest(src)
	if err != nil {
		return res, fmt.Errorf("compact: read %s: %w", path, err)
	}

	// The copy.
	dst, err := bbolt.Open(tmp, 0o600, &bbolt.Options{Timeout: time.Second, NoFreelistSync: true,
		FreelistType: bbolt.FreelistMapType, NoSync: true})
	if err != nil {
		return res, fmt.Errorf("compact: create %s: %w", tmp, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = os.Remove(tmp)
		}
	}()
	if err := bbolt.Compact(dst, src, compactTxMaxSize); err != nil {
		dst.Close()
		return res, fmt.Errorf("compact: copy %s: %w", path, err)
	}
	if err := errors.Join(dst.Sync(), dst.Close()); err != nil {
		return res, fmt.Errorf("compact: sync %s: %w", tmp, err)
	}
	if err := fsyncFile(tmp); err != nil {
		return res, fmt.Errorf("compact: sync %s: %w", tmp, err)
	}

	// Verify the copy with the store's own open function.
	closeCopy, verify, err := openCopy(tmp)
	if err != nil {
		return res, fmt.Errorf("compact: reopen the copy: %w", err)
	}
	got, verr := verify(src)
	if err := errors.Join(verr, closeCopy()); err != nil {
		return res, fmt.Errorf("compact: verify the copy: %w", err)
	}
	if got != want {
		return res, fmt.Errorf("compact: the copy's content differs from %s (digest %s, want %s)", path, got, want)
	}
	res.Digest = want
	if st, err := os.Stat(tmp); err == nil {
		res.After = st.Size()
	}

	// Swap: keep the original under a second name, rename the copy over it.
	if err := os.Link(path, keep); err != nil {
		return res, fmt.Errorf("compact: keep the original as %s: %w", keep, err)
	}
	if err := syncDir(dir); err != nil {
		return res, fmt.Errorf("compact: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		_ = os.Remove(keep)
		return res, fmt.Errorf("compact: swap: %w", err)
	}
	ok = true
	if err := syncDir(dir); err != nil {
		return res, fmt.Errorf("compact: swapped, but syncing %s failed (%s still holds the original): %w", dir, keep, err)
	}
	err = src.Close()
	src = nil
	if err != nil {
		return res, fmt.Errorf("compact: close the original: %w", err)
	}
	if err := os.Remove(keep); err != nil {
		return res, fmt.Errorf("compact: remove %s: %w", keep, err)
	}
	return res, syncDir(dir)
}

// boltDigest hashes every bucket (with its sequence), key and value of db in
// order: two files with the same digest hold the same content.
func boltDigest(db *bbolt.DB) (string, error) {
	h := sha256.New()
	err := db.View(func(tx *bbolt.Tx) error {
		return tx.ForEach(func(name []byte, b *bbolt.Bucket) error {
			return digestBucket(h, [][]byte{name}, b)
		})
	})
	if err != nil {
		return "", err
	}
	return fmt.Sprintf("%x", h.Sum(nil)), nil
}

func digestBucket(h hash.Hash, path [][]byte, b *bbolt.Bucket) error {
	writeField := func(kind byte, p []byte) {
		var n [9]byte
		n[0] = kind
		binary.BigEndian.PutUint64(n[1:], uint64(len(p)))
		h.Write(n[:])
		h.Write(p)
	}
	writeField('B', nil)
	for _, p := range path {
		writeField('p', p)
	}
	writeField('s', binary.BigEndian.AppendUint64(nil, b.Sequence()))
	return b.ForEach(func(k, v []byte) error {
		if v == nil {
			return digestBucket(h, append(path[:len(path):len(path)], k), b.Bucket(k))
		}
		writeField('k', k)
		writeField('v', v)
		return nil
	})
}

func fsyncFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}
