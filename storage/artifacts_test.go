package storage

import (
	"bytes"
	"errors"
	"path/filepath"
	"testing"

	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
)

// Watermark paths never leave the artifact directory: stored relative, and an
// absolute path of 2f2e872 keeps only its <project>/<session>/file tail.
func TestArtifactPathsStayUnderRoot(t *testing.T) {
	root := "/data/B/artifacts"
	for _, tc := range []struct {
		path   string
		rel    string // ArtifactRel; "" means refused
		legacy string // legacyArtifactRel; "" means dropped
	}{
		{root + "/_no-cwd/s/" + ArtifactName, "_no-cwd/s/" + ArtifactName, "_no-cwd/s/" + ArtifactName},
		{"/data/A/artifacts/--w--/s/" + ArtifactName, "", "--w--/s/" + ArtifactName},
		{root + "/../../A/artifacts/p/s/" + ArtifactName, "", "p/s/" + ArtifactName},
		{root, "", ""},
		{"/etc/passwd", "", ""},
		{ArtifactName, "", ""},
		{"/x/../" + ArtifactName, "", ""},
	} {
		rel, err := ArtifactRel(root, tc.path)
		if (err == nil) != (tc.rel != "") || rel != filepath.FromSlash(tc.rel) {
			t.Errorf("ArtifactRel(%q) = %q, %v; want %q", tc.path, rel, err, tc.rel)
		}
		leg, ok := legacyArtifactRel(tc.path)
		if ok != (tc.legacy != "") || (ok && leg != filepath.FromSlash(tc.legacy)) {
			t.Errorf("legacyArtifactRel(%q) = %q, %v; want %q", tc.path, leg, ok, tc.legacy)
		}
	}
}

// A stored watermark whose relative path would leave the root (a damaged or
// hand-edited raft.db) is dropped, not followed; PutWatermarks refuses one.
func TestWatermarksRefuseOutsidePaths(t *testing.T) {
	s := openTestRaftStore(t)
	root := t.TempDir()
	if err := s.PutWatermarks(root, map[string]Watermark{"x": {LastIndex: 1, Bytes: 1, Path: filepath.Join(root, "..", "evil")}}); err == nil {
		t.Fatal("PutWatermarks of a path outside root = nil error")
	}
	in := Watermark{LastIndex: 2, Bytes: 3, Frames: 1, Path: filepath.Join(root, "p", "s", ArtifactName)}
	if err := s.PutWatermarks(root, map[string]Watermark{"s": in}); err != nil {
		t.Fatal(err)
	}
	err := s.Update(func(tx *bbolt.Tx) error {
		return tx.Bucket(bucketWatermarks).Put([]byte("y"), encodeWatermark(Watermark{LastIndex: 1}, "../../etc/passwd"))
	})
	if err != nil {
		t.Fatal(err)
	}
	ws, err := s.Watermarks(root)
	if err != nil || len(ws) != 1 || ws["s"] != in {
		t.Errorf("Watermarks = %v, %v; want only s = %v", ws, err, in)
	}
}

// VerifyArtifact accepts exactly the bytes written and refuses any one-bit
// flip anywhere (frame metadata included, which a zstd decoder may not notice),
// a file cut at any byte and one that is shorter; what follows the verified
// prefix (a newer frame) is not its business.
func TestVerifyArtifact(t *testing.T) {
	good := artifact(testHeaderLine, testEventLines, "", testEventLine)
	size := int64(len(good))
	sum := ArtifactSum(ArtifactSum(0, good[:9]), good[9:]) // extended piecewise, as appends do
	if err := VerifyArtifact(bytes.NewReader(good), size, sum); err != nil {
		t.Fatalf("intact artifact: %v", err)
	}
	longer := append(bytes.Clone(good), EncodeFrame(nil, []byte(testEventLine))...)
	if err := VerifyArtifact(bytes.NewReader(longer), size, sum); err != nil {
		t.Errorf("intact prefix of a longer file: %v", err)
	}
	for i := range good {
		for bit := 0; bit < 8; bit++ {
			bad := bytes.Clone(good)
			bad[i] ^= 1 << bit
			if err := VerifyArtifact(bytes.NewReader(bad), size, sum); !errors.Is(err, sessionstore.ErrCorruption) {
				t.Fatalf("flip of byte %d bit %d: %v, want CORRUPTION", i, bit, err)
			}
		}
	}
	for n := 0; n < len(good); n++ {
		if err := VerifyArtifact(bytes.NewReader(good[:n]), size, sum); !errors.Is(err, sessionstore.ErrCorruption) {
			t.Fatalf("file cut to %d of %d bytes: %v, want CORRUPTION", n, size, err)
		}
	}
}

// FuzzWatermark: any stored watermark bytes decode without panicking; a
// decoded one re-encodes to the same bytes; a path of 2f2e872 is only ever
// reinterpreted as a local path ending in the artifact name.
func FuzzWatermark(f *testing.F) {
	f.Add(encodeWatermark(Watermark{LastIndex: 3, Bytes: 189, Frames: 1, Sum: 0xdeadbeef, HasSum: true}, "p/s/"+ArtifactName))
	f.Add(append(make([]byte, 24), "/data/A/artifacts/--w--/s/"+ArtifactName...))
	f.Add(append(make([]byte, 24), "../../../etc/"+ArtifactName...))
	f.Fuzz(func(t *testing.T, b []byte) {
		if w, ok := decodeWatermark(b); ok {
			hasSum := len(b) > 28 && b[28] == 1
			if w.HasSum != hasSum {
				t.Fatalf("HasSum %v for flag byte", w.HasSum)
			}
			if got := encodeWatermark(w, w.Path); b[28] <= 1 && !bytes.Equal(got, b) {
				t.Fatalf("re-encoded %x, want %x", got, b)
			}
		}
		if w, ok := decodeWatermarkV0(b); ok {
			if rel, ok := legacyArtifactRel(w.Path); ok && (!filepath.IsLocal(rel) || filepath.Base(rel) != ArtifactName) {
				t.Fatalf("legacy path %q reinterpreted as %q", w.Path, rel)
			}
		}
	})
}
