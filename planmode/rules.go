package planmode

import "fmt"

// Notice texts (docs/planmode.md#narration).
const (
	NoticeEnter = "The user switched this session to plan mode."
	NoticeExit  = "The user switched this session back to the default mode."
)

// Pending is the pending selection record of docs/planmode.md#pending. Narrate is true for
// user selections made through Set or Command and false for the approved
// exit recorded by ExitPlan (the tool result already told the model).
type Pending struct {
	Active  bool
	Narrate bool
}

// State is the plan-mode state the server replicates beside the log (the
// reference keeps it in process memory). The zero value is "nothing pending".
type State struct {
	// Pending is the pending selection, nil when none. The approved silent
	// exit is Pending{Active: false, Narrate: false}.
	Pending *Pending
	// Notice, when non-nil, is the target of an idle commit whose narration
	// (docs/planmode.md#idle-commit) is owed to the model: the reference injects it into the inbox;
	// the server returns it from the next accepted PreStep instead (if it is
	// still true then).
	Notice *bool
}

// ApprovedExitPending reports whether the pending record is the approved
// silent exit of docs/planmode.md#exit-steps step 7.
func (s State) ApprovedExitPending() bool {
	return s.Pending != nil && !s.Pending.Active && !s.Pending.Narrate
}

// Outcome is the result of Set (docs/planmode.md#set).
type Outcome int

const (
	Committed Outcome = iota + 1
	Queued
	Cancelled
	Noop
)

func (o Outcome) String() string {
	switch o {
	case Committed:
		return "committed"
	case Queued:
		return "queued"
	case Cancelled:
		return "cancelled"
	case Noop:
		return "noop"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// View is the service's get (docs/planmode.md#get): the logged state and, when a pending
// record exists, its target (present even when it equals Active).
type View struct {
	Active  bool
	Pending *bool
}

// Get is the service's get over the log and the replicated state.
func Get(events [][]byte, st State) (View, error) {
	active, err := Fold(events)
	if err != nil {
		return View{}, err
	}
	v := View{Active: active}
	if st.Pending != nil {
		p := st.Pending.Active
		v.Pending = &p
	}
	return v, nil
}

// EffectiveActive is the state the plan:policy section renders from
// (docs/planmode.md#policy-section): the pending target when a record exists,
// else the fold.
func EffectiveActive(events [][]byte, st State) (bool, error) {
	if st.Pending != nil {
		return st.Pending.Active, nil
	}
	return Fold(events)
}

// NarrationText is the narration rule of docs/planmode.md#narration: no notice when no
// request was ever sent or when the last request header already told the
// model target; else the entry or exit text.
func NarrationText(events [][]byte, target bool) (string, bool, error) {
	s, err := Summarize(events)
	if err != nil {
		return "", false, err
	}
	text, ok := s.narration(target)
	return text, ok, nil
}

func (s Summary) narration(target bool) (string, bool) {
	if !s.HasTold || s.Told == target {
		return "", false
	}
	if target {
		return NoticeEnter, true
	}
	return NoticeExit, true
}

// SetOptions adjusts Set for the replicated store.
type SetOptions struct {
	// Deferred: the caller may not append (an owned session and a caller
	// without the current lease epoch, docs/api.md). The selection is handled as
	// in an open turn: recorded as pending for the owner's next PreStep.
	Deferred bool
}

// SetResult is what Set decided.
type SetResult struct {
	Outcome Outcome
	// Appended holds the plan/mode event of an idle commit, else nothing.
	Appended [][]byte
	// State is the new replicated state (equal to the input when nothing changed).
	State State
}

// Set is the service's set (docs/planmode.md#set, decision table included). An idle
// commit appends plan/mode {active: want} at `at`, deletes the pending record
// and, when the narration rule yields a notice, records it as owed in
// State.Notice (the server never writes agent/inbox/spliced; the next PreStep
// returns it). The caller applies Appended and State atomically; if the
// append fails it keeps the old State (the reference keeps the record too).
func Set(events [][]byte, st State, want bool, at Stamp, opt SetOptions) (SetResult, error) {
	s, err := Summarize(events)
	if err != nil {
		return SetResult{}, err
	}
	return s.Set(st, want, at, opt), nil
}

// Set is Set over a log's Summary.
func (s Summary) Set(st State, want bool, at Stamp, opt SetOptions) SetResult {
	target := s.Fold
	if st.Pending != nil {
		target = st.Pending.Active
	}
	if want == target {
		return SetResult{Outcome: Noop, State: st}
	}
	if s.OpenTurn || opt.Deferred {
		out := st
		out.Pending = &Pending{Active: want, Narrate: true}
		if want == s.Fold {
			return SetResult{Outcome: Cancelled, State: out}
		}
		return SetResult{Outcome: Queued, State: out}
	}
	out := st
	out.Pending = nil
	if want == s.Fold {
		return SetResult{Outcome: Cancelled, State: out}
	}
	out.Notice = nil
	if _, ok := s.narration(want); ok {
		w := want
		out.Notice = &w
	}
	return SetResult{
		Outcome:  Committed,
		Appended: [][]byte{PlanModeEvent(want, at.Seq, at.Time)},
		State:    out,
	}
}

// StepContext is the decision of the rest of the pre-step waterfall (docs/planmode.md#pre-step).
type StepContext struct {
	Rejected bool // another listener rejected the step
	Aborted  bool // the turn's abort signal is already aborted
}

// PreStepResult is what PreStep decided.
type PreStepResult struct {
	// Active is the plan state the step runs under (the fold after Appended).
	Active bool
	// Appended holds plan/mode when a pending selection differs from the fold;
	// it goes just before the step's step/start.
	Appended [][]byte
	// Notices holds at most one narration user message (data object JSON,
	// NoticeMessage) for the agent to add to the step's messages.
	Notices [][]byte
	// State is the new replicated state.
	State State
}

// PreStep is the pre-step boundary of docs/planmode.md#pre-step for one proposed step,
// called after every other admission check. A rejected or aborted step
// changes nothing and keeps the record pending. Otherwise the pending
// record is applied (plan/mode appended at `at` unless it equals the fold:
// net-zero) and deleted; a notice is returned when the record narrates and
// the narration rule (against the selection target, as the reference does)
// yields one, or when an idle commit's notice is still owed and still true
// (fold after the boundary equals it and the last header told otherwise).
// Both notices are the same text when both apply; one is returned.
func PreStep(events [][]byte, st State, step StepContext, at Stamp, noticeID string) (PreStepResult, error) {
	s, err := Summarize(events)
	if err != nil {
		return PreStepResult{}, err
	}
	return s.PreStep(st, step, at, noticeID), nil
}

// PreStep is PreStep over a log's Summary.
func (s Summary) PreStep(st State, step StepContext, at Stamp, noticeID string) PreStepResult {
	if step.Rejected || step.Aborted {
		return PreStepResult{Active: s.Fold, State: st}
	}
	res := PreStepResult{Active: s.Fold}
	var text string
	var narrate bool
	if p := st.Pending; p != nil {
		if p.Narrate {
			text, narrate = s.narration(p.Active)
		}
		if p.Active != s.Fold {
			res.Appended = [][]byte{PlanModeEvent(p.Active, at.Seq, at.Time)}
			res.Active = p.Active
		}
	}
	if !narrate && st.Notice != nil && *st.Notice == res.Active {
		text, narrate = s.narration(*st.Notice)
	}
	if narrate {
		res.Notices = [][]byte{NoticeMessage(noticeID, text)}
	}
	res.State = State{}
	return res
}
