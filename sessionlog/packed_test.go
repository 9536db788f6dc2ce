package sessionlog

import (
	"bytes"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// docs/contract.md#log-one-turn: the packed run at seqs 6–8 and the three events load returns.
func TestExpandPackedRowSpec12_1(t *testing.T) {
	row := `{"type":"text-chunks","seq0":6,"time0":1755600000401,"data":{"turn":1,"step":1,"index":0,"dt":[12,9],"texts":["Hel","lo","!"]}}`
	want := []string{
		`{"type":"assistant/chunk","seq":6,"time":1755600000401,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hel"}}}`,
		`{"type":"assistant/chunk","seq":7,"time":1755600000413,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"lo"}}}`,
		`{"type":"assistant/chunk","seq":8,"time":1755600000422,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"!"}}}`,
	}
	got, err := ExpandPackedRow([]byte(row))
	if err != nil {
		t.Fatal(err)
	}
	if joinLines(got) != strings.Join(want, "\n")+"\n" {
		t.Fatalf("got\n%s\nwant\n%s", joinLines(got), strings.Join(want, "\n"))
	}
	ok, tag := IsPackedRow([]byte(row))
	if !ok || tag != RowTextChunks {
		t.Fatalf("IsPackedRow = %v %q", ok, tag)
	}
}

// docs/events.md#packed-rows: the member shapes of the three row kinds, in the key order the
// reference's expandRow builds (and JSON.stringify writes).
func TestExpandPackedRowKinds(t *testing.T) {
	cases := []struct {
		name, row string
		want      []string
	}{
		{"reasoning", `{"type":"reasoning-chunks","seq0":3,"time0":100,"data":{"turn":2,"step":1,"index":1,"dt":[0,5],"texts":["a","b","c"]}}`, []string{
			`{"type":"assistant/chunk","seq":3,"time":100,"data":{"turn":2,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"a"}}}`,
			`{"type":"assistant/chunk","seq":4,"time":100,"data":{"turn":2,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"b"}}}`,
			`{"type":"assistant/chunk","seq":5,"time":105,"data":{"turn":2,"step":1,"chunk":{"type":"reasoning-delta","index":1,"text":"c"}}}`,
		}},
		{"tool call with name", `{"type":"tool-call-chunks","seq0":0,"time0":7,"data":{"turn":1,"step":2,"index":0,"dt":[1,1],"id":"call_1","name":"bash","args":["{\"c","md\":","1}"]}}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":7,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":0,"id":"call_1","name":"bash","argumentsDelta":"{\"c"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":8,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":0,"id":"call_1","name":"bash","argumentsDelta":"md\":"}}}`,
			`{"type":"assistant/chunk","seq":2,"time":9,"data":{"turn":1,"step":2,"chunk":{"type":"tool-call-delta","index":0,"id":"call_1","name":"bash","argumentsDelta":"1}"}}}`,
		}},
		{"tool call without name, data keys in another order", `{"data":{"args":["x","y","z"],"dt":[1,2],"id":"c","index":3,"step":1,"turn":1},"time0":10,"seq0":9,"type":"tool-call-chunks"}`, []string{
			`{"type":"assistant/chunk","seq":9,"time":10,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":3,"id":"c","argumentsDelta":"x"}}}`,
			`{"type":"assistant/chunk","seq":10,"time":11,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":3,"id":"c","argumentsDelta":"y"}}}`,
			`{"type":"assistant/chunk","seq":11,"time":13,"data":{"turn":1,"step":1,"chunk":{"type":"tool-call-delta","index":3,"id":"c","argumentsDelta":"z"}}}`,
		}},
		// Negative gaps are legal (a clock step back); numbers are written
		// as JSON.stringify writes them (1.0 → 1, -0 → 0, 1e2 → 100).
		{"negative gap and number forms", `{"type":"text-chunks","seq0":-0,"time0":1e2,"data":{"turn":1.0,"step":2.5,"index":0,"dt":[-50],"texts":["p","q"]}}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":100,"data":{"turn":1,"step":2.5,"chunk":{"type":"text-delta","index":0,"text":"p"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":50,"data":{"turn":1,"step":2.5,"chunk":{"type":"text-delta","index":0,"text":"q"}}}`,
		}},
		// One member is a legal row (the decoder does not enforce the writer's
		// minimum run of 3).
		{"single member", `{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[""]}}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":""}}}`,
		}},
		// Strings are re-serialised by JSON.stringify: escapes normalised,
		// lone surrogates kept as \udxxx, U+2028 and "/" verbatim.
		{"string escapes", `{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0,0],"texts":["\u00e9\/\u2028","\ud800x\u0001","\"\\\n\t"]}}`, []string{
			`{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"é/` + "\u2028" + `"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\ud800x\u0001"}}}`,
			`{"type":"assistant/chunk","seq":2,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"\"\\\n\t"}}}`,
		}},
		// JSON.parse semantics: whitespace includes CR, a repeated key takes
		// its last value.
		{"JSON.parse semantics", "{\"type\":\"text-chunks\",\r\n \"seq0\":1,\"seq0\":0,\"time0\":1,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[1,1],\"texts\":[\"a\",\"b\",\"c\"],\"turn\":3}}\r", []string{
			`{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":3,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":2,"data":{"turn":3,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}}`,
			`{"type":"assistant/chunk","seq":2,"time":3,"data":{"turn":3,"step":1,"chunk":{"type":"text-delta","index":0,"text":"c"}}}`,
		}},
		// Buffer.toString('utf8') reads an ill-formed sequence as U+FFFD.
		{"ill-formed UTF-8", "{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":1,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[0],\"texts\":[\"a\xffb\",\"\xe2\x82\"]}}", []string{
			`{"type":"assistant/chunk","seq":0,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"a` + "\uFFFD" + `b"}}}`,
			`{"type":"assistant/chunk","seq":1,"time":1,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"` + "\uFFFD" + `"}}}`,
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, err := ExpandPackedRow([]byte(c.row))
			if err != nil {
				t.Fatal(err)
			}
			if joinLines(got) != strings.Join(c.want, "\n")+"\n" {
				t.Fatalf("got\n%s\nwant\n%s", joinLines(got), strings.Join(c.want, "\n"))
			}
		})
	}
}

