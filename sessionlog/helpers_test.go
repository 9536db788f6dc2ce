package sessionlog

import (
	"bufio"
	"bytes"
	"errors"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// lines turns event texts into a log.
func lines(evs ...string) [][]byte {
	out := make([][]byte, len(evs))
	for i, e := range evs {
		out[i] = []byte(e)
	}
	return out
}

func isReason(err error, reason sessionstore.Reason) bool {
	var se *sessionstore.Error
	return errors.As(err, &se) && se.Reason == reason
}

// wantErr fails unless err is a *sessionstore.Error with the reason and,
// when msg is not empty, exactly that message.
func wantErr(t *testing.T, err error, reason sessionstore.Reason, msg string) {
	t.Helper()
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		t.Fatalf("got error %v, want a *sessionstore.Error with reason %s", err, reason)
	}
	if se.Reason != reason {
		t.Fatalf("got reason %s (%q), want %s", se.Reason, se.Message, reason)
	}
	if msg != "" && se.Message != msg {
		t.Fatalf("got message\n  %q\nwant\n  %q", se.Message, msg)
	}
}

// oneTurnLog is the fixture of docs/contract.md.
func oneTurnLog() []string {
	return []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"one-turn-user","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"one-turn-assistant","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":5,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
}

// recordedLog reads a recorded reference log: its header line and its
// storage records, with the packed chunk rows (a storage format, not
// events) expanded into the assistant/chunk events they stand for.
func recordedLog(t testing.TB, name string) (header []byte, records, events [][]byte) {
	t.Helper()
	f, err := os.Open(filepath.Join(refdata.RecordedDir(t), name))
	if err != nil {
		t.Fatalf("recorded log: %v", err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	first := true
	for sc.Scan() {
		line := append([]byte(nil), sc.Bytes()...)
		if first {
			header, first = line, false
			continue
		}
		records = append(records, line)
		events = append(events, expandRow(t, line)...)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return header, records, events
}

func isPackedRow(line []byte) bool {
	return bytes.HasPrefix(line, []byte(`{"type":"text-chunks"`)) ||
		bytes.HasPrefix(line, []byte(`{"type":"reasoning-chunks"`)) ||
		bytes.HasPrefix(line, []byte(`{"type":"tool-call-chunks"`))
}

// expandRow decodes a packed chunk row (docs/events.md#packed-rows); other lines pass through.
func expandRow(t testing.TB, line []byte) [][]byte {
	t.Helper()
	if !isPackedRow(line) {
		return [][]byte{line}
	}
	row, err := parseValue(line)
	if err != nil {
		t.Fatalf("packed row: %v", err)
	}
	tag := row.get("type").s
	d := row.get("data")
	seq, tm := row.get("seq0").n, row.get("time0").n
	var n int
	var pieces []*value
	if tag == "tool-call-chunks" {
		pieces = d.get("args").arr
	} else {
		pieces = d.get("texts").arr
	}
	n = len(pieces)
	out := make([][]byte, 0, n)
	for k := 0; k < n; k++ {
		if k > 0 {
			tm += d.get("dt").arr[k-1].n
		}
		var chunk *value
		switch tag {
		case "text-chunks":
			chunk = jsObj(jsMem("type", jsStr("text-delta")), jsMem("index", d.get("index")), jsMem("text", pieces[k]))
		case "reasoning-chunks":
			chunk = jsObj(jsMem("type", jsStr("reasoning-delta")), jsMem("index", d.get("index")), jsMem("text", pieces[k]))
		default:
			chunk = jsObj(jsMem("type", jsStr("tool-call-delta")), jsMem("index", d.get("index")), jsMem("id", d.get("id")),
				jsMem("name", d.get("name")), jsMem("argumentsDelta", pieces[k]))
		}
		ev := jsObj(jsMem("type", jsStr("assistant/chunk")), jsMem("seq", jsNum(seq+float64(k))), jsMem("time", jsNum(tm)),
			jsMem("data", jsObj(jsMem("turn", d.get("turn")), jsMem("step", d.get("step")), jsMem("chunk", chunk))))
		out = append(out, appendJSON(nil, ev))
	}
	return out
}

func joinLines(b [][]byte) string {
	var sb strings.Builder
	for _, l := range b {
		sb.Write(l)
		sb.WriteByte('\n')
	}
	return sb.String()
}
