package main

// Data written by an older release must open, read back and keep working
// after an upgrade (docs/upgrading.md). testdata/upgrade/<commit>/ holds what
// one release wrote through its own binary (upgradefixture_gen_test.go made
// it): a stopped node's data directory (state.db, the Raft WAL and raft.db, a
// snapshot with WAL entries above it, artifacts), a backup file, and what the
// old node answered (expect.json). These tests run today's binary on copies.

import (
	"archive/tar"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// ufRelease is one release whose data the current build must read.
type ufRelease struct {
	Commit string
	Dir    string // testdata/upgrade/<commit>
	Format int    // the state format it writes (storage.StateFormatVersion)
}

// ufReleases are the releases with committed fixtures, oldest first.
var ufReleases = []ufRelease{
	{Commit: "2f2e872", Dir: filepath.Join("..", "..", "testdata", "upgrade", "2f2e872"), Format: 1},
	{Commit: "2a3df2f", Dir: filepath.Join("..", "..", "testdata", "upgrade", "2a3df2f"), Format: 1}, // issue 13's build: checksums, relative watermarks, identity.json
	{Commit: "f8cc0a4", Dir: filepath.Join("..", "..", "testdata", "upgrade", "f8cc0a4"), Format: 2}, // issue 14's layout 2 and packed Raft entries (command version 8)
	{Commit: "4b22bf8", Dir: filepath.Join("..", "..", "testdata", "upgrade", "4b22bf8"), Format: 3}, // issue 14's packed events (command version 9)
	{Commit: "542884a", Dir: filepath.Join("..", "..", "testdata", "upgrade", "542884a"), Format: 4}, // rows keyed by session number (command version 10)
}

// ufFormatLogs is what a node logs when its state reaches each format; the
// last is the newest (storage.StateFormatVersion).
var ufFormatLogs = []string{2: "converted to layout 2", 3: "state database in format 3", 4: "state database in format 4", 5: "state database in format 5"}

// ufNewestFormatLog is what a node logs once its state is in this build's format.
var ufNewestFormatLog = ufFormatLogs[len(ufFormatLogs)-1]

// ufExpect is what the old node answered just before it was stopped.
type ufExpect struct {
	Commit        string      `json:"commit"`
	NodeID        string      `json:"node_id"`
	ClusterID     string      `json:"cluster_id"`
	SnapshotIndex uint64      `json:"snapshot_index"` // the newest snapshot in the data directory
	Sessions      []ufSession `json:"sessions"`
	Deleted       []string    `json:"deleted"` // deleted sessions (tombstones)
	Lease         ufLease     `json:"lease"`   // a lease granted (now long expired)
}

type ufSession struct {
	ID         string `json:"id"`
	Revision   string `json:"revision"`
	NextSeq    int64  `json:"next_seq"`
	RawSHA256  string `json:"raw_sha256"` // of ReadRaw's content (session.jsonl)
	RawLen     int    `json:"raw_len"`
	PlanActive bool   `json:"plan_active"`
}

type ufLease struct {
	SessionID string `json:"session_id"`
	Owner     string `json:"owner"`
	Epoch     uint64 `json:"epoch"`
}

const (
	ufDataArchive   = "datadir.tar.zst"
	ufBackupFile    = "backup.ssbk"
	ufExpectFile    = "expect.json"
	ufSessionPrefix = "up-"
)

func ufLoadExpect(t *testing.T, r ufRelease) ufExpect {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(r.Dir, ufExpectFile))
	if err != nil {
		t.Fatalf("fixture of %s: %v", r.Commit, err)
	}
	var e ufExpect
	if err := json.Unmarshal(b, &e); err != nil {
		t.Fatalf("fixture of %s: %s: %v", r.Commit, ufExpectFile, err)
	}
	return e
}

// ufExtract unpacks the release's data directory into a new temporary
// directory and returns it.
func ufExtract(t *testing.T, r ufRelease) string {
	t.Helper()
	f, err := os.Open(filepath.Join(r.Dir, ufDataArchive))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := zstd.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer zr.Close()
	dst := t.TempDir()
	tr := tar.NewReader(zr)
	for {
		h, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return dst
		}
		if err != nil {
			t.Fatalf("%s: %v", ufDataArchive, err)
		}
		name := filepath.Clean(h.Name)
		if filepath.IsAbs(name) || strings.HasPrefix(name, "..") {
			t.Fatalf("%s: entry %q outside the directory", ufDataArchive, h.Name)
		}
		p := filepath.Join(dst, name)
		switch h.Typeflag {
		case tar.TypeDir:
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
				t.Fatal(err)
			}
			out, err := os.OpenFile(p, os.O_CREATE|os.O_EXCL|os.O_WRONLY, os.FileMode(h.Mode)&0o777)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := io.Copy(out, tr); err != nil {
				t.Fatal(err)
			}
			if err := out.Close(); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: entry %q of unexpected type %c", ufDataArchive, h.Name, h.Typeflag)
		}
	}
}

