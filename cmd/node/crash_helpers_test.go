package main

// Helpers of crash_test.go: the crash tests run the real binary (built once
// per test run), kill it with SIGKILL, tamper with its data directory and
// restart it. Every name starts with "cr" (other test files of this package
// use other prefixes).

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/bbolt"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

const (
	// crReadyTimeout bounds a node's start-up (process start to /readyz 200
	// and a served linearizable read).
	crReadyTimeout = 30 * time.Second
	// crResolveTimeout bounds the re-sending of one batch whose outcome was
	// unknown.
	crResolveTimeout = 45 * time.Second
	// crTime0 is the time of seq 0 of every test session.
	crTime0 = int64(1755600000000)
	// crBinPrefix names the temp directories holding the built binary.
	crBinPrefix = "sessionstore-crnode-"
)

// crSeed returns the seed of a test's randomness: $SESSIONSTORE_CRASH_SEED if
// set (to replay a failure), else the clock. It is logged either way.
func crSeed(t *testing.T) uint64 {
	t.Helper()
	if s := os.Getenv("SESSIONSTORE_CRASH_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			t.Fatalf("SESSIONSTORE_CRASH_SEED=%q: %v", s, err)
		}
		t.Logf("seed %d (from SESSIONSTORE_CRASH_SEED)", v)
		return v
	}
	v := uint64(time.Now().UnixNano())
	t.Logf("seed %d (replay with SESSIONSTORE_CRASH_SEED=%d)", v, v)
	return v
}

// crCrashBinary skips the test under -short, else returns crBinary(t).
func crCrashBinary(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("crash test: builds, runs and kills the real binary")
	}
	return crBinary(t)
}

var crBuild struct {
	once sync.Once
	path string
	err  error
	dur  time.Duration
}

// crBinary builds ./ (the node command; tests run in its package directory)
// once per test run, without -race, into a temp directory, and returns the
// binary's path. The directory outlives the run (the package has no TestMain to
// remove it), so directories of earlier runs older than an hour are removed.
func crBinary(t *testing.T) string {
	t.Helper()
	crBuild.once.Do(func() {
		start := time.Now()
		if old, _ := filepath.Glob(filepath.Join(os.TempDir(), crBinPrefix+"*")); len(old) > 0 {
			for _, d := range old {
				if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
					_ = os.RemoveAll(d)
				}
			}
		}
		dir, err := os.MkdirTemp("", crBinPrefix+"*")
		if err != nil {
			crBuild.err = err
			return
		}
		bin := filepath.Join(dir, "sessionstore")
		cmd := exec.Command("go", "build", "-o", bin, ".")
		out, err := cmd.CombinedOutput()
		if err != nil {
			crBuild.err = fmt.Errorf("go build -o %s .: %v\n%s", bin, err, out)
			return
		}
		crBuild.path, crBuild.dur = bin, time.Since(start)
	})
	if crBuild.err != nil {
		t.Fatalf("build the node binary: %v", crBuild.err)
	}
	t.Logf("node binary %s (built in %v)", crBuild.path, crBuild.dur.Round(time.Millisecond))
	return crBuild.path
}

// crBuffer is a goroutine-safe byte buffer (a process's stderr).
type crBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (b *crBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.Write(p)
}

func (b *crBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.b.String()
}

// crFreeAddr picks a free loopback port for a node process (see clFreeAddr).
func crFreeAddr(t *testing.T) string { return clFreeAddr(t) }

// crRun is one run of the node process.
type crRun struct {
	n      int
	args   []string
	cmd    *exec.Cmd
	log    *crBuffer
	exited chan struct{}
	err    error // Wait's result, valid once exited is closed
}

// crNode is the real binary on one data directory. Its ports are picked once
// and reused by every run, so one client connection follows the restarts.
type crNode struct {
	t          *testing.T
	bin        string
	ID         string // --node-id
	Dir        string
	GRPCAddr   string
	HTTPAddr   string
	RaftAddr   string
	GossipAddr string
	Cluster    []string // a cluster member's flags (--join …), before Extra
	Extra      []string // flags added to every run

	runs []*crRun
	cur  *crRun // the running process, nil when stopped
}

