package storage

import (
	"encoding/binary"
	"fmt"
	"hash/crc32"
	"io"
	"path/filepath"
	"strings"

	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// ArtifactName is the file name of a session's artifact (compression "zstd").
const ArtifactName = "session.jsonl.zstd"

// ArtifactPath is where a session's artifact lives under root, exactly as the
// reference JSONL backend lays it out (docs/events.md#layout):
// <root>/<projectKey(cwd)|_no-cwd>/<encodeSegment(id)>/session.jsonl.zstd.
// Every component is an encoded single segment, so no id or cwd can leave root.
func ArtifactPath(root string, h sessionstore.Header) (string, error) {
	project := "_no-cwd"
	if h.Cwd != nil {
		k, err := sessionlog.ProjectKey(*h.Cwd)
		if err != nil {
			return "", err
		}
		project = k
	}
	seg, err := sessionlog.EncodeSegment(h.ID)
	if err != nil {
		return "", err
	}
	return filepath.Join(root, project, seg, ArtifactName), nil
}

// Watermark is how far a session's artifact on this node has been written.
type Watermark struct {
	LastIndex uint64 // Raft index of the last change written
	Bytes     int64  // artifact length
	Frames    uint64 // event frames written after the header frame
	Path      string // where it was written: an absolute path under the artifact root
	// Sum is the CRC-32C of the artifact's first Bytes bytes (ArtifactSum),
	// checked before the file is served (VerifyArtifact); HasSum is false for
	// a watermark converted from 2f2e872, which had none: that artifact is
	// rewritten before it is served.
	Sum    uint32
	HasSum bool
}

// Watermarks are stored as <last index:8><bytes:8><frames:8><sum:4><has sum:1>
// <path>, with the artifact's path relative to the artifact root,
// so a copy of a data directory (cp -a A B) refers to B's files, never A's.
// Builds up to 2f2e872 stored absolute paths in bucketWatermarksV0; Watermarks
// converts them (see legacyArtifactRel) and drops that bucket. A build that old
// finds no watermarks in the new bucket and rebuilds every artifact: safe.
var (
	bucketWatermarks   = []byte("artifact_marks")
	bucketWatermarksV0 = []byte("artifact_watermarks")
)

const watermarkFixed = 29

func encodeWatermark(w Watermark, rel string) []byte {
	b := make([]byte, watermarkFixed, watermarkFixed+len(rel))
	binary.BigEndian.PutUint64(b, w.LastIndex)
	binary.BigEndian.PutUint64(b[8:], uint64(w.Bytes))
	binary.BigEndian.PutUint64(b[16:], w.Frames)
	binary.BigEndian.PutUint32(b[24:], w.Sum)
	if w.HasSum {
		b[28] = 1
	}
	return append(b, rel...)
}

func decodeWatermark(b []byte) (Watermark, bool) {
	if len(b) < watermarkFixed {
		return Watermark{}, false
	}
	return Watermark{
		LastIndex: binary.BigEndian.Uint64(b),
		Bytes:     int64(binary.BigEndian.Uint64(b[8:])),
		Frames:    binary.BigEndian.Uint64(b[16:]),
		Sum:       binary.BigEndian.Uint32(b[24:]),
		HasSum:    b[28] == 1,
		Path:      string(b[watermarkFixed:]),
	}, true
}

// decodeWatermarkV0 reads a watermark of 2f2e872 (24 bytes, then an absolute path).
func decodeWatermarkV0(b []byte) (Watermark, bool) {
	if len(b) < 24 {
		return Watermark{}, false
	}
	return Watermark{
		LastIndex: binary.BigEndian.Uint64(b),
		Bytes:     int64(binary.BigEndian.Uint64(b[8:])),
		Frames:    binary.BigEndian.Uint64(b[16:]),
		Path:      string(b[24:]),
	}, true
}

// ArtifactRel returns path relative to root, or an error when path is not
// strictly inside root: nothing outside a node's artifact directory is ever
// written or removed through a watermark.
func ArtifactRel(root, path string) (string, error) {
	rel, err := filepath.Rel(filepath.Clean(root), filepath.Clean(path))
	if err != nil || rel == "." || !filepath.IsLocal(rel) {
		return "", fmt.Errorf("artifact path %q is outside the artifact directory %q", path, root)
	}
	return rel, nil
}

// legacyArtifactRel reinterprets an absolute path written by 2f2e872 as the
// same layout under this node's root: its last three elements
// (<project>/<session>/session.jsonl.zstd, see ArtifactPath). It is never
// followed where it points: that may be another node's directory. ok is false
// for anything else.
func legacyArtifactRel(path string) (string, bool) {
	parts := strings.Split(filepath.ToSlash(filepath.Clean(path)), "/")
	if len(parts) < 3 || parts[len(parts)-1] != ArtifactName {
		return "", false
	}
	rel := filepath.Join(parts[len(parts)-3:]...)
	return rel, filepath.IsLocal(rel)
}

// Watermarks returns every recorded watermark, with paths resolved under root
// (the node's artifact directory). Watermarks in the format of 2f2e872 are
// converted on the first call; an entry whose path cannot lie under root is
// dropped (that session's artifact is then rebuilt).
func (s *RaftStore) Watermarks(root string) (map[string]Watermark, error) {
	out := map[string]Watermark{}
	read := func(tx *bbolt.Tx) error {
		b := tx.Bucket(bucketWatermarks)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			w, ok := decodeWatermark(v)
			if ok && w.Path != "." && filepath.IsLocal(w.Path) {
				w.Path = filepath.Join(root, w.Path)
				out[string(k)] = w
			}
			return nil
		})
	}
	var legacy bool
	if err := s.View(func(tx *bbolt.Tx) error {
		legacy = tx.Bucket(bucketWatermarksV0) != nil
		return read(tx)
	}); err != nil || !legacy {
		return out, err
	}
	out = map[string]Watermark{}
	err := s.Update(func(tx *bbolt.Tx) error {
		old := tx.Bucket(bucketWatermarksV0)
		if old == nil {
			return read(tx)
		}
		b, err := tx.CreateBucketIfNotExists(bucketWatermarks)
		if err != nil {
			return err
		}
		err = old.ForEach(func(k, v []byte) error {
			w, ok := decodeWatermarkV0(v)
			if !ok || b.Get(k) != nil {
				return nil
			}
			if rel, ok := legacyArtifactRel(w.Path); ok {
				return b.Put(k, encodeWatermark(w, rel))
			}
			return nil
		})
		if err != nil {
			return err
		}
		if err := tx.DeleteBucket(bucketWatermarksV0); err != nil {
			return err
		}
		return read(tx)
	})
	return out, err
}

