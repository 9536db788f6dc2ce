package clustertest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/cluster"
)

// Cluster is a set of nodes on one Network, all stopped when the test ends.
type Cluster struct {
	t   testing.TB
	Net *Network
	dir string // the nodes' data directories

	mu    sync.Mutex
	nodes []*Node
	tune  func(*cluster.Config)
}

// Node is one member: a running cluster.Node (nil while stopped) and what it
// needs to start again on the same data directory.
type Node struct {
	*cluster.Node
	ID   string
	Addr raft.ServerAddress // its Raft address on the Network
	API  string             // its (pretend) API address, what followers name as the leader's
	Dir  string
	cfg  cluster.Config
	c    *Cluster
}

// Start starts n nodes: the first bootstraps a cluster alone and the others
// join it through gossip, as servers added by the leader; it returns once one
// leader has n voters. tune, when set, adjusts every node's configuration
// (snapshot thresholds, sweeps).
func Start(t testing.TB, n int, tune func(*cluster.Config)) *Cluster {
	t.Helper()
	c := &Cluster{t: t, Net: NewNetwork(), tune: tune, dir: t.TempDir()}
	t.Cleanup(c.stopAll) // before the directory's removal: cleanups run last first
	for range n {
		c.Add()
	}
	c.WaitVoters(n)
	return c
}

// Add starts one more node, joining through the gossip of the running nodes.
func (c *Cluster) Add() *Node {
	c.t.Helper()
	c.mu.Lock()
	i := len(c.nodes) + 1
	var seeds []string
	for _, nd := range c.nodes {
		if nd.Node != nil {
			seeds = append(seeds, nd.GossipAddr())
		}
	}
	c.mu.Unlock()
	id := fmt.Sprintf("n%d", i)
	cfg := cluster.DefaultConfig()
	cfg.NodeID = id
	cfg.DataDir = filepath.Join(c.dir, id)
	cfg.RaftAddr = "" // the in-memory transport has no TCP address
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.APIAdvertise = "api-" + id
	cfg.Join = seeds
	cfg.MinFreeBytes = 0 // a test's temporary directory may be on a small disk
	if len(seeds) == 0 {
		cfg.BootstrapExpect = 1
	}
	if c.tune != nil {
		c.tune(&cfg)
	}
	nd := &Node{ID: id, Addr: raft.ServerAddress("raft-" + id), API: cfg.APIAdvertise, Dir: cfg.DataDir, cfg: cfg, c: c}
	c.mu.Lock()
	c.nodes = append(c.nodes, nd)
	c.mu.Unlock()
	nd.Start()
	return nd
}

// Start starts a stopped node on its data directory (the stores go through
// the start-up guard, as at any start).
func (nd *Node) Start() {
	t := nd.c.t
	t.Helper()
	if err := os.MkdirAll(filepath.Join(nd.Dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if testing.Verbose() {
		logger = slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})).With("test_node", nd.ID)
	}
	st, err := cluster.OpenStores(nd.Dir, logger, hclog.NewNullLogger())
	if err != nil {
		t.Fatalf("%s: open stores: %v", nd.ID, err)
	}
	n, err := cluster.New(nd.cfg, cluster.Parts{Stores: st, Transport: nd.c.Net.Transport(nd.Addr),
		Remover: nd.c.remove, Logger: logger, Registry: prometheus.NewRegistry()})
	if err != nil {
		t.Fatalf("%s: start: %v", nd.ID, err)
	}
	nd.c.mu.Lock()
	nd.Node = n
	nd.c.mu.Unlock()
}

// Stop closes the node (a clean stop: it hands leadership over if it leads).
func (nd *Node) Stop() {
	nd.c.t.Helper()
	nd.c.mu.Lock()
	n := nd.Node
	nd.Node = nil
	nd.c.mu.Unlock()
	if n == nil {
		return
	}
	if err := n.Close(); err != nil {
		nd.c.t.Errorf("%s: close: %v", nd.ID, err)
	}
}

// Restart stops the node and starts it again on the same data directory.
func (nd *Node) Restart() {
	nd.c.t.Helper()
	nd.Stop()
	nd.Start()
}

// remove is every node's Remover: the in-process counterpart of calling the
// leader's RemoveMember over its API.
func (c *Cluster) remove(ctx context.Context, leaderAPI, nodeID string) error {
	for _, nd := range c.Nodes() {
		if n := nd.running(); nd.API == leaderAPI && n != nil {
			return n.RemoveMember(ctx, nodeID)
		}
	}
	return sessionstore.ErrNoLeader
}

func (c *Cluster) stopAll() {
	var wg sync.WaitGroup
	for _, nd := range c.Nodes() {
		wg.Add(1)
		go func() { defer wg.Done(); nd.Stop() }()
	}
	wg.Wait()
}

// Nodes are all nodes started on the cluster, stopped ones included.
func (c *Cluster) Nodes() []*Node {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]*Node(nil), c.nodes...)
}

// Running are the nodes not stopped.
func (c *Cluster) Running() []*Node {
	var out []*Node
	for _, nd := range c.Nodes() {
		if nd.running() != nil {
			out = append(out, nd)
		}
	}
	return out
}

func (nd *Node) running() *cluster.Node {
	nd.c.mu.Lock()
	defer nd.c.mu.Unlock()
	return nd.Node
}

// Leader waits for a running node to lead with its barrier done (it serves
// linearizable reads: cluster.Node.ReadyForReads) and returns it.
func (c *Cluster) Leader() *Node {
	c.t.Helper()
	var leader *Node
	Eventually(c.t, 30*time.Second, func() error {
		leader = nil
		for _, nd := range c.Running() {
			if nd.Raft().State() == raft.Leader && nd.ReadyForReads() {
				leader = nd
				return nil
			}
		}
		return errors.New("no node leads a ready term")
	})
	return leader
}

// Followers are the running nodes other than leader.
func (c *Cluster) Followers(leader *Node) []*Node {
	var out []*Node
	for _, nd := range c.Running() {
		if nd != leader {
			out = append(out, nd)
		}
	}
	return out
}

// WaitVoters waits until a leader's configuration has want voters.
func (c *Cluster) WaitVoters(want int) {
	c.t.Helper()
	Eventually(c.t, 30*time.Second, func() error {
		got := c.Leader().Voters()
		if len(got) != want {
			return fmt.Errorf("voters %v, want %d", got, want)
		}
		return nil
	})
}

// Voters are the ids of the voters in the node's latest configuration.
func (nd *Node) Voters() []string {
	f := nd.Raft().GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	var ids []string
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			ids = append(ids, string(s.ID))
		}
	}
	return ids
}

// Eventually calls cond until it returns nil, every 20 ms for up to d, and
// fails the test with cond's last error when d runs out. The one way tests
// of this package (and the cluster's) wait.
func Eventually(t testing.TB, d time.Duration, cond func() error) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		err := cond()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", d, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
