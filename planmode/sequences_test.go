package planmode

import (
	"bufio"
	"bytes"
	"encoding/json"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"github.com/sessionstore/sessionstore/sessionlog"
	"os"
	"path/filepath"
	"testing"
)

// --- integration.spec.ts at the rules level ---

func TestIntegrationPreTurnSet(t *testing.T) {
	b := newBench(t)
	if b.set(true) != Committed {
		t.Fatal("idle set must commit")
	}
	b.l.openTurn()
	b.boundary(true)
	b.l.header()
	if !b.fold() || len(b.notices) != 0 || b.planModes() != 1 {
		t.Fatal(b.notices)
	}
	if t0, _ := eventType(b.l.evs[0]); t0 != TypePlanMode {
		t.Fatal("plan/mode must precede the first header")
	}
}

func TestIntegrationFlipBetweenTurns(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	b.boundary(true)
	b.l.header().closeTurn()
	b.set(true)
	b.l.openTurn()
	r := b.boundary(true)
	if !b.fold() || !eqStrings(b.notices, []string{NoticeEnter}) {
		t.Fatal(b.notices)
	}
	if string(r.Notices[0]) != `{"id":"n2","role":"user","content":[{"type":"text","text":"The user switched this session to plan mode."}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."}}` {
		t.Fatal(string(r.Notices[0]))
	}
}

func TestIntegrationRetryWaits(t *testing.T) {
	b := newBench(t)
	b.l.openTurn()
	b.boundary(true)
	b.l.header()
	b.set(true) // request-error handler; the retry runs no pre-step
	b.l.header().add("step/end", `{"turn":1,"step":1}`).closeTurn()
	if b.get() != "{active:false, pending:true}" || b.planModes() != 0 {
		t.Fatal(b.get())
	}
	b.l.openTurn()
	b.boundary(true)
	if !b.fold() || !eqStrings(b.notices, []string{NoticeEnter}) {
		t.Fatal(b.notices)
	}
}

// --- golden sequences (docs/contract.md#plan-mode-sequences) ---

func lines(s string) [][]byte {
	var out [][]byte
	for _, l := range bytes.Split([]byte(s), []byte("\n")) {
		if l = bytes.TrimSpace(l); len(l) > 0 {
			out = append(out, l)
		}
	}
	return out
}

func dataOf(t *testing.T, ev []byte) string {
	t.Helper()
	var e struct {
		Type string          `json:"type"`
		Data json.RawMessage `json:"data"`
	}
	if err := json.Unmarshal(ev, &e); err != nil {
		t.Fatal(err)
	}
	return e.Type + " " + string(e.Data)
}

type golden struct {
	t  *testing.T
	l  [][]byte
	st State
}

func (g *golden) check(getWant, projWant string) {
	g.t.Helper()
	v, _ := Get(g.l, g.st)
	pj, _ := Projection(g.l)
	pb, _ := pj.MarshalJSON()
	if viewString(v) != getWant || string(pb) != projWant {
		g.t.Fatalf("get %s (want %s), projection %s (want %s)", viewString(v), getWant, pb, projWant)
	}
}

