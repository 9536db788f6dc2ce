package sessionlog

import (
	"testing"

	"github.com/sessionstore/sessionstore"
)

// readCase is a log and the error text a read of it fails with ("" = it reads).
type readCase struct {
	name string
	log  []string
	msg  string
}

// validateSessionCases are ValidateSession's cases (messages without the
// load-path prefix); ReadCheck's test reuses them.
func validateSessionCases() []readCase {
	base := oneTurnLog()
	with := func(i int, ev string) []string {
		out := append([]string(nil), base...)
		out[i] = ev
		return out
	}
	toolResult := func(seq, text, extra, op, src string) string {
		return `{"type":"tool/result","seq":` + seq + `,"time":9,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"` + text +
			`"}]}],"source":{"kind":"tool","callId":"c"}}` + extra + `},"sourceEventSeqs":` + src + `,"surfaceOp":` + op + `}`
	}
	replaceLog := func(replacement string) []string {
		return append(base[:5:5], toolResult("5", "long", "", `"append"`, `[3]`), replacement)
	}
	return []readCase{
		{"oneTurnLog", base, ""},
		{"empty", nil, ""},
		{"ignorable unknown", append(base, `{"type":"plugin/test","seq":6,"time":7,"data":null,"ignorable":true}`), ""},
		{"surfaceOp missing on user/message", with(1, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}}}`),
			`invalid seed event at index 1: session event "user/message" is surface-eligible and requires a surfaceOp marker`},
		{"seq != index", with(1, `{"type":"user/message","seq":2,"time":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`),
			`seed event at index 1 has seq 2 (expected 1); seed must be contiguous from 0`},
		{"extra envelope key", with(0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"meta":{}}`), `seed event at index 0 has an invalid event envelope`},
		{"ignorable false", with(0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"ignorable":false}`), `seed event at index 0 has an invalid event envelope`},
		{"fractional time", with(0, `{"type":"turn/start","seq":0,"time":1.5,"data":{"turn":1}}`), `seed event at index 0 has an invalid event envelope`},
		{"negative time allowed", with(0, `{"type":"turn/start","seq":0,"time":-1,"data":{"turn":1}}`), ""},
		{"header-delta", with(0, `{"type":"request/header-delta","seq":0,"time":1,"data":{}}`), `seed event at index 0 uses unsupported legacy request/header-delta format`},
		{"surfaceOp on a log-only event", with(0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"surfaceOp":"append"}`),
			`invalid seed event at index 0: session event "turn/start" is not surface-eligible and cannot carry surfaceOp`},
		{"sourceEventSeqs on a log-only event", with(0, `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1},"sourceEventSeqs":[]}`),
			`invalid seed event at index 0: session event "turn/start" is not surface-eligible and cannot carry sourceEventSeqs`},
		{"invalid surfaceOp", with(1, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":"prepend"}`),
			`invalid seed event at index 1: session event "user/message" carries an invalid surfaceOp`},
		{"invalid replace", with(1, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"surfaceOp":{"op":"replace","start":0}}`),
			`invalid seed event at index 1: session event "user/message" carries an invalid replace surfaceOp`},
		{"empty sourceEventSeqs", with(1, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"user","content":[],"source":{"kind":"user"}},"sourceEventSeqs":[],"surfaceOp":"append"}`),
			`invalid seed event at index 1: sourceEventSeqs must not be empty except on assistant/message`},
		{"empty sourceEventSeqs on assistant", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[],"surfaceOp":"append"}`), ""},
		{"later sourceEventSeqs", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[1,3,5],"surfaceOp":"append"}`),
			`invalid seed event at index 3: sourceEventSeqs must reference earlier events: 3 >= current seq 3`},
		{"duplicate sourceEventSeqs", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[1,1],"surfaceOp":"append"}`),
			`invalid seed event at index 3: sourceEventSeqs must not contain duplicates`},
		{"non-integer sourceEventSeqs", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[0.5],"surfaceOp":"append"}`),
			`invalid seed event at index 3: session event "assistant/message" sourceEventSeqs must densely contain non-negative safe integers`},
		{"sourceEventSeqs not an array", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":{},"surfaceOp":"append"}`),
			`invalid seed event at index 3: sourceEventSeqs on event at seq 3 must be an array when present`},
		{"replace missing start", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[0],"surfaceOp":{"op":"replace","start":0,"end":1}}`),
			`invalid seed event at index 3: surface replace: start seq 0 not found in surface`},
		{"replace must cite shadowed", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[0],"surfaceOp":{"end":1,"op":"replace","start":1}}`),
			`invalid seed event at index 3: surface replace: sourceEventSeqs must include every shadowed surface node; missing 1`},
		{"valid compaction replace", with(3, `{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[],"source":{"kind":"model","provider":"p","model":"m"}}},"sourceEventSeqs":[1],"surfaceOp":{"op":"replace","start":1,"end":1}}`), ""},
		{"tool/result replace may change content", replaceLog(toolResult("6", "short", "", `{"op":"replace","start":5,"end":5}`, `[5]`)), ""},
		{"tool/result replace may change only content", replaceLog(toolResult("6", "short", `,"meta":1`, `{"op":"replace","start":5,"end":5}`, `[5]`)),
			`invalid seed event at index 6: tool/result surface replacement may change only content`},
		{"tool/result replace must target a tool/result", replaceLog(toolResult("6", "short", "", `{"op":"replace","start":3,"end":3}`, `[3]`)),
			`invalid seed event at index 6: tool/result surface replacement must target a current tool/result`},
		{"tool/result replace exactly one node", replaceLog(toolResult("6", "short", "", `{"op":"replace","start":3,"end":5}`, `[3,5]`)),
			`invalid seed event at index 6: tool/result surface replacement must rewrite exactly one current node`},
		{"replace start after end", replaceLog(toolResult("6", "short", "", `{"op":"replace","start":5,"end":3}`, `[3,5]`)),
			`invalid seed event at index 6: surface replace: start seq 5 (index 2) is after end seq 3 (index 1)`},
		{"message shape", with(1, `{"type":"user/message","seq":1,"time":2,"data":{"id":"u","role":"assistant","content":[],"source":{"kind":"user"}},"surfaceOp":"append"}`),
			`seed user/message at index 1 message must have role "user"`},
		{"request/header provider", with(0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p"}},"reason":"initial"}}`),
			`seed request/header at index 0 lacks provider/model`},
		{"request/header reasoningEffort", with(0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m","reasoningEffort":""}},"reason":"initial"}}`),
			`seed request/header at index 0 has an invalid reasoningEffort`},
		{"request/header adapterDefaults", with(0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"},"adapterDefaults":{"maxTokens":true}},"reason":"initial"}}`),
			`seed request/header at index 0 has invalid adapterDefaults`},
		{"request/header adapterDefaults ok", with(0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m","maxTokens":5},"adapterDefaults":{"maxTokens":true}},"reason":"initial"}}`), ""},
		{"request/header fallback", with(0, `{"type":"request/header","seq":0,"time":1,"data":{"header":{"config":{"provider":"p","model":"m"}},"reason":"fallback"}}`),
			`seed event at index 0 uses unsupported legacy request/header reason "fallback"`},
		{"not JSON", with(0, `{`), `seed event at index 0 is not losslessly JSON-serializable`},
	}
}

func TestValidateSession(t *testing.T) {
	const prefix = `stored session "s" failed validation: Error: `
	for _, tt := range validateSessionCases() {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateSession("s", lines(tt.log...))
			if tt.msg == "" {
				if err != nil {
					t.Fatalf("got %v, want nil", err)
				}
				return
			}
			wantErr(t, err, sessionstore.ReasonInvalidStored, prefix+tt.msg)
		})
	}
}

func TestWrapCorruption(t *testing.T) {
	raw := sessionstore.Errorf(sessionstore.ReasonInvalidStored, "x")
	once := WrapCorruption("a", raw)
	wantErr(t, once, sessionstore.ReasonInvalidStored, `stored session "a" failed validation: Error: x`)
	wantErr(t, WrapCorruption("a", once), sessionstore.ReasonInvalidStored, `stored session "a" failed validation: Error: x`)
	other := sessionstore.Errorf(sessionstore.ReasonFormatUnsupported, "y")
	if WrapCorruption("a", other) != error(other) {
		t.Fatal("a format refusal was wrapped")
	}
	if WrapCorruption("a", nil) != nil {
		t.Fatal("nil was wrapped")
	}
}
