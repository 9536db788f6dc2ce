package main

// Integrity of what a node serves (issue 13 items 4 and 14): damage flipped
// into real files is never served. Helpers start with "ig".

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"testing"
)

// igArtifactPath is the one artifact under a node's data directory.
func igArtifactPath(t *testing.T, dir string) string {
	t.Helper()
	var found []string
	err := filepath.WalkDir(filepath.Join(dir, "artifacts"), func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.Name() == "session.jsonl.zstd" {
			found = append(found, p)
		}
		return err
	})
	if err != nil || len(found) != 1 {
		t.Fatalf("artifacts under %s: %v, %v; want exactly one", dir, found, err)
	}
	return found[0]
}

// igGet downloads u and returns the status and body.
func igGet(t *testing.T, n *testNode, u string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(n.ctx(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	return resp.StatusCode, body
}

// An artifact byte flipped while the node is stopped keeps the file's size,
// so the start-up check passes it; the HTTP download verifies the artifact
// against its watermark's checksum, serves the state database's encoding
// instead (200, the right bytes), counts the failure and rewrites the file.
func TestArtifactFlippedWhileStoppedIsNotServed(t *testing.T) {
	n := startTestNode(t, "")
	const id = "ig-artifact"
	owSession(t, n, id, owOneTurnLog()...)
	n.WaitArtifacts()
	want := ctReadRaw(t, n, id).GetContent()
	path := igArtifactPath(t, n.dir)
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	n.Close()
	bad := bytes.Clone(good)
	bad[len(bad)/2] ^= 0x01
	if err := os.WriteFile(path, bad, 0o600); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	n.WaitArtifacts()

	code, body := igGet(t, n, "http://"+n.srv.httpAddr+"/v1/sessions/"+url.PathEscape(id)+"/session.jsonl.zstd")
	if code != http.StatusOK || bytes.Equal(body, bad) {
		t.Fatalf("GET session.jsonl.zstd: %d, damaged bytes served: %v", code, bytes.Equal(body, bad))
	}
	if got := owDecodeZstd(t, body); !bytes.Equal(got, want) {
		t.Errorf("GET session.jsonl.zstd decodes to\n%s\nwant ReadRaw's\n%s", got, want)
	}
	if v, _ := mtValue(mtScrape(t, n.srv.httpAddr), "sessionstore_artifact_verify_failures_total"); v != 1 {
		t.Errorf("sessionstore_artifact_verify_failures_total = %v, want 1", v)
	}
	n.WaitArtifacts()
	if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, good) {
		t.Errorf("artifact after the download: %d bytes, %v; want rewritten to the %d bytes first written", len(got), err, len(good))
	}
}
