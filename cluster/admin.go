package cluster

import (
	"context"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// Status is this node's view of the cluster.
func (n *Node) Status(ctx context.Context) (sessionstore.NodeStatus, error) {
	id, api := n.leaderAPI()
	return sessionstore.NodeStatus{
		NodeID: n.cfg.NodeID, State: n.raft.State().String(), LeaderID: id, LeaderAddress: api,
		Term: n.raft.CurrentTerm(), CommitIndex: n.raft.CommitIndex(), AppliedIndex: n.appliedIndex(),
		ClusterID: n.ClusterID(),
	}, nil
}

// appliedIndex is the last index whose effects are in the state: raft's
// dispatched index once the FSM holds every state-changing entry up to it
// (no-op and barrier entries never reach the FSM but count as applied).
func (n *Node) appliedIndex() uint64 {
	ra := n.raft.AppliedIndex()
	if n.fsm.AppliedIndex() >= n.lastStateIndex(ra) {
		return ra
	}
	return n.fsm.AppliedIndex()
}

// Members is the Raft configuration joined with gossip health.
func (n *Node) Members(ctx context.Context) ([]sessionstore.Member, error) {
	f := n.raft.GetConfiguration()
	if err := f.Error(); err != nil {
		return nil, err
	}
	ps := n.gossip.peers()
	var out []sessionstore.Member
	for _, s := range f.Configuration().Servers {
		m := sessionstore.Member{NodeID: string(s.ID), RaftAddress: string(s.Address), Suffrage: s.Suffrage.String(), Health: "unknown"}
		if p, ok := ps[string(s.ID)]; ok {
			m.APIAddress, m.Health = p.meta.API, p.health()
		}
		out = append(out, m)
	}
	return out, nil
}

// TransferLeadership hands leadership to toNodeID (any suitable voter when
// empty). Only the leader can; a follower answers with the leader to ask.
func (n *Node) TransferLeadership(ctx context.Context, toNodeID string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	// Refusals raft would make are answered here, as definite errors (raft's
	// own come back as futures whose outcome the caller cannot tell).
	if toNodeID == n.cfg.NodeID {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s already leads", sessionstore.Quote(toNodeID))
	}
	if n.voters() == 1 {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter: there is no one to hand leadership to", sessionstore.Quote(n.cfg.NodeID))
	}
	var f raft.Future
	if toNodeID == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		addr, ok := n.serverAddress(toNodeID)
		if !ok {
			return sessionstore.Errorf(sessionstore.ReasonNotFound, "node %s is not a member", sessionstore.Quote(toNodeID))
		}
		f = n.raft.LeadershipTransferToServer(raft.ServerID(toNodeID), addr)
	}
	if err := f.Error(); err != nil {
		return raftErr("leadership transfer", err)
	}
	return nil
}

// RemoveMember removes a server from the Raft configuration (the leader does;
// a follower answers with the leader to ask).
func (n *Node) RemoveMember(ctx context.Context, nodeID string) error {
	if n.raft.State() != raft.Leader {
		return n.notLeader()
	}
	if _, ok := n.serverAddress(nodeID); !ok {
		return sessionstore.Errorf(sessionstore.ReasonNotFound, "node %s is not a member", sessionstore.Quote(nodeID))
	}
	if n.voters() == 1 && nodeID == n.cfg.NodeID {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter; removing it would leave no cluster", sessionstore.Quote(nodeID))
	}
	if err := n.raft.RemoveServer(raft.ServerID(nodeID), 0, 10*time.Second).Error(); err != nil {
		return raftErr("remove "+nodeID, err)
	}
	n.mu.Lock()
	if n.removed == nil {
		n.removed = map[string]time.Time{}
	}
	n.removed[nodeID] = time.Now()
	n.mu.Unlock()
	n.logger.Info("removed a server from the configuration", "peer_id", nodeID)
	return nil
}

// recentlyRemoved reports whether this node (as leader) removed id within
// the last removedQuiet: gossip may still show the server alive for a
// moment, and reconcile must not add it straight back.
func (n *Node) recentlyRemoved(id string) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	t, ok := n.removed[id]
	return ok && time.Since(t) < removedQuiet
}

// removedQuiet is how long a removed server is not re-added from gossip.
const removedQuiet = 30 * time.Second

// Leave takes this node out of the cluster: leadership is handed over if it
// leads, the leader removes it from the Raft configuration, and it leaves the
// gossip pool. The node keeps running until it is stopped.
func (n *Node) Leave(ctx context.Context) (err error) {
	// Say so in gossip first: the leader's reconcile does not add a leaving
	// server back while its removal and its departure from gossip race.
	n.gossip.update(func(m *memberMeta) { m.Leaving = true })
	defer func() {
		if err != nil {
			n.gossip.update(func(m *memberMeta) { m.Leaving = false })
		}
	}()
	if n.raft.State() == raft.Leader && n.voters() > 1 {
		if err := n.raft.LeadershipTransfer().Error(); err != nil {
			return raftErr("hand leadership over before leaving", err)
		}
	}
	if n.raft.State() == raft.Leader {
		// The last voter: removing itself would leave no cluster at all.
		if n.voters() <= 1 {
			return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter; it cannot leave", sessionstore.Quote(n.cfg.NodeID))
		}
		if err := n.RemoveMember(ctx, n.cfg.NodeID); err != nil {
			return err
		}
	} else {
		if err := n.askLeaderToRemove(ctx); err != nil {
			return err
		}
	}
	return n.gossip.leave(5 * time.Second)
}

func (n *Node) serverAddress(id string) (raft.ServerAddress, bool) {
	f := n.raft.GetConfiguration()
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
