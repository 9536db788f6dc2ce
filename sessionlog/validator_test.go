package sessionlog

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// wholeView is what a view checked before the Validator: Closers, then
// ValidateSession over the log and its closers.
func wholeView(id string, norm [][]byte) ([][]byte, error) {
	closers, err := Closers(norm)
	if err != nil {
		return nil, WrapCorruption(id, err)
	}
	full := append(append([][]byte(nil), norm...), closers...)
	if err := ValidateSession(id, full); err != nil {
		return nil, err
	}
	return closers, nil
}

// sameAsWhole fails t unless the Validator, fed chunks of several sizes,
// gives wholeView's closers or error (reason and text); it returns them.
func sameAsWhole(t *testing.T, log [][]byte) ([][]byte, error) {
	t.Helper()
	want, werr := wholeView("s", log)
	for _, k := range []int{1, 2, 3, 7, max(len(log), 1)} {
		v := NewValidator("s")
		for i := 0; i < len(log); i += k {
			v.Add(log[i:min(i+k, len(log))])
		}
		got, err := v.Finish()
		var we, ge *sessionstore.Error
		if (werr == nil) != (err == nil) || (werr != nil && (!errors.As(werr, &we) || !errors.As(err, &ge) || *we != *ge)) {
			t.Fatalf("chunks of %d: error %v, the whole-log functions' %v", k, err, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("chunks of %d: %d closers, the whole-log functions %d", k, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("chunks of %d: closer %d\n%s\nwhole log:\n%s", k, i, got[i], want[i])
			}
		}
	}
	return want, werr
}

func TestValidator_MatchesWholeLog(t *testing.T) {
	base := oneTurnLog()
	toolResult := func(seq, text, data, op, src string) string {
		return `{"type":"tool/result","seq":` + seq + `,"time":9,"data":{"turn":1,"step":1,"message":{"id":"r","role":"user","content":[{"type":"tool-result","toolCallId":"c","content":[{"type":"text","text":"` + text +
			`"}]}],"source":{"kind":"tool","callId":"c"}}` + data + `},"sourceEventSeqs":` + src + `,"surfaceOp":` + op + `}`
	}
	replaceLog := func(replacements ...string) []string {
		return append(append(base[:5:5], toolResult("5", "long", `,"n":0,"o":{"a":1,"b":[2]}`, `"append"`, `[3]`)), replacements...)
	}
	replace := func(seq, of, data string) string {
		return toolResult(seq, "short", data, `{"op":"replace","start":`+of+`,"end":`+of+`}`, `[`+of+`]`)
	}
	openTurn := []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":2,"time":3,"data":{"turn":1,"step":1,"message":{"id":"a","role":"assistant","content":[{"type":"tool-call","id":"c1","name":"t","input":{}},{"type":"tool-call","id":"c2","name":"t","input":{}}],"source":{"kind":"model","provider":"p","model":"m"}}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":3,"time":4,"data":{"turn":1,"step":1,"callId":"c1"}}`,
	}
	tests := []struct {
		name    string
		log     []string
		closers int    // closers wanted when valid
		msg     string // "" = valid; else a part of the error wanted
	}{
		{"empty", nil, 0, ""},
		{"balanced", base, 0, ""},
		{"open step", base[:4], 2, ""},
		{"pending calls", openTurn, 4, ""},
		{"tool/result rewrite", replaceLog(replace("6", "5", `,"n":0,"o":{"a":1,"b":[2]}`)), 1, ""},
		{"rewrite equal by value, keys reordered", replaceLog(replace("6", "5", `,"o":{"b":[2.0],"a":1},"n":-0`)), 1, ""},
		{"rewrite of a rewrite", replaceLog(replace("6", "5", `,"n":0,"o":{"a":1,"b":[2]}`), replace("7", "6", `,"n":0,"o":{"a":1,"b":[2]}`)), 1, ""},
		{"rewrite changes data", replaceLog(replace("6", "5", `,"n":0,"o":{"a":1,"b":[3]}`)), 0, "may change only content"},
		{"rewrite adds a key", replaceLog(replace("6", "5", `,"n":0,"o":{"a":1,"b":[2],"c":null}`)), 0, "may change only content"},
		{"rewrite of a shadowed node", replaceLog(replace("6", "5", `,"n":0,"o":{"a":1,"b":[2]}`), replace("7", "5", `,"n":0,"o":{"a":1,"b":[2]}`)), 0, "start seq 5 not found in surface"},
		{"rewrite of a message", replaceLog(replace("6", "3", "")), 0, "must target a current tool/result"},
		{"scan error outranks an earlier invalid event", append([]string{`{"type":"turn/start","seq":7,"time":1,"data":{"turn":1}}`},
			`{"type":"assistant/message","seq":1,"time":1,"data":{"message":{"content":5}}}`), 0, "message content is not iterable"},
		{"late unparsable event outranks a scan error", append([]string{`{"type":"assistant/message","seq":0,"time":1,"data":{"message":{"content":5}}}`}, `{"type"`), 0,
			"stored event at index 1 is not a single-line JSON object"},
		{"open turn without a numeric last seq", []string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"x/y","seq":"1","time":1,"data":{}}`}, 0,
			"cannot close the open turn"},
		{"invalid event in an open turn", append(append([]string(nil), openTurn...), `{"type":"tool/call","seq":9,"time":4,"data":{"turn":1,"step":1,"callId":"c2"}}`), 0,
			"seed event at index 4 has seq 9 (expected 4)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			closers, err := sameAsWhole(t, lines(tt.log...))
			if tt.msg == "" {
				if err != nil || len(closers) != tt.closers {
					t.Fatalf("got %d closers, %v; want %d, nil", len(closers), err, tt.closers)
				}
				return
			}
			if !isReason(err, sessionstore.ReasonInvalidStored) || !strings.Contains(err.Error(), tt.msg) {
				t.Fatalf("got %v, want INVALID_STORED_EVENT with %q", err, tt.msg)
			}
		})
	}
	t.Run("recorded crash", func(t *testing.T) {
		norm, err := Normalize("s", storedPrefix12_3(t), "")
		if err != nil {
			t.Fatal(err)
		}
		if closers, err := sameAsWhole(t, norm); err != nil || len(closers) == 0 {
			t.Fatalf("got %d closers, %v", len(closers), err)
		}
	})
}

