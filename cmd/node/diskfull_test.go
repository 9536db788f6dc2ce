package main

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// Disk full (issue 8), on a real size-limited filesystem: a tmpfs of dfFSSize
// mounted on a temporary directory. A filler file in the same tmpfs brings the
// free space just above --min-free-bytes, so a few appends cross it.
const (
	dfFSSize   = 64 << 20
	dfMinFree  = 16 << 20
	dfHeadroom = 3 << 20 // free space above the threshold left by the filler
)

// dfMountTmpfs mounts a tmpfs of size bytes on a new temporary directory and
// unmounts it at the end of the test (after the node's cleanup, which is
// registered later). Without the privilege to mount, the test is skipped,
// except under CI=true, where it fails.
func dfMountTmpfs(t *testing.T, size int64) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "sessionstore-diskfull-*")
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		_ = os.Remove(dir)
		msg := fmt.Sprintf("mount a %d MiB tmpfs on %s: %v (the disk-full test needs root or CAP_SYS_ADMIN)", size>>20, dir, err)
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, 0); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
			_ = syscall.Unmount(dir, syscall.MNT_DETACH)
		}
		_ = os.Remove(dir)
	})
	return dir
}

// dfAvail is the space available on the filesystem holding path.
func dfAvail(t *testing.T, path string) int64 {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		t.Fatalf("statfs %s: %v", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize)
}

// dfFill writes a file of n bytes (incompressible, fully allocated).
func dfFill(t *testing.T, path string, n int64) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 1<<20)
	for n > 0 {
		k := min(n, int64(len(buf)))
		if _, err := f.Write(buf[:k]); err != nil {
			t.Fatalf("write filler %s: %v", path, err)
		}
		n -= k
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

// dfEvent is one event of about size bytes; the text is random so zstd does
// not shrink the artifact to nothing.
func dfEvent(rng *rand.Rand, seq int64, size int) string {
	const letters = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, size)
	for i := range b {
		b[i] = letters[rng.IntN(len(letters))]
	}
	return fmt.Sprintf(`{"type":"x-test/fill","seq":%d,"time":%d,"data":{"text":%q},"ignorable":true}`, seq, 1000+seq, b)
}

