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

// sequence is golden sequence n by seq (testdata/planmode, shared with
// cmd/node's TestPlanMode_Golden12_*).
func sequence(t *testing.T, n int) map[int64][]byte {
	t.Helper()
	s := map[int64][]byte{}
	for _, l := range lines(refdata.PlanModeSequence(t, n)) {
		var e struct{ Seq int64 }
		if err := json.Unmarshal(l, &e); err != nil {
			t.Fatal(err)
		}
		s[e.Seq] = l
	}
	return s
}

// pick is the lines at seqs, in that order.
func pick(s map[int64][]byte, seqs ...int64) [][]byte {
	var out [][]byte
	for _, q := range seqs {
		out = append(out, s[q])
	}
	return out
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
	s := sequence(t, 1)
	g := &golden{t: t, l: pick(s, 0, 1, 2, 3, 4, 5, 6, 7, 8)}
	g.check("{active:false}", pv(false, false))
	r, err := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-1", RawInput: ""}, Stamp{9, 2000})
	if err != nil || r.Text != TextPlanOn || len(r.Appended) != 3 {
		t.Fatal(r, err)
	}
	if !bytes.Equal(r.Appended[0], s[9]) || !bytes.Equal(r.Appended[1], s[10]) || dataOf(t, r.Appended[2]) != dataOf(t, s[12]) {
		t.Fatalf("%s\n%s\n%s", r.Appended[0], r.Appended[1], r.Appended[2])
	}
	g.l = append(g.l, r.Appended...)
	g.st = r.State
	g.check("{active:true}", pv(true, false))
	// Next prompt: turn 2 (without the reference's inbox lines 11 and 15),
	// the first pre-step returns the owed notice.
	g.l = append(g.l, pick(s, 13, 14, 16)...)
	ps, err := PreStep(g.l, g.st, StepContext{}, Stamp{17, 3002}, "n1")
	if err != nil || len(ps.Appended) != 0 || len(ps.Notices) != 1 || !ps.Active {
		t.Fatal(ps, err)
	}
	if "user/message "+string(ps.Notices[0]) != dataOf(t, s[18]) {
		t.Fatalf("%s\n%s", ps.Notices[0], dataOf(t, s[18]))
	}
	// Variant: no earlier header → no notice.
	noHeader := pick(s, 0, 1, 2, 3, 4, 6, 7, 8)
	r, _ = Command(noHeader, State{}, CommandInput{CommandID: "c", RawInput: ""}, Stamp{8, 2000})
	ps, _ = PreStep(append(noHeader, r.Appended...), r.State, StepContext{}, Stamp{11, 3000}, "n1")
	if r.State.Notice != nil || len(ps.Notices) != 0 {
		t.Fatal("no header: no notice")
	}
}

func TestGolden12_2(t *testing.T) {
	s := sequence(t, 2)
	g := &golden{t: t, l: pick(s, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41, 42, 43, 44, 45)}
	g.check("{active:false}", pv(false, false))
	r, _ := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-2"}, Stamp{46, 5250})
	if len(r.Appended) != 2 || !bytes.Equal(r.Appended[0], s[46]) || !bytes.Equal(r.Appended[1], s[47]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l, g.st = append(g.l, r.Appended[0]), r.State
	g.check("{active:false, pending:true}", pv(false, true))
	g.l = append(g.l, r.Appended[1])
	g.check("{active:false, pending:true}", pv(false, true))
	g.l = append(g.l, pick(s, 48, 49)...)
	ps, _ := PreStep(g.l, g.st, StepContext{}, Stamp{50, 5302}, "n2")
	if len(ps.Appended) != 1 || !bytes.Equal(ps.Appended[0], s[50]) || len(ps.Notices) != 1 || "user/message "+string(ps.Notices[0]) != dataOf(t, s[52]) {
		t.Fatal(ps)
	}
	g.l, g.st = append(g.l, ps.Appended...), ps.State
	g.check("{active:true}", pv(true, false))
}

func TestGolden12_3(t *testing.T) {
	s := sequence(t, 3)
	g := &golden{t: t, l: pick(s, 60, 61, 62, 63, 64, 65, 66, 70, 71, 72)}
	plan := "# Cache design\n\n1. Add an LRU."
	pre, _ := ExitPlan(g.l, g.st, plan, nil)
	if !pre.NeedsReview {
		t.Fatal(pre)
	}
	r, _ := ExitPlan(g.l, g.st, plan, &ReviewAnswer{Answers: []AnswerItem{{ID: "plan-review", Selected: []string{"Approve"}}}})
	if !r.Approved || r.IsError || r.Text != TextApproved {
		t.Fatal(r)
	}
	g.l, g.st = append(g.l, s[73]), r.State
	g.check("{active:true, pending:false}", pv(true, false))
	g.l = append(g.l, s[74])
	ps, _ := PreStep(g.l, g.st, StepContext{}, Stamp{75, 9002}, "n")
	if len(ps.Appended) != 1 || !bytes.Equal(ps.Appended[0], s[75]) || len(ps.Notices) != 0 || ps.Active {
		t.Fatal(ps)
	}
	g.l, g.st = append(g.l, ps.Appended...), ps.State
	g.check("{active:false}", pv(false, false))
}

func TestGolden12_4(t *testing.T) {
	s := sequence(t, 4)
	g := &golden{t: t, l: pick(s, 88, 89, 90)}
	r, _ := Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-3"}, Stamp{91, 11010})
	if !bytes.Equal(r.Appended[0], s[91]) || !bytes.Equal(r.Appended[1], s[92]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l, g.st = append(g.l, r.Appended...), r.State
	g.check("{active:false, pending:true}", pv(false, true))
	r, _ = Command(g.l, g.st, CommandInput{CommandID: "cmd-1a2b3c4d-4", RawInput: " off"}, Stamp{93, 11020})
	if !bytes.Equal(r.Appended[0], s[93]) || !bytes.Equal(r.Appended[1], s[94]) {
		t.Fatalf("%s\n%s", r.Appended[0], r.Appended[1])
	}
	g.l = append(g.l, r.Appended[0])
	g.st = r.State
	g.check("{active:false, pending:false}", pv(false, false))
	g.l = append(g.l, r.Appended[1], s[95], s[96])
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
