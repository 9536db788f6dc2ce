package fsm

import (
	"errors"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/planmode"
)

// Plan-mode commands. Each runs the pure rule of package planmode over the
// session's plan summary and replicated plan state, appends what the rule
// appends at the stored next seq, and stores the new state, in one apply: so
// a selection is never applied twice or lost, and the agent's seq is never
// taken twice, however Set, PreStep, Command and Append calls interleave.

// PlanStateFromPB converts the stored plan state to planmode's.
func PlanStateFromPB(p *fsmpb.PlanState) planmode.State {
	var st planmode.State
	if p == nil {
		return st
	}
	if p.Pending != nil {
		st.Pending = &planmode.Pending{Active: p.Pending.Active, Narrate: p.Pending.Narrate}
	}
	if p.Notice != nil {
		v := *p.Notice
		st.Notice = &v
	}
	return st
}

func planStateToPB(st planmode.State) *fsmpb.PlanState {
	if st.Pending == nil && st.Notice == nil {
		return nil
	}
	p := &fsmpb.PlanState{}
	if st.Pending != nil {
		p.Pending = &fsmpb.PendingSelection{Active: st.Pending.Active, Narrate: st.Pending.Narrate}
	}
	if st.Notice != nil {
		v := *st.Notice
		p.Notice = &v
	}
	return p
}

func summaryFromPB(p *fsmpb.PlanSummary) planmode.Summary {
	return planmode.Summary{Fold: p.GetFold(), OpenTurn: p.GetOpenTurn(), Told: p.GetTold(), HasTold: p.GetHasTold()}
}

func summaryToPB(s planmode.Summary) *fsmpb.PlanSummary {
	return &fsmpb.PlanSummary{Fold: s.Fold, OpenTurn: s.OpenTurn, Told: s.Told, HasTold: s.HasTold}
}

// observeFrame advances a record's plan summary past newly stored events. A
// summary that cannot follow (an event it cannot read) is dropped, so the
// next plan-mode command rebuilds it from the log and reports the error. It
// reports whether the stored summary changes (records.go: otherwise the
// record's cold part need not be encoded again).
func observeFrame(rec *fsmpb.SessionRecord, events [][]byte) bool {
	if rec.PlanSummary == nil {
		return false
	}
	before := summaryFromPB(rec.PlanSummary)
	unknown := len(rec.PlanSummary.ProtoReflect().GetUnknown()) > 0 // dropped by the rewrite below
	s := before
	for _, ev := range events {
		if s.Observe(ev) != nil {
			rec.PlanSummary = nil
			return true
		}
	}
	rec.PlanSummary = summaryToPB(s)
	return s != before || unknown
}

// planSession is a session opened by a plan-mode command.
type planSession struct {
	id       string
	rec      *fsmpb.SessionRecord
	sum      planmode.Summary
	st       planmode.State
	deferred bool
}

// openPlan loads a session for a plan-mode command and runs the checks every
// such command shares: existence, the lease epoch (deferrable: epoch 0 on an
// owned session records instead of appending) and expected_next_seq. A
// refused command returns a result and writes nothing.
func (a *applier) openPlan(id string, epoch uint64, expectedNext int64, deferrable bool) (*planSession, *fsmpb.Result, error) {
	rec, err := a.record(id)
	if err != nil {
		return nil, nil, err
	}
	if rec == nil {
		return nil, errResult(sessionstore.NotFound(id)), nil
	}
	ps := &planSession{id: id, rec: rec, st: PlanStateFromPB(rec.Plan)}
	if rec.Epoch > 0 && epoch != rec.Epoch {
		if epoch != 0 || !deferrable {
			return nil, errResult(fenced(id, rec.Epoch, epoch)), nil
		}
		ps.deferred = true
	}
	if expectedNext != 0 && expectedNext != rec.NextSeq {
		return nil, errResult(sessionstore.Errorf(sessionstore.ReasonSeqMismatch,
			"plan-mode call for %s expected next seq %d, but the log's next seq is %d", sessionstore.Quote(id), expectedNext, rec.NextSeq)), nil
	}
	if rec.PlanSummary != nil {
		ps.sum = summaryFromPB(rec.PlanSummary)
		return ps, nil, nil
	}
	events, err := a.events(id, rec, 0, rec.NextSeq)
	if err != nil {
		return nil, nil, err
	}
	sum, err := planmode.Summarize(events)
	if err != nil {
		var de *sessionstore.Error
		if errors.As(err, &de) {
			return nil, errResult(de), nil
		}
		return nil, errResult(asDomain(err)), nil
	}
	ps.sum = sum
	rec.PlanSummary = summaryToPB(sum)
	return ps, nil, nil
}

