package planmode

// Mapping of docs/contract.md#plan-mode-tests to the Go tests of this package.
//
// plan-mode.spec.ts
//   1–3 resolveConfig ................ n/a: plugin config / prompt section live in the agent host
//   4 fold empty + last wins ......... TestFoldPlanMode
//   5 fold prefix (end) .............. TestFoldPlanMode
//   6 get reads the fold ............. TestGetReadsFold
//   7 exit target queued in turn ..... TestSetExitQueuedInOpenTurn
//   8 no-op set ...................... TestSetNoop
//   9 between-turns commit ........... TestSetIdleCommit
//   10 idle reversal cancels ......... TestSetIdleReversalCancels
//   11 idle commit narrates .......... TestSetIdleCommitNarrates
//   12 boundary inert ................ TestPreStepInertWithoutPending
//   13 pre-step flush ................ TestPreStepFlushes
//   14 flush removed on dispose ...... n/a: no plugin fiber/HMR; replicated state is never disposed
//   15 between-step seam flush ....... TestPreStepFlushes
//   16 net-zero flip sequence ........ TestPreStepNetZero
//   17 no notice before any header ... TestNarrationRules/no_header
//   18 narrates once ................. TestNarrationRules/once
//   19 narrates exit ................. TestNarrationRules/exit
//   20 silent when header agrees ..... TestNarrationRules/header_agrees
//   21–22 append failure contained ... TestPreStepFailedAppendKeepsPending (pure: caller keeps old State)
//   23–29 soft layer / tool schemas .. n/a: prompt assembly, tool lists and Code Mode SDK are agent-side;
//                                      the "section iff effective" rule is TestEffectiveActive
//   30–31 no execution gating ........ n/a: nothing to gate; the package has no execution hook
//   32 /plan registration + steer .... TestCommandOpenTurn (registration list: constants only)
//   33 /plan off ..................... TestCommandOff
//   34 idle copies ................... TestCommandIdle
//   35 images ........................ TestCommandImages
//   36 command removed on dispose .... n/a: no disposal
//   37 tool registration ............. TestToolRegistration
//   38 agent-less call ............... n/a: the server always has a session (text exported: ErrNoAgent)
//   39 outside plan mode ............. TestExitValidation
//   40 bad plan, not asked ........... TestExitValidation
//   41–43 no channel/provider/delegated n/a: the user-questions seam lives in the agent host (ErrNoChannel exported)
//   44 approve ....................... TestExitApprove
//   45 Code Mode review .............. n/a: Code Mode dispatch is agent-side (detail = exact plan: TestReviewQuestion)
//   46 approved exit projects assembly TestEffectiveActive
//   47 exit flush narrates nothing ... TestExitApprove
//   48–54 answer interpretation ...... TestInterpretAnswer
//   55 presentation intent ........... TestReviewQuestion
//   56 dismissed ..................... TestExitDismissed
//   57 other failures own message .... n/a: ASK_ABORTED/provider errors never reach the server
//   58 abort signal forwarded ........ n/a: signals are agent-side
//   59 reloaded while awaiting ....... n/a: replicated state survives reloads (L7); ErrReloaded exported
//   60 throwing provider ............. n/a: provider is agent-side
//   61–62 presentation cards ......... n/a: UI only
//   63 HMR disposal .................. n/a: no plugin fiber
// integration.spec.ts
//   1 pre-turn set, first header plan-shaped   TestIntegrationPreTurnSet
//   2 flip between turns narrates once         TestIntegrationFlipBetweenTurns
//   3 flip at error settlement waits           TestIntegrationRetryWaits (a retry runs no PreStep)
// invariant.spec.ts: 1–6 TestValidateEvent; 7–9 TestValidateLog
// projection.spec.ts: 1–5, 8 TestProjectionSpec; 6–7 n/a (registry
// composition/unload) registry.spec.ts of the reference's projection framework
// (plan unit only): 1, 3, 4, 6, 13, 14, 17 TestProjectionUnit Sequences
// (docs/contract.md#plan-mode-sequences): TestGolden12_1 … TestGolden12_4.
// Recorded session: TestRecordedWebPlanMode.

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

func newBench(t *testing.T) *bench { return &bench{t: t} }

