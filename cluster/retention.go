package cluster

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// RetentionPolicy expires materialised sessions whose cwd starts with
// CwdPrefix ("": every session) once their last append is older than MaxAge.
// Of several matching policies the one with the longest prefix decides.
type RetentionPolicy struct {
	CwdPrefix string
	MaxAge    time.Duration
}

// ParseRetention parses --retention: comma-separated <cwd-prefix>=<max age>,
// "*" standing for every session (e.g. "*=2160h,/tmp/=24h").
func ParseRetention(s string) ([]RetentionPolicy, error) {
	var out []RetentionPolicy
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part == "" {
			continue
		}
		i := strings.LastIndex(part, "=")
		if i < 0 {
			return nil, fmt.Errorf("retention %q: want <cwd-prefix>=<max age>, e.g. /tmp/=24h or *=2160h", part)
		}
		prefix, age := part[:i], part[i+1:]
		if prefix == "*" {
			prefix = ""
		}
		d, err := time.ParseDuration(age)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("retention %q: max age %q must be a positive duration such as 720h", part, age)
		}
		if seen[prefix] {
			return nil, fmt.Errorf("retention: prefix %q given twice", part[:i])
		}
		seen[prefix] = true
		out = append(out, RetentionPolicy{CwdPrefix: prefix, MaxAge: d})
	}
	sort.Slice(out, func(a, b int) bool { return out[a].CwdPrefix < out[b].CwdPrefix })
	return out, nil
}

func (ss *Sessions) policies() []*fsmpb.RetentionPolicy {
	var out []*fsmpb.RetentionPolicy
	for _, p := range ss.cfg.Retention {
		out = append(out, &fsmpb.RetentionPolicy{CwdPrefix: p.CwdPrefix, MaxAgeMs: p.MaxAge.Milliseconds()})
	}
	return out
}

// Retention applies the node's retention policies through Raft and returns
// the sessions deleted; with dryRun it only lists what a sweep now would
// delete (the same rule, on the leader's state and clock).
func (ss *Sessions) Retention(ctx context.Context, dryRun bool) ([]string, error) {
	pol := ss.policies()
	if len(pol) == 0 {
		return nil, sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "no retention policy is configured on this node (--retention)")
	}
	if dryRun {
		if err := ss.readBarrier(ctx, sessionstore.Linearizable); err != nil {
			return nil, err
		}
		var due []string
		err := ss.state.View(func(tx *storage.Tx) error {
			var err error
			// The clock a sweep proposed now would be applied at.
			due, err = fsm.Expired(tx, pol, fsm.Now(tx, time.Now().UnixMilli()))
			return err
		})
		return due, err
	}
	if ss.raft.State() == raft.Leader && !ss.members.votersSupport(fsm.DeleteVersion) {
		return nil, sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
			"retention needs every voter at command version %d or later, and at least one has not advertised it (an older build?): upgrade every node first", fsm.DeleteVersion)
	}
	res, err := ss.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Sweep{Sweep: &fsmpb.Sweep{Policies: pol}}})
	if err != nil {
		return nil, err
	}
	for _, id := range res.Deleted {
		ss.logger.Info("retention deleted a session", "session", id)
	}
	ss.metrics.RetentionDeleted.Add(float64(len(res.Deleted)))
	return res.Deleted, nil
}

// runRetention sweeps on the leader every RetentionSweep while policies are
// configured.
func (ss *Sessions) runRetention() {
	if len(ss.cfg.Retention) == 0 || ss.cfg.RetentionSweep <= 0 {
		return
	}
	every(ss.ctx, ss.cfg.RetentionSweep, func() bool {
		if ss.raft.State() != raft.Leader || !ss.members.votersSupport(fsm.DeleteVersion) {
			return false
		}
		ctx, cancel := context.WithTimeout(ss.ctx, ss.cfg.ApplyTimeout)
		deleted, err := ss.Retention(ctx, false)
		cancel()
		if err != nil {
			ss.logger.Warn("retention sweep failed; the next one retries", "err", err)
		} else {
			ss.logger.Info("retention sweep", "deleted", len(deleted))
		}
		return false
	})
}
