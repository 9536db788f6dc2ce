package storage

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
)

// A backup file (`sessionstore backup`, `sessionstore restore`) is three parts:
//
//	{"format":"sessionstore-backup","version":1,"cluster_id":…,"applied_index":…,"term":…,
//	 "time":…,"db_bytes":…,"node_id":…,"state_format":1}\n     header: one JSON line
//	<stream_bytes bytes>                                          the state snapshot stream, exactly
//	                                                              what a Raft snapshot holds: the line
//	                                                              "sessionstore-snapshot", the state
//	                                                              format byte, then the bbolt file of
//	                                                              one read transaction through zstd
//	                                                              (frame checksums on)
//	\n{"db_bytes":…,"stream_bytes":…,"db_sha256":"<hex>"}\n       trailer: one JSON line, written last
//
// The trailer's SHA-256 covers the uncompressed database; a file without a
// trailer, or whose sizes do not add up, is incomplete (truncated).
const (
	BackupFormat  = "sessionstore-backup"
	BackupVersion = 1
)

// backupHeader is the header line.
type backupHeader struct {
	Format       string    `json:"format"`
	Version      int       `json:"version"`
	ClusterID    string    `json:"cluster_id"`
	AppliedIndex uint64    `json:"applied_index"`
	Term         uint64    `json:"term"`
	Time         time.Time `json:"time"`
	DBBytes      int64     `json:"db_bytes"`
	NodeID       string    `json:"node_id"`
	StateFormat  uint32    `json:"state_format"`
}

// backupTrailer is the trailer line.
type backupTrailer struct {
	DBBytes     int64  `json:"db_bytes"`
	StreamBytes int64  `json:"stream_bytes"`
	SHA256      string `json:"db_sha256"`
}

// Tx gives typed read access to the snapshot's transaction.
func (sn *Snapshot) Tx() *Tx { return newTx(sn.tx, &sn.s.fails) }

// DBBytes is the size of the database the snapshot copies.
func (sn *Snapshot) DBBytes() int64 { return sn.tx.Size() }

// WriteBackup streams the snapshot exactly as WriteTo does and returns the
// trailer that lets a restore verify it: sizes and the SHA-256 of the
// uncompressed database.
func (sn *Snapshot) WriteBackup(w io.Writer) (sessionstore.BackupTrailer, error) {
	h := &hashCounter{h: sha256.New()}
	n, err := sn.writeTo(w, h)
	if err != nil {
		return sessionstore.BackupTrailer{}, err
	}
	return sessionstore.BackupTrailer{DBBytes: h.n, StreamBytes: n, SHA256: h.h.Sum(nil)}, nil
}

type hashCounter struct {
	h hash.Hash
	n int64
}

func (c *hashCounter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.h.Write(p)
}

// WriteBackupHeader writes a backup file's header line.
func WriteBackupHeader(w io.Writer, m sessionstore.BackupMeta) error {
	b, err := json.Marshal(backupHeader{Format: BackupFormat, Version: BackupVersion, ClusterID: m.ClusterID,
		AppliedIndex: m.AppliedIndex, Term: m.Term, Time: m.Time.UTC(), DBBytes: m.DBBytes, NodeID: m.NodeID, StateFormat: m.StateFormat})
	if err != nil {
		return err
	}
	_, err = w.Write(append(b, '\n'))
	return err
}

// WriteBackupTrailer writes a backup file's trailer, after the stream.
func WriteBackupTrailer(w io.Writer, t sessionstore.BackupTrailer) error {
	b, err := json.Marshal(backupTrailer{DBBytes: t.DBBytes, StreamBytes: t.StreamBytes, SHA256: hex.EncodeToString(t.SHA256)})
	if err != nil {
		return err
	}
	_, err = w.Write(append(append([]byte{'\n'}, b...), '\n'))
	return err
}

// BackupFile is an opened backup file whose header and trailer parsed and
// whose sizes add up; the stream is not verified yet.
type BackupFile struct {
	Meta    sessionstore.BackupMeta
	Trailer sessionstore.BackupTrailer
	f       *os.File
	offset  int64
}

// ErrBackupInvalid marks a file that is not a complete backup.
var ErrBackupInvalid = errors.New("not a complete sessionstore backup")

// OpenBackup opens a backup file and checks its framing.
func OpenBackup(path string) (*BackupFile, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	bf, err := parseBackup(f)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return bf, nil
}