// docs/events.md#packed-rows: decoding validates exactly, with the reference's reasons.
func TestExpandPackedRowMalformed(t *testing.T) {
	const ok = `"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}`
	cases := []struct{ row, why string }{
		{`{"type":"text-chunks","seq0":0,"time0":1,` + ok + `,"extra":1}`, "envelope must be exactly {type, seq0, time0, data}"},
		{`{"type":"text-chunks","seq0":0,` + ok + `}`, "envelope must be exactly {type, seq0, time0, data}"},
		{`{"type":"text-chunks","seq0":-1,"time0":1,` + ok + `}`, "seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":0.5,"time0":1,` + ok + `}`, "seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":"0","time0":1,` + ok + `}`, "seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":9007199254740992,"time0":1,` + ok + `}`, "seq0 must be a non-negative safe integer"},
		{`{"type":"text-chunks","seq0":0,"time0":1.5,` + ok + `}`, "time0 must be a safe integer"},
		{`{"type":"text-chunks","seq0":0,"time0":null,` + ok + `}`, "time0 must be a safe integer"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":null}`, "data must be an object"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":"x"}`, "data must be an object"},
		// An array is a record to the reference's isRecord, then fails the key check.
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":[]}`, "data must be exactly {turn, step, index, dt, texts}"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"args":["a","b","c"]}}`, "data must be exactly {turn, step, index, dt, texts}"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":1,` + ok + `}`, "data must be exactly {turn, step, index, id, name?, dt, args}"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"id":5,"dt":[],"args":["a"]}}`, "id (and name when present) must be strings"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"id":"c","name":null,"dt":[],"args":["a"]}}`, "id (and name when present) must be strings"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":"1","step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`, "turn/step/index must be numbers"},
		{`{"type":"reasoning-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":null,"dt":[1,1],"texts":["a","b","c"]}}`, "turn/step/index must be numbers"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":[]}}`, "texts must be a non-empty string array"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a",2]}}`, "texts must be a non-empty string array"},
		{`{"type":"tool-call-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"id":"c","dt":[],"args":"a"}}`, "args must be a non-empty string array"},
		// The payload is checked before dt.
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":"x","texts":[1]}}`, "texts must be a non-empty string array"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,1.5],"texts":["a","b","c"]}}`, "dt must be an array of safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":{},"texts":["a","b","c"]}}`, "dt must be an array of safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a","b"]}}`, "dt length 0 does not match 2 members"},
		{`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,1,1],"texts":["a","b"]}}`, "dt length 3 does not match 2 members"},
		{`{"type":"text-chunks","seq0":9007199254740990,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[0,0,0],"texts":["a","b","c","d"]}}`, "member seqs must stay safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":9007199254740990,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`, "member times must stay safe integers"},
		{`{"type":"text-chunks","seq0":0,"time0":-9007199254740991,"data":{"turn":1,"step":1,"index":0,"dt":[-1],"texts":["a","b"]}}`, "member times must stay safe integers"},
	}
	for _, c := range cases {
		tag := c.row[strings.Index(c.row, `"type":"`)+8:]
		tag = tag[:strings.IndexByte(tag, '"')]
		_, err := ExpandPackedRow([]byte(c.row))
		wantErr(t, err, sessionstore.ReasonCorruption, "malformed "+tag+" storage row: "+c.why)
		// The scanner sees the same failure (docs/events.md#committed-region treats it as unparsable).
		_, err = DecodeStorageLine([]byte(c.row))
		wantErr(t, err, sessionstore.ReasonCorruption, "malformed "+tag+" storage row: "+c.why)
	}
}

