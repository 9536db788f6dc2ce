package cluster

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sync/atomic"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/planmode"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// Plan mode (docs/api.md "service PlanMode"). The rules run inside the FSM, over
// the replicated plan state; this file validates requests, mints the ids the
// server writes (command ids, notice message ids), proposes, and serves the
// reads.

// commandIDs mints /plan command ids as the reference does,
// cmd-<8 hex unique to this process>-<n>, unique within every session.
type commandIDs struct {
	prefix string
	n      atomic.Uint64
}

func newCommandIDs() *commandIDs {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	return &commandIDs{prefix: "cmd-" + hex.EncodeToString(b[:]) + "-"}
}

func (c *commandIDs) next() string { return fmt.Sprintf("%s%d", c.prefix, c.n.Add(1)) }

// newUUID is a random (version 4) UUID, the reference's notice message id.
func newUUID() string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err)
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	h := hex.EncodeToString(b[:])
	return h[0:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// planRead is one consistent read of a session's plan-mode state.
type planRead struct {
	sum     planmode.Summary
	st      planmode.State
	nextSeq int64
	events  [][]byte // only when asked for
}

// readPlan reads a registered session's plan summary and state (a summary
// that is not stored yet is folded from the log).
func (ss *Sessions) readPlan(ctx context.Context, id string, withEvents bool) (planRead, error) {
	var r planRead
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return r, err
	}
	if err := ss.readBarrier(ctx, sessionstore.Linearizable); err != nil {
		return r, err
	}
	var s *fsm.Session
	err := ss.state.View(func(tx *storage.Tx) error {
		var err error
		if s, err = fsm.ReadSession(tx, id); err != nil || s == nil {
			return err
		}
		if withEvents || s.Record.PlanSummary == nil {
			r.events, err = tx.Events(id, s.Record.Incarnation, 0, s.Record.NextSeq)
		}
		return err
	})
	if err != nil {
		ss.repairAfter(err)
		return r, storageErr(err)
	}
	if s == nil {
		return r, sessionstore.NotFound(id)
	}
	rec := s.Record
	r.st, r.nextSeq = fsm.PlanStateFromPB(rec.Plan), rec.NextSeq
	if p := rec.PlanSummary; p != nil {
		r.sum = planmode.Summary{Fold: p.Fold, OpenTurn: p.OpenTurn, Told: p.Told, HasTold: p.HasTold}
		return r, nil
	}
	r.sum, err = planmode.Summarize(r.events)
	return r, err
}

// PlanGet is the logged state and the pending selection, if any.
func (ss *Sessions) PlanGet(ctx context.Context, id string) (sessionstore.PlanState, error) {
	r, err := ss.readPlan(ctx, id, false)
	if err != nil {
		return sessionstore.PlanState{}, err
	}
	s := sessionstore.PlanState{Active: r.sum.Fold, NextSeq: r.nextSeq}
	if r.st.Pending != nil {
		p := r.st.Pending.Active
		s.Pending = &p
	}
	return s, nil
}

// PlanProjection is the plan projection unit's view of the log.
func (ss *Sessions) PlanProjection(ctx context.Context, id string) (planmode.ProjectionView, error) {
	r, err := ss.readPlan(ctx, id, true)
	if err != nil {
		return planmode.ProjectionView{}, err
	}
	return planmode.Projection(r.events)
}

func (ss *Sessions) proposePlan(ctx context.Context, id string, expectedNext int64, cmd *fsmpb.Command) (sessionstore.PlanResult, error) {
	res, err := ss.proposePlanResult(ctx, id, expectedNext, cmd)
	if err != nil {
		return sessionstore.PlanResult{}, err
	}
	return planResult(res), nil
}

func (ss *Sessions) proposePlanResult(ctx context.Context, id string, expectedNext int64, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return nil, err
	}
	if expectedNext < 0 || expectedNext > sessionstore.MaxSafeInteger {
		return nil, sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"expected_next_seq must be a non-negative safe integer (0: no check), got %d", expectedNext)
	}
	ss.stampStored(cmd)
	return ss.propose(ctx, cmd)
}

func planResult(res *fsmpb.Result) sessionstore.PlanResult {
	p := res.GetPlan()
	return sessionstore.PlanResult{
		Outcome: sessionstore.PlanOutcome(p.GetOutcome()), Active: p.GetActive(),
		Appended: p.GetAppended(), Notices: p.GetNotices(), NextSeq: res.NextSeq, Revision: res.Revision,
		Kind: p.GetKind(), Text: p.GetText(), SteerText: p.SteerText,
		Approved: p.GetApproved(), IsError: p.GetIsError(),
	}
}

