package main

// End-to-end tests of the PlanMode gRPC service (docs/api.md "service PlanMode",
// docs/planmode.md) against a real single node (Raft, bbolt,
// gRPC) through the Go client. The test plays the agent: it assigns seqs and
// appends its own events with SessionPersistence.Append, and calls
// Set/PreStep/Command/ExitPlan where the reference's plugin acts. Every
// top-level helper of this file starts with "pm".
//
// docs/contract.md#plan-mode-tests → the test that covers it through gRPC ("n/a":
// why it does not apply to a server; the pure-level mapping is the header of
// planmode/planmode_test.go).
//
// plan-mode.spec.ts
//   1–3  resolveConfig ................ n/a: plugin config and the plan:policy section live in the agent host
//   4    fold empty + last wins ....... TestPlanMode_GetReadsFold
//   5    fold of a prefix (end) ....... n/a: the API folds whole logs; prefixes are observed by calling Get
//                                       after each append in the goldens (TestPlanMode_Golden12_*)
//   6    get reads the fold ........... TestPlanMode_GetReadsFold
//   7    exit target queued in a turn . TestPlanMode_ExitPlan/39_outside_plan_mode (the queued exit; every
//                                       row of the set table: fsm's TestPlanSetDecisionTable)
//   8    no-op set .................... TestPlanMode_SetDecisionTable (the sequence: planmode's TestSetNoop)
//   9    between-turns commit ......... TestPlanMode_SetIdleCommit
//   10   idle reversal cancels ........ planmode's TestSetIdleReversalCancels (CANCELLED through the API:
//                                       TestPlanMode_SetDecisionTable)
//   11   idle commit narrates ......... TestPlanMode_Narration/11_idle_commit_narrates_once
//   12   boundary inert ............... TestPlanMode_PreStep/12_inert_without_pending
//   13   pre-step flush ............... TestPlanMode_PreStep/13_flushes_a_queued_selection
//   14   flush removed on dispose ..... n/a: no plugin fiber; the replicated selection is never disposed
//                                       (it survives a restart instead: TestPlanMode_SelectionsSurviveRestart)
//   15   between-step seam flush ...... TestPlanMode_SetIdleCommit (idle commit, then a step keeps it)
//   16   net-zero flip sequence ....... TestPlanMode_PreStep/16_net_zero
//   17   no notice before any header .. TestPlanMode_Narration/17_no_notice_before_any_header
//   18–20 narrates once, the exit,
//         silent when header agrees .. planmode's TestNarrationRules (the rules alone; narration through
//                                       the API: TestPlanMode_Narration, TestPlanMode_Golden12_2)
//   21–22 append failure contained .... TestPlanMode_PreStep/21-22_refused_pre-step_keeps_the_selection
//                                       (an append cannot fail inside the FSM apply; a PreStep refused
//                                       by SEQ_MISMATCH / LEASE_FENCED is the server's failed boundary)
//   23–29 soft layer, tool schemas,
//         Code Mode SDK .............. n/a: prompt assembly and tool lists are agent-side
//   30–31 no execution gating ......... n/a: the server executes no tools
//   32   /plan in a turn + steer ...... TestPlanMode_Golden12_2 and its steer variant (untrimmed args:
//                                       planmode's TestCommandOpenTurn; the registration list is agent-side)
//   33   /plan off .................... TestPlanMode_Command/33_plan_off
//   34   idle copies .................. TestPlanMode_Command/34_idle_copies
//   35   images ....................... TestPlanMode_Command/35_images
//   36   command removed on dispose ... n/a: no plugin disposal
//   37   tool registration ............ n/a: the tool schema is advertised by the agent
//   38   agent-less call .............. TestPlanMode_ExitPlan/38_no_calling_agent (empty session id)
//   39   outside plan mode ............ TestPlanMode_ExitPlan/39_outside_plan_mode
//   40   bad plan, not asked .......... TestPlanMode_ExitPlan/40_bad_plan
//   41–43 no channel / no provider /
//         delegated caller ............ n/a: the user-questions seam and agent ownership live in the agent host
//   44   approve ...................... TestPlanMode_ExitPlan/44_47_approve, TestPlanMode_Golden12_3
//   45   Code Mode review ............. n/a: Code Mode dispatch is agent-side (detail = exact plan: 44_47_approve)
//   46   approved exit shapes the next
//        assembly ..................... n/a: assembly is agent-side; Get's pending:false is what it reads
//                                       (TestPlanMode_ExitPlan/44_47_approve)
//   47   exit flush narrates nothing .. TestPlanMode_ExitPlan/44_47_approve
//   48–54 answer interpretation ....... TestPlanMode_ExitPlan/48-54_keep_planning (table)
//   55   presentation intent .......... TestPlanMode_ExitPlan/44_47_approve (review_question)
//   56   dismissed .................... TestPlanMode_ExitPlan/56_dismissed
//   57   other failures' own text ..... n/a: ASK_ABORTED and provider errors never reach the server
//   58   abort signal forwarded ....... n/a: signals are agent-side
//   59   reloaded while under review .. n/a: replicated state survives reloads (L7);
//                                       see TestPlanMode_SelectionsSurviveRestart
//   60   throwing provider ............ n/a: the provider is agent-side
//   61–62 presentation cards .......... n/a: UI only
//   63   HMR disposal ................. n/a: no plugin fiber
// integration.spec.ts
//   1    pre-turn set, first header
//        plan-shaped, no notice ....... TestPlanMode_Integration/1_pre-turn_set
//   2    flip between turns narrates .. TestPlanMode_Integration/2_flip_between_turns
//   3    flip at error settlement
//        waits for the next turn ...... TestPlanMode_Integration/3_flip_during_a_retried_request
// invariant.spec.ts
//   1    booleans accepted in a turn .. TestPlanMode_Invariant
//   2–4  42, "plan", undefined refused  TestOwBadInput in ownership_test.go (plan/mode cases; not duplicated)
//   5    standalone between turns ..... TestPlanMode_Invariant
//   6    unrelated events ............. TestPlanMode_Invariant
//   7    invalid existing state on late
//        registration ................. n/a: the invariant runs on every Append from the start, so no
//                                       invalid plan/mode can be stored
//   8–9  valid existing state on late
//        registration ................. n/a (no late registration); valid enclosed and standalone
//                                       plan/mode logs are read by TestPlanMode_Invariant and
//                                       TestPlanMode_RecordedSessionReadsActive
// projection.spec.ts
//   1    empty log .................... TestPlanMode_GetReadsFold (first state)
//   2    /plan pending until plan/mode  TestPlanMode_Projection/2_selection_pending_until_plan_mode
//   3–5  error settlement, off args,
//        message argument ............ planmode's TestProjectionSpec (the rules alone)
//   6–7  unit composition / unload .... n/a: the projection is always served
//   8    cold replay .................. TestPlanMode_Projection/8_cold_replay
//
// Sequences (docs/contract.md#plan-mode-sequences): TestPlanMode_Golden12_1 …
// TestPlanMode_Golden12_4. Request ids: TestPlanMode_RequestIDs. SEQ_MISMATCH,
// NOT_FOUND, INVALID_ARGUMENT: TestPlanMode_Errors. Lease epochs and the
// owned-session deferral: TestPlanMode_OwnedSession. Recorded session:
// TestPlanMode_RecordedSessionReadsActive.

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"github.com/sessionstore/sessionstore/storage"
)

// Reference texts (docs/planmode.md#narration,
// docs/planmode.md#exit-plan-mode, docs/planmode.md#plan-handler).
const (
	pmNoticeEnter     = "The user switched this session to plan mode."
	pmNoticeExit      = "The user switched this session back to the default mode."
	pmTextPlanOn      = "Plan mode on. Use /plan off to leave."
	pmTextEntering    = "Entering plan mode (applies from the next step). Use /plan off to leave."
	pmTextPlanOff     = "Plan mode off."
	pmTextLeaving     = "Leaving plan mode (applies from the next step)."
	pmTextCancelled   = "Plan mode entry cancelled."
	pmTextInactive    = "Plan mode is already inactive."
	pmTextOffImages   = "Image attachments cannot accompany /plan off."
	pmTextApproved    = "Plan approved — plan mode exited; carry out the plan starting with your next step."
	pmErrNoAgent      = "Error: exit_plan_mode requires a calling agent (no session to switch)"
	pmErrNotInPlan    = "Error: exit_plan_mode is only available in plan mode"
	pmErrBadPlan      = "Error: exit_plan_mode requires a non-empty markdown plan starting with a # heading"
	pmErrDismissed    = "Error: The user dismissed the plan review to speak instead; stay in plan mode, stop here, and wait for their message."
	pmErrKeepPlanning = "Error: The user chose to keep planning; revise the plan and present it again."
	pmErrFeedback     = "Error: The user chose to keep planning; their feedback: "

	pmPlan = "# The plan\n\ndo things"

	pmImg1 = `{"type":"image","attachment":{"attachmentId":"att-1","mediaType":"image/png"}}`
	pmImg2 = `{"type":"image","attachment":{"attachmentId":"att-2","mediaType":"image/png"}}`
)

const (
	pmCommitted = sessionpb.Outcome_COMMITTED
	pmQueued    = sessionpb.Outcome_QUEUED
	pmCancelled = sessionpb.Outcome_CANCELLED
	pmNoop      = sessionpb.Outcome_NOOP
)

var (
	pmCommandIDRe = regexp.MustCompile(`^cmd-[0-9a-f]{8}-[1-9][0-9]*$`)
	pmUUIDRe      = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)
	pmEnvSeqRe    = regexp.MustCompile(`^(\{"type":"[^"]+","seq":)(\d+)(,)`)
	pmSourceSeqRe = regexp.MustCompile(`"sourceEventSeqs":\[(\d+)\]`)
)

// ---------------------------------------------------------------------------
// Node, session and the agent the test plays
// ---------------------------------------------------------------------------

// pmNode starts a lone node for one top-level test, in parallel with the
// other tests.
func pmNode(t *testing.T) *testNode {
	t.Helper()
	t.Parallel()
	return startTestNode(t, "")
}

// pmAgent is the agent side of one session: it owns the seq counter, appends
// its own events and calls the PlanMode service with its epoch and its
// expected next seq, checking that every server append continues its
// counter.
type pmAgent struct {
	t     *testing.T
	n     *testNode
	id    string
	epoch uint64
	next  int64           // the seq the next append must use
	tm    int64           // the time of the next event built by ev
	seqs  map[int64]int64 // spec seq → stored seq (goldens)
}

func pmSession(t *testing.T, n *testNode, id string) *pmAgent {
	t.Helper()
	h := &sessionpb.SessionHeader{Version: 0, Id: id, CreatedAt: 1000}
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h}); err != nil {
		t.Fatalf("Create(%q): %v", id, err)
	}
	return &pmAgent{t: t, n: n, id: id, tm: 1000, seqs: map[int64]int64{}}
}

// pmEv renders an event envelope (type, seq, time, data).
func pmEv(typ string, seq, tm int64, data string) string {
	return `{"type":` + strconv.Quote(typ) + `,"seq":` + strconv.FormatInt(seq, 10) +
		`,"time":` + strconv.FormatInt(tm, 10) + `,"data":` + data + `}`
}

// pmSurf is pmEv with surfaceOp "append".
func pmSurf(typ string, seq, tm int64, data string) string {
	return strings.TrimSuffix(pmEv(typ, seq, tm, data), "}") + `,"surfaceOp":"append"}`
}

func (a *pmAgent) tick() int64 { a.tm++; return a.tm }

