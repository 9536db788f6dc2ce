package cluster

import (
	"context"
	"errors"
	"time"

	"github.com/sessionstore/sessionstore/storage"
)

// checkStateLater runs, once serving, the check of every page of state.db
// that a start after a clean stop skips (guard.go). Damage found fails
// readiness (Ready) and withdraws the clean stop, so the next start checks
// every page and moves the file aside; the node keeps serving what it can
// read meanwhile, as it did before the check ran.
func (n *Node) checkStateLater() {
	start := time.Now()
	err := n.state.CheckPages(n.ctx)
	switch {
	case err == nil:
		n.logger.Info("checked every page of the state database in the background", "seconds", time.Since(start).Seconds())
	case errors.Is(err, context.Canceled):
	case errors.Is(err, storage.ErrStateDamaged):
		n.stateDamage.Store(&err)
		n.logger.Error("the state database is damaged (found by the background page check after a clean start); "+
			"the node reports not ready, and its next start moves the file aside and rebuilds it from the latest snapshot and the Raft log: restart it",
			"err", err)
	default:
		n.logger.Warn("the background page check of the state database failed", "err", err)
	}
}
