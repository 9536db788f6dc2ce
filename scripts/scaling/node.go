package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/du"
	"github.com/sessionstore/sessionstore/internal/serverproc"
)

// node is one `sessionstore serve` process on loopback with its own data directory,
// which outlives the process: restart starts it again on the same ports.
type node struct {
	bin, id, dir, logDir     string
	flags                    []string // extra serve flags of every start
	grpc, http, raft, gossip string
	starts                   int
	p                        *serverproc.Proc
	c                        *client.Client
	hc                       *http.Client
}

func newNode(bin, id, work string, flags []string) (*node, error) {
	a, err := freeAddrs(4)
	if err != nil {
		return nil, err
	}
	return &node{bin: bin, flags: flags, id: id, dir: filepath.Join(work, id), logDir: work,
		grpc: a[0], http: a[1], raft: a[2], gossip: a[3], hc: &http.Client{Timeout: 10 * time.Second}}, nil
}

// start runs the node with extra flags; the log of each start is its own
// file (<id>-<n>.log), so log lines are looked for in this run only.
func (n *node) start(ctx context.Context, extra ...string) error {
	n.starts++
	args := append([]string{"serve", "--node-id", n.id, "--data-dir", n.dir,
		"--grpc-addr", n.grpc, "--http-addr", n.http, "--raft-addr", n.raft, "--gossip-addr", n.gossip,
		// The shared machine's disk may be fuller than the shipped 256 MiB
		// reserve allows; this run's own bytes are what is measured.
		"--min-free-bytes", "0"}, append(slices.Clone(n.flags), extra...)...)
	p, err := serverproc.Start(n.bin, filepath.Join(n.logDir, fmt.Sprintf("%s-%d.log", n.id, n.starts)), args...)
	if err != nil {
		return err
	}
	n.p = p
	if n.c == nil {
		if n.c, err = client.Dial(ctx, n.grpc); err != nil {
			return err
		}
	}
	return nil
}

func (n *node) stop() time.Duration {
	if n.p == nil {
		return 0
	}
	d := n.p.Stop(stopTimeout)
	n.p = nil
	return d
}

func (n *node) close() {
	n.stop()
	if n.c != nil {
		n.c.Close()
	}
}

func (n *node) log() string {
	b, _ := os.ReadFile(n.p.Log)
	return string(b)
}

func (n *node) httpGet(ctx context.Context, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+n.http+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := n.hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// ready is /readyz answering 200 and then a linearizable read of session
// id (Inspect: Load could commit a repair) succeeding.
func (n *node) ready(ctx context.Context, id string) error {
	if n.p.Exited() {
		return serverproc.Permanent(fmt.Errorf("%s exited:\n%s", n.id, n.p.Tail()))
	}
	code, body, err := n.httpGet(ctx, "/readyz")
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("/readyz %d: %s", code, strings.TrimSpace(body))
	}
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	_, err = n.c.Inspect(cctx, &sessionpb.InspectRequest{SessionId: id, Consistency: sessionpb.Consistency_LINEARIZABLE})
	if de := (*sessionstore.Error)(nil); errors.As(err, &de) {
		switch de.Reason {
		case sessionstore.ReasonNoLeader, sessionstore.ReasonShuttingDown, sessionstore.ReasonOutcomeUnknown:
		default:
			return serverproc.Permanent(err) // e.g. not found, invalid stored event
		}
	}
	return err
}

func (n *node) metric(ctx context.Context, name string) (float64, error) {
	code, body, err := n.httpGet(ctx, "/metrics")
	if err != nil {
		return 0, err
	}
	if code != http.StatusOK {
		return 0, fmt.Errorf("/metrics %d", code)
	}
	v, ok := metricValue(body, name)
	if !ok {
		return 0, fmt.Errorf("/metrics has no %s", name)
	}
	return v, nil
}

func (n *node) applied(ctx context.Context) (uint64, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	st, err := n.c.Status(cctx)
	if err != nil {
		return 0, err
	}
	return st.GetAppliedIndex(), nil
}

func (n *node) cpu() uint64 {
	ns, _ := cpuNanos(n.p.Pid())
	return ns
}

func (n *node) rss() memory {
	m, _ := memoryOf(n.p.Pid())
	return m
}

// waitLog waits until the current start's log holds a line containing s.
func (n *node) waitLog(ctx context.Context, s string, d time.Duration) error {
	return serverproc.WaitFor(ctx, d, 100*time.Millisecond, func(context.Context) error {
		if strings.Contains(n.log(), s) {
			return nil
		}
		if n.p.Exited() {
			return serverproc.Permanent(fmt.Errorf("%s exited:\n%s", n.id, n.p.Tail()))
		}
		return fmt.Errorf("no %q in the log yet", s)
	})
}

// settle waits until the node's applied index stopped moving and the
// process used less than idle of a core over a second: the artifact writer
// and other deferred work have then finished.
func (n *node) settle(ctx context.Context, idle float64) error {
	var last uint64
	return serverproc.WaitFor(ctx, 10*time.Minute, 0, func(ctx context.Context) error {
		a, err := n.applied(ctx)
		if err != nil {
			return err
		}
		c0 := n.cpu()
		time.Sleep(time.Second)
		used := float64(n.cpu()-c0) / 1e9
		if a != last || used > idle {
			last = a
			return fmt.Errorf("busy: applied %d, %.2f cores", a, used)
		}
		return nil
	})
}

// dirSizes is a data directory's du, split by what uses it.
type dirSizes struct {
	total, stateDB, raft, artifacts  int64
	totalApparent, artifactsApparent int64 // the files' bytes (ls, not du)
	stateFree                        int64 // free and pending bytes inside state.db (-1: unknown)
}

// boltFree reads the state database's free bytes from /metrics (the node
// must be running): the file minus this is what the data occupies.
func (n *node) boltFree(ctx context.Context) int64 {
	v, err := n.metric(ctx, `sessionstore_bbolt_free_bytes{db="state"}`)
	if err != nil {
		return -1
	}
	return int64(v)
}

func (n *node) sizes() (dirSizes, error) {
	var s dirSizes
	var err error
	if s.total, s.totalApparent, err = du.Usage(n.dir); err != nil {
		return s, err
	}
	if s.stateDB, err = du.Allocated(filepath.Join(n.dir, "state.db")); err != nil {
		return s, err
	}
	s.raft, _ = du.Allocated(filepath.Join(n.dir, "raft"))
	s.artifacts, s.artifactsApparent, _ = du.Usage(filepath.Join(n.dir, "artifacts"))
	return s, nil
}
