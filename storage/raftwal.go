package storage

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"golang.org/x/sys/unix"
)

// RaftWAL is a raft.LogStore over append-only segment files in one directory: a
// write-ahead log whose StoreLogs costs one write and one fdatasync, where the bbolt
// log store it replaced paid a bbolt commit (two fdatasyncs). It is the node's only
// Raft log store and keeps no stable store: pair it with RaftStore (or another
// raft.StableStore) for CurrentTerm and the vote.
//
// # On-disk format (walFormatVersion 1)
//
// The directory holds:
//
//	wal.lock                 empty; flock'ed exclusively while the store is open
//	wal.meta                 24 bytes: "RAFTWALM", format version u32, first u64,
//	                         CRC-32C of the 20 bytes before it (all big-endian);
//	                         replaced atomically (wal.meta.tmp, fsync, rename, fsync dir)
//	%020d.wal                a segment: records only, no header; the name is the
//	                         index of the segment's first record
//
// "first" in wal.meta is a durable lower bound: entries below it are deleted even
// if their records are still in a segment (the one a prefix DeleteRange cut through).
// A record is one raft.Log:
//
//	length   u32 BE   payload length, walMinPayload..walMaxPayload
//	crc      u32 BE   CRC-32C (Castagnoli) of the 4 length bytes and the payload
//	payload  version 1 byte (walRecordVersion), index uvarint, term uvarint,
//	         type 1 byte, flags 1 byte (bit 0: AppendedAt follows; others 0),
//	         [AppendedAt.Unix() varint, AppendedAt.Nanosecond() uvarint],
//	         Data uvarint length + bytes, Extensions uvarint length + bytes
//
// Records of a segment are contiguous (index i+1 follows index i), and segments
// are contiguous too: a segment's name is one past the last index of the segment
// before it. An index lives in memory: index → (segment, offset, length).
//
// # Writes
//
// StoreLogs encodes its entries into one buffer, writes it with one pwrite at the
// end of the current segment and calls fdatasync once; only then does it publish
// the new entries to readers. A new segment (when the current one would grow past
// segmentSize, 16 MiB by default; a batch is never split) is created, fsynced and
// its directory fsynced before records go into it.
//
// DeleteRange accepts what raft asks for: a prefix (compaction after a snapshot:
// wal.meta's first is raised durably first, then segments wholly below it are
// removed), a suffix (a follower's conflicting entries: later segments are removed
// newest first, then the segment holding min is ftruncated at the record boundary
// and fsynced), or everything (wal.meta masks it all, then every segment is
// removed). A range strictly inside the log (neither prefix nor suffix) is refused
// with an error; raft never asks for one. StoreLogs must start at LastIndex()+1,
// anywhere in an empty store, or at an index inside the log, which truncates the
// suffix from there first; a gap is an error. RaftWAL reports IsMonotonic, so
// raft removes all logs after installing a snapshot instead of leaving a gap.
//
// # Recovery
//
// OpenRaftWAL scans every segment. A record that is short, has an impossible
// length or fails its CRC at the end of the last segment is a write whose
// fdatasync never returned: it is truncated away (ftruncate + fdatasync) together
// with everything after it, and Truncation reports what was cut. That is decided
// by evidence, not by the bytes: the caller passes an index it knows committed
// (the state database's applied index, the latest snapshot's), and a damaged
// record at or below it is never dropped: it was committed, so the damage is
// corruption, and the open fails with ErrWALCommitted, changing nothing (a log
// that simply ends below that index is the caller's to notice). The same damage
// followed by a valid record, anywhere in
// a segment that is not the last, a record with a valid CRC that does not decode or
// carries the wrong index, or a gap between segments make the open fail with the
// file and offset. Consequently a crash that persisted pages of a multi-record
// write out of order (a hole in the middle, valid records behind it) also refuses
// to open rather than guess; on ext4 and XFS an append's size update is committed
// only after its data, so a torn append shows up as a short tail instead.
//
// # Reads
//
// GetLog reads a record with pread and checks its CRC and index, except for the
// newest entries: StoreLogs keeps them in memory (up to 1024 entries and 8 MiB
// of Data and Extensions), as raft.LogCache would, because
// raft reads each new entry back at once: the leader once per follower to send
// it, a follower to apply it. Those are the entries StoreLogs was given, not
// copies: their Data and Extensions are shared with the caller of StoreLogs and
// with every GetLog that returns them, so neither may modify them (raft does not:
// it treats stored and read entries as immutable, which raft.LogCache relies on
// too). The slices handed out are capacity-limited, so appending to one copies.
// Deleting entries drops them from memory too.
//
// RaftWAL is safe for concurrent use: mutations are serialised, readers run
// concurrently with a write in flight and never see its records before its
// fdatasync returned.
type RaftWAL struct {
	dir string

	// segmentSize is the size past which the next batch starts a new segment.
	// Tests lower it; it is not persisted.
	segmentSize int64
	// recentEntries and recentBytes bound the entries kept in memory (see
	// "Reads"): walRecentEntries and walRecentBytes; tests lower them.
	recentEntries int
	recentBytes   int

	lock *os.File // wal.lock, flock'ed

	// wmu serialises mutations (StoreLogs, DeleteRange, Close) and guards the
	// fields below mu's. mu guards what readers see; writers hold wmu and take mu
	// only to publish.
	wmu       sync.Mutex
	metaFirst uint64         // wal.meta's first as on disk
	failed    error          // sticky: the disk state is uncertain, reopen to recover
	truncated *WALTruncation // the torn tail the open cut off, if any
	buf       []byte         // encoding buffer, reused
	pend      []walLoc

	mu     sync.RWMutex
	closed bool
	segs   []*walSegment // ascending; the last is the one appended to
	first  uint64        // 0 when empty
	last   uint64        // 0 when empty
	locs   []walLoc      // locs[i] is index first+i

	// recent holds the entries recentFirst..recentLast (0, 0: none), a suffix
	// of what StoreLogs published, in slot index%len(recent); recentSize is
	// the size of their Data and Extensions. See "Reads" above.
	recent      []raft.Log
	recentFirst uint64
	recentLast  uint64
	recentSize  int

	writes atomic.Uint64 // record writes to segments (tests count them)
	syncs  atomic.Uint64 // fdatasyncs of segments after a write
}

