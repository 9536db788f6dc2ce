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
func (ss *Sessions) readBarrier(ctx context.Context, c sessionstore.Consistency) error {
	if c == sessionstore.Stale {
		return nil
	}
	if ss.raft.State() != raft.Leader {
		return ss.members.notLeader()
	}
	if !ss.node.leaderReady() {
		return sessionstore.ErrNoLeader
	}
	if err := ss.raft.VerifyLeader().Error(); err != nil {
		return sessionstore.ErrNoLeader
	}
	return ss.waitApplied(ctx, ss.raft.CommitIndex())
}

// waitApplied blocks until the FSM holds the effects of every entry up to
// index, or ctx ends.
func (ss *Sessions) waitApplied(ctx context.Context, index uint64) error {
	target := ss.lastStateIndex(index)
	for {
		ch := ss.fsm.Changed()
		if ss.fsm.AppliedIndex() >= target {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-ss.ctx.Done():
			return sessionstore.ErrShuttingDown
		}
	}
}

// lastStateIndex returns the largest index <= index whose entry changes the
// FSM. Raft hands the FSM only command and configuration entries: a leader's
// no-op and barrier entries never advance the FSM's applied index, so waiting
// for the commit index itself would hang after a restart until the next write.
func (ss *Sessions) lastStateIndex(index uint64) uint64 {
	applied := ss.fsm.AppliedIndex()
	for i := index; i > applied; i-- {
		var l raft.Log
		if err := ss.logs.GetLog(i, &l); err != nil {
			return i // unknown: be conservative
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return i
		}
	}
	return applied
}
