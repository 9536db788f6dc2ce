package client

import (
	"context"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// The PlanMode service (docs/api.md "service PlanMode") over the same connection.
//
// Get and Projection are reads. Set, PreStep, Command and ExitPlan with an
// answer carry a request id (a fresh one when req.RequestId is empty; req is
// not modified) and are retried with it: a repeat returns the first response,
// so a retried PreStep never applies a selection twice. ExitPlan without an
// answer only validates and is retried as a read.

// PlanGet returns the logged plan state and the pending selection, if any.
func (c *Client) PlanGet(ctx context.Context, req *sessionpb.PlanGetRequest) (*sessionpb.PlanGetResponse, error) {
	var resp *sessionpb.PlanGetResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.Get(ctx, req)
		return err
	})
	return resp, err
}

// PlanSet selects plan mode on or off (the reference decision table).
func (c *Client) PlanSet(ctx context.Context, req *sessionpb.PlanSetRequest) (*sessionpb.PlanSetResponse, error) {
	req = withRequestID(req)
	var resp *sessionpb.PlanSetResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.Set(ctx, req)
		return err
	})
	return resp, err
}

// PlanPreStep is the agent's accepted pre-step: it applies a pending
// selection and returns the state the step runs under and any notice.
func (c *Client) PlanPreStep(ctx context.Context, req *sessionpb.PlanPreStepRequest) (*sessionpb.PlanPreStepResponse, error) {
	req = withRequestID(req)
	var resp *sessionpb.PlanPreStepResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.PreStep(ctx, req)
		return err
	})
	return resp, err
}

// PlanCommand runs the /plan command.
func (c *Client) PlanCommand(ctx context.Context, req *sessionpb.PlanCommandRequest) (*sessionpb.PlanCommandResponse, error) {
	req = withRequestID(req)
	var resp *sessionpb.PlanCommandResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.Command(ctx, req)
		return err
	})
	return resp, err
}

// ExitPlan is the exit_plan_mode tool. Its outcomes are results (IsError and
// the reference text), not errors.
func (c *Client) ExitPlan(ctx context.Context, req *sessionpb.PlanExitRequest) (*sessionpb.PlanExitResponse, error) {
	kind := read
	if req.Answer != nil {
		req = withRequestID(req)
		kind = mutating
	}
	var resp *sessionpb.PlanExitResponse
	err := c.do(ctx, kind, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.ExitPlan(ctx, req)
		return err
	})
	return resp, err
}

// PlanProjection returns the plan projection unit's view {active, pending}.
func (c *Client) PlanProjection(ctx context.Context, req *sessionpb.PlanProjectionRequest) (*sessionpb.PlanProjectionResponse, error) {
	var resp *sessionpb.PlanProjectionResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.plan.Projection(ctx, req)
		return err
	})
	return resp, err
}
