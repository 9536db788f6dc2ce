package storage

import (
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"
)

// The Raft store's file (DESIGN.md "State machine and storage" §10). raft-boltdb/v2
// does not build with raft v1.8.0, so the log store and stable store are ours.
// Changing any bucket, key or encoding below is a format change: bump
// RaftStoreFormatVersion (file layout) or raftLogVersion (one entry's encoding).
//
//	raft_meta/format            RaftStoreFormatVersion, 8 BE
//	raft_log/<index:8 BE>       one raft.Log, encoded by appendRaftLog
//	raft_stable/<key>           raft.StableStore values, verbatim; SetUint64 values are 8 BE
//
// Every other bucket of the file belongs to the file of package storage that
// creates it through RaftStore.Update.
const RaftStoreFormatVersion = 1

var (
	raftBucketMeta   = []byte("raft_meta")
	raftBucketLog    = []byte("raft_log")
	raftBucketStable = []byte("raft_stable")

	raftKeyFormat = []byte("format")
)

// raftLogFillPercent is how full bbolt fills a log page before splitting it. Raft
// appends at the tail, where bbolt's default of one half would leave every page
// half empty and the file twice its size; entries are never inserted in the middle,
// so packing pages costs nothing. (etcd uses 0.9 for its append-only buckets too.)
const raftLogFillPercent = 0.9

// errRaftLogCorrupt marks a stored Raft log value that does not decode: a failed
// checksum, a truncated or malformed field, or an entry stored under another index.
var errRaftLogCorrupt = errors.New("corrupt raft log entry")

// errRaftLogVersion marks a stored Raft log value written by a newer encoding.
var errRaftLogVersion = errors.New("unsupported raft log entry version")

// RaftStore is a node's local bbolt file holding the Raft log, the Raft stable
// store, and node-local buckets other parts of storage add (e.g. artifact
// watermarks). It is never replicated or snapshotted.
//
// It implements raft.LogStore and raft.StableStore and is safe for concurrent use
// (raft reads the log from its replication goroutines while it appends). Every
// write is one bbolt transaction, fsynced on commit.
type RaftStore struct {
	path string
	db   *bbolt.DB
}

var (
	_ raft.LogStore    = (*RaftStore)(nil)
	_ raft.StableStore = (*RaftStore)(nil)
)

