package cluster

import (
	"time"

	"github.com/hashicorp/memberlist"
	"github.com/hashicorp/raft"
)

// promoteLag is how far (in entries) a non-voter may trail the commit index
// and still count as caught up for promotion.
const promoteLag = 1024

// runReconcile keeps gossip metadata fresh and, on the leader, folds gossip
// into the Raft configuration: servers of this cluster (or new, empty ones)
// that are alive but not configured join as non-voters, and caught-up
// non-voters are promoted. Nothing is ever removed here: a server leaves only
// through Leave or RemoveMember, so restarts never shrink the cluster.
func (mb *membership) runReconcile() {
	t := time.NewTicker(mb.cfg.ReconcileInterval)
	defer t.Stop()
	for {
		events := mb.gossip.events()
		select {
		case <-mb.ctx.Done():
			return
		case <-t.C:
		case <-events:
		}
		mb.publishMeta()
		if mb.raft.State() == raft.Leader {
			mb.reconcile()
		}
	}
}

// publishMeta refreshes what this node gossips about itself.
func (mb *membership) publishMeta() {
	applied := mb.local.applied()
	cid := mb.local.clusterID()
	has := mb.hasConfiguration()
	var free, contact gossipInt
	if f, ok := mb.local.diskFree(); ok {
		free = knownInt(f >> 20)
	}
	if c, ok := mb.lastContact(); ok {
		contact = knownInt(int64(c / time.Second))
	}
	mb.gossip.update(func(m *memberMeta) {
		m.Applied = applied
		m.ClusterID = cid
		m.HasState = m.HasState || has
		m.FreeMiB, m.ContactS = free, contact
	})
}

func (mb *membership) reconcile() {
	if mb.local.seedPending() {
		return // restored state not yet in a snapshot (backup.go)
	}
	f := mb.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return
	}
	configured := map[string]raft.Server{}
	for _, s := range f.Configuration().Servers {
		configured[string(s.ID)] = s
	}
	cid := mb.local.clusterID()
	commit := mb.raft.CommitIndex()
	peers := mb.gossip.peers()
	mb.reapDead(configured, peers)
	for id, p := range peers {
		if id == mb.cfg.NodeID || !p.alive() || p.meta.Raft == "" {
			continue
		}
		if _, ok := configured[id]; !ok && (p.meta.Leaving || mb.recentlyRemoved(id)) {
			continue // leaving, or just removed: not to be added back
		}
		if p.meta.ClusterID != "" && p.meta.ClusterID != cid {
			continue // a member of another cluster: ignore it
		}
		addr := raft.ServerAddress(p.meta.Raft)
		s, ok := configured[id]
		switch {
		case !ok && mb.cfg.ClosedMembership:
			mb.closedOnce.Do(func() {
				mb.logger.Error("not adding servers learnt of through gossip: client authentication is on and node-to-node authentication is off, so a server could be anyone; set --cluster-key-file or TLS on every node", "peer_id", id)
			})
		case (!ok || s.Address != addr) && !mb.local.admit(id, addr):
			// With Raft TLS: not added, and a configured server keeps its
			// address, until that address shows a node certificate of our CA.
		case !ok:
			if err := await(mb.ctx, mb.raft.AddNonvoter(raft.ServerID(id), addr, 0, 5*time.Second)); err != nil {
				mb.logger.Warn("adding a server as non-voter failed", "peer_id", id, "err", err)
				continue
			}
			mb.logger.Info("added a server as non-voter", "peer_id", id, "raft_addr", addr)
		case s.Address != addr:
			var err error
			if s.Suffrage == raft.Voter {
				err = await(mb.ctx, mb.raft.AddVoter(raft.ServerID(id), addr, 0, 5*time.Second))
			} else {
				err = await(mb.ctx, mb.raft.AddNonvoter(raft.ServerID(id), addr, 0, 5*time.Second))
			}
			if err == nil {
				mb.logger.Info("updated a server's raft address", "peer_id", id, "raft_addr", addr)
			}
		case s.Suffrage == raft.Nonvoter && p.meta.Applied+promoteLag >= commit && p.meta.Applied > 0:
			if err := await(mb.ctx, mb.raft.AddVoter(raft.ServerID(id), addr, 0, 5*time.Second)); err != nil {
				mb.logger.Warn("promoting a non-voter failed", "peer_id", id, "err", err)
				continue
			}
			mb.logger.Info("promoted a caught-up non-voter to voter", "peer_id", id)
		}
	}
}

// reapDead removes servers that gossip has reported dead for longer than
// ReapDeadAfter, keeping at least BootstrapExpect voters. Only "dead" counts:
// a node that left gracefully (SIGTERM) or is merely suspected stays.
func (mb *membership) reapDead(configured map[string]raft.Server, peers map[string]peer) {
	if mb.cfg.ReapDeadAfter <= 0 {
		return
	}
	now := time.Now()
	if mb.deadSince == nil {
		mb.deadSince = map[string]time.Time{}
	}
	voters := 0
	for _, s := range configured {
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	for id, s := range configured {
		p, known := peers[id]
		if id == mb.cfg.NodeID || (known && p.state != memberlist.StateDead) {
			delete(mb.deadSince, id)
			continue
		}
		since, ok := mb.deadSince[id]
		if !ok {
			mb.deadSince[id] = now
			continue
		}
		if now.Sub(since) < mb.cfg.ReapDeadAfter {
			continue
		}
		if s.Suffrage == raft.Voter && voters-1 < mb.cfg.bootstrapExpect() {
			continue
		}
		if err := await(mb.ctx, mb.raft.RemoveServer(raft.ServerID(id), 0, 5*time.Second)); err != nil {
			mb.logger.Warn("reaping a dead server failed", "peer_id", id, "err", err)
			continue
		}
		if s.Suffrage == raft.Voter {
			voters--
		}
		delete(mb.deadSince, id)
		mb.logger.Warn("reaped a server dead for longer than --reap-dead-after", "peer_id", id, "dead_for", now.Sub(since).Round(time.Second))
	}
}
