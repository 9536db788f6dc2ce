package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/artifacts"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// Node is one member of the cluster: Raft, the FSM, its state and artifacts.
type Node struct {
	cfg    Config
	logger *slog.Logger

	stores    *Stores            // closed by Close
	local     *storage.RaftStore // stable store (term, vote) and node-local buckets
	logs      *storage.RaftWAL   // the Raft log: one fdatasync per append
	state     *storage.StateDB
	snaps     raft.SnapshotStore
	transport Transport
	fsm       *fsm.FSM
	artifacts *artifacts.Writer
	raft      *raft.Raft
	metrics   *Metrics
	disk      *diskMonitor // free space of DataDir's filesystem (issue 8)

	members *membership // membership.go: gossip, bootstrap, reconcile, voters

	proposer *proposer // propose.go: commands into Raft entries
	sessions *Sessions // sessions.go: the session operations

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	// dialCtx ends every Raft dial when the node stops, so shutdown never
	// waits out a dial timeout to a peer that is gone.
	dialCtx    context.Context
	dialCancel context.CancelFunc

	// startClusterID is the cluster this data directory belonged to at start
	// (identity.go); the Raft handshake uses it until state.db has the id.
	startClusterID string

	mu          sync.Mutex
	clusterID   string
	readyTerm   uint64 // term in which this leader's barrier completed (0: none)
	closed      bool
	closeOnce   sync.Once
	closeResult error

	stateDamage atomic.Pointer[error] // damage found by checkStateLater
}

// Paths of a node's files under its data directory.
func statePath(dir string) string     { return filepath.Join(dir, "state.db") }
func raftDir(dir string) string       { return filepath.Join(dir, "raft") }
func artifactsDir(dir string) string  { return filepath.Join(dir, "artifacts") }
func raftStorePath(dir string) string { return filepath.Join(raftDir(dir), "raft.db") }
func raftWALDir(dir string) string    { return filepath.Join(raftDir(dir), "wal") }

// Open starts the node of a data directory the product's way (cmd/node): its
// stores (OpenStores, creating the directory if needed) and Raft over TCP
// (TCPTransport). Tests build nodes from other parts with New.
func Open(cfg Config, remover Remover, logger *slog.Logger, reg prometheus.Registerer) (*Node, error) {
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("cluster config: %w", err)
	}
	if cfg.RaftAddr == "" {
		return nil, errors.New("cluster config: raft address must not be empty")
	}
	if err := os.MkdirAll(raftDir(cfg.DataDir), 0o700); err != nil {
		return nil, err
	}
	st, err := OpenStores(cfg.DataDir, nodeLogger(logger, cfg), cfg.raftLogger())
	if err != nil {
		return nil, err
	}
	return New(cfg, Parts{Stores: st, Transport: TCPTransport(cfg), Remover: remover, Logger: logger, Registry: reg})
}

// Parts are what a node is built from besides its configuration.
type Parts struct {
	Stores    *Stores        // opened (OpenStores); the node owns them from New on
	Transport TransportMaker // TCPTransport in the product
	// Remover asks the leader to remove this node (Leave); nil: Leave fails
	// with ErrNoLeader.
	Remover  Remover
	Logger   *slog.Logger
	Registry prometheus.Registerer // the node's and the FSM's metrics
}

// A Remover asks the leader, at its API address, to remove server nodeID from
// the configuration; cmd/node calls the Cluster service's RemoveMember.
type Remover func(ctx context.Context, leaderAPI, nodeID string) error

func nodeLogger(logger *slog.Logger, cfg Config) *slog.Logger {
	return logger.With("component", "cluster", "node_id", cfg.NodeID)
}