// OpenRaftStore opens (creating 0600, parent dir must exist) the bbolt file at path
// with NoFreelistSync and the map freelist (fast, the freelist is rebuilt on open),
// a 1 s open timeout, and creates its buckets. A file of another format version is
// refused. A second open of the same file, from this or another process, fails
// after the timeout: bbolt holds an exclusive file lock while the store is open.
func OpenRaftStore(path string) (*RaftStore, error) {
	db, err := bbolt.Open(path, 0o600, &bbolt.Options{
		Timeout:        time.Second,
		NoFreelistSync: true,
		FreelistType:   bbolt.FreelistMapType,
	})
	if err != nil {
		return nil, fmt.Errorf("open raft store %s: %w", path, err)
	}
	err = db.Update(func(tx *bbolt.Tx) error {
		meta, err := tx.CreateBucketIfNotExists(raftBucketMeta)
		if err != nil {
			return err
		}
		for _, name := range [][]byte{raftBucketLog, raftBucketStable} {
			if _, err := tx.CreateBucketIfNotExists(name); err != nil {
				return err
			}
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
// transaction excludes Raft's own appends while it runs, so keep fn short.
func (s *RaftStore) Update(fn func(tx *bbolt.Tx) error) error { return s.db.Update(fn) }

// View runs fn in a read transaction of the store's file. Byte slices read inside
// fn are valid only until fn returns.
func (s *RaftStore) View(fn func(tx *bbolt.Tx) error) error { return s.db.View(fn) }

// FirstIndex returns the first index written, 0 for an empty log.
func (s *RaftStore) FirstIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(raftBucketLog).Cursor().First()
		var err error
		idx, err = raftIndexFromKey(k)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("raft log first index: %w", err)
	}
	return idx, nil
}

// LastIndex returns the last index written, 0 for an empty log.
func (s *RaftStore) LastIndex() (uint64, error) {
	var idx uint64
	err := s.db.View(func(tx *bbolt.Tx) error {
		k, _ := tx.Bucket(raftBucketLog).Cursor().Last()
		var err error
		idx, err = raftIndexFromKey(k)
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("raft log last index: %w", err)
	}
	return idx, nil
}

// GetLog reads the entry at index into log, or returns raft.ErrLogNotFound
// (unwrapped: raft compares it with ==). The entry's byte slices are copies, owned
// by the caller. An undecodable entry is an error, never a panic.
func (s *RaftStore) GetLog(index uint64, log *raft.Log) error {
	var key [8]byte
	binary.BigEndian.PutUint64(key[:], index)
	err := s.db.View(func(tx *bbolt.Tx) error {
		v := tx.Bucket(raftBucketLog).Get(key[:])
		if v == nil {
			return raft.ErrLogNotFound
		}
		var l raft.Log
		if err := decodeRaftLog(v, &l); err != nil {
			return fmt.Errorf("raft log %d: %w", index, err)
		}
		if l.Index != index {
			return fmt.Errorf("raft log %d: stored entry has index %d: %w", index, l.Index, errRaftLogCorrupt)
		}
		*log = l
		return nil
	})
	return err // raft.ErrLogNotFound passes through bbolt's View unwrapped
}

// StoreLog stores one entry.
func (s *RaftStore) StoreLog(log *raft.Log) error {
	return s.StoreLogs([]*raft.Log{log})
}

// StoreLogs stores entries in one bbolt transaction: all of them or, on error, none.
// An entry at an index already stored replaces it. Indexes need not be contiguous.
func (s *RaftStore) StoreLogs(logs []*raft.Log) error {
	if len(logs) == 0 {
		return nil
	}
	// bbolt keeps a reference to each value until the transaction ends, so every
	// value gets its own region of one buffer (keys are copied by Put).
	size := 0
	for _, l := range logs {
		size += raftLogMaxSize(l)
	}
	buf := make([]byte, 0, size)
	err := s.db.Update(func(tx *bbolt.Tx) error {
		b := tx.Bucket(raftBucketLog)
		b.FillPercent = raftLogFillPercent
		var key [8]byte
		for _, l := range logs {
			start := len(buf)
			buf = appendRaftLog(buf, l)
			binary.BigEndian.PutUint64(key[:], l.Index)
			if err := b.Put(key[:], buf[start:len(buf):len(buf)]); err != nil {
				return fmt.Errorf("put %d: %w", l.Index, err)
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("store raft logs %d..%d: %w", logs[0].Index, logs[len(logs)-1].Index, err)
	}
	return nil
}

// DeleteRange deletes the entries from min to max inclusive, in one transaction.
// Absent indexes are skipped; min > max deletes nothing.
func (s *RaftStore) DeleteRange(min, max uint64) error {
	if min > max {
		return nil
	}
	var from [8]byte
	binary.BigEndian.PutUint64(from[:], min)
	err := s.db.Update(func(tx *bbolt.Tx) error {
		c := tx.Bucket(raftBucketLog).Cursor()
		// Seek again after every delete rather than Next: the cursor's position after
		// Cursor.Delete is not something to rely on.
		for k, _ := c.Seek(from[:]); k != nil; k, _ = c.Seek(from[:]) {
			idx, err := raftIndexFromKey(k)
			if err != nil {
				return err
			}
			if idx > max {
				break
			}
			if err := c.Delete(); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("delete raft logs %d..%d: %w", min, max, err)
	}
	return nil
}

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

// raftIndexFromKey decodes an 8-byte big-endian key of the log bucket; the nil key
// of a cursor on an empty bucket is index 0.
func raftIndexFromKey(k []byte) (uint64, error) {
	switch len(k) {
	case 0:
		return 0, nil
	case 8:
		return binary.BigEndian.Uint64(k), nil
	default:
		return 0, fmt.Errorf("log key %x is not an index: %w", k, errRaftLogCorrupt)
	}
}

// The encoding of one raft.Log, version 1. Unsigned varints are encoding/binary's
// Uvarint, signed ones its zigzag Varint; all integers are little-endian base 128
// except the checksum.
//
//	version   1 byte   raftLogVersion
//	index     uvarint  Log.Index (checked against the key on read)
//	term      uvarint  Log.Term
//	type      1 byte   Log.Type
//	flags     1 byte   bit 0: AppendedAt follows; other bits must be 0
//	[seconds  varint   AppendedAt.Unix()]
//	[nanos    uvarint  AppendedAt.Nanosecond(), < 1e9]
//	data      uvarint length + bytes
//	ext       uvarint length + bytes
//	crc       4 bytes  CRC-32C (Castagnoli) of everything before it, big-endian
//
// bbolt checksums only its meta pages, so the CRC is what turns a damaged page into
// an error instead of a wrong command handed to the FSM. A zero AppendedAt is not
// stored and decodes as the zero time; a stored one decodes in UTC (equal instant,
// the location and monotonic reading are not kept). Empty Data or Extensions
// decode as nil.
const (
	raftLogVersion        byte = 1
	raftLogFlagAppendedAt byte = 1 << 0
	raftLogKnownFlags          = raftLogFlagAppendedAt
	raftLogFixedOverhead       = 1 + 2*binary.MaxVarintLen64 + 1 + 1 + 2*binary.MaxVarintLen64 + 2*binary.MaxVarintLen64 + 4
	raftLogChecksumSize        = 4
	raftLogMinEncodedSize      = 7 + raftLogChecksumSize // every field present, one byte each
	raftLogNanosPerSecond      = uint64(time.Second)
)

var raftLogCRCTable = crc32.MakeTable(crc32.Castagnoli)

// raftLogMaxSize bounds the encoded size of l.
func raftLogMaxSize(l *raft.Log) int {
	return raftLogFixedOverhead + len(l.Data) + len(l.Extensions)
}

// appendRaftLog appends the encoding of l to dst.
func appendRaftLog(dst []byte, l *raft.Log) []byte {
	start := len(dst)
	dst = append(dst, raftLogVersion)
	dst = binary.AppendUvarint(dst, l.Index)
	dst = binary.AppendUvarint(dst, l.Term)
	dst = append(dst, byte(l.Type))
	if l.AppendedAt.IsZero() {
		dst = append(dst, 0)
	} else {
		dst = append(dst, raftLogFlagAppendedAt)
		dst = binary.AppendVarint(dst, l.AppendedAt.Unix())
		dst = binary.AppendUvarint(dst, uint64(l.AppendedAt.Nanosecond()))
	}
	dst = binary.AppendUvarint(dst, uint64(len(l.Data)))
	dst = append(dst, l.Data...)
	dst = binary.AppendUvarint(dst, uint64(len(l.Extensions)))
	dst = append(dst, l.Extensions...)
	return binary.BigEndian.AppendUint32(dst, crc32.Checksum(dst[start:], raftLogCRCTable))
}

// decodeRaftLog decodes v into l, copying the byte fields out of v (which may be
// bbolt's memory map). It never panics; every malformed input is an error wrapping
// errRaftLogCorrupt or errRaftLogVersion, and l is only written on success.
func decodeRaftLog(v []byte, l *raft.Log) error {
	if len(v) == 0 {
		return fmt.Errorf("empty value: %w", errRaftLogCorrupt)
	}
	if v[0] != raftLogVersion {
		return fmt.Errorf("version %d: %w", v[0], errRaftLogVersion)
	}
	if len(v) < raftLogMinEncodedSize {
		return fmt.Errorf("%d bytes is too short: %w", len(v), errRaftLogCorrupt)
	}
	body, sum := v[:len(v)-raftLogChecksumSize], v[len(v)-raftLogChecksumSize:]
	if got, want := crc32.Checksum(body, raftLogCRCTable), binary.BigEndian.Uint32(sum); got != want {
		return fmt.Errorf("checksum %08x, stored %08x: %w", got, want, errRaftLogCorrupt)
	}
	d := raftLogDecoder{b: body[1:]}
	var out raft.Log
	out.Index = d.readUvarint("index")
	out.Term = d.readUvarint("term")
	out.Type = raft.LogType(d.readByte("type"))
	flags := d.readByte("flags")
	if d.err == nil && flags&^raftLogKnownFlags != 0 {
		d.fail(fmt.Sprintf("unknown flags %#x", flags))
	}
	if flags&raftLogFlagAppendedAt != 0 {
		sec := d.readVarint("appended_at seconds")
		nsec := d.readUvarint("appended_at nanos")
		if d.err == nil && nsec >= raftLogNanosPerSecond {
			d.fail(fmt.Sprintf("appended_at nanos %d out of range", nsec))
		}
		if d.err == nil {
			out.AppendedAt = time.Unix(sec, int64(nsec)).UTC()
		}
	}
	out.Data = d.readBytes("data")
	out.Extensions = d.readBytes("extensions")
	if d.err == nil && len(d.b) != 0 {
		d.fail(fmt.Sprintf("%d trailing bytes", len(d.b)))
	}
	if d.err != nil {
		return d.err
	}
	*l = out
	return nil
}

// raftLogDecoder reads fields from b; after the first failure every read returns
// a zero value and err keeps the first failure.
type raftLogDecoder struct {
	b   []byte
	err error
}

func (d *raftLogDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%s: %w", what, errRaftLogCorrupt)
	}
	d.b = nil
}

func (d *raftLogDecoder) readByte(field string) byte {
	if d.err != nil {
		return 0
	}
	if len(d.b) < 1 {
		d.fail("truncated " + field)
		return 0
	}
	c := d.b[0]
	d.b = d.b[1:]
	return c
}

func (d *raftLogDecoder) readUvarint(field string) uint64 {
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

func (d *raftLogDecoder) readVarint(field string) int64 {
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

// readBytes reads a length-prefixed field into a fresh slice; an empty field is nil.
func (d *raftLogDecoder) readBytes(field string) []byte {
	n := d.readUvarint(field + " length")
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
	out := make([]byte, n)
	copy(out, d.b[:n])
	d.b = d.b[n:]
	return out
}