func TestFoldPlanMode(t *testing.T) {
	var l logb
	if v, err := FoldPlanMode(l.evs, 0); v || err != nil {
		t.Fatal("empty log must fold inactive")
	}
	l.plan(true).plan(false).plan(true)
	if v, _ := FoldPlanMode(l.evs, len(l.evs)); !v {
		t.Fatal("last plan/mode must win")
	}
	var p logb
	p.plan(true).plan(false)
	for _, c := range []struct {
		end  int
		want bool
	}{{0, false}, {1, true}, {2, false}, {99, false}, {-1, false}} {
		if v, err := FoldPlanMode(p.evs, c.end); v != c.want || err != nil {
			t.Errorf("end=%d: %v %v", c.end, v, err)
		}
	}
	var h logb
	h.plan(true).header().plan(false)
	if a, ok, err := StateAtLastRequestHeader(h.evs); !a || !ok || err != nil {
		t.Fatal("state at last header")
	}
	if _, ok, _ := StateAtLastRequestHeader(p.evs); ok {
		t.Fatal("no header must be ok=false")
	}
	var o logb
	if open, _ := HasOpenTurn(o.openTurn().evs); !open {
		t.Fatal("open turn")
	}
	if open, _ := HasOpenTurn(o.closeTurn().evs); open {
		t.Fatal("closed turn")
	}
}

func TestGetReadsFold(t *testing.T) {
	b := newBench(t)
	if g := b.get(); g != "{active:false}" {
		t.Fatal(g)
	}
	b.l.plan(true)
	if g := b.get(); g != "{active:true}" {
		t.Fatal(g)
	}
}

func TestSetExitQueuedInOpenTurn(t *testing.T) {
	b := newBench(t)
	b.l.plan(true).openTurn()
	if o := b.set(false); o != Queued {
		t.Fatal(o)
	}
	if g := b.get(); g != "{active:true, pending:false}" {
		t.Fatal(g)
	}
}

func TestSetNoop(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	if o := b.set(false); o != Noop || b.get() != "{active:false}" {
		t.Fatal(o, b.get())
	}
	if o := b.set(true); o != Queued {
		t.Fatal(o)
	}
	if o := b.set(true); o != Noop {
		t.Fatal(o)
	}
	if g := b.get(); g != "{active:false, pending:true}" || b.planModes() != 0 {
		t.Fatal(g, b.planModes())
	}
}

type setCase struct {
	p       *Pending
	want    bool
	outcome Outcome
	pending *Pending
	appends bool
}