// planRequestKey keys a plan-mode call's request id by the call, so an id
// reused by another kind of call is a new request, never another call's
// stored answer. Bound commands (version 5) key ids alike and compare the
// operation instead (requests.go).
func planRequestKey(kind, requestID string) string {
	if requestID == "" {
		return ""
	}
	return kind + "/" + requestID
}

// stamp is where the first event a plan-mode command appends goes.
func (a *applier) stamp(ps *planSession) planmode.Stamp {
	return planmode.Stamp{Seq: ps.rec.NextSeq, Time: a.now}
}

// finish appends the rule's events as one frame, stores the new plan state
// and fills the result. It reports whether the log changed.
func (a *applier) finish(ps *planSession, appended [][]byte, st planmode.State, pr *fsmpb.PlanResult) (*fsmpb.Result, bool, error) {
	newState := planStateToPB(st)
	stateChanged := !proto.Equal(newState, ps.rec.Plan)
	ps.rec.Plan = newState
	if len(appended) > 0 {
		if err := a.writeFrame(ps.id, ps.rec, nil, appended); err != nil {
			return nil, false, err
		}
	} else if stateChanged {
		if err := a.putRecord(ps.id, ps.rec); err != nil {
			return nil, false, err
		}
	}
	pr.Appended = appended
	return &fsmpb.Result{Revision: a.revision(ps.rec), NextSeq: ps.rec.NextSeq, Plan: pr}, len(appended) > 0, nil
}

func (a *applier) planSet(c *fsmpb.PlanSet) (*fsmpb.Result, bool, error) {
	ps, refused, err := a.openPlan(c.SessionId, c.LeaseEpoch, c.ExpectedNextSeq, true)
	if ps == nil {
		return refused, false, err
	}
	r := ps.sum.Set(ps.st, c.Active, a.stamp(ps), planmode.SetOptions{Deferred: ps.deferred})
	return a.finish(ps, r.Appended, r.State, &fsmpb.PlanResult{Outcome: int32(r.Outcome)})
}

func (a *applier) planPreStep(c *fsmpb.PlanPreStep) (*fsmpb.Result, bool, error) {
	ps, refused, err := a.openPlan(c.SessionId, c.LeaseEpoch, c.ExpectedNextSeq, false)
	if ps == nil {
		return refused, false, err
	}
	// The agent calls PreStep only for accepted steps (the rest of its
	// waterfall has decided), so the step context is always "enter".
	r := ps.sum.PreStep(ps.st, planmode.StepContext{}, a.stamp(ps), c.NoticeId)
	return a.finish(ps, r.Appended, r.State, &fsmpb.PlanResult{Active: r.Active, Notices: r.Notices})
}

func (a *applier) planCommand(c *fsmpb.PlanCommand) (*fsmpb.Result, bool, error) {
	ps, refused, err := a.openPlan(c.SessionId, c.LeaseEpoch, c.ExpectedNextSeq, true)
	if ps == nil {
		return refused, false, err
	}
	r := ps.sum.Command(ps.st, planmode.CommandInput{CommandID: c.CommandId, RawInput: c.RawInput,
		ImageCount: int(c.ImageCount), Deferred: ps.deferred}, a.stamp(ps))
	appended := r.Appended
	if ps.deferred {
		// A caller without the owner's epoch never appends: the command's
		// effect is the pending selection alone.
		appended = nil
	}
	return a.finish(ps, appended, r.State, &fsmpb.PlanResult{Outcome: int32(r.Outcome), Kind: r.Kind,
		Text: r.Text, SteerText: r.SteerText, Steers: r.Steers})
}

func (a *applier) planExit(c *fsmpb.PlanExit) (*fsmpb.Result, bool, error) {
	// The review answer is the agent's tool call: on an owned session only
	// the owner records the silent exit (a silent exit from anyone else
	// would leave the model untold).
	ps, refused, err := a.openPlan(c.SessionId, c.LeaseEpoch, 0, false)
	if ps == nil {
		return refused, false, err
	}
	r := ps.sum.ExitPlan(ps.st, c.Plan, reviewAnswerFromPB(c.Answer))
	return a.finish(ps, nil, r.State, &fsmpb.PlanResult{Approved: r.Approved, IsError: r.IsError, Text: r.Text})
}

func reviewAnswerFromPB(p *fsmpb.ReviewAnswer) *planmode.ReviewAnswer {
	if p == nil {
		return nil
	}
	a := &planmode.ReviewAnswer{Dismissed: p.Dismissed}
	for _, it := range p.Answers {
		item := planmode.AnswerItem{ID: it.Id, Selected: it.Selected}
		if it.Custom != nil {
			v := *it.Custom
			item.Custom = &v
		}
		a.Answers = append(a.Answers, item)
	}
	return a
}