// dfReady GETs /readyz: status code and body.
func dfReady(t *testing.T, httpAddr string) (int, string) {
	t.Helper()
	hc := &http.Client{Timeout: 5 * time.Second}
	resp, err := hc.Get("http://" + httpAddr + "/readyz")
	if err != nil {
		t.Fatalf("GET /readyz: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, strings.TrimSpace(string(b))
}

// dfMetric reads one sample of /metrics.
func dfMetric(t *testing.T, httpAddr, name string, labels ...string) float64 {
	t.Helper()
	v, ok := mtValue(mtScrape(t, httpAddr), name, labels...)
	if !ok {
		t.Fatalf("metric %s%v not exported", name, labels)
	}
	return v
}

// dfWaitSampled waits until the node's latest free-space sample equals the
// free space of mnt now, and returns it: a write sent next is judged by that
// sample or a later one, which (the disk only filling) is not higher.
func dfWaitSampled(t *testing.T, n *testNode, mnt string) int64 {
	t.Helper()
	var now int64
	clustertest.Eventually(t, 30*time.Second, func() error { // the node samples every second
		sampled := dfMetric(t, n.srv.httpAddr, "sessionstore_disk_free_bytes")
		if now = dfAvail(t, mnt); sampled != float64(now) {
			return fmt.Errorf("the node's free-space sample is %v, the filesystem has %d bytes free: no new sample", sampled, now)
		}
		return nil
	})
	return now
}

// dfCheckReads asserts that every read path returns exactly the acknowledged
// events of id.
func dfCheckReads(t *testing.T, n *testNode, id string, acked []string) {
	t.Helper()
	if v := ctInspect(t, n, id); !slices.Equal(v.GetEvents(), acked) {
		t.Errorf("Inspect(%q): %d events, want the %d acknowledged", id, len(v.GetEvents()), len(acked))
	}
	if r := ctReadFrom(t, n, id, 0); !slices.Equal(r.GetEvents(), acked) {
		t.Errorf("ReadFrom(%q, 0): %d events, want the %d acknowledged", id, len(r.GetEvents()), len(acked))
	}
	raw := strings.Split(strings.TrimSuffix(string(ctReadRaw(t, n, id).GetContent()), "\n"), "\n")
	if len(raw) < 1 || !slices.Equal(raw[1:], acked) {
		t.Errorf("ReadRaw(%q): %d lines after the header, want the %d acknowledged events", id, len(raw)-1, len(acked))
	}
	if ok, _ := ctListed(t, n, id); !ok {
		t.Errorf("List: session %q missing", id)
	}
}

func TestDiskFull_RefusesWritesKeepsReads(t *testing.T) {
	mnt := dfMountTmpfs(t, dfFSSize)
	dataDir := filepath.Join(mnt, "data")
	n := startTestNodeWith(t, dataDir, func(c *serveConfig) { c.Cluster.MinFreeBytes = dfMinFree })
	n.waitReady(true)
	addr := n.srv.httpAddr
	if code, body := dfReady(t, addr); code != 200 {
		t.Fatalf("/readyz before filling: %d %q", code, body)
	}
	if v := dfMetric(t, addr, "sessionstore_disk_low"); v != 0 {
		t.Fatalf("sessionstore_disk_low = %v before filling, want 0", v)
	}
	quota0, _ := mtValue(mtScrape(t, addr), "sessionstore_limit_refused_total", "limit", "quota")

	// An owned session (its KeepAlive must survive the disk filling up) and
	// the session the appends go to.
	const id, owned = "df-log", "df-owned"
	ctCreate(t, n, ctMeta(id, "/df"))
	ctCreate(t, n, ctMeta(owned, "/df"))
	rng := rand.New(rand.NewPCG(8, 8))
	ctAppend(t, n, owned, dfEvent(rng, 0, 10))
	_, lease, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: owned, Owner: "df-agent", TtlMs: 60_000})
	if err != nil {
		t.Fatalf("Prepare(%q): %v", owned, err)
	}

	filler := filepath.Join(mnt, "filler")
	avail := dfAvail(t, mnt)
	dfFill(t, filler, avail-dfMinFree-dfHeadroom)
	t.Logf("tmpfs %d MiB: %d bytes free before the filler, %d after (threshold %d)", dfFSSize>>20, avail, dfAvail(t, mnt), dfMinFree)

	// Append until refused: the refusal must come before the filesystem is
	// exhausted, as a definite RESOURCE_EXHAUSTED / QUOTA_EXCEEDED.
	//
	// The node judges a write by its latest statfs sample, which may be up to
	// diskRecheckAfter old, and the artifact writer lags the commits; under
	// load both let a fixed free-space bound race. So the verdicts are checked
	// against what the node itself measured, relying only on free space
	// shrinking while the disk fills (nothing here deletes): after every batch
	// the artifacts catch up; while the free space then is clearly above the
	// threshold, the node must accept (any sample it may use is at least that
	// high); near the threshold the test first waits until the node's sample
	// (sessionstore_disk_free_bytes) equals the free space now, so the sample
	// a write is judged by is that one or a later, lower one.
	const dfNear = 256 << 10 // above threshold+dfNear, writes must be accepted
	var acked []string
	var refusal error
	free := dfAvail(t, mnt)
	for batch := 0; batch < 400 && refusal == nil; batch++ {
		sampled := int64(-1) // the node's sample the write is judged by at most
		if free < dfMinFree+dfNear {
			sampled = dfWaitSampled(t, n, mnt)
		}
		events := make([]string, 8)
		for i := range events {
			events[i] = dfEvent(rng, int64(len(acked)+i), 4<<10)
		}
		_, err := ctRaw(n).Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: events})
		if err != nil {
			refusal = err
			if sampled < 0 {
				t.Fatalf("append refused with %d bytes free (artifacts caught up), above the threshold %d + %d: %v", free, dfMinFree, dfNear, err)
			}
			if now := dfAvail(t, mnt); now >= dfMinFree {
				t.Errorf("append refused while %d bytes are free, not below the threshold %d", now, dfMinFree)
			}
			break
		}
		if sampled >= 0 && sampled < dfMinFree {
			t.Errorf("append accepted although the node had sampled %d bytes free, below the threshold %d", sampled, dfMinFree)
		}
		acked = append(acked, events...)
		n.WaitArtifacts()
		free = dfAvail(t, mnt)
	}
	if refusal == nil {
		t.Fatalf("%d events (%d bytes free) appended and never refused", len(acked), dfAvail(t, mnt))
	}
	code, se := ctStatus(refusal)
	if code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("refusal after %d events: %v, want RESOURCE_EXHAUSTED / QUOTA_EXCEEDED", len(acked), refusal)
	}
	for _, want := range []string{"disk nearly full", " free on " + dataDir, "below --min-free-bytes 16.0 MiB", "not applied"} {
		if !strings.Contains(se.Message, want) {
			t.Errorf("refusal message %q does not contain %q", se.Message, want)
		}
	}
	free = dfAvail(t, mnt)
	t.Logf("refused after %d events (%d bytes free): %s", len(acked), free, se.Message)
	if free < dfMinFree/2 {
		t.Errorf("only %d bytes free when writes were refused: the threshold %d was overshot by more than half", free, dfMinFree)
	}

	// Every other growing write is refused too; KeepAlive is allowed.
	_, err = n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta("df-new", "/df")})
	ctWantErrContains(t, "Create while the disk is nearly full", err, sessionstore.ReasonQuotaExceeded, "disk nearly full")
	_, _, err = n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "df-other", TtlMs: 60_000})
	ctWantErrContains(t, "Prepare while the disk is nearly full", err, sessionstore.ReasonQuotaExceeded, "disk nearly full")
	if _, err := n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: lease}); err != nil {
		t.Errorf("KeepAlive while the disk is nearly full: %v (owners must keep their sessions)", err)
	}

	// Reads keep working and return everything acknowledged.
	n.WaitArtifacts()
	dfCheckReads(t, n, id, acked)

	// /readyz and the metrics say why.
	rc, body := dfReady(t, addr)
	if rc != http.StatusServiceUnavailable || !strings.HasPrefix(body, "not ready: disk: ") ||
		!strings.Contains(body, " free on "+dataDir+", below --min-free-bytes 16.0 MiB; writes are refused") {
		t.Errorf("/readyz while the disk is nearly full: %d %q, want 503 with the disk reason", rc, body)
	}
	t.Logf("/readyz: %d %s", rc, body)
	if v := dfMetric(t, addr, "sessionstore_disk_low"); v != 1 {
		t.Errorf("sessionstore_disk_low = %v while writes are refused, want 1", v)
	}
	if v := dfMetric(t, addr, "sessionstore_disk_free_bytes"); v <= 0 || v >= dfMinFree {
		t.Errorf("sessionstore_disk_free_bytes = %v, want in (0, %d)", v, dfMinFree)
	}
	if v, _ := mtValue(mtScrape(t, addr), "sessionstore_limit_refused_total", "limit", "quota"); v < quota0+3 {
		t.Errorf("sessionstore_limit_refused_total{limit=quota} = %v, want >= %v (three refusals)", v, quota0+3)
	}

	// Free space: writes are accepted again, /readyz 200, the metric 0.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	clustertest.Eventually(t, 10*time.Second, func() error {
		if rc, body = dfReady(t, addr); rc != 200 {
			return fmt.Errorf("/readyz after freeing space: %d %q, want 200", rc, body)
		}
		return nil
	})
	if v := dfMetric(t, addr, "sessionstore_disk_low"); v != 0 {
		t.Errorf("sessionstore_disk_low = %v after freeing space, want 0", v)
	}
	more := []string{dfEvent(rng, int64(len(acked)), 100), dfEvent(rng, int64(len(acked)+1), 100)}
	ctAppend(t, n, id, more...)
	acked = append(acked, more...)
	ctCreate(t, n, ctMeta("df-new", "/df"))
	n.WaitArtifacts()
	dfCheckReads(t, n, id, acked)
}

