package sessionlog

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

func TestCheckEventAccepts(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want EventInfo
	}{
		{"minimal", `{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, EventInfo{"turn/start", 0, 1}},
		{"key order free", `{"data":null,"time":-5,"seq":7,"type":"x/y"}`, EventInfo{"x/y", 7, -5}},
		{"integral 1.0 seq", `{"type":"a","seq":1.0,"time":1e0,"data":0}`, EventInfo{"a", 1, 1}},
		{"exponent seq", `{"type":"a","seq":2e1,"time":0,"data":0}`, EventInfo{"a", 20, 0}},
		{"max safe seq", `{"type":"a","seq":9007199254740991,"time":-9007199254740991,"data":0}`, EventInfo{"a", 1<<53 - 1, -(1<<53 - 1)}},
		{"blanks inside", `{ "type" : "a" ,	"seq" : 0 , "time" : 0 , "data" : [ 1 , 2 ] }`, EventInfo{"a", 0, 0}},
		{"unknown type and bad message shape", `{"type":"user/message","seq":0,"time":0,"data":{}}`, EventInfo{"user/message", 0, 0}},
		{"ignorable", `{"type":"x-acme/audit","seq":10,"time":1,"data":{"note":"exported"},"ignorable":true}`, EventInfo{"x-acme/audit", 10, 1}},
		{"surface metadata", `{"type":"tool/result","seq":6,"time":1,"data":{},"sourceEventSeqs":[5],"surfaceOp":"append"}`, EventInfo{"tool/result", 6, 1}},
		{"replace object", `{"type":"tool/result","seq":6,"time":1,"data":{},"surfaceOp":{"op":"anything"},"sourceEventSeqs":[]}`, EventInfo{"tool/result", 6, 1}},
		{"escaped append", `{"type":"a","seq":0,"time":0,"data":0,"surfaceOp":"\u0061ppend"}`, EventInfo{"a", 0, 0}},
		{"escaped type", `{"type":"turn\/start","seq":0,"time":0,"data":0}`, EventInfo{"turn/start", 0, 0}},
		{"floats fine", `{"type":"a","seq":0,"time":0,"data":{"t":0.1,"u":1.5e-7,"v":1e2,"w":0.0}}`, EventInfo{"a", 0, 0}},
		{"lone surrogate escape", `{"type":"a","seq":0,"time":0,"data":"\ud800"}`, EventInfo{"a", 0, 0}},
		{"special characters", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"<>&\u2028\u2029é😀\\u0001\"}", EventInfo{"a", 0, 0}},
		{"plan/mode true", `{"type":"plan/mode","seq":1,"time":1,"data":{"active":true}}`, EventInfo{"plan/mode", 1, 1}},
		{"plan/mode false", `{"type":"plan/mode","seq":1,"time":1,"data":{"active":false,"extra":1}}`, EventInfo{"plan/mode", 1, 1}},
		{"request/header initial", `{"type":"request/header","seq":3,"time":1,"data":{"header":{},"reason":"initial"}}`, EventInfo{"request/header", 3, 1}},
		{"empty type", `{"type":"","seq":0,"time":0,"data":0}`, EventInfo{"", 0, 0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := CheckEvent("s", []byte(tt.raw))
			if err != nil {
				t.Fatalf("got error %v, want nil", err)
			}
			if got != tt.want {
				t.Fatalf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestCheckEventRefuses(t *testing.T) {
	const (
		notJSON = sessionstore.ReasonNotJSON
		invalid = sessionstore.ReasonInvalidEvent
		lossy   = "session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data "
	)
	tests := []struct {
		name   string
		raw    string
		reason sessionstore.Reason
		msg    string // exact message, or a prefix when it ends with "…"
	}{
		// Not a single-line JSON object.
		{"empty", ``, notJSON, "event is not a single-line JSON object: …"},
		{"array", `[1]`, notJSON, ""},
		{"string", `"x"`, notJSON, ""},
		{"leading space", ` {"type":"a","seq":0,"time":0,"data":0}`, notJSON, ""},
		{"trailing space", `{"type":"a","seq":0,"time":0,"data":0} `, notJSON, ""},
		{"trailing newline", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":0}\n", notJSON, ""},
		{"trailing garbage", `{"type":"a","seq":0,"time":0,"data":0}x`, notJSON, ""},
		{"two objects", `{"type":"a","seq":0,"time":0,"data":0}{}`, notJSON, ""},
		{"newline between tokens", "{\"type\":\"a\",\n\"seq\":0,\"time\":0,\"data\":0}", notJSON, ""},
		{"CR between tokens", "{\"type\":\"a\",\r\"seq\":0,\"time\":0,\"data\":0}", notJSON, ""},
		{"newline inside string", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"x\ny\"}", notJSON, ""},
		{"tab inside string", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"x\ty\"}", notJSON, ""},
		{"duplicate top-level", `{"type":"a","type":"b","seq":0,"time":0,"data":0}`, notJSON, "event is not a single-line JSON object: duplicate key \"type\" at byte 12"},
		{"duplicate nested", `{"type":"a","seq":0,"time":0,"data":{"x":[{"k":1,"k":2}]}}`, notJSON, "event is not a single-line JSON object: duplicate key \"k\"…"},
		{"duplicate by escape", `{"type":"a","seq":0,"time":0,"data":{"ab":1,"a\u0062":2}}`, notJSON, ""},
		{"invalid UTF-8", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"\xc3\x28\"}", notJSON, ""},
		{"UTF-8 surrogate bytes", "{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"\xed\xa0\x80\"}", notJSON, ""},
		{"bad escape", `{"type":"a","seq":0,"time":0,"data":"\x"}`, notJSON, ""},
		{"leading zero", `{"type":"a","seq":01,"time":0,"data":0}`, notJSON, ""},
		{"NaN literal", `{"type":"a","seq":0,"time":0,"data":NaN}`, notJSON, ""},
		{"unterminated", `{"type":"a","seq":0,"time":0,"data":{}`, notJSON, ""},
		{"syntax beats lossy", `{"type":"a","seq":0,"time":0,"data":1e400,}`, notJSON, ""},
		// Outside the lossless-JSON domain.
		{"1e400", `{"type":"user/message","seq":0,"time":0,"data":{"extra":1e400}}`, invalid, lossy + `(event "user/message" at seq 0)`},
		{"-0", `{"type":"user/message","seq":3,"time":0,"data":{"extra":-0}}`, invalid, lossy + `(event "user/message" at seq 3)`},
		{"-0.0", `{"type":"a","seq":0,"time":0,"data":[-0.0]}`, invalid, lossy + `(event "a" at seq 0)`},
		{"-0e5", `{"type":"a","seq":0,"time":0,"data":-0e5}`, invalid, lossy + `(event "a" at seq 0)`},
		{"beyond 2^53", `{"type":"a","seq":0,"time":0,"data":9007199254740993}`, invalid, lossy + `(event "a" at seq 0)`},
		{"lossy seq", `{"type":"a","seq":9007199254740993,"time":0,"data":0}`, invalid, lossy + `(event "a" at seq ?)`},
		{"lossy, no type", `{"seq":1e0,"time":0,"data":1e999}`, invalid, lossy + `(event "?" at seq 1)`},
		{"underflow", `{"type":"a","seq":0,"time":0,"data":1e-400}`, invalid, ""},
		// Envelope.
		{"unknown key", `{"type":"a","seq":0,"time":0,"data":0,"extra":1}`, invalid, `invalid session event envelope (event "a" at seq 0): unknown top-level key "extra"`},
		{"missing type", `{"seq":0,"time":0,"data":0}`, invalid, `invalid session event envelope (event "?" at seq 0): missing "type"`},
		{"numeric type", `{"type":5,"seq":0,"time":0,"data":0}`, invalid, `invalid session event envelope (event "?" at seq 0): "type" must be a string`},
		{"missing seq", `{"type":"a","time":0,"data":0}`, invalid, `invalid session event envelope (event "a" at seq ?): "seq" must be a non-negative safe integer`},
		{"fractional seq", `{"type":"a","seq":1.5,"time":0,"data":0}`, invalid, `invalid session event envelope (event "a" at seq 1.5): "seq" must be a non-negative safe integer`},
		{"negative seq", `{"type":"a","seq":-1,"time":0,"data":0}`, invalid, ""},
		{"seq 2^53", `{"type":"a","seq":9007199254740992,"time":0,"data":0}`, invalid, ""},
		{"string seq", `{"type":"a","seq":"1","time":0,"data":0}`, invalid, ""},
		{"fractional time", `{"type":"a","seq":0,"time":1.5,"data":0}`, invalid, `invalid session event envelope (event "a" at seq 0): "time" must be a safe integer`},
		{"missing time", `{"type":"a","seq":0,"data":0}`, invalid, ""},
		{"missing data", `{"type":"a","seq":0,"time":0}`, invalid, `invalid session event envelope (event "a" at seq 0): missing "data"`},
		{"sourceEventSeqs negative", `{"type":"a","seq":0,"time":0,"data":0,"sourceEventSeqs":[1,-1]}`, invalid, ""},
		{"sourceEventSeqs fraction", `{"type":"a","seq":0,"time":0,"data":0,"sourceEventSeqs":[1.5]}`, invalid, ""},
		{"sourceEventSeqs not array", `{"type":"a","seq":0,"time":0,"data":0,"sourceEventSeqs":3}`, invalid, `invalid session event envelope (event "a" at seq 0): "sourceEventSeqs" must be an array of non-negative safe integers`},
		{"surfaceOp string", `{"type":"a","seq":0,"time":0,"data":0,"surfaceOp":"replace"}`, invalid, `invalid session event envelope (event "a" at seq 0): "surfaceOp" must be "append" or an object`},
		{"surfaceOp array", `{"type":"a","seq":0,"time":0,"data":0,"surfaceOp":[]}`, invalid, ""},
		{"ignorable false", `{"type":"a","seq":0,"time":0,"data":0,"ignorable":false}`, invalid, `invalid session event envelope (event "a" at seq 0): "ignorable" may only be true`},
		{"ignorable 1", `{"type":"a","seq":0,"time":0,"data":0,"ignorable":1}`, invalid, ""},
		// Legacy shapes refused on append (docs/events.md#legacy-shapes).
		{"header-delta", `{"type":"request/header-delta","seq":4,"time":0,"data":{}}`, invalid, `session "s" contains unsupported legacy request/header-delta event at seq 4`},
		{"mode/set", `{"type":"mode/set","seq":2,"time":0,"data":{"mode":"plan"}}`, invalid, `session "s" contains unsupported legacy mode/set event at seq 2`},
		{"fallback", `{"type":"request/header","seq":3,"time":0,"data":{"header":{},"reason":"fallback"}}`, invalid, `session "s" contains unsupported legacy request/header reason "fallback" at seq 3`},
		{"request/header null data", `{"type":"request/header","seq":3,"time":0,"data":null}`, invalid, "Cannot read properties of null (reading 'reason')"},
		// plan/mode invariant.
		{"plan/mode 42", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":42}}`, invalid, `plan/mode carries invalid active state 42; expected a boolean`},
		{"plan/mode 1.0", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":1.0}}`, invalid, `plan/mode carries invalid active state 1; expected a boolean`},
		{"plan/mode string", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":"plan"}}`, invalid, `plan/mode carries invalid active state "plan"; expected a boolean`},
		{"plan/mode null", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":null}}`, invalid, `plan/mode carries invalid active state null; expected a boolean`},
		{"plan/mode object", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":{ "a" : 1e0 }}}`, invalid, `plan/mode carries invalid active state {"a":1}; expected a boolean`},
		{"plan/mode array", `{"type":"plan/mode","seq":1,"time":0,"data":{"active":[true,"\u003c"]}}`, invalid, `plan/mode carries invalid active state [true,"<"]; expected a boolean`},
		{"plan/mode missing", `{"type":"plan/mode","seq":1,"time":0,"data":{}}`, invalid, `plan/mode carries invalid active state undefined; expected a boolean`},
		{"plan/mode data null", `{"type":"plan/mode","seq":1,"time":0,"data":null}`, invalid, `plan/mode carries invalid active state undefined; expected a boolean`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := CheckEvent("s", []byte(tt.raw))
			if prefix, ok := strings.CutSuffix(tt.msg, "…"); ok {
				wantErr(t, err, tt.reason, "")
				if !strings.HasPrefix(err.Error(), prefix) {
					t.Fatalf("got message %q, want prefix %q", err.Error(), prefix)
				}
				return
			}
			wantErr(t, err, tt.reason, tt.msg)
		})
	}
}

func TestCheckEventRecordedLogs(t *testing.T) {
	for _, name := range []string{"cli-parallel-file-reads.session.jsonl", "web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl"} {
		t.Run(name, func(t *testing.T) {
			_, records, events := recordedLog(t, name)
			checked := 0
			for _, line := range records {
				if isPackedRow(line) {
					continue
				}
				if _, err := CheckEvent("rec", line); err != nil {
					t.Errorf("got %v for %s, want nil", err, line)
				}
				checked++
			}
			// The expanded chunk events are ordinary events too.
			for _, ev := range events {
				if _, err := CheckEvent("rec", ev); err != nil {
					t.Errorf("got %v for expanded %s, want nil", err, ev)
				}
			}
			if checked == 0 {
				t.Fatal("no event checked")
			}
		})
	}
}

// benchEvent is a realistic ~1 KiB assistant/message.
var benchEvent = []byte(`{"type":"assistant/message","seq":1234,"time":1755600001500,"data":{"turn":3,"step":2,"message":{"role":"assistant","content":[{"type":"reasoning","text":"The user wants the tests run and the config shown. I will run npm test first, then read tsconfig.json; both are read-only, so they can run in parallel."},{"type":"text","text":"I'll run the test suite and show you the TypeScript configuration.\nResults follow below \u2014 \"quoted\" and <escaped> & fine."},{"type":"tool-call","id":"call_00_BYXlxjFaalMg95YVqEeF2495","name":"bash","arguments":"{\"command\": \"npm test -- --reporter=dot\", \"description\": \"Run the test suite\"}"},{"type":"tool-call","id":"call_01_Q2w3E4r5T6y7U8i9O0p1A2s3","name":"read","arguments":"{\"path\":\"tsconfig.json\"}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat","replayState":{"cursor":"c-0001","tokens":[1,2,3,4,5,6,7,8]}},"id":"0f2d7c8e-1111-4a1a-8a1a-000000000004"},"usage":{"inputTokens":12345,"outputTokens":678,"cacheReadTokens":7680,"reasoningTokens":42}},"sourceEventSeqs":[1220,1221,1222,1223,1224,1225,1226,1227,1228,1229,1230,1231,1232,1233],"surfaceOp":"append"}`)

func BenchmarkCheckEvent(b *testing.B) {
	b.SetBytes(int64(len(benchEvent)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := CheckEvent("bench", benchEvent); err != nil {
			b.Fatal(err)
		}
	}
}

func FuzzCheckEvent(f *testing.F) {
	for _, s := range oneTurnLog() {
		f.Add([]byte(s))
	}
	f.Add(benchEvent)
	for _, s := range []string{
		`{"type":"plan/mode","seq":1,"time":0,"data":{"active":42}}`,
		`{"type":"request/header","seq":3,"time":0,"data":{"reason":"fallback"}}`,
		`{"type":"a","seq":0,"time":0,"data":{"x":{"a":1,"a":2}}}`,
		`{"type":"a","seq":0,"time":0,"data":[1e400,-0,9007199254740993]}`,
		`{"type":"a","seq":0,"time":0,"data":"\ud800\uDC00\u2028"}`,
		"{\"type\":\"a\",\"seq\":0,\"time\":0,\"data\":\"\xff\"}",
		`{"type":"a","seq":1.0,"time":-1,"data":null,"ignorable":true,"surfaceOp":{},"sourceEventSeqs":[]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		info, err := CheckEvent("fuzz", raw)
		if err != nil {
			return
		}
		if !json.Valid(raw) {
			t.Fatalf("accepted invalid JSON %q", raw)
		}
		if strings.ContainsAny(string(raw), "\n\r") {
			t.Fatalf("accepted a multi-line event %q", raw)
		}
		if info.Seq < 0 {
			t.Fatalf("accepted negative seq %d", info.Seq)
		}
		if _, err := parseStored(raw); err != nil {
			t.Fatalf("accepted event does not re-parse: %v", err)
		}
	})
}
