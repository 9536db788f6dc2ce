package cluster

import (
	"context"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// stamp adds the caller and this node's quotas to a Create or Append, once
// every voter has said (in gossip) that it applies command version 3: an
// older replica would refuse the entry. Until then quotas are not enforced,
// and the node says so.
func (ss *Sessions) stamp(ctx context.Context, cmd *fsmpb.Command) *fsmpb.Command {
	caller := sessionstore.CallerFrom(ctx)
	lim := &fsmpb.Limits{MaxSessionEvents: ss.cfg.MaxSessionEvents, MaxSessionBytes: ss.cfg.MaxSessionBytes,
		MaxPrincipalSessions: ss.cfg.MaxSessionsPerPrincipal}
	if caller.MaxSessions > 0 {
		lim.MaxPrincipalSessions = caller.MaxSessions
	}
	if caller.Name == "" && lim.MaxSessionEvents == 0 && lim.MaxSessionBytes == 0 && lim.MaxPrincipalSessions == 0 {
		return cmd
	}
	v := ss.members.votersVersion()
	if v < fsm.PrincipalsVersion {
		ss.warnOnce.Do(func() {
			ss.logger.Warn("quotas are not enforced yet: a voter has not advertised command version 3 (an older build?); they start once every voter runs this version")
		})
		return cmd
	}
	// Version 5: the byte quota counts the header and kept answers too.
	lim.CountStored = v >= fsm.RequestsVersion
	cmd.Principal, cmd.Limits = caller.Name, lim
	return cmd
}

// stampStored gives a plan-mode call the session byte quota, once every
// voter applies version 5, so the answer it keeps (ExitPlan feedback, /plan
// input) counts against --max-session-bytes.
func (ss *Sessions) stampStored(cmd *fsmpb.Command) {
	if ss.cfg.MaxSessionBytes > 0 && ss.members.votersSupport(fsm.RequestsVersion) {
		cmd.Limits = &fsmpb.Limits{MaxSessionBytes: ss.cfg.MaxSessionBytes, CountStored: true}
	}
}

// acquire reserves size bytes of the budget of commands waiting for Raft on
// this node: back-pressure instead of an unbounded queue.
func (pr *proposer) acquire(ctx context.Context, size int64) error {
	timer := time.NewTimer(pr.cfg.PendingWait)
	defer timer.Stop()
	for {
		pr.mu.Lock()
		if pr.pending == 0 || pr.pending+size <= pr.cfg.MaxPendingBytes {
			pr.pending += size
			pr.mu.Unlock()
			return nil
		}
		freed, pending := pr.freed, pr.pending
		pr.mu.Unlock()
		select {
		case <-freed:
		case <-timer.C:
			return sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
				"this node's Raft pipeline is full (%d bytes of commands waiting, limit %d); the command was not applied: retry later",
				pending, pr.cfg.MaxPendingBytes)
		case <-ctx.Done():
			return ctx.Err()
		case <-pr.ctx.Done():
			return sessionstore.ErrShuttingDown
		}
	}
}

func (pr *proposer) release(size int64) {
	pr.mu.Lock()
	pr.pending -= size
	close(pr.freed)
	pr.freed = make(chan struct{})
	pr.mu.Unlock()
}