var (
	_ raft.LogStore          = (*RaftWAL)(nil)
	_ raft.MonotonicLogStore = (*RaftWAL)(nil)
)

// walSegment is one open segment file.
type walSegment struct {
	base uint64 // index of its first record, from the name
	path string
	f    *os.File
	size int64 // end of its last valid record; written under wmu only
}

// walLoc is where one record is.
type walLoc struct {
	seg *walSegment
	off int64
	n   uint32 // header and payload
}

const (
	walFormatVersion = 1
	// A compaction frees the log a whole segment at a time: after a
	// snapshot, up to a segment more than the trailing entries stays on disk.
	walDefaultSegmentSize = 16 << 20

	walLockName    = "wal.lock"
	walMetaName    = "wal.meta"
	walMetaTmpName = "wal.meta.tmp"
	walSegSuffix   = ".wal"
	walSegNameLen  = 20 + len(walSegSuffix)

	walMetaMagic = "RAFTWALM"
	walMetaSize  = 8 + 4 + 8 + 4

	walHeaderSize                 = 8
	walRecordVersion         byte = 1
	walFlagAppendedAt        byte = 1 << 0
	walKnownFlags                 = walFlagAppendedAt
	walMinPayload                 = 7 // version, index, term, type, flags, data length, extensions length
	walMaxPayload                 = 1 << 30
	walFixedOverhead              = walHeaderSize + 1 + 2*binary.MaxVarintLen64 + 2 + 2*binary.MaxVarintLen64 + 2*binary.MaxVarintLen64
	walNanosPerSecond             = uint64(time.Second)
	walMaxRetainedBufferSize      = 8 << 20

	// walRecentEntries and walRecentBytes bound the newest entries GetLog
	// serves from memory: enough for followers a few hundred entries behind.
	walRecentEntries = 1024
	walRecentBytes   = 8 << 20
)

var (
	walCRCTable = crc32.MakeTable(crc32.Castagnoli)

	// walErrCorrupt marks a record or file that does not decode: bad length, CRC,
	// field, index or gap.
	walErrCorrupt = errors.New("corrupt raft wal")
	// walErrVersion marks a record or meta file of another format version.
	walErrVersion = errors.New("unsupported raft wal version")
	// walErrClosed is returned by every call after Close.
	walErrClosed = errors.New("raft wal closed")
	// walErrRange marks a StoreLogs or DeleteRange the log cannot do: a gap, an
	// index below the first, a DeleteRange strictly inside the log.
	walErrRange = errors.New("raft wal range")
)

// ErrWALCommitted is returned by OpenRaftWAL when the damaged tail of the log
// holds an index at or below the committed index it was given: dropping it as a
// torn write would lose a committed entry.
var ErrWALCommitted = errors.New("damaged raft wal record at a committed index")

// WALTruncation describes the torn tail an open cut off.
type WALTruncation struct {
	Segment string // the segment file
	Offset  int64  // where the cut was made
	Bytes   int64  // bytes removed
	Index   uint64 // the index the first removed record would have had
	Reason  string // what was wrong with it
}

// OpenRaftWAL opens the write-ahead log in dir, creating dir (0700) and its files
// (0600) if needed. It recovers from a torn tail above committed (an index the
// caller knows committed: 0 when it knows none) and refuses damage anywhere else
// (see RaftWAL). A second open of the same directory fails while the first is open.
func OpenRaftWAL(dir string, committed uint64) (*RaftWAL, error) {
	w, err := walOpen(dir, committed)
	if err != nil {
		return nil, fmt.Errorf("open raft wal %s: %w", dir, err)
	}
	return w, nil
}

// Truncation reports the torn tail this open cut off, if it cut one.
func (w *RaftWAL) Truncation() (WALTruncation, bool) {
	if w.truncated == nil {
		return WALTruncation{}, false
	}
	return *w.truncated, true
}

