package sessionlog

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

// storedPrefix12_3 is the committed prefix of the docs/contract.md#log-crash stored file: the
// header line and the torn final fragment are not events.
func storedPrefix12_3(t *testing.T) [][]byte {
	t.Helper()
	raw, err := os.ReadFile("testdata/stored_12_3.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	all := bytes.Split(raw, []byte("\n"))
	if len(all) != 8 || bytes.HasSuffix(raw, []byte("\n")) {
		t.Fatalf("fixture: got %d lines, want header + 6 events + a torn fragment", len(all))
	}
	return all[1:7]
}

func mustClosers(t *testing.T, log [][]byte) []string {
	t.Helper()
	cl, err := Closers(log)
	if err != nil {
		t.Fatalf("Closers: got %v, want nil", err)
	}
	open, err := OpenTurn(log)
	if err != nil || open != (len(cl) > 0) {
		t.Fatalf("OpenTurn: got %v, %v; Closers returned %d", open, err, len(cl))
	}
	var out []string
	for _, c := range cl {
		out = append(out, string(c))
	}
	return out
}

func TestClosersGolden12_3(t *testing.T) {
	prefix := storedPrefix12_3(t)
	norm, err := Normalize("crash-1", prefix, "")
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	got := mustClosers(t, norm)
	want, err := os.ReadFile("testdata/golden_12_3_closers.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	if g := strings.Join(got, "\n") + "\n"; g != string(want) {
		t.Fatalf("closers differ from the golden file:\n got  %s\n want %s", g, want)
	}
	// Deterministic: the same input gives the same bytes.
	if again := mustClosers(t, norm); strings.Join(again, "\n") != strings.Join(got, "\n") {
		t.Fatal("closers are not deterministic")
	}
	// The balanced log passes the full reconstruction check and is closed.
	balanced := append(append([][]byte(nil), norm...), lines(got...)...)
	if err := ValidateSession("crash-1", balanced); err != nil {
		t.Fatalf("ValidateSession: got %v, want nil", err)
	}
	if more := mustClosers(t, balanced); more != nil {
		t.Fatalf("a repaired log still has closers: %q", more)
	}
}

const (
	closerNotStarted = `"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}`
	closerUnknown    = `"content":[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[`
)

// toolCloser is the docs/events.md#crash-repair tool/result closer for one call.
func toolCloser(seq, time, turn, step, callID string, callSeq string) string {
	head := `{"type":"tool/result","seq":` + seq + `,"time":` + time + `,"data":{"turn":` + turn + `,"step":` + step +
		`,"message":{"id":"interrupted-tool-result-` + callID + `-` + seq + `","role":"user","source":{"kind":"tool","callId":"` + callID +
		`"},"content":[{"type":"tool-result","toolCallId":"` + callID + `","isError":true,`
	if callSeq == "" {
		return head + closerNotStarted
	}
	return head + closerUnknown + callSeq + `]}`
}

func TestClosersVariants(t *testing.T) {
	ts := `{"type":"turn/start","seq":0,"time":10,"data":{"turn":1}}`
	ss := `{"type":"step/start","seq":1,"time":11,"data":{"turn":1,"step":1}}`
	asst := func(seq string, ids ...string) string {
		var blocks []string
		for _, id := range ids {
			blocks = append(blocks, `{"type":"tool-call","id":"`+id+`","name":"bash","arguments":"{}"}`)
		}
		return `{"type":"assistant/message","seq":` + seq + `,"time":12,"data":{"turn":1,"step":1,"message":{"id":"m` + seq +
			`","role":"assistant","content":[` + strings.Join(blocks, ",") + `],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`
	}
	call := func(seq, id string) string {
		return `{"type":"tool/call","seq":` + seq + `,"time":13,"data":{"turn":1,"step":1,"callId":"` + id + `","name":"bash","arguments":"{}"}}`
	}
	result := func(seq, id string) string {
		return `{"type":"tool/result","seq":` + seq + `,"time":14,"data":{"turn":1,"step":1,"message":{"id":"r` + seq + `","role":"user","content":[{"type":"tool-result","toolCallId":"` + id +
			`","content":[]}],"source":{"kind":"tool","callId":"` + id + `"}}},"surfaceOp":"append"}`
	}
	stepEnd := func(seq, time string) string {
		return `{"type":"step/end","seq":` + seq + `,"time":` + time + `,"data":{"turn":1,"step":1}}`
	}
	turnEnd := func(seq, time string) string {
		return `{"type":"turn/end","seq":` + seq + `,"time":` + time + `,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`
	}
	tests := []struct {
		name string
		log  []string
		want []string
	}{
		{"empty", nil, nil},
		{"balanced", oneTurnLog(), nil},
		{"turn/start only", []string{ts}, []string{turnEnd("1", "10")}},
		{"open step", []string{ts, ss}, []string{stepEnd("2", "11"), turnEnd("3", "11")}},
		{"no tool/call: both not started", []string{ts, ss, asst("2", "call_a", "call_b")}, []string{
			toolCloser("3", "12", "1", "1", "call_a", ""), toolCloser("4", "12", "1", "1", "call_b", ""), stepEnd("5", "12"), turnEnd("6", "12")}},
		{"recorded call", []string{ts, ss, asst("2", "call_a", "call_b"), call("3", "call_a")}, []string{
			toolCloser("4", "13", "1", "1", "call_a", "3"), toolCloser("5", "13", "1", "1", "call_b", ""), stepEnd("6", "13"), turnEnd("7", "13")}},
		{"result removes the call", []string{ts, ss, asst("2", "call_a", "call_b"), call("3", "call_a"), result("4", "call_a")}, []string{
			toolCloser("5", "14", "1", "1", "call_b", ""), stepEnd("6", "14"), turnEnd("7", "14")}},
		{"re-registered call keeps its place and loses its callSeq", []string{ts, ss, asst("2", "call_a", "call_b"), call("3", "call_a"), asst("4", "call_a")}, []string{
			toolCloser("5", "12", "1", "1", "call_a", ""), toolCloser("6", "12", "1", "1", "call_b", ""), stepEnd("7", "12"), turnEnd("8", "12")}},
		{"tool/call without a block is ignored", []string{ts, ss, call("2", "call_z")}, []string{stepEnd("3", "13"), turnEnd("4", "13")}},
		{"step/end clears pending calls", []string{ts, ss, asst("2", "call_a"), stepEnd("3", "15")}, []string{turnEnd("4", "15")}},
		{"plugin events do not close", []string{ts, `{"type":"plan/mode","seq":1,"time":20,"data":{"active":true}}`}, []string{turnEnd("2", "20")}},
		{"closed earlier turn", append(oneTurnLog(), `{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}`, `{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}`), []string{
			`{"type":"step/end","seq":8,"time":8,"data":{"turn":2,"step":1}}`, `{"type":"turn/end","seq":9,"time":8,"data":{"turn":2,"reason":{"kind":"interrupted"}}}`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := mustClosers(t, lines(tt.log...))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d closers %q, want %d", len(got), got, len(tt.want))
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Errorf("closer %d:\n got  %s\n want %s", i, got[i], tt.want[i])
				}
			}
		})
	}
}

