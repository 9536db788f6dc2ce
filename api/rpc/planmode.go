package rpc

import (
	"context"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/planmode"
)

// PlanMode serves sessionstore.v1.PlanMode. Every call a follower cannot
// serve (writes, linearizable reads) goes to the leader through fwd.
type PlanMode struct {
	pb.UnimplementedPlanModeServer
	b   PlanBackend
	fwd *Forwarder
}

// NewPlanMode returns the service over b (fwd nil: answer NO_LEADER instead
// of forwarding).
func NewPlanMode(b PlanBackend, fwd *Forwarder) *PlanMode { return &PlanMode{b: b, fwd: fwd} }

// Register adds the service to s.
func (p *PlanMode) Register(s grpc.ServiceRegistrar) { pb.RegisterPlanModeServer(s, p) }

// serve runs call, forwarding to the leader when this node is not it.
func serve[Resp proto.Message](ctx context.Context, fwd *Forwarder, method string, req proto.Message, mutating bool,
	newResp func() Resp, call func() (Resp, error)) (Resp, error) {
	out, err := call()
	if err == nil {
		return out, nil
	}
	if nl := leaderOf(err); nl != nil {
		out = newResp()
		return out, fwd.unary(ctx, nl, method, req, out, mutating)
	}
	var zero Resp
	return zero, toStatus(err)
}

func planCall(epoch uint64, expected int64, requestID string) sessionstore.PlanCall {
	return sessionstore.PlanCall{LeaseEpoch: epoch, ExpectedNextSeq: expected, RequestID: requestID}
}

func (p *PlanMode) Get(ctx context.Context, r *pb.PlanGetRequest) (*pb.PlanGetResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_Get_FullMethodName, r, false, func() *pb.PlanGetResponse { return new(pb.PlanGetResponse) },
		func() (*pb.PlanGetResponse, error) {
			s, err := p.b.PlanGet(ctx, r.SessionId)
			if err != nil {
				return nil, err
			}
			return &pb.PlanGetResponse{Active: s.Active, Pending: s.Pending, NextSeq: s.NextSeq}, nil
		})
}

func (p *PlanMode) Set(ctx context.Context, r *pb.PlanSetRequest) (*pb.PlanSetResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_Set_FullMethodName, r, true, func() *pb.PlanSetResponse { return new(pb.PlanSetResponse) },
		func() (*pb.PlanSetResponse, error) {
			res, err := p.b.PlanSet(ctx, r.SessionId, r.Active, planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
			if err != nil {
				return nil, err
			}
			return &pb.PlanSetResponse{Outcome: pb.Outcome(res.Outcome), AppendedEvents: toStrings(res.Appended),
				NextSeq: res.NextSeq, Revision: res.Revision}, nil
		})
}

func (p *PlanMode) PreStep(ctx context.Context, r *pb.PlanPreStepRequest) (*pb.PlanPreStepResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_PreStep_FullMethodName, r, true, func() *pb.PlanPreStepResponse { return new(pb.PlanPreStepResponse) },
		func() (*pb.PlanPreStepResponse, error) {
			res, err := p.b.PlanPreStep(ctx, r.SessionId, planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
			if err != nil {
				return nil, err
			}
			return &pb.PlanPreStepResponse{Active: res.Active, AppendedEvents: toStrings(res.Appended),
				Notices: toStrings(res.Notices), NextSeq: res.NextSeq, Revision: res.Revision}, nil
		})
}

func (p *PlanMode) Command(ctx context.Context, r *pb.PlanCommandRequest) (*pb.PlanCommandResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_Command_FullMethodName, r, true, func() *pb.PlanCommandResponse { return new(pb.PlanCommandResponse) },
		func() (*pb.PlanCommandResponse, error) {
			res, err := p.b.PlanCommand(ctx, r.SessionId, r.RawInput, toBytes(r.ImageBlocks), planCall(r.LeaseEpoch, r.ExpectedNextSeq, r.RequestId))
			if err != nil {
				return nil, err
			}
			return &pb.PlanCommandResponse{Kind: res.Kind, Text: res.Text, SteerText: res.SteerText,
				AppendedEvents: toStrings(res.Appended), NextSeq: res.NextSeq, SteerContent: string(res.SteerContent),
				Revision: res.Revision}, nil
		})
}

func (p *PlanMode) ExitPlan(ctx context.Context, r *pb.PlanExitRequest) (*pb.PlanExitResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_ExitPlan_FullMethodName, r, r.Answer != nil, func() *pb.PlanExitResponse { return new(pb.PlanExitResponse) },
		func() (*pb.PlanExitResponse, error) {
			res, err := p.b.PlanExit(ctx, r.SessionId, r.Plan, answerFromPB(r.Answer), planCall(r.LeaseEpoch, 0, r.RequestId))
			if err != nil {
				return nil, err
			}
			return &pb.PlanExitResponse{Approved: res.Approved, Text: res.Text, IsError: res.IsError,
				NeedsReview: res.NeedsReview, ReviewQuestion: string(res.ReviewQuestion)}, nil
		})
}

func (p *PlanMode) Projection(ctx context.Context, r *pb.PlanProjectionRequest) (*pb.PlanProjectionResponse, error) {
	return serve(ctx, p.fwd, pb.PlanMode_Projection_FullMethodName, r, false, func() *pb.PlanProjectionResponse { return new(pb.PlanProjectionResponse) },
		func() (*pb.PlanProjectionResponse, error) {
			v, err := p.b.PlanProjection(ctx, r.SessionId)
			if err != nil {
				return nil, err
			}
			return &pb.PlanProjectionResponse{Active: v.Active, Pending: v.Pending}, nil
		})
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