func walOpen(dir string, committed uint64) (_ *RaftWAL, err error) {
	switch _, err := os.Stat(dir); {
	case errors.Is(err, fs.ErrNotExist):
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, err
		}
		if err := walSyncDir(filepath.Dir(dir)); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	}
	lock, err := os.OpenFile(filepath.Join(dir, walLockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, err
	}
	if err := unix.Flock(int(lock.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("lock %s: %w (%w)", lock.Name(), ErrInUse, err)
	}
	w := &RaftWAL{dir: dir, segmentSize: walDefaultSegmentSize, recentEntries: walRecentEntries, recentBytes: walRecentBytes, lock: lock}
	defer func() {
		if err != nil {
			for _, s := range w.segs {
				s.f.Close()
			}
			lock.Close() // releases the flock
		}
	}()

	names, err := walListSegments(dir)
	if err != nil {
		return nil, err
	}
	if err := os.Remove(filepath.Join(dir, walMetaTmpName)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, err
	}
	w.metaFirst, err = walReadMeta(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist) && len(names) == 0:
		if err := walWriteMeta(dir, 0); err != nil {
			return nil, err
		}
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%d segment files but no %s: %w", len(names), walMetaName, walErrCorrupt)
	case err != nil:
		return nil, err
	}
	if err := w.walRecover(names, committed); err != nil {
		return nil, err
	}
	return w, nil
}

// walRecover scans the segments named by bases (ascending) into w; a torn
// tail at or below committed is an error.
func (w *RaftWAL) walRecover(bases []uint64, committed uint64) error {
	// Segments wholly below wal.meta's first (the next one starts at or below it)
	// are leftovers of an interrupted DeleteRange: remove them unread.
	var remove []string
	for len(bases) > 1 && bases[1] <= w.metaFirst {
		remove = append(remove, filepath.Join(w.dir, walSegName(bases[0])))
		bases = bases[1:]
	}
	var next uint64 // the index the next record must carry
	for i, base := range bases {
		path := filepath.Join(w.dir, walSegName(base))
		if base == 0 {
			return fmt.Errorf("segment %s: index 0: %w", path, walErrCorrupt)
		}
		if i == 0 {
			next = base
		} else if base != next {
			return fmt.Errorf("segment %s starts at %d, the previous segment ends at %d: %w", path, base, next-1, walErrCorrupt)
		}
		f, err := os.OpenFile(path, os.O_RDWR, 0)
		if err != nil {
			return err
		}
		seg := &walSegment{base: base, path: path, f: f}
		w.segs = append(w.segs, seg)
		fi, err := f.Stat()
		if err != nil {
			return err
		}
		end, torn, err := walScanSegment(f, path, fi.Size(), base, i == len(bases)-1, committed, func(index uint64, off int64, n uint32) {
			if index >= w.metaFirst {
				w.locs = append(w.locs, walLoc{seg: seg, off: off, n: n})
				if w.first == 0 {
					w.first = index
				}
			}
			next = index + 1
		})
		if err != nil {
			return err
		}
		seg.size = end
		if torn != nil {
			w.truncated = torn
			if err := f.Truncate(end); err != nil {
				return err
			}
			if err := walFdatasync(f); err != nil {
				return err
			}
		}
	}
	if len(w.locs) == 0 {
		// Nothing live: an empty store holds no segments.
		for _, s := range w.segs {
			s.f.Close()
			remove = append(remove, s.path)
		}
		w.segs, w.first, w.last = nil, 0, 0
	} else {
		w.last = w.first + uint64(len(w.locs)) - 1
	}
	if len(remove) > 0 {
		for _, p := range remove {
			if err := os.Remove(p); err != nil {
				return err
			}
		}
		if err := walSyncDir(w.dir); err != nil {
			return err
		}
	}
	return nil
}

// walScanSegment reads the records of the segment f (size bytes) from the start,
// calling fn for each valid one; the first must carry index base. It returns the
// end of the last valid record. Damage at the end of the last segment (last true)
// ends the scan with torn set, unless the damaged record's index is at or below
// committed; that and any other damage is an error naming path and offset.
func walScanSegment(f *os.File, path string, size int64, base uint64, last bool, committed uint64, fn func(index uint64, off int64, n uint32)) (end int64, torn *WALTruncation, err error) {
	r := bufio.NewReaderSize(io.NewSectionReader(f, 0, size), 1<<20)
	var (
		off    int64
		next   = base
		hdr    [walHeaderSize]byte
		buf    []byte
		reason string
	)
	for off < size {
		if size-off < walHeaderSize {
			reason = fmt.Sprintf("%d bytes left, short of a record header", size-off)
			break
		}
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return 0, nil, fmt.Errorf("segment %s offset %d: %w", path, off, err)
		}
		n := binary.BigEndian.Uint32(hdr[0:4])
		if n < walMinPayload || n > walMaxPayload {
			reason = fmt.Sprintf("bad record length %d", n)
			break
		}
		if int64(n) > size-off-walHeaderSize {
			reason = fmt.Sprintf("record of %d bytes runs past the end of the file (%d bytes left)", n, size-off-walHeaderSize)
			break
		}
		if cap(buf) < int(n) {
			buf = make([]byte, n)
		}
		buf = buf[:n]
		if _, err := io.ReadFull(r, buf); err != nil {
			return 0, nil, fmt.Errorf("segment %s offset %d: %w", path, off, err)
		}
		if got, want := walChecksum(hdr[0:4], buf), binary.BigEndian.Uint32(hdr[4:8]); got != want {
			reason = fmt.Sprintf("checksum %08x, stored %08x", got, want)
			break
		}
		// A valid checksum over a record that does not decode or sits at the wrong
		// index is not a torn write: always an error.
		var l raft.Log
		if err := walDecodePayload(buf, &l); err != nil {
			return 0, nil, fmt.Errorf("segment %s offset %d: %w", path, off, err)
		}
		if l.Index != next {
			return 0, nil, fmt.Errorf("segment %s offset %d: record has index %d, want %d: %w", path, off, l.Index, next, walErrCorrupt)
		}
		fn(l.Index, off, walHeaderSize+n)
		next++
		off += walHeaderSize + int64(n)
	}
	if off == size {
		return off, nil, nil
	}
	if !last {
		return 0, nil, fmt.Errorf("segment %s offset %d (record %d), not the last segment: %s: %w", path, off, next, reason, walErrCorrupt)
	}
	voff, vindex, err := walFindRecordAfter(f, off, size, next)
	if err != nil {
		return 0, nil, fmt.Errorf("segment %s: %w", path, err)
	}
	if voff >= 0 {
		return 0, nil, fmt.Errorf("segment %s offset %d (record %d): %s, followed by a valid record (index %d) at offset %d: refusing to drop it: %w",
			path, off, next, reason, vindex, voff, walErrCorrupt)
	}
	if next <= committed {
		return 0, nil, fmt.Errorf("segment %s offset %d (record %d): %s; index %d is at or below the committed index %d (applied or snapshotted), so this is not a torn write: %w (%w)",
			path, off, next, reason, next, committed, ErrWALCommitted, walErrCorrupt)
	}
	return off, &WALTruncation{Segment: path, Offset: off, Bytes: size - off, Index: next, Reason: reason}, nil
}