// ufTitle is the data.title of the last session/title line of a
// session.jsonl, read with encoding/json.
func ufTitle(t *testing.T, jsonl []byte) string {
	t.Helper()
	title := ""
	for _, line := range strings.Split(strings.TrimSpace(string(jsonl)), "\n")[1:] { // the header first
		var ev struct {
			Type string
			Data struct{ Title *string }
		}
		if err := json.Unmarshal([]byte(line), &ev); err != nil {
			t.Fatalf("session.jsonl line %q: %v", line, err)
		}
		if ev.Type == "session/title" && ev.Data.Title != nil {
			title = *ev.Data.Title
		}
	}
	return title
}

func ufSHA(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

// ufCheckSessions reads every session of e back through c. sameCluster: the
// revisions must be the old ones (a restored backup mints a new cluster id).
func ufCheckSessions(t *testing.T, c *client.Client, e ufExpect, sameCluster bool) {
	t.Helper()
	for _, s := range e.Sessions {
		raw, err := c.ReadRaw(crCtx(t, 30*time.Second), &sessionpb.ReadRawRequest{SessionId: s.ID})
		if err != nil {
			t.Errorf("ReadRaw %q after the upgrade: %v", s.ID, err)
			continue
		}
		if got := ufSHA(raw.Content); got != s.RawSHA256 || len(raw.Content) != s.RawLen {
			t.Errorf("ReadRaw %q: %d bytes sha256 %s, the old release served %d bytes sha256 %s", s.ID, len(raw.Content), got, s.RawLen, s.RawSHA256)
		}
		if sameCluster && raw.Revision != s.Revision {
			t.Errorf("ReadRaw %q: revision %q, the old release answered %q", s.ID, raw.Revision, s.Revision)
		}
		v, err := c.Inspect(crCtx(t, 30*time.Second), &sessionpb.InspectRequest{SessionId: s.ID})
		if err != nil {
			t.Errorf("Inspect %q: %v", s.ID, err)
		} else if v.NextSeq != s.NextSeq {
			t.Errorf("Inspect %q: next_seq %d, the old release answered %d", s.ID, v.NextSeq, s.NextSeq)
		}
		p, err := c.PlanGet(crCtx(t, 30*time.Second), &sessionpb.PlanGetRequest{SessionId: s.ID})
		if err != nil {
			t.Errorf("PlanGet %q: %v", s.ID, err)
		} else if p.Active != s.PlanActive {
			t.Errorf("PlanGet %q: active %v, the old release answered %v", s.ID, p.Active, s.PlanActive)
		}
		// No release before format 5 kept titles: the conversion read them
		// from the old logs.
		l, err := c.ListSnapshots(crCtx(t, 30*time.Second), &sessionpb.ListSnapshotsRequest{IdPrefix: s.ID, PageSize: 1})
		if err != nil || len(l.Snapshots) != 1 || l.Snapshots[0].GetHeader().GetId() != s.ID {
			t.Errorf("ListSnapshots %q: %v, %v", s.ID, l, err)
		} else if want := ufTitle(t, raw.Content); l.Snapshots[0].Title != want || s.ID == "rec-fresh-round-trip" && want != "Use the bash tool to" {
			t.Errorf("ListSnapshots %q: title %q, its log's last title is %q", s.ID, l.Snapshots[0].Title, want)
		}
	}
	for _, id := range e.Deleted {
		_, err := c.Inspect(crCtx(t, 30*time.Second), &sessionpb.InspectRequest{SessionId: id})
		if auReason(err) != sessionstore.ReasonNotFound {
			t.Errorf("Inspect of the deleted session %q after the upgrade: %v, want NOT_FOUND", id, err)
		}
	}
}

// ufCheckWrites appends to an old session, takes over the old (expired)
// lease, and creates a new session: the upgraded node keeps working.
func ufCheckWrites(t *testing.T, c *client.Client, e ufExpect) {
	t.Helper()
	var target ufSession
	for _, s := range e.Sessions {
		if strings.HasPrefix(s.ID, ufSessionPrefix) && s.ID != e.Lease.SessionID {
			target = s
			break
		}
	}
	ev := fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"after":"upgrade"},"ignorable":true}`, target.NextSeq, crTime0+target.NextSeq)
	resp, err := c.Append(crCtx(t, 30*time.Second), &sessionpb.AppendRequest{SessionId: target.ID, Events: []string{ev}})
	if err != nil {
		t.Fatalf("Append to the old session %q after the upgrade: %v", target.ID, err)
	}
	if resp.NextSeq != target.NextSeq+1 || resp.Duplicate {
		t.Errorf("Append to %q: next_seq %d duplicate %v, want %d false", target.ID, resp.NextSeq, resp.Duplicate, target.NextSeq+1)
	}
	_, lease, err := c.Prepare(crCtx(t, 30*time.Second), &sessionpb.PrepareRequest{SessionId: e.Lease.SessionID, Owner: "after-upgrade", TtlMs: 60_000})
	if err != nil {
		t.Fatalf("Prepare %q by a new owner (the old lease has expired): %v", e.Lease.SessionID, err)
	}
	if lease.Epoch <= e.Lease.Epoch {
		t.Errorf("the new lease's epoch %d is not above the old release's %d", lease.Epoch, e.Lease.Epoch)
	}
	cwd := "/tmp/after-upgrade"
	id := "after-upgrade-new"
	if _, err := c.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: id, CreatedAt: crTime0, Cwd: &cwd}}); err != nil {
		t.Fatalf("Create after the upgrade: %v", err)
	}
}

// TestUpgrade_DataDirOfOlderRelease starts today's binary on the data
// directory an older release left (node id and addresses changed as an
// operator may), twice: as it was, and with state.db removed, so that the
// state is rebuilt from the old release's snapshot and WAL.
func TestUpgrade_DataDirOfOlderRelease(t *testing.T) {
	bin := crBinary(t)
	for _, r := range ufReleases {
		e := ufLoadExpect(t, r)
		for _, tc := range []struct {
			name        string
			removeState bool
		}{{"as-left", false}, {"state-rebuilt-from-snapshot-and-wal", true}} {
			t.Run(r.Commit+"/"+tc.name, func(t *testing.T) {
				dir := ufExtract(t, r)
				if tc.removeState {
					if err := os.Remove(filepath.Join(dir, "state.db")); err != nil {
						t.Fatal(err)
					}
				}
				n, c := crStartNode(t, bin, dir, "--node-id", e.NodeID)
				// The lone voter runs this build: the state is converted to
				// this build's format before the checks read it.
				crWaitLog(t, n, ufNewestFormatLog, 30*time.Second)
				ufCheckSessions(t, c, e, true)
				ufCheckWrites(t, c, e)
				// Restarted, the converted directory opens again.
				n.Term()
				n.Start()
				n.WaitReady(c)
				ufCheckSessions(t, c, ufExpect{Sessions: e.Sessions[:1], Deleted: e.Deleted}, false)
			})
		}
	}
}

// TestUpgrade_BackupOfOlderRelease restores an older release's backup file
// into a new data directory with today's binary and serves it.
func TestUpgrade_BackupOfOlderRelease(t *testing.T) {
	bin := crBinary(t)
	for _, r := range ufReleases {
		e := ufLoadExpect(t, r)
		t.Run(r.Commit, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "restored")
			out, err := exec.Command(bin, "restore", filepath.Join(r.Dir, ufBackupFile), "--data-dir", dir, "--node-id", "r1").CombinedOutput()
			if err != nil {
				t.Fatalf("sessionstore restore of %s's backup: %v\n%s", r.Commit, err, out)
			}
			n, c := crStartNode(t, bin, dir, "--node-id", "r1")
			crWaitLog(t, n, ufNewestFormatLog, 30*time.Second)
			ufCheckSessions(t, c, e, false)
			ufCheckWrites(t, c, e)
		})
	}
}

// ufOldBinary builds the node binary of an older release from this
// repository's history (git archive of commit, go build), once per commit
// and test run.
func ufOldBinary(t *testing.T, commit string) string {
	t.Helper()
	ufOld.mu.Lock()
	b := ufOld.builds[commit]
	if b == nil {
		b = &ufBuild{}
		if ufOld.builds == nil {
			ufOld.builds = map[string]*ufBuild{}
		}
		ufOld.builds[commit] = b
	}
	ufOld.mu.Unlock()
	b.once.Do(func() { b.path, b.err = ufBuildRelease(commit) })
	if b.err != nil {
		t.Fatalf("build release %s: %v", commit, b.err)
	}
	return b.path
}

func ufBuildRelease(commit string) (string, error) {
	top, err := exec.Command("git", "rev-parse", "--show-toplevel").Output()
	if err != nil {
		return "", fmt.Errorf("git rev-parse --show-toplevel: %v (the test builds an older release from the repository's history)", err)
	}
	src, err := os.MkdirTemp("", crBinPrefix+"src-*")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(src)
	arch := exec.Command("sh", "-c", "git -C \"$1\" archive --format=tar \"$2\" | tar -x -C \"$3\"", "sh", strings.TrimSpace(string(top)), commit, src)
	if out, err := arch.CombinedOutput(); err != nil {
		return "", fmt.Errorf("git archive %s: %v\n%s", commit, err, out)
	}
	dir, err := os.MkdirTemp("", crBinPrefix+"*")
	if err != nil {
		return "", err
	}
	bin := filepath.Join(dir, "sessionstore-"+commit)
	b := exec.Command("go", "build", "-o", bin, "./cmd/node")
	b.Dir = src
	if out, err := b.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build of %s: %v\n%s", commit, err, out)
	}
	return bin, nil
}

type ufBuild struct {
	once sync.Once
	path string
	err  error
}

var ufOld struct {
	mu     sync.Mutex
	builds map[string]*ufBuild // by commit
}

// TestUpgrade_RollingFromOlderRelease upgrades a three-node cluster of an
// older release's real binary one node at a time: the oldest fixture release
// (state format 1) and the newest (format 3). The first upgraded node is
// stopped while an old leader compacts past it, so it is sent the old
// leader's snapshot; then it leads, and one voter still on the old build is
// stopped the same way, so it is sent a snapshot by the new leader. Both must
// install it and hold artifacts of the same text (not the same bytes: this
// build stores small frames raw where older ones compressed them, and frames
// already written stay as they are). The state keeps the old release's
// format while an old voter remains; once the last node is upgraded every
// node converts it to this build's format (layout 2 first, from format 1), and the
// cluster goes on writing and deleting. A session titled under the old release
// is listed with its title by every node once the state is in format 5, and a
// title appended after that reaches every node's listing.
func TestUpgrade_RollingFromOlderRelease(t *testing.T) {
	if testing.Short() {
		t.Skip("three node processes of two releases")
	}
	for _, r := range []ufRelease{ufReleases[0], ufReleases[len(ufReleases)-1]} {
		t.Run(r.Commit, func(t *testing.T) { ufRolling(t, r) })
	}
}

func ufRolling(t *testing.T, r ufRelease) {
	oldBin, newBin := ufOldBinary(t, r.Commit), crBinary(t)
	nodes := pcNewCluster(t, oldBin, 3)
	for _, nd := range nodes {
		nd.Extra = []string{"--snapshot-threshold", "64", "--snapshot-interval", "200ms", "--trailing-logs", "16"}
		nd.Start()
	}
	all := []int{0, 1, 2}
	pcWaitLeader(t, nodes, all, "cluster of "+r.Commit)
	ss := crMakeSessions("roll", 6, "/w/roll")
	crCreateAll(t, nodes[0].C, ss)
	write := func(c *client.Client, rounds int) {
		t.Helper()
		for range rounds {
			for _, s := range ss {
				if err := s.AppendBatch(c, 2); err != nil {
					t.Fatalf("append %q: %v", s.ID, err)
				}
			}
		}
	}
	write(nodes[0].C, 3)
	// A session titled by the old release, whose title only the conversion
	// to format 5 can find.
	titled, cwd := "roll-titled", "/w/titled"
	if _, err := nodes[0].C.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: titled, CreatedAt: crTime0, Cwd: &cwd}}); err != nil {
		t.Fatal(err)
	}
	titleEvent := func(seq int, title string) string {
		return fmt.Sprintf(`{"type":"session/title","seq":%d,"time":%d,"data":{"title":%q}}`, seq, crTime0+int64(seq), title)
	}
	if _, err := nodes[0].C.Append(crCtx(t, 30*time.Second), &sessionpb.AppendRequest{SessionId: titled,
		Events: []string{titleEvent(0, "old"), titleEvent(1, "set by "+r.Commit)}}); err != nil {
		t.Fatal(err)
	}
	// titleOnEvery waits until every node's own listing shows the title.
	titleOnEvery := func(want string) {
		t.Helper()
		clustertest.Eventually(t, 30*time.Second, func() error {
			for _, nd := range nodes {
				l, err := nd.C.ListSnapshots(crCtx(t, 10*time.Second), &sessionpb.ListSnapshotsRequest{IdPrefix: titled, Consistency: sessionpb.Consistency_STALE})
				if err != nil || len(l.GetSnapshots()) != 1 || l.Snapshots[0].Title != want {
					return fmt.Errorf("%s lists %v (%v), want the title %q", nd.ID, l, err, want)
				}
			}
			return nil
		})
	}

	// n1 runs this build…
	nodes[0].Term()
	nodes[0].bin = newBin
	nodes[0].Start()
	pcWaitLeader(t, nodes, all, "n1 upgraded")
	write(nodes[1].C, 2)

	// …and, stopped while an old leader compacts past it, is sent that
	// leader's snapshot on its return (the reverse direction).
	for {
		li := pcWaitLeader(t, nodes, all, "an old leader")
		if li != 0 {
			st, err := nodes[0].C.Status(crCtx(t, 10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			nodes[0].Term()
			crWaitSnapshot(t, nodes[li].Dir, st.AppliedIndex+64, func() { write(nodes[li].C, 1) })
			break
		}
		if err := nodes[0].C.TransferLeadership(crCtx(t, 10*time.Second), "n2"); err != nil {
			t.Logf("transfer leadership to n2: %v (retrying)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	nodes[0].Start()
	pcWaitLeader(t, nodes, all, "new n1 back")
	write(nodes[1].C, 1)
	pcCheckSameText(t, nodes, ss)
	if got := crMetric(t, nodes[0].crNode, "sessionstore_fsm_snapshot_restores_total"); got == "?" || got == "0" {
		t.Errorf("the new voter's snapshot restores: %s; it should have installed the old leader's snapshot", got)
	}

	// n1 becomes leader.
	for {
		li := pcWaitLeader(t, nodes, all, "transfer to n1")
		if li == 0 {
			break
		}
		if err := nodes[li].C.TransferLeadership(crCtx(t, 10*time.Second), "n1"); err != nil {
			t.Logf("transfer leadership to n1: %v (retrying)", err)
		}
		time.Sleep(200 * time.Millisecond)
	}

	// n3 (old build) misses enough entries to need a snapshot.
	st, err := nodes[2].C.Status(crCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	nodes[2].Term()
	restores := crMetric(t, nodes[2].crNode, "sessionstore_fsm_snapshot_restores_total")
	crWaitSnapshot(t, nodes[0].Dir, st.AppliedIndex+64, func() { write(nodes[0].C, 1) })
	nodes[2].Start()
	pcWaitLeader(t, nodes, all, "old n3 back")
	write(nodes[0].C, 1)
	pcCheckSameText(t, nodes, ss)
	if got := crMetric(t, nodes[2].crNode, "sessionstore_fsm_snapshot_restores_total"); got == "?" || got == "0" || got == restores {
		t.Errorf("the old-release voter's snapshot restores: %s (before its stop: %s); it should have installed the new leader's snapshot", got, restores)
	}

	// While an old voter remains, the state keeps its format (its snapshots
	// are what the old voter just read).
	for _, msg := range ufFormatLogs[r.Format+1:] {
		if l := crGrep(nodes[0].Log(), msg); len(l) > 0 {
			t.Errorf("n1 converted the state while old voters remained: %q", l)
		}
	}

	// The rest of the cluster is upgraded; then every node converts.
	for _, i := range []int{1, 2} {
		nodes[i].Term()
		nodes[i].bin = newBin
		nodes[i].Start()
		pcWaitLeader(t, nodes, all, nodes[i].ID+" upgraded")
	}
	write(nodes[2].C, 2)
	for _, nd := range nodes {
		for _, msg := range ufFormatLogs[r.Format+1:] {
			crWaitLog(t, nd.crNode, msg, 30*time.Second)
		}
	}
	write(nodes[2].C, 2)
	pcCheckSameText(t, nodes, ss)
	titleOnEvery("set by " + r.Commit)
	if _, err := nodes[2].C.Append(crCtx(t, 30*time.Second), &sessionpb.AppendRequest{SessionId: titled,
		Events: []string{titleEvent(2, "set after the upgrade")}}); err != nil {
		t.Fatal(err)
	}
	titleOnEvery("set after the upgrade")
	if _, err := nodes[1].C.Delete(crCtx(t, 30*time.Second), &sessionpb.DeleteRequest{SessionId: ss[0].ID}); err != nil {
		t.Fatalf("delete after the upgrade: %v", err)
	}
	pcCheckSameText(t, nodes, ss[1:])
}
