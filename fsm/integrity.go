package fsm

import (
	"bytes"
	"fmt"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// Integrity of the state database (storage/checksum.go): every read of a
// record or an event is verified; damage is a CORRUPTION error, counted in
// sessionstore_checksum_failures_total, never wrong bytes.
//
// Repair: a damaged or missing event is rewritten from this node's artifact,
// but only with the bytes its stored checksum names (artifacts.Writer.RepairEvents).
// That happens on its own when the FSM meets the damage while applying, and
// after a read returned the error (cluster). A damaged record, or an event the
// artifact does not hold, cannot be repaired here: the node refuses to serve
// it, and the operator rebuilds the state database from a snapshot and the
// log (README "Failure modes").

// Repairer rewrites damaged events of a session inside tx and returns how many.
type Repairer interface {
	RepairEvents(tx *storage.Tx, id string, inc uint64, nextSeq int64) (int, error)
}

// ReadRecord reads a session's record, verified, and decodes it (nil: unknown id).
func ReadRecord(tx *storage.Tx, id string) (*fsmpb.SessionRecord, error) {
	b, err := tx.Record(id)
	if err != nil {
		return nil, err
	}
	return DecodeRecord(b)
}

// VerifyAll verifies every record and event of the state tx sees: before a
// snapshot is sent and before an installed one replaces the state. A state
// whose checksums are not current (2f2e872's) has nothing to verify yet.
func VerifyAll(tx *storage.Tx) error {
	if !tx.SumsCurrent() {
		return nil
	}
	return tx.ForEachSession("", false, func(id string, raw []byte) error {
		rec, err := DecodeRecord(raw)
		if err != nil || rec == nil {
			return err
		}
		return tx.ForEachEvent(id, rec.Incarnation, 0, rec.NextSeq, func(int64, []byte) error { return nil })
	})
}

// EnsureChecksums converts a state database written (wholly or in part) by a
// build without checksums: it stores the checksum of every record and of the
// events that have none, and marks the checksums current. It runs at open and
// after a snapshot install, and costs nothing when they are current already.
// It returns how many sessions it converted.
func EnsureChecksums(db *storage.StateDB) (int, error) {
	n := 0
	err := db.Update(func(tx *storage.Tx) error {
		if tx.SumsCurrent() || tx.Layout() >= 2 {
			return nil
		}
		type rec struct {
			id  string
			raw []byte
			inc uint64
		}
		var recs []rec
		err := tx.ForEachSessionUnchecked(func(id string, raw []byte) error {
			r, err := DecodeRecord(raw)
			if err != nil {
				return fmt.Errorf("session %q: %w", id, err)
			}
			if r != nil {
				recs = append(recs, rec{id, bytes.Clone(raw), r.Incarnation})
			}
			return nil
		})
		if err != nil {
			return err
		}
		// Written after the walk: bbolt cursors must not see their bucket change.
		for _, r := range recs {
			if err := tx.PutRecord(r.id, r.raw, nil); err != nil {
				return err
			}
			if _, err := tx.AddEventSums(r.id, r.inc, tx.SumsEnd(r.id)); err != nil {
				return err
			}
		}
		n = len(recs)
		return tx.MarkSumsCurrent()
	})
	return n, err
}