// walFindRecordAfter looks for a valid record starting anywhere in (from, size)
// of f whose index is at least next, and returns its offset and index, or -1. The
// cheap checks (length, version byte, index range) come before the CRC, so a long
// run of garbage costs time linear in its length.
func walFindRecordAfter(f *os.File, from, size int64, next uint64) (int64, uint64, error) {
	if size-from <= walHeaderSize+walMinPayload {
		return -1, 0, nil
	}
	tail := make([]byte, size-from)
	if _, err := f.ReadAt(tail, from); err != nil {
		return -1, 0, err
	}
	maxIndex := next + uint64(len(tail))/(walHeaderSize+walMinPayload)
	for p := 1; p+walHeaderSize+walMinPayload <= len(tail); p++ {
		n := binary.BigEndian.Uint32(tail[p:])
		if n < walMinPayload || uint64(n) > uint64(len(tail)-p-walHeaderSize) {
			continue
		}
		payload := tail[p+walHeaderSize : p+walHeaderSize+int(n)]
		if payload[0] != walRecordVersion {
			continue
		}
		if idx, k := binary.Uvarint(payload[1:]); k <= 0 || idx < next || idx > maxIndex {
			continue
		}
		if walChecksum(tail[p:p+4], payload) != binary.BigEndian.Uint32(tail[p+4:]) {
			continue
		}
		var l raft.Log
		if walDecodePayload(payload, &l) == nil {
			return from + int64(p), l.Index, nil
		}
	}
	return -1, 0, nil
}

// Close closes the files and releases the directory lock; a second Close is a
// no-op. Shut raft down first: every later call fails.
func (w *RaftWAL) Close() error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil
	}
	w.closed = true
	var errs []error
	for _, s := range w.segs {
		errs = append(errs, s.f.Close())
	}
	w.segs, w.locs = nil, nil
	w.recent, w.recentFirst, w.recentLast, w.recentSize = nil, 0, 0, 0
	errs = append(errs, w.lock.Close())
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("close raft wal %s: %w", w.dir, err)
	}
	return nil
}

// IsMonotonic reports true (raft.MonotonicLogStore): the log has no gaps, so raft
// must delete every entry after restoring a snapshot rather than store past a gap.
func (w *RaftWAL) IsMonotonic() bool { return true }

// FirstIndex returns the first index of the log, 0 for an empty log.
func (w *RaftWAL) FirstIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return 0, walErrClosed
	}
	return w.first, nil
}

// LastIndex returns the last index of the log, 0 for an empty log.
func (w *RaftWAL) LastIndex() (uint64, error) {
	w.mu.RLock()
	defer w.mu.RUnlock()
	if w.closed {
		return 0, walErrClosed
	}
	return w.last, nil
}

// GetLog reads the entry at index into log, or returns raft.ErrLogNotFound
// (unwrapped). A recent entry comes from memory; others are read with pread and
// their CRC and index checked. The entry's byte slices must not be modified: a
// recent entry's are shared (see "Reads" in RaftWAL).
func (w *RaftWAL) GetLog(index uint64, log *raft.Log) error {
	w.mu.RLock()
	if w.closed {
		w.mu.RUnlock()
		return walErrClosed
	}
	if w.last == 0 || index < w.first || index > w.last {
		w.mu.RUnlock()
		return raft.ErrLogNotFound
	}
	if w.recentFirst != 0 && index >= w.recentFirst && index <= w.recentLast {
		*log = w.recent[index%uint64(len(w.recent))]
		w.mu.RUnlock()
		return nil
	}
	loc := w.locs[index-w.first]
	rec := make([]byte, loc.n)
	_, err := loc.seg.f.ReadAt(rec, loc.off)
	w.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("raft wal log %d: read %s offset %d: %w", index, loc.seg.path, loc.off, err)
	}
	var l raft.Log
	if err := walDecodeRecord(rec, &l); err != nil {
		return fmt.Errorf("raft wal log %d at %s offset %d: %w", index, loc.seg.path, loc.off, err)
	}
	if l.Index != index {
		return fmt.Errorf("raft wal log %d at %s offset %d: record has index %d: %w", index, loc.seg.path, loc.off, l.Index, walErrCorrupt)
	}
	*log = l
	return nil
}

