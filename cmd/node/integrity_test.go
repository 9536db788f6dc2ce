package main

// Integrity of what a node serves (issue 13 items 4 and 14): damage flipped
// into real files is never served. Helpers start with "ig".

import (
	"bytes"
	"fmt"
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
	"github.com/sessionstore/sessionstore/internal/corrupt"
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

// An artifact byte flipped while the node is stopped keeps the file's size,
// so the start-up check passes it; the HTTP download verifies the artifact
// against its watermark's checksum, serves the state database's encoding
// instead (200, the right bytes), counts the failure and rewrites the file.
func TestArtifactFlippedWhileStoppedIsNotServed(t *testing.T) {
	n := startTestNode(t, "")
	const id = "ig-artifact"
	owSession(t, n, id, ctOneTurnLog()...)
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

	resp, body := owGet(t, n, "http://"+n.srv.httpAddr+"/v1/sessions/"+url.PathEscape(id)+"/session.jsonl.zstd")
	if resp.StatusCode != http.StatusOK || bytes.Equal(body, bad) {
		t.Fatalf("GET session.jsonl.zstd: %d, damaged bytes served: %v", resp.StatusCode, bytes.Equal(body, bad))
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
	events := ctOneTurnLog()
	owSession(t, n, id, events...)
	n.WaitArtifacts()
	want := ctReadFrom(t, n, id, 0).GetEvents()
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
	corrupt.Flip(t, filepath.Join(n.dir, "state.db"), target, at, 0x02, nil)
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
	if got := ctReadFrom(t, n, id, 0).GetEvents(); !slices.Equal(got, want) {
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
	ctCreate(t, n, ctMeta(id, cwd))
	owAppend(t, n, id, 0, ctOneTurnLog()...)
	want := ctReadFrom(t, n, id, 0).GetEvents()
	n.Close()

	path := filepath.Join(n.dir, "state.db")
	corrupt.Flip(t, path, []byte(cwd), 4, 0x01, nil) // "/ig/record-cwd" → "/ig/secord-cwd"
	// Not ready while damaged (the artifact writer cannot read the record and
	// says so in /readyz); wait for reads only.
	n = startTestNodeWith(t, n.dir, nil)
	clustertest.Eventually(t, 30*time.Second, func() error {
		if !n.srv.node.ReadyForReads() {
			return fmt.Errorf("no reads: %v", n.srv.node.Ready())
		}
		return nil
	})
	_, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	ctDomainErr(t, "ReadFrom of a session with a damaged record", err, sessionstore.ReasonCorruption)
	_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	ctDomainErr(t, "ReadFrom again (no artifact repair for a record)", err, sessionstore.ReasonCorruption)

	// The operator's repair (README "Failure modes").
	n.Close()
	if err := os.Rename(path, path+".damaged"); err != nil {
		t.Fatal(err)
	}
	n = n.Restart()
	if got := ctReadFrom(t, n, id, 0).GetEvents(); !slices.Equal(got, want) {
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
	owSession(t, n, id, ctOneTurnLog()...)
	n.WaitArtifacts()
	path := igArtifactPath(t, n.dir)
	n.Close()

	n = startTestNodeWith(t, n.dir, func(c *serveConfig) { c.Cluster.ArtifactsOff = true })
	n.waitReady(true)
	dlEventually(t, "artifacts removed", func() bool {
		_, err := os.Stat(filepath.Join(n.dir, "artifacts"))
		return os.IsNotExist(err)
	})
	owAppend(t, n, id, 0, ctEv("turn/start", 6, 7, `{"turn":2}`))
	want := ctReadRaw(t, n, id).GetContent()
	if !bytes.Contains(want, []byte(`"seq":6`)) {
		t.Fatalf("ReadRaw lacks the event appended with artifacts off:\n%s", want)
	}
	base := "http://" + n.srv.httpAddr + "/v1/sessions/" + url.PathEscape(id)
	if resp, body := owGet(t, n, base+"/session.jsonl"); resp.StatusCode != http.StatusOK || !bytes.Equal(body, want) {
		t.Errorf("GET session.jsonl: %d\n%s\nwant ReadRaw's\n%s", resp.StatusCode, body, want)
	}
	if resp, body := owGet(t, n, base+"/session.jsonl.zstd"); resp.StatusCode != http.StatusOK || !bytes.Equal(owDecodeZstd(t, body), want) {
		t.Errorf("GET session.jsonl.zstd: %d, decodes to\n%s\nwant ReadRaw's\n%s", resp.StatusCode, owDecodeZstd(t, body), want)
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