// New builds a node from its parts (it owns the stores from now on: they are
// closed by Close, or here when New fails), then starts its transport, Raft,
// gossip and goroutines; a new lone node bootstraps a one-voter cluster.
func New(cfg Config, p Parts) (_ *Node, err error) {
	st, logger, reg := p.Stores, p.Logger, p.Registry
	if err := cfg.Validate(); err != nil {
		return nil, errors.Join(fmt.Errorf("cluster config: %w", err), st.Close())
	}
	n := &Node{cfg: cfg, logger: nodeLogger(logger, cfg), stores: st, local: st.Local, logs: st.Logs, snaps: st.Snaps, state: st.State,
		metrics: NewMetrics(reg)}
	n.ctx, n.cancel = context.WithCancel(context.Background())
	n.dialCtx, n.dialCancel = context.WithCancel(context.Background())
	defer func() {
		if err != nil {
			n.dialCancel()
			n.cancel()
			if n.transport != nil {
				_ = n.transport.Close()
			}
			err = errors.Join(err, n.closeStores())
		}
	}()
	hl := cfg.raftLogger()

	if st.Restored {
		n.logger.Info("state restored from the latest snapshot before start")
	}
	adopted := false
	if n.startClusterID, adopted, err = checkIdentity(cfg.DataDir, cfg.NodeID, n.state, n.logs, n.logger); err != nil { // identity.go
		return nil, err
	}
	fm := fsm.NewMetrics(reg)
	if st.Restored {
		fm.Restores.Inc()
		fm.RestoreSeconds.Observe(st.GuardTime.Seconds())
	}
	n.disk = newDiskMonitor(cfg.DataDir, cfg.MinFreeBytes, n.logger, reg)
	if cfg.ArtifactsOff {
		n.artifacts = artifacts.Off(artifactsDir(cfg.DataDir), n.local, logger, fm)
	} else {
		n.artifacts = artifacts.New(artifactsDir(cfg.DataDir), n.state, n.local, logger, fm)
	}
	if n.fsm, err = fsm.New(n.state, logger, fm, n.artifacts.Observe); err != nil {
		return nil, err
	}
	n.fsm.LimitVersion(cfg.CommandVersion) // before Raft can apply anything
	n.fsm.RepairFrom(n.artifacts)

	hs := newHandshaker(cfg.NodeID, cfg.ClusterKey, n.raftClusterID, n.logger)
	legacy := &legacyView{self: cfg.NodeID, clusterID: n.raftClusterID}
	hs.legacyPeer, hs.legacyAccept, hs.optional = legacy.legacyPeer, legacy.legacyAccept, cfg.ClusterKeyOptional
	hs.refusals = n.metrics.HandshakeRefusals
	if n.transport, err = p.Transport(n.dialCtx, hs, hl); err != nil {
		return nil, err
	}

	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(cfg.NodeID)
	rc.Logger = hl
	rc.NoSnapshotRestoreOnStart = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.SnapshotInterval = cfg.SnapshotInterval
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	rc.MaxAppendEntries = 256
	hasState, err := raft.HasExistingState(n.logs, n.local, n.snaps)
	if err != nil {
		return nil, err
	}
	if err := n.checkSeed(hasState); err != nil {
		return nil, err
	}
	if err := cfg.checkPeersConfigured(hasState); err != nil { // bootstrap.go
		return nil, err
	}
	if n.raft, err = raft.NewRaft(rc, n.fsm, n.logs, n.local, n.snaps, n.transport); err != nil {
		return nil, fmt.Errorf("start raft: %w", err)
	}
	if err := n.checkAdoptedID(adopted); err != nil { // identity.go
		_ = n.raft.Shutdown().Error()
		return nil, err
	}
	version := uint32(fsm.CommandVersion)
	if cfg.CommandVersion != 0 {
		version = cfg.CommandVersion
	}
	self := memberMeta{ID: cfg.NodeID, Commands: version, AuthHash: cfg.AuthHash, Raft: string(n.transport.LocalAddr()), API: cfg.APIAdvertise,
		Client:   cfg.ClientAdvertise,
		HasState: hasState, ClusterID: n.ClusterID(), Applied: n.fsm.AppliedIndex(), DiskLow: n.disk.isLow(), Handshake: hsVersion}
	g, err := newGossip(cfg, self, logger)
	if err != nil {
		_ = n.raft.Shutdown().Error()
		return nil, err
	}
	legacy.gossip.Store(g)
	n.members = newMembership(n.ctx, cfg, n.raft, g, localNode{
		raftAddr:    n.transport.LocalAddr(),
		admit:       func(id string, addr raft.ServerAddress) bool { return n.transport.Admit(n.dialCtx, id, addr) },
		clusterID:   n.ClusterID,
		applied:     n.fsm.AppliedIndex,
		diskFree:    n.disk.freeBytes,
		diskLow:     n.disk.isLow,
		seedPending: n.seedPending,
	}, p.Remover, n.logger)
	n.proposer = newProposer(n.ctx, n.raft, cfg, n.metrics, func() bool { return n.members.votersSupport(fsm.PackedVersion) })
	n.sessions = newSessions(n.ctx, cfg, sessionParts{raft: n.raft, logs: n.logs, state: n.state, fsm: n.fsm, artifacts: n.artifacts,
		proposer: n.proposer, members: n.members, disk: n.disk, metrics: n.metrics},
		nodeState{closing: n.closing, leaderReady: n.isLeaderReady}, n.logger)
	publishDisk := func() { g.update(func(m *memberMeta) { m.DiskLow = n.disk.isLow() }) }
	n.disk.mu.Lock()
	n.disk.onChange = publishDisk
	n.disk.mu.Unlock()
	publishDisk() // a transition before the hook was set

	// Every goroutine the node owns: each ends when n.ctx does, and Close
	// waits for all of them.
	n.spawn(func() { n.disk.run(n.ctx) })
	n.spawn(n.runSyncer)
	n.spawn(func() { n.artifacts.Run(n.ctx) })
	n.spawn(n.proposer.run)                              // propose.go
	n.spawn(n.runLeadership)                             // cluster id, barrier, state format
	n.spawn(n.members.runJoin)                           // membership.go: gossip seeds
	n.spawn(n.members.runReconcile)                      // reconcile.go: gossip into the configuration
	n.spawn(func() { n.members.runBootstrap(hasState) }) // bootstrap.go
	n.spawn(n.runSeedSnapshot)                           // backup.go
	n.spawn(n.sessions.runExpiry)                        // expire.go
	n.spawn(n.sessions.runRetention)                     // retention.go
	if st.Shallow {
		n.spawn(n.checkStateLater) // statecheck.go
	}
	if reg != nil {
		n.registerCollectors(reg)
	}
	n.logger.Info("node started", "raft_addr", n.transport.LocalAddr(), "gossip_addr", cfg.GossipAddr,
		"data_dir", cfg.DataDir, "has_state", hasState, "bootstrap_expect", cfg.bootstrapExpect(), "join", cfg.Join)
	return n, nil
}