// appendRaw appends events that already carry the agent's next seqs.
func (a *pmAgent) appendRaw(events ...string) {
	a.t.Helper()
	r, err := a.n.Client.Append(a.n.ctx(), &sessionpb.AppendRequest{SessionId: a.id, Events: events, LeaseEpoch: a.epoch})
	if err != nil {
		a.t.Fatalf("Append(%q, seq %d, %d events): %v\n%s", a.id, a.next, len(events), err, strings.Join(events, "\n"))
	}
	if want := a.next + int64(len(events)); r.GetNextSeq() != want {
		a.t.Fatalf("Append(%q): next_seq %d, want %d", a.id, r.GetNextSeq(), want)
	}
	a.next = r.GetNextSeq()
}

func (a *pmAgent) add(typ, data string) string {
	a.t.Helper()
	ev := pmEv(typ, a.next, a.tick(), data)
	a.appendRaw(ev)
	return ev
}

func (a *pmAgent) addSurf(typ, data string) string {
	a.t.Helper()
	ev := pmSurf(typ, a.next, a.tick(), data)
	a.appendRaw(ev)
	return ev
}

func (a *pmAgent) turnStart(turn int) {
	a.t.Helper()
	a.add("turn/start", fmt.Sprintf(`{"turn":%d}`, turn))
}
func (a *pmAgent) turnEnd(turn int) {
	a.t.Helper()
	a.add("turn/end", fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
}
func (a *pmAgent) stepStart(turn, step int) {
	a.t.Helper()
	a.add("step/start", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
}
func (a *pmAgent) stepEnd(turn, step int) {
	a.t.Helper()
	a.add("step/end", fmt.Sprintf(`{"turn":%d,"step":%d}`, turn, step))
}

// header appends the minimal request/header of the reference's plan-mode tests.
func (a *pmAgent) header() {
	a.t.Helper()
	a.add("request/header", `{"header":{"config":{"provider":"test","model":"test-model"}},"reason":"initial"}`)
}

// planMode appends plan/mode directly (tests seed state this way,
// docs/planmode.md#plan-mode-event).
func (a *pmAgent) planMode(active bool) {
	a.t.Helper()
	a.add("plan/mode", fmt.Sprintf(`{"active":%v}`, active))
}

// userMessage appends a user/message whose data object is msg.
func (a *pmAgent) userMessage(msg string) {
	a.t.Helper()
	a.addSurf("user/message", msg)
}

// spec appends one line of a spec sequence renumbered to the agent's next
// seq (its sourceEventSeqs remapped the same way) and returns the stored
// text.
func (a *pmAgent) spec(line string) string {
	a.t.Helper()
	m := pmEnvSeqRe.FindStringSubmatch(line)
	if m == nil {
		a.t.Fatalf("spec line without a leading type and seq: %s", line)
	}
	specSeq, _ := strconv.ParseInt(m[2], 10, 64)
	ev := pmEnvSeqRe.ReplaceAllString(line, "${1}"+strconv.FormatInt(a.next, 10)+"${3}")
	ev = pmSourceSeqRe.ReplaceAllStringFunc(ev, func(s string) string {
		src, _ := strconv.ParseInt(pmSourceSeqRe.FindStringSubmatch(s)[1], 10, 64)
		got, ok := a.seqs[src]
		if !ok {
			a.t.Fatalf("spec line refers to seq %d, which was not played: %s", src, line)
		}
		return `"sourceEventSeqs":[` + strconv.FormatInt(got, 10) + `]`
	})
	a.seqs[specSeq] = a.next
	a.appendRaw(ev)
	return ev
}

// play appends the spec lines with the given spec seqs.
func (a *pmAgent) play(s *pmSpec, seqs ...int64) {
	a.t.Helper()
	for _, q := range seqs {
		a.spec(s.at(q))
	}
}

// took checks the events a plan call appended: they continue the agent's
// counter and next_seq follows them; the counter then moves past them.
func (a *pmAgent) took(what string, appended []string, nextSeq int64) {
	a.t.Helper()
	for i, ev := range appended {
		seq, tm := pmSeqTime(a.t, ev)
		if seq != a.next+int64(i) {
			a.t.Errorf("%s: appended event %d has seq %d, want %d\n%s", what, i, seq, a.next+int64(i), ev)
		}
		if tm <= 0 {
			a.t.Errorf("%s: appended event %d has time %d, want the leader's clock\n%s", what, i, tm, ev)
		}
	}
	if want := a.next + int64(len(appended)); nextSeq != want {
		a.t.Fatalf("%s: next_seq %d, want %d (%d events appended at %d)", what, nextSeq, want, len(appended), a.next)
	}
	a.next = nextSeq
}

func (a *pmAgent) set(want bool) *sessionpb.PlanSetResponse {
	a.t.Helper()
	r, err := a.n.Client.PlanSet(a.n.ctx(), &sessionpb.PlanSetRequest{SessionId: a.id, Active: want, LeaseEpoch: a.epoch, ExpectedNextSeq: a.next})
	if err != nil {
		a.t.Fatalf("PlanSet(%q, %v): %v", a.id, want, err)
	}
	a.took(fmt.Sprintf("Set(%v)", want), r.GetAppendedEvents(), r.GetNextSeq())
	return r
}

// wantSet runs Set and checks its outcome.
func (a *pmAgent) wantSet(want bool, outcome sessionpb.Outcome) *sessionpb.PlanSetResponse {
	a.t.Helper()
	r := a.set(want)
	if r.GetOutcome() != outcome {
		a.t.Fatalf("Set(%v): outcome %v, want %v", want, r.GetOutcome(), outcome)
	}
	return r
}

func (a *pmAgent) preStep() *sessionpb.PlanPreStepResponse {
	a.t.Helper()
	r, err := a.n.Client.PlanPreStep(a.n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: a.id, LeaseEpoch: a.epoch, ExpectedNextSeq: a.next})
	if err != nil {
		a.t.Fatalf("PlanPreStep(%q): %v", a.id, err)
	}
	a.took("PreStep", r.GetAppendedEvents(), r.GetNextSeq())
	for _, nt := range r.GetNotices() {
		pmCheckNoticeShape(a.t, nt)
	}
	return r
}

// step is an accepted step: PreStep, step/start, then the returned notices
// logged as user/message. It returns the PreStep response and the notice
// texts.
func (a *pmAgent) step(turn, step int) (*sessionpb.PlanPreStepResponse, []string) {
	a.t.Helper()
	r := a.preStep()
	a.stepStart(turn, step)
	var texts []string
	for _, nt := range r.GetNotices() {
		a.userMessage(nt)
		texts = append(texts, pmNoticeText(a.t, nt))
	}
	return r, texts
}

func (a *pmAgent) command(raw string, images ...string) *sessionpb.PlanCommandResponse {
	a.t.Helper()
	r, err := a.n.Client.PlanCommand(a.n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: raw, ImageBlocks: images,
		LeaseEpoch: a.epoch, ExpectedNextSeq: a.next})
	if err != nil {
		a.t.Fatalf("PlanCommand(%q, %q): %v", a.id, raw, err)
	}
	a.took(fmt.Sprintf("Command(%q)", raw), r.GetAppendedEvents(), r.GetNextSeq())
	if len(r.GetAppendedEvents()) > 0 {
		pmCommandID(a.t, r.GetAppendedEvents())
	}
	return r
}

func (a *pmAgent) exit(plan string, answer *sessionpb.ReviewAnswer) *sessionpb.PlanExitResponse {
	a.t.Helper()
	r, err := a.n.Client.ExitPlan(a.n.ctx(), &sessionpb.PlanExitRequest{SessionId: a.id, Plan: plan, Answer: answer, LeaseEpoch: a.epoch})
	if err != nil {
		a.t.Fatalf("ExitPlan(%q): %v", a.id, err)
	}
	return r
}

func (a *pmAgent) getResp() *sessionpb.PlanGetResponse {
	a.t.Helper()
	r, err := a.n.Client.PlanGet(a.n.ctx(), &sessionpb.PlanGetRequest{SessionId: a.id})
	if err != nil {
		a.t.Fatalf("PlanGet(%q): %v", a.id, err)
	}
	if r.GetNextSeq() != a.next {
		a.t.Errorf("PlanGet(%q): next_seq %d, want %d", a.id, r.GetNextSeq(), a.next)
	}
	return r
}

// get is Get in the spec's notation: {active:B} or {active:B, pending:B}.
func (a *pmAgent) get() string { a.t.Helper(); return pmGetString(a.getResp()) }

// proj is Projection as {B,B} (active, pending).
func (a *pmAgent) proj() string {
	a.t.Helper()
	return pmProjection(a.t, a.n, a.id)
}

// wantGet checks Get in the spec's notation.
func (a *pmAgent) wantGet(what, want string) {
	a.t.Helper()
	if g := a.get(); g != want {
		a.t.Errorf("%s: Get %s, want %s", what, g, want)
	}
}

// wantCount checks how many stored events have type typ.
func (a *pmAgent) wantCount(typ string, want int) {
	a.t.Helper()
	if got := pmCount(a.t, a.stored(), typ); got != want {
		a.t.Errorf("%d %s events stored, want %d", got, typ, want)
	}
}

// wantStep runs step and checks its answer: active, how many events it
// appended, and the notice texts.
func (a *pmAgent) wantStep(turn, step int, active bool, appended int, notices ...string) *sessionpb.PlanPreStepResponse {
	a.t.Helper()
	ps, got := a.step(turn, step)
	if ps.GetActive() != active || len(ps.GetAppendedEvents()) != appended || !reflect.DeepEqual(got, notices) {
		a.t.Errorf("step %d.%d: active=%v appended %v notices %q; want active=%v, %d appended, notices %q",
			turn, step, ps.GetActive(), ps.GetAppendedEvents(), got, active, appended, notices)
	}
	return ps
}

// state checks Get and Projection.
func (a *pmAgent) state(what, get, proj string) {
	a.t.Helper()
	a.wantGet(what, get)
	if p := a.proj(); p != proj {
		a.t.Errorf("%s: Projection %s, want %s", what, p, proj)
	}
}

// stored is the stored log (ReadFrom). A session nothing was appended to
// is not materialised, and reads of it are NOT_FOUND: its log is empty.
func (a *pmAgent) stored() []string {
	a.t.Helper()
	if a.next == 0 {
		return nil
	}
	return pmStored(a.t, a.n, a.id)
}

func pmStored(t *testing.T, n *testNode, id string) []string {
	t.Helper()
	r, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadFrom(%q): %v", id, err)
	}
	return r.GetEvents()
}

func pmProjection(t *testing.T, n *testNode, id string) string {
	t.Helper()
	r, err := n.Client.PlanProjection(n.ctx(), &sessionpb.PlanProjectionRequest{SessionId: id})
	if err != nil {
		t.Fatalf("PlanProjection(%q): %v", id, err)
	}
	return fmt.Sprintf("{%v,%v}", r.GetActive(), r.GetPending())
}

// pmProjectionOf is the projection of a log prefix, served from a scratch
// session holding exactly those events (the API projects whole logs; a
// command's run and done are appended atomically).
func pmProjectionOf(t *testing.T, n *testNode, id string, events []string) string {
	t.Helper()
	a := pmSession(t, n, id)
	a.appendRaw(events...)
	return a.proj()
}

func pmGetString(r *sessionpb.PlanGetResponse) string {
	if r.Pending == nil {
		return fmt.Sprintf("{active:%v}", r.GetActive())
	}
	return fmt.Sprintf("{active:%v, pending:%v}", r.GetActive(), r.GetPending())
}

// ---------------------------------------------------------------------------
// Events: decoding, normalising, comparing
// ---------------------------------------------------------------------------

