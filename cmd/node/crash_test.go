package main

// Crash tests of the real binary (docs/design.md "State machine",
// "Artifacts", "Snapshots"): SIGKILL under a write load, a deleted, damaged or old state
// database, and SIGKILL in the middle of the start-up restore. Helpers are in
// crash_helpers_test.go.

import (
	"bytes"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// TestCrash_KillUnderWriteLoad runs the real binary under a write load, kills
// it with SIGKILL at random moments several times, restarts it, and shows that
// every acknowledged event is present, in order, with no duplicate, and that
// every artifact verifies and equals ReadRaw.
func TestCrash_KillUnderWriteLoad(t *testing.T) {
	start := time.Now()
	seed := crSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xc0ffee))
	bin := crCrashBinary(t)
	// Frequent snapshots and log compaction, so that kills also land while a
	// snapshot is written or the log compacted.
	n := crNewNode(t, bin, t.TempDir(), "--snapshot-threshold", "200", "--snapshot-interval", "1s", "--trailing-logs", "100")
	n.Start()
	c := crDial(t, n.GRPCAddr)
	t.Logf("first start ready in %v", n.WaitReady(c).Round(time.Millisecond))

	ss := crMakeSessions("crash", 8, "/w/crash")
	crCreateAll(t, c, ss)

	// Few attempts per call, so that unknown outcomes reach the writer and
	// its own re-send after the restart is exercised, not only the client's.
	wc := c.WithOptions(client.Options{MaxAttempts: 3, InitialBackoff: 20 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
	stopWriters := crRunWriters(t, ss, seed, func(s *crSession, rng *rand.Rand) error { return s.AppendBatch(wc, 1+rng.IntN(5)) })
	defer stopWriters()

	const kills = 5
	for k := 1; k <= kills; k++ {
		d := time.Duration(300+rng.IntN(1201)) * time.Millisecond
		time.Sleep(d)
		_, ackedBefore := crSumStats(ss)
		n.Kill()
		_, ackedAtKill := crSumStats(ss)
		n.Start()
		ready := n.WaitReady(nil)
		total := crCheckStored(t, c, ss, false, fmt.Sprintf("after kill %d", k))
		snap, _ := crLatestSnapshot(n.Dir)
		t.Logf("kill %d/%d after %v: %d events acknowledged before the kill (%d when it was gone); restarted and ready in %v; %d events stored; latest snapshot index %d",
			k, kills, d, ackedBefore, ackedAtKill, ready.Round(time.Millisecond), total, snap.Index)
		if t.Failed() {
			t.FailNow()
		}
	}
	// Let the writers run on the healthy node, then resolve and stop.
	time.Sleep(500 * time.Millisecond)
	stopWriters()
	if t.Failed() {
		t.FailNow()
	}
	st, events := crSumStats(ss)
	t.Logf("writers: %d batches, %d events acknowledged; %d batches with an unknown outcome (errors %v), %d re-sends; "+
		"resolved by a re-send as duplicate %d, as newly stored %d; first call answered duplicate %d",
		st.Batches, events, st.Unknown, st.Errs, st.Resends, st.ResolvedDup, st.ResolvedFresh, st.FirstDup)

	crCheckStored(t, c, ss, true, "final")
	crCheckArtifacts(t, c, n.Dir, ss)
	n.Term()
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// TestCrash_KillDuringSnapshotRestore_AndDeletedStateDB kills the node during
// a snapshot restore and deletes, damages and rolls back its bbolt file, and
// it comes back with every acknowledged event each time (docs/design.md "State machine": before
// Raft starts, a missing, unreadable or older-than-the-latest-snapshot state
// database is restored from that snapshot).
func TestCrash_KillDuringSnapshotRestore_AndDeletedStateDB(t *testing.T) {
	start := time.Now()
	seed := crSeed(t)
	rng := rand.New(rand.NewPCG(seed, 0xbadd1e))
	bin := crCrashBinary(t)
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	n, c := crStartNode(t, bin, dir, "--snapshot-threshold", "200", "--snapshot-interval", "1s", "--trailing-logs", "100")

	ss := crMakeSessions("snap", 20, "/w/snap")
	crCreateAll(t, c, ss)
	loadSeed := seed
	load := func(per int) {
		t.Helper()
		loadSeed++
		crWriteLoad(t, c, ss, per, loadSeed)
	}
	// poke adds Raft entries one by one (each sequential append is its own
	// entry) while a test waits for a snapshot.
	pokeN := 0
	poke := func() {
		s := ss[pokeN%len(ss)]
		pokeN++
		if err := s.AppendBatch(c, 1); err != nil {
			t.Fatalf("poke: %v", err)
		}
	}
	restart := func() time.Duration {
		t.Helper()
		n.Start()
		return n.WaitReady(c) // includes a linearizable read before any write
	}
	check := func(what string) {
		t.Helper()
		crCheckStored(t, c, ss, true, what)
		_, events := crSumStats(ss)
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: all %d acknowledged events of %d sessions served (elapsed %v)", what, events, len(ss), time.Since(start).Round(time.Millisecond))
	}
	restoredMsg := "state restored from the latest snapshot before start"

	// Phase 0: ≥ 2,000 events over 20 sessions, and a snapshot (after which
	// the log is compacted to the trailing 100 entries).
	load(100)
	s1 := crWaitSnapshot(t, dir, 0, poke)
	t.Logf("snapshot %s at index %d", s1.ID, s1.Index)
	check("before any damage")

	// (a) SIGTERM, delete state.db: restore from the snapshot + replay the log.
	n.Term()
	if err := os.Remove(statePath); err != nil {
		t.Fatalf("delete state.db: %v", err)
	}
	ready := restart()
	if !strings.Contains(n.Log(), restoredMsg) {
		t.Errorf("(a) state.db deleted: the node's log does not say %q", restoredMsg)
	}
	t.Logf("(a) state.db deleted: restarted and ready in %v", ready.Round(time.Millisecond))
	check("(a) after deleting state.db")

	// Keep a copy of this state database for (d).
	n.Term()
	oldState := filepath.Join(t.TempDir(), "state.db.old")
	crCopyFile(t, statePath, oldState)
	oldApplied := crAppliedIndex(t, oldState)
	t.Logf("saved state.db at applied index %d (latest snapshot %d)", oldApplied, s1.Index)
	restart()
	if strings.Contains(n.Log(), restoredMsg) {
		t.Logf("NOTE: an untouched restart restored the state: %q", crGrep(n.Log(), "snapshot"))
	}

	// (b) More writes, a newer snapshot, SIGKILL; delete state.db and kill
	// the node again and again while it restores, leaving whatever it left.
	load(50)
	s2 := crWaitSnapshot(t, dir, max(s1.Index, oldApplied), poke)
	t.Logf("snapshot %s at index %d", s2.ID, s2.Index)
	n.Kill()
	const tries = 6
	for i := 1; i <= tries; i++ {
		removed := false
		if err := os.Remove(statePath); err == nil {
			removed = true
		} else if !os.IsNotExist(err) {
			t.Fatalf("delete state.db: %v", err)
		}
		var how string
		if i%2 == 1 {
			how = n.StartAndKillWhenRestoring()
		} else {
			n.Start()
			d := time.Duration(rng.IntN(301)) * time.Millisecond
			time.Sleep(d)
			how = "after a random " + d.String()
			if n.Exited() {
				t.Errorf("(b) try %d: the node exited by itself during start-up", i)
			}
			n.Kill()
		}
		t.Logf("(b) try %d: state.db removed=%v; SIGKILL %s; restored message logged: %v; files now: %v",
			i, removed, how, strings.Contains(n.Log(), restoredMsg), crStateFiles(dir))
	}
	leftovers, _ := filepath.Glob(statePath + ".restore-*")
	ready = restart()
	t.Logf("(b) after %d killed restores (leftover temp files %d: %v): restarted normally, ready in %v",
		tries, len(leftovers), crStateFiles(dir), ready.Round(time.Millisecond))
	check("(b) after killing restores")
	if after, _ := filepath.Glob(statePath + ".restore-*"); len(after) > 0 {
		t.Logf("NOTE: %d restore temp files are still in the data directory after a clean start: %v", len(after), crStateFiles(dir))
	}

	// (c) Overwrite state.db with garbage: moved aside, restored, replayed.
	load(20)
	n.Kill()
	garbage := make([]byte, 64<<10)
	for i := range garbage {
		garbage[i] = byte(rng.Uint32())
	}
	if err := os.WriteFile(statePath, garbage, 0o600); err != nil {
		t.Fatalf("overwrite state.db: %v", err)
	}
	asideCheck := crAsideCheck(t, dir)
	firstRun := len(n.runs)
	how := n.StartAndKillWhenRestoring()
	t.Logf("(c) garbage state.db: SIGKILL %s; files now: %v", how, crStateFiles(dir))
	ready = restart()
	aside := asideCheck("(c)", garbage)
	// The restore may finish in the first run (killed only after it, when
	// the watcher missed the short-lived temp file) or in the second.
	restored := false
	for _, r := range n.runs[firstRun:] {
		restored = restored || strings.Contains(r.log.String(), restoredMsg)
	}
	if !restored {
		t.Errorf("(c) state.db unreadable: no run's log says %q", restoredMsg)
	}
	t.Logf("(c) garbage state.db: moved aside as %v; ready in %v", aside, ready.Round(time.Millisecond))
	check("(c) after overwriting state.db with garbage")

	// (d) Put the old state.db back after newer snapshots exist.
	load(20)
	s3 := crWaitSnapshot(t, dir, s2.Index, poke)
	t.Logf("snapshot %s at index %d", s3.ID, s3.Index)
	n.Kill()
	if latest, _ := crLatestSnapshot(dir); latest.Index <= oldApplied {
		t.Fatalf("(d) precondition: latest snapshot %d is not newer than the old state.db (%d)", latest.Index, oldApplied)
	}
	crCopyFile(t, oldState, statePath)
	how = n.StartAndKillWhenRestoring()
	t.Logf("(d) old state.db: SIGKILL %s; files now: %v", how, crStateFiles(dir))
	ready = restart()
	if !strings.Contains(n.Log(), "older than the latest snapshot") || !strings.Contains(n.Log(), restoredMsg) {
		t.Errorf("(d) old state.db (applied %d): the node's log does not report the restore: %q", oldApplied, crGrep(n.Log(), "restor"))
	}
	t.Logf("(d) old state.db (applied index %d < snapshot %d): ready in %v", oldApplied, s3.Index, ready.Round(time.Millisecond))
	check("(d) after putting an old state.db back")

	// The seqs go on, and every artifact equals ReadRaw.
	load(10)
	check("final")
	crCheckArtifacts(t, c, dir, ss)
	n.Term()
	t.Logf("done in %v", time.Since(start).Round(time.Millisecond))
}

// TestCrash_RestartedIdleNodeServesReads restarts a node (after SIGTERM, then
// after SIGKILL) and reads before anything is written: a linearizable read of
// a ready node must be served, not wait for the next write.
func TestCrash_RestartedIdleNodeServesReads(t *testing.T) {
	bin := crCrashBinary(t)
	n, c := crStartNode(t, bin, t.TempDir())
	ss := crMakeSessions("idle", 1, "/w/idle")
	crCreateAll(t, c, ss)
	if err := ss[0].AppendBatch(c, 3); err != nil {
		t.Fatal(err)
	}
	for _, stop := range []string{"SIGTERM", "SIGKILL"} {
		if stop == "SIGTERM" {
			n.Term()
		} else {
			n.Kill()
		}
		n.Start()
		ready := n.WaitReady(nil)
		t0 := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		rf, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: ss[0].ID})
		cancel()
		if err != nil {
			took := time.Since(t0)
			commit := crMetric(t, n, "sessionstore_raft_commit_index")
			n.Term()
			applied := crAppliedIndex(t, filepath.Join(n.Dir, "state.db"))
			n.Start() // for the next round or the final Term
			n.WaitReady(nil)
			t.Errorf("after %s and a restart (ready in %v, nothing written since): linearizable ReadFrom failed after %v: %v "+
				"(Raft commit index %s; the state database's applied index when the node stopped: %d)",
				stop, ready.Round(time.Millisecond), took.Round(time.Millisecond), err, commit, applied)
			continue
		}
		if i := crFirstDiff(rf.GetEvents(), ss[0].Acked()); i >= 0 || len(rf.GetEvents()) != 3 {
			t.Errorf("after %s: ReadFrom = %q, want %q", stop, rf.GetEvents(), ss[0].Acked())
		}
		t.Logf("after %s: restarted, ready in %v, read served in %v", stop, ready.Round(time.Millisecond), time.Since(t0).Round(time.Millisecond))
	}
	n.Term()
}

