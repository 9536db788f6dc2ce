package sessionlog

import (
	"bytes"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// sameSlice reports whether two byte slices are the very same memory.
func sameSlice(a, b []byte) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}

// field returns JSON.stringify of one top-level member of an event.
func field(t *testing.T, ev []byte, key string) string {
	t.Helper()
	v, err := parseValue(ev)
	if err != nil {
		t.Fatalf("output %s is not JSON: %v", ev, err)
	}
	return jsonStringify(v.get(key))
}

func mustNormalize(t *testing.T, id string, log [][]byte) [][]byte {
	t.Helper()
	out, err := Normalize(id, log, "")
	if err != nil {
		t.Fatalf("Normalize: got %v, want nil", err)
	}
	if len(out) != len(log) {
		t.Fatalf("got %d events, want %d", len(out), len(log))
	}
	return out
}

func TestNormalizeK9PreIdentityMessages(t *testing.T) {
	log := lines(
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"legacy prompt"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"provenance":{"provider":"mock","model":"mock"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":4,"time":5,"data":{"turn":1,"step":1,"callId":"call-1","name":"read","arguments":"{}"}}`,
		`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"full output"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":6,"time":7,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"pruned"}],"isError":false},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}`,
		`{"type":"step/end","seq":7,"time":8,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":8,"time":9,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	)
	out := mustNormalize(t, "legacy", log)
	want := map[int]string{
		1: `{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"legacy prompt"}],"source":{"kind":"user"},"id":"legacy-message:legacy:1","role":"user"},"surfaceOp":"append"}`,
		3: `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:legacy:3","role":"assistant","content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"source":{"provider":"mock","model":"mock","kind":"model"}}},"surfaceOp":"append"}`,
		5: `{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:legacy:5","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"full output"}],"isError":false}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[4],"surfaceOp":"append"}`,
		// The replacement inherits the id of the result it replaces.
		6: `{"type":"tool/result","seq":6,"time":7,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:legacy:5","role":"user","content":[{"type":"tool-result","toolCallId":"call-1","content":[{"type":"text","text":"pruned"}],"isError":false}],"source":{"kind":"tool","callId":"call-1"}}},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}`,
	}
	for i := range log {
		if w, ok := want[i]; ok {
			if string(out[i]) != w {
				t.Errorf("event %d:\n got  %s\n want %s", i, out[i], w)
			}
		} else if !sameSlice(out[i], log[i]) {
			t.Errorf("event %d: got a new slice %s, want the input slice", i, out[i])
		}
	}
	if err := ValidateSession("legacy", out); err != nil {
		t.Fatalf("ValidateSession: got %v, want nil", err)
	}
	if cl, err := Closers(out); err != nil || cl != nil {
		t.Fatalf("Closers: got %q, %v; want nil", cl, err)
	}
	// Normalising is idempotent: the upgraded events are current shapes.
	again := mustNormalize(t, "legacy", out)
	for i := range out {
		if !sameSlice(again[i], out[i]) {
			t.Errorf("second pass changed event %d: %s", i, again[i])
		}
	}
}

