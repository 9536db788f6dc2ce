package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/fnv"
	"os"
	"runtime/debug"
	"slices"

	"golang.org/x/sys/unix"
)

// ErrStateDamaged marks a state database whose structure is damaged: opening it
// with bbolt would fail, panic or crash the process.
var ErrStateDamaged = errors.New("state database damaged")

// CheckStateFile checks, without bbolt and without writing, that bbolt can open
// the state database at path: it reads exactly the pages bbolt's Open reads and
// checks everything bbolt would trip over there. bbolt trusts its file: a page
// whose header names another page, a child pointer past the end of the file or
// an element running off its page panics inside a goroutine of bbolt.Open (where
// no recover can catch it) or faults on the mmap, so a damaged file crash-loops
// the node instead of taking the start-up guard's move-aside-and-rebuild path.
//
// What is read: both meta pages (as bbolt picks one: the newer that validates);
// a synced freelist's page (a file the state database never synced its freelist
// in has none); and, because bbolt rebuilds an unsynced freelist at Open by
// walking every bucket's B+tree, every branch and leaf page reachable from the
// root bucket, the way bbolt's walk reads them: page ids within the file and the high-water mark, the
// header's id and type, element tables and keys within their page, keys in order
// (the walk reports a disorder as an error, which Open turns into a panic), no
// page reached twice, bucket values long enough to hold a bucket header, inline
// buckets within their value. Event and record bytes (values) are not judged.
//
// A synced freelist must list no page twice and no page of the tree.
//
// The cost is that of bbolt's own walk at Open (the same pages, already in the
// page cache for the Open that follows); CheckStateFileQuick is the check for
// a file whose Open does not walk. A 0-byte file passes: bbolt initialises
// it. Errors wrap ErrStateDamaged, except those of reading the file.
func CheckStateFile(path string) error {
	_, err := checkStateFile(path, false)
	return err
}

// checkStateFile maps the file and checks it: everything (quick false), or
// what bbolt's Open reads (quick true, CheckStateFileQuick). It reports
// whether it walked every bucket.
func checkStateFile(path string, quick bool) (deep bool, err error) {
	f, err := os.Open(path)
	if err != nil {
		return false, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return false, err
	}
	if fi.Size() == 0 {
		return false, nil
	}
	flags := unix.MAP_SHARED
	if !quick {
		flags |= unix.MAP_POPULATE // every page is read: one sequential read-ahead
	}
	data, err := unix.Mmap(int(f.Fd()), 0, int(fi.Size()), unix.PROT_READ, flags)
	if err != nil {
		return false, fmt.Errorf("map %s: %w", path, err)
	}
	defer unix.Munmap(data)
	if deep, err = checkState(data, quick); err != nil {
		return deep, fmt.Errorf("%s: %w", path, err)
	}
	return deep, nil
}

// bbolt's on-disk layout (go.etcd.io/bbolt/internal/common), in native byte
// order: a page header of id u64, flags u16, count u16, overflow u32; branch
// elements pos u32, ksize u32, pgid u64; leaf elements flags u32, pos u32,
// ksize u32, vsize u32 (pos counts from the element itself); a bucket value
// starts with root u64, sequence u64 and, when root is 0, holds an inline leaf
// page; the meta follows the header of pages 0 and 1.
const (
	boltPageHeaderSize  = 16
	boltElementSize     = 16
	boltBucketHeader    = 16
	boltBranchPage      = 0x01
	boltLeafPage        = 0x02
	boltMetaPage        = 0x04
	boltFreelistPage    = 0x10
	boltBucketLeafFlag  = 0x01
	boltMagic           = 0xED0CDAED
	boltVersion         = 2
	boltMetaSize        = 56 // magic … txid, then the checksum
	boltNoFreelist      = ^uint64(0)
	boltMinPageSize     = 1024
	boltMaxPageSize     = 1 << 24
	boltFirstMetaBuffer = 0x1000
)

