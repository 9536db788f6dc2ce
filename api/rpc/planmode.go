package rpc

import (
	"context"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/planmode"
)

// PlanMode serves sessionstore.v1.PlanMode. Every call a follower cannot
// serve (writes, linearizable reads) goes to the leader: the interceptors
// forward it (forwardUnary).
type PlanMode struct {
	pb.UnimplementedPlanModeServer
	b PlanBackend
}

// NewPlanMode returns the service over b.
func NewPlanMode(b PlanBackend) *PlanMode { return &PlanMode{b: b} }

// Register adds the service to s.
func (p *PlanMode) Register(s grpc.ServiceRegistrar) { pb.RegisterPlanModeServer(s, p) }

func planCall(epoch uint64, expected int64, requestID string) sessionstore.PlanCall {
	return sessionstore.PlanCall{LeaseEpoch: epoch, ExpectedNextSeq: expected, RequestID: requestID}
}

func (p *PlanMode) Get(ctx context.Context, r *pb.PlanGetRequest) (*pb.PlanGetResponse, error) {
	s, err := p.b.PlanGet(ctx, r.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanGetResponse{Active: s.Active, Pending: s.Pending, NextSeq: s.NextSeq}, nil
}

func (p *PlanMode) Set(ctx context.Context, r *pb.PlanSetRequest) (*pb.PlanSetResponse, error) {
	res, err := p.b.PlanSet(ctx, r.SessionId, r.Active, planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanSetResponse{Outcome: pb.Outcome(res.Outcome), AppendedEvents: toStrings(res.Appended),
		NextSeq: res.NextSeq, Revision: res.Revision}, nil
}

func (p *PlanMode) PreStep(ctx context.Context, r *pb.PlanPreStepRequest) (*pb.PlanPreStepResponse, error) {
	res, err := p.b.PlanPreStep(ctx, r.SessionId, planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanPreStepResponse{Active: res.Active, AppendedEvents: toStrings(res.Appended),
		Notices: toStrings(res.Notices), NextSeq: res.NextSeq, Revision: res.Revision}, nil
}

func (p *PlanMode) Command(ctx context.Context, r *pb.PlanCommandRequest) (*pb.PlanCommandResponse, error) {
	res, err := p.b.PlanCommand(ctx, r.SessionId, r.RawInput, toBytes(r.ImageBlocks), planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanCommandResponse{Kind: res.Kind, Text: res.Text, SteerText: res.SteerText,
		AppendedEvents: toStrings(res.Appended), NextSeq: res.NextSeq, SteerContent: string(res.SteerContent),
		Revision: res.Revision}, nil
}

func (p *PlanMode) ExitPlan(ctx context.Context, r *pb.PlanExitRequest) (*pb.PlanExitResponse, error) {
	res, err := p.b.PlanExit(ctx, r.SessionId, r.Plan, answerFromPB(r.Answer), planCall(r.LeaseEpoch, 0, r.RequestId))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanExitResponse{Approved: res.Approved, Text: res.Text, IsError: res.IsError,
		NeedsReview: res.NeedsReview, ReviewQuestion: string(res.ReviewQuestion)}, nil
}

func (p *PlanMode) Projection(ctx context.Context, r *pb.PlanProjectionRequest) (*pb.PlanProjectionResponse, error) {
	v, err := p.b.PlanProjection(ctx, r.SessionId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PlanProjectionResponse{Active: v.Active, Pending: v.Pending}, nil
}

func answerFromPB(a *pb.ReviewAnswer) *planmode.ReviewAnswer {
	if a == nil {
		return nil
	}
	out := &planmode.ReviewAnswer{Dismissed: a.Dismissed}
	for _, it := range a.Answers {
		out.Answers = append(out.Answers, planmode.AnswerItem{ID: it.Id, Selected: it.Selected, Custom: it.Custom})
	}
	return out
}