// The reference evaluates `seq0 + payload.length - 1` in doubles, left to
// right: at seq0 = 2^53-1 with two members the sum rounds back into safe
// range, so the row is accepted and its second member gets seq 2^53.
func TestExpandPackedRowFloatBounds(t *testing.T) {
	got, err := ExpandPackedRow([]byte(`{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}`))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(got[1], []byte(`"seq":9007199254740992,`)) {
		t.Fatalf("second member %s", got[1])
	}
}

func TestExpandPackedRowNotARow(t *testing.T) {
	for _, line := range []string{
		`{"type":"assistant/chunk","seq":0,"time":1,"data":{}}`,
		`["text-chunks"]`,
		`{"type":"text-chunks"`,
		`null`,
		``,
	} {
		if _, err := ExpandPackedRow([]byte(line)); !isReason(err, sessionstore.ReasonCorruption) {
			t.Errorf("%q: err = %v", line, err)
		}
		if ok, _ := IsPackedRow([]byte(line)); ok {
			t.Errorf("%q: IsPackedRow", line)
		}
	}
}

func TestIsPackedRow(t *testing.T) {
	cases := map[string]string{
		`{"type":"text-chunks"}`:                       RowTextChunks, // detection only; ExpandPackedRow refuses it
		`{"seq0":0,"type":"reasoning-chunks"}`:         RowReasoningChunks,
		` {"type" : "tool-call-chunks" , "x":[1,{}]} `: RowToolCallChunks,
		`{"type":"text-chunk\u0073"}`:                  RowTextChunks,
		`{"type":"x","type":"text-chunks"}`:            RowTextChunks, // the last value wins
		`{"type":"text-chunks","type":"x"}`:            "",
		`{"type":"session"}`:                           "",
		`{"data":{"type":"text-chunks"}}`:              "",
		`{"type":"text-chunks",}`:                      "",
	}
	for line, want := range cases {
		ok, tag := IsPackedRow([]byte(line))
		if ok != (want != "") || tag != want {
			t.Errorf("%s: IsPackedRow = %v %q, want %q", line, ok, tag, want)
		}
	}
}