func parseBackup(f *os.File) (*BackupFile, error) {
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	line, err := bufio.NewReaderSize(io.LimitReader(f, 64<<10), 64<<10).ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("%w: no header line", ErrBackupInvalid)
	}
	var h backupHeader
	if err := json.Unmarshal(line, &h); err != nil || h.Format != BackupFormat {
		return nil, fmt.Errorf("%w: bad header line", ErrBackupInvalid)
	}
	if h.Version != BackupVersion {
		return nil, fmt.Errorf("%w: backup version %d, this build reads %d", ErrBackupInvalid, h.Version, BackupVersion)
	}
	if h.StateFormat < 1 || h.StateFormat > StateFormatVersion {
		return nil, fmt.Errorf("%w: state format %d, this build reads 1 to %d", ErrBackupInvalid, h.StateFormat, StateFormatVersion)
	}
	headLen := int64(len(line))
	tailLen := min(size-headLen, 4096)
	tail := make([]byte, tailLen)
	if _, err := f.ReadAt(tail, size-tailLen); err != nil {
		return nil, err
	}
	incomplete := fmt.Errorf("%w: no trailer (the file is truncated or the backup did not finish)", ErrBackupInvalid)
	if len(tail) < 2 || tail[len(tail)-1] != '\n' {
		return nil, incomplete
	}
	i := bytes.LastIndexByte(tail[:len(tail)-1], '\n')
	if i < 0 {
		return nil, incomplete
	}
	var t backupTrailer
	if err := json.Unmarshal(tail[i+1:len(tail)-1], &t); err != nil {
		return nil, incomplete
	}
	sum, err := hex.DecodeString(t.SHA256)
	if err != nil || len(sum) != sha256.Size {
		return nil, incomplete
	}
	trailerLen := int64(len(tail) - i) // '\n' + JSON + '\n'
	if headLen+t.StreamBytes+trailerLen != size || t.DBBytes != h.DBBytes {
		return nil, fmt.Errorf("%w: sizes do not add up (header %d + stream %d + trailer %d != file %d bytes; db %d vs %d)",
			ErrBackupInvalid, headLen, t.StreamBytes, trailerLen, size, t.DBBytes, h.DBBytes)
	}
	return &BackupFile{
		Meta: sessionstore.BackupMeta{ClusterID: h.ClusterID, AppliedIndex: h.AppliedIndex, Term: h.Term, Time: h.Time,
			DBBytes: h.DBBytes, NodeID: h.NodeID, StateFormat: h.StateFormat},
		Trailer: sessionstore.BackupTrailer{DBBytes: t.DBBytes, StreamBytes: t.StreamBytes, SHA256: sum},
		f:       f, offset: headLen,
	}, nil
}

// Close closes the file.
func (b *BackupFile) Close() error { return b.f.Close() }

// stream reads the snapshot stream.
func (b *BackupFile) stream() io.Reader {
	return io.NewSectionReader(b.f, b.offset, b.Trailer.StreamBytes)
}

// Verify decodes the whole stream and checks its size and SHA-256 against
// the trailer, writing nothing.
func (b *BackupFile) Verify() error {
	r := bufio.NewReader(b.stream())
	head := make([]byte, len(snapshotMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil || !bytes.Equal(head[:len(snapshotMagic)], snapshotMagic) {
		return fmt.Errorf("%w: the stream is not a state snapshot", ErrBackupInvalid)
	}
	dec, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1))
	if err != nil {
		return err
	}
	defer dec.Close()
	h := &hashCounter{h: sha256.New()}
	if _, err := io.Copy(h, dec); err != nil {
		return fmt.Errorf("%w: %v", ErrBackupInvalid, err)
	}
	return b.check(h)
}

func (b *BackupFile) check(h *hashCounter) error {
	if h.n != b.Trailer.DBBytes {
		return fmt.Errorf("%w: the database is %d bytes, the trailer says %d", ErrBackupInvalid, h.n, b.Trailer.DBBytes)
	}
	if got := h.h.Sum(nil); !bytes.Equal(got, b.Trailer.SHA256) {
		return fmt.Errorf("%w: checksum mismatch: SHA-256 %x, the trailer says %x", ErrBackupInvalid, got, b.Trailer.SHA256)
	}
	return nil
}

// RestoreTo decodes the stream into a fsynced temporary file next to path
// (as a snapshot restore does, RestoreFile), verifies its size and SHA-256
// against the trailer and returns the temporary file's name; the caller
// renames it into place. On error nothing is left behind.
func (b *BackupFile) RestoreTo(path string) (string, error) {
	tmp, err := RestoreFile(b.stream(), path)
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBackupInvalid, err)
	}
	f, err := os.Open(tmp)
	if err != nil {
		os.Remove(tmp)
		return "", err
	}
	defer f.Close()
	h := &hashCounter{h: sha256.New()}
	if _, err := io.Copy(h, f); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := b.check(h); err != nil {
		os.Remove(tmp)
		return "", err
	}
	return tmp, nil
}

// ResetForNewCluster clears what must not carry over into a new cluster:
// the cluster id (the new cluster's first leader mints one; the FSM keeps
// the first it sees) and the applied Raft index and term (the new Raft log
// starts at 1; the FSM skips entries at or below the applied index).
func (t *Tx) ResetForNewCluster() error {
	m := t.meta()
	if err := m.Delete(keyClusterID); err != nil {
		return err
	}
	current := t.SumsCurrent()
	if err := t.SetApplied(0, 0); err != nil {
		return err
	}
	if !current {
		// Still to convert: index 0 must not look current.
		return m.Delete(keySums)
	}
	return nil
}

// SyncDir fsyncs a directory (after a rename into it).
func SyncDir(dir string) error { return syncDir(dir) }
