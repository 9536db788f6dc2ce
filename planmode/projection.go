package planmode

import (
	"encoding/json"
	"strconv"

	"github.com/sessionstore/sessionstore/sessionlog"
)

// The `plan` session projection unit (docs/planmode.md#projection).
const (
	ProjectionKey          = "plan"
	ProjectionStateVersion = 2
)

// RunningCommand is a /plan command between its command/run and command/done.
type RunningCommand struct {
	CommandID string `json:"commandId"`
	Wanted    bool   `json:"wanted"`
}

// ProjectionState is the unit's state; its JSON (MarshalJSON) is the
// reference's {active, wanted, running}, for checkpoint rows.
type ProjectionState struct {
	Active  bool            `json:"active"`
	Wanted  *bool           `json:"wanted"`
	Running *RunningCommand `json:"running"`
}

// ProjectionView is the wire value {active, pending}.
type ProjectionView struct {
	Active  bool `json:"active"`
	Pending bool `json:"pending"`
}

// ProjectionInit is init(): {active:false, wanted:null, running:null}.
func ProjectionInit() ProjectionState { return ProjectionState{} }

func isProjected(t string) bool {
	return t == TypePlanMode || t == TypeCommandRun || t == TypeCommandDone
}

// ProjectionApply is apply(state, event). changed is false when the event
// is not the unit's ("the same state object": no change notification); the
// returned state never aliases the input's pointers.
func ProjectionApply(s ProjectionState, ev []byte) (ProjectionState, bool, error) {
	p, err := parseEvent(ev, isProjected)
	if err != nil {
		return s, false, err
	}
	switch p.typ {
	case TypeCommandRun:
		if name, _ := p.str("name"); name != CommandName {
			return s, false, nil
		}
		if _, has := p.data["args"]; !has {
			return s, false, nil
		}
		args, _ := p.str("args")
		id, _ := p.str("commandId")
		out := s.clone()
		out.Running = &RunningCommand{CommandID: id, Wanted: jsTrim(args) != "off"}
		return out, true, nil
	case TypeCommandDone:
		id, _ := p.str("commandId")
		if s.Running == nil || id != s.Running.CommandID {
			return s, false, nil
		}
		kind, _ := p.str("kind")
		out := s.clone()
		out.Wanted = nil
		if kind == KindSuccess && s.Running.Wanted != s.Active {
			w := s.Running.Wanted
			out.Wanted = &w
		}
		out.Running = nil
		return out, true, nil
	case TypePlanMode:
		v, err := planModeActive(ev, p)
		if err != nil {
			return s, false, err
		}
		out := s.clone()
		out.Active, out.Wanted = v, nil
		return out, true, nil
	}
	return s, false, nil
}

func (s ProjectionState) clone() ProjectionState {
	out := ProjectionState{Active: s.Active}
	if s.Wanted != nil {
		w := *s.Wanted
		out.Wanted = &w
	}
	if s.Running != nil {
		r := *s.Running
		out.Running = &r
	}
	return out
}

// View is view(state): pending iff the running (else recorded) target is
// non-null and differs from active.
func (s ProjectionState) View() ProjectionView {
	w := s.Wanted
	if s.Running != nil {
		w = &s.Running.Wanted
	}
	return ProjectionView{Active: s.Active, Pending: w != nil && *w != s.Active}
}

// FoldProjection folds events onto s (ProjectionInit for a cold fold).
func FoldProjection(s ProjectionState, events [][]byte) (ProjectionState, error) {
	for _, ev := range events {
		var err error
		if s, _, err = ProjectionApply(s, ev); err != nil {
			return s, err
		}
	}
	return s, nil
}

// Projection is the cold view over a whole log.
func Projection(events [][]byte) (ProjectionView, error) {
	s, err := FoldProjection(ProjectionInit(), events)
	return s.View(), err
}

// MarshalJSON writes {"active":B,"wanted":B|null,"running":{"commandId","wanted"}|null}
// as JSON.stringify does. Call it directly: encoding/json.Marshal would
// HTML-escape its output.
func (s ProjectionState) MarshalJSON() ([]byte, error) {
	b := append([]byte(`{"active":`), strconv.FormatBool(s.Active)...)
	b = append(b, `,"wanted":`...)
	if s.Wanted == nil {
		b = append(b, "null"...)
	} else {
		b = strconv.AppendBool(b, *s.Wanted)
	}
	b = append(b, `,"running":`...)
	if s.Running == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, `{"commandId":`...)
		b = sessionlog.AppendJSString(b, s.Running.CommandID)
		b = append(b, `,"wanted":`...)
		b = strconv.AppendBool(b, s.Running.Wanted)
		b = append(b, '}')
	}
	return append(b, '}'), nil
}

// UnmarshalJSON reads a checkpointed state.
func (s *ProjectionState) UnmarshalJSON(data []byte) error {
	type plain ProjectionState
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*s = ProjectionState(p)
	return nil
}

// MarshalJSON writes {"active":B,"pending":B}.
func (v ProjectionView) MarshalJSON() ([]byte, error) {
	b := append([]byte(`{"active":`), strconv.FormatBool(v.Active)...)
	b = append(b, `,"pending":`...)
	b = strconv.AppendBool(b, v.Pending)
	return append(b, '}'), nil
}