var ne = binary.NativeEndian

// boltMeta is the part of a meta page the check uses.
type boltMeta struct {
	pageSize uint32
	root     uint64
	freelist uint64
	pgid     uint64
	txid     uint64
}

// parseBoltMeta decodes and validates the meta of the page at b (as bbolt's
// Meta.Validate: magic, version, FNV-64a checksum).
func parseBoltMeta(b []byte) (boltMeta, error) {
	if len(b) < boltPageHeaderSize+boltMetaSize+8 {
		return boltMeta{}, errors.New("short meta page")
	}
	m := b[boltPageHeaderSize:]
	if ne.Uint32(m[0:]) != boltMagic {
		return boltMeta{}, errors.New("bad magic")
	}
	if v := ne.Uint32(m[4:]); v != boltVersion {
		return boltMeta{}, fmt.Errorf("version %d", v)
	}
	h := fnv.New64a()
	h.Write(m[:boltMetaSize])
	if got, want := h.Sum64(), ne.Uint64(m[boltMetaSize:]); got != want {
		return boltMeta{}, fmt.Errorf("checksum %016x, stored %016x", got, want)
	}
	return boltMeta{pageSize: ne.Uint32(m[8:]), root: ne.Uint64(m[16:]), freelist: ne.Uint64(m[32:]),
		pgid: ne.Uint64(m[40:]), txid: ne.Uint64(m[48:])}, nil
}

// checkStateBytes is CheckStateFile over the file's bytes.
func checkStateBytes(data []byte) error {
	_, err := checkState(data, false)
	return err
}

// checkState is checkStateFile over the file's bytes. A fault while reading
// them (the file shrank under the mapping) is an error, not a crash.
func checkState(data []byte, quick bool) (deep bool, err error) {
	old := debug.SetPanicOnFault(true)
	defer func() {
		debug.SetPanicOnFault(old)
		if r := recover(); r != nil {
			err = fmt.Errorf("reading the file failed: %v: %w", r, ErrStateDamaged)
		}
	}()
	if len(data) < 2*boltMinPageSize {
		return false, fmt.Errorf("%d bytes, shorter than two pages: %w", len(data), ErrStateDamaged)
	}
	// The page size comes from the first meta that validates (bbolt's
	// getPageSize: page 0, then page 1 at every power of two from 1 KiB).
	pageSize := 0
	if m, err := parseBoltMeta(data[:min(len(data), boltFirstMetaBuffer)]); err == nil {
		pageSize = int(m.pageSize)
	} else {
		for i := 0; i <= 14 && pageSize == 0; i++ {
			pos := 1024 << i
			if pos >= len(data)-1024 {
				break
			}
			if m, err := parseBoltMeta(data[pos:min(len(data), pos+boltFirstMetaBuffer)]); err == nil {
				pageSize = int(m.pageSize)
			}
		}
	}
	if pageSize == 0 {
		return false, fmt.Errorf("neither meta page is valid: %w", ErrStateDamaged)
	}
	if pageSize < boltMinPageSize || pageSize > boltMaxPageSize || pageSize&(pageSize-1) != 0 {
		return false, fmt.Errorf("page size %d: %w", pageSize, ErrStateDamaged)
	}
	if len(data) < 2*pageSize {
		return false, fmt.Errorf("%d bytes, shorter than two %d-byte pages: %w", len(data), pageSize, ErrStateDamaged)
	}
	m0, err0 := parseBoltMeta(data[:pageSize])
	m1, err1 := parseBoltMeta(data[pageSize : 2*pageSize])
	var meta boltMeta
	switch {
	case err0 != nil && err1 != nil:
		return false, fmt.Errorf("meta page 0: %v; meta page 1: %v: %w", err0, err1, ErrStateDamaged)
	case err0 != nil:
		meta = m1
	case err1 != nil:
		meta = m0
	case m1.txid > m0.txid:
		meta = m1
	default:
		meta = m0
	}
	// bbolt ignores a meta page's header at Open, but its Check (run after an
	// unclean stop) asserts it; it is never written wrong.
	for id := range 2 {
		hdr := data[id*pageSize:]
		if got, flags := ne.Uint64(hdr), ne.Uint16(hdr[8:]); got != uint64(id) || flags != boltMetaPage {
			return false, fmt.Errorf("meta page %d: header says page %d, type flags %#x: %w", id, got, flags, ErrStateDamaged)
		}
	}
	if meta.pgid < 3 {
		return false, fmt.Errorf("meta (txid %d): high-water mark %d: %w", meta.txid, meta.pgid, ErrStateDamaged)
	}
	// Every page reached lies inside the file (checked in page), so the
	// bitmap needs a bit per page of the file, whatever the meta claims.
	filePages := uint64(len(data) / pageSize)
	c := &boltChecker{data: data, pageSize: pageSize, pgid: meta.pgid, seen: make([]uint64, filePages/64+1)}
	if quick && meta.freelist != boltNoFreelist {
		if err := c.checkOpenReads(meta); err != nil {
			return false, fmt.Errorf("meta (txid %d): %w", meta.txid, err)
		}
		return false, nil
	}
	if meta.freelist != boltNoFreelist {
		if err := c.checkFreelist(meta.freelist); err != nil {
			return true, fmt.Errorf("meta (txid %d): %w", meta.txid, err)
		}
	}
	if err := c.checkBucket(meta.root, nil, nil); err != nil {
		return true, fmt.Errorf("meta (txid %d): %w", meta.txid, err)
	}
	if meta.freelist != boltNoFreelist {
		// Every reachable page is marked now: none may be listed free.
		if err := c.checkFreeIDs(meta.freelist); err != nil {
			return true, fmt.Errorf("meta (txid %d): %w", meta.txid, err)
		}
	}
	return true, nil
}

