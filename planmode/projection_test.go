package planmode

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

func TestValidateEvent(t *testing.T) {
	ok := []string{
		`{"type":"plan/mode","seq":0,"time":1,"data":{"active":true}}`,
		`{"type":"plan/mode","seq":0,"time":1,"data":{"active":false}}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"x/unrelated","seq":0,"time":1,"data":{"active":42}}`,
	}
	for _, e := range ok {
		if err := ValidateEvent([]byte(e)); err != nil {
			t.Errorf("%s: %v", e, err)
		}
	}
	for data, text := range map[string]string{
		`{"active":42}`:     "plan/mode carries invalid active state 42; expected a boolean",
		`{"active":"plan"}`: `plan/mode carries invalid active state "plan"; expected a boolean`,
		`{}`:                "plan/mode carries invalid active state undefined; expected a boolean",
		`{"Active":true}`:   "plan/mode carries invalid active state undefined; expected a boolean",
		`{"active":null}`:   "plan/mode carries invalid active state null; expected a boolean",
	} {
		err := ValidateEvent([]byte(`{"type":"plan/mode","seq":0,"time":1,"data":` + data + `}`))
		if err == nil || err.Error() != text || !errors.Is(err, sessionstore.ErrInvalidEvent) {
			t.Errorf("%s: %v", data, err)
		}
	}
}

func TestValidateLog(t *testing.T) {
	var bad logb
	bad.openTurn().add("plan/mode", `{"active":"plan"}`).closeTurn()
	if err := ValidateLog(bad.evs); err == nil || !strings.Contains(err.Error(), "expected a boolean") {
		t.Fatal(err)
	}
	if _, err := FoldPlanMode(bad.evs, 3); err == nil || !strings.Contains(err.Error(), "expected a boolean") {
		t.Fatal("fold of an invalid stored plan/mode must fail", err)
	}
	var enclosed, standalone logb
	enclosed.openTurn().plan(true).closeTurn()
	standalone.plan(true)
	if ValidateLog(enclosed.evs) != nil || ValidateLog(standalone.evs) != nil {
		t.Fatal("valid logs")
	}
}

type projBench struct {
	t *testing.T
	l logb
	n int
}

func (p *projBench) run(args *string) string {
	p.n++
	data := fmt.Sprintf(`{"commandId":"c%d","name":"plan"`, p.n)
	if args != nil {
		b, _ := json.Marshal(*args)
		data += `,"args":` + string(b)
	}
	p.l.add("command/run", data+`,"source":{"kind":"user"}}`)
	return p.value()
}
func (p *projBench) settle(kind string) string {
	p.l.add("command/done", fmt.Sprintf(`{"commandId":"c%d","kind":%q}`, p.n, kind))
	return p.value()
}
func (p *projBench) commit(active bool) string {
	p.l.openTurn().plan(active).closeTurn()
	return p.value()
}
func (p *projBench) value() string {
	v, err := Projection(p.l.evs)
	if err != nil {
		p.t.Fatal(err)
	}
	b, _ := v.MarshalJSON()
	return string(b)
}

func pv(a, p bool) string { return fmt.Sprintf(`{"active":%v,"pending":%v}`, a, p) }

func TestProjectionSpec(t *testing.T) {
	// 1
	p := &projBench{t: t}
	if v := p.value(); v != pv(false, false) {
		t.Fatal(v)
	}
	// 2
	p = &projBench{t: t}
	if p.run(strp("")) != pv(false, true) || p.settle("success") != pv(false, true) || p.commit(true) != pv(true, false) {
		t.Fatal(p.value())
	}
	// 3
	p = &projBench{t: t}
	p.commit(true)
	if p.run(strp("off")) != pv(true, true) || p.settle("error") != pv(true, false) {
		t.Fatal(p.value())
	}
	// 4
	p = &projBench{t: t}
	p.commit(true)
	p.l.add("command/run", `{"commandId":"x","name":"compact","args":"","source":{"kind":"user"}}`)
	if p.value() != pv(true, false) || p.run(nil) != pv(true, false) || p.run(strp(" off")) != pv(true, true) ||
		p.commit(false) != pv(false, false) || p.run(strp("off")) != pv(false, false) {
		t.Fatal(p.value())
	}
	// 5
	p = &projBench{t: t}
	if p.run(strp(" sketch the refactor first")) != pv(false, true) {
		t.Fatal(p.value())
	}
	// 8: cold replay of copied events
	a := &projBench{t: t}
	a.l.add("user/message", `{"id":"m"}`)
	a.run(strp(""))
	var copied [][]byte
	for _, ev := range a.l.evs {
		if typ, _ := eventType(ev); isProjected(typ) {
			copied = append(copied, ev)
		}
	}
	if v, _ := Projection(copied); v != (ProjectionView{false, true}) {
		t.Fatal(v)
	}
	// overlapped runs: a done for the earlier run is ignored
	p = &projBench{t: t}
	p.run(strp(""))
	p.run(strp("off"))
	p.l.add("command/done", `{"commandId":"c1","kind":"success"}`)
	if p.value() != pv(false, false) {
		t.Fatal(p.value())
	}
}

func TestProjectionUnit(t *testing.T) {
	if ProjectionKey != "plan" || ProjectionStateVersion != 2 {
		t.Fatal("key/version")
	}
	// 3: empty log → init view; checkpoint of init.
	s := ProjectionInit()
	if b, _ := json.Marshal(s); string(b) != `{"active":false,"wanted":null,"running":null}` {
		t.Fatal(string(b))
	}
	// 4/6: an unrelated event is "the same state" (no change).
	var l logb
	l.add("test/mark", `{"m":1}`).add("command/run", `{"commandId":"<c&1>","name":"plan","args":"","source":{"kind":"user"}}`)
	s2, changed, err := ProjectionApply(s, l.evs[0])
	if changed || err != nil || s2 != s {
		t.Fatal("unrelated event must not change the state")
	}
	s3, changed, _ := ProjectionApply(s2, l.evs[1])
	if !changed || s3.View() != (ProjectionView{false, true}) {
		t.Fatal(s3)
	}
	// 13/14: checkpoint rows are detached JSON; restore + fold suffix == full fold (17).
	row, _ := s3.MarshalJSON()
	if string(row) != `{"active":false,"wanted":null,"running":{"commandId":"<c&1>","wanted":true}}` {
		t.Fatal(string(row))
	}
	l.plan(true).add("command/done", `{"commandId":"<c&1>","kind":"success"}`)
	full, _ := FoldProjection(ProjectionInit(), l.evs)
	var restored ProjectionState
	if err := json.Unmarshal(row, &restored); err != nil {
		t.Fatal(err)
	}
	tail, _ := FoldProjection(restored, l.evs[2:])
	if fb, _ := full.MarshalJSON(); string(fb) != mustJSON(tail) || full.View() != (ProjectionView{true, false}) {
		t.Fatal(string(fb), mustJSON(tail))
	}
	if s3.Running.CommandID != "<c&1>" {
		t.Fatal("apply must not mutate earlier states")
	}
}

func mustJSON(v ProjectionState) string { b, _ := v.MarshalJSON(); return string(b) }
