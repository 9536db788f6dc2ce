package planmode

func isPlanMode(t string) bool { return t == TypePlanMode }

// FoldPlanMode is foldPlanMode (docs/planmode.md#fold): the last plan/mode event of
// events[0:end) wins; no plan/mode (or end <= 0) is inactive. An end past the
// log folds the whole log. A stored plan/mode with a non-boolean active is an
// INVALID_STORED_EVENT error carrying the invariant text of docs/planmode.md#invariant.
func FoldPlanMode(events [][]byte, end int) (bool, error) {
	if end > len(events) {
		end = len(events)
	}
	active := false
	for i := 0; i < end; i++ {
		p, err := parseEvent(events[i], isPlanMode)
		if err != nil {
			return false, err
		}
		if p.typ != TypePlanMode {
			continue
		}
		v, err := planModeActive(events[i], p)
		if err != nil {
			return false, err
		}
		active = v
	}
	return active, nil
}

// Fold is FoldPlanMode over the whole log: the logged state ("active").
func Fold(events [][]byte) (bool, error) { return FoldPlanMode(events, len(events)) }

// HasOpenTurn is the service's idle signal (docs/planmode.md#folds): turn/start opens,
// turn/end closes, the final value is returned. Runtime status is ignored.
func HasOpenTurn(events [][]byte) (bool, error) {
	open := false
	for _, ev := range events {
		t, err := eventType(ev)
		if err != nil {
			return false, err
		}
		switch t {
		case TypeTurnStart:
			open = true
		case TypeTurnEnd:
			open = false
		}
	}
	return open, nil
}

// StateAtLastRequestHeader is planModeAtLastHeader (docs/planmode.md#folds): the plan state
// the model was last told, i.e. FoldPlanMode(events, h+1) for the index h of
// the last request/header. ok is false when no request/header exists.
func StateAtLastRequestHeader(events [][]byte) (active bool, ok bool, err error) {
	h := -1
	for i, ev := range events {
		t, err := eventType(ev)
		if err != nil {
			return false, false, err
		}
		if t == TypeRequestHeader {
			h = i
		}
	}
	if h < 0 {
		return false, false, nil
	}
	active, err = FoldPlanMode(events, h+1)
	return active, err == nil, err
}

// Summary is everything the rules need from a log, built by one pass over
// it. The FSM keeps it beside each session and feeds it every event it
// appends (Observe), so a rule never rescans a long log.
type Summary struct {
	Fold     bool // the logged state (foldPlanMode)
	OpenTurn bool // a turn/start without its turn/end
	Told     bool // the state at the last request/header
	HasTold  bool // a request/header exists
}

// Observe advances the summary past one more event of the log.
func (s *Summary) Observe(ev []byte) error {
	p, err := parseEvent(ev, isPlanMode)
	if err != nil {
		return err
	}
	switch p.typ {
	case TypePlanMode:
		v, err := planModeActive(ev, p)
		if err != nil {
			return err
		}
		s.Fold = v
	case TypeTurnStart:
		s.OpenTurn = true
	case TypeTurnEnd:
		s.OpenTurn = false
	case TypeRequestHeader:
		s.Told, s.HasTold = s.Fold, true
	}
	return nil
}

// Summarize is the Summary of a whole log.
func Summarize(events [][]byte) (Summary, error) {
	var s Summary
	for _, ev := range events {
		if err := s.Observe(ev); err != nil {
			return Summary{}, err
		}
	}
	return s, nil
}