// StoreLog stores one entry.
func (w *RaftWAL) StoreLog(log *raft.Log) error {
	return w.StoreLogs([]*raft.Log{log})
}

// StoreLogs appends entries with consecutive indexes in one write and one
// fdatasync. The first must be LastIndex()+1, any index above 0 in an empty log,
// or an index inside the log: the entries from there on are deleted first (as
// DeleteRange(index, LastIndex()) would). On error none of logs is stored, though
// a suffix they were to replace may be gone.
func (w *RaftWAL) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	if err := w.walStoreLogs(logs); err != nil {
		return fmt.Errorf("raft wal store logs %d..%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	return nil
}

func (w *RaftWAL) walStoreLogs(logs []*raft.Log) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.walUsable(); err != nil {
		return err
	}
	k := logs[0].Index
	if k == 0 {
		return fmt.Errorf("index 0: %w", walErrRange)
	}
	for i, l := range logs {
		if l.Index != k+uint64(i) || l.Index < k {
			return fmt.Errorf("entry %d has index %d, want %d (entries must be consecutive): %w", i, l.Index, k+uint64(i), walErrRange)
		}
		if size := walMaxEncodedSize(l); size > walMaxPayload {
			return fmt.Errorf("entry %d of %d bytes exceeds %d: %w", l.Index, size, walMaxPayload, walErrRange)
		}
	}
	switch {
	case w.last == 0, k == w.last+1:
	case k == w.first:
		if err := w.walDeleteAll(); err != nil {
			return err
		}
	case k > w.first && k <= w.last:
		if err := w.walTruncateFrom(k); err != nil {
			return err
		}
	default:
		return fmt.Errorf("log holds %d..%d: %w", w.first, w.last, walErrRange)
	}

	buf := w.buf[:0]
	pend := w.pend[:0]
	for _, l := range logs {
		start := len(buf)
		buf = walAppendRecord(buf, l)
		pend = append(pend, walLoc{off: int64(start), n: uint32(len(buf) - start)})
	}
	defer func() {
		if cap(buf) > walMaxRetainedBufferSize {
			buf = nil
		}
		clear(pend)
		w.buf, w.pend = buf[:0], pend[:0]
	}()

	var seg *walSegment
	switch {
	case w.last == 0:
		if err := w.walReset(k); err != nil {
			return err
		}
	case len(w.segs) == 0:
		return fmt.Errorf("log holds %d..%d but no segment: %w", w.first, w.last, walErrCorrupt)
	default:
		if cur := w.segs[len(w.segs)-1]; cur.size > 0 && cur.size+int64(len(buf)) > w.segmentSize {
			if err := w.walRoll(k); err != nil {
				return err
			}
		}
	}
	seg = w.segs[len(w.segs)-1]

	w.writes.Add(1)
	if _, err := seg.f.WriteAt(buf, seg.size); err != nil {
		// Nothing was synced: cut the partial write off and stay usable, unless
		// that fails too.
		if terr := seg.f.Truncate(seg.size); terr != nil {
			w.failed = fmt.Errorf("write %s: %v; truncate it back to %d: %w", seg.path, err, seg.size, terr)
		}
		return fmt.Errorf("write %s at %d: %w", seg.path, seg.size, err)
	}
	w.syncs.Add(1)
	if err := walFdatasync(seg.f); err != nil {
		// After a failed fdatasync the kernel may have dropped the dirty pages:
		// what is on disk is unknown until a reopen scans it.
		w.failed = fmt.Errorf("fdatasync %s: %w", seg.path, err)
		return w.failed
	}
	for i := range pend {
		pend[i].seg = seg
		pend[i].off += seg.size
	}
	w.mu.Lock()
	if w.last == 0 {
		w.first = k
	}
	w.locs = append(w.locs, pend...)
	w.last = k + uint64(len(logs)) - 1
	for _, l := range logs {
		w.walRecentAdd(l)
	}
	w.mu.Unlock()
	seg.size += int64(len(buf))
	return nil
}

// DeleteRange deletes the entries from min to max inclusive. The range must be a
// prefix of the log (compaction), a suffix (conflicting entries), or cover all of
// it; parts of it outside the log are ignored and min > max deletes nothing. A
// range strictly inside the log is refused with an error: raft never asks for one,
// and the log cannot have a hole.
func (w *RaftWAL) DeleteRange(min, max uint64) error {
	if err := w.walDeleteRange(min, max); err != nil {
		return fmt.Errorf("raft wal delete range %d..%d: %w", min, max, err)
	}
	return nil
}

func (w *RaftWAL) walDeleteRange(min, max uint64) error {
	w.wmu.Lock()
	defer w.wmu.Unlock()
	if err := w.walUsable(); err != nil {
		return err
	}
	if min > max || w.last == 0 || max < w.first || min > w.last {
		return nil
	}
	switch {
	case min <= w.first && max >= w.last:
		return w.walDeleteAll()
	case min <= w.first:
		return w.walDeletePrefix(max + 1)
	case max >= w.last:
		return w.walTruncateFrom(min)
	default:
		return fmt.Errorf("log holds %d..%d: only a prefix or a suffix can be deleted: %w", w.first, w.last, walErrRange)
	}
}

