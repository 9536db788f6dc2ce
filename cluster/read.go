package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// readBarrier makes a read linearizable: this node must be the leader of a term
// whose barrier has completed, confirm leadership with a quorum, and wait until
// its applied index reaches the commit index observed at the start of the read.
// STALE reads skip all of it and serve local applied state.
func (n *Node) readBarrier(ctx context.Context, c sessionstore.Consistency) error {
	if c == sessionstore.Stale {
		return nil
	}
	if n.raft.State() != raft.Leader {
		return sessionstore.ErrNoLeader
	}
	if !n.isLeaderReady() {
		return sessionstore.ErrNoLeader
	}
	if err := n.raft.VerifyLeader().Error(); err != nil {
		return sessionstore.ErrNoLeader
	}
	return n.waitApplied(ctx, n.raft.CommitIndex())
}

// waitApplied blocks until the FSM has applied index or ctx ends.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for {
		ch := n.fsm.Changed()
		if n.fsm.AppliedIndex() >= index {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return sessionstore.ErrShuttingDown
		}
	}
}

// ReadyForReads reports whether linearizable reads are served here now.
func (n *Node) ReadyForReads() bool { return n.isLeaderReady() }
