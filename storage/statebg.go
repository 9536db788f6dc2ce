package storage

import (
	"context"
	"errors"
	"fmt"
	"os"
	"runtime/debug"

	"golang.org/x/sys/unix"
)

// CheckPages checks the open database's structure as CheckStateFile checks a
// closed file (every branch and leaf page reachable from the root bucket),
// without bbolt and while writers go on: it walks the tree of one read
// transaction, whose pages bbolt does not reuse until it ends, through a
// read-only mapping of its own. For a start that skipped the full check
// (CheckStateFileQuick), run after serving began. Errors wrap ErrStateDamaged,
// except those of reading the file and ctx's.
func (s *StateDB) CheckPages(ctx context.Context) error {
	return s.View(func(tx *Tx) error {
		pageSize := s.db.Info().PageSize
		hwm := uint64(tx.tx.Size()) / uint64(pageSize)
		root := uint64(tx.tx.Cursor().Bucket().Root())
		f, err := os.Open(s.path)
		if err != nil {
			return err
		}
		defer f.Close()
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, unix.MAP_SHARED)
		if err != nil {
			return fmt.Errorf("map %s: %w", s.path, err)
		}
		defer unix.Munmap(data)
		err = checkTree(ctx.Done(), data, pageSize, hwm, root)
		if errors.Is(err, errCheckStopped) {
			return ctx.Err()
		}
		if err != nil {
			return fmt.Errorf("%s (txid %d): %w", s.path, tx.tx.ID(), err)
		}
		return nil
	})
}

// errCheckStopped ends a walk whose done channel closed.
var errCheckStopped = errors.New("page check stopped")

// checkTree walks the buckets under root in data. A fault while reading is an
// error, not a crash.
func checkTree(done <-chan struct{}, data []byte, pageSize int, hwm, root uint64) (err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file failed: %v: %w", r, ErrStateDamaged)
		}
	}()
	if hwm*uint64(pageSize) > uint64(len(data)) {
		return fmt.Errorf("high-water mark %d past the end of the file (%d bytes): %w", hwm, len(data), ErrStateDamaged)
	}
	c := &boltChecker{data: data, pageSize: pageSize, pgid: hwm, seen: make([]uint64, uint64(len(data)/pageSize)/64+1), done: done, trim: true}
	return c.checkBucket(root, nil, nil)
}

// trimPages is how many pages CheckPages reads between two unmapRead: a
// walk of a large file in a running node should not leave the whole file
// resident in the process (the pages stay in the page cache).
var trimPages = 8192 // a variable for tests

// unmapRead drops the mapping's pages from the process (MADV_DONTNEED on a
// shared file mapping unmaps them; their contents stay in the file and the
// page cache, and a later read maps them again).
func (c *boltChecker) unmapRead() {
	_ = unix.Madvise(c.data, unix.MADV_DONTNEED)
}