// TestCrash_IdleSnapshotDoesNotForceARestoreAtEveryStart takes a snapshot on
// an idle node (the newest entries are the new leader's no-op and barrier,
// which the FSM never applies) and restarts it twice untouched: the start-up
// guard must not take the state database for one older than the snapshot and
// restore it each time (docs/design.md "State machine" restores only a missing, damaged or
// really older file).
func TestCrash_IdleSnapshotDoesNotForceARestoreAtEveryStart(t *testing.T) {
	bin := crCrashBinary(t)
	dir := t.TempDir()
	// No snapshot while writing (the interval is an hour)…
	n, c := crStartNode(t, bin, dir, "--snapshot-threshold", "200", "--snapshot-interval", "1h", "--trailing-logs", "100")
	ss := crMakeSessions("quiet", 1, "/w/quiet")
	crCreateAll(t, c, ss)
	for range 220 { // one Raft entry each
		if err := ss[0].AppendBatch(c, 1); err != nil {
			t.Fatal(err)
		}
	}
	n.Term()
	// …then restart idle with a 1 s interval: the snapshot comes after the
	// new leader's no-op and barrier.
	n.Extra = []string{"--snapshot-threshold", "200", "--snapshot-interval", "1s", "--trailing-logs", "100"}
	n.Start()
	n.WaitReady(nil)
	snap := crWaitSnapshot(t, dir, 0, nil)
	n.Term()
	applied := crAppliedIndex(t, filepath.Join(dir, "state.db"))
	t.Logf("idle snapshot %s at index %d; state.db applied index %d", snap.ID, snap.Index, applied)
	if applied == snap.Index {
		t.Logf("the snapshot was taken before the new leader's barrier; nothing to show this time")
	}
	for i := 1; i <= 2; i++ {
		n.Start()
		n.WaitReady(nil)
		if l := crGrep(n.Log(), "older than the latest snapshot"); len(l) > 0 {
			t.Errorf("untouched restart %d restored the state database from the snapshot (state.db applied %d, snapshot %d): %q",
				i, applied, snap.Index, l)
		}
		n.Term()
	}
	// The data is intact either way.
	n.Start()
	n.WaitReady(c)
	if err := ss[0].AppendBatch(c, 1); err != nil {
		t.Fatal(err)
	}
	crCheckStored(t, c, ss, true, "after the restarts")
	crCheckArtifacts(t, c, dir, ss)
	n.Term()
}