func pmDecode(t *testing.T, what, text string) any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		t.Fatalf("%s is not JSON: %v\n%s", what, err, text)
	}
	return v
}

func pmSeqTime(t *testing.T, ev string) (int64, int64) {
	t.Helper()
	var e struct{ Seq, Time int64 }
	if err := json.Unmarshal([]byte(ev), &e); err != nil {
		t.Fatalf("event is not JSON: %v\n%s", err, ev)
	}
	return e.Seq, e.Time
}

func pmType(t *testing.T, ev string) string {
	t.Helper()
	m, _ := pmDecode(t, "event", ev).(map[string]any)
	s, _ := m["type"].(string)
	return s
}

func pmTypes(t *testing.T, events []string) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, ev := range events {
		out[i] = pmType(t, ev)
	}
	return out
}

func pmCount(t *testing.T, events []string, typ string) int {
	t.Helper()
	n := 0
	for _, ty := range pmTypes(t, events) {
		if ty == typ {
			n++
		}
	}
	return n
}

// pmNormData is a data value with the ids the server mints (commandId, a
// plugin notice's message id) replaced by "<id>", re-encoded canonically.
func pmNormData(t *testing.T, data any) string {
	t.Helper()
	if m, ok := data.(map[string]any); ok {
		if _, has := m["commandId"]; has {
			m["commandId"] = "<id>"
		}
		if src, ok := m["source"].(map[string]any); ok && src["kind"] == "plugin" {
			if _, has := m["id"]; has {
				m["id"] = "<id>"
			}
		}
	}
	b, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// pmNorm is an event as the goldens compare it: "type data", ids normalised
// (seq and time are checked separately).
func pmNorm(t *testing.T, ev string) string {
	t.Helper()
	m, ok := pmDecode(t, "event", ev).(map[string]any)
	if !ok {
		t.Fatalf("event is not an object: %s", ev)
	}
	typ, _ := m["type"].(string)
	return typ + " " + pmNormData(t, m["data"])
}

// pmNormNotice is a notice (a user/message data object) as the data of the
// user/message event that logs it.
func pmNormNotice(t *testing.T, notice string) string {
	t.Helper()
	return "user/message " + pmNormData(t, pmDecode(t, "notice", notice))
}

// pmWantNorm compares events with spec lines (type and data, ids aside).
func pmWantNorm(t *testing.T, what string, got []string, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: got %d events, want %d\n got: %s\nwant: %s", what, len(got), len(want),
			strings.Join(got, "\n      "), strings.Join(want, "\n      "))
		return
	}
	for i := range got {
		if g, w := pmNorm(t, got[i]), pmNorm(t, want[i]); g != w {
			t.Errorf("%s: event %d:\n got %s\nwant %s", what, i, g, w)
		}
	}
}

// pmWantLog compares a whole stored log with the expected spec lines: seqs
// 0…n-1 in order, and type and data of each (ids aside).
func pmWantLog(t *testing.T, stored, want []string) {
	t.Helper()
	for i, ev := range stored {
		if seq, _ := pmSeqTime(t, ev); seq != int64(i) {
			t.Errorf("stored event %d has seq %d", i, seq)
		}
	}
	pmWantNorm(t, "stored log", stored, want...)
}

// pmCommandID checks that a command's appended events start with
// command/run and end with command/done of one server-minted id, and
// returns it.
func pmCommandID(t *testing.T, appended []string) string {
	t.Helper()
	ids := make([]string, 0, 2)
	for _, i := range []int{0, len(appended) - 1} {
		m, _ := pmDecode(t, "event", appended[i]).(map[string]any)
		d, _ := m["data"].(map[string]any)
		id, _ := d["commandId"].(string)
		ids = append(ids, id)
	}
	if ty := pmTypes(t, appended); ty[0] != "command/run" || ty[len(ty)-1] != "command/done" {
		t.Errorf("command appended %v, want command/run … command/done", ty)
	}
	if ids[0] != ids[1] || !pmCommandIDRe.MatchString(ids[0]) {
		t.Errorf("command ids %q / %q: want one id shaped cmd-<8 hex>-<n>", ids[0], ids[1])
	}
	return ids[0]
}

// pmCheckNoticeShape checks a notice is a user/message data object with a
// fresh UUID id and the plugin notice source.
func pmCheckNoticeShape(t *testing.T, notice string) {
	t.Helper()
	m, ok := pmDecode(t, "notice", notice).(map[string]any)
	if !ok {
		t.Fatalf("notice is not an object: %s", notice)
	}
	if id, _ := m["id"].(string); !pmUUIDRe.MatchString(id) {
		t.Errorf("notice id %q: want a random UUID", id)
	}
	text := pmNoticeText(t, notice)
	want := `{"id":"<id>","role":"user","content":[{"type":"text","text":` + strconv.Quote(text) +
		`}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":` + strconv.Quote(text) + `}}`
	if got := pmNormData(t, m); got != pmNormData(t, pmDecode(t, "want", want)) {
		t.Errorf("notice: got %s, want %s", got, want)
	}
}

func pmNoticeText(t *testing.T, notice string) string {
	t.Helper()
	var m struct {
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal([]byte(notice), &m); err != nil || len(m.Content) != 1 {
		t.Fatalf("bad notice %s (%v)", notice, err)
	}
	return m.Content[0].Text
}

// pmJSONEq compares JSON texts structurally.
func pmJSONEq(t *testing.T, what, got, want string) {
	t.Helper()
	if !reflect.DeepEqual(pmDecode(t, what, got), pmDecode(t, what+" (want)", want)) {
		t.Errorf("%s:\n got %s\nwant %s", what, got, want)
	}
}

// pmWantCommand checks a Command's result fields.
func pmWantCommand(t *testing.T, r *sessionpb.PlanCommandResponse, kind, text string, steerText *string, steerContent string) {
	t.Helper()
	if r.GetKind() != kind || r.GetText() != text {
		t.Errorf("Command: kind %q text %q, want %q %q", r.GetKind(), r.GetText(), kind, text)
	}
	switch {
	case steerText == nil && r.SteerText != nil:
		t.Errorf("Command: steer_text %q, want none", r.GetSteerText())
	case steerText != nil && (r.SteerText == nil || *r.SteerText != *steerText):
		t.Errorf("Command: steer_text %v, want %q", r.SteerText, *steerText)
	}
	if steerContent == "" {
		if r.GetSteerContent() != "" {
			t.Errorf("Command: steer_content %s, want none", r.GetSteerContent())
		}
	} else {
		pmJSONEq(t, "Command steer_content", r.GetSteerContent(), steerContent)
	}
}

func pmStr(s string) *string { return &s }

// pmAnswer builds a review answer with one item.
func pmAnswer(id string, selected []string, custom *string) *sessionpb.ReviewAnswer {
	return &sessionpb.ReviewAnswer{Answers: []*sessionpb.AnswerItem{{Id: id, Selected: selected, Custom: custom}}}
}

func pmApprove() *sessionpb.ReviewAnswer { return pmAnswer("plan-review", []string{"Approve"}, nil) }

// pmWantExit checks an ExitPlan result.
func pmWantExit(t *testing.T, what string, r *sessionpb.PlanExitResponse, approved, isError bool, text string) {
	t.Helper()
	if r.GetApproved() != approved || r.GetIsError() != isError || r.GetText() != text || r.GetNeedsReview() {
		t.Errorf("%s: approved=%v is_error=%v needs_review=%v text %q; want approved=%v is_error=%v needs_review=false text %q",
			what, r.GetApproved(), r.GetIsError(), r.GetNeedsReview(), r.GetText(), approved, isError, text)
	}
}

// pmReviewQuestion is the docs/planmode.md#review-question review request for plan.
func pmReviewQuestion(plan string) string {
	detail, _ := json.Marshal(plan)
	return `{"questions":[{"id":"plan-review","header":"Plan review","question":"Approve this plan and leave plan mode?","detail":` +
		string(detail) + `,"options":[{"label":"Approve","description":"Leave plan mode; the plan is carried out from the next step."},` +
		`{"label":"Keep planning","description":"Stay in plan mode; feedback goes back to the model."}],` +
		`"intent":{"kind":"plan-review","approve":"Approve"}}]}`
}

// pmWantErr checks a client error's reason and exact message.
func pmWantErr(t *testing.T, what string, err error, reason sessionstore.Reason, msg string) {
	t.Helper()
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		t.Errorf("%s: got %v, want a %s error", what, err, reason)
		return
	}
	if se.Reason != reason || se.Message != msg {
		t.Errorf("%s: got %s %q, want %s %q", what, se.Reason, se.Message, reason, msg)
	}
}

// pmWantStatus checks a raw gRPC error's code, reason and exact message.
func pmWantStatus(t *testing.T, what string, err error, code codes.Code, reason sessionstore.Reason, msg string) {
	t.Helper()
	if c := status.Code(err); c != code {
		t.Errorf("%s: gRPC code %v, want %v (%v)", what, c, code, err)
	}
	pmWantErr(t, what, client.FromStatus(err), reason, msg)
}

func pmFenced(id string, current, got uint64) string {
	return fmt.Sprintf("session %q is owned under lease epoch %d; a write with epoch %d is fenced", id, current, got)
}

func pmSeqMismatch(id string, next, got int64) string {
	return fmt.Sprintf("plan-mode call for %q expected next seq %d, but the log's next seq is %d", id, got, next)
}

// pmSpec is a plan-mode sequence (docs/contract.md#plan-mode-sequences): its
// lines by spec seq, in order.
type pmSpec struct {
	t     *testing.T
	bySeq map[int64]string
	order []int64
}

func pmParseSpec(t *testing.T, text string) *pmSpec {
	t.Helper()
	s := &pmSpec{t: t, bySeq: map[int64]string{}}
	for _, l := range strings.Split(text, "\n") {
		if l = strings.TrimSpace(l); l == "" {
			continue
		}
		m := pmEnvSeqRe.FindStringSubmatch(l)
		if m == nil {
			t.Fatalf("bad spec line %s", l)
		}
		q, _ := strconv.ParseInt(m[2], 10, 64)
		s.bySeq[q] = l
		s.order = append(s.order, q)
	}
	return s
}

func (s *pmSpec) at(seq int64) string {
	l, ok := s.bySeq[seq]
	if !ok {
		s.t.Fatalf("no spec line at seq %d", seq)
	}
	return l
}

// except is every line in order but those at the omitted seqs.
func (s *pmSpec) except(omit ...int64) []string {
	var out []string
	for _, q := range s.order {
		skip := false
		for _, o := range omit {
			skip = skip || q == o
		}
		if !skip {
			out = append(out, s.bySeq[q])
		}
	}
	return out
}

// ---------------------------------------------------------------------------
// Golden sequences (docs/contract.md#plan-mode-sequences)
// ---------------------------------------------------------------------------

// pmNoticeEvent logs a notice returned by PreStep as the user/message the
// agent appends (at the spec's time).
func (a *pmAgent) noticeEvent(notice string, tm int64) {
	a.t.Helper()
	a.appendRaw(pmSurf("user/message", a.next, tm, notice))
}

// pmWantNoStepEffect checks a PreStep that applies nothing.
func pmWantNoStepEffect(t *testing.T, what string, r *sessionpb.PlanPreStepResponse, active bool) {
	t.Helper()
	if len(r.GetAppendedEvents()) != 0 || len(r.GetNotices()) != 0 || r.GetActive() != active {
		t.Errorf("%s: PreStep active=%v appended %v notices %v; want active=%v, nothing appended, no notice",
			what, r.GetActive(), r.GetAppendedEvents(), r.GetNotices(), active)
	}
}