// The scanner's view of a line (docs/events.md#committed-region, the reference's consumeEventLine).
func TestDecodeStorageLine(t *testing.T) {
	t.Run("verbatim event", func(t *testing.T) {
		line := []byte(`{"type":"turn/end","seq":13,"time":5,"data":{"turn":1,"reason":{"kind":"completed"}}}`)
		rec, err := DecodeStorageLine(line)
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Events) != 1 || !bytes.Equal(rec.Events[0], line) || rec.Row != "" || !rec.TurnEnd ||
			!rec.FirstSeqIs(13) || rec.FirstSeqIs(12) || rec.SeqText != "13" || rec.Null || rec.Repaired {
			t.Fatalf("%+v", rec)
		}
	})
	t.Run("packed row", func(t *testing.T) {
		rec, err := DecodeStorageLine([]byte(`{"type":"text-chunks","seq0":6,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`))
		if err != nil {
			t.Fatal(err)
		}
		if len(rec.Events) != 3 || rec.Row != RowTextChunks || rec.TurnEnd || !rec.FirstSeqIs(6) || rec.SeqText != "6" {
			t.Fatalf("%+v", rec)
		}
	})
	// `got ${event.seq}` in the gap message.
	for line, want := range map[string]string{
		`{"type":"x","seq":"5"}`:         "5",
		`{"type":"x"}`:                   "undefined",
		`{"type":"x","seq":null}`:        "null",
		`{"type":"x","seq":[1,[2,3]]}`:   "1,2,3",
		`{"type":"x","seq":{}}`:          "[object Object]",
		`{"type":"x","seq":1e21}`:        "1e+21",
		`{"type":"x","seq":2,"seq":1.5}`: "1.5",
		`42`:                             "undefined",
		`"turn/end"`:                     "undefined",
		`[{"seq":0}]`:                    "undefined",
	} {
		rec, err := DecodeStorageLine([]byte(line))
		if err != nil {
			t.Fatal(line, err)
		}
		if rec.SeqText != want || rec.TurnEnd || rec.SeqIsNumber && line != `{"type":"x","seq":1e21}` && line != `{"type":"x","seq":2,"seq":1.5}` {
			t.Errorf("%s: %+v, want SeqText %q", line, rec, want)
		}
	}
	t.Run("seq -0 continues 0, 1.0 continues 1", func(t *testing.T) {
		for line, n := range map[string]int64{`{"seq":-0}`: 0, `{"seq":1.0}`: 1, `{"seq":1e0}`: 1} {
			rec, err := DecodeStorageLine([]byte(line))
			if err != nil || !rec.FirstSeqIs(n) {
				t.Errorf("%s: %+v %v", line, rec, err)
			}
		}
	})
	t.Run("null", func(t *testing.T) {
		rec, err := DecodeStorageLine([]byte(" null "))
		if err != nil || !rec.Null {
			t.Fatalf("%+v %v", rec, err)
		}
	})
	t.Run("JSON.parse accepts CR whitespace and repeated keys", func(t *testing.T) {
		line := []byte("{\"type\":\"turn/start\",\"seq\":7,\"type\":\"turn/end\",\"seq\":0}\r")
		rec, err := DecodeStorageLine(line)
		if err != nil || !rec.TurnEnd || !rec.FirstSeqIs(0) || !bytes.Equal(rec.Events[0], line) {
			t.Fatalf("%+v %v", rec, err)
		}
	})
	t.Run("ill-formed UTF-8 is replaced", func(t *testing.T) {
		rec, err := DecodeStorageLine([]byte("{\"seq\":0,\"data\":\"a\xc0\xafb\"}"))
		if err != nil || !rec.Repaired || string(rec.Events[0]) != "{\"seq\":0,\"data\":\"a\uFFFD\uFFFDb\"}" {
			t.Fatalf("%+v %v", rec, err)
		}
	})
	t.Run("not JSON", func(t *testing.T) {
		for _, line := range []string{``, `{not json`, `{"seq":0}x`, `{"seq":01}`, "{\"a\":\"\t\"}", `{"a":"\x"}`, "\ufeff{}", `{'a':1}`} {
			if _, err := DecodeStorageLine([]byte(line)); !isReason(err, sessionstore.ReasonCorruption) {
				t.Errorf("%q: err = %v", line, err)
			}
		}
	})
	// docs/events.md#packed-rows caveat: a logical event named like a row tag is read as a
	// (malformed) row.
	t.Run("logical event with a row tag", func(t *testing.T) {
		_, err := DecodeStorageLine([]byte(`{"type":"text-chunks","seq":3,"time":1,"data":null,"ignorable":true}`))
		wantErr(t, err, sessionstore.ReasonCorruption, "malformed text-chunks storage row: envelope must be exactly {type, seq0, time0, data}")
	})
}