// boltChecker walks one file's pages.
type boltChecker struct {
	data     []byte
	pageSize int
	pgid     uint64          // the meta's high-water mark: every page id is below it
	seen     []uint64        // bitmap of the page ids reached
	bufs     [][]boltElem    // element buffers by recursion depth
	done     <-chan struct{} // closed: stop (CheckPages); nil: never
	reached  int             // pages reached, for polling done
	trim     bool            // unmap what was read now and then (CheckPages)
}

// page returns the bytes of page id (with its overflow) after checking its
// position and header; want is the page type(s) it must have.
func (c *boltChecker) page(id uint64, want uint16) ([]byte, error) {
	if c.reached++; c.done != nil && c.reached%1024 == 1 {
		select {
		case <-c.done:
			return nil, errCheckStopped
		default:
		}
	}
	if c.trim && c.reached%trimPages == 0 {
		c.unmapRead()
	}
	if id < 2 || id >= c.pgid {
		return nil, fmt.Errorf("page id %d outside 2..%d: %w", id, c.pgid-1, ErrStateDamaged)
	}
	start := id * uint64(c.pageSize)
	if start+uint64(c.pageSize) > uint64(len(c.data)) {
		return nil, fmt.Errorf("page %d lies past the end of the file (%d bytes): %w", id, len(c.data), ErrStateDamaged)
	}
	hdr := c.data[start : start+boltPageHeaderSize]
	if got := ne.Uint64(hdr[0:]); got != id {
		return nil, fmt.Errorf("page %d: header says page %d: %w", id, got, ErrStateDamaged)
	}
	flags := ne.Uint16(hdr[8:])
	if flags&want == 0 || flags&(flags-1) != 0 {
		return nil, fmt.Errorf("page %d: type flags %#x: %w", id, flags, ErrStateDamaged)
	}
	overflow := uint64(ne.Uint32(hdr[12:]))
	if id+overflow >= c.pgid || start+(overflow+1)*uint64(c.pageSize) > uint64(len(c.data)) {
		return nil, fmt.Errorf("page %d: %d overflow pages run past the high-water mark or the end of the file: %w", id, overflow, ErrStateDamaged)
	}
	for i := id; i <= id+overflow; i++ {
		if c.seen[i/64]&(1<<(i%64)) != 0 {
			return nil, fmt.Errorf("page %d is reached twice: %w", i, ErrStateDamaged)
		}
		c.seen[i/64] |= 1 << (i % 64)
	}
	return c.data[start : start+(overflow+1)*uint64(c.pageSize)], nil
}

