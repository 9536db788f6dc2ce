package cluster

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// membership is who belongs to the cluster, as this node sees and shapes it:
// gossip, the bootstrap that forms a cluster (bootstrap.go), the reconcile
// loop that folds gossip into the Raft configuration (reconcile.go), the
// voters' views derived from both (voters.go, hints.go) and the member admin
// calls. Only Raft decides membership; gossip is advisory.
type membership struct {
	ctx     context.Context // ends when the node stops
	cfg     Config
	raft    *raft.Raft
	gossip  *gossip
	local   localNode
	remover Remover // nil: Leave fails with ErrNoLeader
	logger  *slog.Logger

	closedOnce sync.Once                 // ClosedMembership refused a server (logged once)
	deadSince  map[string]time.Time      // reconcile goroutine only
	voterCache atomic.Pointer[voterView] // voters.go: the last view, reused while current
	hintCache  atomic.Pointer[hints]     // hints.go: the last hints, reused while current

	mu      sync.Mutex
	removed map[string]time.Time // servers this node removed as leader, when
}

// localNode is what membership needs from the rest of its node.
type localNode struct {
	raftAddr raft.ServerAddress // this node's, for a one-voter bootstrap
	// admit is Transport.Admit with the node's dial context: whether a
	// server at addr may be added (Raft TLS checks its certificate).
	admit       func(id string, addr raft.ServerAddress) bool
	clusterID   func() string        // the applied cluster id, "" until minted
	applied     func() uint64        // the FSM's applied index, gossiped for promotion
	diskFree    func() (int64, bool) // diskMonitor.freeBytes
	diskLow     func() bool          // diskMonitor.isLow
	seedPending func() bool          // restored state not yet in a snapshot (backup.go)
}

func newMembership(ctx context.Context, cfg Config, r *raft.Raft, g *gossip, local localNode, remover Remover, logger *slog.Logger) *membership {
	return &membership{ctx: ctx, cfg: cfg, raft: r, gossip: g, local: local, remover: remover, logger: logger}
}

// Members is the Raft configuration joined with gossip health and what each
// member gossips about itself; this node's own values are read live.
func (mb *membership) Members(ctx context.Context) ([]sessionstore.Member, error) {
	f := mb.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	ps := mb.gossip.peers()
	var out []sessionstore.Member
	for _, s := range f.Configuration().Servers {
		m := sessionstore.Member{NodeID: string(s.ID), RaftAddress: string(s.Address), Suffrage: s.Suffrage.String(), Health: "unknown"}
		p, ok := ps[string(s.ID)]
		if ok {
			m.APIAddress, m.Health = p.meta.API, p.health()
		}
		switch {
		case string(s.ID) == mb.cfg.NodeID:
			mb.liveValues(&m, p.meta)
		case ok:
			gossipedValues(&m, p.meta)
		}
		out = append(out, m)
	}
	return out, nil
}

// gossipedValues fills in what a peer's gossip says about it.
func gossipedValues(m *sessionstore.Member, meta memberMeta) {
	m.AppliedIndex, m.DiskLow = &meta.Applied, &meta.DiskLow
	if meta.Commands != 0 { // builds before version 3 do not say
		m.CommandVersion = &meta.Commands
	}
	if c, ok := meta.ContactS.get(); ok {
		m.LastContactMs = new(c * 1000)
	}
	if f, ok := meta.FreeMiB.get(); ok {
		m.DiskFreeBytes = new(f << 20)
	}
}

// liveValues fills in this node's own values, read now rather than from its
// last gossip (own: its gossiped metadata, for the command version).
func (mb *membership) liveValues(m *sessionstore.Member, own memberMeta) {
	m.AppliedIndex, m.DiskLow = new(mb.local.applied()), new(mb.local.diskLow())
	if own.Commands != 0 {
		m.CommandVersion = &own.Commands
	}
	if c, ok := mb.lastContact(); ok {
		m.LastContactMs = new(c.Milliseconds())
	}
	if f, ok := mb.local.diskFree(); ok {
		m.DiskFreeBytes = &f
	}
}

// lastContact is how long ago this node last heard from the leader: 0 on
// the leader itself; false while it has not heard from one since it started.
func (mb *membership) lastContact() (time.Duration, bool) {
	if mb.raft.State() == raft.Leader {
		return 0, true
	}
	t := mb.raft.LastContact()
	if t.IsZero() {
		return 0, false
	}
	return time.Since(t), true
}

// RemoveMember removes a server from the Raft configuration (the leader does;
// a follower answers with the leader to ask).
func (mb *membership) RemoveMember(ctx context.Context, nodeID string) error {
	if mb.raft.State() != raft.Leader {
		return mb.notLeader()
	}
	if _, ok := mb.serverAddress(nodeID); !ok {
		return sessionstore.Errorf(sessionstore.ReasonNotFound, "node %s is not a member", sessionstore.Quote(nodeID))
	}
	if mb.voters() == 1 && nodeID == mb.cfg.NodeID {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter; removing it would leave no cluster", sessionstore.Quote(nodeID))
	}
	if err := mb.raft.RemoveServer(raft.ServerID(nodeID), 0, 10*time.Second).Error(); err != nil {
		return raftErr("remove "+nodeID, err)
	}
	mb.mu.Lock()
	if mb.removed == nil {
		mb.removed = map[string]time.Time{}
	}
	mb.removed[nodeID] = time.Now()
	mb.mu.Unlock()
	mb.logger.Info("removed a server from the configuration", "peer_id", nodeID)
	return nil
}

