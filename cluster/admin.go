package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// Status is this node's view of the cluster.
func (n *Node) Status(ctx context.Context) (sessionstore.NodeStatus, error) {
	id, api := n.members.leaderAPI()
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
	if n.fsm.AppliedIndex() >= n.sessions.lastStateIndex(ra) {
		return ra
	}
	return n.fsm.AppliedIndex()
}

// TransferLeadership hands leadership to toNodeID (any suitable voter when
// empty). Only the leader can; a follower answers with the leader to ask.
func (n *Node) TransferLeadership(ctx context.Context, toNodeID string) error {
	if n.raft.State() != raft.Leader {
		return n.members.notLeader()
	}
	// Refusals raft would make are answered here, as definite errors (raft's
	// own come back as futures whose outcome the caller cannot tell).
	if toNodeID == n.cfg.NodeID {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s already leads", sessionstore.Quote(toNodeID))
	}
	if n.members.voters() == 1 {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "node %s is the only voter: there is no one to hand leadership to", sessionstore.Quote(n.cfg.NodeID))
	}
	var f raft.Future
	if toNodeID == "" {
		f = n.raft.LeadershipTransfer()
	} else {
		addr, ok := n.members.serverAddress(toNodeID)
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

// Members is the Raft configuration joined with gossip health.
func (n *Node) Members(ctx context.Context) ([]sessionstore.Member, error) {
	return n.members.Members(ctx)
}

// RemoveMember removes a server from the Raft configuration (the leader does;
// a follower answers with the leader to ask).
func (n *Node) RemoveMember(ctx context.Context, nodeID string) error {
	return n.members.RemoveMember(ctx, nodeID)
}

// Leave takes this node out of the cluster (membership.Leave).
func (n *Node) Leave(ctx context.Context) error { return n.members.Leave(ctx) }

// ClientHints returns the hints every answer carries (hints.go).
func (n *Node) ClientHints() *sessionstore.ClientHints { return n.members.ClientHints() }

// Retention applies the retention policies now (Sessions.Retention).
func (n *Node) Retention(ctx context.Context, dryRun bool) ([]string, error) {
	return n.sessions.Retention(ctx, dryRun)
}
