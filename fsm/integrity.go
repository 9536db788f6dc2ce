package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"os"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// Integrity of the state database (storage/checksum.go): every read of a
// record or an event is verified; damage is a CORRUPTION error, counted in
// sessionstore_checksum_failures_total, never wrong bytes.
//
// Repair: a damaged or missing event is rewritten from this node's artifact,
// but only with the bytes its stored checksum names (Artifacts.RepairEvents).
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

// errNoArtifact: the session has no artifact on this node to repair from.
var errNoArtifact = errors.New("no artifact to repair from")

// RepairEvents rewrites, inside tx, each event of session id (incarnation inc,
// seqs below nextSeq) whose stored bytes fail their checksum or are missing,
// with the artifact's line for that seq when the line has exactly the stored
// checksum. The artifact's zstd frames carry their own checksums; the stored
// checksum decides.
func (a *Artifacts) RepairEvents(tx *storage.Tx, id string, inc uint64, nextSeq int64) (int, error) {
	a.mu.Lock()
	w, ok := a.marks[id]
	a.mu.Unlock()
	if !ok || w.Path == "" {
		return 0, errNoArtifact
	}
	if _, err := storage.ArtifactRel(a.root, w.Path); err != nil {
		return 0, err
	}
	data, err := os.ReadFile(w.Path)
	if err != nil {
		return 0, err
	}
	d, err := storage.DecodeArtifact(data)
	if err != nil {
		return 0, err
	}
	lines := bytes.Split(d.Text, []byte{'\n'}) // line 0 is the header; line seq+1 is event seq
	fixed := 0
	for seq := int64(0); seq < nextSeq && int(seq)+1 < len(lines); seq++ {
		ok, err := tx.RepairEvent(id, inc, seq, lines[seq+1])
		if err != nil {
			return fixed, err
		}
		if ok {
			fixed++
		}
	}
	if fixed > 0 {
		a.logger.Warn("damaged events rewritten from the artifact", "session", id, "events", fixed)
	}
	return fixed, nil
}