// Sequence 1 (docs/contract.md#pm-seq-idle-enter, testdata/planmode/seq1.jsonl)
// verbatim (seq 11, the agent/inbox/spliced injection of the notice, and seq
// 15, its claim, are the reference's inbox; the server returns the notice from
// the next PreStep instead, so neither is logged).
func TestPlanMode_Golden12_1(t *testing.T) {
	n := pmNode(t)
	s := pmParseSpec(t, refdata.PlanModeSequence(t, 1))

	t.Run("idle /plan with an earlier header", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-1")
		a.play(s, 0, 1, 2)
		pmWantNoStepEffect(t, "turn 1 step 1", a.preStep(), false)
		a.play(s, 3, 4, 5, 6, 7, 8)
		a.state("after seq 8", "{active:false}", "{false,false}")

		c := a.command("")
		pmWantCommand(t, c, "success", pmTextPlanOn, nil, "")
		pmWantNorm(t, "Command appended", c.GetAppendedEvents(), s.at(9), s.at(10), s.at(12))
		stored := a.stored()
		if p := pmProjectionOf(t, n, "golden-12-1-prefix-9", stored[:10]); p != "{false,true}" {
			t.Errorf("projection after seq 9 (command running): %s, want {false,true}", p)
		}
		if p := pmProjectionOf(t, n, "golden-12-1-prefix-10", stored[:11]); p != "{true,false}" {
			t.Errorf("projection after seq 10: %s, want {true,false}", p)
		}
		a.state("after the command (seq 12)", "{active:true}", "{true,false}")

		// Next prompt: turn 2; its first pre-step returns the notice the idle
		// commit owes (the reference's seq 11/15 inbox round trip).
		a.play(s, 13, 14, 16)
		ps := a.preStep()
		if len(ps.GetAppendedEvents()) != 0 || !ps.GetActive() || len(ps.GetNotices()) != 1 {
			t.Fatalf("turn 2 PreStep: active=%v appended %v notices %v; want active, nothing appended, one notice",
				ps.GetActive(), ps.GetAppendedEvents(), ps.GetNotices())
		}
		if g, w := pmNormNotice(t, ps.GetNotices()[0]), pmNorm(t, s.at(18)); g != w {
			t.Errorf("notice:\n got %s\nwant %s", g, w)
		}
		a.play(s, 17)
		a.noticeEvent(ps.GetNotices()[0], 3002)
		a.play(s, 19, 20)
		a.state("after seq 20", "{active:true}", "{true,false}")
		pmWantLog(t, a.stored(), s.except(11, 15))
	})

	t.Run("variant: no earlier header, no notice", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-1-no-header")
		a.play(s, 0, 1, 2, 3, 4, 6, 7, 8)
		c := a.command("")
		pmWantCommand(t, c, "success", pmTextPlanOn, nil, "")
		pmWantNorm(t, "Command appended", c.GetAppendedEvents(), s.at(9), s.at(10), s.at(12))
		a.play(s, 13, 14, 16)
		pmWantNoStepEffect(t, "turn 2 PreStep", a.preStep(), true)
		a.play(s, 17, 19)
		a.state("end", "{active:true}", "{true,false}")
		pmWantLog(t, a.stored(), s.except(5, 11, 15, 18, 20))
	})

	t.Run("variant: direct Set(true) logs plan/mode without the command pair", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-1-set")
		a.play(s, 0, 1, 2, 3, 4, 5, 6, 7, 8)
		r := a.wantSet(true, pmCommitted)
		pmWantNorm(t, "Set appended", r.GetAppendedEvents(), s.at(10))
		a.state("after Set", "{active:true}", "{true,false}")
		a.play(s, 13, 14, 16)
		ps := a.preStep()
		if len(ps.GetNotices()) != 1 || len(ps.GetAppendedEvents()) != 0 || !ps.GetActive() {
			t.Fatalf("PreStep after the idle Set: %v", ps)
		}
		if g, w := pmNormNotice(t, ps.GetNotices()[0]), pmNorm(t, s.at(18)); g != w {
			t.Errorf("notice:\n got %s\nwant %s", g, w)
		}
		a.play(s, 17)
		a.noticeEvent(ps.GetNotices()[0], 3002)
		a.play(s, 19, 20)
		pmWantLog(t, a.stored(), s.except(9, 11, 12, 15))
	})
}

// Sequence 2 (docs/contract.md#pm-seq-queued-enter, testdata/planmode/seq2.jsonl)
// verbatim from seq 40, after a prefix: an earlier turn whose header told the
// model "default", and turn 3's prompt insertion.
func TestPlanMode_Golden12_2(t *testing.T) {
	n := pmNode(t)
	s := pmParseSpec(t, refdata.PlanModeSequence(t, 2))

	t.Run("mid-turn /plan applied at the next pre-step", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-2")
		a.play(s, 30, 31, 32)
		pmWantNoStepEffect(t, "turn 2 step 1", a.preStep(), false)
		a.play(s, 33, 34, 35, 36, 37, 38, 39, 40, 41)
		pmWantNoStepEffect(t, "turn 3 step 1", a.preStep(), false)
		a.play(s, 42, 43, 44, 45)
		a.state("after seq 45", "{active:false}", "{false,false}")

		c := a.command("")
		pmWantCommand(t, c, "success", pmTextEntering, nil, "")
		pmWantNorm(t, "Command appended", c.GetAppendedEvents(), s.at(46), s.at(47))
		if p := pmProjectionOf(t, n, "golden-12-2-prefix-46", a.stored()[:a.seqs[45]+2]); p != "{false,true}" {
			t.Errorf("projection after seq 46: %s, want {false,true}", p)
		}
		a.state("after seq 47", "{active:false, pending:true}", "{false,true}")

		a.play(s, 48, 49)
		ps := a.preStep()
		if !ps.GetActive() || len(ps.GetNotices()) != 1 {
			t.Fatalf("turn 3 step 2 PreStep: %v", ps)
		}
		pmWantNorm(t, "PreStep appended", ps.GetAppendedEvents(), s.at(50))
		if g, w := pmNormNotice(t, ps.GetNotices()[0]), pmNorm(t, s.at(52)); g != w {
			t.Errorf("notice:\n got %s\nwant %s", g, w)
		}
		a.state("after seq 50", "{active:true}", "{true,false}")
		a.play(s, 51)
		a.noticeEvent(ps.GetNotices()[0], 5302)
		a.play(s, 53)
		pmWantLog(t, a.stored(), s.except())
	})

	// With "/plan draft the migration": the agent logs the steered message's
	// next-step insertion (after the command pair, which the server appends
	// atomically), claims it at the boundary, and logs it under plan
	// guidance before the notice.
	t.Run("variant: /plan with a message steers it", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-2-steer")
		a.play(s, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41)
		a.preStep()
		a.play(s, 42, 43, 44, 45)
		c := a.command(" draft the migration")
		pmWantCommand(t, c, "success", pmTextEntering, pmStr("draft the migration"), `[{"type":"text","text":"draft the migration"}]`)
		runWant := strings.Replace(s.at(46), `"args":""`, `"args":" draft the migration"`, 1)
		pmWantNorm(t, "Command appended", c.GetAppendedEvents(), runWant, s.at(47))
		steered := `{"id":"m6","role":"user","content":` + c.GetSteerContent() + `,"source":{"kind":"user"}}`
		a.add("agent/inbox/spliced", `{"target":"next-step","start":0,"inserted":[`+steered+`]}`)
		a.play(s, 48, 49)
		a.add("agent/inbox/spliced", `{"target":"next-step","start":0,"removedCount":1,"inserted":[]}`)
		ps := a.preStep()
		pmWantNorm(t, "PreStep appended", ps.GetAppendedEvents(), s.at(50))
		if len(ps.GetNotices()) != 1 || pmNoticeText(t, ps.GetNotices()[0]) != pmNoticeEnter {
			t.Fatalf("PreStep notices %v, want the entry notice", ps.GetNotices())
		}
		a.play(s, 51)
		a.userMessage(steered)
		a.noticeEvent(ps.GetNotices()[0], 5302)
		a.play(s, 53)
		got := pmTypes(t, a.stored()[a.seqs[45]+1:])
		want := []string{"command/run", "command/done", "agent/inbox/spliced", "tool/result", "step/end",
			"agent/inbox/spliced", "plan/mode", "step/start", "user/message", "user/message", "request/header"}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("types after the tool call:\n got %v\nwant %v", got, want)
		}
		a.state("end", "{active:true}", "{true,false}")
	})
}

// Sequence 3 (docs/contract.md#pm-seq-approved-exit, testdata/planmode/seq3.jsonl)
// verbatim from seq 70, after a prefix: plan mode entered by an idle Set (seq
// 60, appended by the server) and step 1 of turn 4.
func TestPlanMode_Golden12_3(t *testing.T) {
	n := pmNode(t)
	s := pmParseSpec(t, refdata.PlanModeSequence(t, 3))
	a := pmSession(t, n, "golden-12-3")
	r := a.wantSet(true, pmCommitted)
	pmWantNorm(t, "Set appended", r.GetAppendedEvents(), s.at(60))
	a.play(s, 61)
	pmWantNoStepEffect(t, "turn 4 step 1", a.preStep(), true)
	a.play(s, 62, 63, 64, 65, 66)
	pmWantNoStepEffect(t, "turn 4 step 2", a.preStep(), true)
	a.play(s, 70, 71, 72)

	plan := "# Cache design\n\n1. Add an LRU."
	v := a.exit(plan, nil)
	if !v.GetNeedsReview() || v.GetIsError() || v.GetApproved() {
		t.Fatalf("ExitPlan without an answer: %v; want needs_review", v)
	}
	pmJSONEq(t, "review_question", v.GetReviewQuestion(), pmReviewQuestion(plan))
	a.state("while the review is outstanding", "{active:true}", "{true,false}")

	pmWantExit(t, "ExitPlan(Approve)", a.exit(plan, pmApprove()), true, false, pmTextApproved)
	a.play(s, 73)
	a.state("after seq 73", "{active:true, pending:false}", "{true,false}")
	a.play(s, 74)
	ps := a.preStep()
	if ps.GetActive() || len(ps.GetNotices()) != 0 {
		t.Errorf("boundary after the approval: active=%v notices %v; want inactive, no notice", ps.GetActive(), ps.GetNotices())
	}
	pmWantNorm(t, "PreStep appended", ps.GetAppendedEvents(), s.at(75))
	a.state("after seq 75", "{active:false}", "{false,false}")
	a.play(s, 76, 77)
	pmWantLog(t, a.stored(), s.except())
}

