package storage

import (
	"bytes"
	"fmt"
	"slices"
)

// CheckStateFileQuick is CheckStateFile limited to what bbolt's Open and the
// first transactions of a start read, for a file that StateDB.Close closed
// (its meta holds a synced freelist, see persistFreelist). bbolt then reads the
// freelist page instead of walking every bucket, so the check reads the meta
// pages, the freelist (ids inside the file, none twice, none of them a page
// the check reached), the root bucket's tree and the meta bucket: a few pages,
// whatever the file's size. Event pages are not read: damage there is found
// by the read that reaches it, which crashes the process at worst, and the
// next start, unclean, runs the full check (cluster's start-up guard).
//
// A file without a synced freelist (the first write after an open drops it)
// gets the full check, because bbolt's Open walks it; deep reports that.
func CheckStateFileQuick(path string) (deep bool, err error) {
	return checkStateFile(path, true)
}

// checkOpenReads checks, below meta, the pages a start reads of a file with a
// synced freelist.
func (c *boltChecker) checkOpenReads(meta boltMeta) error {
	var buckets []boltElem
	if _, err := c.walk(meta.root, nil, nil, 0, &buckets); err != nil {
		return fmt.Errorf("root bucket: %w", err)
	}
	for _, b := range buckets {
		if len(b.value) < boltBucketHeader {
			return fmt.Errorf("bucket %q: value of %d bytes: %w", b.key, len(b.value), ErrStateDamaged)
		}
		if !bytes.Equal(b.key, bucketMeta) {
			continue // read on demand, not at start
		}
		if err := c.checkBucket(ne.Uint64(b.value), b.value[boltBucketHeader:], b.key); err != nil {
			return err
		}
	}
	if err := c.checkFreelist(meta.freelist); err != nil {
		return err
	}
	return c.checkFreeIDs(meta.freelist)
}

// checkFreeIDs checks the ids of the synced freelist at page id (already
// through checkFreelist): no id twice and none of a page the check reached.
// bbolt would hand such a page out again and overwrite live data.
func (c *boltChecker) checkFreeIDs(id uint64) error {
	p := c.data[id*uint64(c.pageSize):]
	off, n := uint64(boltPageHeaderSize), uint64(ne.Uint16(p[10:]))
	if n == 0xFFFF {
		n = ne.Uint64(p[off:])
		off += 8
	}
	ids := make([]uint64, n)
	for i := range ids {
		ids[i] = ne.Uint64(p[off+8*uint64(i):])
	}
	slices.Sort(ids)
	for i, f := range ids {
		if i > 0 && ids[i-1] == f {
			return fmt.Errorf("freelist page %d: page %d listed twice: %w", id, f, ErrStateDamaged)
		}
		if f/64 < uint64(len(c.seen)) && c.seen[f/64]&(1<<(f%64)) != 0 {
			return fmt.Errorf("freelist page %d: page %d is listed free but in use: %w", id, f, ErrStateDamaged)
		}
	}
	return nil
}