// FuzzSessionValidator compares the Validator, over chunks, with the whole-log
// Closers and ValidateSession on arbitrary logs.
func FuzzSessionValidator(f *testing.F) {
	f.Add([]byte(joinLines(lines(oneTurnLog()...))))
	f.Add([]byte(joinLines(lines(oneTurnLog()[:4]...))))
	f.Add([]byte("{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"turn\":1}}\n" +
		"{\"type\":\"step/start\",\"seq\":1,\"time\":1,\"data\":{\"turn\":1,\"step\":1}}\n" +
		"{\"type\":\"assistant/message\",\"seq\":2,\"time\":1,\"data\":{\"turn\":1,\"step\":1,\"message\":{\"id\":\"a\",\"role\":\"assistant\",\"content\":[{\"type\":\"tool-call\",\"id\":\"c\",\"name\":\"t\",\"input\":{}}],\"source\":{\"kind\":\"model\",\"provider\":\"p\",\"model\":\"m\"}}},\"surfaceOp\":\"append\"}\n" +
		"{\"type\":\"tool/call\",\"seq\":3,\"time\":1,\"data\":{\"turn\":1,\"step\":1,\"callId\":\"c\"}}\n" +
		"{\"type\":\"tool/result\",\"seq\":4,\"time\":1,\"data\":{\"turn\":1,\"step\":1,\"message\":{\"id\":\"r\",\"role\":\"user\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c\",\"content\":[]}],\"source\":{\"kind\":\"tool\",\"callId\":\"c\"}},\"x\":{\"a\":1,\"b\":2}},\"sourceEventSeqs\":[3],\"surfaceOp\":\"append\"}\n" +
		"{\"type\":\"tool/result\",\"seq\":5,\"time\":1,\"data\":{\"turn\":1,\"step\":1,\"message\":{\"id\":\"r\",\"role\":\"user\",\"content\":[{\"type\":\"tool-result\",\"toolCallId\":\"c\",\"content\":[1]}],\"source\":{\"kind\":\"tool\",\"callId\":\"c\"}},\"x\":{\"b\":2,\"a\":1}},\"sourceEventSeqs\":[4],\"surfaceOp\":{\"op\":\"replace\",\"start\":4,\"end\":4}}"))
	f.Fuzz(func(t *testing.T, in []byte) {
		log := bytes.Split(in, []byte("\n"))
		if len(log) <= 64 {
			sameAsWhole(t, log)
		}
	})
}