// Buffer.toString('utf8'): one U+FFFD per maximal subpart.
func TestWellFormedUTF8(t *testing.T) {
	cases := map[string]string{
		"plain é 😀":                "plain é 😀",
		"\xff":                     "\uFFFD",
		"a\xe2\x82b":               "a\uFFFDb",           // truncated 3-byte sequence: one subpart
		"\xe2\x82":                 "\uFFFD",             // … at the end
		"\xf0\x9f\x98":             "\uFFFD",             // truncated 4-byte sequence
		"\xed\xa0\x80":             "\uFFFD\uFFFD\uFFFD", // an encoded surrogate: ED then two stray bytes
		"\xc0\xaf":                 "\uFFFD\uFFFD",       // overlong: C0 is never a lead byte
		"\xe0\x80\x80":             "\uFFFD\uFFFD\uFFFD", // overlong 3-byte
		"\xf4\x90\x80\x80":         "\uFFFD\uFFFD\uFFFD\uFFFD",
		"\xf5":                     "\uFFFD",
		"\x80\x80":                 "\uFFFD\uFFFD",
		"\xe2\x82\xac\xe2\x82":     "€\uFFFD",
		"\xf0\x9f\x98\x80\xf0\x9f": "😀\uFFFD",
	}
	for in, want := range cases {
		got, replaced := wellFormedUTF8([]byte(in))
		if string(got) != want || replaced != (in != want) {
			t.Errorf("%q → %q (replaced %v), want %q", in, got, replaced, want)
		}
	}
}