// TestDiskFull_RealFillWithoutThreshold shows what the threshold prevents and
// that even then nothing acknowledged is lost: with --min-free-bytes 0 the
// node process (the real binary, so a panic cannot take the test down) writes
// until the filesystem is exhausted. Observed: the Raft WAL write fails
// first, so the leader steps down ("failed to commit logs"), wins the next
// election, fails to write its no-op, and so on; appends get NO_LEADER or
// OUTCOME_UNKNOWN and the artifact writer retries. (Had bbolt failed first,
// the FSM would have panicked, by design.) Once space is freed, the node
// serves again (restarted if it exited) with every acknowledged event.
func TestDiskFull_RealFillWithoutThreshold(t *testing.T) {
	mnt := dfMountTmpfs(t, dfFSSize)
	dataDir := filepath.Join(mnt, "data")
	nd, c := crStartNode(t, crBinary(t), dataDir, "--min-free-bytes", "0")
	const id = "df-real"
	if _, err := c.Create(crCtx(t, 10*time.Second), &sessionpb.CreateRequest{Header: ctMeta(id, "/df")}); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(mnt, "filler")
	dfFill(t, filler, dfAvail(t, mnt)-dfHeadroom)
	rng := rand.New(rand.NewPCG(9, 9))
	var acked []string
	failed := 0
	for batch := 0; batch < 400 && !nd.Exited() && failed < 4; batch++ {
		events := make([]string, 8)
		for i := range events {
			events[i] = dfEvent(rng, int64(len(acked)+i), 4<<10)
		}
		if _, err := c.Append(crCtx(t, 5*time.Second), &sessionpb.AppendRequest{SessionId: id, Events: events}); err != nil {
			failed++
			t.Logf("batch %d: %v (%d bytes free)", batch, err, dfAvail(t, mnt))
			time.Sleep(200 * time.Millisecond)
			continue
		}
		acked = append(acked, events...)
	}
	if failed == 0 {
		t.Fatalf("%d events appended, the filesystem never filled (%d bytes free)", len(acked), dfAvail(t, mnt))
	}
	time.Sleep(time.Second)
	log := nd.Log()
	t.Logf("%d events acknowledged; node exited: %v; WAL write failed: %v; FSM panicked: %v; artifact writes failed: %v",
		len(acked), nd.Exited(), strings.Contains(log, "failed to commit logs"),
		strings.Contains(log, "panic: fsm"), strings.Contains(log, "artifact write failed"))

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	if nd.Exited() {
		nd.Kill() // reap the exited run
		nd.Start()
	}
	nd.WaitReady(c)
	r, err := c.ReadFrom(crCtx(t, 30*time.Second), &sessionpb.ReadFromRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadFrom after freeing space: %v", err)
	}
	got := r.GetEvents()
	if len(got) < len(acked) || !slices.Equal(got[:len(acked)], acked) {
		t.Fatalf("after freeing space: %d events stored, want the %d acknowledged as a prefix", len(got), len(acked))
	}
	if extra := len(got) - len(acked); extra > 8*failed {
		t.Errorf("%d events stored beyond the acknowledged, more than the %d failed batches could hold", extra, failed)
	}
}

