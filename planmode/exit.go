package planmode

import (
	"github.com/sessionstore/sessionstore/sessionlog"
)

// The exit_plan_mode tool (docs/planmode.md#exit-plan-mode).
const (
	ToolName        = "exit_plan_mode"
	ToolDescription = "Use only in plan mode. Present your plan for the user's review and, on approval, leave plan mode. Send the COMPLETE plan as markdown, starting with a # heading that names it. The user may approve (carry out the plan from your next step) or keep planning — their feedback comes back in the tool result; revise and present again."
	// ToolParameters is the advertised JSON Schema of the arguments.
	ToolParameters = `{"type":"object","properties":{"plan":{"type":"string","description":"The complete plan, as markdown, starting with a # heading that names it."}},"required":["plan"]}`
	// ApprovedValue is the only success value.
	ApprovedValue = `{"approved":true}`

	TextApproved = "Plan approved — plan mode exited; carry out the plan starting with your next step."

	ErrNoAgent       = "exit_plan_mode requires a calling agent (no session to switch)"
	ErrNotInPlanMode = "exit_plan_mode is only available in plan mode"
	ErrBadPlan       = "exit_plan_mode requires a non-empty markdown plan starting with a # heading"
	ErrNoChannel     = "no user-questions channel is available to review the plan; ask the user to switch the session mode instead"
	ErrDismissed     = "The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message."
	ErrReloaded      = "the plan-mode service was reloaded while the plan was under review; present the plan again"
	ErrKeepPlanning  = "The user chose to keep planning; revise the plan and present it again."
	// ErrFeedbackPrefix is followed by the feedback verbatim.
	ErrFeedbackPrefix = "The user chose to keep planning; their feedback: "

	// Review question (docs/planmode.md#review-question).
	ReviewID             = "plan-review"
	ReviewHeader         = "Plan review"
	ReviewQuestionText   = "Approve this plan and leave plan mode?"
	ReviewApprove        = "Approve"
	ReviewApproveDesc    = "Leave plan mode; the plan is carried out from the next step."
	ReviewKeepPlanning   = "Keep planning"
	ReviewKeepPlanDesc   = "Stay in plan mode; feedback goes back to the model."
	errorRenderingPrefix = "Error: "
)

// AnswerItem is one answered question; Custom nil means absent.
type AnswerItem struct {
	ID       string
	Selected []string
	Custom   *string
}

// ReviewAnswer is the user's answer to the review; Dismissed is the
// ASK_CANCELLED rejection (the user closed the review to speak instead).
type ReviewAnswer struct {
	Answers   []AnswerItem
	Dismissed bool
}

// ToolResult is a tool outcome (never a Go error). Message is the thrown
// message or success rendering; Text is what the model sees ("Error: "
// prefixed when IsError).
type ToolResult struct {
	Approved bool
	IsError  bool
	Message  string
	Text     string
}

func toolError(msg string) ToolResult {
	return ToolResult{IsError: true, Message: msg, Text: errorRenderingPrefix + msg}
}

// ExitResult is what ExitPlan decided.
type ExitResult struct {
	ToolResult
	// NeedsReview: validation passed and no answer was given; ask the user
	// the ReviewQuestion and call again with the answer.
	NeedsReview bool
	State       State
}

// ValidPlan is the plan-shape check of docs/planmode.md#exit-steps step 3: ^#\s+\S on the
// JavaScript-trimmed text.
func ValidPlan(plan string) bool {
	t := jsTrim(plan)
	if len(t) < 2 || t[0] != '#' {
		return false
	}
	rest := t[1:]
	r, n := decodeRune(rest)
	if !isJSSpace(r) {
		return false
	}
	for len(rest) > 0 {
		r, n = decodeRune(rest)
		if !isJSSpace(r) {
			return true
		}
		rest = rest[n:]
	}
	return false
}

// InterpretAnswer is docs/planmode.md#review-answer: approved iff exactly one
// plan-review item whose selected is exactly ["Approve"] and whose custom is
// absent; feedback is that item's custom, else "".
func InterpretAnswer(a ReviewAnswer) (approved bool, feedback string) {
	var item *AnswerItem
	n := 0
	for i := range a.Answers {
		if a.Answers[i].ID == ReviewID {
			item = &a.Answers[i]
			n++
		}
	}
	if n != 1 {
		return false, ""
	}
	if item.Custom != nil {
		feedback = *item.Custom
	}
	approved = len(item.Selected) == 1 && item.Selected[0] == ReviewApprove && item.Custom == nil
	return approved, feedback
}

// ReviewQuestion is the review request of docs/planmode.md#review-question
// without agent and signal: {"questions":[{id, header, question, detail: plan
// untrimmed, options, intent}]}.
func ReviewQuestion(plan string) []byte {
	b := make([]byte, 0, 512+len(plan))
	b = append(b, `{"questions":[{"id":"plan-review","header":"Plan review","question":"Approve this plan and leave plan mode?","detail":`...)
	b = sessionlog.AppendJSString(b, plan)
	b = append(b, `,"options":[{"label":"Approve","description":"Leave plan mode; the plan is carried out from the next step."},{"label":"Keep planning","description":"Stay in plan mode; feedback goes back to the model."}],"intent":{"kind":"plan-review","approve":"Approve"}}]}`...)
	return b
}

// ExitPlan is the exit_plan_mode tool's execution (docs/planmode.md#exit-steps) for a session
// whose caller exists. Checks run in the reference's order: logged plan
// mode, plan shape; then, without an answer, NeedsReview; with one, a
// dismissal, the keep-planning outcomes, or approval, which records the
// silent pending exit Pending{false, false} (replacing any record). Every
// non-approved outcome leaves the state untouched.
func ExitPlan(events [][]byte, st State, plan string, answer *ReviewAnswer) (ExitResult, error) {
	s, err := Summarize(events)
	if err != nil {
		return ExitResult{}, err
	}
	return s.ExitPlan(st, plan, answer), nil
}

// ExitPlan is ExitPlan over a log's Summary.
func (s Summary) ExitPlan(st State, plan string, answer *ReviewAnswer) ExitResult {
	res := ExitResult{State: st}
	if !s.Fold {
		res.ToolResult = toolError(ErrNotInPlanMode)
		return res
	}
	if !ValidPlan(plan) {
		res.ToolResult = toolError(ErrBadPlan)
		return res
	}
	if answer == nil {
		res.NeedsReview = true
		return res
	}
	if answer.Dismissed {
		res.ToolResult = toolError(ErrDismissed)
		return res
	}
	approved, feedback := InterpretAnswer(*answer)
	if !approved {
		if feedback != "" {
			res.ToolResult = toolError(ErrFeedbackPrefix + feedback)
		} else {
			res.ToolResult = toolError(ErrKeepPlanning)
		}
		return res
	}
	res.ToolResult = ToolResult{Approved: true, Message: TextApproved, Text: TextApproved}
	res.State.Pending = &Pending{Active: false, Narrate: false}
	return res
}