func TestNormalizeK10PreReactLoop(t *testing.T) {
	log := lines(
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"content":[{"type":"text","text":"old prompt"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"steering/message","seq":3,"time":4,"data":{"turn":1,"message":{"id":"steer-1","role":"user","content":[{"type":"text","text":"old steering"}],"source":{"kind":"user"}}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":5,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"turn/start","seq":6,"time":7,"data":{"turn":2,"trigger":{"kind":"message"}}}`,
		`{"type":"turn/end","seq":7,"time":8,"data":{"turn":2,"reason":{"kind":"error","step":1,"failure":{"message":"old provider failure","code":"SERVER"}}}}`,
		`{"type":"turn/start","seq":8,"time":9,"data":{"turn":3,"trigger":{"kind":"goal"}}}`,
		`{"type":"turn/end","seq":9,"time":10,"data":{"turn":3,"reason":{"kind":"aborted"}}}`,
		`{"type":"turn/start","seq":10,"time":11,"data":{"turn":4,"trigger":{"kind":"message"}}}`,
		`{"type":"turn/end","seq":11,"time":12,"data":{"turn":4,"reason":{"kind":"disposed"}}}`,
		`{"type":"turn/start","seq":12,"time":13,"data":{"turn":5,"trigger":{"kind":"message"}}}`,
		`{"type":"turn/end","seq":13,"time":14,"data":{"turn":5,"reason":{"kind":"error","step":0,"message":"old thrown value"}}}`,
		`{"type":"turn/start","seq":14,"time":15,"data":{"turn":6,"trigger":{"kind":"message"}}}`,
		`{"type":"turn/end","seq":15,"time":16,"data":{"turn":6,"reason":{"kind":"error","step":2,"failure":{"message":"rate limited","code":"RATE_LIMIT","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"}}}}`,
		`{"type":"turn/start","seq":16,"time":17,"data":{"turn":7,"trigger":{"kind":"message"}}}`,
		`{"type":"turn/end","seq":17,"time":18,"data":{"turn":7,"reason":{"kind":"error","step":1,"message":"old coded error","code":"CODED"}}}`,
	)
	out := mustNormalize(t, "old", log)
	var starts, ends []string
	for _, ev := range out {
		switch field(t, ev, "type") {
		case `"turn/start"`:
			starts = append(starts, field(t, ev, "data"))
		case `"turn/end"`:
			ends = append(ends, field(t, ev, "data"))
		case `"steering/message"`:
			t.Errorf("a steering/message remains: %s", ev)
		}
	}
	for i, s := range starts {
		if want := `{"turn":` + itoa(i+1) + `}`; s != want {
			t.Errorf("turn/start %d: got %s, want %s", i, s, want)
		}
	}
	wantEnds := []string{
		`{"turn":1,"reason":{"kind":"completed"}}`,
		`{"turn":2,"reason":{"kind":"error","error":{"message":"old provider failure","code":"SERVER"}}}`,
		`{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}`,
		`{"turn":4,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`,
		`{"turn":5,"reason":{"kind":"error","error":{"message":"old thrown value","code":"UNKNOWN"}}}`,
		`{"turn":6,"reason":{"kind":"error","error":{"message":"rate limited","code":"RATE_LIMIT","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"}}}`,
		`{"turn":7,"reason":{"kind":"error","error":{"message":"old coded error","code":"CODED"}}}`,
	}
	if len(ends) != len(wantEnds) {
		t.Fatalf("got %d turn/end events, want %d", len(ends), len(wantEnds))
	}
	for i := range ends {
		if ends[i] != wantEnds[i] {
			t.Errorf("turn/end %d: got %s, want %s", i, ends[i], wantEnds[i])
		}
	}
	wantSteer := `{"type":"user/message","seq":3,"time":4,"data":{"id":"steer-1","role":"user","content":[{"type":"text","text":"old steering"}],"source":{"kind":"user"}},"surfaceOp":"append"}`
	if string(out[3]) != wantSteer {
		t.Errorf("steering: got %s, want %s", out[3], wantSteer)
	}
	if !sameSlice(out[5], log[5]) {
		t.Errorf("a current turn/end was rewritten: %s", out[5])
	}
	if err := ValidateSession("old", out); err != nil {
		t.Fatalf("ValidateSession: got %v, want nil", err)
	}
	// readFrom(id, 3) is the slice of the normalised log: no step keys.
	for _, ev := range out[3:] {
		if bytes.Contains(ev, []byte(`"turn/end"`)) && bytes.Contains(ev, []byte(`"step"`)) {
			t.Errorf("turn/end keeps a step key: %s", ev)
		}
	}

	t.Run("flat steering", func(t *testing.T) {
		out := mustNormalize(t, "flat", lines(`{"type":"steering/message","seq":0,"time":1,"data":{"turn":1,"content":[{"type":"text","text":"flat"}],"source":{"kind":"user"}},"surfaceOp":"append"}`))
		want := `{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":"flat"}],"source":{"kind":"user"},"id":"legacy-message:flat:0","role":"user"},"surfaceOp":"append"}`
		if string(out[0]) != want {
			t.Errorf("got %s, want %s", out[0], want)
		}
	})
	t.Run("extension reason verbatim", func(t *testing.T) {
		log := lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"extension-reason"}}}`)
		out := mustNormalize(t, "ext", log)
		if !sameSlice(out[1], log[1]) {
			t.Errorf("got %s, want the input slice", out[1])
		}
	})
}

// k11Pre is the event before each k11MalformedCases event.
const k11Pre = `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`

// k11MalformedCases are malformed shapes Normalize refuses in session "bad":
// the event at seq 1 (after k11Pre) and Normalize's text.
func k11MalformedCases() []struct{ name, ev, msg string } {
	return []struct{ name, ev, msg string }{
		{"user/message with role assistant", `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
			`session event at seq 1 message must have role "user"`},
		{"turn/start trigger null", `{"type":"turn/start","seq":1,"time":2,"data":{"turn":1,"trigger":null}}`,
			`session "bad" contains malformed pre-react-loop turn/start at seq 1`},
		{"turn/start trigger empty kind", `{"type":"turn/start","seq":1,"time":2,"data":{"turn":1,"trigger":{"kind":""}}}`,
			`session "bad" contains malformed pre-react-loop turn/start at seq 1`},
		{"turn/start turn 0", `{"type":"turn/start","seq":1,"time":2,"data":{"turn":0,"trigger":{"kind":"m"}}}`,
			`session "bad" contains malformed pre-react-loop turn/start at seq 1`},
		{"steering extra key", `{"type":"steering/message","seq":1,"time":2,"data":{"turn":1,"message":{"id":"s","role":"user","content":[],"source":{"kind":"user"}},"extra":1},"surfaceOp":"append"}`,
			`session "bad" contains malformed pre-react-loop steering/message at seq 1`},
		{"steering data null", `{"type":"steering/message","seq":1,"time":2,"data":null,"surfaceOp":"append"}`,
			`session "bad" contains malformed pre-react-loop steering/message at seq 1`},
		{"completed extra key", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed","extra":1}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"reason null", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":null}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"turn/end with step", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"step":1,"reason":{"kind":"completed"}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"aborted extra key", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"aborted","why":"x"}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"disposed extra key", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"disposed","x":1}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"error step -1", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"error","step":-1,"message":"m"}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"error numeric code", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"error","step":1,"message":"m","code":5}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"turn/end turn 1.5", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1.5,"reason":{"kind":"completed"}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"turn/end kind number", `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":1}}}`,
			`session "bad" contains malformed pre-react-loop turn/end at seq 1`},
		{"tool/result message null", `{"type":"tool/result","seq":1,"time":2,"data":{"message":null},"surfaceOp":"append"}`,
			`session event at seq 1 lacks an identified message`},
		{"user/message empty data", `{"type":"user/message","seq":1,"time":2,"data":{},"surfaceOp":"append"}`,
			`session event at seq 1 lacks an identified message`},
		{"assistant/message empty data", `{"type":"assistant/message","seq":1,"time":2,"data":{},"surfaceOp":"append"}`,
			`session event at seq 1 lacks an identified message`},
		{"user/message empty id", `{"type":"user/message","seq":1,"time":2,"data":{"id":"","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`,
			`session event at seq 1 lacks an identified message`},
		{"invalid source", `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[],"source":"user"},"surfaceOp":"append"}`,
			`session event at seq 1 message has invalid source`},
		{"invalid content", `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":"hi","source":{"kind":"user"}},"surfaceOp":"append"}`,
			`session event at seq 1 message has invalid content`},
		{"model source", `{"type":"assistant/message","seq":1,"time":2,"data":{"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p"}}},"surfaceOp":"append"}`,
			`session event at seq 1 message must have model source`},
		{"tool source", `{"type":"tool/result","seq":1,"time":2,"data":{"message":{"id":"t","role":"user","content":[],"source":{"kind":"tool"}}},"surfaceOp":"append"}`,
			`session event at seq 1 message must have tool source`},
		{"two blocks", `{"type":"tool/result","seq":1,"time":2,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[]},{"type":"text","text":""}],"source":{"kind":"tool","callId":"c"}}},"surfaceOp":"append"}`,
			`session event at seq 1 message must contain one tool-result block`},
		{"mismatched ids", `{"type":"tool/result","seq":1,"time":2,"data":{"message":{"id":"t","role":"user","content":[{"type":"tool-result","toolCallId":"d","content":[]}],"source":{"kind":"tool","callId":"c"}}},"surfaceOp":"append"}`,
			`session event at seq 1 message has mismatched tool call ids`},
		{"legacy replace of unknown result", `{"type":"tool/result","seq":1,"time":2,"data":{"callId":"c","content":[],"isError":false},"surfaceOp":{"op":"replace","start":0,"end":0}}`,
			`session event at seq 1 lacks an identified message`},
	}
}