// Sequence 4 (docs/contract.md#pm-seq-off-cancels, testdata/planmode/seq4.jsonl)
// verbatim from seq 90, after the start of turn 5.
func TestPlanMode_Golden12_4(t *testing.T) {
	n := pmNode(t)
	s := pmParseSpec(t, refdata.PlanModeSequence(t, 4))

	t.Run("mid-turn /plan off cancels the pending entry", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-4")
		a.play(s, 88)
		pmWantNoStepEffect(t, "turn 5 step 1", a.preStep(), false)
		a.play(s, 89, 90)

		c1 := a.command("")
		pmWantCommand(t, c1, "success", pmTextEntering, nil, "")
		pmWantNorm(t, "first Command appended", c1.GetAppendedEvents(), s.at(91), s.at(92))
		a.state("after seq 92", "{active:false, pending:true}", "{false,true}")

		c2 := a.command(" off")
		pmWantCommand(t, c2, "success", pmTextCancelled, nil, "")
		pmWantNorm(t, "second Command appended", c2.GetAppendedEvents(), s.at(93), s.at(94))
		if pmCommandID(t, c1.GetAppendedEvents()) == pmCommandID(t, c2.GetAppendedEvents()) {
			t.Errorf("two commands share the id %s", pmCommandID(t, c1.GetAppendedEvents()))
		}
		if p := pmProjectionOf(t, n, "golden-12-4-prefix-93", a.stored()[:a.seqs[90]+4]); p != "{false,false}" {
			t.Errorf("projection after seq 93: %s, want {false,false}", p)
		}
		a.state("after seq 94", "{active:false, pending:false}", "{false,false}")

		a.play(s, 95, 96)
		pmWantNoStepEffect(t, "turn 5 step 2 (net-zero marker dropped)", a.preStep(), false)
		a.play(s, 97)
		a.state("after seq 97", "{active:false}", "{false,false}")
		pmWantLog(t, a.stored(), s.except())
	})

	t.Run("idle variant: /plan off withdraws an entry left pending by an ended turn", func(t *testing.T) {
		a := pmSession(t, n, "golden-12-4-idle")
		a.turnStart(5)
		pmWantCommand(t, a.command(""), "success", pmTextEntering, nil, "")
		a.turnEnd(5)
		a.state("idle with a pending entry", "{active:false, pending:true}", "{false,true}")
		c := a.command(" off")
		pmWantCommand(t, c, "success", pmTextCancelled, nil, "")
		if got := pmTypes(t, c.GetAppendedEvents()); !reflect.DeepEqual(got, []string{"command/run", "command/done"}) {
			t.Errorf("appended %v, want command/run, command/done", got)
		}
		a.state("after /plan off", "{active:false}", "{false,false}")
	})
}

// ---------------------------------------------------------------------------
// plan-mode.spec.ts: get / set
// ---------------------------------------------------------------------------

func TestPlanMode_GetReadsFold(t *testing.T) {
	n := pmNode(t)
	a := pmSession(t, n, "get-fold")
	// A created, still empty session.
	if g := a.getResp(); g.GetActive() || g.Pending != nil || g.GetNextSeq() != 0 {
		t.Errorf("Get on an empty session: %v, want {active:false} next_seq 0", g)
	}
	a.state("empty log", "{active:false}", "{false,false}")
	a.planMode(true)
	a.state("after plan/mode true", "{active:true}", "{true,false}")
	a.planMode(false)
	a.state("after plan/mode false", "{active:false}", "{false,false}")
	a.planMode(true)
	a.state("after true, false, true", "{active:true}", "{true,false}")
	if g := a.getResp(); g.GetNextSeq() != 3 {
		t.Errorf("Get next_seq %d, want 3", g.GetNextSeq())
	}
}

// TestPlanMode_SetDecisionTable: the rows of docs/planmode.md#set's notes for
// the approved exit, through the API. The table itself is planmode's
// TestSetDecisionTable (the rules) and fsm's TestPlanSetDecisionTable (stored
// state and events).
func TestPlanMode_SetDecisionTable(t *testing.T) {
	n := pmNode(t)
	// docs/planmode.md#set notes: selecting while the approved exit {false, narrate:false} is
	// pending.
	for _, open := range []bool{true, false} {
		t.Run(fmt.Sprintf("approved exit pending/open=%v", open), func(t *testing.T) {
			a := pmSession(t, n, fmt.Sprintf("table-approved-%v", open))
			a.planMode(true)
			a.header()
			a.turnStart(1)
			pmWantExit(t, "approve", a.exit(pmPlan, pmApprove()), true, false, pmTextApproved)
			if !open {
				a.turnEnd(1)
			}
			a.wantSet(false, pmNoop)
			a.wantGet("after Set(false)", "{active:true, pending:false}")
			a.wantSet(true, pmCancelled)
			want := "{active:true}"
			if open {
				want = "{active:true, pending:true}"
			}
			a.wantGet("after Set(true)", want)
			// Either way nothing changes at the next boundary, and the
			// header already told "plan mode": no notice.
			if !open {
				a.turnStart(2)
			}
			pmWantNoStepEffect(t, "next pre-step", a.preStep(), true)
			a.state("after the boundary", "{active:true}", "{true,false}")
		})
	}
}

// plan-mode.spec.ts 9 and 15: a between-turns selection commits immediately; a later
// step keeps it and appends nothing more.
func TestPlanMode_SetIdleCommit(t *testing.T) {
	n := pmNode(t)
	a := pmSession(t, n, "set-idle-commit")
	r := a.wantSet(true, pmCommitted)
	pmWantNorm(t, "Set(true) appended", r.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":true}`))
	if r.GetRevision() == "" {
		t.Errorf("Set: empty revision")
	}
	a.wantGet("after Set(true)", "{active:true}")
	r = a.wantSet(false, pmCommitted)
	pmWantNorm(t, "Set(false) appended", r.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":false}`))
	a.wantGet("after Set(false)", "{active:false}")
	a.turnStart(1)
	a.wantStep(1, 1, false, 0) // after two idle commits
	a.wantCount("plan/mode", 2)
	a.wantCount("agent/inbox/spliced", 0) // the server writes none

	// 15: the seam, with no turn at all.
	b := pmSession(t, n, "set-idle-seam")
	b.wantSet(true, pmCommitted)
	b.wantStep(1, 1, true, 0)
	b.state("after the seam", "{active:true}", "{true,false}")
}

// Load's crash repair closes an open turn through the replicated log; the
// plan state must follow it (the session is idle afterwards).
func TestPlanMode_SetAfterRepairIsIdle(t *testing.T) {
	n := pmNode(t)
	a := pmSession(t, n, "set-after-repair")
	a.turnStart(1)
	a.stepStart(1, 1)
	v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: a.id})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if !v.GetRepaired() || v.GetNextSeq() != 4 {
		t.Fatalf("Load: repaired=%v next_seq %d; want the two closers committed", v.GetRepaired(), v.GetNextSeq())
	}
	a.next = v.GetNextSeq()
	a.wantSet(true, pmCommitted)
	a.state("after the idle commit", "{active:true}", "{true,false}")
}

// ---------------------------------------------------------------------------
// plan-mode.spec.ts: narration and the boundary
// ---------------------------------------------------------------------------

func TestPlanMode_Narration(t *testing.T) {
	n := pmNode(t)

	t.Run("11 idle commit narrates once", func(t *testing.T) {
		a := pmSession(t, n, "narrate-idle")
		a.header()
		r := a.wantSet(true, pmCommitted)
		if got := pmTypes(t, r.GetAppendedEvents()); !reflect.DeepEqual(got, []string{"plan/mode"}) {
			t.Errorf("idle commit appended %v, want only plan/mode", got)
		}
		a.turnStart(1)
		a.wantStep(1, 1, true, 0, pmNoticeEnter)
		a.wantStep(1, 2, true, 0) // owed once
	})

	t.Run("17 no notice before any header", func(t *testing.T) {
		a := pmSession(t, n, "narrate-no-header")
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		a.wantStep(1, 1, true, 1) // the flush, no notice
		// Nor after an idle commit before any header.
		b := pmSession(t, n, "narrate-no-header-idle")
		b.wantSet(true, pmCommitted)
		b.turnStart(1)
		b.wantStep(1, 1, true, 0)
	})

	t.Run("owed idle notice and a net-zero marker give one notice", func(t *testing.T) {
		a := pmSession(t, n, "narrate-owed-marker")
		a.header()
		a.wantSet(true, pmCommitted)
		a.turnStart(1)
		a.wantSet(false, pmQueued)
		a.wantSet(true, pmCancelled)
		a.wantStep(1, 1, true, 0, pmNoticeEnter)
	})

	t.Run("an idle commit back to the told state owes nothing", func(t *testing.T) {
		a := pmSession(t, n, "narrate-idle-roundtrip")
		a.header()
		a.wantSet(true, pmCommitted)
		a.wantSet(false, pmCommitted)
		a.turnStart(1)
		a.wantStep(1, 1, false, 0)
	})
}

func TestPlanMode_PreStep(t *testing.T) {
	n := pmNode(t)

	t.Run("12 inert without pending", func(t *testing.T) {
		a := pmSession(t, n, "prestep-inert")
		pmWantNoStepEffect(t, "empty session", a.preStep(), false)
		a.planMode(true)
		a.turnStart(1)
		pmWantNoStepEffect(t, "active session", a.preStep(), true)
		if got := len(a.stored()); got != 2 {
			t.Errorf("%d stored events, want 2", got)
		}
	})

	t.Run("13 flushes a queued selection", func(t *testing.T) {
		a := pmSession(t, n, "prestep-flush")
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		ps := a.preStep()
		if !ps.GetActive() {
			t.Errorf("PreStep active=false, want the applied selection")
		}
		pmWantNorm(t, "PreStep appended", ps.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":true}`))
		a.state("after the flush", "{active:true}", "{true,false}")
	})

	t.Run("16 net zero", func(t *testing.T) {
		a := pmSession(t, n, "prestep-net-zero")
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		a.wantSet(false, pmCancelled)
		a.wantGet("marker", "{active:false, pending:false}")
		pmWantNoStepEffect(t, "net-zero boundary", a.preStep(), false)
		a.wantGet("after the boundary", "{active:false}")
		a.wantCount("plan/mode", 0)
	})

	t.Run("21-22 refused pre-step keeps the selection", func(t *testing.T) {
		a := pmSession(t, n, "prestep-refused")
		a.header()
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		_, err := n.Client.PlanPreStep(n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: a.id, ExpectedNextSeq: a.next + 1})
		pmWantErr(t, "PreStep with a stale expected_next_seq", err, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, a.next, a.next+1))
		a.wantGet("after the refused pre-step", "{active:false, pending:true}")
		a.wantCount("plan/mode", 0)
		a.wantStep(1, 1, true, 1, pmNoticeEnter) // the next accepted pre-step
		a.wantGet("after the accepted pre-step", "{active:true}")
	})
}

// ---------------------------------------------------------------------------
// plan-mode.spec.ts: /plan
// ---------------------------------------------------------------------------