// TestCrash_DamagedStatePagesAreMovedAsideAndRebuilt flips real bytes in the
// state database of a stopped node: a zeroed leaf page (bbolt.Open panicked in
// its own goroutine with "Page expected to be: N, but self identifies as 0", a
// crash loop), a branch page's child pointer sent past the end of the file (a
// fault in bbolt's walk), both meta pages. Each time the node starts, moves the
// file aside (bytes kept), rebuilds it from the latest snapshot and the Raft
// log, and serves every acknowledged event. The node is stopped with SIGTERM
// (a clean stop: the damage is a write to the file since), and once with
// SIGKILL (an unclean stop: the start checks every page anyway).
func TestCrash_DamagedStatePagesAreMovedAsideAndRebuilt(t *testing.T) {
	bin := crCrashBinary(t)
	dir := t.TempDir()
	statePath := filepath.Join(dir, "state.db")
	n, c := crStartNode(t, bin, dir, "--snapshot-threshold", "200", "--snapshot-interval", "1s", "--trailing-logs", "100")
	ss := crMakeSessions("pages", 8, "/w/pages")
	crCreateAll(t, c, ss)
	seed := crSeed(t)
	crWriteLoad(t, c, ss, 80, seed) // ~25 KiB per session: events on several leaf pages under a branch page
	snap := crWaitSnapshot(t, dir, 0, func() {
		if err := ss[0].AppendBatch(c, 1); err != nil {
			t.Fatalf("poke: %v", err)
		}
	})
	t.Logf("snapshot %s at index %d", snap.ID, snap.Index)
	ps := os.Getpagesize()
	const movedMsg = "state database is damaged or cannot be opened; moving it aside"

	zeroLeaf := func(t *testing.T, b []byte, pages map[string][]int) {
		leaf := pages["leaf"][len(pages["leaf"])/2]
		clear(b[leaf*ps : (leaf+1)*ps])
		t.Logf("zeroed leaf page %d", leaf)
	}
	cases := []struct {
		name   string
		damage func(t *testing.T, b []byte, pages map[string][]int)
		kill   bool // stop with SIGKILL, not SIGTERM
	}{
		{"a leaf page zeroed", zeroLeaf, false},
		{"a leaf page zeroed after SIGKILL", zeroLeaf, true},
		{"a branch page's first child pointer past the end of the file", func(t *testing.T, b []byte, pages map[string][]int) {
			br := pages["branch"][0]
			b[br*ps+16+8+3] ^= 0x10 // child page id + 2^28
			t.Logf("flipped a bit of branch page %d's first child id", br)
		}, false},
		{"both meta pages flipped", func(t *testing.T, b []byte, pages map[string][]int) {
			b[16+48] ^= 0x01 // txid
			b[ps+16+48] ^= 0x01
		}, false},
	}
	for i, tc := range cases {
		// More acknowledged writes after the snapshot, so the rebuild needs
		// the log too.
		crWriteLoad(t, c, ss, 10, seed+uint64(i)+1)
		if tc.kill {
			n.Kill()
		} else {
			n.Term()
		}
		pages := crStatePages(t, statePath)
		if len(pages["branch"]) == 0 || len(pages["leaf"]) == 0 {
			t.Fatalf("%s: the state database has no branch or no leaf page: %v", tc.name, pages)
		}
		asideCheck := crAsideCheck(t, dir)
		var damaged []byte
		crDamageFile(t, statePath, func(b []byte) {
			tc.damage(t, b, pages)
			damaged = append([]byte(nil), b...)
		})
		n.Start()
		ready := n.WaitReady(c) // fails the test if the node exits (the crash loop)
		if l := crGrep(n.Log(), movedMsg); len(l) != 1 {
			t.Errorf("%s: want one log line %q, have %q", tc.name, movedMsg, l)
		} else {
			t.Logf("%s: %s", tc.name, l[0])
		}
		asideCheck(tc.name, damaged)
		total := crCheckStored(t, c, ss, true, tc.name)
		if t.Failed() {
			t.FailNow()
		}
		t.Logf("%s: moved aside, rebuilt, ready in %v, all %d acknowledged events served", tc.name, ready.Round(time.Millisecond), total)
	}
	crWriteLoad(t, c, ss, 5, seed+100)
	crCheckStored(t, c, ss, true, "final")
	crCheckArtifacts(t, c, dir, ss)
	n.Term()
}

