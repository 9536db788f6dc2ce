// Package deploy_test runs the repository's docker-compose.yml for real: three
// containers of the image built by scripts/docker-build.sh.
//
// The test needs Docker and docker-compose (or the compose plugin) and is
// skipped without them, except under CI=true, where it fails instead. It is
// also skipped with -short. A test killed by a timeout cannot tear down: run
// the `down -v` command it logs at the start.
package deploy_test

import (
	"archive/tar"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/internal/dockertest"
	"github.com/sessionstore/sessionstore/storage"
)

const testCwd = "/w/compose-test"

// compose runs docker-compose for one project with the test's port choice.
type compose struct {
	t       *testing.T
	cmd     []string
	project string
	file    string
	env     []string
}

func (c *compose) run(timeout time.Duration, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	argv := append(append(slices.Clone(c.cmd[1:]), "-p", c.project, "-f", c.file), args...)
	cmd := exec.CommandContext(ctx, c.cmd[0], argv...)
	cmd.Env = c.env
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w\n%s", strings.Join(c.cmd, " "), strings.Join(argv, " "), err, out)
	}
	return string(out), nil
}

func (c *compose) must(timeout time.Duration, args ...string) string {
	c.t.Helper()
	start := time.Now()
	out, err := c.run(timeout, args...)
	if err != nil {
		c.t.Fatal(err)
	}
	c.t.Logf("%s %s: %v", strings.Join(c.cmd, " "), strings.Join(args, " "), time.Since(start).Round(time.Millisecond))
	return out
}

// containerID is the id of service's container.
func (c *compose) containerID(service string) string {
	c.t.Helper()
	out, err := c.run(30*time.Second, "ps", "-q", service)
	if err != nil {
		c.t.Fatal(err)
	}
	id := strings.TrimSpace(out)
	if id == "" || strings.Contains(id, "\n") {
		c.t.Fatalf("container of %s: %q", service, id)
	}
	return id
}

// node is one service as the host sees it.
type node struct {
	name     string // service name = node id
	grpcPort int
	httpPort int
	c        *client.Client // default retries
	fast     *client.Client // the writers': give up quickly, try the next node
}

func (n *node) dial(t *testing.T) {
	t.Helper()
	if n.c != nil {
		n.c.Close()
	}
	c, err := client.Dial(context.Background(), fmt.Sprintf("127.0.0.1:%d", n.grpcPort))
	if err != nil {
		t.Fatal(err)
	}
	n.c = c
	n.fast = c.WithOptions(client.Options{MaxAttempts: 2, InitialBackoff: 50 * time.Millisecond, MaxBackoff: 200 * time.Millisecond})
}

