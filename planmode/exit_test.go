package planmode

import (
	"encoding/json"
	"strings"
	"testing"
)

const defaultPlan = "# The plan\n\ndo things"

func strp(s string) *string { return &s }

func TestToolRegistration(t *testing.T) {
	if ToolName != "exit_plan_mode" || !strings.HasPrefix(ToolDescription, "Use only in plan mode.") {
		t.Fatal(ToolDescription)
	}
	var schema struct {
		Properties map[string]any `json:"properties"`
		Required   []string       `json:"required"`
	}
	if err := json.Unmarshal([]byte(ToolParameters), &schema); err != nil || len(schema.Properties) != 1 || schema.Properties["plan"] == nil || !eqStrings(schema.Required, []string{"plan"}) {
		t.Fatal(schema, err)
	}
}

func TestExitValidation(t *testing.T) {
	var off logb
	r, _ := ExitPlan(off.evs, State{}, defaultPlan, nil)
	if r.Text != "Error: exit_plan_mode is only available in plan mode" || !r.IsError || r.NeedsReview {
		t.Fatal(r)
	}
	// A queued entry does not count.
	r, _ = ExitPlan(off.evs, State{Pending: &Pending{true, true}}, defaultPlan, nil)
	if r.Message != ErrNotInPlanMode {
		t.Fatal(r)
	}
	var on logb
	on.plan(true)
	for _, p := range []string{"", "do things", "## Title", "#Title", "   ", "#   "} {
		r, _ := ExitPlan(on.evs, State{}, p, &ReviewAnswer{Answers: []AnswerItem{{ID: ReviewID, Selected: []string{ReviewApprove}}}})
		if r.Text != "Error: exit_plan_mode requires a non-empty markdown plan starting with a # heading" || r.NeedsReview || r.State.Pending != nil {
			t.Errorf("%q: %+v", p, r)
		}
	}
	for _, p := range []string{"# Title", "  #\tT ", "# P", "#\u00a0x"} {
		r, _ := ExitPlan(on.evs, State{}, p, nil)
		if !r.NeedsReview || r.IsError {
			t.Errorf("%q: %+v", p, r)
		}
	}
}

func TestExitApprove(t *testing.T) {
	b := newBench(t)
	b.l.plan(true).header().openTurn()
	r, err := ExitPlan(b.l.evs, b.st, defaultPlan, &ReviewAnswer{Answers: []AnswerItem{{ID: ReviewID, Selected: []string{ReviewApprove}}}})
	if err != nil || r.IsError || !r.Approved || r.Text != "Plan approved — plan mode exited; carry out the plan starting with your next step." {
		t.Fatal(r, err)
	}
	b.st = r.State
	if !b.fold() || b.get() != "{active:true, pending:false}" || !b.st.ApprovedExitPending() {
		t.Fatal(b.get())
	}
	b.boundary(true)
	if b.fold() || len(b.notices) != 0 {
		t.Fatal("silent exit", b.notices)
	}
	// set(false) while the approved exit is pending: noop, keeps narrate:false.
	var l logb
	l.plan(true).openTurn()
	sr, _ := Set(l.evs, State{Pending: &Pending{false, false}}, false, l.at(), SetOptions{})
	if sr.Outcome != Noop || *sr.State.Pending != (Pending{false, false}) {
		t.Fatal(sr)
	}
	sr, _ = Set(l.evs, State{Pending: &Pending{false, false}}, true, l.at(), SetOptions{})
	if sr.Outcome != Cancelled || *sr.State.Pending != (Pending{true, true}) {
		t.Fatal(sr)
	}
}

func TestExitDismissed(t *testing.T) {
	var l logb
	l.plan(true)
	r, _ := ExitPlan(l.evs, State{}, defaultPlan, &ReviewAnswer{Dismissed: true})
	if r.Text != "Error: The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message." || r.State.Pending != nil {
		t.Fatal(r)
	}
}

func TestInterpretAnswer(t *testing.T) {
	generic := "Error: The user chose to keep planning; revise the plan and present it again."
	fb := func(s string) string { return "Error: The user chose to keep planning; their feedback: " + s }
	item := func(sel []string, custom *string) AnswerItem {
		return AnswerItem{ID: ReviewID, Selected: sel, Custom: custom}
	}
	for i, c := range []struct {
		answers []AnswerItem
		text    string
	}{
		{[]AnswerItem{item([]string{"Approve"}, nil)}, TextApproved},
		{[]AnswerItem{item([]string{"Keep planning"}, nil)}, generic},
		{[]AnswerItem{item([]string{"Keep planning"}, strp("consider the resume path"))}, fb("consider the resume path")},
		{[]AnswerItem{item([]string{}, strp("add tests first"))}, fb("add tests first")},
		{[]AnswerItem{item([]string{"Approve"}, strp("change the tests"))}, fb("change the tests")},
		{[]AnswerItem{item([]string{"Approve"}, strp(""))}, generic},
		{[]AnswerItem{item([]string{"Approve", "Keep planning"}, nil)}, generic},
		{[]AnswerItem{item([]string{"Approve"}, nil), item([]string{"Keep planning"}, nil)}, generic},
		{nil, generic},
		{[]AnswerItem{{ID: "other", Selected: []string{"Approve"}}}, generic},
		{[]AnswerItem{item(nil, nil)}, generic},
	} {
		var l logb
		l.plan(true)
		r, _ := ExitPlan(l.evs, State{}, defaultPlan, &ReviewAnswer{Answers: c.answers})
		if r.Text != c.text || r.Approved != (c.text == TextApproved) || r.IsError == r.Approved {
			t.Errorf("case %d: %+v", i, r)
		}
		if !r.Approved && r.State.Pending != nil {
			t.Errorf("case %d: state changed", i)
		}
	}
}

func TestReviewQuestion(t *testing.T) {
	plan := "  # Cache design\n\n1. Add an LRU. <&> \u2028 "
	var q struct {
		Questions []struct {
			ID, Header, Question, Detail string
			Options                      []struct{ Label, Description string }
			Intent                       map[string]string
			MultiSelect                  *bool
		}
	}
	raw := ReviewQuestion(plan)
	if err := json.Unmarshal(raw, &q); err != nil || len(q.Questions) != 1 {
		t.Fatal(err)
	}
	x := q.Questions[0]
	if x.ID != "plan-review" || x.Header != "Plan review" || x.Question != "Approve this plan and leave plan mode?" || x.Detail != plan || x.MultiSelect != nil {
		t.Fatal(x)
	}
	if len(x.Options) != 2 || x.Options[0].Label != "Approve" || x.Options[1].Label != "Keep planning" ||
		x.Options[0].Description != ReviewApproveDesc || x.Options[1].Description != ReviewKeepPlanDesc {
		t.Fatal(x.Options)
	}
	if x.Intent["kind"] != "plan-review" || x.Intent["approve"] != "Approve" {
		t.Fatal(x.Intent)
	}
	if !strings.Contains(string(raw), "<&> \u2028") {
		t.Fatal("must serialise like JSON.stringify (no HTML escaping)")
	}
}
