package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
)

// testNode is a real node (Raft, bbolt, artifacts, gRPC, HTTP) started
// in-process on loopback ports chosen by the kernel.
type testNode struct {
	t      testing.TB
	dir    string
	srv    *server
	tune   func(*serveConfig)
	Client *client.Client
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
	if dir == "" {
		dir = t.TempDir()
	}
	cfg := defaultServeConfig()
	cfg.Cluster.DataDir = dir
	cfg.Cluster.NodeID = "test-node"
	cfg.GRPCAddr = "127.0.0.1:0"
	cfg.HTTPAddr = "127.0.0.1:0"
	cfg.Cluster.RaftAddr = "127.0.0.1:0"
	cfg.Cluster.GossipAddr = "127.0.0.1:0"
	var logOut io.Writer = io.Discard
	if os.Getenv("SESSIONSTORE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelDebug}))
	if tune != nil {
		tune(&cfg)
	}
	srv, err := startServer(cfg, logger.With("node", cfg.Cluster.NodeID), logOut)
	if err != nil {
		t.Fatalf("start node: %v", err)
	}
	n := &testNode{t: t, dir: dir, srv: srv, tune: tune}
	c, err := client.Dial(context.Background(), srv.grpcAddr)
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
// (a lone node waits until it serves again).
func (n *testNode) Restart() *testNode {
	n.t.Helper()
	n.Close()
	if n.tune == nil {
		return startTestNode(n.t, n.dir)
	}
	return startTestNodeWith(n.t, n.dir, n.tune)
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