func TestGolden12_1(t *testing.T) {
	spec := lines(`
{"type":"agent/inbox/spliced","seq":0,"time":1000,"data":{"target":"next-turn","start":0,"inserted":[{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}}]}}
{"type":"turn/start","seq":1,"time":1001,"data":{"turn":1}}
{"type":"agent/inbox/spliced","seq":2,"time":1002,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}
{"type":"step/start","seq":3,"time":1003,"data":{"turn":1,"step":1}}
{"type":"user/message","seq":4,"time":1003,"data":{"id":"m1","role":"user","content":[{"type":"text","text":"hello"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"type":"request/header","seq":5,"time":1004,"data":{"header":{"config":{"provider":"p","model":"m"},"system":"<identity + persona, no plan:policy>","tools":[{"name":"exit_plan_mode"},{"name":"read"}]},"reason":"initial"}}
{"type":"assistant/message","seq":6,"time":1100,"data":{"turn":1,"step":1,"message":{"id":"a1","role":"assistant","content":[{"type":"text","text":"Hi."}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}
{"type":"step/end","seq":7,"time":1101,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":8,"time":1101,"data":{"turn":1,"reason":{"kind":"completed"}}}
{"type":"command/run","seq":9,"time":2000,"data":{"commandId":"cmd-1a2b3c4d-1","name":"plan","args":"","source":{"kind":"user"}}}
{"type":"plan/mode","seq":10,"time":2000,"data":{"active":true}}
{"type":"command/done","seq":12,"time":2001,"data":{"commandId":"cmd-1a2b3c4d-1","kind":"success","text":"Plan mode on. Use /plan off to leave."}}
{"type":"user/message","seq":18,"time":3002,"data":{"id":"n1","role":"user","content":[{"type":"text","text":"The user switched this session to plan mode."}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."}},"surfaceOp":"append"}`)
	g := &golden{t: t, l: append([][]byte{}, spec[:9]...)}
	g.check("{active:false}", pv(false, false))
	r, err := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-1", RawInput: ""}, Stamp{9, 2000})
	if err != nil || r.Text != TextPlanOn || len(r.Appended) != 3 {
		t.Fatal(r, err)
	}
	if !bytes.Equal(r.Appended[0], spec[9]) || !bytes.Equal(r.Appended[1], spec[10]) || dataOf(t, r.Appended[2]) != dataOf(t, spec[11]) {
		t.Fatalf("%s\n%s\n%s", r.Appended[0], r.Appended[1], r.Appended[2])
	}
	g.l = append(g.l, r.Appended...)
	g.st = r.State
	g.check("{active:true}", pv(true, false))
	// Next prompt: turn 2, the first pre-step returns the owed notice.
	g.l = append(g.l, lines(`
{"type":"agent/inbox/spliced","seq":12,"time":3000,"data":{"target":"next-turn","start":0,"inserted":[{"id":"m2","role":"user","content":[{"type":"text","text":"design the cache"}],"source":{"kind":"user"}}]}}
{"type":"turn/start","seq":13,"time":3000,"data":{"turn":2}}
{"type":"agent/inbox/spliced","seq":14,"time":3001,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}`)...)
	ps, err := PreStep(g.l, g.st, StepContext{}, Stamp{15, 3002}, "n1")
	if err != nil || len(ps.Appended) != 0 || len(ps.Notices) != 1 || !ps.Active {
		t.Fatal(ps, err)
	}
	if "user/message "+string(ps.Notices[0]) != dataOf(t, spec[12]) {
		t.Fatalf("%s\n%s", ps.Notices[0], dataOf(t, spec[12]))
	}
	// Variant: no earlier header → no notice.
	noHeader := append(append([][]byte{}, spec[:5]...), spec[6:9]...)
	r, _ = Command(noHeader, State{}, CommandInput{CommandID: "c", RawInput: ""}, Stamp{8, 2000})
	ps, _ = PreStep(append(noHeader, r.Appended...), r.State, StepContext{}, Stamp{11, 3000}, "n1")
	if r.State.Notice != nil || len(ps.Notices) != 0 {
		t.Fatal("no header: no notice")
	}
}

