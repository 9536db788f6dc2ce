package planmode

import (
	"encoding/json"
	"fmt"
	"testing"
)

// logb is a test log: events numbered by index.
type logb struct{ evs [][]byte }

func (l *logb) add(typ, data string) *logb {
	l.evs = append(l.evs, []byte(fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s}`, typ, len(l.evs), 1000+len(l.evs), data)))
	return l
}
func (l *logb) plan(active bool) *logb {
	return l.add("plan/mode", fmt.Sprintf(`{"active":%v}`, active))
}
func (l *logb) openTurn() *logb { return l.add("turn/start", `{"turn":1}`) }
func (l *logb) closeTurn() *logb {
	return l.add("turn/end", `{"turn":1,"reason":{"kind":"completed"}}`)
}
func (l *logb) header() *logb {
	return l.add("request/header", `{"header":{"config":{"provider":"test","model":"test-model"}},"reason":"initial"}`)
}
func (l *logb) appendRaw(evs ...[]byte) *logb { l.evs = append(l.evs, evs...); return l }
func (l *logb) at() Stamp                     { return Stamp{Seq: int64(len(l.evs)), Time: 5000} }

// bench drives the rules the way the server's FSM would: it applies every
// returned event and state, and collects returned notices.
type bench struct {
	t       *testing.T
	l       logb
	st      State
	notices []string
	n       int
}

func (b *bench) set(want bool) Outcome {
	b.t.Helper()
	r, err := Set(b.l.evs, b.st, want, b.l.at(), SetOptions{})
	if err != nil {
		b.t.Fatal(err)
	}
	b.l.appendRaw(r.Appended...)
	b.st = r.State
	return r.Outcome
}

// boundary is an accepted pre-step; stepStart also appends step/start.
func (b *bench) boundary(stepStart bool) PreStepResult {
	b.t.Helper()
	b.n++
	r, err := PreStep(b.l.evs, b.st, StepContext{}, b.l.at(), fmt.Sprintf("n%d", b.n))
	if err != nil {
		b.t.Fatal(err)
	}
	b.l.appendRaw(r.Appended...)
	b.st = r.State
	if stepStart {
		b.l.add("step/start", `{"turn":1,"step":1}`)
	}
	for _, n := range r.Notices {
		b.l.add("user/message", string(n))
		b.notices = append(b.notices, noticeText(b.t, n))
	}
	return r
}

func (b *bench) command(raw string, images ...string) CommandResult {
	b.t.Helper()
	b.n++
	var imgs [][]byte
	for _, i := range images {
		imgs = append(imgs, []byte(i))
	}
	r, err := Command(b.l.evs, b.st, CommandInput{CommandID: fmt.Sprintf("cmd-%d", b.n), RawInput: raw, Images: imgs}, b.l.at())
	if err != nil {
		b.t.Fatal(err)
	}
	b.l.appendRaw(r.Appended...)
	b.st = r.State
	return r
}

func (b *bench) fold() bool {
	b.t.Helper()
	v, err := Fold(b.l.evs)
	if err != nil {
		b.t.Fatal(err)
	}
	return v
}

func (b *bench) get() string {
	b.t.Helper()
	v, err := Get(b.l.evs, b.st)
	if err != nil {
		b.t.Fatal(err)
	}
	return viewString(v)
}

func viewString(v View) string {
	if v.Pending == nil {
		return fmt.Sprintf("{active:%v}", v.Active)
	}
	return fmt.Sprintf("{active:%v, pending:%v}", v.Active, *v.Pending)
}

func (b *bench) planModes() int {
	n := 0
	for _, ev := range b.l.evs {
		if t, _ := eventType(ev); t == TypePlanMode {
			n++
		}
	}
	return n
}

func noticeText(t *testing.T, msg []byte) string {
	t.Helper()
	var m struct {
		Source  struct{ Kind string }   `json:"source"`
		Content []struct{ Text string } `json:"content"`
	}
	if err := json.Unmarshal(msg, &m); err != nil || m.Source.Kind != "plugin" || len(m.Content) != 1 {
		t.Fatalf("bad notice %s: %v", msg, err)
	}
	return m.Content[0].Text
}

func eqStrings(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}