// crNewNode prepares (does not start) a node on dir. At the end of the test
// a running process is killed, and on failure the logs of its runs are
// printed.
func crNewNode(t *testing.T, bin, dir string, extra ...string) *crNode {
	t.Helper()
	// clFreeAddr never hands out a port twice, so the four are distinct and
	// free for TCP and UDP (gossip uses both on one port).
	n := &crNode{t: t, bin: bin, ID: "crash-node", Dir: dir, GRPCAddr: crFreeAddr(t), HTTPAddr: crFreeAddr(t), RaftAddr: crFreeAddr(t), GossipAddr: crFreeAddr(t), Extra: extra}
	t.Cleanup(func() {
		if n.cur != nil {
			_ = n.cur.cmd.Process.Kill()
			<-n.cur.exited
			n.cur = nil
		}
		if t.Failed() {
			n.dumpLogs()
		}
	})
	return n
}

// dumpLogs prints the runs' stderr: the last three in full (up to 96 KiB
// each), the earlier ones' last 4 KiB.
func (n *crNode) dumpLogs() {
	for i, r := range n.runs {
		s := r.log.String()
		limit := 4 << 10
		if i >= len(n.runs)-3 {
			limit = 96 << 10
		}
		if len(s) > limit {
			s = "…(cut)…\n" + s[len(s)-limit:]
		}
		n.t.Logf("==== node run %d: %s\n%s==== end of run %d (exit: %v)", r.n, strings.Join(r.args, " "), s, r.n, r.err)
	}
}

// crStartNode starts a node on dir and connects a client, both ready.
func crStartNode(t *testing.T, bin, dir string, extra ...string) (*crNode, *client.Client) {
	t.Helper()
	n := crNewNode(t, bin, dir, extra...)
	n.Start()
	c := crDial(t, n.GRPCAddr)
	n.WaitReady(c)
	return n, c
}

// Start runs the binary (it must not be running) with the node's id,
// addresses, data directory, cluster flags and Extra. The node gets SIGKILL
// when the test process dies (no clean-up runs then).
func (n *crNode) Start() {
	n.t.Helper()
	if n.cur != nil {
		n.t.Fatalf("node %s: run %d is still running", n.ID, n.cur.n)
	}
	args := []string{"serve", "--node-id", n.ID, "--data-dir", n.Dir, "--grpc-addr", n.GRPCAddr,
		"--http-addr", n.HTTPAddr, "--raft-addr", n.RaftAddr, "--gossip-addr", n.GossipAddr}
	args = append(append(args, n.Cluster...), n.Extra...)
	r := &crRun{n: len(n.runs) + 1, args: args, log: &crBuffer{}, exited: make(chan struct{})}
	r.cmd = exec.Command(n.bin, args...)
	r.cmd.Stdout, r.cmd.Stderr = r.log, r.log
	r.cmd.Env = crNodeEnv()
	r.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := r.cmd.Start(); err != nil {
		n.t.Fatalf("start node %s: %v", n.ID, err)
	}
	go func() { r.err = r.cmd.Wait(); close(r.exited) }()
	n.runs = append(n.runs, r)
	n.cur = r
}

// crNodeEnv is the environment of the node: this process's, without any
// SESSIONSTORE_* setting that would change the node's configuration.
func crNodeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "SESSIONSTORE_") {
			env = append(env, kv)
		}
	}
	// A run that hangs at shutdown is sent SIGQUIT: every goroutine's stack
	// then lands in its log.
	return append(env, "GOTRACEBACK=all")
}

// Log is the current (or last) run's stderr.
func (n *crNode) Log() string {
	if len(n.runs) == 0 {
		return ""
	}
	return n.runs[len(n.runs)-1].log.String()
}

// Kill sends SIGKILL and waits for the process to be gone.
func (n *crNode) Kill() {
	n.t.Helper()
	if n.cur == nil {
		n.t.Fatalf("kill: node not running")
	}
	_ = n.cur.cmd.Process.Kill()
	<-n.cur.exited
	n.cur = nil
}

// Term sends SIGTERM and waits (20 s) for a clean exit with status 0.
func (n *crNode) Term() {
	n.t.Helper()
	if n.cur == nil {
		n.t.Fatalf("term: node not running")
	}
	r := n.cur
	_ = r.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-r.exited:
	case <-time.After(20 * time.Second):
		_ = r.cmd.Process.Signal(syscall.SIGQUIT) // stacks into the log
		select {
		case <-r.exited:
		case <-time.After(5 * time.Second):
			_ = r.cmd.Process.Kill()
			<-r.exited
		}
		n.cur = nil
		n.t.Fatalf("node run %d did not exit within 20 s of SIGTERM (goroutine stacks at the end of its log)", r.n)
	}
	n.cur = nil
	if r.err != nil {
		n.t.Errorf("node run %d exited with %v after SIGTERM, want status 0", r.n, r.err)
	}
}