// walDeletePrefix makes first the first index; w.first < first <= w.last. wal.meta
// is raised first, so the entries are gone even if a segment removal is lost.
func (w *RaftWAL) walDeletePrefix(first uint64) error {
	if err := walWriteMeta(w.dir, first); err != nil {
		return err
	}
	w.metaFirst = first
	w.mu.Lock()
	w.locs = slices.Clone(w.locs[first-w.first:])
	w.first = first
	for w.recentFirst != 0 && w.recentFirst < first {
		w.walRecentDropOldest()
	}
	var drop []*walSegment
	for len(w.segs) > 1 && w.segs[1].base <= first {
		drop = append(drop, w.segs[0])
		w.segs = w.segs[1:]
	}
	w.segs = slices.Clip(w.segs)
	w.mu.Unlock()
	// Readers can no longer reach drop. Removing them in any order is safe:
	// reopen skips segments wholly below wal.meta's first without reading them.
	return w.walRemoveSegments(drop, false)
}

// walTruncateFrom deletes the entries from index on; w.first < index <= w.last.
// Later segments go newest first, each removal made durable before the next, so
// a crash leaves a contiguous log; then the segment holding index is cut.
func (w *RaftWAL) walTruncateFrom(index uint64) error {
	i := index - w.first
	loc := w.locs[i]
	si := slices.Index(w.segs, loc.seg)
	if si < 0 {
		return fmt.Errorf("log %d in an unknown segment: %w", index, walErrCorrupt)
	}
	drop := slices.Clone(w.segs[si+1:])
	w.mu.Lock()
	clear(w.locs[i:])
	w.locs = w.locs[:i]
	w.last = index - 1
	for w.recentLast >= index {
		w.walRecentDropNewest()
	}
	clear(w.segs[si+1:])
	w.segs = w.segs[:si+1]
	w.mu.Unlock()
	slices.Reverse(drop)
	if err := w.walRemoveSegments(drop, true); err != nil {
		w.failed = err
		return err
	}
	seg := loc.seg
	if err := seg.f.Truncate(loc.off); err != nil {
		w.failed = fmt.Errorf("truncate %s to %d: %w", seg.path, loc.off, err)
		return w.failed
	}
	if err := walFdatasync(seg.f); err != nil {
		w.failed = fmt.Errorf("fdatasync %s: %w", seg.path, err)
		return w.failed
	}
	seg.size = loc.off
	return nil
}

// walDeleteAll empties the log: wal.meta masks every entry, then the segments go.
func (w *RaftWAL) walDeleteAll() error {
	if err := walWriteMeta(w.dir, w.last+1); err != nil {
		return err
	}
	w.metaFirst = w.last + 1
	w.mu.Lock()
	drop := w.segs
	w.segs, w.locs, w.first, w.last = nil, nil, 0, 0
	for w.recentFirst != 0 {
		w.walRecentDropOldest()
	}
	w.mu.Unlock()
	return w.walRemoveSegments(drop, false)
}

// walReset prepares an empty log for its first record at index: stray segment
// files (from a removal that failed) go, wal.meta's first is lowered to index if it
// is above, and a segment named index is created.
func (w *RaftWAL) walReset(index uint64) error {
	// A segment created by an earlier call whose write then failed.
	w.mu.Lock()
	for _, s := range w.segs {
		s.f.Close()
	}
	w.segs = nil
	w.mu.Unlock()
	bases, err := walListSegments(w.dir)
	if err != nil {
		return err
	}
	if len(bases) > 0 {
		for _, b := range bases {
			if err := os.Remove(filepath.Join(w.dir, walSegName(b))); err != nil {
				return err
			}
		}
		if err := walSyncDir(w.dir); err != nil {
			return err
		}
	}
	if w.metaFirst > index {
		if err := walWriteMeta(w.dir, index); err != nil {
			return err
		}
		w.metaFirst = index
	}
	return w.walRoll(index)
}

// walRoll creates the segment whose first record will be index, makes the file
// and its directory entry durable, and makes it the current segment.
func (w *RaftWAL) walRoll(index uint64) error {
	path := filepath.Join(w.dir, walSegName(index))
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	if err := walSyncDir(w.dir); err != nil {
		f.Close()
		os.Remove(path)
		return err
	}
	w.mu.Lock()
	w.segs = append(w.segs, &walSegment{base: index, path: path, f: f})
	w.mu.Unlock()
	return nil
}

// walRemoveSegments closes and removes segs, which readers can no longer reach;
// with eachDurable every removal is fsynced before the next, else once at the end.
func (w *RaftWAL) walRemoveSegments(segs []*walSegment, eachDurable bool) error {
	var errs []error
	for _, s := range segs {
		s.f.Close()
		if err := os.Remove(s.path); err != nil {
			errs = append(errs, err)
			if eachDurable {
				break
			}
			continue
		}
		if eachDurable {
			if err := walSyncDir(w.dir); err != nil {
				errs = append(errs, err)
				break
			}
		}
	}
	if len(segs) > 0 && !eachDurable {
		errs = append(errs, walSyncDir(w.dir))
	}
	return errors.Join(errs...)
}