// checkFreelist checks a synced freelist page: every id it lists is inside the
// file's page range.
func (c *boltChecker) checkFreelist(id uint64) error {
	p, err := c.page(id, boltFreelistPage)
	if err != nil {
		return fmt.Errorf("freelist: %w", err)
	}
	off, n := uint64(boltPageHeaderSize), uint64(ne.Uint16(p[10:]))
	if n == 0xFFFF {
		n = ne.Uint64(p[off:])
		off += 8
	}
	if n > (uint64(len(p))-off)/8 {
		return fmt.Errorf("freelist page %d: %d ids do not fit: %w", id, n, ErrStateDamaged)
	}
	for i := uint64(0); i < n; i++ {
		if f := ne.Uint64(p[off+8*i:]); f < 2 || f >= c.pgid {
			return fmt.Errorf("freelist page %d: free page id %d outside 2..%d: %w", id, f, c.pgid-1, ErrStateDamaged)
		}
	}
	return nil
}

// boltElem is one element of a branch or leaf page.
type boltElem struct {
	key, value []byte
	child      uint64 // branch: the child page
	bucket     bool   // leaf: the value is a bucket
}

// pageName names a page in errors: a page id, or an inline bucket's name.
type pageName struct {
	id     uint64
	inline []byte // the bucket's name when id is 0
}

func (n pageName) String() string {
	if n.id == 0 {
		return fmt.Sprintf("inline bucket %q", n.inline)
	}
	return fmt.Sprintf("page %d", n.id)
}

// elements decodes the element table of page p (a page or an inline page) into
// the buffer of recursion depth depth, checking that every element and its key
// (and value) lie inside p.
func (c *boltChecker) elements(p []byte, depth int, name pageName) ([]boltElem, bool, error) {
	if len(p) < boltPageHeaderSize {
		return nil, false, fmt.Errorf("%v: %d bytes, shorter than a page header: %w", name, len(p), ErrStateDamaged)
	}
	flags, count := ne.Uint16(p[8:]), int(ne.Uint16(p[10:]))
	branch := flags == boltBranchPage
	if !branch && flags != boltLeafPage {
		return nil, false, fmt.Errorf("%v: type flags %#x, want a branch or leaf page: %w", name, flags, ErrStateDamaged)
	}
	if branch && count == 0 {
		return nil, false, fmt.Errorf("%v: branch page without elements: %w", name, ErrStateDamaged)
	}
	if boltPageHeaderSize+count*boltElementSize > len(p) {
		return nil, false, fmt.Errorf("%v: %d elements do not fit in %d bytes: %w", name, count, len(p), ErrStateDamaged)
	}
	for len(c.bufs) <= depth {
		c.bufs = append(c.bufs, nil)
	}
	out := slices.Grow(c.bufs[depth][:0], count)[:count]
	c.bufs[depth] = out
	for i := range out {
		at := boltPageHeaderSize + i*boltElementSize
		e := p[at : at+boltElementSize]
		var (
			pos, ksize, vsize uint64
			el                boltElem
		)
		if branch {
			pos, ksize, el.child = uint64(ne.Uint32(e[0:])), uint64(ne.Uint32(e[4:])), ne.Uint64(e[8:])
		} else {
			el.bucket = ne.Uint32(e[0:])&boltBucketLeafFlag != 0
			pos, ksize, vsize = uint64(ne.Uint32(e[4:])), uint64(ne.Uint32(e[8:])), uint64(ne.Uint32(e[12:]))
		}
		k := uint64(at) + pos
		if k+ksize+vsize > uint64(len(p)) {
			return nil, false, fmt.Errorf("%v: element %d (key %d bytes, value %d bytes at +%d) runs past the page (%d bytes): %w",
				name, i, ksize, vsize, pos, len(p), ErrStateDamaged)
		}
		el.key = p[k : k+ksize]
		el.value = p[k+ksize : k+ksize+vsize]
		out[i] = el
	}
	return out, branch, nil
}

