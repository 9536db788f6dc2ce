//go:build upgradefixture

package main

// The generator of testdata/upgrade/<commit>/ (upgradefixture_test.go): it
// drives an older release's own binary, so the files are exactly what that
// release wrote. Run it against the release being frozen, from a checkout of
// that release (this file and upgradefixture_test.go copied in if it predates
// them):
//
//	go build -o /tmp/sessionstore-old ./cmd/node
//	UPGRADE_FIXTURE_BIN=/tmp/sessionstore-old UPGRADE_FIXTURE_COMMIT=$(git rev-parse --short HEAD) \
//	  go test -tags upgradefixture -run TestGenerateUpgradeFixture -count=1 ./cmd/node
//
// and add the release to ufReleases.

import (
	"archive/tar"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

func TestGenerateUpgradeFixture(t *testing.T) {
	bin, commit := os.Getenv("UPGRADE_FIXTURE_BIN"), os.Getenv("UPGRADE_FIXTURE_COMMIT")
	if bin == "" || commit == "" {
		t.Fatal("set UPGRADE_FIXTURE_BIN (the old release's node binary) and UPGRADE_FIXTURE_COMMIT")
	}
	out := filepath.Join("..", "..", "testdata", "upgrade", commit)
	if err := os.MkdirAll(out, 0o755); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	e := ufExpect{Commit: commit, NodeID: "n1"}
	// A low snapshot threshold: the directory holds a snapshot and WAL
	// entries above it.
	n, c := crStartNode(t, bin, dir, "--node-id", e.NodeID, "--snapshot-threshold", "40", "--snapshot-interval", "200ms", "--trailing-logs", "16")

	// The reference harness's recorded sessions, imported by the old
	// release's own importer.
	root := t.TempDir()
	recs, _ := filepath.Glob(filepath.Join("..", "..", "testdata", "recorded", "*.session.jsonl"))
	if len(recs) == 0 {
		t.Fatal("no recorded sessions in testdata/recorded")
	}
	for _, p := range recs {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		var h struct {
			ID  string `json:"id"`
			Cwd string `json:"cwd"`
		}
		if err := json.Unmarshal(b[:strings.IndexByte(string(b), '\n')], &h); err != nil {
			t.Fatal(err)
		}
		pk, err := sessionlog.ProjectKey(h.Cwd)
		if err != nil {
			t.Fatal(err)
		}
		seg, err := sessionlog.EncodeSegment(h.ID)
		if err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(root, pk, seg)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "session.jsonl"), b, 0o644); err != nil {
			t.Fatal(err)
		}
		e.Sessions = append(e.Sessions, ufSession{ID: h.ID})
	}
	if b, err := exec.Command(bin, "import", "--addr", n.GRPCAddr, root).CombinedOutput(); err != nil {
		t.Fatalf("old release's import: %v\n%s", err, b)
	}

	// Marker sessions written in several batches (client request ids are
	// stored with Create), one in plan mode, one leased, one deleted.
	ss := crMakeSessions(strings.TrimSuffix(ufSessionPrefix, "-"), 12, "/work/upgrade")
	crCreateAll(t, c, ss)
	for round := 0; round < 4; round++ {
		for _, s := range ss {
			if err := s.AppendBatch(c, 3); err != nil {
				t.Fatalf("append %q: %v", s.ID, err)
			}
		}
	}
	planned, leased, deleted := ss[2].ID, ss[1].ID, ss[3].ID
	if _, err := c.PlanSet(crCtx(t, 30*time.Second), &sessionpb.PlanSetRequest{SessionId: planned, Active: true}); err != nil {
		t.Fatalf("PlanSet %q: %v", planned, err)
	}
	_, lease, err := c.Prepare(crCtx(t, 30*time.Second), &sessionpb.PrepareRequest{SessionId: leased, Owner: "fixture-owner", TtlMs: 60_000})
	if err != nil {
		t.Fatalf("Prepare %q: %v", leased, err)
	}
	e.Lease = ufLease{SessionID: leased, Owner: lease.Owner, Epoch: lease.Epoch}
	if _, err := c.Delete(crCtx(t, 30*time.Second), &sessionpb.DeleteRequest{SessionId: deleted}); err != nil {
		t.Fatalf("Delete %q: %v", deleted, err)
	}
	e.Deleted = []string{deleted}
	snap := crWaitSnapshot(t, dir, 0, func() {
		for _, s := range ss[4:] {
			_ = s.AppendBatch(c, 1)
		}
	})
	e.SnapshotIndex = snap.Index
	// Entries above the snapshot.
	for _, s := range ss[4:8] {
		if err := s.AppendBatch(c, 2); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range ss {
		if s.ID != deleted {
			e.Sessions = append(e.Sessions, ufSession{ID: s.ID})
		}
	}
	for i := range e.Sessions {
		s := &e.Sessions[i]
		raw, err := c.ReadRaw(crCtx(t, 30*time.Second), &sessionpb.ReadRawRequest{SessionId: s.ID})
		if err != nil {
			t.Fatalf("ReadRaw %q: %v", s.ID, err)
		}
		s.Revision, s.RawSHA256, s.RawLen = raw.Revision, ufSHA(raw.Content), len(raw.Content)
		v, err := c.Inspect(crCtx(t, 30*time.Second), &sessionpb.InspectRequest{SessionId: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		s.NextSeq = v.NextSeq
		p, err := c.PlanGet(crCtx(t, 30*time.Second), &sessionpb.PlanGetRequest{SessionId: s.ID})
		if err != nil {
			t.Fatal(err)
		}
		s.PlanActive = p.Active
	}
	st, err := c.Status(crCtx(t, 30*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	e.ClusterID = st.ClusterId
	backup := filepath.Join(out, ufBackupFile)
	_ = os.Remove(backup)
	if b, err := exec.Command(bin, "backup", "--addr", n.GRPCAddr, "--out", backup).CombinedOutput(); err != nil {
		t.Fatalf("old release's backup: %v\n%s", err, b)
	}
	n.Term()

	b, err := json.MarshalIndent(e, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(out, ufExpectFile), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := ufPack(dir, filepath.Join(out, ufDataArchive)); err != nil {
		t.Fatal(err)
	}
	t.Logf("fixture of %s written to %s: %d sessions, snapshot at %d", commit, out, len(e.Sessions), e.SnapshotIndex)
}

// ufPack writes dir as a zstd-compressed tar (regular files and directories).
func ufPack(dir, dst string) error {
	f, err := os.Create(dst)
	if err != nil {
		return err
	}
	defer f.Close()
	zw, err := zstd.NewWriter(f, zstd.WithEncoderLevel(zstd.SpeedBestCompression))
	if err != nil {
		return err
	}
	tw := tar.NewWriter(zw)
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil || p == dir {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		info, err := d.Info()
		if err != nil {
			return err
		}
		if !info.Mode().IsRegular() && !info.IsDir() {
			return fmt.Errorf("%s: not a regular file or directory", p)
		}
		h, err := tar.FileInfoHeader(info, "")
		if err != nil {
			return err
		}
		h.Name = filepath.ToSlash(rel)
		h.ModTime = time.Unix(0, 0)
		if err := tw.WriteHeader(h); err != nil || info.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		_, err = tw.Write(b)
		return err
	})
	if err != nil {
		return err
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := zw.Close(); err != nil {
		return err
	}
	return f.Close()
}
