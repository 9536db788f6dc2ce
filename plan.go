package sessionstore

// PlanCall is what every plan-mode call that may append carries (docs/api.md
// "service PlanMode").
type PlanCall struct {
	// LeaseEpoch is required on an owned session, as for Append; 0 on an
	// owned session only records a pending selection where the call allows it.
	LeaseEpoch uint64
	// ExpectedNextSeq, when non-zero, must equal the log's next seq.
	ExpectedNextSeq int64
	RequestID       string
}

// PlanOutcome is the outcome of a plan-mode set (docs/planmode.md#set).
type PlanOutcome int

const (
	PlanCommitted PlanOutcome = iota + 1
	PlanQueued
	PlanCancelled
	PlanNoop
)

// PlanState is the plan-mode state of a session: the logged state (fold of
// plan/mode) and the pending selection's target, nil when none.
type PlanState struct {
	Active  bool
	Pending *bool
	NextSeq int64
}

// PlanResult is the outcome of a plan-mode call; each call fills its part.
type PlanResult struct {
	Outcome  PlanOutcome // Set, Command
	Active   bool        // PreStep: the state the step runs under
	Appended [][]byte    // the events this call appended, in order
	Notices  [][]byte    // PreStep: narration user-message data objects
	NextSeq  int64
	Revision string

	// Command.
	Kind         string
	Text         string // Command, ExitPlan
	SteerText    *string
	SteerContent []byte // nil when the command does not steer

	// ExitPlan: a tool result, never an error.
	Approved       bool
	IsError        bool
	NeedsReview    bool
	ReviewQuestion []byte
}