func TestGolden12_2(t *testing.T) {
	spec := lines(`
{"type":"request/header","seq":39,"time":4000,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"initial"}}
{"type":"turn/start","seq":40,"time":5000,"data":{"turn":3}}
{"type":"agent/inbox/spliced","seq":41,"time":5000,"data":{"target":"next-turn","start":0,"removedCount":1,"inserted":[]}}
{"type":"step/start","seq":42,"time":5001,"data":{"turn":3,"step":1}}
{"type":"user/message","seq":43,"time":5001,"data":{"id":"m5","role":"user","content":[{"type":"text","text":"look at the parser"}],"source":{"kind":"user"}},"surfaceOp":"append"}
{"type":"assistant/message","seq":44,"time":5200,"data":{"turn":3,"step":1,"message":{"id":"a5","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"read","arguments":"{\"path\":\"parser.go\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}
{"type":"tool/call","seq":45,"time":5201,"data":{"turn":3,"step":1,"callId":"c1","name":"read","arguments":"{\"path\":\"parser.go\"}"}}
{"type":"command/run","seq":46,"time":5250,"data":{"commandId":"cmd-1a2b3c4d-2","name":"plan","args":"","source":{"kind":"user"}}}
{"type":"command/done","seq":47,"time":5250,"data":{"commandId":"cmd-1a2b3c4d-2","kind":"success","text":"Entering plan mode (applies from the next step). Use /plan off to leave."}}
{"type":"tool/result","seq":48,"time":5300,"data":{"turn":3,"step":1,"message":{"id":"r1","role":"user","content":[{"type":"tool-result","toolCallId":"c1","content":[{"type":"text","text":"<file>"}],"isError":false}],"source":{"kind":"tool","callId":"c1"}}},"surfaceOp":"append","sourceEventSeqs":[45]}
{"type":"step/end","seq":49,"time":5301,"data":{"turn":3,"step":1}}
{"type":"plan/mode","seq":50,"time":5302,"data":{"active":true}}
{"type":"user/message","seq":52,"time":5302,"data":{"id":"n2","role":"user","content":[{"type":"text","text":"The user switched this session to plan mode."}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":"The user switched this session to plan mode."}},"surfaceOp":"append"}`)
	g := &golden{t: t, l: append([][]byte{}, spec[:7]...)}
	g.check("{active:false}", pv(false, false))
	r, _ := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-2"}, Stamp{46, 5250})
	if len(r.Appended) != 2 || !bytes.Equal(r.Appended[0], spec[7]) || !bytes.Equal(r.Appended[1], spec[8]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l, g.st = append(g.l, r.Appended[0]), r.State
	g.check("{active:false, pending:true}", pv(false, true))
	g.l = append(g.l, r.Appended[1])
	g.check("{active:false, pending:true}", pv(false, true))
	g.l = append(g.l, spec[9], spec[10])
	ps, _ := PreStep(g.l, g.st, StepContext{}, Stamp{50, 5302}, "n2")
	if len(ps.Appended) != 1 || !bytes.Equal(ps.Appended[0], spec[11]) || len(ps.Notices) != 1 || "user/message "+string(ps.Notices[0]) != dataOf(t, spec[12]) {
		t.Fatal(ps)
	}
	g.l, g.st = append(g.l, ps.Appended...), ps.State
	g.check("{active:true}", pv(true, false))
}

func TestGolden12_3(t *testing.T) {
	spec := lines(`
{"type":"plan/mode","seq":60,"time":6000,"data":{"active":true}}
{"type":"request/header","seq":61,"time":6001,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"change"}}
{"type":"turn/start","seq":62,"time":6002,"data":{"turn":4}}
{"type":"step/start","seq":70,"time":7000,"data":{"turn":4,"step":2}}
{"type":"assistant/message","seq":71,"time":7100,"data":{"turn":4,"step":2,"message":{"id":"a7","role":"assistant","content":[{"type":"tool-call","id":"c9","name":"exit_plan_mode","arguments":"{\"plan\":\"# Cache design\\n\\n1. Add an LRU.\"}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}
{"type":"tool/call","seq":72,"time":7101,"data":{"turn":4,"step":2,"callId":"c9","name":"exit_plan_mode","arguments":"{\"plan\":\"# Cache design\\n\\n1. Add an LRU.\"}"}}
{"type":"tool/result","seq":73,"time":9000,"data":{"turn":4,"step":2,"message":{"id":"r9","role":"user","content":[{"type":"tool-result","toolCallId":"c9","content":[{"type":"text","text":"Plan approved — plan mode exited; carry out the plan starting with your next step."}],"isError":false}],"source":{"kind":"tool","callId":"c9"}}},"surfaceOp":"append","sourceEventSeqs":[72]}
{"type":"step/end","seq":74,"time":9001,"data":{"turn":4,"step":2}}
{"type":"plan/mode","seq":75,"time":9002,"data":{"active":false}}`)
	g := &golden{t: t, l: append([][]byte{}, spec[:6]...)}
	plan := "# Cache design\n\n1. Add an LRU."
	pre, _ := ExitPlan(g.l, g.st, plan, nil)
	if !pre.NeedsReview {
		t.Fatal(pre)
	}
	r, _ := ExitPlan(g.l, g.st, plan, &ReviewAnswer{Answers: []AnswerItem{{ID: "plan-review", Selected: []string{"Approve"}}}})
	if !r.Approved || r.IsError || r.Text != TextApproved {
		t.Fatal(r)
	}
	g.l, g.st = append(g.l, spec[6]), r.State
	g.check("{active:true, pending:false}", pv(true, false))
	g.l = append(g.l, spec[7])
	ps, _ := PreStep(g.l, g.st, StepContext{}, Stamp{75, 9002}, "n")
	if len(ps.Appended) != 1 || !bytes.Equal(ps.Appended[0], spec[8]) || len(ps.Notices) != 0 || ps.Active {
		t.Fatal(ps)
	}
	g.l, g.st = append(g.l, ps.Appended...), ps.State
	g.check("{active:false}", pv(false, false))
}

func TestGolden12_4(t *testing.T) {
	spec := lines(`
{"type":"turn/start","seq":89,"time":10000,"data":{"turn":5}}
{"type":"tool/call","seq":90,"time":11000,"data":{"turn":5,"step":1,"callId":"c20","name":"read","arguments":"{}"}}
{"type":"command/run","seq":91,"time":11010,"data":{"commandId":"cmd-1a2b3c4d-3","name":"plan","args":"","source":{"kind":"user"}}}
{"type":"command/done","seq":92,"time":11010,"data":{"commandId":"cmd-1a2b3c4d-3","kind":"success","text":"Entering plan mode (applies from the next step). Use /plan off to leave."}}
{"type":"command/run","seq":93,"time":11020,"data":{"commandId":"cmd-1a2b3c4d-4","name":"plan","args":" off","source":{"kind":"user"}}}
{"type":"command/done","seq":94,"time":11020,"data":{"commandId":"cmd-1a2b3c4d-4","kind":"success","text":"Plan mode entry cancelled."}}
{"type":"tool/result","seq":95,"time":11100,"data":{"turn":5,"step":1,"message":{"id":"r20","role":"user","content":[{"type":"tool-result","toolCallId":"c20","content":[{"type":"text","text":"ok"}],"isError":false}],"source":{"kind":"tool","callId":"c20"}}},"surfaceOp":"append","sourceEventSeqs":[90]}
{"type":"step/end","seq":96,"time":11101,"data":{"turn":5,"step":1}}`)
	g := &golden{t: t, l: append([][]byte{}, spec[:2]...)}
	r, _ := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-3"}, Stamp{91, 11010})
	if !bytes.Equal(r.Appended[0], spec[2]) || !bytes.Equal(r.Appended[1], spec[3]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l, g.st = append(g.l, r.Appended...), r.State
	g.check("{active:false, pending:true}", pv(false, true))
	r, _ = Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-4", RawInput: " off"}, Stamp{93, 11020})
	if !bytes.Equal(r.Appended[0], spec[4]) || !bytes.Equal(r.Appended[1], spec[5]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l = append(g.l, r.Appended[0])
	g.st = r.State
	g.check("{active:false, pending:false}", pv(false, false))
	g.l = append(g.l, r.Appended[1], spec[6], spec[7])
	ps, _ := PreStep(g.l, g.st, StepContext{}, Stamp{97, 11102}, "n")
	if len(ps.Appended) != 0 || len(ps.Notices) != 0 {
		t.Fatal(ps)
	}
	g.st = ps.State
	g.check("{active:false}", pv(false, false))
}

// --- recorded session ---

func findRecorded(t *testing.T, name string) string {
	t.Helper()
	return filepath.Join(refdata.RecordedDir(t), name)
}

func TestRecordedWebPlanMode(t *testing.T) {
	f, err := os.Open(findRecorded(t, "web-plan-mode.session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<24)
	var events [][]byte
	header := true
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if header {
			header = false
			continue
		}
		typ, err := eventType(line)
		if err != nil {
			t.Fatal(err)
		}
		if packed, _ := sessionlog.IsPackedRow(line); packed {
			evs, err := sessionlog.ExpandPackedRow(line)
			if err != nil {
				t.Fatalf("%s: %v", typ, err)
			}
			events = append(events, evs...)
		} else {
			events = append(events, line)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	for i, ev := range events {
		var e struct{ Seq int }
		if json.Unmarshal(ev, &e) != nil || e.Seq != i {
			t.Fatalf("event %d has seq %d", i, e.Seq)
		}
	}
	if len(events) != 61 {
		t.Fatalf("%d events", len(events))
	}
	if err := ValidateLog(events); err != nil {
		t.Fatal(err)
	}
	active, err := Fold(events)
	if err != nil || !active {
		t.Fatal("recorded session must fold to active", err)
	}
	if open, _ := HasOpenTurn(events); open {
		t.Fatal("turn is closed")
	}
	if told, ok, _ := StateAtLastRequestHeader(events); !ok || !told {
		t.Fatal("the header was plan-shaped")
	}
	if v, _ := Projection(events); v != (ProjectionView{true, false}) {
		t.Fatal(v)
	}
	if v, _ := Projection(events[:4]); v != (ProjectionView{false, true}) {
		t.Fatal("after command/run the entry is pending", v)
	}
}

// The FSM keeps a Summary beside each session and feeds it appended events;
// folding one event at a time must agree with summarising every prefix.
func TestSummaryIncremental(t *testing.T) {
	l := (&logb{}).header().plan(true).openTurn().header().plan(false).closeTurn().plan(true).openTurn()
	var inc Summary
	for i, ev := range l.evs {
		if err := inc.Observe(ev); err != nil {
			t.Fatal(err)
		}
		whole, err := Summarize(l.evs[:i+1])
		if err != nil || whole != inc {
			t.Fatalf("after %d events: incremental %+v, whole %+v (%v)", i+1, inc, whole, err)
		}
	}
	if inc != (Summary{Fold: true, OpenTurn: true, Told: true, HasTold: true}) {
		t.Fatalf("%+v", inc)
	}
}

// Without the image blocks (the FSM's view) the decision is the same and the
// caller renders the steer content.
func TestCommandImageCount(t *testing.T) {
	img := `{"type":"image","attachment":{"attachmentId":"att-1","mediaType":"image/png"}}`
	var s Summary
	s.OpenTurn = true
	r := s.Command(State{}, CommandInput{CommandID: "c", RawInput: " look", ImageCount: 1}, Stamp{3, 9})
	if !r.Steers || r.Steer != nil || *r.SteerText != "look" {
		t.Fatal(r)
	}
	if got := string(SteerContent([][]byte{[]byte(img)}, r.SteerText)); got != "["+img+`,{"type":"text","text":"look"}]` {
		t.Fatal(got)
	}
	if r := s.Command(State{}, CommandInput{CommandID: "c", RawInput: "off", ImageCount: 2}, Stamp{3, 9}); r.Kind != KindError || r.Text != TextOffWithImages {
		t.Fatal(r)
	}
}

// FuzzSummary feeds arbitrary stored-looking events to the folds: no panic,
// the incremental summary equals the whole-log one, and every rule stays
// within its contract (at most one plan/mode per call, at the stamped seq).
func FuzzSummary(f *testing.F) {
	f.Add([]byte(`{"type":"plan/mode","seq":0,"time":1,"data":{"active":true}}`), []byte(`{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}`), true)
	f.Add([]byte(`{"type":"request/header","seq":0,"time":1,"data":{}}`), []byte(`{"type":"command/run","seq":1,"time":1,"data":{"commandId":"c","name":"plan","args":" off"}}`), false)
	f.Add([]byte(`{"seq":0,"type":"plan\u002fmode","time":1,"data":{"active":false}}`), []byte(`{"type":"turn/end","seq":1,"time":1,"data":{}}`), true)
	f.Fuzz(func(t *testing.T, a, b []byte, want bool) {
		evs := [][]byte{a, b, a}
		whole, werr := Summarize(evs)
		var inc Summary
		var ierr error
		for _, ev := range evs {
			if ierr = inc.Observe(ev); ierr != nil {
				break
			}
		}
		if (werr == nil) != (ierr == nil) || (werr == nil && whole != inc) {
			t.Fatalf("whole %+v (%v), incremental %+v (%v)", whole, werr, inc, ierr)
		}
		_, _ = Projection(evs)
		if werr != nil {
			return
		}
		at := Stamp{Seq: 3, Time: 9}
		sr := whole.Set(State{}, want, at, SetOptions{})
		pr := whole.PreStep(sr.State, StepContext{}, at, "n")
		for _, app := range [][][]byte{sr.Appended, pr.Appended} {
			if len(app) > 1 || (len(app) == 1 && !bytes.Contains(app[0], []byte(`"seq":3,`))) {
				t.Fatalf("appended %q", app)
			}
		}
	})
}
