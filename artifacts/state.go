package artifacts

import (
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// sessionState is what a pass reads of the state database (stateDB); the
// tests give the writer one in memory.
type sessionState interface {
	// view runs fn in one read transaction.
	view(fn func(stateView) error) error
}

// stateView is the state as one read transaction of sessionState sees it.
type stateView interface {
	// sessionIDs calls fn with the id of every session that has a record.
	sessionIDs(fn func(id string)) error
	// session reads id's session; nil when there is none.
	session(id string) (*fsm.Session, error)
	// appendLines appends to dst the event lines of frames from..to of
	// incarnation inc of session id (each event and a `\n`).
	appendLines(dst []byte, id string, inc, from, to uint64) ([]byte, error)
}

// stateDB is the sessionState of the node's state database.
type stateDB struct{ db *storage.StateDB }

func (s stateDB) view(fn func(stateView) error) error {
	return s.db.View(func(tx *storage.Tx) error { return fn(stateTx{tx}) })
}

// stateTx is a read transaction of the state database.
type stateTx struct{ tx *storage.Tx }

func (t stateTx) sessionIDs(fn func(id string)) error {
	// Ids only: a damaged record fails that session's sync, not every
	// session's.
	return t.tx.ForEachSessionUnchecked(func(id string, _ []byte) error {
		fn(id)
		return nil
	})
}

func (t stateTx) session(id string) (*fsm.Session, error) { return fsm.ReadSession(t.tx, id) }

func (t stateTx) appendLines(dst []byte, id string, inc, from, to uint64) ([]byte, error) {
	return appendLines(dst, t.tx, id, inc, from, to)
}

// appendLines appends to dst the event lines of frames from..to of a
// session (each event and a `\n`), as EncodeFrames holds them frame by frame,
// and returns the extended slice. The events of all those frames are read in
// one pass over the session's events (not one per frame).
func appendLines(dst []byte, tx *storage.Tx, id string, inc uint64, from, to uint64) ([]byte, error) {
	if from < 1 || from > to {
		return dst, nil
	}
	start := tx.FrameEnd(id, inc, from-1)
	var end int64
	if from == 1 {
		// A whole artifact: every frame's end in one walk, not one each.
		if all := tx.FrameEnds(id, inc); uint64(len(all)) >= to && increasing(start, all[:to]) {
			end = all[to-1]
		} else {
			end = -1
		}
	} else {
		end = start
		for n := from; n <= to && end >= 0; n++ {
			next := tx.FrameEnd(id, inc, n)
			if next < end {
				end = -1
			} else {
				end = next
			}
		}
	}
	if end < 0 {
		// Not a layout this writer made: frame by frame, as EncodeFrames.
		var err error
		for n := from; n <= to && err == nil; n++ {
			dst, err = frameLines(dst, tx, id, inc, n)
		}
		return dst, err
	}
	err := tx.ForEachEvent(id, inc, start, end, func(_ int64, ev []byte) error {
		dst = append(append(dst, ev...), '\n')
		return nil
	})
	return dst, err
}

// increasing reports whether ends never decrease, starting from start.
func increasing(start int64, ends []int64) bool {
	for _, e := range ends {
		if e < start {
			return false
		}
		start = e
	}
	return true
}

// frameLines appends to dst the event lines of frame n alone.
func frameLines(dst []byte, tx *storage.Tx, id string, inc uint64, n uint64) ([]byte, error) {
	err := tx.ForEachEvent(id, inc, tx.FrameEnd(id, inc, n-1), tx.FrameEnd(id, inc, n), func(_ int64, ev []byte) error {
		dst = append(append(dst, ev...), '\n')
		return nil
	})
	return dst, err
}

// EncodeFrames encodes a session's event frames from..to (1-based, inclusive)
// of incarnation inc, each holding the events of one Append or repair
// command, one line each: the rendering served while a file lags.
func EncodeFrames(tx *storage.Tx, id string, inc uint64, from, to uint64) ([][]byte, error) {
	var out [][]byte
	var plain []byte
	for n := from; n <= to && n >= 1; n++ {
		var err error
		if plain, err = frameLines(plain[:0], tx, id, inc, n); err != nil {
			return nil, err
		}
		out = append(out, storage.EncodeFrame(nil, plain))
	}
	return out, nil
}