// recentlyRemoved reports whether this node (as leader) removed id within
// the last removedQuiet: gossip may still show the server alive for a
// moment, and reconcile must not add it straight back.
func (mb *membership) recentlyRemoved(id string) bool {
	mb.mu.Lock()
	defer mb.mu.Unlock()
	t, ok := mb.removed[id]
	return ok && time.Since(t) < removedQuiet
}

// removedQuiet is how long a removed server is not re-added from gossip.
const removedQuiet = 30 * time.Second

// Leave takes this node out of the cluster: leadership is handed over if it
// leads, the leader removes it from the Raft configuration, and it leaves the
// gossip pool. The node keeps running until it is stopped.
func (mb *membership) Leave(ctx context.Context) (err error) {
	// Say so in gossip first: the leader's reconcile does not add a leaving
	// server back while its removal and its departure from gossip race.
	mb.gossip.update(func(m *memberMeta) { m.Leaving = true })
	defer func() {
		if err != nil {
			mb.gossip.update(func(m *memberMeta) { m.Leaving = false })
		}
	}()
	if mb.raft.State() == raft.Leader && mb.voters() > 1 {
		if err := mb.raft.LeadershipTransfer().Error(); err != nil {
			return raftErr("hand leadership over before leaving", err)
		}
	}
	if mb.raft.State() == raft.Leader {
		// The last voter: removing itself would leave no cluster at all.
		if mb.voters() <= 1 {
			return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter; it cannot leave", sessionstore.Quote(mb.cfg.NodeID))
		}
		if err := mb.RemoveMember(ctx, mb.cfg.NodeID); err != nil {
			return err
		}
	} else {
		if err := mb.askLeaderToRemove(ctx); err != nil {
			return err
		}
	}
	return mb.gossip.leave(5 * time.Second)
}

func (mb *membership) serverAddress(id string) (raft.ServerAddress, bool) {
	f := mb.raft.GetConfiguration()
	if f.Error() != nil {
		return "", false
	}
	for _, s := range f.Configuration().Servers {
		if string(s.ID) == id {
			return s.Address, true
		}
	}
	return "", false
}

func (mb *membership) askLeaderToRemove(ctx context.Context) error {
	// Right after a leadership transfer the new leader may not be known yet.
	_, api := mb.leaderAPI()
	for deadline := time.Now().Add(5 * time.Second); api == "" && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(50 * time.Millisecond)
		_, api = mb.leaderAPI()
	}
	if api == "" || mb.remover == nil {
		return sessionstore.ErrNoLeader
	}
	return mb.remover(ctx, api, mb.cfg.NodeID)
}

// runJoin contacts the gossip seeds until one answers.
func (mb *membership) runJoin() {
	if len(mb.cfg.Join) == 0 {
		return
	}
	for attempt := 0; ; attempt++ {
		k, err := mb.gossip.join(mb.cfg.Join)
		// A seed list may name this node itself: count only real peers.
		if err == nil && k > 0 && mb.gossip.joined() {
			mb.logger.Info("joined the gossip pool", "seeds", mb.cfg.Join, "reached", k)
			return
		}
		if attempt%10 == 0 {
			mb.logger.Warn("no gossip seed answered yet; retrying", "seeds", mb.cfg.Join, "err", err)
		}
		select {
		case <-mb.ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// voters counts the voters of the current configuration.
func (mb *membership) voters() int {
	f := mb.raft.GetConfiguration()
	if f.Error() != nil {
		return 0
	}
	c := 0
	for _, s := range f.Configuration().Servers {
		if s.Suffrage == raft.Voter {
			c++
		}
	}
	return c
}

// leaderAPI returns the leader's id and gRPC address ("" when unknown).
func (mb *membership) leaderAPI() (string, string) {
	_, id := mb.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	if string(id) == mb.cfg.NodeID {
		return string(id), mb.cfg.APIAdvertise
	}
	if p, ok := mb.gossip.peers()[string(id)]; ok {
		return string(id), p.meta.API
	}
	return string(id), ""
}

// notLeader is the error for a call this node cannot serve as a follower.
func (mb *membership) notLeader() error {
	id, api := mb.leaderAPI()
	if api == "" {
		return sessionstore.ErrNoLeader
	}
	return &sessionstore.NotLeaderError{LeaderID: id, LeaderAPI: api}
}

// setAuthHash: see Node.SetAuthHash.
func (mb *membership) setAuthHash(h string) {
	mb.gossip.update(func(m *memberMeta) { m.AuthHash = h })
	for id, p := range mb.gossip.peers() {
		if id != mb.cfg.NodeID && p.meta.AuthHash != h {
			mb.logger.Warn("peer's token file differs from this node's", "peer", id, "peer_auth_hash", p.meta.AuthHash, "auth_hash", h)
		}
	}
}
