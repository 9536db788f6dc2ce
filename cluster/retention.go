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

func (n *Node) policies() []*fsmpb.RetentionPolicy {
	var out []*fsmpb.RetentionPolicy
	for _, p := range n.cfg.Retention {
		out = append(out, &fsmpb.RetentionPolicy{CwdPrefix: p.CwdPrefix, MaxAgeMs: p.MaxAge.Milliseconds()})
	}
	return out
}

// Retention applies the node's retention policies through Raft and returns
// the sessions deleted; with dryRun it only lists what a sweep now would
// delete (the same rule, on the leader's state and clock).
func (n *Node) Retention(ctx context.Context, dryRun bool) ([]string, error) {
	pol := n.policies()
	if len(pol) == 0 {
		return nil, sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "no retention policy is configured on this node (--retention)")
	}
	if dryRun {
		if err := n.readBarrier(ctx, sessionstore.Linearizable); err != nil {
			return nil, err
		}
		var due []string
		err := n.state.View(func(tx *storage.Tx) error {
			var err error
			// The clock a sweep proposed now would be applied at.
			due, err = fsm.Expired(tx, pol, fsm.Now(tx, time.Now().UnixMilli()))
			return err
		})
		return due, err
	}
	if n.raft.State() == raft.Leader && !n.members.votersSupport(fsm.DeleteVersion) {
		return nil, sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
			"retention needs every voter at command version %d or later, and at least one has not advertised it (an older build?): upgrade every node first", fsm.DeleteVersion)
	}
	res, err := n.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Sweep{Sweep: &fsmpb.Sweep{Policies: pol}}})
	if err != nil {
		return nil, err
	}
	for _, id := range res.Deleted {
		n.logger.Info("retention deleted a session", "session", id)
	}
	n.metrics.RetentionDeleted.Add(float64(len(res.Deleted)))
	return res.Deleted, nil
}

// runRetention sweeps on the leader every RetentionSweep while policies are
// configured.
func (n *Node) runRetention() {
	if len(n.cfg.Retention) == 0 || n.cfg.RetentionSweep <= 0 {
		return
	}
	n.every(n.cfg.RetentionSweep, func() bool {
		if n.raft.State() != raft.Leader || !n.members.votersSupport(fsm.DeleteVersion) {
			return false
		}
		ctx, cancel := context.WithTimeout(n.ctx, n.cfg.ApplyTimeout)
		deleted, err := n.Retention(ctx, false)
		cancel()
		if err != nil {
			n.logger.Warn("retention sweep failed; the next one retries", "err", err)
		} else {
			n.logger.Info("retention sweep", "deleted", len(deleted))
		}
		return false
	})
}
