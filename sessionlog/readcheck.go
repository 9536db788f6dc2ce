package sessionlog

import "github.com/sessionstore/sessionstore"

// ReadCheck is the whole check a read runs on a stored log before it serves
// a view of it, kept incrementally: the stored header (CheckStoredHeader),
// Normalize's rules over every event (Normalizer), then ValidateSession's
// over the normalised events and the closers an open turn would need
// (Validator). It is the one statement of "what a read accepts": reads use
// it to refuse a log, and a strict write uses it to refuse a batch after
// which a read would refuse the log (the write rule is the read rule).
//
// Add the log's events in order, a chunk at a time; Err tells at any point
// what a read of the log so far fails with. It keeps what the rules refer
// back to (see Normalizer and Validator), not the events.
type ReadCheck struct {
	headerErr error
	norm      *Normalizer
	val       *Validator
	n         int64 // events added
}

// NewReadCheck starts the check of session id's log (rawLogPath as for
// Normalize: it only appears in error texts).
func NewReadCheck(id string, h sessionstore.Header, rawLogPath string) *ReadCheck {
	return &ReadCheck{
		headerErr: CheckStoredHeader(id, h, rawLogPath),
		norm:      NewNormalizer(id, rawLogPath),
		val:       NewValidator(id),
	}
}

// Add checks the next events of the log and returns them normalised (nil
// once the log cannot be normalised: a read refuses it whatever follows).
// Its error is not the log's (see Err) but a failure to normalise events
// the check had accepted, which means they changed in between: corruption.
func (r *ReadCheck) Add(events [][]byte) ([][]byte, error) {
	r.n += int64(len(events))
	if r.norm.Check(events); r.norm.Err() != nil {
		return nil, nil
	}
	out, err := r.norm.Next(events)
	if err != nil {
		return nil, WrapCorruption(r.val.sessionID, err)
	}
	r.val.Add(out)
	return out, nil
}

// Len is the number of events added.
func (r *ReadCheck) Len() int64 { return r.n }

// Err is the error a read of the log so far fails with, nil if it reads.
// In the read path's order: the header, then Normalize's error over the
// whole log, then validation of the normalised log and its closers. It
// changes nothing, so Add may follow.
func (r *ReadCheck) Err() error {
	if r.headerErr != nil {
		return r.headerErr
	}
	if err := r.norm.Err(); err != nil {
		return WrapCorruption(r.val.sessionID, err)
	}
	_, err := r.val.check(false)
	return err
}

// Finish returns the closers an open turn needs, or Err. Nothing may be
// added afterwards.
func (r *ReadCheck) Finish() ([][]byte, error) {
	if r.headerErr != nil {
		return nil, r.headerErr
	}
	if err := r.norm.Err(); err != nil {
		return nil, WrapCorruption(r.val.sessionID, err)
	}
	return r.val.Finish()
}
