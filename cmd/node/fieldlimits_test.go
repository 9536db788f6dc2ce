package main

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// Over-long client fields (issue 13 item 12: a 15.5 MiB cwd, an 8 MiB lease
// owner, 8 MiB ExitPlan feedback) are refused with TOO_LARGE over gRPC,
// unary and streamed, before anything is written: the session the refused
// Create names does not exist afterwards.
func TestOverlongFieldsRefusedBeforeProposal(t *testing.T) {
	n := startTestNode(t, "")
	raw := ctRaw(n)
	plan := sessionpb.NewPlanModeClient(n.Client.Conn())
	big := strings.Repeat("x", 8<<20)
	ctx := n.ctx()
	ctCreate(t, n, ctMeta("fl-ok", "/w"))
	calls := []struct {
		name string
		call func(ctx context.Context) error
	}{
		{"Create cwd", func(ctx context.Context) error {
			_, err := raw.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("fl-big", strings.Repeat("x", 15<<20+1<<19))})
			return err
		}},
		{"Prepare owner", func(ctx context.Context) error {
			_, err := raw.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "fl-ok", Owner: big, TtlMs: 60000})
			return err
		}},
		{"PrepareStream owner", func(ctx context.Context) error {
			s, err := raw.PrepareStream(ctx, &sessionpb.PrepareRequest{SessionId: "fl-ok", Owner: big, TtlMs: 60000})
			if err != nil {
				return err
			}
			_, err = s.Recv()
			return err
		}},
		{"ExitPlan feedback", func(ctx context.Context) error {
			_, err := plan.ExitPlan(ctx, &sessionpb.PlanExitRequest{SessionId: "fl-ok", Plan: "# P\n\ndo it",
				Answer: &sessionpb.ReviewAnswer{Answers: []*sessionpb.AnswerItem{{Id: "plan-review", Custom: &big}}}})
			return err
		}},
	}
	for _, c := range calls {
		code, se := ctStatus(c.call(ctx))
		if code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonTooLarge {
			t.Errorf("%s: got %v %v, want RESOURCE_EXHAUSTED / TOO_LARGE", c.name, code, se)
		}
	}
	if _, err := raw.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("fl-big", "/w")}); err != nil {
		t.Fatalf("the refused Create left something behind: %v", err)
	}
	v, err := raw.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "fl-ok"})
	if code, _ := ctStatus(err); code != codes.NotFound {
		t.Fatalf("fl-ok after refused Prepares: %v %v (want NOT_FOUND: registered, never materialised, no lease)", v, err)
	}
}

// ExitPlan feedback counts against --max-session-bytes (issue 13 item 12:
// twenty 8 MiB feedbacks grew state.db to 233 MB under a 1 MiB quota): with
// 60 KiB feedback and a 256 KiB quota the calls are refused with
// QUOTA_EXCEEDED once the kept answers fill the quota.
func TestExitPlanFeedbackCountsAgainstSessionBytes(t *testing.T) {
	n := startTestNodeWith(t, "", func(c *serveConfig) { c.Cluster.MaxSessionBytes = 256 << 10 })
	n.waitReady(true)
	ctx := n.ctx()
	plan := sessionpb.NewPlanModeClient(n.Client.Conn())
	ctCreate(t, n, ctMeta("fb", "/w"))
	if _, err := plan.Set(ctx, &sessionpb.PlanSetRequest{SessionId: "fb", Active: true, RequestId: "on"}); err != nil {
		t.Fatal(err)
	}
	feedback := strings.Repeat("f", 60<<10)
	accepted := 0
	var err error
	for i := range 20 {
		var out *sessionpb.PlanExitResponse
		out, err = plan.ExitPlan(ctx, &sessionpb.PlanExitRequest{SessionId: "fb", Plan: "# P\n\ndo it", RequestId: fmt.Sprintf("exit-%d", i),
			Answer: &sessionpb.ReviewAnswer{Answers: []*sessionpb.AnswerItem{{Id: "plan-review", Selected: []string{"Keep planning"}, Custom: &feedback}}}})
		if err != nil {
			break
		}
		if !out.IsError || !strings.Contains(out.Text, "their feedback") {
			t.Fatalf("exit %d: %v", i, out)
		}
		accepted++
	}
	if _, se := ctStatus(err); se == nil || se.Reason != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("after %d ExitPlan calls with 60 KiB feedback under a 256 KiB quota: %v, want QUOTA_EXCEEDED", accepted, err)
	}
	if accepted < 1 || accepted > 4 {
		t.Fatalf("%d feedbacks of 60 KiB kept under a 256 KiB quota", accepted)
	}
}