func TestNormalizeK11Malformed(t *testing.T) {
	const id = "bad"
	for _, tt := range k11MalformedCases() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize(id, lines(k11Pre, tt.ev), "/raw")
			wantErr(t, err, sessionstore.ReasonInvalidStored, tt.msg)
			wantErr(t, WrapCorruption(id, err), sessionstore.ReasonInvalidStored, `stored session "bad" failed validation: Error: `+tt.msg)
		})
	}
}

func TestNormalizeIgnorableAndUnknown(t *testing.T) {
	base := oneTurnLog()
	t.Run("unknown ignorable returned verbatim", func(t *testing.T) {
		log := lines(append(base,
			`{"type":"plugin/test","seq":6,"time":7,"data":null,"ignorable":true}`,
			`{"type":"future/event","seq":7,"time":99,"data":{"payload":1},"ignorable":true}`)...)
		out := mustNormalize(t, "s", log)
		for i := range log {
			if !sameSlice(out[i], log[i]) {
				t.Errorf("event %d: got a new slice %s", i, out[i])
			}
		}
	})
	t.Run("K37 unknown required type", func(t *testing.T) {
		log := lines(append(base, `{"type":"future/event","seq":6,"time":99,"data":{"payload":1}}`)...)
		_, err := Normalize("k37", log, "/root/--w--/k37/session.jsonl.zstd")
		wantErr(t, err, sessionstore.ReasonFormatUnsupported,
			"session \"k37\" contains event type \"future/event\" (seq 6) unknown to this harness and not marked ignorable; refusing to interpret the log \u2014 it was likely written by a newer harness (raw log: /root/--w--/k37/session.jsonl.zstd)")
		// FORMAT_UNSUPPORTED is never wrapped.
		if got := WrapCorruption("k37", err); got != err {
			t.Errorf("WrapCorruption changed a format refusal: %v", got)
		}
	})
	t.Run("plan-mode example log text without raw log", func(t *testing.T) {
		_, err := Normalize("plan-1", lines(`{"type":"x-acme/audit","seq":10,"time":1,"data":{"note":"exported"}}`), "")
		wantErr(t, err, sessionstore.ReasonFormatUnsupported,
			"session \"plan-1\" contains event type \"x-acme/audit\" (seq 10) unknown to this harness and not marked ignorable; refusing to interpret the log \u2014 it was likely written by a newer harness")
	})
	t.Run("validation before the unknown-type refusal", func(t *testing.T) {
		log := lines(`{"type":"future/event","seq":0,"time":1,"data":{}}`,
			`{"type":"user/message","seq":1,"time":2,"data":{},"surfaceOp":"append"}`)
		_, err := Normalize("s", log, "")
		wantErr(t, err, sessionstore.ReasonInvalidStored, "session event at seq 1 lacks an identified message")
	})
}