// PlanSet is the reference's set (docs/planmode.md#set).
func (ss *Sessions) PlanSet(ctx context.Context, id string, active bool, c sessionstore.PlanCall) (sessionstore.PlanResult, error) {
	return ss.proposePlan(ctx, id, c.ExpectedNextSeq, &fsmpb.Command{Cmd: &fsmpb.Command_PlanSet{PlanSet: &fsmpb.PlanSet{
		SessionId: id, Active: active, LeaseEpoch: c.LeaseEpoch, ExpectedNextSeq: c.ExpectedNextSeq, RequestId: c.RequestID}}})
}

// PlanPreStep is the agent's accepted pre-step (docs/planmode.md#pre-step).
func (ss *Sessions) PlanPreStep(ctx context.Context, id string, c sessionstore.PlanCall) (sessionstore.PlanResult, error) {
	return ss.proposePlan(ctx, id, c.ExpectedNextSeq, &fsmpb.Command{Cmd: &fsmpb.Command_PlanPreStep{PlanPreStep: &fsmpb.PlanPreStep{
		SessionId: id, LeaseEpoch: c.LeaseEpoch, ExpectedNextSeq: c.ExpectedNextSeq, RequestId: c.RequestID,
		NoticeId: newUUID()}}})
}

// PlanCommand is the /plan command (docs/planmode.md#plan-command). The image blocks
// decide only "/plan off" with images and the steer content, so the log and
// the FSM see their number, never their bytes.
func (ss *Sessions) PlanCommand(ctx context.Context, id, rawInput string, images [][]byte, c sessionstore.PlanCall) (sessionstore.PlanResult, error) {
	if err := planmode.CheckRawInput(rawInput); err != nil {
		return sessionstore.PlanResult{}, err
	}
	total := len(rawInput)
	for i, img := range images {
		if t := bytes.TrimSpace(img); len(t) == 0 || t[0] != '{' || !json.Valid(t) {
			return sessionstore.PlanResult{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
				"image block %d is not a JSON object", i)
		}
		total += len(img)
	}
	if len(rawInput) > ss.cfg.MaxEventBytes/2 || total > ss.cfg.MaxBatchBytes {
		return sessionstore.PlanResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
			"/plan input is %d bytes with its images; the limits are %d for the text and %d in all", total, ss.cfg.MaxEventBytes/2, ss.cfg.MaxBatchBytes)
	}
	res, err := ss.proposePlanResult(ctx, id, c.ExpectedNextSeq, &fsmpb.Command{Cmd: &fsmpb.Command_PlanCommand{PlanCommand: &fsmpb.PlanCommand{
		SessionId: id, RawInput: rawInput, ImageCount: int32(len(images)), LeaseEpoch: c.LeaseEpoch,
		ExpectedNextSeq: c.ExpectedNextSeq, RequestId: c.RequestID, CommandId: ss.commandIDs.next()}}})
	if err != nil {
		return sessionstore.PlanResult{}, err
	}
	out := planResult(res)
	if res.GetPlan().GetSteers() {
		out.SteerContent = planmode.SteerContent(images, out.SteerText)
	}
	return out, nil
}

// PlanExit is the exit_plan_mode tool (docs/planmode.md#exit-plan-mode). Without an answer
// it only validates (a read) and returns the review question; with the
// user's answer the interpretation is committed, and approval records the
// silent pending exit. Tool outcomes are results, not errors.
func (ss *Sessions) PlanExit(ctx context.Context, id, plan string, answer *planmode.ReviewAnswer, c sessionstore.PlanCall) (sessionstore.PlanResult, error) {
	if id == "" {
		return toolResult(planmode.ExitResult{ToolResult: planmode.ToolResult{IsError: true,
			Text: "Error: " + planmode.ErrNoAgent}}), nil
	}
	if answer == nil {
		r, err := ss.readPlan(ctx, id, false)
		if err != nil {
			return sessionstore.PlanResult{}, err
		}
		out := toolResult(r.sum.ExitPlan(r.st, plan, nil))
		out.NextSeq = r.nextSeq
		if out.NeedsReview {
			out.ReviewQuestion = planmode.ReviewQuestion(plan)
		}
		return out, nil
	}
	pa := &fsmpb.ReviewAnswer{Dismissed: answer.Dismissed}
	for _, it := range answer.Answers {
		pa.Answers = append(pa.Answers, &fsmpb.AnswerItem{Id: it.ID, Selected: it.Selected, Custom: it.Custom})
	}
	return ss.proposePlan(ctx, id, 0, &fsmpb.Command{Cmd: &fsmpb.Command_PlanExit{PlanExit: &fsmpb.PlanExit{
		SessionId: id, Plan: plan, Answer: pa, LeaseEpoch: c.LeaseEpoch, RequestId: c.RequestID}}})
}

func toolResult(r planmode.ExitResult) sessionstore.PlanResult {
	return sessionstore.PlanResult{Approved: r.Approved, IsError: r.IsError, Text: r.Text, NeedsReview: r.NeedsReview}
}