func TestPlanMode_Command(t *testing.T) {
	n := pmNode(t)
	ids := map[string]bool{}
	track := func(t *testing.T, r *sessionpb.PlanCommandResponse) {
		t.Helper()
		id := pmCommandID(t, r.GetAppendedEvents())
		if ids[id] {
			t.Errorf("command id %s minted twice", id)
		}
		ids[id] = true
	}

	// The command-line rule (after "/plan" comes the end or a space, tab, CR
	// or LF) holds for raw_input: "off" is the line "/planoff", another command.
	t.Run("raw_input that is not a /plan line", func(t *testing.T) {
		a := pmSession(t, n, "cmd-not-a-line")
		a.turnStart(1)
		stored := len(a.stored())
		stub := sessionpb.NewPlanModeClient(n.Client.Conn())
		for _, raw := range []string{"off", "\u00a0off", "\foff", "x"} {
			_, err := stub.Command(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: raw})
			pmWantStatus(t, fmt.Sprintf("Command(%q)", raw), err, codes.InvalidArgument, sessionstore.ReasonInvalidArgument,
				fmt.Sprintf("raw_input %s is not what follows /plan on a command line: it must be empty or start with a space, tab, CR or LF (e.g. \" off\")", strconv.Quote(raw)))
		}
		if got := len(a.stored()); got != stored {
			t.Errorf("%d stored events, want %d (nothing appended)", got, stored)
		}
	})

	t.Run("33 plan off", func(t *testing.T) {
		a := pmSession(t, n, "cmd-off-inactive")
		r := a.command(" off")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextInactive, nil, "")
		a.state("idle inactive /plan off", "{active:false}", "{false,false}")

		b := pmSession(t, n, "cmd-off-cancel")
		b.turnStart(1)
		track(t, b.command(""))
		r = b.command(" off")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextCancelled, nil, "")
		b.state("after /plan, /plan off", "{active:false, pending:false}", "{false,false}")
		b.step(1, 1)
		b.state("after the boundary", "{active:false}", "{false,false}")
		b.wantCount("plan/mode", 0)

		c := pmSession(t, n, "cmd-off-leave")
		c.planMode(true)
		c.turnStart(1)
		for i := 0; i < 2; i++ {
			r = c.command(" off ")
			track(t, r)
			pmWantCommand(t, r, "success", pmTextLeaving, nil, "")
			c.state(fmt.Sprintf("after /plan off #%d", i+1), "{active:true, pending:false}", "{true,true}")
		}
		ps, _ := c.step(1, 1)
		pmWantNorm(t, "boundary appended", ps.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":false}`))
		c.state("after the boundary", "{active:false}", "{false,false}")
	})

	t.Run("34 idle copies", func(t *testing.T) {
		a := pmSession(t, n, "cmd-idle")
		r := a.command("")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextPlanOn, nil, "")
		pmWantNorm(t, "/plan appended", r.GetAppendedEvents(),
			pmEv("command/run", 0, 0, `{"commandId":"x","name":"plan","args":"","source":{"kind":"user"}}`),
			pmEv("plan/mode", 0, 0, `{"active":true}`),
			pmEv("command/done", 0, 0, `{"commandId":"x","kind":"success","text":"`+pmTextPlanOn+`"}`))
		a.state("after /plan", "{active:true}", "{true,false}")
		r = a.command(" off")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextPlanOff, nil, "")
		pmWantNorm(t, "/plan off appended", r.GetAppendedEvents(),
			pmEv("command/run", 0, 0, `{"commandId":"x","name":"plan","args":" off","source":{"kind":"user"}}`),
			pmEv("plan/mode", 0, 0, `{"active":false}`),
			pmEv("command/done", 0, 0, `{"commandId":"x","kind":"success","text":"`+pmTextPlanOff+`"}`))
		a.state("after /plan off", "{active:false}", "{false,false}")

		// Observed quirk (docs/planmode.md#plan-handler): bare /plan while already active and idle
		// answers with the "entering" text although nothing changes.
		b := pmSession(t, n, "cmd-idle-active")
		b.planMode(true)
		r = b.command("")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextEntering, nil, "")
		if got := pmTypes(t, r.GetAppendedEvents()); !reflect.DeepEqual(got, []string{"command/run", "command/done"}) {
			t.Errorf("appended %v, want command/run, command/done", got)
		}
		b.state("after /plan while active", "{active:true}", "{true,false}")
	})

	t.Run("35 images", func(t *testing.T) {
		a := pmSession(t, n, "cmd-images-text")
		a.turnStart(1)
		r := a.command(" sketch the layout", pmImg1)
		track(t, r)
		pmWantCommand(t, r, "success", pmTextEntering, pmStr("sketch the layout"), `[`+pmImg1+`,{"type":"text","text":"sketch the layout"}]`)

		b := pmSession(t, n, "cmd-images-only")
		b.turnStart(1)
		r = b.command("", pmImg2)
		track(t, r)
		pmWantCommand(t, r, "success", pmTextEntering, nil, `[`+pmImg2+`]`)
		b.state("after /plan + image", "{active:false, pending:true}", "{false,true}")

		c := pmSession(t, n, "cmd-images-off")
		c.planMode(true)
		r = c.command(" off", pmImg1)
		track(t, r)
		pmWantCommand(t, r, "error", pmTextOffImages, nil, "")
		pmWantNorm(t, "appended", r.GetAppendedEvents(),
			pmEv("command/run", 0, 0, `{"commandId":"x","name":"plan","args":" off","source":{"kind":"user"}}`),
			pmEv("command/done", 0, 0, `{"commandId":"x","kind":"error","text":"`+pmTextOffImages+`"}`))
		c.state("after /plan off + image", "{active:true}", "{true,false}")
	})

	t.Run("OFF is an entry with a message", func(t *testing.T) {
		a := pmSession(t, n, "cmd-OFF")
		a.turnStart(1)
		r := a.command(" OFF")
		track(t, r)
		pmWantCommand(t, r, "success", pmTextEntering, pmStr("OFF"), `[{"type":"text","text":"OFF"}]`)
		a.state("after /plan OFF", "{active:false, pending:true}", "{false,true}")
	})
}

// ---------------------------------------------------------------------------
// plan-mode.spec.ts: exit_plan_mode
// ---------------------------------------------------------------------------