func TestClosersContract(t *testing.T) {
	t.Run("C3 interrupted turn", func(t *testing.T) {
		log := lines(append(oneTurnLog(),
			`{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}`,
			`{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}`)...)
		got := mustClosers(t, log)
		if len(got) != 2 || field(t, []byte(got[1]), "data") != `{"turn":2,"reason":{"kind":"interrupted"}}` {
			t.Fatalf("got %q", got)
		}
		if err := ValidateSession("c3", append(log, lines(got...)...)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("C4 unstarted tool request", func(t *testing.T) {
		log := lines(append(oneTurnLog(),
			`{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}`,
			`{"type":"step/start","seq":7,"time":8,"data":{"turn":2,"step":1}}`,
			`{"type":"assistant/message","seq":8,"time":9,"data":{"turn":2,"step":1,"message":{"id":"a2","role":"assistant","content":[{"type":"tool-call","id":"call-x","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`)...)
		got := mustClosers(t, log)
		if want := toolCloser("9", "9", "2", "1", "call-x", ""); len(got) != 3 || got[0] != want {
			t.Fatalf("got %q, want first %s", got, want)
		}
		if err := ValidateSession("c4", append(log, lines(got...)...)); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("C5 recorded call without result", func(t *testing.T) {
		log := lines(
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
			`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
			`{"type":"assistant/message","seq":2,"time":3,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"call-risk","name":"write","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
			`{"type":"tool/call","seq":3,"time":4,"data":{"turn":1,"step":1,"callId":"call-risk","name":"write","arguments":"{}"}}`)
		got := mustClosers(t, log)
		if want := toolCloser("4", "4", "1", "1", "call-risk", "3"); len(got) != 3 || got[0] != want {
			t.Fatalf("got %q, want first %s", got, want)
		}
		if err := ValidateSession("c5", append(log, lines(got...)...)); err != nil {
			t.Fatal(err)
		}
	})
}

func TestClosersJSStringify(t *testing.T) {
	// A call id with every character JSON.stringify treats specially; the
	// input spells some of them as escapes, the output is JS's canonical form.
	in := `{"type":"assistant/message","seq":2,"time":5,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"<>&\u2028` +
		"\u2029" + `\t\"\\\u0001é\ud83d\ude00","name":"x","arguments":"{}"}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`
	log := lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`, in)
	got := mustClosers(t, log)
	want := toolCloser("3", "5", "1", "1", specialCharsJS, "")
	if len(got) != 3 || got[0] != want {
		t.Fatalf("got  %s\nwant %s", got[0], want)
	}
}

func TestClosersJSSemantics(t *testing.T) {
	// Values are copied as the reference copies them: a turn/start without a
	// turn leaves the turn out of the closers, a null turn closes nothing.
	got := mustClosers(t, lines(`{"type":"turn/start","seq":0,"time":1,"data":{}}`))
	if len(got) != 1 || got[0] != `{"type":"turn/end","seq":1,"time":1,"data":{"reason":{"kind":"interrupted"}}}` {
		t.Fatalf("got %q", got)
	}
	if got := mustClosers(t, lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":null}}`)); got != nil {
		t.Fatalf("null turn: got %q, want nil", got)
	}
	if _, err := Closers(lines(`{"type":"turn/start","seq":0,"time":1,"data":null}`)); err == nil ||
		err.Error() != "Cannot read properties of null (reading 'turn')" {
		t.Fatalf("null data: got %v", err)
	}
	if got := mustClosers(t, lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1.5e0}}`)); len(got) != 1 ||
		got[0] != `{"type":"turn/end","seq":1,"time":1,"data":{"turn":1.5,"reason":{"kind":"interrupted"}}}` {
		t.Fatalf("got %q", got)
	}
}