// PutWatermarks records watermarks in one transaction; a zero-value Path
// deletes the session's watermark. Every path must lie under root.
func (s *RaftStore) PutWatermarks(root string, ws map[string]Watermark) error {
	if len(ws) == 0 {
		return nil
	}
	return s.Update(func(tx *bbolt.Tx) error {
		b, err := tx.CreateBucketIfNotExists(bucketWatermarks)
		if err != nil {
			return err
		}
		for id, w := range ws {
			if w.Path == "" {
				if err := b.Delete([]byte(id)); err != nil {
					return err
				}
				continue
			}
			rel, err := ArtifactRel(root, w.Path)
			if err != nil {
				return err
			}
			if err := b.Put([]byte(id), encodeWatermark(w, rel)); err != nil {
				return err
			}
		}
		return nil
	})
}

// ClearWatermarks forgets every watermark (after a snapshot restore every
// artifact is rebuilt).
func (s *RaftStore) ClearWatermarks() error {
	return s.Update(func(tx *bbolt.Tx) error {
		for _, name := range [][]byte{bucketWatermarks, bucketWatermarksV0} {
			if tx.Bucket(name) == nil {
				continue
			}
			if err := tx.DeleteBucket(name); err != nil {
				return err
			}
		}
		return nil
	})
}

// ArtifactSum extends sum, the CRC-32C (Castagnoli) of an artifact's first
// bytes, over data appended to it; ArtifactSum(0, whole) is a whole file's.
func ArtifactSum(sum uint32, data []byte) uint32 { return crc32.Update(sum, castagnoli, data) }

var castagnoli = crc32.MakeTable(crc32.Castagnoli)

// VerifyArtifact checks that the first size bytes of r have the CRC-32C sum
// (the watermark's). It reads them once, sequentially, in bounded memory; a
// file shorter than size fails. Every bit counts, not only the decoded
// content: what is served is exactly what was written. Errors are
// *sessionstore.Error with reason CORRUPTION.
func VerifyArtifact(r io.ReaderAt, size int64, sum uint32) error {
	h := crc32.New(castagnoli)
	n, err := io.Copy(h, io.NewSectionReader(r, 0, size))
	switch {
	case err != nil:
		return zstdCorruptf("artifact unreadable: %v", err)
	case n != size:
		return zstdCorruptf("artifact is %d bytes, its watermark says %d", n, size)
	case h.Sum32() != sum:
		return zstdCorruptf("artifact checksum %08x, its watermark says %08x", h.Sum32(), sum)
	}
	return nil
}