// spawn runs fn on a goroutine the node owns: Close waits for it after
// cancelling n.ctx, on which fn must end.
func (n *Node) spawn(fn func()) {
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		fn()
	}()
}

// runLeadership mints the cluster id once and confirms each new leadership
// with a barrier (every earlier entry applied) before linearizable reads are
// served; losing leadership withdraws that at once.
func (n *Node) runLeadership() {
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.raft.LeaderCh():
		case <-tick.C:
		}
		if n.raft.State() != raft.Leader {
			n.setReadyTerm(0)
			continue
		}
		term := n.raft.CurrentTerm()
		if n.isLeaderReady() && n.ClusterID() != "" {
			n.convertLayout()
			continue
		}
		if err := await(n.ctx, n.raft.Barrier(n.cfg.ApplyTimeout)); err != nil {
			continue
		}
		if n.ClusterID() == "" {
			if _, err := n.sessions.propose(n.ctx, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{
				SetClusterId: &fsmpb.SetClusterID{ClusterId: newClusterID()}}}); err != nil {
				n.logger.Warn("minting cluster id failed; will retry", "err", err)
				continue
			}
			n.logger.Info("cluster id minted", "cluster_id", n.ClusterID())
		}
		// Converting before the term is ready means a new cluster serves its
		// first write in layout 2, and an upgraded one converts before new
		// writes queue behind the conversion.
		n.convertLayout()
		n.setReadyTerm(term)
	}
}

