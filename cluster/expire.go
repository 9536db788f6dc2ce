package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// runExpiry lets the leader delete Create registrations that never got an
// event within RegistrationTTL (leader time; each delete carries the
// registration's revision, so an append that lands first wins).
func (ss *Sessions) runExpiry() {
	if ss.cfg.RegistrationTTL <= 0 {
		return
	}
	every(ss.ctx, ss.cfg.ExpirySweep, func() bool {
		if ss.raft.State() == raft.Leader && ss.members.votersSupport(fsm.DeleteVersion) {
			ss.expireRegistrations()
		}
		return false
	})
}

// every runs fn every d until ctx (the node's) ends or fn reports it is done.
func every(ctx context.Context, d time.Duration, fn func() (done bool)) {
	t := time.NewTicker(d)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if fn() {
			return
		}
	}
}

func (ss *Sessions) expireRegistrations() {
	cutoff := time.Now().Add(-ss.cfg.RegistrationTTL).UnixMilli()
	type expired struct{ id, rev string }
	var due []expired
	_ = ss.state.View(func(tx *storage.Tx) error {
		cid := tx.ClusterID()
		return tx.ForEachSession("", false, func(id string, b []byte) error {
			s, err := fsm.DecodeSession(cid, b)
			if err != nil || s == nil || s.Visible() || s.Record.CreatedUnixMs > cutoff {
				return nil
			}
			due = append(due, expired{id, s.Revision})
			return nil
		})
	})
	removed := 0
	for _, e := range due {
		ctx, cancel := context.WithTimeout(ss.ctx, ss.cfg.ApplyTimeout)
		_, err := ss.Delete(ctx, e.id, e.rev, "expire-"+e.rev)
		cancel()
		switch {
		case err == nil:
			removed++
		case errors.Is(err, sessionstore.ErrRevisionMismatch), errors.Is(err, sessionstore.ErrNotFound):
			// Materialised or deleted meanwhile.
		default:
			ss.logger.Warn("expiring a registration failed; the next sweep retries", "session", e.id, "err", err)
		}
	}
	if removed > 0 {
		ss.logger.Info("expired registrations that never got an event", "count", removed, "ttl", ss.cfg.RegistrationTTL)
	}
}
