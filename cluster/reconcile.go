package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// promoteLag is how far (in entries) a non-voter may trail the commit index
// and still count as caught up for promotion.
const promoteLag = 1024

// runReconcile keeps gossip metadata fresh and, on the leader, folds gossip
// into the Raft configuration: servers of this cluster (or new, empty ones)
// that are alive but not configured join as non-voters, and caught-up
// non-voters are promoted. Nothing is ever removed here: a server leaves only
// through Leave or RemoveMember, so restarts never shrink the cluster.
func (n *Node) runReconcile() {
	t := time.NewTicker(n.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		events := n.gossip.events()
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		case <-events:
		}
		n.publishMeta()
		if n.raft.State() == raft.Leader {
			n.reconcile()
		}
	}
}

// publishMeta refreshes what this node gossips about itself.
func (n *Node) publishMeta() {
	applied := n.fsm.AppliedIndex()
	cid := n.ClusterID()
	has := n.hasConfiguration()
	n.gossip.update(func(m *memberMeta) {
		m.Applied = applied
		m.ClusterID = cid
		m.HasState = m.HasState || has
	})
}

func (n *Node) reconcile() {
	if n.seedPending() {
		return // restored state not yet in a snapshot (backup.go)
	}
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	configured := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		configured[string(s.ID)] = s
	}
	cid := n.ClusterID()
	commit := n.raft.CommitIndex()
	peers := n.gossip.peers()
	n.reapDead(configured, peers)
	for id, p := range peers {
		if id == n.cfg.NodeID || !p.alive() || p.meta.Raft == "" {
			continue
		}
		if _, ok := configured[id]; !ok && (p.meta.Leaving || n.recentlyRemoved(id)) {
			continue // leaving, or just removed: not to be added back
		}
		if p.meta.ClusterID != "" && p.meta.ClusterID != cid {
			continue // a member of another cluster: ignore it
		}
		addr := raft.ServerAddress(p.meta.Raft)
		s, ok := configured[id]
		switch {
		case !ok && n.cfg.ClosedMembership:
			n.closedOnce.Do(func() {
				n.logger.Error("not adding servers learnt of through gossip: client authentication is on and node-to-node authentication is off, so a server could be anyone; set --cluster-key-file or TLS on every node", "peer_id", id)
			})
		case (!ok || s.Address != addr) && !n.transport.Admit(n.dialCtx, id, addr):
			// With Raft TLS: not added, and a configured server keeps its
			// address, until that address shows a node certificate of our CA.
		case !ok:
			if err := n.await(n.raft.AddNonvoter(raft.ServerID(id), addr, 0, 5*time.Second)); err != nil {
				n.logger.Warn("adding a server as non-voter failed", "peer_id", id, "err", err)
				continue
			}
			n.logger.Info("added a server as non-voter", "peer_id", id, "raft_addr", addr)
		case s.Address != addr:
			var err error
			if s.Suffrage == raft.Voter {
				err = n.await(n.raft.AddVoter(raft.ServerID(id), addr, 0, 5*time.Second))
			} else {
				err = n.await(n.raft.AddNonvoter(raft.ServerID(id), addr, 0, 5*time.Second))
			}
			if err == nil {
				n.logger.Info("updated a server's raft address", "peer_id", id, "raft_addr", addr)
			}
		case s.Suffrage == raft.Nonvoter && p.meta.Applied+promoteLag >= commit && p.meta.Applied > 0:
			if err := n.await(n.raft.AddVoter(raft.ServerID(id), addr, 0, 5*time.Second)); err != nil {
				n.logger.Warn("promoting a non-voter failed", "peer_id", id, "err", err)
				continue
			}
			n.logger.Info("promoted a caught-up non-voter to voter", "peer_id", id)
		}
	}
}

// reapDead removes servers that gossip has reported dead for longer than
// ReapDeadAfter, keeping at least BootstrapExpect voters. Only "dead" counts:
// a node that left gracefully (SIGTERM) or is merely suspected stays.
func (n *Node) reapDead(configured map[string]raft.Server, peers map[string]peer) {
	if n.cfg.ReapDeadAfter <= 0 {
		return
	}
	now := time.Now()
	if n.deadSince == nil {
		n.deadSince = map[string]time.Time{}
	}
	voters := 0
	for _, s := range configured {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	for id, s := range configured {
		p, known := peers[id]
		if id == n.cfg.NodeID || (known && p.state != memberlist.StateDead) {
			delete(n.deadSince, id)
			continue
		}
		since, ok := n.deadSince[id]
		if !ok {
			n.deadSince[id] = now
			continue
		}
		if now.Sub(since) < n.cfg.ReapDeadAfter {
			continue
		}
		if s.Suffrage == raft.Voter && voters-1 < n.cfg.bootstrapExpect() {
			continue
		}
		if err := n.await(n.raft.RemoveServer(raft.ServerID(id), 0, 5*time.Second)); err != nil {
			n.logger.Warn("reaping a dead server failed", "peer_id", id, "err", err)
			continue
		}
		if s.Suffrage == raft.Voter {
			voters--
		}
		delete(n.deadSince, id)
		n.logger.Warn("reaped a server dead for longer than --reap-dead-after", "peer_id", id, "dead_for", now.Sub(since).Round(time.Second))
	}
}

// leaderAPI returns the leader's id and gRPC address ("" when unknown).
func (n *Node) leaderAPI() (string, string) {
	_, id := n.raft.LeaderWithID()
	if id == "" {
		return "", ""
	}
	if string(id) == n.cfg.NodeID {
		return string(id), n.cfg.APIAdvertise
	}
	if p, ok := n.gossip.peers()[string(id)]; ok {
		return string(id), p.meta.API
	}
	return string(id), ""
}

// notLeader is the error for a call this node cannot serve as a follower.
func (n *Node) notLeader() error {
	id, api := n.leaderAPI()
	if api == "" {
		return sessionstore.ErrNoLeader
	}
	return &sessionstore.NotLeaderError{LeaderID: id, LeaderAPI: api}
}