// await waits for a Raft future, or until ctx (the node's) ends: hashicorp/raft
// can shut down without answering a future queued just before, and a loop
// waiting on it would hold Close, and the process, forever (seen with a
// Barrier queued as the node became leader and was told to stop).
func await(ctx context.Context, f raft.Future) error {
	done := make(chan error, 1)
	go func() { done <- f.Error() }()
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		return raft.ErrRaftShutdown
	}
}

// convertLayout proposes ConvertLayout once every voter applies the command
// version of a newer state format: layout 2 (version 6), format 3, packed
// events (version 9), format 4, rows keyed by session number (version 10),
// format 5, titles in the records (version 11); every replica then converts
// at the same index.
// Until then the state keeps its format, whose snapshots an older voter
// reads (a rolling upgrade).
func (n *Node) convertLayout() {
	have, target := n.state.Layout(), 0
	switch {
	case have < 5 && n.members.votersSupport(fsm.TitleVersion):
		target = 5
	case have < 4 && n.members.votersSupport(fsm.NumberedRowsVersion):
		target = 4
	case have < 3 && n.members.votersSupport(fsm.PackedEventsVersion):
		target = 3
	case have < 2 && n.members.votersSupport(fsm.LayoutVersion):
		target = 2
	default:
		return
	}
	n.logger.Info("every voter supports a newer state format: converting the state database", "format", have, "to", target)
	if _, err := n.sessions.propose(n.ctx, &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: uint32(target)}}}); err != nil {
		n.logger.Warn("converting the state database failed; will retry", "to", target, "err", err)
	}
}

func (n *Node) setReadyTerm(t uint64) {
	n.mu.Lock()
	n.readyTerm = t
	n.mu.Unlock()
}

// closing reports whether Close has begun.
func (n *Node) closing() bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.closed
}

// isLeaderReady reports whether this node leads a term whose barrier completed.
func (n *Node) isLeaderReady() bool {
	n.mu.Lock()
	t := n.readyTerm
	n.mu.Unlock()
	return t != 0 && t == n.raft.CurrentTerm() && n.raft.State() == raft.Leader
}

// ReadyForReads reports whether linearizable reads are served here now.
func (n *Node) ReadyForReads() bool { return n.isLeaderReady() }

func newClusterID() string {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return hex.EncodeToString(b[:])
}

// ClusterID is the identity minted by the first leader, "" until then.
func (n *Node) ClusterID() string {
	n.mu.Lock()
	id := n.clusterID
	n.mu.Unlock()
	if id != "" {
		return id
	}
	_ = n.state.View(func(tx *storage.Tx) error { id = tx.ClusterID(); return nil })
	if id != "" {
		n.mu.Lock()
		first := n.clusterID == ""
		n.clusterID = id
		n.mu.Unlock()
		if first && id != n.startClusterID {
			if err := recordClusterID(n.cfg.DataDir, n.cfg.NodeID, id); err != nil {
				n.logger.Error("recording the cluster id in the identity file failed", "err", err)
			}
		}
	}
	return id
}

// raftClusterID is the cluster id the Raft handshake states and checks
// (handshake.go): the applied one, or the one this directory had at start.
func (n *Node) raftClusterID() string {
	if id := n.ClusterID(); id != "" {
		return id
	}
	return n.startClusterID
}

// readyLag is how many committed entries a node may still have to apply and
// count as caught up.
const readyLag = 1000