// TestSetDecisionTable is the exhaustive table of docs/planmode.md#set.
func TestSetDecisionTable(t *testing.T) {
	for _, open := range []bool{true, false} {
		for _, f := range []bool{true, false} {
			cases := []setCase{
				{nil, f, Noop, nil, false},
				{&Pending{!f, false}, !f, Noop, &Pending{!f, false}, false},
				{&Pending{f, true}, f, Noop, &Pending{f, true}, false},
			}
			if open {
				cases = append(cases,
					setCase{nil, !f, Queued, &Pending{!f, true}, false},
					setCase{&Pending{!f, true}, f, Cancelled, &Pending{f, true}, false},
					setCase{&Pending{f, true}, !f, Queued, &Pending{!f, true}, false})
			} else {
				cases = append(cases,
					setCase{nil, !f, Committed, nil, true},
					setCase{&Pending{!f, true}, f, Cancelled, nil, false},
					setCase{&Pending{f, true}, !f, Committed, nil, true})
			}
			for i, c := range cases {
				var l logb
				l.plan(f)
				if open {
					l.openTurn()
				}
				r, err := Set(l.evs, State{Pending: c.p}, c.want, l.at(), SetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				okPending := (r.State.Pending == nil) == (c.pending == nil) && (c.pending == nil || *r.State.Pending == *c.pending)
				if r.Outcome != c.outcome || !okPending || (len(r.Appended) == 1) != c.appends {
					t.Errorf("open=%v F=%v case %d: got %v %+v %d appended", open, f, i, r.Outcome, r.State.Pending, len(r.Appended))
				}
				if c.appends && string(r.Appended[0]) != string(PlanModeEvent(c.want, l.at().Seq, 5000)) {
					t.Errorf("appended %s", r.Appended[0])
				}
			}
		}
	}
	// Deferred (caller without the epoch): queued even when idle.
	var l logb
	r, _ := Set(l.evs, State{}, true, l.at(), SetOptions{Deferred: true})
	if r.Outcome != Queued || len(r.Appended) != 0 || r.State.Pending == nil {
		t.Fatal("deferred set must queue", r)
	}
}

func TestSetIdleCommit(t *testing.T) {
	b := newBench(t)
	if o := b.set(true); o != Committed || !b.fold() || b.get() != "{active:true}" {
		t.Fatal(o, b.get())
	}
	if o := b.set(false); o != Committed || b.fold() {
		t.Fatal(o)
	}
	b.boundary(true)
	if n := b.planModes(); n != 2 {
		t.Fatal(n)
	}
}

func TestSetIdleReversalCancels(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	if o := b.set(true); o != Queued {
		t.Fatal(o)
	}
	b.l.closeTurn()
	if g := b.get(); g != "{active:false, pending:true}" {
		t.Fatal("a selection left pending by an ended turn:", g)
	}
	if o := b.set(true); o != Noop || b.get() != "{active:false, pending:true}" {
		t.Fatal("re-selecting while idle keeps it pending:", o, b.get())
	}
	if o := b.set(false); o != Cancelled {
		t.Fatal(o)
	}
	if b.planModes() != 0 || b.get() != "{active:false}" {
		t.Fatal(b.get())
	}
}

func TestSetIdleCommitNarrates(t *testing.T) {
	b := newBench(t)
	b.l.header()
	if o := b.set(true); o != Committed {
		t.Fatal(o)
	}
	b.l.openTurn()
	b.boundary(true)
	if !eqStrings(b.notices, []string{NoticeEnter}) {
		t.Fatal(b.notices)
	}
	b.boundary(true)
	if len(b.notices) != 1 {
		t.Fatal("owed notice delivered twice", b.notices)
	}
}

func TestPreStepInertWithoutPending(t *testing.T) {
	b := newBench(t)
	r := b.boundary(false)
	if len(r.Appended) != 0 || len(r.Notices) != 0 || b.planModes() != 0 {
		t.Fatal(r)
	}
}

func TestPreStepFlushes(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	b.set(true)
	b.boundary(false)
	if !b.fold() || b.get() != "{active:true}" {
		t.Fatal(b.get())
	}
	// Between-step seam with no turn: the idle set commits, the boundary keeps it.
	c := newBench(t)
	c.set(true)
	c.boundary(true)
	if !c.fold() {
		t.Fatal("seam")
	}
	// Rejected / aborted: nothing, still pending.
	d := newBench(t)
	d.l.openTurn()
	d.set(true)
	for _, sc := range []StepContext{{Rejected: true}, {Aborted: true}} {
		r, _ := PreStep(d.l.evs, d.st, sc, d.l.at(), "x")
		if len(r.Appended) != 0 || len(r.Notices) != 0 || r.State.Pending == nil {
			t.Fatal("rejected step must change nothing", r)
		}
	}
}

func TestPreStepNetZero(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	b.set(true)
	b.set(false)
	b.boundary(false)
	if b.planModes() != 0 || len(b.notices) != 0 || b.st.Pending != nil {
		t.Fatal(b.notices, b.st)
	}
}

func TestNarrationRules(t *testing.T) {
	t.Run("no_header", func(t *testing.T) {
		b := newBench(t)
		b.l.openTurn()
		b.set(true)
		b.boundary(false)
		if len(b.notices) != 0 {
			t.Fatal(b.notices)
		}
	})
	t.Run("once", func(t *testing.T) {
		b := newBench(t)
		b.l.header().openTurn()
		if o := b.set(true); o != Queued {
			t.Fatal(o)
		}
		r1, r2 := b.boundary(true), b.boundary(true)
		if len(r1.Notices) != 1 || !eqStrings(b.notices, []string{NoticeEnter}) || b.planModes() != 1 {
			t.Fatal(b.notices)
		}
		if !r1.Active || len(r1.Appended) != 1 || !r2.Active || len(r2.Appended) != 0 {
			t.Fatal(r1, r2)
		}
	})
	t.Run("exit", func(t *testing.T) {
		b := newBench(t)
		b.l.plan(true).header().openTurn()
		if o := b.set(false); o != Queued {
			t.Fatal(o)
		}
		if r := b.boundary(true); !eqStrings(b.notices, []string{NoticeExit}) || r.Active || len(r.Appended) != 1 {
			t.Fatal(b.notices, r)
		}
	})
	t.Run("header_agrees", func(t *testing.T) {
		b := newBench(t)
		b.l.plan(true).header().plan(false).openTurn()
		if o := b.set(true); o != Queued {
			t.Fatal(o)
		}
		if r := b.boundary(true); !b.fold() || len(b.notices) != 0 || !r.Active || len(r.Appended) != 1 {
			t.Fatal(b.notices, r)
		}
	})
	t.Run("idle_then_reverted_owed_notice_dropped", func(t *testing.T) {
		b := newBench(t)
		b.l.header()
		if o := b.set(true); o != Committed { // notice owed
			t.Fatal(o)
		}
		b.l.openTurn()
		if o := b.set(false); o != Queued {
			t.Fatal(o)
		}
		// The boundary appends plan/mode false (the fold was true) and no
		// notice: the model was told default.
		if r := b.boundary(true); b.fold() || len(b.notices) != 0 || r.Active || len(r.Appended) != 1 {
			t.Fatal(b.notices, r)
		}
	})
}

func TestPreStepFailedAppendKeepsPending(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	b.set(true)
	before := b.st
	r, err := PreStep(b.l.evs, b.st, StepContext{}, b.l.at(), "n")
	if err != nil || len(r.Appended) != 1 {
		t.Fatal(r, err)
	}
	// The append failed: the FSM keeps the old state; get still shows pending.
	if b.st != before || b.get() != "{active:false, pending:true}" {
		t.Fatal(b.get())
	}
	b.boundary(true) // retried at the next accepted pre-step
	if !b.fold() || b.get() != "{active:true}" {
		t.Fatal(b.get())
	}
}

func TestEffectiveActive(t *testing.T) {
	var l logb
	l.plan(true)
	st := State{Pending: &Pending{false, false}}
	if v, _ := EffectiveActive(l.evs, st); v {
		t.Fatal("approved exit must drop the section before the boundary")
	}
	if v, _ := EffectiveActive(l.evs, State{}); !v {
		t.Fatal("fold")
	}
}

func TestCommandParse(t *testing.T) {
	for _, c := range []struct {
		line, name, raw string
		ok              bool
	}{
		{"/plan", "plan", "", true},
		{"/plan off", "plan", " off", true},
		{"/goal\ncreate", "goal", "\ncreate", true},
		{"/goal_name-2\t x ", "goal_name-2", "\t x ", true},
		{"/Plan", "", "", false}, {" /plan", "", "", false}, {"/plan/x", "", "", false},
		{"/", "", "", false}, {"plan", "", "", false}, {"/goal🔥", "", "", false},
		{"/planoff", "planoff", "", true},
	} {
		n, r, ok := ParseCommandLine(c.line)
		if n != c.name || r != c.raw || ok != c.ok {
			t.Errorf("%q: %q %q %v", c.line, n, r, ok)
		}
	}
}

func TestCommandOpenTurn(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	r := b.command("")
	if r.Kind != KindSuccess || r.Text != TextEntering || r.Steer != nil || b.get() != "{active:false, pending:true}" {
		t.Fatal(r, b.get())
	}
	c := newBench(t)
	c.l.openTurn()
	r = c.command("   draft the migration  ")
	if r.Text != TextEntering || c.get() != "{active:false, pending:true}" {
		t.Fatal(r)
	}
	if string(r.Steer) != `[{"type":"text","text":"draft the migration"}]` || *r.SteerText != "draft the migration" {
		t.Fatal(string(r.Steer))
	}
	want := []string{
		`{"type":"command/run","seq":1,"time":5000,"data":{"commandId":"cmd-1","name":"plan","args":"   draft the migration  ","source":{"kind":"user"}}}`,
		`{"type":"command/done","seq":2,"time":5000,"data":{"commandId":"cmd-1","kind":"success","text":"Entering plan mode (applies from the next step). Use /plan off to leave."}}`,
	}
	if string(c.l.evs[1]) != want[0] || string(c.l.evs[2]) != want[1] {
		t.Fatalf("%s\n%s", c.l.evs[1], c.l.evs[2])
	}
}

func TestCommandOff(t *testing.T) {
	b := newBench(t)
	if r := b.command("off"); r.Text != TextAlreadyInactive || b.get() != "{active:false}" {
		t.Fatal(r)
	}
	c := newBench(t)
	c.l.openTurn()
	c.command("")
	r := c.command("off")
	if r.Text != TextEntryCancelled || r.Steer != nil || c.get() != "{active:false, pending:false}" {
		t.Fatal(r, c.get())
	}
	c.boundary(true)
	if c.get() != "{active:false}" || c.planModes() != 0 {
		t.Fatal(c.get())
	}
	d := newBench(t)
	d.l.plan(true).openTurn()
	for i := 0; i < 2; i++ {
		r := d.command(" off ")
		if r.Text != TextLeaving || r.Steer != nil || d.get() != "{active:true, pending:false}" {
			t.Fatal(i, r, d.get())
		}
	}
	d.boundary(true)
	if d.get() != "{active:false}" {
		t.Fatal(d.get())
	}
}

func TestCommandIdle(t *testing.T) {
	b := newBench(t)
	if r := b.command(""); r.Text != TextPlanOn || !b.fold() || r.Outcome != Committed {
		t.Fatal(r)
	}
	if r := b.command("off"); r.Text != TextPlanOff || b.fold() {
		t.Fatal(r)
	}
	// Observed quirk: bare /plan while active and idle says "entering".
	c := newBench(t)
	c.l.plan(true)
	if r := c.command(""); r.Text != TextEntering || r.Outcome != Noop {
		t.Fatal(r)
	}
	// /plan OFF is an entry with a message.
	d := newBench(t)
	d.l.openTurn()
	if r := d.command(" OFF"); r.Text != TextEntering || *r.SteerText != "OFF" {
		t.Fatal(r)
	}
}

func TestCommandImages(t *testing.T) {
	img1 := `{"type":"image","attachment":{"attachmentId":"att-1","mediaType":"image/png"}}`
	img2 := `{"type":"image","attachment":{"attachmentId":"att-2","mediaType":"image/png"}}`
	b := newBench(t)
	b.l.openTurn()
	r := b.command(" sketch the layout", img1)
	if r.Kind != KindSuccess || string(r.Steer) != "["+img1+`,{"type":"text","text":"sketch the layout"}]` {
		t.Fatal(string(r.Steer))
	}
	c := newBench(t)
	c.l.openTurn()
	r = c.command("", img2)
	if r.Text != TextEntering || string(r.Steer) != "["+img2+"]" || r.SteerText != nil || c.get() != "{active:false, pending:true}" {
		t.Fatal(r)
	}
	d := newBench(t)
	d.l.plan(true)
	r = d.command("off", img1)
	if r.Kind != KindError || r.Text != TextOffWithImages || r.Steer != nil || d.get() != "{active:true}" {
		t.Fatal(r)
	}
	if last := string(d.l.evs[len(d.l.evs)-1]); !strings.Contains(last, `"kind":"error","text":"Image attachments cannot accompany /plan off."`) {
		t.Fatal(last)
	}
}

func TestCheckRawInput(t *testing.T) {
	for _, c := range []struct {
		raw string
		ok  bool
	}{
		{"", true}, {" off", true}, {"\toff", true}, {"\r\noff", true}, {"\n", true}, {"   draft the plan  ", true},
		// Not a /plan line: "/planoff", "/planx", "/plan\u00a0off", "/plan\foff", "/plan/x".
		{"off", false}, {"x", false}, {"\u00a0off", false}, {"\foff", false}, {"/x", false}, {"-x", false}, {"_", false},
	} {
		err := CheckRawInput(c.raw)
		if (err == nil) != c.ok {
			t.Errorf("CheckRawInput(%q) = %v, want ok=%v", c.raw, err, c.ok)
			continue
		}
		if err != nil && !errors.Is(err, sessionstore.ErrInvalidArgument) {
			t.Errorf("CheckRawInput(%q) = %v, want INVALID_ARGUMENT", c.raw, err)
		}
	}
}