// Exited reports whether the current run has ended by itself.
func (n *crNode) Exited() bool {
	if n.cur == nil {
		return true
	}
	select {
	case <-n.cur.exited:
		return true
	default:
		return false
	}
}

// WaitReady polls GET /readyz until 200, then waits until a linearizable read
// is served (the client retries NO_LEADER), all within crReadyTimeout.
func (n *crNode) WaitReady(c *client.Client) time.Duration {
	n.t.Helper()
	start := time.Now()
	hc := &http.Client{Timeout: time.Second}
	clustertest.Eventually(n.t, crReadyTimeout, func() error {
		if n.Exited() {
			r := n.runs[len(n.runs)-1]
			n.cur = nil
			n.t.Fatalf("node run %d exited during start-up: %v", r.n, r.err)
		}
		resp, err := hc.Get("http://" + n.HTTPAddr + "/readyz")
		if err != nil {
			return fmt.Errorf("node run %d not ready: last /readyz: %v", n.cur.n, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			return fmt.Errorf("node run %d not ready: last /readyz: %d %s", n.cur.n, resp.StatusCode, strings.TrimSpace(string(b)))
		}
		return nil
	})
	if c != nil {
		// Within what is left of crReadyTimeout.
		clustertest.Eventually(n.t, time.Until(start.Add(crReadyTimeout)), func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if _, err := c.List(ctx, &sessionpb.ListRequest{PageSize: 1}); err != nil {
				return fmt.Errorf("node run %d: /readyz is 200 but a linearizable List still fails within the %v start-up limit: %v", n.cur.n, crReadyTimeout, err)
			}
			return nil
		})
	}
	return time.Since(start)
}

// crQuickReconnect makes a connection reconnect quickly after the node
// restarts (gRPC's default reconnect backoff grows to two minutes).
var crQuickReconnect = grpc.WithConnectParams(grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 20 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 200 * time.Millisecond},
	MinConnectTimeout: 2 * time.Second,
})