func TestPlanMode_ExitPlan(t *testing.T) {
	n := pmNode(t)

	// active is a session in plan mode with a header and an open turn.
	active := func(t *testing.T, id string) *pmAgent {
		a := pmSession(t, n, id)
		a.planMode(true)
		a.header()
		a.turnStart(1)
		return a
	}

	t.Run("38 no calling agent", func(t *testing.T) {
		for _, ans := range []*sessionpb.ReviewAnswer{nil, pmApprove()} {
			r, err := n.Client.ExitPlan(n.ctx(), &sessionpb.PlanExitRequest{Plan: pmPlan, Answer: ans})
			if err != nil {
				t.Fatalf("ExitPlan without a session (answer %v): %v", ans != nil, err)
			}
			pmWantExit(t, "ExitPlan without a session", r, false, true, pmErrNoAgent)
		}
	})

	t.Run("39 outside plan mode", func(t *testing.T) {
		a := pmSession(t, n, "exit-inactive")
		pmWantExit(t, "validate", a.exit(pmPlan, nil), false, true, pmErrNotInPlan)
		// A queued, uncommitted entry does not count; an answer changes nothing.
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		pmWantExit(t, "validate with a queued entry", a.exit(pmPlan, nil), false, true, pmErrNotInPlan)
		pmWantExit(t, "approve with a queued entry", a.exit(pmPlan, pmApprove()), false, true, pmErrNotInPlan)
		a.wantGet("with the queued entry untouched", "{active:false, pending:true}")
		// A queued exit does not block the tool.
		b := active(t, "exit-queued-exit")
		b.wantSet(false, pmQueued)
		if r := b.exit(pmPlan, nil); !r.GetNeedsReview() || r.GetIsError() {
			t.Errorf("validate with a queued exit: %v, want needs_review", r)
		}
	})

	t.Run("40 bad plan", func(t *testing.T) {
		a := active(t, "exit-bad-plan")
		for _, plan := range []string{"", "   ", "do things", "## Title", "#Title", "#"} {
			pmWantExit(t, fmt.Sprintf("validate %q", plan), a.exit(plan, nil), false, true, pmErrBadPlan)
			pmWantExit(t, fmt.Sprintf("approve %q", plan), a.exit(plan, pmApprove()), false, true, pmErrBadPlan)
		}
		a.state("after bad plans", "{active:true}", "{true,false}")
		for _, plan := range []string{"# Title", "  # T  ", "#\tT", pmPlan} {
			r := a.exit(plan, nil)
			if !r.GetNeedsReview() || r.GetIsError() || r.GetApproved() {
				t.Errorf("validate %q: %v, want needs_review", plan, r)
			}
			pmJSONEq(t, fmt.Sprintf("review_question of %q", plan), r.GetReviewQuestion(), pmReviewQuestion(plan))
		}
	})

	t.Run("44 47 approve", func(t *testing.T) {
		a := active(t, "exit-approve")
		plan := "  # P\n\n1. step  "
		v := a.exit(plan, nil)
		if !v.GetNeedsReview() || v.GetIsError() || v.GetApproved() {
			t.Fatalf("validate: %v", v)
		}
		// docs/planmode.md#review-question: detail is the plan exactly as received (untrimmed); 55: the
		// intent names its approve option, which is among the labels.
		pmJSONEq(t, "review_question", v.GetReviewQuestion(), pmReviewQuestion(plan))
		a.state("after validation", "{active:true}", "{true,false}")
		pmWantExit(t, "approve", a.exit(plan, pmApprove()), true, false, pmTextApproved)
		a.state("after approval", "{active:true, pending:false}", "{true,false}")
		ps := a.wantStep(1, 2, false, 1)
		pmWantNorm(t, "boundary appended", ps.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":false}`))
		a.state("after the boundary", "{active:false}", "{false,false}")
		a.wantStep(1, 3, false, 0)
	})

	t.Run("48-54 keep planning", func(t *testing.T) {
		cases := []struct {
			name   string
			answer *sessionpb.ReviewAnswer
			text   string
		}{
			{"48 keep planning with feedback", pmAnswer("plan-review", []string{"Keep planning"}, pmStr("consider the resume path")),
				pmErrFeedback + "consider the resume path"},
			{"49 keep planning", pmAnswer("plan-review", []string{"Keep planning"}, nil), pmErrKeepPlanning},
			{"50 custom text only", pmAnswer("plan-review", []string{}, pmStr("add tests first")), pmErrFeedback + "add tests first"},
			{"51 Approve and Keep planning", pmAnswer("plan-review", []string{"Approve", "Keep planning"}, nil), pmErrKeepPlanning},
			{"52 Approve with custom text", pmAnswer("plan-review", []string{"Approve"}, pmStr("change the tests")), pmErrFeedback + "change the tests"},
			{"Approve with empty custom text", pmAnswer("plan-review", []string{"Approve"}, pmStr("")), pmErrKeepPlanning},
			{"53 two plan-review items", &sessionpb.ReviewAnswer{Answers: []*sessionpb.AnswerItem{
				{Id: "plan-review", Selected: []string{"Approve"}}, {Id: "plan-review", Selected: []string{"Keep planning"}}}}, pmErrKeepPlanning},
			{"54 no answer items", &sessionpb.ReviewAnswer{}, pmErrKeepPlanning},
			{"another question's item", pmAnswer("other", []string{"Approve"}, nil), pmErrKeepPlanning},
			{"skipped", pmAnswer("plan-review", nil, nil), pmErrKeepPlanning},
			{"lower-case approve", pmAnswer("plan-review", []string{"approve"}, nil), pmErrKeepPlanning},
			{"feedback verbatim", pmAnswer("plan-review", nil, pmStr("  keep \"quotes\"\nand lines  ")), pmErrFeedback + "  keep \"quotes\"\nand lines  "},
		}
		for i, c := range cases {
			t.Run(c.name, func(t *testing.T) {
				a := active(t, fmt.Sprintf("exit-keep-%d", i))
				pmWantExit(t, "ExitPlan", a.exit(pmPlan, c.answer), false, true, c.text)
				a.state("after the answer", "{active:true}", "{true,false}")
				pmWantNoStepEffect(t, "next pre-step", a.preStep(), true)
			})
		}
	})

	t.Run("56 dismissed", func(t *testing.T) {
		for i, ans := range []*sessionpb.ReviewAnswer{{Dismissed: true}, {Dismissed: true, Answers: pmApprove().Answers}} {
			a := active(t, fmt.Sprintf("exit-dismissed-%d", i))
			pmWantExit(t, "dismissed", a.exit(pmPlan, ans), false, true, pmErrDismissed)
			a.state("after the dismissal", "{active:true}", "{true,false}")
		}
	})
}

// ---------------------------------------------------------------------------
// integration.spec.ts
// ---------------------------------------------------------------------------

func TestPlanMode_Integration(t *testing.T) {
	n := pmNode(t)

	t.Run("1 pre-turn set", func(t *testing.T) {
		a := pmSession(t, n, "int-pre-turn")
		a.wantSet(true, pmCommitted)
		a.add("agent/inbox/spliced", `{"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user","content":[{"type":"text","text":"write it"}],"source":{"kind":"user"}}]}`)
		a.turnStart(1)
		a.add("agent/inbox/spliced", `{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}`)
		a.wantStep(1, 1, true, 0)
		a.addSurf("user/message", `{"id":"m1","role":"user","content":[{"type":"text","text":"write it"}],"source":{"kind":"user"}}`)
		a.header()
		stored := a.stored()
		types := pmTypes(t, stored)
		mode, header := -1, -1
		for i, ty := range types {
			if ty == "plan/mode" && mode < 0 {
				mode = i
			}
			if ty == "request/header" && header < 0 {
				header = i
			}
		}
		if mode < 0 || header < 0 || mode > header {
			t.Errorf("plan/mode at %d, first request/header at %d: want plan/mode first\n%v", mode, header, types)
		}
		if got := pmCount(t, stored, "plan/mode"); got != 1 {
			t.Errorf("%d plan/mode events, want 1", got)
		}
		a.state("end", "{active:true}", "{true,false}")
	})

	t.Run("2 flip between turns", func(t *testing.T) {
		a := pmSession(t, n, "int-flip-between")
		a.turnStart(1)
		a.step(1, 1)
		a.header()
		a.stepEnd(1, 1)
		a.turnEnd(1)
		a.wantSet(true, pmCommitted)
		a.turnStart(2)
		a.wantStep(2, 1, true, 0, pmNoticeEnter)
		a.add("request/header", `{"header":{"config":{"provider":"test","model":"test-model"}},"reason":"change"}`)
		plugin := 0
		for _, ev := range a.stored() {
			if strings.Contains(ev, `"source":{"kind":"plugin"`) {
				plugin++
				m, _ := pmDecode(t, "event", ev).(map[string]any)
				content, _ := json.Marshal(m["data"].(map[string]any)["content"])
				pmJSONEq(t, "notice content", string(content), `[{"type":"text","text":"`+pmNoticeEnter+`"}]`)
			}
		}
		if plugin != 1 {
			t.Errorf("%d plugin notices in the log, want 1", plugin)
		}
	})

	t.Run("3 flip during a retried request", func(t *testing.T) {
		a := pmSession(t, n, "int-retry")
		a.turnStart(1)
		a.step(1, 1)
		a.header()
		// The request fails; the request-error handler selects plan mode
		// and answers retry; the retry runs no pre-step.
		a.wantSet(true, pmQueued)
		a.addSurf("assistant/message", `{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"done"}],"source":{"kind":"model","provider":"test","model":"test-model"}}}`)
		a.stepEnd(1, 1)
		a.turnEnd(1)
		a.state("after turn 1", "{active:false, pending:true}", "{false,false}")
		a.wantCount("plan/mode", 0)
		a.turnStart(2)
		a.wantStep(2, 1, true, 1, pmNoticeEnter)
		types := pmTypes(t, a.stored())
		want := []string{"turn/start", "step/start", "request/header", "assistant/message", "step/end", "turn/end",
			"turn/start", "plan/mode", "step/start", "user/message"}
		if !reflect.DeepEqual(types, want) {
			t.Errorf("log types:\n got %v\nwant %v", types, want)
		}
	})
}

// ---------------------------------------------------------------------------
// invariant.spec.ts, projection.spec.ts
// ---------------------------------------------------------------------------

func TestPlanMode_Invariant(t *testing.T) {
	n := pmNode(t)
	// 1 and 6: both booleans inside a turn, among unrelated events.
	a := pmSession(t, n, "invariant-in-turn")
	a.turnStart(1)
	a.planMode(true)
	a.state("after plan/mode true in a turn", "{active:true}", "{true,false}")
	a.planMode(false)
	a.stepStart(1, 1)
	a.turnEnd(1)
	a.state("after plan/mode false in a turn", "{active:false}", "{false,false}")
	// 5: standalone between turns, on a fresh session.
	b := pmSession(t, n, "invariant-standalone")
	b.planMode(true)
	b.state("after a standalone plan/mode", "{active:true}", "{true,false}")
	// 2–4 (non-boolean active refused with the reference text) are
	// TestOwBadInput's plan/mode cases in ownership_test.go.
}

func TestPlanMode_Projection(t *testing.T) {
	n := pmNode(t)
	// Rows 1 and 3–5 of projection.spec.ts are the rules alone (planmode's
	// TestProjectionSpec; the empty log is also TestPlanMode_GetReadsFold's
	// first state). Row 2 shows the service projecting a hand-written command
	// pair, which leaves the service's own selection (Get) untouched.
	t.Run("2 selection pending until plan/mode", func(t *testing.T) {
		a := pmSession(t, n, "proj-pending")
		a.add("command/run", `{"commandId":"c1","name":"plan","args":"","source":{"kind":"user"}}`)
		a.state("run", "{active:false}", "{false,true}")
		a.add("command/done", `{"commandId":"c1","kind":"success","text":"t"}`)
		a.state("settle", "{active:false}", "{false,true}")
		a.turnStart(1)
		a.planMode(true)
		a.turnEnd(1)
		a.state("commit", "{active:true}", "{true,false}")
	})
	t.Run("8 cold replay", func(t *testing.T) {
		a := pmSession(t, n, "proj-replay-a")
		a.turnStart(1)
		a.command("")
		a.state("source session", "{active:false, pending:true}", "{false,true}")
		b := pmSession(t, n, "proj-replay-b")
		for _, ev := range a.stored() {
			if ty := pmType(t, ev); ty == "command/run" || ty == "command/done" || ty == "plan/mode" {
				b.appendRaw(pmEnvSeqRe.ReplaceAllString(ev, "${1}"+strconv.FormatInt(b.next, 10)+"${3}"))
			}
		}
		// The projection recovers the pending selection from the log alone;
		// the service's pending selection is the source session's (L8).
		b.state("replayed session", "{active:false}", "{false,true}")
	})
	t.Run("direct selections are invisible to the projection", func(t *testing.T) {
		a := pmSession(t, n, "proj-direct")
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		a.state("after a direct Set", "{active:false, pending:true}", "{false,false}")
		c := pmSession(t, n, "proj-server-error")
		c.planMode(true)
		c.command(" off", pmImg1)
		c.state("after /plan off + image", "{active:true}", "{true,false}")
	})
}

// ---------------------------------------------------------------------------
// Request ids, errors, leases, restart
// ---------------------------------------------------------------------------

func TestPlanMode_RequestIDs(t *testing.T) {
	n := pmNode(t)

	t.Run("Set", func(t *testing.T) {
		a := pmSession(t, n, "rid-set")
		req := &sessionpb.PlanSetRequest{SessionId: a.id, Active: true, RequestId: "set-1"}
		first, err := n.Client.PlanSet(n.ctx(), req)
		if err != nil || first.GetOutcome() != pmCommitted || len(first.GetAppendedEvents()) != 1 {
			t.Fatalf("first Set: %v %v", first, err)
		}
		a.next = first.GetNextSeq()
		again, err := n.Client.PlanSet(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("repeated Set: %v %v; want the first response %v", again, err, first)
		}
		a.wantSet(false, pmCommitted)
		again, err = n.Client.PlanSet(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("Set repeated after the log moved on: %v %v; want the first response", again, err)
		}
		a.wantCount("plan/mode", 2) // a repeat appends nothing
		a.state("end", "{active:false}", "{false,false}")
	})

	t.Run("PreStep", func(t *testing.T) {
		a := pmSession(t, n, "rid-prestep")
		a.header()
		a.turnStart(1)
		a.wantSet(true, pmQueued)
		req := &sessionpb.PlanPreStepRequest{SessionId: a.id, ExpectedNextSeq: a.next, RequestId: "ps-1"}
		first, err := n.Client.PlanPreStep(n.ctx(), req)
		if err != nil || len(first.GetAppendedEvents()) != 1 || len(first.GetNotices()) != 1 {
			t.Fatalf("first PreStep: %v %v", first, err)
		}
		a.next = first.GetNextSeq()
		again, err := n.Client.PlanPreStep(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("repeated PreStep: %v %v; want the first response %v", again, err, first)
		}
		a.stepStart(1, 1)
		again, err = n.Client.PlanPreStep(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("PreStep repeated after the log moved on: %v %v; want the first response", again, err)
		}
		a.wantCount("plan/mode", 1)
		// A new request id is a new pre-step: nothing pending, no notice.
		pmWantNoStepEffect(t, "next pre-step", a.preStep(), true)
	})

	t.Run("Command", func(t *testing.T) {
		a := pmSession(t, n, "rid-command")
		a.turnStart(1)
		req := &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: " draft", ExpectedNextSeq: a.next, RequestId: "cmd-1"}
		first, err := n.Client.PlanCommand(n.ctx(), req)
		if err != nil || len(first.GetAppendedEvents()) != 2 {
			t.Fatalf("first Command: %v %v", first, err)
		}
		a.next = first.GetNextSeq()
		again, err := n.Client.PlanCommand(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("repeated Command: %v %v; want the first response %v", again, err, first)
		}
		a.wantCount("command/run", 1)
		a.wantGet("after the repeat", "{active:false, pending:true}")
	})

	t.Run("ExitPlan", func(t *testing.T) {
		a := pmSession(t, n, "rid-exit")
		a.planMode(true)
		a.turnStart(1)
		req := &sessionpb.PlanExitRequest{SessionId: a.id, Plan: pmPlan, Answer: pmApprove(), RequestId: "exit-1"}
		first, err := n.Client.ExitPlan(n.ctx(), req)
		if err != nil || !first.GetApproved() {
			t.Fatalf("first ExitPlan: %v %v", first, err)
		}
		ps, _ := a.step(1, 1)
		if ps.GetActive() || len(ps.GetAppendedEvents()) != 1 {
			t.Fatalf("boundary: %v", ps)
		}
		again, err := n.Client.ExitPlan(n.ctx(), req)
		if err != nil || !proto.Equal(first, again) {
			t.Errorf("repeated ExitPlan: %v %v; want the first response %v", again, err, first)
		}
		// The repeat must not record the approved exit again.
		a.wantGet("after the repeat", "{active:false}")
	})

	t.Run("a refused call is remembered too", func(t *testing.T) {
		a := pmSession(t, n, "rid-refused")
		a.planMode(false)
		req := &sessionpb.PlanSetRequest{SessionId: a.id, Active: true, ExpectedNextSeq: 5, RequestId: "set-bad"}
		_, err := n.Client.PlanSet(n.ctx(), req)
		pmWantErr(t, "Set with a wrong expected_next_seq", err, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, 1, 5))
		_, err = n.Client.PlanSet(n.ctx(), req)
		pmWantErr(t, "the same request again", err, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, 1, 5))
		a.state("nothing applied", "{active:false}", "{false,false}")
	})
}