// refusedLegacyCases are logs of session "s" Normalize refuses for a legacy
// shape, with its text.
func refusedLegacyCases() []readCase {
	return []readCase{
		{"header-delta", []string{`{"type":"request/header-delta","seq":0,"time":1,"data":{}}`},
			`session "s" contains unsupported legacy request/header-delta event at seq 0`},
		{"mode/set", []string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"mode/set","seq":1,"time":1,"data":{}}`},
			`session "s" contains unsupported legacy mode/set event at seq 1`},
		{"fallback", []string{`{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}`},
			`session "s" contains unsupported legacy request/header reason "fallback" at seq 0`},
		{"header-delta searched first", []string{`{"type":"mode/set","seq":0,"time":1,"data":{}}`, `{"type":"request/header-delta","seq":1,"time":1,"data":{}}`},
			`session "s" contains unsupported legacy request/header-delta event at seq 1`},
		{"refusal before malformed shapes", []string{`{"type":"turn/end","seq":0,"time":1,"data":{"turn":0}}`, `{"type":"mode/set","seq":1,"time":1,"data":{}}`},
			`session "s" contains unsupported legacy mode/set event at seq 1`},
	}
}

func TestNormalizeRefusedLegacy(t *testing.T) {
	for _, tt := range refusedLegacyCases() {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Normalize("s", lines(tt.log...), "")
			wantErr(t, err, sessionstore.ReasonInvalidStored, tt.msg)
		})
	}
	t.Run("request/header null data", func(t *testing.T) {
		_, err := Normalize("s", lines(`{"type":"request/header","seq":0,"time":1,"data":null}`), "")
		wantErr(t, err, sessionstore.ReasonInvalidStored, "Cannot read properties of null (reading 'reason')")
		wantErr(t, WrapCorruption("s", err), sessionstore.ReasonInvalidStored,
			`stored session "s" failed validation: TypeError: Cannot read properties of null (reading 'reason')`)
	})
}

func TestNormalizeRules(t *testing.T) {
	// One docs/events.md#legacy-shapes rule per case: the single event in, the expected bytes out.
	tests := []struct{ name, in, want string }{
		{"turn/start trigger dropped",
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1,"trigger":{"kind":"message","source":{"kind":"user"}}}}`,
			`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`},
		{"re-serialised JS style",
			`{"type":"turn/start","seq":0.0,"time":1e3,"data":{"turn":1.0,"trigger":{"kind":"m"}}}`,
			`{"type":"turn/start","seq":0,"time":1000,"data":{"turn":1}}`},
		{"key order kept, data in place",
			`{"data":{"trigger":{"kind":"m"},"turn":2},"type":"turn/start","time":1,"seq":0}`,
			`{"data":{"turn":2},"type":"turn/start","time":1,"seq":0}`},
		{"bare aborted",
			`{"type":"turn/end","seq":0,"time":1,"data":{"reason":{"kind":"aborted"},"turn":1}}`,
			`{"type":"turn/end","seq":0,"time":1,"data":{"reason":{"kind":"aborted","reason":{"kind":"legacy"}},"turn":1}}`},
		{"disposed",
			`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"disposed"}}}`,
			`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}}`},
		{"error failure",
			`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":3,"failure":{"code":"C","message":"m","status":500}}}}`,
			`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","error":{"code":"C","message":"m","status":500}}}}`},
		{"error message without code",
			`{"type":"turn/end","seq":0,"time":1,"data":{"turn":1,"reason":{"kind":"error","step":0,"message":"<boom> & \u2028"}}}`,
			"{\"type\":\"turn/end\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"error\",\"error\":{\"message\":\"<boom> & \u2028\",\"code\":\"UNKNOWN\"}}}}"},
		{"legacy user message",
			`{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"extra":true},"surfaceOp":"append"}`,
			`{"type":"user/message","seq":0,"time":1,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"extra":true,"id":"legacy-message:s:0","role":"user"},"surfaceOp":"append"}`},
		{"legacy assistant, provenance kind overwritten in place",
			`{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"content":[],"provenance":{"kind":"x","provider":"p","model":"m"},"step":1},"surfaceOp":"append"}`,
			`{"type":"assistant/message","seq":0,"time":1,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:s:0","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out := mustNormalize(t, "s", lines(tt.in))
			if string(out[0]) != tt.want {
				t.Fatalf("got  %s\nwant %s", out[0], tt.want)
			}
		})
	}
	t.Run("current shapes untouched", func(t *testing.T) {
		log := lines(oneTurnLog()...)
		out := mustNormalize(t, "s", log)
		for i := range log {
			if !sameSlice(out[i], log[i]) {
				t.Errorf("event %d rewritten: %s", i, out[i])
			}
		}
	})
}

func TestNormalizeRecordedLogs(t *testing.T) {
	for _, name := range []string{"cli-parallel-file-reads.session.jsonl", "web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl"} {
		t.Run(name, func(t *testing.T) {
			header, _, events := recordedLog(t, name)
			hv, err := parseValue(header)
			if err != nil {
				t.Fatal(err)
			}
			id := hv.get("id").s
			out, err := Normalize(id, events, "")
			if err != nil {
				t.Fatalf("Normalize: got %v, want nil", err)
			}
			for i, ev := range out {
				if field(t, ev, "seq") != itoa(i) {
					t.Fatalf("event %d has seq %s", i, field(t, ev, "seq"))
				}
			}
			if err := ValidateSession(id, out); err != nil {
				t.Fatalf("ValidateSession: got %v, want nil", err)
			}
			if cl, err := Closers(out); err != nil || cl != nil {
				t.Fatalf("Closers: got %d closers, %v; want none", len(cl), err)
			}
		})
	}
	t.Run("cli-parallel-file-reads ids", func(t *testing.T) {
		_, _, events := recordedLog(t, "cli-parallel-file-reads.session.jsonl")
		out := mustNormalize(t, "rec-parallel-file-reads", events)
		want := `{"type":"tool/result","seq":15,"time":0,"data":{"turn":1,"step":1,"message":{"id":"legacy-message:rec-parallel-file-reads:15","role":"user","content":[{"type":"tool-result","toolCallId":"call_read_a","content":[{"type":"text","text":"<path>/home/dev/project/a.txt</path>\n<type>file</type>\n<content>\n1: alpha\n\n(End of file - total 1 lines)\n</content>"}],"isError":false}],"source":{"kind":"tool","callId":"call_read_a"}}},"sourceEventSeqs":[13],"surfaceOp":"append"}`
		if string(out[15]) != want {
			t.Errorf("got  %s\nwant %s", out[15], want)
		}
		wantAssistant := `{"type":"assistant/message","seq":24,"time":0,"data":{"turn":1,"step":2,"usage":{"inputTokens":10,"outputTokens":1},"message":{"id":"legacy-message:rec-parallel-file-reads:24","role":"assistant","content":[{"type":"text","text":"DONE"}],"source":{"provider":"deepseek-official","model":"deepseek-v4-flash","kind":"model"}}},"sourceEventSeqs":[19,20,21,22,23],"surfaceOp":"append"}`
		if string(out[24]) != wantAssistant {
			t.Errorf("got  %s\nwant %s", out[24], wantAssistant)
		}
	})
}

func TestNormalizeNotJSON(t *testing.T) {
	_, err := Normalize("s", lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `not json`), "")
	wantErr(t, err, sessionstore.ReasonInvalidStored, "")
}

func FuzzNormalize(f *testing.F) {
	f.Add([]byte(joinLines(lines(oneTurnLog()...))))
	f.Add([]byte("{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1,\"trigger\":{\"kind\":\"m\"}}}\n" +
		"{\"type\":\"steering/message\",\"seq\":1,\"time\":1,\"data\":{\"turn\":1,\"content\":[],\"source\":{\"kind\":\"user\"}},\"surfaceOp\":\"append\"}\n" +
		"{\"type\":\"turn/end\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"reason\":{\"kind\":\"error\",\"step\":1,\"message\":\"m\"}}}"))
	f.Add([]byte("{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n" +
		"{\"type\":\"step/start\",\"seq\":1,\"time\":1,\"data\":{\"turn\":1,\"step\":1}}\n" +
		"{\"type\":\"assistant/message\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"step\":1,\"content\":[{\"type\":\"tool-call\",\"id\":\"c\"}],\"provenance\":{\"provider\":\"p\",\"model\":\"m\"}},\"surfaceOp\":\"append\"}\n" +
		"{\"type\":\"tool/call\",\"seq\":3,\"time\":1,\"data\":{\"callId\":\"c\"}}\n" +
		"{\"type\":\"tool/result\",\"seq\":4,\"time\":1,\"data\":{\"callId\":\"c\",\"content\":[],\"isError\":true},\"surfaceOp\":{\"op\":\"replace\",\"start\":2,\"end\":2},\"sourceEventSeqs\":[2]}"))
	f.Add([]byte("{\"type\":\"x/y\",\"seq\":0,\"time\":1,\"data\":null,\"ignorable\":true}\n{\"type\":\"turn/start\",\"seq\":1,\"time\":1,\"data\":null}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		log := bytes.Split(in, []byte("\n"))
		if len(log) <= 64 {
			sameAsNormalize(t, log) // the chunked passes of ReadFrom
		}
		out, err := Normalize("fz", log, "")
		if err == nil {
			for i, ev := range out {
				if _, perr := parseStored(ev); perr != nil {
					t.Fatalf("normalised event %d is not JSON: %v (%s)", i, perr, ev)
				}
			}
			again, err := Normalize("fz", out, "")
			if err != nil {
				t.Fatalf("second Normalize failed: %v", err)
			}
			for i := range out {
				if !bytes.Equal(again[i], out[i]) {
					t.Fatalf("Normalize is not idempotent at %d:\n%s\n%s", i, out[i], again[i])
				}
			}
			log = out
		}
		cl, cerr := Closers(log)
		open, oerr := OpenTurn(log)
		if (cerr == nil) != (oerr == nil) || (cerr == nil && open != (len(cl) > 0)) {
			t.Fatalf("Closers (%d, %v) and OpenTurn (%v, %v) disagree", len(cl), cerr, open, oerr)
		}
		_ = ValidateSession("fz", append(log[:len(log):len(log)], cl...))
	})
}

// normalizeBothWays runs normalizeEvent and normalizeEventFull on the same
// event text with the same prior message ids and fails when they differ in
// anything: the output, the type, the error or the ids they record.
func normalizeBothWays(t *testing.T, raw []byte) {
	t.Helper()
	a, errA := parseStored(raw)
	b, errB := parseStored(raw)
	if errA != nil || errB != nil {
		return
	}
	idsA, idsB := map[float64]string{0: "m0"}, map[float64]string{0: "m0"}
	outA, typA, errA := normalizeEvent("s", a, idsA)
	outB, typB, errB := normalizeEventFull("s", b, idsB)
	if !sameErr(errA, errB) || !bytes.Equal(outA, outB) || !deepEqual(typA, typB) {
		t.Fatalf("%s:\nfast (%s, %v, %v)\nfull (%s, %v, %v)", raw, outA, typA, errA, outB, typB, errB)
	}
	// The fast path again on an event whose data another rule parsed first.
	c, _ := parseStored(raw)
	c.get("data")
	idsC := map[float64]string{0: "m0"}
	if outC, _, errC := normalizeEvent("s", c, idsC); !sameErr(errC, errB) || !bytes.Equal(outC, outB) {
		t.Fatalf("%s: with data parsed first (%s, %v), full (%s, %v)", raw, outC, errC, outB, errB)
	}
	for _, ids := range []map[float64]string{idsA, idsC} {
		if len(ids) != len(idsB) {
			t.Fatalf("%s: ids %v, full %v", raw, ids, idsB)
		}
		for k, v := range idsB {
			if ids[k] != v {
				t.Fatalf("%s: ids %v, full %v", raw, ids, idsB)
			}
		}
	}
}

func TestNormalizeEvent_FastPathIsTheFullOne(t *testing.T) {
	for _, ev := range []string{
		`{"type":"assistant/chunk","seq":3,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","text":"hi"}}}`,
		`{"type":"x/y","seq":3,"time":1,"data":{"message":{"id":"m-3"}}}`,
		`{"type":"x/y","seq":3,"time":1,"data":{"a":[1,{"message":{"id":"no"}}],"message":{"id":"m-3","x":[]}}}`,
		`{"type":"x/y","seq":3,"time":1,"data":{ "\u006dessage" : {"id":"escaped key"} }}`,
		`{"type":"x/y","seq":3,"time":1,"data":{"message":{"id":7}}}`,
		`{"type":"x/y","seq":3,"time":1,"data":{"message":["id"]}}`,
		`{"type":"x/y","seq":3,"time":1,"data":["message"]}`,
		`{"type":"x/y","seq":3,"time":1,"data":"message"}`,
		`{"type":"x/y","seq":3,"time":1,"data":null}`,
		`{"type":"x/y","seq":3,"time":1,"data":{}}`,
		`{"type":"x/y","seq":3,"time":1,"data":{ }}`,
		`{"type":"x/y","seq":3,"time":1}`,
		`{"type":"x/y","seq":"3","time":1,"data":{"message":{"id":"m"}}}`,
		`{"type":7,"seq":3,"time":1,"data":{"message":{"id":"m"}}}`,
		`{"seq":3,"time":1,"data":{"message":{"id":"m"}}}`,
		`{"type":"tool/result","seq":3,"time":1,"data":{"callId":"c","content":[],"isError":true},"surfaceOp":{"op":"replace","start":0,"end":0}}`,
		`{"type":"user/message","seq":3,"time":1,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}`,
		`{"type":"turn/start","seq":3,"time":1,"data":{"turn":1,"trigger":{"kind":"user"}}}`,
	} {
		normalizeBothWays(t, []byte(ev))
	}
}

func FuzzNormalizeEventFastPath(f *testing.F) {
	for _, s := range oneTurnLog() {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"type":"x/y","seq":3,"time":1,"data":{"a":[1,{"message":{"id":"no"}}],"message":{"id":"m-3","x":[]}}}`))
	f.Add([]byte(`{"type":"x/y","seq":3,"time":1,"data":{ "\u006dessage" : {"id":"escaped key"} }}`))
	f.Fuzz(func(t *testing.T, raw []byte) { normalizeBothWays(t, raw) })
}
