package sessionlog

import "github.com/sessionstore/sessionstore"

// Normalizer is Normalize over a log read in chunks, so that a reader holds
// one chunk of it rather than the whole log. Normalize decides every error
// over the whole log before it returns an event (a refused legacy event
// anywhere, then the first failed migration, then the first unknown type), so
// the log is read twice: Check each chunk in order, then Err; if nil, Next
// each chunk in order again for the normalised events. Chunks must be the
// same log both times; their boundaries do not matter.
type Normalizer struct {
	sessionID, rawLogPath string

	// Check's state.
	checked    int // events checked so far
	stop       bool
	parseErr   error
	refused    [3]error // the first event of each refused legacy shape, in assertSupportedEvents's order
	migrateErr error
	unknownErr error
	// unknownTyp and unknownSeq name the event unknownErr refuses.
	unknownTyp, unknownSeq string
	checkIDs               map[float64]string

	// Next's state.
	ids map[float64]string
}

// NewNormalizer returns a Normalizer for a session's log (rawLogPath as for
// Normalize).
func NewNormalizer(sessionID, rawLogPath string) *Normalizer {
	return &Normalizer{sessionID: sessionID, rawLogPath: rawLogPath, checkIDs: map[float64]string{}, ids: map[float64]string{}}
}

// Check runs the first pass over the next chunk.
func (n *Normalizer) Check(events [][]byte) {
	for _, raw := range events {
		if n.stop {
			return
		}
		n.checkOne(raw)
	}
}

// checkOne runs the first pass over one event. While no migration has
// failed it also returns the event parsed and normalised (the input slice
// when unchanged): a caller that takes events in one pass (ReadCheck) needs
// no second parse.
func (n *Normalizer) checkOne(raw []byte) (*storedEvent, []byte) {
	i := n.checked
	n.checked++
	e, err := parseStored(raw)
	if err != nil {
		n.parseErr = sessionstore.Errorf(sessionstore.ReasonInvalidStored,
			"stored event at index %d is not a single-line JSON object: %s", i, err.Error())
		n.stop = true // the first unparsable event outranks everything
		return nil, nil
	}
	id := sessionstore.Quote(n.sessionID)
	typ := e.get("type")
	switch {
	case n.refused[0] == nil && typ.strEq("request/header-delta"):
		n.refused[0] = storedErr("session %s contains unsupported legacy request/header-delta event at seq %s", id, seqText(e))
	case n.refused[1] == nil && typ.strEq("mode/set"):
		n.refused[1] = storedErr("session %s contains unsupported legacy mode/set event at seq %s", id, seqText(e))
	case n.refused[2] == nil && typ.strEq("request/header"):
		if reason, err := jsGet(e.get("data"), "reason"); err != nil {
			n.refused[2] = err
		} else if reason.strEq("fallback") {
			n.refused[2] = storedErr(`session %s contains unsupported legacy request/header reason "fallback" at seq %s`, id, seqText(e))
		}
	}
	if n.migrateErr != nil {
		return nil, nil // later migrations cannot change the answer
	}
	out, t, err := normalizeEvent(n.sessionID, e, n.checkIDs)
	if err != nil {
		n.migrateErr = err
		return nil, nil
	}
	if n.unknownErr == nil {
		if n.unknownErr = unknownType(n.sessionID, e, t, n.rawLogPath); n.unknownErr != nil {
			n.unknownTyp, n.unknownSeq = jsString(t), seqText(e)
		}
	}
	return e, out
}

// Err is Normalize's error for the whole log Check has seen.
func (n *Normalizer) Err() error {
	if n.parseErr != nil {
		return n.parseErr
	}
	for _, err := range n.refused {
		if err != nil {
			return err
		}
	}
	if n.migrateErr != nil {
		return n.migrateErr
	}
	return n.unknownErr
}

// Next returns the normalised events of the next chunk (the second pass,
// after a nil Err): unchanged events are the input slices.
func (n *Normalizer) Next(events [][]byte) ([][]byte, error) {
	out := make([][]byte, len(events))
	for i, raw := range events {
		e, err := parseStored(raw)
		if err != nil {
			return nil, sessionstore.Errorf(sessionstore.ReasonInvalidStored, "stored event changed between the passes: %v", err)
		}
		if out[i], _, err = normalizeEvent(n.sessionID, e, n.ids); err != nil {
			return nil, err
		}
	}
	return out, nil
}