// checkBucket checks the bucket whose root page is root (0: inline, held in
// inline) and the buckets nested in it.
func (c *boltChecker) checkBucket(root uint64, inline []byte, path []byte) error {
	if root == 0 {
		// An inline bucket: one leaf page inside its value, never holding a
		// bucket (bbolt only inlines buckets without sub-buckets). bbolt's
		// walk skips it, reads through it later.
		els, branch, err := c.elements(inline, 0, pageName{inline: path})
		if err != nil {
			return err
		}
		if branch {
			return fmt.Errorf("inline bucket %q: a branch page: %w", path, ErrStateDamaged)
		}
		for i, e := range els {
			if e.bucket {
				return fmt.Errorf("inline bucket %q: element %d is a bucket: %w", path, i, ErrStateDamaged)
			}
			if i > 0 && bytes.Compare(els[i-1].key, e.key) >= 0 {
				return fmt.Errorf("inline bucket %q: key %d out of order: %w", path, i, ErrStateDamaged)
			}
		}
		return nil
	}
	var buckets []boltElem
	if _, err := c.walk(root, nil, nil, 0, &buckets); err != nil {
		return fmt.Errorf("bucket %q: %w", path, err)
	}
	for _, b := range buckets {
		if len(b.value) < boltBucketHeader {
			return fmt.Errorf("bucket %q: sub-bucket %q: value of %d bytes: %w", path, b.key, len(b.value), ErrStateDamaged)
		}
		if err := c.checkBucket(ne.Uint64(b.value), b.value[boltBucketHeader:], b.key); err != nil {
			return err
		}
	}
	return nil
}

// walk checks the subtree of page id, whose keys must be ≥ lo (nil: no bound)
// and < hi (nil: none), as bbolt's recursivelyCheckPageKeyOrderInternal does,
// and returns its largest key; the leaf elements that are buckets are added to
// buckets.
func (c *boltChecker) walk(id uint64, lo, hi []byte, depth int, buckets *[]boltElem) ([]byte, error) {
	p, err := c.page(id, boltBranchPage|boltLeafPage)
	if err != nil {
		return nil, err
	}
	els, branch, err := c.elements(p, depth, pageName{id: id})
	if err != nil {
		return nil, err
	}
	prev := lo
	var max []byte
	for i, e := range els {
		if (i == 0 && prev != nil && bytes.Compare(prev, e.key) > 0) || (i > 0 && bytes.Compare(prev, e.key) >= 0) {
			return nil, fmt.Errorf("page %d: key %d (%x) not above the key before it (%x): %w", id, i, e.key, prev, ErrStateDamaged)
		}
		if hi != nil && bytes.Compare(e.key, hi) >= 0 {
			return nil, fmt.Errorf("page %d: key %d (%x) not below its parent's next key (%x): %w", id, i, e.key, hi, ErrStateDamaged)
		}
		if !branch {
			if e.bucket {
				*buckets = append(*buckets, e)
			}
			prev, max = e.key, e.key
			continue
		}
		next := hi
		if i+1 < len(els) {
			next = els[i+1].key
		}
		if max, err = c.walk(e.child, e.key, next, depth+1, buckets); err != nil {
			return nil, err
		}
		prev = max
	}
	return max, nil
}