// A voter whose disk is low (as it gossips) stops writes for the whole
// cluster: the leader refuses them, since that voter must append them too.
// Reads go on; once the voter has space again, writes are accepted.
func TestDiskFullCluster_LowVoterStopsWrites(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	nodes := startCluster(t, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	// n3 restarts demanding more free space than any disk has: it is low
	// (and never ready) until it restarts without the threshold.
	n3 := nodes[2]
	normal := n3.tune
	n3.tune = func(c *serveConfig) { normal(c); c.Cluster.MinFreeBytes = 1 << 50 }
	n3.testNode = n3.Restart()
	var via *clNode
	for _, nd := range nodes {
		if nd.id != "n3" {
			via = nd
			break
		}
	}
	c := via.Client.WithOptions(client.Options{MaxAttempts: 1})
	var err error
	dlEventually(t, "the leader refuses writes while n3 is low", func() bool {
		_, err = c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("dl-x", "/w")})
		return auReason(err) == sessionstore.ReasonQuotaExceeded
	})
	if !strings.Contains(err.Error(), "disk nearly full on voter n3") {
		t.Fatalf("refusal: %v", err)
	}
	if _, err := via.Client.List(ctx, &sessionpb.ListRequest{}); err != nil {
		t.Fatalf("reads while a voter is low: %v", err)
	}
	n3.tune = normal
	n3.testNode = n3.Restart()
	dlEventually(t, "writes accepted once n3 has space", func() bool {
		_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("dl-y", "/w")})
		return err == nil
	})
}
