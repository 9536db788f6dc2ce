package sessionlog

import (
	"bytes"
	"errors"
	"os"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// normalizeChunked runs the Normalizer's two passes over log in chunks of k.
func normalizeChunked(id string, log [][]byte, k int) ([][]byte, error) {
	n := NewNormalizer(id, "/raw/path")
	for i := 0; i < len(log); i += k {
		n.Check(log[i:min(i+k, len(log))])
	}
	if err := n.Err(); err != nil {
		return nil, err
	}
	var out [][]byte
	for i := 0; i < len(log); i += k {
		evs, err := n.Next(log[i:min(i+k, len(log))])
		if err != nil {
			return nil, err
		}
		out = append(out, evs...)
	}
	return out, nil
}

// sameAsNormalize fails t unless the chunked passes give Normalize's answer
// (events or error, reason and text) for chunks of several sizes.
func sameAsNormalize(t *testing.T, log [][]byte) {
	t.Helper()
	want, werr := Normalize("s", log, "/raw/path")
	for _, k := range []int{1, 2, 3, 5, max(len(log), 1)} {
		got, err := normalizeChunked("s", log, k)
		var we, ge *sessionstore.Error
		if (werr == nil) != (err == nil) || (werr != nil && (!errors.As(werr, &we) || !errors.As(err, &ge) || *we != *ge)) {
			t.Fatalf("chunks of %d: error %v, Normalize's %v", k, err, werr)
		}
		if len(got) != len(want) {
			t.Fatalf("chunks of %d: %d events, Normalize %d", k, len(got), len(want))
		}
		for i := range got {
			if !bytes.Equal(got[i], want[i]) {
				t.Fatalf("chunks of %d: event %d\n%s\nNormalize:\n%s", k, i, got[i], want[i])
			}
		}
	}
}

func TestNormalizer_MatchesNormalize(t *testing.T) {
	recorded, err := os.ReadFile("testdata/stored_12_3.jsonl")
	if err != nil {
		t.Fatal(err)
	}
	legacyReplace := []string{`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":2,"time":1,"data":{"turn":1,"step":1,"content":[{"type":"tool-call","id":"c"}],"provenance":{"provider":"p","model":"m"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":3,"time":1,"data":{"callId":"c"}}`,
		`{"type":"tool/result","seq":4,"time":1,"data":{"callId":"c","content":[],"isError":true},"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":5,"time":1,"data":{"callId":"c","content":[],"isError":true},"surfaceOp":{"op":"replace","start":4,"end":4},"sourceEventSeqs":[4]}`}
	for _, tc := range []struct {
		name string
		log  [][]byte
	}{
		{"one turn", lines(oneTurnLog()...)},
		{"recorded", bytes.Split(bytes.TrimSuffix(recorded, []byte("\n")), []byte("\n"))},
		{"legacy replacement across chunks", lines(legacyReplace...)},
		{"header-delta after mode/set", lines(`{"type":"mode/set","seq":0,"time":1,"data":{}}`, `{"type":"turn/start","seq":1,"time":1,"data":{"turn":1}}`, `{"type":"request/header-delta","seq":2,"time":1,"data":{}}`)},
		{"refusal after a malformed shape", lines(`{"type":"turn/end","seq":0,"time":1,"data":{"turn":0}}`, `{"type":"mode/set","seq":1,"time":1,"data":{}}`)},
		{"request/header null data", lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"request/header","seq":1,"time":1,"data":null}`)},
		{"unknown type before a malformed shape", lines(`{"type":"x/y","seq":0,"time":1,"data":{}}`, `{"type":"turn/end","seq":1,"time":1,"data":{"turn":0}}`)},
		{"unknown after ignorable", lines(`{"type":"x/y","seq":0,"time":1,"data":{},"ignorable":true}`, `{"type":"x/z","seq":1,"time":1,"data":{}}`)},
		{"unparsable late event outranks a refusal", lines(`{"type":"mode/set","seq":0,"time":1,"data":{}}`, `{"type":"turn/start"`)},
		{"empty", nil},
	} {
		t.Run(tc.name, func(t *testing.T) { sameAsNormalize(t, tc.log) })
	}
}
