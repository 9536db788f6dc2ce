package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/planmode"
	"github.com/sessionstore/sessionstore/storage"
)

func planSetCmd(id string, active bool, epoch uint64, expected int64, req string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_PlanSet{PlanSet: &fsmpb.PlanSet{
		SessionId: id, Active: active, LeaseEpoch: epoch, ExpectedNextSeq: expected, RequestId: req}}}
}

func preStepCmd(id string, epoch uint64, expected int64, req, notice string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_PlanPreStep{PlanPreStep: &fsmpb.PlanPreStep{
		SessionId: id, LeaseEpoch: epoch, ExpectedNextSeq: expected, RequestId: req, NoticeId: notice}}}
}

func storedRecord(t *testing.T, db *storage.StateDB, id string) (*fsmpb.SessionRecord, [][]byte) {
	t.Helper()
	var rec *fsmpb.SessionRecord
	var evs [][]byte
	err := db.View(func(tx *storage.Tx) error {
		var err error
		if rec, err = ReadRecord(tx, id); err != nil || rec == nil {
			return err
		}
		evs, err = tx.Events(id, rec.Incarnation, 0, rec.NextSeq)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec, evs
}

// applyAll applies entries one at a time from index 1 and returns the
// results, one per command.
func applyAll(t *testing.T, f *FSM, now int64, cmds ...*fsmpb.Command) []*fsmpb.Result {
	t.Helper()
	var logs []*raft.Log
	for i, c := range cmds {
		logs = append(logs, entry(t, uint64(i+1), now, c))
	}
	return results(t, f.ApplyBatch(logs))
}

func TestPlanCommandsFollowTheRulesAtTheStoredSeq(t *testing.T) {
	f, db := newTestFSM(t)
	header := `{"type":"request/header","seq":1,"time":3,"data":{"header":{},"reason":"initial"}}`
	rs := applyAll(t, f, 500,
		createCmd("s"),
		planSetCmd("s", true, 0, 0, "a"), // idle, empty log, no header: commits, no notice owed
		appendCmd("s", 1, header, `{"type":"turn/start","seq":2,"time":4,"data":{"turn":1}}`),
		planSetCmd("s", false, 0, 0, "b"),  // open turn: queued
		planSetCmd("s", false, 0, 3, "c"),  // noop now (target already false)
		planSetCmd("s", true, 0, 9, "d"),   // expected next seq 9: refused
		preStepCmd("s", 0, 3, "e", "n-1"),  // applies the exit, narrates it
		preStepCmd("s", 0, 5, "e", "n-2"),  // same request id: the first response
		preStepCmd("s", 0, 4, "f", "n-3"),  // nothing pending: inert
		planSetCmd("zzz", true, 0, 0, "z"), // unknown session
	)
	if o := rs[1].GetPlan(); o.GetOutcome() != int32(planmode.Committed) || len(o.Appended) != 1 ||
		string(o.Appended[0]) != `{"type":"plan/mode","seq":0,"time":500,"data":{"active":true}}` || rs[1].NextSeq != 1 {
		t.Fatalf("idle set: %v", rs[1])
	}
	if o := rs[3].GetPlan(); o.GetOutcome() != int32(planmode.Queued) || len(o.Appended) != 0 || rs[3].NextSeq != 3 {
		t.Fatalf("set in an open turn: %v", rs[3])
	}
	if rs[4].GetPlan().GetOutcome() != int32(planmode.Noop) {
		t.Fatalf("repeated target: %v", rs[4])
	}
	if rs[5].Reason != "SEQ_MISMATCH" || rs[5].Message != `plan-mode call for "s" expected next seq 9, but the log's next seq is 3` {
		t.Fatalf("expected_next_seq: %v", rs[5])
	}
	ps := rs[6].GetPlan()
	if ps.GetActive() || len(ps.Appended) != 1 || string(ps.Appended[0]) != `{"type":"plan/mode","seq":3,"time":500,"data":{"active":false}}` {
		t.Fatalf("pre-step: %v", rs[6])
	}
	if len(ps.Notices) != 1 || string(ps.Notices[0]) != string(planmode.NoticeMessage("n-1", planmode.NoticeExit)) {
		t.Fatalf("pre-step notice: %q", ps.Notices)
	}
	if !proto.Equal(rs[7], rs[6]) {
		t.Fatalf("a repeated request id must return the first response: %v", rs[7])
	}
	if p := rs[8].GetPlan(); len(p.Appended) != 0 || len(p.Notices) != 0 || p.GetActive() || rs[8].NextSeq != 4 {
		t.Fatalf("inert pre-step: %v", rs[8])
	}
	if rs[9].Reason != "NOT_FOUND" {
		t.Fatalf("unknown session: %v", rs[9])
	}
	rec, evs := storedRecord(t, db, "s")
	if len(evs) != 4 || rec.Plan != nil {
		t.Fatalf("log %q, plan state %v", evs, rec.Plan)
	}
	want, _ := planmode.Summarize(evs)
	if got := summaryFromPB(rec.PlanSummary); got != want {
		t.Fatalf("stored summary %+v, log's %+v", got, want)
	}
	// The artifact frames: plan/mode, agent batch, plan/mode.
	_ = db.View(func(tx *storage.Tx) error {
		if got := fmt.Sprint(tx.FrameEnds("s", rec.Incarnation)); got != "[1 3 4]" {
			t.Errorf("frame ends %s", got)
		}
		return nil
	})
}

func TestPlanOwnershipDefersOrFences(t *testing.T) {
	f, db := newTestFSM(t)
	rs := applyAll(t, f, 500,
		createCmd("s"),
		appendCmd("s", 0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}`),
		repairCmd("s", fsmpb.Repair_PREPARE, "agent"), // epoch 1
		planSetCmd("s", true, 0, 0, "ui"),             // idle, but no epoch: queued
		planSetCmd("s", true, 7, 0, "stale"),          // a wrong epoch is fenced
		preStepCmd("s", 0, 0, "p0", "n"),              // the pre-step is the owner's
		&fsmpb.Command{Cmd: &fsmpb.Command_PlanCommand{PlanCommand: &fsmpb.PlanCommand{
			SessionId: "s", RawInput: " off", CommandId: "cmd-x-1", RequestId: "cmd"}}}, // no epoch: records only
		preStepCmd("s", 1, 2, "p1", "n"),
	)
	if o := rs[3].GetPlan(); o.GetOutcome() != int32(planmode.Queued) || len(o.Appended) != 0 {
		t.Fatalf("deferred set: %v", rs[3])
	}
	if rs[4].Reason != "LEASE_FENCED" || rs[5].Reason != "LEASE_FENCED" {
		t.Fatalf("fencing: %v / %v", rs[4], rs[5])
	}
	if c := rs[6].GetPlan(); c.GetKind() != "success" || c.GetText() != planmode.TextEntryCancelled || len(c.Appended) != 0 || rs[6].NextSeq != 2 {
		t.Fatalf("deferred /plan off: %v", rs[6])
	}
	if p := rs[7].GetPlan(); len(p.Appended) != 0 || p.GetActive() {
		t.Fatalf("the cancelled entry is net-zero: %v", rs[7])
	}
	rec, evs := storedRecord(t, db, "s")
	if len(evs) != 2 || rec.Plan != nil {
		t.Fatalf("log %q, plan %v", evs, rec.Plan)
	}
}

// A record written before the summary existed has none: the first plan-mode
// command folds the log, and later frames keep it current.
func TestPlanSummaryRebuiltForOldRecords(t *testing.T) {
	f, db := newTestFSM(t)
	applyAll(t, f, 500, createCmd("s"), appendCmd("s", 0,
		`{"type":"plan/mode","seq":0,"time":1,"data":{"active":true}}`,
		`{"type":"turn/start","seq":1,"time":2,"data":{"turn":1}}`))
	err := db.Update(func(tx *storage.Tx) error {
		rec, err := ReadRecord(tx, "s")
		if err != nil {
			return err
		}
		rec.PlanSummary = nil
		b, _ := proto.Marshal(rec)
		return tx.PutRecord("s", b, nil)
	})
	if err != nil {
		t.Fatal(err)
	}
	out := results(t, f.ApplyBatch([]*raft.Log{entry(t, 3, 600, planSetCmd("s", false, 0, 0, "x"))}))
	if out[0].GetPlan().GetOutcome() != int32(planmode.Queued) {
		t.Fatalf("open turn, active log: %v", out[0])
	}
	out = results(t, f.ApplyBatch([]*raft.Log{
		entry(t, 4, 600, appendCmd("s", 2, `{"type":"turn/end","seq":2,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`)),
		entry(t, 5, 600, repairCmd("s", fsmpb.Repair_LOAD, "")),
	}))
	rec, evs := storedRecord(t, db, "s")
	want, _ := planmode.Summarize(evs)
	if rec.PlanSummary == nil || summaryFromPB(rec.PlanSummary) != want || want.OpenTurn || !want.Fold {
		t.Fatalf("summary %v, want %+v", rec.PlanSummary, want)
	}
	if rec.Plan.GetPending() == nil || rec.Plan.GetPending().Active {
		t.Fatalf("pending exit kept: %v", rec.Plan)
	}
}

// Replicas apply the same entries to the same bytes: plan-mode commands
// included (time and ids come from the entry).
func TestPlanCommandsAreDeterministic(t *testing.T) {
	cmds := []*fsmpb.Command{
		createCmd("s"),
		appendCmd("s", 0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{},"reason":"initial"}}`),
		planSetCmd("s", true, 0, 0, "a"),
		appendCmd("s", 2, `{"type":"turn/start","seq":2,"time":4,"data":{"turn":1}}`),
		{Cmd: &fsmpb.Command_PlanExit{PlanExit: &fsmpb.PlanExit{SessionId: "s", Plan: "# P\n\n1. x", RequestId: "e",
			Answer: &fsmpb.ReviewAnswer{Answers: []*fsmpb.AnswerItem{{Id: "plan-review", Selected: []string{"Approve"}}}}}}},
		preStepCmd("s", 0, 3, "p", "n-1"),
		{Cmd: &fsmpb.Command_PlanCommand{PlanCommand: &fsmpb.PlanCommand{SessionId: "s", RawInput: " go", CommandId: "cmd-1", RequestId: "c"}}},
	}
	var logs [][]byte
	var states []*fsmpb.SessionRecord
	for r := 0; r < 2; r++ {
		f, db := newTestFSM(t)
		rs := applyAll(t, f, 700, cmds...)
		if e := rs[4].GetPlan(); !e.GetApproved() || e.GetText() != planmode.TextApproved {
			t.Fatalf("approve: %v", rs[4])
		}
		if p := rs[5].GetPlan(); len(p.Appended) != 1 || len(p.Notices) != 0 || p.GetActive() {
			t.Fatalf("silent exit: %v", rs[5])
		}
		rec, evs := storedRecord(t, db, "s")
		for _, e := range evs {
			logs = append(logs, e)
		}
		states = append(states, rec)
	}
	n := len(logs) / 2
	for i := 0; i < n; i++ {
		if string(logs[i]) != string(logs[n+i]) {
			t.Fatalf("replicas differ at %d: %s / %s", i, logs[i], logs[n+i])
		}
	}
	if !proto.Equal(states[0], states[1]) {
		t.Fatalf("records differ: %v / %v", states[0], states[1])
	}
}

// A request id is scoped to the kind of call: a PreStep reusing a Set's id is
// a new request, not the Set's stored answer.
func TestPlanRequestIDsAreScopedByCall(t *testing.T) {
	f, _ := newTestFSM(t)
	rs := applyAll(t, f, 500,
		createCmd("s"),
		appendCmd("s", 0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`),
		planSetCmd("s", true, 0, 0, "same"),
		preStepCmd("s", 0, 0, "same", "n"),
		planSetCmd("s", true, 0, 0, "same"),
	)
	if p := rs[3].GetPlan(); !p.GetActive() || len(p.Appended) != 1 {
		t.Fatalf("the pre-step must apply the selection: %v", rs[3])
	}
	if !proto.Equal(rs[4], rs[2]) {
		t.Fatalf("a repeated Set returns its first answer: %v", rs[4])
	}
}

// TestPlanSetDecisionTable runs docs/planmode.md#set's table through the FSM,
// for both fold values F: the outcome, the plan/mode event a commit appends,
// the selection left pending in the record, and the plan/mode events in the
// stored log. planmode's TestSetDecisionTable holds the rules alone; this is
// the FSM adapting them (state read from and written to the record, the
// appended event stored at the log's next seq).
func TestPlanSetDecisionTable(t *testing.T) {
	rows := []struct {
		open    bool
		pending string // "" none, "¬F" an opposite selection, "F" the marker equal to the fold
		want    string // "F" or "¬F"
		outcome planmode.Outcome
		after   string // pending after: "" none, "F", "¬F"
		appends bool   // plan/mode ¬F appended
	}{
		{true, "", "F", planmode.Noop, "", false},
		{false, "", "F", planmode.Noop, "", false},
		{true, "¬F", "¬F", planmode.Noop, "¬F", false},
		{false, "¬F", "¬F", planmode.Noop, "¬F", false},
		{true, "F", "F", planmode.Noop, "F", false},
		{false, "F", "F", planmode.Noop, "F", false},
		{true, "", "¬F", planmode.Queued, "¬F", false},
		{true, "¬F", "F", planmode.Cancelled, "F", false},
		{true, "F", "¬F", planmode.Queued, "¬F", false},
		{false, "", "¬F", planmode.Committed, "", true},
		{false, "¬F", "F", planmode.Cancelled, "", false},
		{false, "F", "¬F", planmode.Committed, "", true},
	}
	for _, f := range []bool{false, true} {
		val := func(s string) bool { return (s == "F") == f }
		for _, r := range rows {
			t.Run(fmt.Sprintf("F=%v/open=%v/P=%q/want=%s", f, r.open, r.pending, r.want), func(t *testing.T) {
				fm, db := newTestFSM(t)
				var evs []string
				if f {
					evs = append(evs, `{"type":"plan/mode","seq":0,"time":1,"data":{"active":true}}`)
				}
				if r.open || r.pending != "" {
					evs = append(evs, fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":2,"data":{"turn":1}}`, len(evs)))
				}
				cmds := []*fsmpb.Command{createCmd("s"), appendCmd("s", 0, evs...)}
				switch r.pending {
				case "¬F":
					cmds = append(cmds, planSetCmd("s", !f, 0, 0, "p1"))
				case "F":
					cmds = append(cmds, planSetCmd("s", !f, 0, 0, "p1"), planSetCmd("s", f, 0, 0, "p2"))
				}
				if !r.open && r.pending != "" {
					cmds = append(cmds, appendCmd("s", int64(len(evs)),
						fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":3,"data":{"turn":1,"reason":{"kind":"completed"}}}`, len(evs))))
				}
				cmds = append(cmds, planSetCmd("s", val(r.want), 0, 0, "set"))
				rs := applyAll(t, fm, 500, cmds...)
				for _, res := range rs {
					if res.Reason != "" {
						t.Fatalf("a command was refused: %v", res)
					}
				}
				res := rs[len(rs)-1]
				p := res.GetPlan()
				if planmode.Outcome(p.GetOutcome()) != r.outcome {
					t.Errorf("outcome %v, want %v", planmode.Outcome(p.GetOutcome()), r.outcome)
				}
				rec, stored := storedRecord(t, db, "s")
				var want []string
				if r.appends {
					want = []string{fmt.Sprintf(`{"type":"plan/mode","seq":%d,"time":500,"data":{"active":%v}}`, res.NextSeq-1, !f)}
				}
				if got := fmt.Sprintf("%s", p.GetAppended()); got != fmt.Sprint(want) {
					t.Errorf("appended %s, want %v", got, want)
				}
				pending := PlanStateFromPB(rec.Plan).Pending
				gotAfter := ""
				if pending != nil {
					gotAfter = map[bool]string{f: "F", !f: "¬F"}[pending.Active]
				}
				if gotAfter != r.after {
					t.Errorf("pending after: %q, want %q", gotAfter, r.after)
				}
				modes := 0
				for _, ev := range stored {
					if strings.Contains(string(ev), `"type":"plan/mode"`) {
						modes++
					}
				}
				if wantModes := len(want) + map[bool]int{true: 1}[f]; modes != wantModes {
					t.Errorf("stored plan/mode events: %d, want %d", modes, wantModes)
				}
			})
		}
	}
}