// TestCrash_DamagedLastWALRecordIsRefusedAndRepaired flips one bit in the final
// record of a stopped node's Raft log, a record the state database had already
// applied. The node used to drop it as a torn write without a word and run with
// its applied index above the log's last index (new entries at that index were
// then skipped by the state machine, and a node joining later replayed a log
// without the entry). Now the start is refused with a message naming the
// record and the repair command, changing nothing; `sessionstore repair` rebuilds the
// log's end from the state, and the node serves every acknowledged event and
// applies new writes. The same holds for a log whose final record is gone
// (cut at the record boundary, as 2f2e872 left a log after such a flip).
func TestCrash_DamagedLastWALRecordIsRefusedAndRepaired(t *testing.T) {
	bin := crCrashBinary(t)
	dir := t.TempDir()
	n, c := crStartNode(t, bin, dir)
	ss := crMakeSessions("wal", 4, "/w/wal")
	crCreateAll(t, c, ss)
	seed := crSeed(t)
	cases := []struct {
		name   string
		damage func(b []byte, off, size int64) []byte
		want   string // in the refused start's output
	}{
		{"one bit flipped in the final record", func(b []byte, off, size int64) []byte { b[off+size-2] ^= 0x04; return b }, "record %d"},
		{"the final record cut off at its boundary", func(b []byte, off, size int64) []byte { return b[:off] }, "but the Raft log ends at %d"},
	}
	for ci, tc := range cases {
		crWriteLoad(t, c, ss, 30, seed+uint64(ci))
		if err := ss[0].AppendBatch(c, 2); err != nil { // the last acknowledged write
			t.Fatal(err)
		}
		n.Term()

		seg, off, size, index := crWALLastRecord(t, dir)
		applied := crAppliedIndex(t, filepath.Join(dir, "state.db"))
		if applied < index {
			t.Fatalf("%s: precondition: the last WAL record (index %d) is not applied (state.db applied index %d)", tc.name, index, applied)
		}
		b, err := os.ReadFile(seg)
		if err != nil {
			t.Fatal(err)
		}
		damaged := tc.damage(b, off, size)
		if err := os.WriteFile(seg, damaged, 0o600); err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: final record index %d, %d bytes at offset %d of %s; state.db applied index %d",
			tc.name, index, size, off, filepath.Base(seg), applied)
		want := fmt.Sprintf(tc.want, index)
		if ci == 1 {
			want = fmt.Sprintf(tc.want, index-1)
		}

		// The start is refused, loudly, and nothing is changed.
		n.Start()
		select {
		case <-n.cur.exited:
		case <-time.After(crReadyTimeout):
			n.Kill()
			t.Fatalf("%s: the node did not refuse to start (still running after %v)", tc.name, crReadyTimeout)
		}
		r := n.cur
		n.cur = nil
		if r.err == nil {
			t.Errorf("%s: the refused start exited with status 0", tc.name)
		}
		for _, w := range []string{"refusing to start", want, "sessionstore repair --data-dir " + dir} {
			if !strings.Contains(n.Log(), w) {
				t.Errorf("%s: the refused start's output does not say %q:\n%s", tc.name, w, n.Log())
			}
		}
		if after, _ := os.ReadFile(seg); !bytes.Equal(after, damaged) {
			t.Errorf("%s: the refused start changed the WAL segment", tc.name)
		}
		if t.Failed() {
			t.FailNow()
		}

		// sessionstore repair, then the node serves everything and takes new writes.
		out, err := exec.Command(bin, "repair", "--data-dir", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("%s: sessionstore repair: %v\n%s", tc.name, err, out)
		}
		t.Logf("%s: sessionstore repair:\n%s", tc.name, out)
		if aside, _ := filepath.Glob(seg + ".damaged-*"); ci == 0 && len(aside) != 1 {
			t.Errorf("%s: sessionstore repair kept no copy of the damaged segment: %v", tc.name, aside)
		}
		n.Start()
		n.WaitReady(c)
		crCheckStored(t, c, ss, true, tc.name+", after sessionstore repair")
		crWriteLoad(t, c, ss, 10, seed+100+uint64(ci))
		crCheckStored(t, c, ss, true, tc.name+", after sessionstore repair and new writes")
		// And it stays consistent across a restart.
		n.Term()
		if a := crAppliedIndex(t, filepath.Join(dir, "state.db")); a <= applied {
			t.Errorf("%s: state.db applied index %d after new writes, want above %d", tc.name, a, applied)
		}
		n.Start()
		n.WaitReady(c)
		crCheckStored(t, c, ss, true, tc.name+", after a restart")
		if t.Failed() {
			t.FailNow()
		}
	}
	// A torn write above the applied index (half a record appended) is cut,
	// with a log line, and the node runs on.
	n.Term()
	seg, _, _, index := crWALLastRecord(t, dir)
	f, err := os.OpenFile(seg, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write([]byte{0, 0, 1, 0, 0xde, 0xad, 0xbe, 0xef, 1, 2, 3})
	f.Close()
	n.Start()
	n.WaitReady(c)
	if l := crGrep(n.Log(), "raft wal: truncated a torn tail"); len(l) != 1 || !strings.Contains(l[0], fmt.Sprintf("index=%d", index+1)) {
		t.Errorf("a torn tail at index %d: want one log line saying it was truncated, have %q", index+1, l)
	}
	crCheckStored(t, c, ss, true, "after a torn tail")

	// On an undamaged node, sessionstore repair changes nothing.
	n.Term()
	segsBefore, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*"))
	out, err := exec.Command(bin, "repair", "--data-dir", dir).CombinedOutput()
	if err != nil || !strings.Contains(string(out), "nothing to repair") {
		t.Errorf("sessionstore repair on an undamaged node: %v\n%s", err, out)
	}
	if segsAfter, _ := filepath.Glob(filepath.Join(dir, "raft", "wal", "*")); !slices.Equal(segsBefore, segsAfter) {
		t.Errorf("sessionstore repair on an undamaged node changed raft/wal: %v -> %v", segsBefore, segsAfter)
	}
	n.Start()
	n.WaitReady(c)
	crCheckStored(t, c, ss, true, "final")
	crCheckArtifacts(t, c, dir, ss)
	n.Term()
}