// docs/events.md#header-line, docs/contract.md#other-tests: the header line.
func TestParseHeaderLine(t *testing.T) {
	t.Run("one-turn example log", func(t *testing.T) {
		h, err := ParseHeaderLine([]byte(`{"type":"session","version":0,"id":"demo-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`), "")
		if err != nil {
			t.Fatal(err)
		}
		want := sessionstore.Header{ID: "demo-1", CreatedAt: 1755600000000, Cwd: ptr("/home/u/proj"), DelegationDepth: ptr[int64](0)}
		if !h.Equal(want) {
			t.Fatalf("%+v", h)
		}
		if string(HeaderLine(h)) != `{"type":"session","version":0,"id":"demo-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}` {
			t.Fatalf("round trip %s", HeaderLine(h))
		}
	})
	t.Run("forked-child example log, every optional field", func(t *testing.T) {
		line := `{"type":"session","version":0,"id":"child-1","createdAt":1755602000000,"cwd":"/home/u/proj","parentSession":"parent-1","seedLength":6,"origin":"subagent","delegationDepth":2,"agentPreset":"minimal","futureField":[1]}`
		h, err := ParseHeaderLine([]byte(line), "")
		if err != nil {
			t.Fatal(err)
		}
		want := sessionstore.Header{ID: "child-1", CreatedAt: 1755602000000, Cwd: ptr("/home/u/proj"), ParentSession: ptr("parent-1"),
			SeedLength: ptr[int64](6), Origin: ptr("subagent"), DelegationDepth: ptr[int64](2), AgentPreset: ptr("minimal")}
		if !h.Equal(want) {
			t.Fatalf("%+v", h)
		}
	})
	t.Run("JSON.parse forms", func(t *testing.T) {
		h, err := ParseHeaderLine([]byte("{\"type\":\"session\",\"version\":-0,\"id\":\"x\",\"id\":\"\\ud800\",\"createdAt\":1e3,\"delegationDepth\":0}\r"), "")
		if err != nil {
			t.Fatal(err)
		}
		if h.ID != "\xed\xa0\x80" || h.CreatedAt != 1000 || h.Version != 0 {
			t.Fatalf("%+v", h)
		}
	})

	const notHeader = "corrupt session log: first line is not a session header"
	for _, c := range []struct {
		name, line string
		reason     sessionstore.Reason
		msg        string
	}{
		{"not JSON", `not json`, sessionstore.ReasonCorruption, "corrupt session log: header line is not valid JSON"},
		{"empty", ``, sessionstore.ReasonCorruption, "corrupt session log: header line is not valid JSON"},
		{"header line 42", `42`, sessionstore.ReasonCorruption, notHeader},
		{"not a session", `{"type":"event"}`, sessionstore.ReasonCorruption, notHeader},
		{"array", `[{"type":"session"}]`, sessionstore.ReasonCorruption, notHeader},
		{"foreign version first", `{"type":"session","version":42,"id":"foreign","futureOnly":true}`, sessionstore.ReasonFormatUnsupported,
			"session \"foreign\" uses log format v42, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: /r/p/session.jsonl)"},
		{"foreign version, numeric id", `{"type":"session","version":42,"id":123}`, sessionstore.ReasonFormatUnsupported,
			"session \"123\" uses log format v42, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: /r/p/session.jsonl)"},
		{"foreign version, no type", `{"version":7}`, sessionstore.ReasonFormatUnsupported,
			"session \"undefined\" uses log format v7, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: /r/p/session.jsonl)"},
		{"older version", `{"type":"session","version":-1,"id":"old","createdAt":1,"delegationDepth":0}`, sessionstore.ReasonFormatUnsupported,
			"session \"old\" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it (raw log: /r/p/session.jsonl)"},
		{"fractional version", `{"version":0.5,"id":"f"}`, sessionstore.ReasonFormatUnsupported,
			"session \"f\" uses log format v0.5, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: /r/p/session.jsonl)"},
		{"string version", `{"type":"session","version":"0","id":"s","createdAt":1,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"createdAt 1.5", `{"type":"session","version":0,"id":"c","createdAt":1.5,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"createdAt -1", `{"type":"session","version":0,"id":"c","createdAt":-1,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"createdAt 2^53", `{"type":"session","version":0,"id":"c","createdAt":9007199254740992,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"createdAt -0", `{"type":"session","version":0,"id":"c","createdAt":-0,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"delegationDepth missing", `{"type":"session","version":0,"id":"d","createdAt":1}`, sessionstore.ReasonCorruption, notHeader},
		{"delegationDepth string", `{"type":"session","version":0,"id":"d","createdAt":1,"delegationDepth":"1"}`, sessionstore.ReasonCorruption, notHeader},
		{"delegationDepth 1.5", `{"type":"session","version":0,"id":"d","createdAt":1,"delegationDepth":1.5}`, sessionstore.ReasonCorruption, notHeader},
		{"delegationDepth -1", `{"type":"session","version":0,"id":"d","createdAt":1,"delegationDepth":-1}`, sessionstore.ReasonCorruption, notHeader},
		{"delegationDepth -0", `{"type":"session","version":0,"id":"d","createdAt":1,"delegationDepth":-0}`, sessionstore.ReasonCorruption, notHeader},
		{"agentPreset 7", `{"type":"session","version":0,"id":"p","createdAt":1,"delegationDepth":0,"agentPreset":7}`, sessionstore.ReasonCorruption, notHeader},
		{"origin other", `{"type":"session","version":0,"id":"o","createdAt":1,"delegationDepth":0,"origin":"user"}`, sessionstore.ReasonCorruption, notHeader},
		{"origin null", `{"type":"session","version":0,"id":"o","createdAt":1,"delegationDepth":0,"origin":null}`, sessionstore.ReasonCorruption, notHeader},
		{"id missing", `{"type":"session","version":0,"createdAt":1,"delegationDepth":0}`, sessionstore.ReasonCorruption, notHeader},
		{"retired sandboxMode", `{"type":"session","version":0,"id":"r","createdAt":1,"delegationDepth":0,"sandboxMode":"x"}`, sessionstore.ReasonCorruption, "session header uses retired policy baseline fields"},
		{"retired approvalPolicy", `{"type":"session","version":0,"id":"r","createdAt":1,"delegationDepth":0,"approvalPolicy":null}`, sessionstore.ReasonCorruption, "session header uses retired policy baseline fields"},
		{"cwd not a string", `{"type":"session","version":0,"id":"w","createdAt":1,"cwd":5,"delegationDepth":0}`, sessionstore.ReasonInvalidStored,
			`stored session "w" failed validation: Error: session header cwd must be a string`},
		{"parentSession not a string", `{"type":"session","version":0,"id":"w","createdAt":1,"parentSession":null,"delegationDepth":0}`, sessionstore.ReasonInvalidStored,
			`stored session "w" failed validation: Error: session header parentSession must be a string`},
		{"seedLength fractional", `{"type":"session","version":0,"id":"w","createdAt":1,"seedLength":1.5,"delegationDepth":0}`, sessionstore.ReasonInvalidStored,
			`stored session "w" failed validation: Error: session header seedLength must be a non-negative safe integer`},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := ParseHeaderLine([]byte(c.line), "/r/p/session.jsonl")
			wantErr(t, err, c.reason, c.msg)
		})
	}
}

// The recorded reference logs: every packed row expands exactly as the
// independent test helper expands it, and every log is contiguous.
func TestExpandPackedRowRecordedLogs(t *testing.T) {
	for _, name := range []string{"web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl", "cli-parallel-file-reads.session.jsonl"} {
		t.Run(name, func(t *testing.T) {
			header, records, _ := recordedLog(t, name)
			if _, err := ParseHeaderLine(header, ""); err != nil {
				t.Fatal(err)
			}
			rows := 0
			var seq int64
			for _, r := range records {
				rec, err := DecodeStorageLine(r)
				if err != nil {
					t.Fatal(err)
				}
				if !rec.FirstSeqIs(seq) {
					t.Fatalf("seq %s, want %d", rec.SeqText, seq)
				}
				seq += int64(len(rec.Events))
				if rec.Row == "" {
					continue
				}
				rows++
				if got, want := joinLines(rec.Events), joinLines(expandRow(t, r)); got != want {
					t.Fatalf("row %s\nexpanded\n%s\nhelper\n%s", r, got, want)
				}
			}
			if rows == 0 && name != "cli-parallel-file-reads.session.jsonl" {
				t.Fatal("no packed rows")
			}
		})
	}
}

// FuzzExpandPackedRow: never panics; an accepted row expands to events
// that are each one JSON object (by this package's strict parser) of type
// assistant/chunk with contiguous seqs from seq0, one per payload entry.
func FuzzExpandPackedRow(f *testing.F) {
	for _, s := range []string{
		`{"type":"text-chunks","seq0":6,"time0":1755600000401,"data":{"turn":1,"step":1,"index":0,"dt":[12,9],"texts":["Hel","lo","!"]}}`,
		`{"type":"tool-call-chunks","seq0":0,"time0":7,"data":{"turn":1,"step":2,"index":0,"dt":[1,1],"id":"call_1","name":"bash","args":["{\"c","md\":","1}"]}}`,
		`{"type":"reasoning-chunks","seq0":3,"time0":-5,"data":{"turn":1e400,"step":-0,"index":0.5,"dt":[-1],"texts":["\ud800","\u2028"]}}`,
		`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a","b"]}}`,
		`{"type":"text-chunks","seq0":9007199254740991,"time0":0,"data":{"turn":1,"step":1,"index":0,"dt":[0],"texts":["a","b"]}}`,
		"{\"type\":\"text-chunks\",\"seq0\":0,\"time0\":1,\"data\":{\"turn\":1,\"step\":1,\"index\":0,\"dt\":[0],\"texts\":[\"\xff\",\"\x00\"]}}",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		events, err := ExpandPackedRow(line)
		ok, tag := IsPackedRow(line)
		rec, decErr := DecodeStorageLine(line)
		if err != nil {
			if ok && decErr == nil {
				t.Fatalf("ExpandPackedRow failed (%v) but DecodeStorageLine accepted row %q", err, tag)
			}
			return
		}
		if !ok || decErr != nil || rec.Row != tag || joinLines(rec.Events) != joinLines(events) {
			t.Fatalf("inconsistent: IsPackedRow %v %q, DecodeStorageLine %v", ok, tag, decErr)
		}
		if len(events) == 0 {
			t.Fatal("no events")
		}
		for k, ev := range events {
			v, err := parseValue(ev)
			if err != nil || v.k != kObject {
				t.Fatalf("event %d %s: %v", k, ev, err)
			}
			if !v.get("type").strEq("assistant/chunk") || !v.hasOnlyKeys([]string{"type", "seq", "time", "data"}) {
				t.Fatalf("event %d %s", k, ev)
			}
			if s := v.get("seq"); s == nil || s.k != kNumber || s.n != rec.Seq+float64(k) {
				t.Fatalf("event %d %s: seq, want %v", k, ev, rec.Seq+float64(k))
			}
			if !isSafeInt(v.get("time").n) {
				t.Fatalf("event %d %s: time", k, ev)
			}
		}
	})
}
