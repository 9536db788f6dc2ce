package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
)

// testNode is a real node (Raft, bbolt, artifacts, gRPC, HTTP) started
// in-process on loopback ports.
type testNode struct {
	t      testing.TB
	dir    string
	srv    *server
	tune   func(*serveConfig) // what Restart applies again
	opts   nodeOpts           // the rest of what Restart starts with
	log    *nodeLog           // the node's log, with opts.keepLog
	Client *client.Client
}

// nodeOpts are a node's departures from startNode's defaults.
type nodeOpts struct {
	id   string             // node id ("test-node" when empty)
	dir  string             // data directory (a fresh temp dir when empty)
	tune func(*serveConfig) // adjusts the configuration last
	dial []grpc.DialOption  // the client's dial options
	// freePorts picks the ports with clFreeAddr instead of port 0, so the
	// configuration names the ports a node joining others binds.
	freePorts bool
	keepLog   bool // keep the log in n.log for the test to search
}

// nodeLog is a node's log, searched while the node writes to it.
type nodeLog struct{ crBuffer }

// has reports whether one line of the log holds every string of all.
func (l *nodeLog) has(all ...string) bool {
	for _, line := range strings.Split(l.String(), "\n") {
		ok := true
		for _, s := range all {
			ok = ok && strings.Contains(line, s)
		}
		if ok {
			return true
		}
	}
	return false
}

// startTestNode boots a lone node in dir (a fresh temp dir when empty) and
// waits until it is ready to serve.
func startTestNode(t testing.TB, dir string) *testNode {
	t.Helper()
	n := startTestNodeWith(t, dir, nil)
	n.waitReady(true)
	return n
}

// startTestNodeWith boots a node with cfg adjusted by tune (it does not wait
// for readiness: a cluster member may be waiting for its peers).
func startTestNodeWith(t testing.TB, dir string, tune func(*serveConfig)) *testNode {
	t.Helper()
	return startNode(t, nodeOpts{dir: dir, tune: tune})
}

// startNode boots a node as o says, logging to stderr with
// SESSIONSTORE_TEST_LOG, and dials it (it does not wait for readiness).
func startNode(t testing.TB, o nodeOpts) *testNode {
	t.Helper()
	if o.dir == "" {
		o.dir = t.TempDir()
	}
	if o.id == "" {
		o.id = "test-node"
	}
	cfg := defaultServeConfig()
	cfg.Cluster.DataDir, cfg.Cluster.NodeID = o.dir, o.id
	cfg.GRPCAddr, cfg.HTTPAddr = "127.0.0.1:0", "127.0.0.1:0"
	cfg.Cluster.RaftAddr, cfg.Cluster.GossipAddr = "127.0.0.1:0", "127.0.0.1:0"
	if o.freePorts {
		cfg.GRPCAddr, cfg.HTTPAddr = clFreeAddr(t), clFreeAddr(t)
		cfg.Cluster.RaftAddr, cfg.Cluster.GossipAddr = clFreeAddr(t), clFreeAddr(t)
	}
	if o.tune != nil {
		o.tune(&cfg)
	}
	n := &testNode{t: t, dir: o.dir, tune: o.tune, opts: o}
	var logOut io.Writer = io.Discard
	if o.keepLog {
		n.log = &nodeLog{}
		logOut = n.log
	}
	if os.Getenv("SESSIONSTORE_TEST_LOG") != "" {
		logOut = io.MultiWriter(logOut, os.Stderr)
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	srv, err := startServer(cfg, logger.With("node", cfg.Cluster.NodeID), logOut)
	if err != nil {
		t.Fatalf("start %s: %v", cfg.Cluster.NodeID, err)
	}
	n.srv = srv
	c, err := client.Dial(context.Background(), srv.grpcAddr, o.dial...)
	if err != nil {
		srv.Close()
		t.Fatalf("dial: %v", err)
	}
	n.Client = c
	t.Cleanup(func() { n.Close() })
	return n
}

// waitReady waits until the node has a leader and knows the cluster id, and,
// with leader set, until it serves linearizable reads itself.
func (n *testNode) waitReady(leader bool) {
	n.t.Helper()
	clustertest.Eventually(n.t, 30*time.Second, func() error {
		if n.srv.node.Ready() != nil || (leader && !n.srv.node.ReadyForReads()) {
			return fmt.Errorf("node not ready: %v", n.srv.node.Ready())
		}
		return nil
	})
}

// Close stops the node (idempotent).
func (n *testNode) Close() {
	if n.srv == nil {
		return
	}
	n.Client.Close()
	if err := n.srv.Close(); err != nil {
		n.t.Errorf("close node: %v", err)
	}
	n.srv = nil
}

// Restart closes the node and starts a new one on the same data directory
// with the same options and n.tune (a lone node without tune waits until it
// serves again).
func (n *testNode) Restart() *testNode {
	n.t.Helper()
	n.Close()
	o := n.opts
	o.dir, o.tune = n.dir, n.tune
	back := startNode(n.t, o)
	if n.tune == nil {
		back.waitReady(true)
	}
	return back
}

// WaitArtifacts blocks until the artifact writer has caught up.
func (n *testNode) WaitArtifacts() {
	n.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.srv.node.Artifacts().WaitIdle(ctx); err != nil {
		n.t.Fatalf("artifacts did not catch up: %v", err)
	}
}

// layout is the state database's layout (1 until the leader's
// ConvertLayout is applied).
func (n *testNode) layout() int {
	n.t.Helper()
	l := 0
	if err := n.srv.node.State().View(func(tx *storage.Tx) error { l = tx.Layout(); return nil }); err != nil {
		n.t.Fatal(err)
	}
	return l
}

func (n *testNode) ctx() context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	n.t.Cleanup(cancel)
	return ctx
}