// walUsable reports why mutations are refused, if they are.
func (w *RaftWAL) walUsable() error {
	if w.closed {
		return walErrClosed
	}
	if w.failed != nil {
		return fmt.Errorf("an earlier failure left the files in an unknown state, reopen to recover: %w", w.failed)
	}
	return nil
}

// walSegName is the file name of the segment whose first record is base.
func walSegName(base uint64) string {
	return fmt.Sprintf("%020d%s", base, walSegSuffix)
}

// walListSegments returns the first indexes of the segment files in dir, ascending.
// Other files are ignored.
func walListSegments(dir string) ([]uint64, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	var bases []uint64
	for _, e := range entries {
		name := e.Name()
		if len(name) != walSegNameLen || !strings.HasSuffix(name, walSegSuffix) {
			continue
		}
		digits := name[:20]
		if strings.Trim(digits, "0123456789") != "" {
			continue
		}
		base, err := strconv.ParseUint(digits, 10, 64)
		if err != nil {
			return nil, fmt.Errorf("segment %s: %w", filepath.Join(dir, name), err)
		}
		if !e.Type().IsRegular() {
			return nil, fmt.Errorf("segment %s is not a regular file: %w", filepath.Join(dir, name), walErrCorrupt)
		}
		bases = append(bases, base)
	}
	slices.Sort(bases)
	return bases, nil
}

// walReadMeta returns wal.meta's first index; fs.ErrNotExist if there is none.
func walReadMeta(dir string) (uint64, error) {
	path := filepath.Join(dir, walMetaName)
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	if len(b) != walMetaSize || string(b[:8]) != walMetaMagic {
		return 0, fmt.Errorf("%s: %d bytes, not a raft wal meta file: %w", path, len(b), walErrCorrupt)
	}
	if got, want := crc32.Checksum(b[:20], walCRCTable), binary.BigEndian.Uint32(b[20:]); got != want {
		return 0, fmt.Errorf("%s: checksum %08x, stored %08x: %w", path, got, want, walErrCorrupt)
	}
	if v := binary.BigEndian.Uint32(b[8:]); v != walFormatVersion {
		return 0, fmt.Errorf("%s: format %d, want %d: %w", path, v, walFormatVersion, walErrVersion)
	}
	return binary.BigEndian.Uint64(b[12:]), nil
}

// walWriteMeta replaces wal.meta atomically: temp file, fsync, rename, fsync dir.
func walWriteMeta(dir string, first uint64) error {
	b := make([]byte, 0, walMetaSize)
	b = append(b, walMetaMagic...)
	b = binary.BigEndian.AppendUint32(b, walFormatVersion)
	b = binary.BigEndian.AppendUint64(b, first)
	b = binary.BigEndian.AppendUint32(b, crc32.Checksum(b, walCRCTable))
	tmp := filepath.Join(dir, walMetaTmpName)
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(tmp, filepath.Join(dir, walMetaName)); err != nil {
		return err
	}
	return walSyncDir(dir)
}

// walSyncDir fsyncs a directory, making entries created, renamed or removed in it
// durable.
func walSyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync directory %s: %w", dir, err)
	}
	return nil
}

// walFdatasync flushes f's data and the metadata needed to read it (its size).
func walFdatasync(f *os.File) error {
	conn, err := f.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := conn.Control(func(fd uintptr) {
		for {
			serr = unix.Fdatasync(int(fd))
			if serr != unix.EINTR {
				return
			}
		}
	}); err != nil {
		return err
	}
	return serr
}

// walRecentAdd keeps l, just published, in memory (see "Reads" in RaftWAL),
// dropping the oldest entries to stay within the bounds; mu held.
func (w *RaftWAL) walRecentAdd(l *raft.Log) {
	size := len(l.Data) + len(l.Extensions)
	if (w.recentFirst != 0 && l.Index != w.recentLast+1) || size > w.recentBytes {
		// Not a continuation (never expected), or too large to keep: what is
		// kept must stay a contiguous suffix of the log.
		for w.recentFirst != 0 {
			w.walRecentDropOldest()
		}
		if size > w.recentBytes {
			return
		}
	}
	if w.recent == nil {
		w.recent = make([]raft.Log, w.recentEntries)
	}
	for w.recentFirst != 0 && (w.recentLast-w.recentFirst+1 >= uint64(len(w.recent)) || w.recentSize+size > w.recentBytes) {
		w.walRecentDropOldest()
	}
	e := *l
	if e.Data != nil {
		e.Data = e.Data[:len(e.Data):len(e.Data)]
	}
	if e.Extensions != nil {
		e.Extensions = e.Extensions[:len(e.Extensions):len(e.Extensions)]
	}
	w.recent[l.Index%uint64(len(w.recent))] = e
	w.recentSize += size
	if w.recentFirst == 0 {
		w.recentFirst = l.Index
	}
	w.recentLast = l.Index
}

// walRecentDropOldest forgets the oldest entry kept in memory; mu held, some kept.
func (w *RaftWAL) walRecentDropOldest() {
	w.walRecentForget(w.recentFirst)
	if w.recentFirst == w.recentLast {
		w.recentFirst, w.recentLast = 0, 0
		return
	}
	w.recentFirst++
}