// crDial connects a client to addr that reconnects quickly after the node
// restarts.
func crDial(t *testing.T, addr string, extra ...grpc.DialOption) *client.Client {
	t.Helper()
	c, err := client.Dial(context.Background(), addr, append([]grpc.DialOption{crQuickReconnect}, extra...)...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// crCtx is a context with a timeout, cancelled at the end of the test.
func crCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// crUnknown reports whether an Append error leaves the outcome unknown to the
// client (docs/design.md "Retries and outcomes"): OUTCOME_UNKNOWN, and everything
// without an ErrorInfo (transport errors, UNAVAILABLE, DEADLINE_EXCEEDED,
// CANCELLED). NO_LEADER and SHUTTING_DOWN are definite refusals of the last
// attempt, but an earlier attempt of the client's own retries may have been
// applied, so they are treated as unknown too. Every other reason is definite.
func crUnknown(err error) bool {
	var se *sessionstore.Error
	if errors.As(err, &se) {
		switch se.Reason {
		case sessionstore.ReasonOutcomeUnknown, sessionstore.ReasonNoLeader, sessionstore.ReasonShuttingDown:
			return true
		}
		return false
	}
	return true
}

// crErrKind is a short classification of an error for the statistics.
func crErrKind(err error) string {
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return string(se.Reason)
	}
	if st, ok := status.FromError(err); ok {
		return st.Code().String()
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return "ctx-deadline"
	}
	return "other"
}

// crEvent is one marker event: ignorable (never opens a turn, returned
// verbatim by every read), unique per session, seq and batch start.
func crEvent(w int, seq, batch int64) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"w":%d,"n":%d,"b":%d,"txt":"é<&> \"q\" \\ crash"},"ignorable":true}`,
		seq, crTime0+seq, w, seq, batch)
}

// crSession is one session and its writer's record: the acknowledged events
// in order and the batch in flight (sent, outcome not yet known).
type crSession struct {
	ID  string
	Cwd string
	W   int

	mu      sync.Mutex
	acked   []string
	pending []string
	stats   crStats
}

// crStats counts what happened to a session's appends.
type crStats struct {
	Batches       int            // acknowledged batches
	Unknown       int            // batches whose first answer was an unknown outcome
	Resends       int            // re-sends of such batches
	ResolvedDup   int            // unknown batches a re-send confirmed as stored (duplicate = true)
	ResolvedFresh int            // unknown batches a re-send stored (they had not been applied)
	FirstDup      int            // batches whose first Append call answered duplicate (client-internal retry)
	Errs          map[string]int // unknown-outcome errors by kind
}

func (a *crStats) add(b crStats) {
	a.Batches += b.Batches
	a.Unknown += b.Unknown
	a.Resends += b.Resends
	a.ResolvedDup += b.ResolvedDup
	a.ResolvedFresh += b.ResolvedFresh
	a.FirstDup += b.FirstDup
	if a.Errs == nil {
		a.Errs = map[string]int{}
	}
	for k, v := range b.Errs {
		a.Errs[k] += v
	}
}

// crMakeSessions returns n sessions "<prefix>-<i>"; the one at index n/2 has a
// space and a "/" in its id.
func crMakeSessions(prefix string, n int, cwd string) []*crSession {
	out := make([]*crSession, n)
	for i := range out {
		id := fmt.Sprintf("%s-%d", prefix, i)
		if i == n/2 {
			id = fmt.Sprintf("%s %d/with space+slash", prefix, i)
		}
		out[i] = &crSession{ID: id, Cwd: cwd, W: i}
	}
	return out
}

// crCreateAll registers every session.
func crCreateAll(t *testing.T, c *client.Client, ss []*crSession) {
	t.Helper()
	for _, s := range ss {
		cwd := s.Cwd
		h := &sessionpb.SessionHeader{Version: 0, Id: s.ID, CreatedAt: crTime0 - 1, Cwd: &cwd}
		if _, err := c.Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: h}); err != nil {
			t.Fatalf("create %q: %v", s.ID, err)
		}
	}
}

// Acked returns a copy of the acknowledged events.
func (s *crSession) Acked() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.acked)
}

// planned returns the acknowledged events followed by the batch in flight.
func (s *crSession) planned() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append(slices.Clone(s.acked), s.pending...)
}

// Stats returns a copy of the session's counters.
func (s *crSession) Stats() crStats {
	s.mu.Lock()
	defer s.mu.Unlock()
	var st crStats
	st.add(s.stats)
	return st
}

// AppendBatch appends k new events through c (see appendVia).
func (s *crSession) AppendBatch(c *client.Client, k int) error {
	return s.appendVia(k, crResolveTimeout, func(int) (*client.Client, string) { return c, "" }, nil)
}

// appendVia appends k new events and does not return before their outcome
// is known: after an unknown outcome it re-sends the identical request until
// it gets an answer, which must be ok or duplicate = true (both mean stored)
// with next_seq just past the batch. via names the client of each send and
// its node ("" for a lone node); after is told every send's node, time and
// error (nil: stored). It returns an error for a definite failure or when
// the outcome stays unknown for resolve.
func (s *crSession) appendVia(k int, resolve time.Duration, via func(send int) (*client.Client, string), after func(node string, sent time.Time, sends int, dup bool, err error)) error {
	s.mu.Lock()
	if s.pending != nil {
		s.mu.Unlock()
		return fmt.Errorf("session %q: a batch is still in flight", s.ID)
	}
	next := int64(len(s.acked))
	evs := make([]string, k)
	for i := range evs {
		evs[i] = crEvent(s.W, next+int64(i), next)
	}
	s.pending = evs
	s.mu.Unlock()

	req := &sessionpb.AppendRequest{SessionId: s.ID, Events: evs}
	deadline := time.Now().Add(resolve)
	sends := 0
	var errs []string
	for {
		c, node := via(sends)
		through := ""
		if node != "" {
			through = " through " + node
		}
		sent := time.Now()
		// 3 s for one call, the client's own retries included.
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := c.Append(ctx, req)
		cancel()
		sends++
		if after != nil {
			after(node, sent, sends, resp.GetDuplicate(), err)
		}
		if err == nil {
			if got, want := resp.GetNextSeq(), next+int64(k); got != want {
				return fmt.Errorf("session %q: append seqs %d..%d%s (send %d, duplicate=%v): next_seq %d, want %d",
					s.ID, next, next+int64(k)-1, through, sends, resp.GetDuplicate(), got, want)
			}
			s.recordAck(evs, sends, resp.GetDuplicate())
			return nil
		}
		if !crUnknown(err) {
			return fmt.Errorf("session %q: append seqs %d..%d%s, send %d (earlier unknown outcomes: %v): definite failure %s: %w",
				s.ID, next, next+int64(k)-1, through, sends, errs, crErrKind(err), err)
		}
		s.mu.Lock()
		if sends == 1 {
			s.stats.Unknown++
		} else {
			s.stats.Resends++
		}
		if s.stats.Errs == nil {
			s.stats.Errs = map[string]int{}
		}
		s.stats.Errs[crErrKind(err)]++
		s.mu.Unlock()
		if len(errs) < 8 {
			errs = append(errs, strings.TrimPrefix(node+":", ":")+crErrKind(err))
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("session %q: append seqs %d..%d: outcome still unknown after %d sends in %v (%v): %w",
				s.ID, next, next+int64(k)-1, sends, resolve, errs, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// crWriteLoad appends at least perSession more events to every session, one
// writer per session, in batches of 1–5 events.
func crWriteLoad(t *testing.T, c *client.Client, ss []*crSession, perSession int, seed uint64) {
	t.Helper()
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(s.W)+1))
			for done := 0; done < perSession; {
				k := 1 + rng.IntN(5)
				if err := s.AppendBatch(c, k); err != nil {
					t.Errorf("write load: %v", err)
					return
				}
				done += k
			}
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

// crRunWriters starts one writer per session, each with its own randomness
// (seed, session), calling appendBatch until the returned stop is called;
// stop waits for them. A writer stops at its first error.
func crRunWriters(t *testing.T, ss []*crSession, seed uint64, appendBatch func(s *crSession, rng *rand.Rand) error) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	for _, s := range ss {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, uint64(s.W)+1))
			for {
				select {
				case <-done:
					return
				default:
				}
				if err := appendBatch(s, rng); err != nil {
					t.Errorf("writer %d: %v", s.W, err)
					return
				}
			}
		}()
	}
	return sync.OnceFunc(func() { close(done); wg.Wait() })
}

// crAsideCheck notes the data directory's state.db.damaged-* files; the
// check it returns, run after a start on a damaged state database, wants
// exactly one new such file, holding the damaged bytes, and returns the new ones.
func crAsideCheck(t *testing.T, dir string) func(what string, damaged []byte) []string {
	before := map[string]bool{}
	for _, f := range crStateFiles(dir) {
		before[f] = true
	}
	return func(what string, damaged []byte) []string {
		t.Helper()
		var aside []string
		for _, f := range crStateFiles(dir) {
			if strings.HasPrefix(f, "state.db.damaged-") && !before[f] {
				aside = append(aside, f)
			}
		}
		if len(aside) != 1 {
			t.Errorf("%s: want one new state.db.damaged-* file, have %v (all: %v)", what, aside, crStateFiles(dir))
		} else if b, err := os.ReadFile(filepath.Join(dir, aside[0])); err != nil || !bytes.Equal(b, damaged) {
			t.Errorf("%s: %s does not hold the damaged file's bytes (err %v)", what, aside[0], err)
		}
		return aside
	}
}

// crCheckStored reads every session from seq 0 (linearizable) and checks it
// against the writer's record. exact (no writer active): the stored log equals
// the acknowledged events, and so does the total. Otherwise (writers active): every event
// acknowledged before the read is stored, in order, and the stored log is a
// prefix of the acknowledged events followed by the batch in flight, so there
// is no gap, duplicate or foreign event. It returns the total number of
// stored events.
func crCheckStored(t *testing.T, c *client.Client, ss []*crSession, exact bool, what string) int {
	t.Helper()
	total := 0
	for _, s := range ss {
		before := s.Acked()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rf, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: s.ID})
		cancel()
		if err != nil {
			t.Errorf("%s: ReadFrom(%q, 0): %v (%d events acknowledged)", what, s.ID, err, len(before))
			continue
		}
		got := rf.GetEvents()
		total += len(got)
		if h := rf.GetHeader(); h.GetId() != s.ID || h.GetCwd() != s.Cwd {
			t.Errorf("%s: ReadFrom(%q) header id %q cwd %q, want %q %q", what, s.ID, h.GetId(), h.GetCwd(), s.ID, s.Cwd)
		}
		want := s.planned()
		if exact {
			if len(want) != len(before) {
				t.Errorf("%s: session %q has a batch in flight during an exact check", what, s.ID)
			}
			want = before
		}
		if i := crFirstDiff(got, want); i >= 0 && i < len(got) {
			t.Errorf("%s: session %q: stored event %d differs from the writer's record (stored %d events, acknowledged %d, planned %d)\n stored: %s\n record: %s",
				what, s.ID, i, len(got), len(before), len(want), got[i], crAt(want, i))
			continue
		}
		if len(got) < len(before) {
			t.Errorf("%s: session %q lost acknowledged events: %d stored, %d acknowledged; first missing: %s",
				what, s.ID, len(got), len(before), before[len(got)])
			continue
		}
		if exact && len(got) != len(want) {
			t.Errorf("%s: session %q: %d events stored, %d acknowledged", what, s.ID, len(got), len(want))
		}
	}
	if _, events := crSumStats(ss); exact && total != events {
		t.Errorf("%s: %d events stored, %d acknowledged", what, total, events)
	}
	return total
}

// crFirstDiff is the first index where a and b differ within the shorter
// length, or -1 (a prefix relation is not a difference).
func crFirstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	if len(a) > len(b) {
		return len(b)
	}
	return -1
}

func crAt(s []string, i int) string {
	if i < len(s) {
		return s[i]
	}
	return "(none: past the end)"
}

// crArtifactPath is where the node writes a session's artifact.
func crArtifactPath(t *testing.T, dataDir string, s *crSession) string {
	t.Helper()
	pk, err := sessionlog.ProjectKey(s.Cwd)
	if err != nil {
		t.Fatalf("ProjectKey(%q): %v", s.Cwd, err)
	}
	seg, err := sessionlog.EncodeSegment(s.ID)
	if err != nil {
		t.Fatalf("EncodeSegment(%q): %v", s.ID, err)
	}
	return filepath.Join(dataDir, "artifacts", pk, seg, storage.ArtifactName)
}

// crCheckArtifacts waits (30 s in all) until every session's artifact file
// decodes (every frame's checksum verified, no torn tail) to exactly ReadRaw's
// content, and checks that content is the header line followed by the
// acknowledged events, one per line.
func crCheckArtifacts(t *testing.T, c *client.Client, dataDir string, ss []*crSession) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for _, s := range ss {
		path := crArtifactPath(t, dataDir, s)
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		rr, err := c.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: s.ID})
		cancel()
		if err != nil {
			t.Errorf("ReadRaw(%q): %v", s.ID, err)
			continue
		}
		raw := rr.GetContent()
		lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
		if !bytes.HasSuffix(raw, []byte("\n")) || len(lines) < 1 || !strings.Contains(lines[0], `"id":`+strconv.Quote(s.ID)) {
			t.Errorf("ReadRaw(%q): content does not start with the header line and end with a newline: %.300q", s.ID, raw)
			continue
		}
		if i := crFirstDiff(lines[1:], s.Acked()); i >= 0 || len(lines)-1 != len(s.Acked()) {
			t.Errorf("ReadRaw(%q): %d event lines, %d acknowledged; first difference at %d: %.300s", s.ID, len(lines)-1, len(s.Acked()), i, crAt(lines[1:], max(i, 0)))
			continue
		}
		clustertest.Eventually(t, time.Until(deadline), func() error {
			if d := crArtifactDiff(path, raw); d != "" {
				return fmt.Errorf("artifact of %q never matched ReadRaw: %s", s.ID, d)
			}
			return nil
		})
	}
}

// crArtifactDiff says how the artifact file at path differs from raw ("" if
// it decodes, every frame's checksum verified and no torn tail, to raw).
func crArtifactDiff(path string, raw []byte) string {
	data, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	d, err := storage.DecodeArtifact(data)
	switch {
	case err != nil:
		return fmt.Sprintf("decode %s: %v", path, err)
	case d.TornStart != -1:
		return fmt.Sprintf("%s has a torn final frame at byte %d", path, d.TornStart)
	case !bytes.Equal(d.Text, raw):
		return fmt.Sprintf("%s decodes to %d bytes in %d frames, ReadRaw has %d; first difference at byte %d",
			path, len(d.Text), len(d.Frames), len(raw), crFirstByteDiff(d.Text, raw))
	}
	return ""
}

func crFirstByteDiff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// crSnapMeta is the part of a Raft snapshot's meta.json the tests use.
type crSnapMeta struct {
	ID    string
	Index uint64
	Term  uint64
}

// crLatestSnapshot returns the newest complete snapshot under
// D/raft/snapshots (a directory with meta.json and state.bin, not *.tmp).
func crLatestSnapshot(dataDir string) (crSnapMeta, bool) {
	dirs, _ := filepath.Glob(filepath.Join(dataDir, "raft", "snapshots", "*"))
	var best crSnapMeta
	ok := false
	for _, d := range dirs {
		if strings.HasSuffix(d, ".tmp") {
			continue
		}
		b, err := os.ReadFile(filepath.Join(d, "meta.json"))
		if err != nil {
			continue
		}
		if _, err := os.Stat(filepath.Join(d, "state.bin")); err != nil {
			continue
		}
		var m crSnapMeta
		if json.Unmarshal(b, &m) != nil {
			continue
		}
		if !ok || m.Index > best.Index {
			best, ok = m, true
		}
	}
	return best, ok
}

// crWaitSnapshot waits (40 s) for a complete snapshot with index > after,
// calling poke (which should add Raft entries) between polls.
func crWaitSnapshot(t *testing.T, dataDir string, after uint64, poke func()) crSnapMeta {
	t.Helper()
	deadline := time.Now().Add(40 * time.Second)
	for {
		if m, ok := crLatestSnapshot(dataDir); ok && m.Index > after {
			return m
		}
		if time.Now().After(deadline) {
			m, _ := crLatestSnapshot(dataDir)
			t.Fatalf("no snapshot newer than index %d after 40 s (latest: %+v)", after, m)
		}
		if poke != nil {
			poke()
		} else {
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// crStateFiles lists the data directory's files named state.db*.
func crStateFiles(dataDir string) []string {
	m, _ := filepath.Glob(filepath.Join(dataDir, "state.db*"))
	for i := range m {
		m[i] = filepath.Base(m[i])
	}
	return m
}

// crCopyFile copies src to dst (dst is replaced).
func crCopyFile(t *testing.T, src, dst string) {
	t.Helper()
	b, err := os.ReadFile(src)
	if err != nil {
		t.Fatalf("copy %s: %v", src, err)
	}
	if err := os.WriteFile(dst, b, 0o600); err != nil {
		t.Fatalf("copy to %s: %v", dst, err)
	}
}

// crAppliedIndex is the applied Raft index recorded in a state database file
// (read from a scratch copy, so the file itself is not touched).
func crAppliedIndex(t *testing.T, path string) uint64 {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "probe.db")
	crCopyFile(t, path, tmp)
	db, err := storage.OpenState(tmp, storage.StateOptions{})
	if err != nil {
		t.Fatalf("open a copy of %s: %v", path, err)
	}
	defer db.Close()
	idx, _, err := db.AppliedIndex()
	if err != nil {
		t.Fatalf("applied index of %s: %v", path, err)
	}
	return idx
}

// crSumStats adds up the sessions' counters.
func crSumStats(ss []*crSession) (crStats, int) {
	var st crStats
	events := 0
	for _, s := range ss {
		st.add(s.Stats())
		events += len(s.Acked())
	}
	return st, events
}

// crProcMem is a memory field of /proc/<pid>/status ("VmHWM", "VmRSS",
// "RssAnon", …) in bytes.
func crProcMem(t *testing.T, pid int, field string) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatalf("read /proc/%d/status: %v", pid, err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) == 3 && f[0] == field+":" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil {
				t.Fatalf("/proc/%d/status: %q: %v", pid, line, err)
			}
			return kb << 10
		}
	}
	t.Fatalf("no %s in /proc/%d/status", field, pid)
	return 0
}

// crGrep returns the lines of log containing sub.
func crGrep(log, sub string) []string {
	var out []string
	for _, l := range strings.Split(log, "\n") {
		if strings.Contains(l, sub) {
			out = append(out, l)
		}
	}
	return out
}

// crWaitLog waits until the node's current run has logged a line holding sub.
func crWaitLog(t *testing.T, n *crNode, sub string, within time.Duration) {
	t.Helper()
	clustertest.Eventually(t, within, func() error {
		if len(crGrep(n.Log(), sub)) == 0 {
			return fmt.Errorf("no log line with %q", sub)
		}
		return nil
	})
}

// crMetric returns the value of a gauge from the node's /metrics ("?" if
// it cannot be read).
func crMetric(t *testing.T, n *crNode, name string) string {
	t.Helper()
	hc := &http.Client{Timeout: 2 * time.Second}
	resp, err := hc.Get("http://" + n.HTTPAddr + "/metrics")
	if err != nil {
		return "?"
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, name+" "); ok {
			return v
		}
	}
	return "?"
}

// StartAndKillWhenRestoring starts the node and SIGKILLs it as soon as a new
// state.db.restore-*.tmp file (the start-up restore's output) appears in the
// data directory, or after 5 s, or when the process ends by itself (an error
// of the test). It says what happened.
func (n *crNode) StartAndKillWhenRestoring() string {
	n.t.Helper()
	pattern := filepath.Join(n.Dir, "state.db.restore-*")
	old := map[string]bool{}
	m, _ := filepath.Glob(pattern)
	for _, f := range m {
		old[f] = true
	}
	n.Start()
	t0 := time.Now()
	seen := ""
watch:
	for time.Since(t0) < 5*time.Second && !n.Exited() {
		m, _ := filepath.Glob(pattern)
		for _, f := range m {
			if !old[f] {
				seen = filepath.Base(f)
				break watch
			}
		}
		time.Sleep(100 * time.Microsecond)
	}
	took := time.Since(t0)
	if n.Exited() {
		r := n.cur
		n.Kill()
		n.t.Errorf("node run %d exited by itself during start-up: %v", r.n, r.err)
		return "never: the process had exited"
	}
	n.Kill()
	if seen == "" {
		return fmt.Sprintf("after %v (no restore file seen)", took.Round(time.Millisecond))
	}
	return fmt.Sprintf("when %s appeared, %v after exec", seen, took.Round(time.Microsecond))
}

// recordAck records an acknowledged batch (sent sends times; dup: the last
// answer was duplicate=true) as stored, in order.
func (s *crSession) recordAck(evs []string, sends int, dup bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.acked = append(s.acked, evs...)
	s.pending = nil
	s.stats.Batches++
	switch {
	case sends == 1 && dup:
		s.stats.FirstDup++
	case sends > 1 && dup:
		s.stats.ResolvedDup++
	case sends > 1:
		s.stats.ResolvedFresh++
	}
}

// crStatePages lists the pages of a state database in use (not free) by
// type ("branch", "leaf", "meta"), read from a scratch copy.
func crStatePages(t *testing.T, path string) map[string][]int {
	t.Helper()
	tmp := filepath.Join(t.TempDir(), "pages.db")
	crCopyFile(t, path, tmp)
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatalf("open a copy of %s: %v", path, err)
	}
	defer db.Close()
	out := map[string][]int{}
	err = db.View(func(tx *bbolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			out[info.Type] = append(out[info.Type], id)
			id += info.OverflowCount
		}
	})
	if err != nil {
		t.Fatalf("pages of %s: %v", path, err)
	}
	return out
}

// crDamageFile applies damage to the bytes of the file at path, in place.
func crDamageFile(t *testing.T, path string, damage func(b []byte)) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	damage(b)
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// crWALLastRecord finds the final record of a stopped node's Raft log (the
// last segment of raft/wal, records of u32 length, u32 CRC, payload whose
// second byte starts the index uvarint): its segment, offset, length and index.
func crWALLastRecord(t *testing.T, dataDir string) (path string, off, n int64, index uint64) {
	t.Helper()
	segs, _ := filepath.Glob(filepath.Join(dataDir, "raft", "wal", "*.wal"))
	if len(segs) == 0 {
		t.Fatalf("no WAL segment in %s", dataDir)
	}
	path = segs[len(segs)-1]
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	off = -1
	for p := int64(0); p+8 <= int64(len(b)); {
		l := int64(binary.BigEndian.Uint32(b[p:]))
		if p+8+l > int64(len(b)) {
			t.Fatalf("%s: record at %d runs past the end", path, p)
		}
		off, n = p, 8+l
		p += 8 + l
	}
	if off < 0 {
		t.Fatalf("%s holds no record", path)
	}
	index, k := binary.Uvarint(b[off+9:])
	if k <= 0 {
		t.Fatalf("%s: the last record's index does not decode", path)
	}
	return path, off, n, index
}
