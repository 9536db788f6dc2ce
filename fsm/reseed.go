package fsm

import (
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// ReseedStats counts what Reseed changed.
type ReseedStats struct {
	Sessions int // session records
	Leases   int // leases dropped
}

// Reseed prepares a restored state database to seed a NEW cluster (`node
// restore`), in one transaction:
//
//   - the cluster id and the applied Raft index/term are cleared
//     (storage.Tx.ResetForNewCluster): the new cluster's first leader mints a
//     new id, and its Raft log, which starts at 1 again, is applied in full;
//   - every session's last-change index is set to 0. Revisions are
//     <cluster-id>:<incarnation>:<last-change-index>; the old indexes would
//     come round again in the new log, so a revision the new cluster hands
//     out could equal one it handed out for other content of the same
//     session. With 0, every restored session's first revision is
//     <new-id>:<incarnation>:0 and every later change has an index ≥ 1;
//   - leases are dropped: a restored cluster starts with no live owner (the
//     agent hosts that held them were talking to another cluster). Epochs stay,
//     so the rules are those of an expired lease: the next Prepare or Load
//     repairs an open turn and bumps the epoch, fencing the old owner.
//
// Sessions, events, frames, request-id results, plan-mode state and the
// leader clock are kept as they are.
func Reseed(db *storage.StateDB) (ReseedStats, error) {
	var st ReseedStats
	// A backup of a build without checksums (2f2e872) gets them first.
	if _, err := EnsureChecksums(db); err != nil {
		return st, err
	}
	err := db.Update(func(tx *storage.Tx) error {
		if err := tx.ResetForNewCluster(); err != nil {
			return err
		}
		type upd struct {
			id  string
			rec *fsmpb.SessionRecord
		}
		var ups []upd
		err := tx.ForEachSession("", false, func(id string, raw []byte) error {
			rec, err := DecodeRecord(raw)
			if err != nil || rec == nil {
				return err
			}
			st.Sessions++
			if rec.Lease != nil {
				st.Leases++
				rec.Lease = nil
			}
			rec.LastChangeIndex = 0
			ups = append(ups, upd{id, rec})
			return nil
		})
		if err != nil {
			return err
		}
		// Written after the walk: bbolt cursors must not see their bucket change.
		for _, u := range ups {
			if err := PutRecord(tx, u.id, u.rec); err != nil {
				return err
			}
		}
		return nil
	})
	return st, err
}