// walRecentDropNewest forgets the newest entry kept in memory; mu held, some kept.
func (w *RaftWAL) walRecentDropNewest() {
	w.walRecentForget(w.recentLast)
	if w.recentFirst == w.recentLast {
		w.recentFirst, w.recentLast = 0, 0
		return
	}
	w.recentLast--
}

func (w *RaftWAL) walRecentForget(index uint64) {
	e := &w.recent[index%uint64(len(w.recent))]
	w.recentSize -= len(e.Data) + len(e.Extensions)
	*e = raft.Log{} // release its slices
}

// walChecksum is the CRC-32C of a record's length bytes and payload.
func walChecksum(length, payload []byte) uint32 {
	return crc32.Update(crc32.Update(0, walCRCTable, length), walCRCTable, payload)
}

// walMaxEncodedSize bounds the size of l's payload.
func walMaxEncodedSize(l *raft.Log) int {
	return walFixedOverhead + len(l.Data) + len(l.Extensions)
}

// walAppendRecord appends the record of l (header and payload) to dst. A zero
// AppendedAt is not stored.
func walAppendRecord(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, make([]byte, walHeaderSize)...)
	dst = append(dst, walRecordVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	if l.AppendedAt.IsZero() {
		dst = append(dst, 0)
	} else {
		dst = append(dst, walFlagAppendedAt)
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	hdr := dst[start : start+walHeaderSize]
	binary.BigEndian.PutUint32(hdr[0:4], uint32(len(dst)-start-walHeaderSize))
	binary.BigEndian.PutUint32(hdr[4:8], walChecksum(hdr[0:4], dst[start+walHeaderSize:]))
	return dst
}

// walDecodeRecord checks a whole record (header and payload) and decodes it into
// l. Data and Extensions alias rec.
func walDecodeRecord(rec []byte, l *raft.Log) error {
	if len(rec) < walHeaderSize {
		return fmt.Errorf("record of %d bytes: %w", len(rec), walErrCorrupt)
	}
	if n := binary.BigEndian.Uint32(rec[0:4]); uint64(n) != uint64(len(rec)-walHeaderSize) {
		return fmt.Errorf("record length %d, want %d: %w", n, len(rec)-walHeaderSize, walErrCorrupt)
	}
	if got, want := walChecksum(rec[0:4], rec[walHeaderSize:]), binary.BigEndian.Uint32(rec[4:8]); got != want {
		return fmt.Errorf("checksum %08x, stored %08x: %w", got, want, walErrCorrupt)
	}
	return walDecodePayload(rec[walHeaderSize:], l)
}

// walDecodePayload decodes a record's payload into l, whose Data and Extensions
// then alias p (capacity-limited; empty ones are nil). It never panics; l is only
// written on success.
func walDecodePayload(p []byte, l *raft.Log) error {
	if len(p) == 0 {
		return fmt.Errorf("empty payload: %w", walErrCorrupt)
	}
	if p[0] != walRecordVersion {
		return fmt.Errorf("record version %d: %w", p[0], walErrVersion)
	}
	d := walDecoder{b: p[1:]}
	var out raft.Log
	out.Index = d.uvarint("index")
	out.Term = d.uvarint("term")
	out.Type = raft.LogType(d.byte("type"))
	flags := d.byte("flags")
	if d.err == nil && flags&^walKnownFlags != 0 {
		d.fail(fmt.Sprintf("unknown flags %#x", flags))
	}
	if flags&walFlagAppendedAt != 0 {
		sec := d.varint("appended_at seconds")
		nsec := d.uvarint("appended_at nanos")
		if d.err == nil && nsec >= walNanosPerSecond {
			d.fail(fmt.Sprintf("appended_at nanos %d out of range", nsec))
		}
		if d.err == nil {
			out.AppendedAt = time.Unix(sec, int64(nsec)).UTC()
		}
	}
	out.Data = d.bytes("data")
	out.Extensions = d.bytes("extensions")
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return d.err
	}
	*l = out
	return nil
}

// walDecoder reads payload fields from b; after the first failure every read
// returns a zero value and err keeps that failure.
type walDecoder struct {
	b   []byte
	err error
}

func (d *walDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w", what, walErrCorrupt)
	}
	d.b = nil
}

func (d *walDecoder) byte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) == 0 {
		d.fail("truncated " + field)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *walDecoder) uvarint(field string) uint64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Uvarint(d.b)
	if n <= 0 {
		d.fail("malformed " + field)
		return 0
	}
	d.b = d.b[n:]
	return x
}

func (d *walDecoder) varint(field string) int64 {
	if d.err != nil {
		return 0
	}
	x, n := binary.Varint(d.b)
	if n <= 0 {
		d.fail("malformed " + field)
		return 0
	}
	d.b = d.b[n:]
	return x
}

// bytes returns the next length-prefixed field as a capacity-limited subslice of
// the payload; an empty field is nil.
func (d *walDecoder) bytes(field string) []byte {
	n := d.uvarint(field + " length")
	if d.err != nil {
		return nil
	}
	if n > uint64(len(d.b)) {
		d.fail(fmt.Sprintf("%s length %d exceeds the %d bytes left", field, n, len(d.b)))
		return nil
	}
	if n == 0 {
		return nil
	}
	out := d.b[:n:n]
	d.b = d.b[n:]
	return out
}
