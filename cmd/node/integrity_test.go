package main

// Integrity of what a node serves (issue 13 items 4 and 14): damage flipped
// into real files is never served. Helpers start with "ig".

import (
	"bytes"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
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

// A byte flipped in a stored event (state.db, node stopped; the artifact is
// intact) is never served: ReadFrom answers DATA_LOSS with reason CORRUPTION,
// sessionstore_checksum_failures_total counts it, and the node rewrites the
// event from its artifact, so the next ReadFrom returns the stored events.
func TestStoredEventFlippedIsNotServed(t *testing.T) {
	n := startTestNode(t, "")
	const id = "ig-event"
	events := owOneTurnLog()
	owSession(t, n, id, events...)
	n.WaitArtifacts()
	want := owStored(t, n, id)
	n.Close()

	// "hello" becomes "hgllo": still valid JSON, so only a checksum can tell.
	// The event is stored packed (state formats 3 and 4), its text a literal there.
	if !strings.Contains(want[3], `"hello"`) {
		t.Fatalf("event 3 = %s, want the fixture's assistant message", want[3])
	}
	target, ok := storage.PackedEvent([]byte(want[3]))
	if !ok {
		t.Fatalf("event 3 is not stored packed: %s", want[3])
	}
	at := bytes.Index(target, []byte(`hello`)) + 1
	if at < 1 {
		t.Fatalf("the packed event 3 holds no literal hello: %q", target)
	}
	path := filepath.Join(n.dir, "state.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], target)
		if j < 0 {
			break
		}
		b[i+j+at] ^= 0x02
		flipped++
		i += j + len(target)
	}
	if flipped == 0 {
		t.Fatalf("event %q not found in state.db", target)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()

	// (The client turns the DATA_LOSS status and its ErrorInfo back into the
	// domain error: api/rpc/errors.go maps CORRUPTION to DATA_LOSS.)
	r, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	if de := ctDomainErr(t, "ReadFrom of a damaged event", err, sessionstore.ReasonCorruption); r != nil && len(r.GetEvents()) > 0 {
		t.Fatalf("ReadFrom of a damaged event served %d events (%v)", len(r.GetEvents()), de)
	}
	if v, _ := mtValue(mtScrape(t, n.srv.httpAddr), "sessionstore_checksum_failures_total"); v < 1 {
		t.Errorf("sessionstore_checksum_failures_total = %v, want >= 1", v)
	}
	if got := owStored(t, n, id); !slices.Equal(got, want) {
		t.Errorf("ReadFrom after the repair = %q, want %q", got, want)
	}
}

// A damaged session record cannot be rebuilt from the artifact: reads answer
// CORRUPTION until the operator moves state.db aside, and the restarted node
// rebuilds it from its snapshot and Raft log with the right record.
func TestStoredRecordFlippedIsRefusedUntilRebuilt(t *testing.T) {
	n := startTestNode(t, "")
	const id, cwd = "ig-record", "/ig/record-cwd"
	// A new node converts to this build's state format before it serves (a
	// damaged record met by the conversion itself stops the node:
	// fsm.ConvertLayout, storage.ConvertLayout4).
	if l := n.layout(); l != storage.StateFormatVersion {
		t.Fatalf("a new node serves in state format %d, want %d", l, storage.StateFormatVersion)
	}
	owCreate(t, n, owMeta(id, cwd))
	owAppend(t, n, id, 0, owOneTurnLog()...)
	want := owStored(t, n, id)
	n.Close()

	path := filepath.Join(n.dir, "state.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	flipped := 0
	for i := 0; ; {
		j := bytes.Index(b[i:], []byte(cwd))
		if j < 0 {
			break
		}
		b[i+j+4] ^= 0x01 // "/ig/record-cwd" → "/ig/secord-cwd"
		flipped++
		i += j + len(cwd)
	}
	if flipped == 0 {
		t.Fatalf("cwd %q not found in state.db", cwd)
	}
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// Not ready while damaged (the artifact writer cannot read the record and
	// says so in /readyz); wait for reads only.
	n = startTestNodeWith(t, n.dir, nil)
	clustertest.Eventually(t, 30*time.Second, func() error {
		if !n.srv.node.ReadyForReads() {
			return fmt.Errorf("no reads: %v", n.srv.node.Ready())
		}
		return nil
	})
	_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	ctDomainErr(t, "ReadFrom of a session with a damaged record", err, sessionstore.ReasonCorruption)
	_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	ctDomainErr(t, "ReadFrom again (no artifact repair for a record)", err, sessionstore.ReasonCorruption)

	// The operator's repair (README "Failure modes").
	n.Close()
	if err := os.Rename(path, path+".damaged"); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	if got := owStored(t, n, id); !slices.Equal(got, want) {
		t.Errorf("ReadFrom after the rebuild = %q, want %q", got, want)
	}
	h := owListAll(t, n, "", 0)
	if len(h) != 1 || h[0].GetCwd() != cwd {
		t.Errorf("List after the rebuild = %v, want the header with cwd %q", h, cwd)
	}
}

// With --artifacts off a node removes the artifacts an earlier run wrote,
// writes none, and serves ReadRaw and both downloads from the state database
// with the same text; turned on again, it rebuilds the artifact.
func TestArtifactsOffServesFromState(t *testing.T) {
	n := startTestNode(t, "")
	const id = "ig-off"
	owSession(t, n, id, owOneTurnLog()...)
	n.WaitArtifacts()
	path := igArtifactPath(t, n.dir)
	n.Close()

	n = startTestNodeWith(t, n.dir, func(c *serveConfig) { c.Cluster.ArtifactsOff = true })
	n.waitReady(true)
	dlEventually(t, "artifacts removed", func() bool {
		_, err := os.Stat(filepath.Join(n.dir, "artifacts"))
		return os.IsNotExist(err)
	})
	owAppend(t, n, id, 0, owEvent("turn/start", 6, 7, `{"turn":2}`))
	want := ctReadRaw(t, n, id).GetContent()
	if !bytes.Contains(want, []byte(`"seq":6`)) {
		t.Fatalf("ReadRaw lacks the event appended with artifacts off:\n%s", want)
	}
	base := "http://" + n.srv.httpAddr + "/v1/sessions/" + url.PathEscape(id)
	if code, body := igGet(t, n, base+"/session.jsonl"); code != http.StatusOK || !bytes.Equal(body, want) {
		t.Errorf("GET session.jsonl: %d\n%s\nwant ReadRaw's\n%s", code, body, want)
	}
	if code, body := igGet(t, n, base+"/session.jsonl.zstd"); code != http.StatusOK || !bytes.Equal(owDecodeZstd(t, body), want) {
		t.Errorf("GET session.jsonl.zstd: %d, decodes to\n%s\nwant ReadRaw's\n%s", code, owDecodeZstd(t, body), want)
	}
	if _, err := os.Stat(filepath.Join(n.dir, "artifacts")); !os.IsNotExist(err) {
		t.Errorf("artifact directory with artifacts off: stat = %v, want none", err)
	}
	n.Close()

	n = startTestNode(t, n.dir)
	n.WaitArtifacts()
	if got := owDecodeZstdFile(t, path); !bytes.Equal(got, want) {
		t.Errorf("artifact rebuilt with artifacts on decodes to\n%s\nwant ReadRaw's\n%s", got, want)
	}
}