func (n *node) httpGet(ctx context.Context, path string) (int, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d%s", n.httpPort, path), nil)
	if err != nil {
		return 0, nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

func markEvent(seq int64, marker string) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"m":%q},"ignorable":true}`, seq, 1755600000000+seq, marker)
}

// unknownOutcome reports whether a failed append may or may not have been
// applied (or was certainly not, but may be retried): anything but a definite
// error of the store.
func unknownOutcome(err error) bool {
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		return true // transport failure, deadline, cancellation
	}
	switch se.Reason {
	case sessionstore.ReasonNoLeader, sessionstore.ReasonShuttingDown, sessionstore.ReasonOutcomeUnknown:
		return true
	}
	return false
}

// TestCompose_ClusterSurvivesKillRestartDownUp builds the image, starts the
// compose cluster, writes through every node, SIGKILLs the leader's container
// under a write load, restarts it, and checks that every acknowledged event is
// on every node exactly once, with artifacts of the same text; then that
// `restart` and `down` + `up` (volumes kept) bring back the same three voters
// of the same cluster with all the data.
func TestCompose_ClusterSurvivesKillRestartDownUp(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs three containers")
	}
	composeCmd := dockertest.Compose(t)
	testStart := time.Now()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}

	// 1. The image.
	{
		start := time.Now()
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		out, err := exec.CommandContext(ctx, filepath.Join(root, "scripts", "docker-build.sh")).CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("scripts/docker-build.sh: %v\n%s", err, out)
		}
		t.Logf("scripts/docker-build.sh (%v):\n%s", time.Since(start).Round(time.Millisecond), bytes.TrimSpace(out))
	}

	// 2. The cluster, on free host ports so that it never meets a cluster the
	// developer runs with the default ports.
	nodes := make([]*node, 3)
	dc := &compose{t: t, cmd: composeCmd, project: fmt.Sprintf("sessionstore-test-%d", os.Getpid()),
		file: filepath.Join(root, "docker-compose.yml")}
	pickPorts := func() {
		ports := dockertest.FreePorts(t, 6)
		dc.env = os.Environ()
		for i := range nodes {
			nodes[i] = &node{name: fmt.Sprintf("node%d", i+1), grpcPort: ports[2*i], httpPort: ports[2*i+1]}
			dc.env = append(dc.env,
				fmt.Sprintf("SESSIONSTORE_NODE%d_GRPC_PORT=%d", i+1, nodes[i].grpcPort),
				fmt.Sprintf("SESSIONSTORE_NODE%d_HTTP_PORT=%d", i+1, nodes[i].httpPort))
		}
	}
	pickPorts()
	t.Logf("project %s; if this test is killed, clean up with: %s -p %s -f %s down -v",
		dc.project, strings.Join(composeCmd, " "), dc.project, dc.file)
	t.Cleanup(func() {
		if t.Failed() {
			out, _ := dc.run(time.Minute, "logs", "--no-color", "--tail=300")
			t.Logf("%s logs (last 300 lines per node):\n%s", strings.Join(composeCmd, " "), out)
		} else if out, err := dc.run(time.Minute, "logs", "--no-color"); err == nil {
			logErrorSummary(t, out)
		}
		for _, n := range nodes {
			if n.c != nil {
				n.c.Close()
			}
		}
		if out, err := dc.run(2*time.Minute, "down", "-v", "--remove-orphans"); err != nil {
			t.Errorf("tear down: %v\n%s", err, out)
		}
	})
	// The ports were free when picked; other suites starting servers at the
	// same time can take one before Docker binds it: then start again on
	// new ones.
	for attempt := 1; ; attempt++ {
		out, err := dc.run(3*time.Minute, "up", "-d")
		if err == nil {
			break
		}
		if attempt == 4 || !dockertest.PortTaken(out) {
			t.Fatal(err)
		}
		t.Logf("up lost a host port to another program, starting on new ones: %v", err)
		if out, err := dc.run(2*time.Minute, "down", "-v", "--remove-orphans"); err != nil {
			t.Fatalf("tear down: %v\n%s", err, out)
		}
		pickPorts()
	}
	for _, n := range nodes {
		n.dial(t)
	}
	upStart := time.Now()
	waitReady(t, nodes, 60*time.Second)
	waitVoters(t, nodes, 30*time.Second)
	t.Logf("cluster formed and ready %v after up", time.Since(upStart).Round(time.Millisecond))
	clusterID := status(t, nodes[0]).ClusterId
	// The image's binary is also the admin tool.
	if out := dc.must(time.Minute, "exec", "-T", "node2", "/sessionstore", "status", "--addr", "127.0.0.1:7400"); !strings.Contains(out, "cluster   "+clusterID) ||
		strings.Count(out, "Voter") != 3 {
		t.Fatalf("sessionstore status inside node2's container:\n%s", out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	run := fmt.Sprintf("%x", time.Now().UnixNano())
	want := map[string][]string{} // session → every acknowledged event, in seq order

	// 3. Writes through each node (followers forward to the leader).
	for i, n := range nodes {
		id := fmt.Sprintf("via-%s-%s", n.name, run)
		cwd := testCwd
		if _, err := n.c.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1755600000000, Cwd: &cwd}}); err != nil {
			t.Fatalf("create through %s: %v", n.name, err)
		}
		for k := range int64(3) {
			ev := markEvent(k, fmt.Sprintf("%s-%d-%d", id, i, k))
			if _, err := n.c.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{ev}}); err != nil {
				t.Fatalf("append through %s: %v", n.name, err)
			}
			want[id] = append(want[id], ev)
		}
	}

	// 4. A write load from three clients; SIGKILL the leader's container.
	writers := make([]*writer, 3)
	for i := range writers {
		id := fmt.Sprintf("load-%d-%s", i, run)
		cwd := testCwd
		if _, err := nodes[i].c.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1755600000000, Cwd: &cwd}}); err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		writers[i] = &writer{id: id, nodes: nodes, cur: i}
	}
	stop := make(chan struct{})
	loadCtx, loadCancel := context.WithTimeout(ctx, 2*time.Minute)
	defer loadCancel()
	var wg sync.WaitGroup
	for _, w := range writers {
		wg.Add(1)
		go func() { defer wg.Done(); w.run(loadCtx, stop) }()
	}
	stopLoad := func() {
		close(stop)
		wg.Wait()
		for _, w := range writers {
			if w.err != nil {
				t.Fatalf("writer %s: %v", w.id, w.err)
			}
			want[w.id] = w.acked
		}
	}
	time.Sleep(2 * time.Second)
	leader := leaderNode(t, nodes)
	leaderCtr := dc.containerID(leader.name)
	ackedBefore := totalAcked(writers)
	if out, err := exec.CommandContext(ctx, "docker", "kill", leaderCtr).CombinedOutput(); err != nil {
		t.Fatalf("docker kill %s: %v: %s", leader.name, err, out)
	}
	killAt := time.Now() // the process is gone once docker kill has returned
	t.Logf("killed the leader %s (container %.12s) with %d events acknowledged so far", leader.name, leaderCtr, ackedBefore)

	// Writes go on through the survivors.
	var firstAfter time.Time
	clustertest.Eventually(t, 45*time.Second, func() error {
		var ok bool
		if firstAfter, ok = firstAckStartedAfter(writers, killAt); !ok {
			return fmt.Errorf("no write succeeded after the leader %s was killed", leader.name)
		}
		return nil
	})
	t.Logf("first successful write after the kill: %v later", firstAfter.Sub(killAt).Round(time.Millisecond))
	time.Sleep(3 * time.Second)
	survivorAcks := totalAcked(writers)
	newLeader := leaderNode(t, nodes)
	t.Logf("new leader %s; %d events acknowledged since the kill", newLeader.name, survivorAcks-ackedBefore)
	if newLeader == leader {
		t.Fatalf("the killed node %s is still reported as leader", leader.name)
	}

	// The killed node comes back (under the load) and catches up.
	restartAt := time.Now()
	dc.must(time.Minute, "start", leader.name)
	leader.dial(t) // a fresh connection: gRPC's reconnect backoff has grown while it was down
	waitReady(t, nodes, 60*time.Second)
	waitVoters(t, nodes, 60*time.Second)
	t.Logf("%s back, all three ready voters %v after start", leader.name, time.Since(restartAt).Round(time.Millisecond))
	time.Sleep(time.Second)
	stopLoad()
	for _, w := range writers {
		t.Logf("writer %s: %d events in %d acknowledged appends, %d failed attempts re-sent, %d answered duplicate=true",
			w.id, len(w.acked), w.appends, w.resent, w.duplicates)
	}
	verify(t, dc, nodes, want, "after kill and start")
	if id := status(t, nodes[0]).ClusterId; id != clusterID {
		t.Fatalf("cluster id changed from %s to %s", clusterID, id)
	}

	// 5. Restart all three; then down (volumes kept) and up.
	for _, phase := range []struct {
		name string
		do   func()
	}{
		{"restart", func() { dc.must(2*time.Minute, "restart") }},
		{"down + up", func() { dc.must(2*time.Minute, "down"); dc.must(2*time.Minute, "up", "-d") }},
	} {
		if phase.name == "down + up" {
			// down removes the containers and their logs: summarise them first.
			if out, err := dc.run(time.Minute, "logs", "--no-color"); err == nil {
				logErrorSummary(t, out)
			}
		}
		start := time.Now()
		phase.do()
		for _, n := range nodes {
			n.dial(t)
		}
		waitReady(t, nodes, 60*time.Second)
		waitVoters(t, nodes, 60*time.Second)
		t.Logf("%s: all three ready voters %v after the command began", phase.name, time.Since(start).Round(time.Millisecond))
		if id := status(t, nodes[0]).ClusterId; id != clusterID {
			t.Fatalf("%s: cluster id changed from %s to %s (a new cluster was bootstrapped)", phase.name, clusterID, id)
		}
		// The old data is there, and the cluster takes writes through every node.
		verify(t, dc, nodes, want, "after "+phase.name)
		for i, n := range nodes {
			id := fmt.Sprintf("via-%s-%s", nodes[(i+1)%3].name, run)
			ev := markEvent(int64(len(want[id])), fmt.Sprintf("%s-%s-%s", id, phase.name, n.name))
			if _, err := n.c.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{ev}}); err != nil {
				t.Fatalf("%s: append through %s: %v", phase.name, n.name, err)
			}
			want[id] = append(want[id], ev)
		}
		verify(t, dc, nodes, want, "after "+phase.name+" and new writes")
	}
	t.Logf("whole test: %v", time.Since(testStart).Round(time.Millisecond))
}

// writer appends batches to its own session through one node, moving on to
// the next node after a failure. A batch whose outcome is unknown is re-sent
// with the same bytes until it is acknowledged (ok or duplicate=true); only
// then does the writer go on, so the stored log must equal acked exactly.
type writer struct {
	id    string
	nodes []*node
	cur   int

	mu         sync.Mutex
	acked      []string
	ackTimes   [][2]time.Time // per acknowledged append: call start, answer
	appends    int
	resent     int
	duplicates int
	err        error
}

func (w *writer) run(ctx context.Context, stop <-chan struct{}) {
	var pending []string
	next := int64(0)
	for n := 0; ; n++ {
		if pending == nil {
			select {
			case <-stop:
				return
			default:
			}
			k := int64(1 + n%3)
			for i := range k {
				pending = append(pending, markEvent(next+i, fmt.Sprintf("%s-%d", w.id, next+i)))
			}
		}
		nd := w.nodes[w.cur]
		start := time.Now()
		cctx, cancel := context.WithTimeout(ctx, 3*time.Second)
		resp, err := nd.fast.Append(cctx, &pb.AppendRequest{SessionId: w.id, Events: pending})
		cancel()
		if err == nil {
			w.mu.Lock()
			w.acked = append(w.acked, pending...)
			w.ackTimes = append(w.ackTimes, [2]time.Time{start, time.Now()})
			w.appends++
			if resp.Duplicate {
				w.duplicates++
			}
			w.mu.Unlock()
			next += int64(len(pending))
			pending = nil
			time.Sleep(5 * time.Millisecond)
			continue
		}
		if !unknownOutcome(err) {
			w.err = fmt.Errorf("append of seq %d through %s: definite error %w", next, nd.name, err)
			return
		}
		if ctx.Err() != nil {
			w.err = fmt.Errorf("append of seq %d still unacknowledged when the load ended: %w", next, err)
			return
		}
		w.mu.Lock()
		w.resent++
		w.mu.Unlock()
		w.cur = (w.cur + 1) % len(w.nodes)
		time.Sleep(100 * time.Millisecond)
	}
}

func totalAcked(ws []*writer) int {
	n := 0
	for _, w := range ws {
		w.mu.Lock()
		n += len(w.acked)
		w.mu.Unlock()
	}
	return n
}

// firstAckStartedAfter is the earliest answer to an append sent after t.
func firstAckStartedAfter(ws []*writer, t time.Time) (time.Time, bool) {
	var first time.Time
	for _, w := range ws {
		w.mu.Lock()
		for _, a := range w.ackTimes {
			if !a[0].Before(t) && (first.IsZero() || a[1].Before(first)) {
				first = a[1]
			}
		}
		w.mu.Unlock()
	}
	return first, !first.IsZero()
}

func waitReady(t *testing.T, nodes []*node, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, n := range nodes {
		clustertest.Eventually(t, time.Until(deadline), func() error { // what is left of limit
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			if code, body, err := n.httpGet(ctx, "/readyz"); err != nil || code != http.StatusOK {
				return fmt.Errorf("%s not ready within %v: %d %s %v", n.name, limit, code, bytes.TrimSpace(body), err)
			}
			return nil
		})
	}
}

// waitVoters waits until every node reports node1..node3 as alive voters.
func waitVoters(t *testing.T, nodes []*node, limit time.Duration) {
	t.Helper()
	deadline := time.Now().Add(limit)
	for _, n := range nodes {
		clustertest.Eventually(t, time.Until(deadline), func() error { // what is left of limit
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			ms, err := n.c.Members(ctx)
			var got []string
			for _, m := range ms {
				got = append(got, fmt.Sprintf("%s/%s/%s", m.NodeId, m.Suffrage, m.Health))
			}
			sort.Strings(got)
			if err != nil || !slices.Equal(got, []string{"node1/Voter/alive", "node2/Voter/alive", "node3/Voter/alive"}) {
				return fmt.Errorf("members via %s within %v: %v, %v; want node1..node3 alive voters", n.name, limit, got, err)
			}
			return nil
		})
	}
}

func status(t *testing.T, n *node) *pb.StatusResponse {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := n.c.Status(ctx)
	if err != nil {
		t.Fatalf("status of %s: %v", n.name, err)
	}
	return st
}

// leaderNode asks the nodes in turn until one names a leader.
func leaderNode(t *testing.T, nodes []*node) *node {
	t.Helper()
	var leader *node
	clustertest.Eventually(t, 30*time.Second, func() error {
		for _, n := range nodes {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			st, err := n.fast.Status(ctx)
			cancel()
			if err != nil || st.LeaderId == "" {
				continue
			}
			for _, l := range nodes {
				if l.name == st.LeaderId {
					leader = l
					return nil
				}
			}
			t.Fatalf("%s names an unknown leader %q", n.name, st.LeaderId)
		}
		return errors.New("no node names a leader")
	})
	return leader
}

// verify waits (30 s at most) until every node holds exactly want (stale local
// reads: in order, nothing missing, no duplicates) and the three nodes'
// artifact directories hold the same files, each decoding whole to want (the
// text: where a node cut its zstd frames is its own).
func verify(t *testing.T, dc *compose, nodes []*node, want map[string][]string, when string) {
	t.Helper()
	start := time.Now()
	deadline := start.Add(30 * time.Second)
	containers := map[string]string{}
	for _, n := range nodes {
		containers[n.name] = dc.containerID(n.name)
	}
	var problem string
	for {
		problem = checkEvents(nodes, want)
		if problem == "" {
			problem = checkArtifacts(t, containers, nodes, want)
		}
		if problem == "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: nodes did not converge within 30s: %s", when, problem)
		}
		time.Sleep(250 * time.Millisecond)
	}
	total := 0
	for _, evs := range want {
		total += len(evs)
	}
	t.Logf("%s: %d sessions, %d events identical on all three nodes, artifacts of the same text (converged in %v)",
		when, len(want), total, time.Since(start).Round(time.Millisecond))
	checkHTTPDownloads(t, nodes, want, when)
}

func checkEvents(nodes []*node, want map[string][]string) string {
	for _, n := range nodes {
		for id, evs := range want {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			r, err := n.c.ReadFrom(ctx, &pb.ReadFromRequest{SessionId: id, Consistency: pb.Consistency_STALE})
			cancel()
			if err != nil {
				return fmt.Sprintf("read %s on %s: %v", id, n.name, err)
			}
			seen := map[string]bool{}
			for _, e := range r.Events {
				if seen[e] {
					return fmt.Sprintf("%s on %s: duplicate event %s", id, n.name, e)
				}
				seen[e] = true
			}
			if !slices.Equal(r.Events, evs) {
				return fmt.Sprintf("%s on %s: %d events, want %d (first difference at %d)", id, n.name, len(r.Events), len(evs), firstDiff(r.Events, evs))
			}
		}
	}
	return ""
}

func firstDiff(a, b []string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// artifacts copies /data/artifacts out of a node's container (docker cp works
// on running and stopped containers alike): relative path → bytes.
func artifacts(container string, n *node) (map[string][]byte, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "cp", container+":/data/artifacts", "-").Output()
	if err != nil {
		return nil, fmt.Errorf("docker cp from %s: %w", n.name, err)
	}
	files := map[string][]byte{}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, nil
		}
		if err != nil {
			return nil, fmt.Errorf("tar from %s: %w", n.name, err)
		}
		if h.Typeflag != tar.TypeReg {
			continue
		}
		b, err := io.ReadAll(tr)
		if err != nil {
			return nil, err
		}
		files[h.Name] = b
	}
}

func checkArtifacts(t *testing.T, containers map[string]string, nodes []*node, want map[string][]string) string {
	t.Helper()
	var ref map[string][]byte
	for _, n := range nodes {
		files, err := artifacts(containers[n.name], n)
		if err != nil {
			return err.Error()
		}
		for p, b := range files {
			text, err := storage.ArtifactText(b)
			if err != nil {
				return fmt.Sprintf("artifact %s on %s: %v", p, n.name, err) // perhaps being written
			}
			files[p] = text
		}
		if ref == nil {
			ref = files
			continue
		}
		if len(files) != len(ref) {
			return fmt.Sprintf("%s has %d artifact files, %s %d", n.name, len(files), nodes[0].name, len(ref))
		}
		for p, b := range ref {
			if !bytes.Equal(files[p], b) {
				return fmt.Sprintf("the text of artifact %s differs between %s (%d bytes) and %s (%d bytes)", p, nodes[0].name, len(b), n.name, len(files[p]))
			}
		}
	}
	// The artifacts are the sessions' logs: a header line, then the events.
	for id, evs := range want {
		var found []byte
		for p, b := range ref {
			if strings.HasSuffix(p, "/"+id+"/session.jsonl.zstd") {
				found = b
			}
		}
		if found == nil {
			return fmt.Sprintf("no artifact for %s on %s", id, nodes[0].name)
		}
		lines := strings.Split(strings.TrimSuffix(string(found), "\n"), "\n")
		if len(lines) < 1 || !slices.Equal(lines[1:], evs) {
			return fmt.Sprintf("artifact of %s: %d event lines, want %d", id, len(lines)-1, len(evs))
		}
	}
	return ""
}

// checkHTTPDownloads checks that every node serves the HTTP download of every
// artifact (its own copy), whole, and that the copies hold the same text.
func checkHTTPDownloads(t *testing.T, nodes []*node, want map[string][]string, when string) {
	t.Helper()
	var failures []string
	ref := map[string][]byte{}
	for _, n := range nodes {
		for id := range want {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			code, body, err := n.httpGet(ctx, "/v1/sessions/"+url.PathEscape(id)+"/session.jsonl.zstd")
			cancel()
			if err != nil || code != http.StatusOK {
				failures = append(failures, fmt.Sprintf("%s: %d %s %v", n.name, code, bytes.TrimSpace(body), err))
				break // one line per node
			}
			text, err := storage.ArtifactText(body)
			if err != nil {
				t.Errorf("%s: HTTP download of %s from %s: %v", when, id, n.name, err)
				continue
			}
			if r, ok := ref[id]; ok && !bytes.Equal(r, text) {
				t.Errorf("%s: the text of the HTTP download of %s differs between nodes", when, id)
			}
			ref[id] = text
		}
	}
	if len(failures) > 0 {
		t.Errorf("%s: HTTP artifact download fails: %s", when, strings.Join(failures, "; "))
	}
}

// logErrorSummary logs the distinct error-level log messages of the nodes
// (the current containers' logs) with their counts; nothing is asserted.
func logErrorSummary(t *testing.T, logs string) {
	t.Helper()
	counts := map[string]int{}
	for _, line := range strings.Split(logs, "\n") {
		_, js, ok := strings.Cut(line, "| ")
		if !ok || !(strings.Contains(js, `"level":"ERROR"`) || strings.Contains(js, `"@level":"error"`)) {
			continue
		}
		var m struct {
			Msg  string `json:"msg"`
			RMsg string `json:"@message"`
			Err  string `json:"err"`
			RErr string `json:"error"`
		}
		if json.Unmarshal([]byte(js), &m) != nil {
			continue
		}
		counts[strings.TrimSpace(m.Msg+m.RMsg+": "+m.Err+m.RErr)]++
	}
	if len(counts) == 0 {
		t.Log("no error-level lines in the nodes' logs (these containers' lifetimes)")
		return
	}
	var lines []string
	for msg, n := range counts {
		lines = append(lines, fmt.Sprintf("  %4d × %s", n, msg))
	}
	sort.Strings(lines)
	t.Logf("error-level lines in the nodes' logs (these containers' lifetimes; not asserted):\n%s", strings.Join(lines, "\n"))
}