// Ready reports whether the node can serve: its disk is not nearly full, it
// has a leader, the cluster id is known and artifacts are healthy.
func (n *Node) Ready() error {
	// Also on a follower: it gossips that its disk is low, and the leader
	// refuses growth writes for the whole cluster (diskspace.go).
	if why := n.disk.check(diskPollInterval); why != "" {
		return fmt.Errorf("disk: %s; writes are refused", why)
	}
	if addr, _ := n.raft.LeaderWithID(); addr == "" {
		return sessionstore.ErrNoLeader
	}
	if n.ClusterID() == "" {
		return errors.New("cluster id not yet minted")
	}
	if c, a := n.raft.CommitIndex(), n.raft.AppliedIndex(); c > a+readyLag {
		return fmt.Errorf("catching up: applied %d of %d", a, c)
	}
	if err := n.artifacts.Healthy(); err != nil {
		return fmt.Errorf("artifacts: %w", err)
	}
	if err := n.stateDamage.Load(); err != nil {
		return fmt.Errorf("%w; restart the node: its start moves the file aside and rebuilds it", *err)
	}
	return nil
}

// SetAuthHash publishes the hash of a reloaded token file in gossip, so that
// nodes notice (and warn) when their files differ.
func (n *Node) SetAuthHash(h string) { n.members.setAuthHash(h) }

// FirstLogIndex is the first index still in the local Raft log.
func (n *Node) FirstLogIndex() (uint64, error) { return n.logs.FirstIndex() }

// SnapshotRestores counts snapshots this node has restored since it started.
func (n *Node) SnapshotRestores() uint64 { return n.fsm.Restores() }

// GossipAddr is the gossip address other nodes can --join.
func (n *Node) GossipAddr() string { return n.members.gossip.addr() }

// Sessions serves the session operations (api/rpc's Backend and PlanBackend).
func (n *Node) Sessions() *Sessions { return n.sessions }

// Artifacts exposes the artifact writer (HTTP download, tests).
func (n *Node) Artifacts() *artifacts.Writer { return n.artifacts }

// State exposes the state database (HTTP download, metrics).
func (n *Node) State() *storage.StateDB { return n.state }

// Raft exposes the raft instance (status, tests).
func (n *Node) Raft() *raft.Raft { return n.raft }

// Snapshot takes a Raft snapshot now (tests and operators).
func (n *Node) Snapshot() error { return n.raft.Snapshot().Error() }

// Close stops the node: it refuses new proposals, shuts Raft down (leadership
// is handed over by raft when other voters exist), stops the artifact writer
// after it has caught up, and closes the stores.
func (n *Node) Close() error {
	n.closeOnce.Do(func() {
		n.mu.Lock()
		n.closed = true
		n.mu.Unlock()
		var errs []error
		if n.raft != nil && n.raft.State() == raft.Leader && n.members.voters() > 1 {
			// Hand leadership over so the cluster does not wait for an election.
			if err := n.raft.LeadershipTransfer().Error(); err != nil {
				n.logger.Warn("leadership transfer at shutdown failed", "err", err)
			}
		}
		if n.members != nil {
			_ = n.members.gossip.leave(time.Second)
			_ = n.members.gossip.shutdown()
		}
		n.dialCancel()
		if n.raft != nil {
			if err := n.raft.Shutdown().Error(); err != nil {
				errs = append(errs, err)
			}
		}
		if n.artifacts != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_ = n.artifacts.WaitIdle(ctx)
			cancel()
		}
		n.cancel()
		n.wg.Wait()
		if n.transport != nil {
			_ = n.transport.Close()
		}
		if err := n.closeStores(); err != nil {
			errs = append(errs, err)
		}
		n.closeResult = errors.Join(errs...)
	})
	return n.closeResult
}

func (n *Node) closeStores() error {
	err := n.stores.Close()
	if n.stateDamage.Load() != nil {
		// Not a clean stop for the guard: the next start checks every page.
		err = errors.Join(err, removeCleanStamp(n.cfg.DataDir))
	}
	return err
}
