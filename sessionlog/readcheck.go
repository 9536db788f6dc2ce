package sessionlog

import (
	"errors"
	"strings"

	"github.com/sessionstore/sessionstore"
)

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
	id        string
	header    sessionstore.Header
	headerErr error
	norm      *Normalizer
	val       *Validator
	n         int64 // events added
}

// NewReadCheck starts the check of session id's log (rawLogPath as for
// Normalize: it only appears in error texts).
func NewReadCheck(id string, h sessionstore.Header, rawLogPath string) *ReadCheck {
	return &ReadCheck{
		id:        id,
		header:    h,
		headerErr: CheckStoredHeader(id, h, rawLogPath),
		norm:      NewNormalizer(id, rawLogPath),
		val:       NewValidator(id),
	}
}

// Add checks the next events of the log and returns them normalised (nil
// once the log cannot be normalised: a read refuses it whatever follows).
func (r *ReadCheck) Add(events [][]byte) [][]byte {
	r.n += int64(len(events))
	// One pass, each event parsed once: the Normalizer's two passes exist so
	// that Normalize can decide its error before it returns any event, but
	// once that error is known the validation behind it no longer matters
	// (Err reports the Normalizer's first), so events go on to the Validator
	// only while there is none.
	var out [][]byte
	for _, raw := range events {
		if r.norm.stop {
			break
		}
		e, norm := r.norm.checkOne(raw)
		if r.norm.Err() != nil {
			out = nil
			continue
		}
		if len(norm) == 0 || &norm[0] != &raw[0] { // rewritten: the Validator parses the new text
			e = nil
		}
		if r.val.parseErr == nil {
			r.val.addOne(norm, e)
		}
		out = append(out, norm)
	}
	if r.norm.Err() != nil {
		return nil
	}
	return out
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

// WriteRefusal is Err as a strict write refuses it, nil if the log reads:
// INVALID_HEADER for the header's fields, FORMAT_UNSUPPORTED for a format
// version or an event type this store does not read, INVALID_EVENT for the
// rest. The texts say what a read would do, in the writer's terms (a read's
// own texts blame "a newer harness", which is not what a writer needs to hear).
func (r *ReadCheck) WriteRefusal() *sessionstore.Error {
	err := r.Err()
	if err == nil {
		return nil
	}
	id := sessionstore.Quote(r.id)
	const how = "; write it with validation REFERENCE to store it anyway"
	switch {
	case r.headerErr != nil && r.header.ID == r.id && r.header.Version != sessionstore.FormatVersion:
		return sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
			"session %s header has log format v%d; this store reads format v%d only, so no read would open the log%s",
			id, r.header.Version, sessionstore.FormatVersion, how)
	case r.headerErr != nil:
		return sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "%s: a read would refuse the log%s", readCause(r.id, err), how)
	case r.norm.Err() == r.norm.unknownErr && r.norm.unknownErr != nil:
		return sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
			"session %s: event type %s (seq %s) is not one this store knows (it reads log format v%d) and is not marked \"ignorable\": true, so a read would refuse the log%s",
			id, sessionstore.Quote(r.norm.unknownTyp), r.norm.unknownSeq, sessionstore.FormatVersion, how)
	}
	reason := sessionstore.ReasonInvalidEvent
	var se *sessionstore.Error
	if errors.As(err, &se) && se.Reason == sessionstore.ReasonFormatUnsupported {
		reason = sessionstore.ReasonFormatUnsupported
	}
	return sessionstore.Errorf(reason, "session %s would not read after this write: %s%s", id, readCause(r.id, err), how)
}

// readCause is a read's error text without the load path's wrapping.
func readCause(id string, err error) string {
	msg := err.Error()
	msg = strings.TrimPrefix(msg, "stored session "+sessionstore.Quote(id)+" failed validation: ")
	for _, class := range []string{"Error: ", "TypeError: "} {
		if strings.HasPrefix(msg, class) {
			return msg[len(class):]
		}
	}
	return msg
}