func TestPlanMode_Errors(t *testing.T) {
	n := pmNode(t)
	raw := sessionpb.NewPlanModeClient(n.Client.Conn())

	t.Run("NOT_FOUND", func(t *testing.T) {
		id := "pm-missing"
		msg := sessionstore.NotFound(id).Message
		calls := map[string]func() error{
			"Get": func() error { _, err := raw.Get(n.ctx(), &sessionpb.PlanGetRequest{SessionId: id}); return err },
			"Set": func() error {
				_, err := raw.Set(n.ctx(), &sessionpb.PlanSetRequest{SessionId: id, Active: true})
				return err
			},
			"PreStep": func() error { _, err := raw.PreStep(n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: id}); return err },
			"Command": func() error { _, err := raw.Command(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: id}); return err },
			"Projection": func() error {
				_, err := raw.Projection(n.ctx(), &sessionpb.PlanProjectionRequest{SessionId: id})
				return err
			},
			"ExitPlan validate": func() error {
				_, err := raw.ExitPlan(n.ctx(), &sessionpb.PlanExitRequest{SessionId: id, Plan: pmPlan})
				return err
			},
			"ExitPlan answer": func() error {
				_, err := raw.ExitPlan(n.ctx(), &sessionpb.PlanExitRequest{SessionId: id, Plan: pmPlan, Answer: pmApprove(), RequestId: "r"})
				return err
			},
		}
		for name, call := range calls {
			pmWantStatus(t, name, call(), codes.NotFound, sessionstore.ReasonNotFound, msg)
		}
	})

	t.Run("SEQ_MISMATCH", func(t *testing.T) {
		a := pmSession(t, n, "err-seq")
		a.turnStart(1)
		a.stepStart(1, 1)
		for _, exp := range []int64{a.next + 1, a.next - 1} {
			_, err := raw.Set(n.ctx(), &sessionpb.PlanSetRequest{SessionId: a.id, Active: true, ExpectedNextSeq: exp})
			pmWantStatus(t, fmt.Sprintf("Set expecting %d", exp), err, codes.FailedPrecondition, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, a.next, exp))
			_, err = raw.Command(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, ExpectedNextSeq: exp})
			pmWantStatus(t, fmt.Sprintf("Command expecting %d", exp), err, codes.FailedPrecondition, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, a.next, exp))
			_, err = raw.PreStep(n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: a.id, ExpectedNextSeq: exp})
			pmWantStatus(t, fmt.Sprintf("PreStep expecting %d", exp), err, codes.FailedPrecondition, sessionstore.ReasonSeqMismatch, pmSeqMismatch(a.id, a.next, exp))
		}
		if got := len(a.stored()); got != 2 {
			t.Errorf("%d stored events, want 2 (refused calls append nothing)", got)
		}
		a.state("nothing applied", "{active:false}", "{false,false}")
		// The matching value, and 0 (no check), are accepted.
		a.wantSet(true, pmQueued)
		if _, err := raw.Set(n.ctx(), &sessionpb.PlanSetRequest{SessionId: a.id, Active: false}); err != nil {
			t.Errorf("Set without expected_next_seq: %v", err)
		}
	})

	t.Run("INVALID_ARGUMENT image block", func(t *testing.T) {
		a := pmSession(t, n, "err-image")
		a.turnStart(1)
		_, err := raw.Command(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: " x", ImageBlocks: []string{pmImg1, "not json"}})
		pmWantStatus(t, "Command with a non-JSON image", err, codes.InvalidArgument, sessionstore.ReasonInvalidArgument, "image block 1 is not a JSON object")
		if got := len(a.stored()); got != 1 {
			t.Errorf("%d stored events, want 1", got)
		}
		a.state("nothing applied", "{active:false}", "{false,false}")
	})
}

// TestPlanMode_OwnedSession: lease epochs (docs/api.md): a caller without the
// epoch of an owned session records pending selections only; a wrong
// non-zero epoch is fenced; PreStep needs the current epoch.
func TestPlanMode_OwnedSession(t *testing.T) {
	n := pmNode(t)
	raw := sessionpb.NewPlanModeClient(n.Client.Conn())
	a := pmSession(t, n, "owned")
	a.turnStart(1)
	a.step(1, 1)
	a.header()
	a.stepEnd(1, 1)
	a.turnEnd(1)
	_, lease, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: a.id, Owner: "host-a", TtlMs: (10 * time.Minute).Milliseconds()})
	if err != nil || lease.GetEpoch() == 0 {
		t.Fatalf("Prepare: %v %v", lease, err)
	}
	e := lease.GetEpoch()
	stored := len(a.stored())

	// Epoch 0 (another client, e.g. a UI): Set queues even though idle.
	r, err := n.Client.PlanSet(n.ctx(), &sessionpb.PlanSetRequest{SessionId: a.id, Active: true})
	if err != nil || r.GetOutcome() != pmQueued || len(r.GetAppendedEvents()) != 0 || r.GetNextSeq() != a.next {
		t.Fatalf("Set with epoch 0 on an owned idle session: %v %v; want QUEUED, nothing appended", r, err)
	}
	a.state("after the deferred Set", "{active:false, pending:true}", "{false,false}")
	c, err := n.Client.PlanCommand(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: " off"})
	if err != nil || len(c.GetAppendedEvents()) != 0 || c.GetNextSeq() != a.next {
		t.Fatalf("Command with epoch 0: %v %v; want nothing appended", c, err)
	}
	pmWantCommand(t, c, "success", pmTextCancelled, nil, "")
	a.state("after the deferred /plan off", "{active:false, pending:false}", "{false,false}")
	c, err = n.Client.PlanCommand(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: " look"})
	if err != nil || len(c.GetAppendedEvents()) != 0 {
		t.Fatalf("Command with epoch 0: %v %v", c, err)
	}
	pmWantCommand(t, c, "success", pmTextEntering, pmStr("look"), `[{"type":"text","text":"look"}]`)
	a.state("after the deferred /plan look", "{active:false, pending:true}", "{false,false}")

	// Wrong non-zero epochs are fenced; PreStep needs the current epoch.
	fenced := pmFenced(a.id, e, e+1)
	_, err = raw.Set(n.ctx(), &sessionpb.PlanSetRequest{SessionId: a.id, Active: false, LeaseEpoch: e + 1})
	pmWantStatus(t, "Set with a wrong epoch", err, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, fenced)
	_, err = raw.Command(n.ctx(), &sessionpb.PlanCommandRequest{SessionId: a.id, RawInput: " off", LeaseEpoch: e + 1})
	pmWantStatus(t, "Command with a wrong epoch", err, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, fenced)
	_, err = raw.PreStep(n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: a.id, LeaseEpoch: e + 1})
	pmWantStatus(t, "PreStep with a wrong epoch", err, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, fenced)
	_, err = raw.PreStep(n.ctx(), &sessionpb.PlanPreStepRequest{SessionId: a.id})
	pmWantStatus(t, "PreStep with epoch 0", err, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, pmFenced(a.id, e, 0))
	if got := len(a.stored()); got != stored {
		t.Errorf("%d stored events, want %d (nothing appended without the epoch)", got, stored)
	}
	a.state("after the fenced calls", "{active:false, pending:true}", "{false,false}")

	// The owner's next accepted pre-step applies the selection, narrated.
	a.epoch = e
	a.turnStart(2)
	ps := a.wantStep(2, 1, true, 1, pmNoticeEnter)
	pmWantNorm(t, "owner's pre-step appended", ps.GetAppendedEvents(), pmEv("plan/mode", 0, 0, `{"active":true}`))

	// exit_plan_mode: a wrong epoch is fenced; the owner's approval records
	// the silent exit.
	_, err = raw.ExitPlan(n.ctx(), &sessionpb.PlanExitRequest{SessionId: a.id, Plan: pmPlan, Answer: pmApprove(), LeaseEpoch: e + 1, RequestId: "x"})
	pmWantStatus(t, "ExitPlan with a wrong epoch", err, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, fenced)
	a.state("after the fenced exit", "{active:true}", "{true,false}")
	pmWantExit(t, "owner's approval", a.exit(pmPlan, pmApprove()), true, false, pmTextApproved)
	a.state("after the approval", "{active:true, pending:false}", "{true,false}")
	a.stepEnd(2, 1)
	a.wantStep(2, 2, false, 1) // the boundary after the approval
	a.stepEnd(2, 2)
	a.turnEnd(2)
	// The owner, idle, commits directly.
	a.wantSet(true, pmCommitted)
	a.state("owner's idle commit", "{active:true}", "{true,false}")
}

// Pending selections and approved exits are replicated state (docs/deviations.md
// "Plan mode", removing L2 and L6): they survive a restart.
func TestPlanMode_SelectionsSurviveRestart(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	a := pmSession(t, n, "restart-selection")
	a.header()
	a.turnStart(1)
	a.wantSet(true, pmQueued)
	b := pmSession(t, n, "restart-approved")
	b.planMode(true)
	b.turnStart(1)
	pmWantExit(t, "approve", b.exit(pmPlan, pmApprove()), true, false, pmTextApproved)
	c := pmSession(t, n, "restart-owed")
	c.header()
	c.wantSet(true, pmCommitted) // notice owed

	n = n.Restart()
	a.n, b.n, c.n = n, n, n

	a.state("selection after restart", "{active:false, pending:true}", "{false,false}")
	b.state("approved exit after restart", "{active:true, pending:false}", "{true,false}")
	a.wantStep(1, 1, true, 1, pmNoticeEnter) // the selection's boundary
	b.wantStep(1, 1, false, 1)               // the approved exit's boundary
	c.turnStart(1)
	c.wantStep(1, 1, true, 0, pmNoticeEnter) // the owed notice
}

// ---------------------------------------------------------------------------
// The recorded web-plan-mode session
// ---------------------------------------------------------------------------

// pmReadRecorded reads a recorded log with the store's reader of reference
// JSONL files (packed chunk rows expanded as the reference loads them).
func pmReadRecorded(t *testing.T, path string) (*sessionpb.SessionHeader, []string) {
	t.Helper()
	rs, err := storage.ReadRootSession(path)
	if err == nil {
		err = rs.Err
	}
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	events := make([]string, len(rs.Events))
	for i, ev := range rs.Events {
		events[i] = string(ev)
	}
	return sessionpb.HeaderFromDomain(rs.Header), events
}

func TestPlanMode_RecordedSessionReadsActive(t *testing.T) {
	path := filepath.Join(refdata.RecordedDir(t), "web-plan-mode.session.jsonl")
	n := pmNode(t)
	h, events := pmReadRecorded(t, path)
	if len(events) != 61 {
		t.Fatalf("expanded log: %d events, want 61", len(events))
	}
	for i, ev := range events {
		if seq, _ := pmSeqTime(t, ev); seq != int64(i) {
			t.Fatalf("event %d has seq %d", i, seq)
		}
	}
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h}); err != nil {
		t.Fatalf("Create(%q): %v", h.GetId(), err)
	}
	a := &pmAgent{t: t, n: n, id: h.GetId(), seqs: map[int64]int64{}}
	for i := 0; i < len(events); i += 10 {
		a.appendRaw(events[i:min(i+10, len(events))]...)
	}

	g := a.getResp()
	if !g.GetActive() || g.Pending != nil || g.GetNextSeq() != 61 {
		t.Errorf("Get: %v, want {active:true}, no pending, next_seq 61", g)
	}
	if p := a.proj(); p != "{true,false}" {
		t.Errorf("Projection %s, want {true,false}", p)
	}
	// After command/run and before its plan/mode the entry was pending.
	if p := pmProjectionOf(t, n, "rec-plan-mode-prefix-4", events[:4]); p != "{false,true}" {
		t.Errorf("projection of seqs 0–3: %s, want {false,true}", p)
	}
	plan := "# Reply plan\n\n1. Reply OK."
	v := a.exit(plan, nil)
	if !v.GetNeedsReview() || v.GetIsError() || v.GetApproved() {
		t.Errorf("ExitPlan validation: %v, want needs_review", v)
	}
	pmJSONEq(t, "review_question", v.GetReviewQuestion(), pmReviewQuestion(plan))
	pmWantExit(t, "ExitPlan with a heading-less plan", a.exit("Reply OK.", nil), false, true, pmErrBadPlan)
	// The turn is closed, nothing is pending: a Set(true) is a no-op and an
	// idle Set(false) commits.
	a.wantSet(true, pmNoop)
	a.wantSet(false, pmCommitted)
	a.state("after the idle exit", "{active:false}", "{false,false}")
}
