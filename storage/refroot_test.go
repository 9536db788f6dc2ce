package storage

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// Example logs of docs/contract.md#example-logs, as the reference's JSONL backend
// stores them (raw mode).
var (
	// docs/contract.md#log-one-turn: a clean one-turn session with a packed chunk run at seqs 6–8.
	rrSpec12_1 = []string{
		`{"type":"session","version":0,"id":"demo-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1755600000100,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1755600000101,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":1755600000102,"data":{"content":[{"type":"text","text":"Say hello"}],"source":{"kind":"user"},"role":"user","id":"5b1e0c7a-0000-4000-8000-000000000001"},"surfaceOp":"append"}`,
		`{"type":"request/header","seq":3,"time":1755600000103,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}`,
		`{"type":"request/context","seq":4,"time":1755600000104,"data":{"provider":"deepseek","model":"deepseek-chat","contextWindow":131072}}`,
		`{"type":"assistant/chunk","seq":5,"time":1755600000400,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}`,
		`{"type":"text-chunks","seq0":6,"time0":1755600000401,"data":{"turn":1,"step":1,"index":0,"dt":[12,9],"texts":["Hel","lo","!"]}}`,
		`{"type":"assistant/chunk","seq":9,"time":1755600000423,"data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"Hello!"}}}}`,
		`{"type":"assistant/chunk","seq":10,"time":1755600000424,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}`,
		`{"type":"assistant/message","seq":11,"time":1755600000425,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello!"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"5b1e0c7a-0000-4000-8000-000000000002"}},"sourceEventSeqs":[5,6,7,8,9,10],"surfaceOp":"append"}`,
		`{"type":"step/end","seq":12,"time":1755600000426,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":13,"time":1755600000427,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
	// docs/contract.md#log-one-turn: what the packed row loads as.
	rrSpec12_1Expanded = []string{
		`{"type":"assistant/chunk","seq":6,"time":1755600000401,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"Hel"}}}`,
		`{"type":"assistant/chunk","seq":7,"time":1755600000413,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"lo"}}}`,
		`{"type":"assistant/chunk","seq":8,"time":1755600000422,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"!"}}}`,
	}
	// docs/contract.md#log-plan-mode: plan mode, a command between turns, an ignorable foreign event.
	rrSpec12_2 = []string{
		`{"type":"session","version":0,"id":"plan-1","createdAt":1755601000000,"cwd":"/home/u/proj","delegationDepth":0}`,
		`{"type":"command/run","seq":0,"time":1755601000010,"data":{"commandId":"cmd-k3x9-1","name":"plan","args":"","source":{"kind":"user"}}}`,
		`{"type":"plan/mode","seq":1,"time":1755601000011,"data":{"active":true}}`,
		`{"type":"command/done","seq":2,"time":1755601000012,"data":{"commandId":"cmd-k3x9-1","kind":"success","text":"Plan mode on. Use /plan off to leave."}}`,
		`{"type":"turn/start","seq":3,"time":1755601000100,"data":{"turn":1}}`,
		`{"type":"step/start","seq":4,"time":1755601000102,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":5,"time":1755601000103,"data":{"content":[{"type":"text","text":"Plan the refactor"}],"source":{"kind":"user"},"role":"user","id":"9d0a1b2c-0000-4000-8000-000000000005"},"surfaceOp":"append"}`,
		`{"type":"request/header","seq":6,"time":1755601000104,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}`,
		`{"type":"assistant/message","seq":7,"time":1755601000900,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"# Refactor plan\n1. ..."}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"9d0a1b2c-0000-4000-8000-000000000007"}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":8,"time":1755601000901,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":9,"time":1755601000902,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"x-acme/audit","seq":10,"time":1755601001000,"data":{"note":"exported"},"ignorable":true}`,
	}
	// docs/contract.md#log-crash: a crash mid-turn; the last line is a torn fragment (no newline).
	rrSpec12_3 = []string{
		`{"type":"session","version":0,"id":"crash-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1755600001000,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1755600001001,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":1755600001002,"data":{"content":[{"type":"text","text":"Run the tests and show tsconfig.json"}],"source":{"kind":"user"},"role":"user","id":"0f2d7c8e-1111-4a1a-8a1a-000000000002"},"surfaceOp":"append"}`,
		`{"type":"request/header","seq":3,"time":1755600001003,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}`,
		`{"type":"assistant/message","seq":4,"time":1755600001500,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"},{"type":"tool-call","id":"call_b","name":"read","arguments":"{\"path\":\"tsconfig.json\"}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"0f2d7c8e-1111-4a1a-8a1a-000000000004"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":5,"time":1755600001501,"data":{"turn":1,"step":1,"callId":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"}}`,
	}
	rrSpec12_3Torn = `{"type":"tool/result","seq":6,"ti`
	// docs/contract.md#log-fork: a forked child (parentSession, seedLength) and its own turn.
	rrSpec12_4 = []string{
		`{"type":"session","version":0,"id":"child-1","createdAt":1755602000000,"cwd":"/home/u/proj","parentSession":"parent-1","seedLength":6,"delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1755600000100,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":1755600000101,"data":{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"role":"user","id":"aa000000-0000-4000-8000-000000000001"},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":1755600000102,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":1755600000103,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"aa000000-0000-4000-8000-000000000003"}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":4,"time":1755600000104,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":5,"time":1755600000105,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
		`{"type":"session/end-seed","seq":6,"time":1755602000001,"data":{}}`,
		`{"type":"turn/start","seq":7,"time":1755602000500,"data":{"turn":2}}`,
		`{"type":"turn/end","seq":8,"time":1755602000501,"data":{"turn":2,"reason":{"kind":"completed"}}}`,
	}
)

// A session in a nested project directory whose cwd and id need escaping
// (docs/events.md#layout): the directory names are pinned literally.
const (
	rrUnicodeCwd     = "/home/u/开发/~agent/nested dir"
	rrUnicodeProject = "--home-u-~5F00~53D1-~007Eagent-nested~0020dir--"
	rrUnicodeID      = "ünï/côdé~1"
	rrUnicodeSegment = "~00FCn~00EF~002Fc~00F4d~00E9~007E1"
)

func rrUnicodeLog() []string {
	return []string{
		`{"type":"session","version":0,"id":"ünï/côdé~1","createdAt":1,"cwd":"/home/u/开发/~agent/nested dir","delegationDepth":0,"agentPreset":"minimal"}`,
		`{"type":"turn/start","seq":0,"time":2,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":3,"data":{"content":[{"type":"text","text":"héllo 😀 \u2028"}],"source":{"kind":"user"},"role":"user","id":"u-1"},"surfaceOp":"append"}`,
		`{"type":"turn/end","seq":2,"time":4,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
}

// rrNoCwdLog is a session without cwd (stored under _no-cwd).
func rrNoCwdLog() []string {
	return []string{
		`{"type":"session","version":0,"id":"no-cwd-1","createdAt":5,"delegationDepth":1,"origin":"subagent"}`,
		`{"type":"turn/start","seq":0,"time":6,"data":{"turn":1}}`,
	}
}

// rrLines joins lines, each "\n"-terminated, as raw mode stores them (docs/events.md#zstd).
func rrLines(lines ...string) string {
	var b strings.Builder
	for _, l := range lines {
		b.WriteString(l)
		b.WriteByte('\n')
	}
	return b.String()
}

// rrZstd builds a zstd-mode artifact (docs/events.md#zstd): frame 1 holds the header line,
// each batch (a slice of record lines) one more frame.
func rrZstd(header string, batches ...[]string) []byte {
	out := EncodeFrame(nil, []byte(header+"\n"))
	for _, b := range batches {
		out = EncodeFrame(out, []byte(rrLines(b...)))
	}
	return out
}

func rrWrite(t *testing.T, path string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// rrExpected is what the reference loads from a docs/contract.md#example-logs log: every line after
// the header verbatim, packed rows expanded.
func rrExpected(t *testing.T, lines []string) []string {
	t.Helper()
	var out []string
	for _, l := range lines[1:] {
		if ok, _ := sessionlog.IsPackedRow([]byte(l)); ok {
			evs, err := sessionlog.ExpandPackedRow([]byte(l))
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range evs {
				out = append(out, string(e))
			}
			continue
		}
		out = append(out, l)
	}
	return out
}

func rrEvents(rs RootSession) []string {
	out := make([]string, len(rs.Events))
	for i, e := range rs.Events {
		out[i] = string(e)
	}
	return out
}

func rrSameEvents(t *testing.T, what string, got, want []string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d events, want %d\ngot  %q\nwant %q", what, len(got), len(want), got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("%s: event %d\ngot  %s\nwant %s", what, i, got[i], want[i])
		}
	}
}

// rrCheckContiguous checks that every event is one JSON object whose seq is
// its index (decoded without converting other numbers, so any JSON number
// elsewhere is fine).
func rrCheckContiguous(t testing.TB, events [][]byte) {
	t.Helper()
	for i, ev := range events {
		var m map[string]json.RawMessage
		if err := json.Unmarshal(ev, &m); err != nil {
			t.Fatalf("event %d is not one JSON object: %v\n%s", i, err, ev)
		}
		f, err := strconv.ParseFloat(string(m["seq"]), 64)
		if err != nil || f != float64(i) {
			t.Fatalf("event %d has seq %s\n%s", i, m["seq"], ev)
		}
	}
}

// rrWantErr checks that err is a *RootError naming path whose cause is a
// *sessionstore.Error with the reason and exactly the text msg.
func rrWantErr(t *testing.T, err error, path string, reason sessionstore.Reason, msg string) *RootError {
	t.Helper()
	var re *RootError
	if !errors.As(err, &re) {
		t.Fatalf("error %v (%T), want a *RootError", err, err)
	}
	if re.Path != path {
		t.Fatalf("error path %q, want %q", re.Path, path)
	}
	var se *sessionstore.Error
	if !errors.As(err, &se) || se.Reason != reason || se.Message != msg {
		t.Fatalf("error %q\nwant %s %q", err, reason, msg)
	}
	if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), msg) {
		t.Fatalf("Error() = %q does not name the file and the reference text", err)
	}
	return re
}

// rrWalk collects a walk.
func rrWalk(t *testing.T, root string) []RootSession {
	t.Helper()
	var out []RootSession
	if err := WalkRoot(root, func(rs RootSession) error {
		out = append(out, rs)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return out
}

// rrBuildRoot writes the docs/contract.md#example-logs examples, a unicode nested-cwd session and a
// no-cwd session as a reference root in one encoding, plus entries the
// reference ignores.
func rrBuildRoot(t *testing.T, zstd bool) string {
	t.Helper()
	root := t.TempDir()
	name := RawArtifactName
	if zstd {
		name = ArtifactName
	}
	put := func(project, segment string, lines []string, torn string) {
		path := filepath.Join(root, project, segment, name)
		if !zstd {
			rrWrite(t, path, []byte(rrLines(lines...)+torn))
			return
		}
		// Two durable batches, one frame each; a torn fragment becomes a
		// structurally incomplete final frame (its checksum cut short).
		body := lines[1:]
		half := len(body) / 2
		data := rrZstd(lines[0], body[:half], body[half:])
		if torn != "" {
			frame := EncodeFrame(nil, []byte(torn))
			data = append(data, frame[:len(frame)-1]...)
		}
		rrWrite(t, path, data)
	}
	put("--home-u-proj--", "demo-1", rrSpec12_1, "")
	put("--home-u-proj--", "plan-1", rrSpec12_2, "")
	put("--home-u-proj--", "crash-1", rrSpec12_3, rrSpec12_3Torn)
	put("--home-u-proj--", "child-1", rrSpec12_4, "")
	put(rrUnicodeProject, rrUnicodeSegment, rrUnicodeLog(), "")
	put("_no-cwd", "no-cwd-1", rrNoCwdLog(), "")

	// Ignored by the reference's listing (docs/events.md#layout; the reference's
	// JSONL tests: "extra files … ignored"):
	rrWrite(t, filepath.Join(root, "README.txt"), []byte("not a project"))
	rrWrite(t, filepath.Join(root, "--home-u-proj--", "notes.txt"), []byte("x"))
	rrWrite(t, filepath.Join(root, "--home-u-proj--", "demo-1", "scratch.json"), []byte("{}"))
	rrWrite(t, filepath.Join(root, "--home-u-proj--", "demo-1", name+".0123456789ab.tmp"), []byte("partial"))
	if err := os.MkdirAll(filepath.Join(root, "--home-u-proj--", "not-a-session"), 0o700); err != nil {
		t.Fatal(err)
	}
	// A symlinked project directory is not a directory entry to readdir.
	if err := os.Symlink(filepath.Join(root, "--home-u-proj--"), filepath.Join(root, "--zz-link--")); err != nil {
		t.Fatal(err)
	}
	return root
}

// The layout of docs/events.md#layout, both encodings (docs/events.md#zstd),
// the docs/contract.md#example-logs examples: what the reference loads from
// each session, in a deterministic order.
func TestWalkRootReferenceLayout(t *testing.T) {
	for _, enc := range []string{EncodingJSONL, EncodingZstd} {
		t.Run(enc, func(t *testing.T) {
			zstd := enc == EncodingZstd
			root := rrBuildRoot(t, zstd)
			got := rrWalk(t, root)

			// The pinned names are what sessionlog computes (docs/events.md#layout examples).
			if k, _ := sessionlog.ProjectKey(rrUnicodeCwd); k != rrUnicodeProject {
				t.Fatalf("ProjectKey = %s", k)
			}
			if s, _ := sessionlog.EncodeSegment(rrUnicodeID); s != rrUnicodeSegment {
				t.Fatalf("EncodeSegment = %s", s)
			}

			name := RawArtifactName
			if zstd {
				name = ArtifactName
			}
			wantOrder := []string{
				filepath.Join("--home-u-proj--", "child-1"),
				filepath.Join("--home-u-proj--", "crash-1"),
				filepath.Join("--home-u-proj--", "demo-1"),
				filepath.Join("--home-u-proj--", "plan-1"),
				filepath.Join(rrUnicodeProject, rrUnicodeSegment),
				filepath.Join("_no-cwd", "no-cwd-1"),
			}
			if len(got) != len(wantOrder) {
				t.Fatalf("%d sessions, want %d: %+v", len(got), len(wantOrder), got)
			}
			by := map[string]RootSession{}
			for i, rs := range got {
				if want := filepath.Join(root, wantOrder[i], name); rs.Path != want {
					t.Fatalf("session %d at %s, want %s", i, rs.Path, want)
				}
				if rs.Err != nil {
					t.Fatalf("%s: %v", rs.Path, rs.Err)
				}
				if rs.Encoding != enc {
					t.Fatalf("%s: encoding %q", rs.Path, rs.Encoding)
				}
				rrCheckContiguous(t, rs.Events)
				by[rs.Header.ID] = rs
			}

			// docs/contract.md#log-one-turn: 14 events; the packed row loads as three
			// assistant/chunk events.
			demo := by["demo-1"]
			want := rrExpected(t, rrSpec12_1)
			rrSameEvents(t, "demo-1", rrEvents(demo), want)
			rrSameEvents(t, "demo-1 row", rrEvents(demo)[6:9], rrSpec12_1Expanded)
			if demo.Torn || len(demo.Events) != 14 {
				t.Fatalf("demo-1: torn %v, %d events", demo.Torn, len(demo.Events))
			}
			// The header is the first line minus type (docs/contract.md#log-one-turn), delegationDepth kept.
			if string(sessionlog.HeaderLine(demo.Header)) != rrSpec12_1[0] {
				t.Fatalf("demo-1 header %s", sessionlog.HeaderLine(demo.Header))
			}

			// docs/contract.md#log-plan-mode: all 11 events unchanged, the ignorable foreign event included
			// (its vocabulary is judged on load, docs/events.md#unknown-types, not here).
			rrSameEvents(t, "plan-1", rrEvents(by["plan-1"]), rrSpec12_2[1:])

			// docs/contract.md#log-crash: the torn fragment is dropped; seqs 0…5 remain (the closers
			// are the coordinator's repair, docs/events.md#crash-repair, not part of what is stored).
			crash := by["crash-1"]
			rrSameEvents(t, "crash-1", rrEvents(crash), rrSpec12_3[1:])
			if !crash.Torn || len(crash.Notes) == 0 {
				t.Fatalf("crash-1: torn %v, notes %q", crash.Torn, crash.Notes)
			}

			// docs/contract.md#log-fork: the forked child's header carries its lineage.
			child := by["child-1"]
			rrSameEvents(t, "child-1", rrEvents(child), rrSpec12_4[1:])
			if child.Header.ParentSession == nil || *child.Header.ParentSession != "parent-1" ||
				child.Header.SeedLength == nil || *child.Header.SeedLength != 6 {
				t.Fatalf("child-1 header %+v", child.Header)
			}
			if string(sessionlog.HeaderLine(child.Header)) != rrSpec12_4[0] {
				t.Fatalf("child-1 header %s", sessionlog.HeaderLine(child.Header))
			}

			// docs/events.md#layout: a nested cwd and an id that need escaping.
			uni := by[rrUnicodeID]
			rrSameEvents(t, "unicode", rrEvents(uni), rrUnicodeLog()[1:])
			if uni.Header.Cwd == nil || *uni.Header.Cwd != rrUnicodeCwd || uni.Header.AgentPreset == nil {
				t.Fatalf("unicode header %+v", uni.Header)
			}

			// _no-cwd: a header without cwd; an open turn is returned as stored.
			nc := by["no-cwd-1"]
			rrSameEvents(t, "no-cwd", rrEvents(nc), rrNoCwdLog()[1:])
			if nc.Header.Cwd != nil || nc.Header.Origin == nil || *nc.Header.DelegationDepth != 1 {
				t.Fatalf("no-cwd header %+v", nc.Header)
			}

			for _, rs := range got {
				if rs.Header.ID != "crash-1" && (rs.Torn || len(rs.Notes) != 0) {
					t.Fatalf("%s: torn %v notes %q", rs.Header.ID, rs.Torn, rs.Notes)
				}
			}

			// ReadRootSession reads one file the same way.
			one, err := ReadRootSession(filepath.Join(root, "--home-u-proj--", "demo-1", name))
			if err != nil {
				t.Fatal(err)
			}
			rrSameEvents(t, "ReadRootSession", rrEvents(one), want)
		})
	}
}

// docs/events.md#zstd, docs/contract.md#other-tests: the frames the existing
// encoder writes are what the reference writes: independent standard frames
// with the content-checksum flag.
func TestRootZstdFramesConform(t *testing.T) {
	data := rrZstd(rrSpec12_1[0], rrSpec12_1[1:])
	frames, torn, err := ScanFrames(data)
	if err != nil || torn != -1 || len(frames) != 2 {
		t.Fatalf("frames %v torn %d err %v", frames, torn, err)
	}
	for _, f := range frames {
		if !bytes.Equal(data[f.Start:f.Start+4], zstdMagicBytes) || data[f.Start+4]&0x04 == 0 {
			t.Fatalf("frame at %d lacks the magic or the checksum flag", f.Start)
		}
	}
	d, err := DecodeArtifact(data)
	if err != nil || string(d.Text) != rrLines(rrSpec12_1...) {
		t.Fatalf("decoded %q, %v", d.Text, err)
	}
}

func rrHeader(id string) string {
	return `{"type":"session","version":0,"id":"` + id + `","createdAt":1,"delegationDepth":0}`
}

func rrEv(typ string, seq int) string {
	return fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":{"turn":1}}`, typ, seq, seq+1)
}

// docs/events.md#committed-region and the reference's scanner tests
// (docs/contract.md#other-tests), raw mode.
func TestReadRootSessionRawScanRules(t *testing.T) {
	h := rrHeader("s")
	type outcome struct {
		seqs    int  // events kept (seqs 0…seqs-1), when no error
		torn    bool // a torn tail was dropped
		errMsg  string
		errLine int
	}
	cases := []struct {
		name string
		file string
		want outcome
	}{
		{"header only is valid", rrLines(h), outcome{seqs: 0}},
		{"clean", rrLines(h, rrEv("turn/start", 0), rrEv("turn/end", 1)), outcome{seqs: 2}},
		{"torn final fragment", rrLines(h, rrEv("turn/start", 0)) + `{"type":"step/start","seq":1,"ti`, outcome{seqs: 1, torn: true}},
		{"torn fragment after boundary newline", rrLines(h, rrEv("turn/start", 0)) + "\nignored torn tail", outcome{seqs: 1, torn: true}},
		{"tolerated corrupt suffix", rrLines(h, rrEv("turn/start", 0), "{not json", rrEv("step/start", 1)), outcome{seqs: 1, torn: true}},
		{"corrupt line before a turn/end", rrLines(h, "{not json", rrEv("turn/end", 1)), outcome{errMsg: "corrupt session log: unparsable committed event at line 1", errLine: 1}},
		{"seq gap before a turn/end", rrLines(h, rrEv("turn/start", 0), rrEv("step/start", 2), rrEv("turn/end", 3)), outcome{errMsg: "corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)", errLine: 2}},
		{"the gap line is itself the turn/end", rrLines(h, rrEv("turn/end", 1)), outcome{errMsg: "corrupt session log: seq gap in committed region at line 1 (expected 0, got 1)", errLine: 1}},
		{"seq gap after the last turn/end", rrLines(h, rrEv("turn/start", 0), rrEv("turn/end", 1), rrEv("step/start", 9)), outcome{seqs: 2, torn: true}},
		{"seq gap with no turn/end", rrLines(h, rrEv("turn/start", 0), rrEv("step/start", 2)), outcome{seqs: 1, torn: true}},
		{"corrupt line after the last turn/end", rrLines(h, rrEv("turn/start", 0), "{not json"), outcome{seqs: 1, torn: true}},
		{"empty line is unparsable", rrLines(h, rrEv("turn/start", 0), "", rrEv("step/start", 1)), outcome{seqs: 1, torn: true}},
		{"empty line before a turn/end", rrLines(h, rrEv("turn/start", 0), "", rrEv("turn/end", 1)), outcome{errMsg: "corrupt session log: unparsable committed event at line 2", errLine: 2}},
		{"missing seq", rrLines(h, `{"type":"turn/start","time":1,"data":{}}`, rrEv("turn/end", 0)), outcome{errMsg: "corrupt session log: seq gap in committed region at line 1 (expected 0, got undefined)", errLine: 1}},
		{"string seq", rrLines(h, `{"type":"turn/end","seq":"0","time":1,"data":{}}`), outcome{errMsg: "corrupt session log: seq gap in committed region at line 1 (expected 0, got 0)", errLine: 1}},
		{"null line", rrLines(h, "null"), outcome{errMsg: "Cannot read properties of null (reading 'seq')", errLine: 1}},
		{"null line after an issue", rrLines(h, "{", "null"), outcome{errMsg: "Cannot read properties of null (reading 'type')", errLine: 2}},
		// Packed rows (docs/events.md#packed-rows, docs/contract.md#other-tests).
		{"packed row advances the cursor", rrLines(h, rrEv("turn/start", 0),
			`{"type":"text-chunks","seq0":1,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`, rrEv("turn/end", 4)), outcome{seqs: 5}},
		{"malformed row before a turn/end", rrLines(h,
			`{"type":"text-chunks","seq0":0,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[],"texts":["a","b"]}}`, rrEv("turn/end", 2)),
			outcome{errMsg: "corrupt session log: unparsable committed event at line 1", errLine: 1}},
		{"row with a gap after the last turn/end is dropped whole", rrLines(h, rrEv("turn/start", 0),
			`{"type":"text-chunks","seq0":2,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`), outcome{seqs: 1, torn: true}},
		// JSON.parse reads CRLF files: CR is whitespace (lines stay verbatim).
		{"CRLF line ends", h + "\r\n" + rrEv("turn/start", 0) + "\r\n" + rrEv("turn/end", 1) + "\r\n", outcome{seqs: 2}},
		// Header failures (docs/events.md#header-line).
		{"empty file", "", outcome{errMsg: "empty or header-less session log"}},
		{"header without newline", h, outcome{errMsg: "empty or header-less session log"}},
		{"header not JSON", "not json\n", outcome{errMsg: "corrupt session log: header line is not valid JSON"}},
		{"not a session header", `{"type":"event"}` + "\n", outcome{errMsg: "corrupt session log: first line is not a session header"}},
	}
	dir := t.TempDir()
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, fmt.Sprintf("case%d", i), RawArtifactName)
			rrWrite(t, path, []byte(c.file))
			rs, err := ReadRootSession(path)
			if c.want.errMsg != "" {
				re := rrWantErr(t, err, path, sessionstore.ReasonCorruption, c.want.errMsg)
				if re.Line != c.want.errLine || rs.Events != nil || rs.Err != err {
					t.Fatalf("line %d (want %d), events %v, Err %v", re.Line, c.want.errLine, rs.Events, rs.Err)
				}
				if re.Line > 0 {
					// The offset is the start of the offending line in the file.
					lines := strings.SplitAfter(c.file, "\n")
					off := 0
					for _, l := range lines[:re.Line] {
						off += len(l)
					}
					if re.Offset != int64(off) || !strings.Contains(err.Error(), fmt.Sprintf("(byte %d)", off)) {
						t.Fatalf("offset %d, want %d: %v", re.Offset, off, err)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Events) != c.want.seqs || rs.Torn != c.want.torn || (rs.Torn != (len(rs.Notes) > 0)) {
				t.Fatalf("%d events, torn %v, notes %q; want %d, torn %v", len(rs.Events), rs.Torn, rs.Notes, c.want.seqs, c.want.torn)
			}
			rrCheckContiguous(t, rs.Events)
			if rs.Encoding != EncodingJSONL || rs.Header.ID != "s" {
				t.Fatalf("%+v", rs)
			}
		})
	}

	t.Run("verbatim bytes, and the expanded row", func(t *testing.T) {
		path := filepath.Join(dir, "rows", RawArtifactName)
		crlf := rrEv("turn/start", 0) + "\r"
		rrWrite(t, path, []byte(rrLines(h, crlf,
			`{"type":"text-chunks","seq0":1,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`)))
		rs, err := ReadRootSession(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(rs.Events[0]) != crlf ||
			string(rs.Events[2]) != `{"type":"assistant/chunk","seq":2,"time":3,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"b"}}}` {
			t.Fatalf("%q", rrEvents(rs))
		}
	})

	t.Run("ill-formed UTF-8 reads as U+FFFD", func(t *testing.T) {
		path := filepath.Join(dir, "utf8", RawArtifactName)
		rrWrite(t, path, []byte(rrLines(h, "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"x\":\"a\xffb\"}}")))
		rs, err := ReadRootSession(path)
		if err != nil {
			t.Fatal(err)
		}
		if string(rs.Events[0]) != "{\"type\":\"turn/start\",\"seq\":0,\"time\":1,\"data\":{\"x\":\"a\uFFFDb\"}}" || len(rs.Notes) != 1 {
			t.Fatalf("%q %q", rs.Events, rs.Notes)
		}
	})

	t.Run("format refusal names the raw log", func(t *testing.T) {
		path := filepath.Join(dir, "foreign", RawArtifactName)
		rrWrite(t, path, []byte(rrLines(`{"type":"session","version":42,"id":"foreign","futureOnly":true}`, "junk row")))
		_, err := ReadRootSession(path)
		rrWantErr(t, err, path, sessionstore.ReasonFormatUnsupported,
			"session \"foreign\" uses log format v42, but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it (raw log: "+path+")")
		if !errors.Is(err, sessionstore.ErrFormatUnsupported) {
			t.Fatal("errors.Is FORMAT_UNSUPPORTED")
		}
	})
}

// docs/events.md#zstd, docs/events.md#committed-region and the reference's
// zstd tests (docs/contract.md#other-tests).
func TestReadRootSessionZstdRules(t *testing.T) {
	h := rrHeader("z")
	turn := []string{rrEv("turn/start", 0), rrEv("step/start", 1), rrEv("step/end", 2), rrEv("turn/end", 3)}
	dir := t.TempDir()
	n := 0
	read := func(t *testing.T, data []byte) (string, RootSession, error) {
		t.Helper()
		n++
		path := filepath.Join(dir, fmt.Sprint(n), ArtifactName)
		rrWrite(t, path, data)
		rs, err := ReadRootSession(path)
		return path, rs, err
	}
	ok := func(t *testing.T, data []byte, seqs int, torn bool) RootSession {
		t.Helper()
		_, rs, err := read(t, data)
		if err != nil {
			t.Fatal(err)
		}
		if len(rs.Events) != seqs || rs.Torn != torn || rs.Encoding != EncodingZstd {
			t.Fatalf("%d events torn %v (%q), want %d torn %v", len(rs.Events), rs.Torn, rs.Notes, seqs, torn)
		}
		rrCheckContiguous(t, rs.Events)
		return rs
	}
	fails := func(t *testing.T, data []byte, msg string) *RootError {
		t.Helper()
		path, rs, err := read(t, data)
		if rs.Events != nil {
			t.Fatal("events on error")
		}
		return rrWantErr(t, err, path, sessionstore.ReasonCorruption, msg)
	}

	t.Run("header frame and one batch frame", func(t *testing.T) { ok(t, rrZstd(h, turn), 4, false) })
	t.Run("one frame per batch", func(t *testing.T) { ok(t, rrZstd(h, turn[:1], turn[1:3], turn[3:]), 4, false) })
	t.Run("header-only", func(t *testing.T) { ok(t, rrZstd(h), 0, false) })
	t.Run("empty batch frame", func(t *testing.T) {
		ok(t, cat(rrZstd(h, turn[:2]), EncodeFrame(nil, nil), rrZstd(h, turn[2:])[len(EncodeFrame(nil, []byte(h+"\n"))):]), 4, false)
	})
	// The reference scans the complete frames' plaintext as one stream, so a
	// line may span two complete frames (our own writer never does this, and
	// DecodeArtifact, which checks each frame's end, refuses it).
	t.Run("a line spanning two complete frames", func(t *testing.T) {
		body := rrLines(turn...)
		cut := len(turn[0]) + 10
		data := cat(EncodeFrame(nil, []byte(h+"\n")), EncodeFrame(nil, []byte(body[:cut])), EncodeFrame(nil, []byte(body[cut:])))
		ok(t, data, 4, false)
		if _, err := DecodeArtifact(data); err == nil {
			t.Fatal("DecodeArtifact accepted a frame ending mid-line")
		}
	})
	t.Run("a complete frame ends mid-record", func(t *testing.T) {
		body := rrLines(turn...)
		fails(t, cat(rrZstd(h), EncodeFrame(nil, []byte(body[:len(body)-5]))), "corrupt Zstandard session log: complete frame contains a torn JSONL record")
	})
	t.Run("a tolerated-looking defect inside complete frames", func(t *testing.T) {
		re := fails(t, rrZstd(h, []string{rrEv("turn/start", 0), "{not json"}), "corrupt Zstandard session log: complete frame contains a torn JSONL record")
		if !strings.Contains(re.Detail, "unparsable committed event at line 2") {
			t.Fatalf("detail %q", re.Detail)
		}
	})
	t.Run("a defect followed by a turn/end in complete frames", func(t *testing.T) {
		re := fails(t, rrZstd(h, []string{rrEv("turn/start", 0)}, []string{rrEv("step/start", 2)}, []string{rrEv("turn/end", 3)}),
			"corrupt session log: seq gap in committed region at line 2 (expected 1, got 2)")
		// Located in the frame holding the line, at its plaintext offset.
		frames, _, _ := ScanFrames(rrZstd(h, []string{rrEv("turn/start", 0)}, []string{rrEv("step/start", 2)}, []string{rrEv("turn/end", 3)}))
		if re.Offset != frames[2].Start || re.PlainOffset != 0 {
			t.Fatalf("at %d/%d, want frame %d", re.Offset, re.PlainOffset, frames[2].Start)
		}
	})
	t.Run("checksum-corrupt event frame", func(t *testing.T) {
		data := rrZstd(h, turn)
		data[len(data)-1] ^= 0xFF
		frames, _, _ := ScanFrames(data)
		fails(t, data, fmt.Sprintf("corrupt Zstandard session log: frame at byte %d failed validation", frames[1].Start))
	})
	t.Run("checksum-corrupt header frame", func(t *testing.T) {
		data := rrZstd(h, turn)
		hdr := EncodeFrame(nil, []byte(h+"\n"))
		data[len(hdr)-1] ^= 0xFF
		fails(t, data, "corrupt Zstandard session log: frame at byte 0 failed validation")
	})
	t.Run("zero-length file", func(t *testing.T) { fails(t, nil, "empty or header-less Zstandard session log") })
	t.Run("magic only", func(t *testing.T) { fails(t, zstdMagicBytes, "empty or header-less Zstandard session log") })
	t.Run("two lines in the header frame", func(t *testing.T) {
		fails(t, EncodeFrame(nil, []byte(rrLines(h, turn[0]))), "corrupt Zstandard session log: first frame is not exactly one header line")
	})
	t.Run("empty header frame", func(t *testing.T) {
		fails(t, cat(EncodeFrame(nil, nil), rrZstd(h, turn)), "corrupt Zstandard session log: first frame is not exactly one header line")
	})
	t.Run("invalid magic", func(t *testing.T) {
		data := rrZstd(h, turn)
		fails(t, cat(data, 0, 0, 0, 0), fmt.Sprintf("corrupt Zstandard session log: invalid frame magic at byte %d", len(data)))
	})
	t.Run("reserved descriptor bit", func(t *testing.T) {
		data := rrZstd(h)
		fails(t, cat(data, zstdMagicBytes, 0x08, 0, 0, 0), fmt.Sprintf("corrupt Zstandard session log: reserved frame-header bit at byte %d", len(data)+4))
	})

	// Torn final frames (docs/events.md#zstd): the complete records recovered from them are kept.
	t.Run("torn frame: two complete lines and a partial third", func(t *testing.T) {
		frame := EncodeFrame(nil, []byte(rrLines(rrEv("turn/start", 4), rrEv("step/start", 5))+`{"type":"assistant/chunk","seq":6`))
		rs := ok(t, cat(rrZstd(h, turn), frame[:len(frame)-1]), 6, true)
		if !strings.Contains(strings.Join(rs.Notes, "\n"), "2 complete events recovered") {
			t.Fatalf("notes %q", rs.Notes)
		}
	})
	t.Run("torn frame missing only its last checksum byte", func(t *testing.T) {
		frame := EncodeFrame(nil, []byte(rrLines(rrEv("turn/start", 4), rrEv("turn/end", 5))))
		ok(t, cat(rrZstd(h, turn), frame[:len(frame)-1]), 6, true)
	})
	t.Run("torn inside the frame header", func(t *testing.T) {
		ok(t, cat(rrZstd(h, turn), zstdMagicBytes[:2]), 4, true)
	})
	t.Run("torn raw block", func(t *testing.T) {
		lines := rrLines(rrEv("turn/start", 4), rrEv("step/start", 5))
		frame := cat(zstdMagicBytes, 0x04, 0x00, rawBlk(lines, true), 1, 2, 3, 4)
		ok(t, cat(rrZstd(h, turn), frame[:len(frame)-4-8]), 5, true) // the checksum and the end of the second line missing
	})
	t.Run("recovered records follow the scan rules", func(t *testing.T) {
		// A gap with no turn/end is dropped as the torn tail …
		frame := EncodeFrame(nil, []byte(rrLines(rrEv("turn/start", 4), rrEv("step/start", 9))))
		ok(t, cat(rrZstd(h, turn), frame[:len(frame)-1]), 5, true)
		// … but a gap a turn/end commits is corruption.
		frame = EncodeFrame(nil, []byte(rrLines(rrEv("step/start", 9), rrEv("turn/end", 10))))
		fails(t, cat(rrZstd(h, turn), frame[:len(frame)-1]), "corrupt session log: seq gap in committed region at line 5 (expected 4, got 9)")
	})
	t.Run("encoding sniffed for an unknown name", func(t *testing.T) {
		path := filepath.Join(dir, "sniff", "log.bin")
		rrWrite(t, path, rrZstd(h, turn))
		rs, err := ReadRootSession(path)
		if err != nil || rs.Encoding != EncodingZstd || len(rs.Events) != 4 {
			t.Fatalf("%+v %v", rs, err)
		}
	})
}

// docs/events.md#layout: the layout rules and identity binding; unreadable sessions are
// reported and the walk goes on.
func TestWalkRootLayoutErrors(t *testing.T) {
	root := t.TempDir()
	log := func(id, cwd string) []byte {
		hdr := `{"type":"session","version":0,"id":"` + id + `","createdAt":1,` + cwd + `"delegationDepth":0}`
		return []byte(rrLines(hdr, rrEv("turn/start", 0)))
	}
	proj := filepath.Join(root, "--w--")
	rrWrite(t, filepath.Join(proj, "good", RawArtifactName), log("good", `"cwd":"/w",`))
	// The unsupported flat layout.
	rrWrite(t, filepath.Join(proj, "flat.jsonl"), log("flat", `"cwd":"/w",`))
	// Both encodings in one session directory.
	rrWrite(t, filepath.Join(proj, "both", RawArtifactName), log("both", `"cwd":"/w",`))
	rrWrite(t, filepath.Join(proj, "both", ArtifactName), rrZstd(`{"type":"session","version":0,"id":"both","createdAt":1,"cwd":"/w","delegationDepth":0}`))
	// One id in two project directories.
	rrWrite(t, filepath.Join(proj, "dup~002Fx", RawArtifactName), log("dup/x", `"cwd":"/w",`))
	rrWrite(t, filepath.Join(root, "--v--", "dup~002Fx", RawArtifactName), log("dup/x", `"cwd":"/v",`))
	// A header id rewritten to another session's id.
	rrWrite(t, filepath.Join(proj, "identity-a", RawArtifactName), log("identity-b", `"cwd":"/w",`))
	// A cwd that names another project directory.
	rrWrite(t, filepath.Join(proj, "moved", RawArtifactName), log("moved", `"cwd":"/elsewhere",`))
	// An id that cannot name a storage path.
	rrWrite(t, filepath.Join(proj, "empty-id", RawArtifactName), log("", `"cwd":"/w",`))
	// A corrupt session among good ones.
	rrWrite(t, filepath.Join(proj, "torn-committed", RawArtifactName), []byte(rrLines(rrHeader("torn-committed"), "{", rrEv("turn/end", 1))))
	// A project directory reached through a symlink: the reference's listing
	// does not enter it, but a header naming it passes the realpath check.
	rrWrite(t, filepath.Join(root, "--real--", "aliased", RawArtifactName), log("aliased", `"cwd":"/alias",`))
	if err := os.Symlink(filepath.Join(root, "--real--"), filepath.Join(root, "--alias--")); err != nil {
		t.Fatal(err)
	}

	got := rrWalk(t, root)
	byPath := map[string]RootSession{}
	var order []string
	for _, rs := range got {
		rel, _ := filepath.Rel(root, rs.Path)
		byPath[rel] = rs
		order = append(order, rel)
	}
	wantOrder := []string{
		"--real--/aliased/session.jsonl",
		"--v--/dup~002Fx/session.jsonl",
		"--w--/both",
		"--w--/dup~002Fx/session.jsonl",
		"--w--/empty-id/session.jsonl",
		"--w--/flat.jsonl",
		"--w--/good/session.jsonl",
		"--w--/identity-a/session.jsonl",
		"--w--/moved/session.jsonl",
		"--w--/torn-committed/session.jsonl",
	}
	if strings.Join(order, "\n") != strings.Join(wantOrder, "\n") {
		t.Fatalf("order\n%s\nwant\n%s", strings.Join(order, "\n"), strings.Join(wantOrder, "\n"))
	}
	for _, rel := range []string{"--real--/aliased/session.jsonl", "--w--/good/session.jsonl"} {
		if rs := byPath[rel]; rs.Err != nil || len(rs.Events) != 1 {
			t.Fatalf("%s: %+v", rel, rs)
		}
	}
	abs := func(rel string) string { return filepath.Join(root, rel) }
	rrWantErr(t, byPath["--w--/flat.jsonl"].Err, abs("--w--/flat.jsonl"), sessionstore.ReasonCorruption,
		`session artifact "`+abs("--w--/flat.jsonl")+`" uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading`)
	rrWantErr(t, byPath["--w--/both"].Err, abs("--w--/both"), sessionstore.ReasonCorruption,
		`session artifact "`+abs("--w--/both/session.jsonl")+`" uses .jsonl, but this backend is configured for compression "zstd"; use a separate root or select the matching compression mode`)
	for _, rel := range []string{"--v--/dup~002Fx/session.jsonl", "--w--/dup~002Fx/session.jsonl"} {
		rrWantErr(t, byPath[rel].Err, abs(rel), sessionstore.ReasonCorruption, `duplicate JSONL session id "dup/x" appears in multiple project directories`)
	}
	rrWantErr(t, byPath["--w--/identity-a/session.jsonl"].Err, abs("--w--/identity-a/session.jsonl"), sessionstore.ReasonCorruption,
		`corrupt session log "`+abs("--w--/identity-a/session.jsonl")+`": header id "identity-b" and cwd identify "`+abs("--w--/identity-b/session.jsonl")+`"`)
	rrWantErr(t, byPath["--w--/moved/session.jsonl"].Err, abs("--w--/moved/session.jsonl"), sessionstore.ReasonCorruption,
		`corrupt session log "`+abs("--w--/moved/session.jsonl")+`": header id "moved" and cwd identify "`+abs("--elsewhere--/moved/session.jsonl")+`"`)
	rrWantErr(t, byPath["--w--/empty-id/session.jsonl"].Err, abs("--w--/empty-id/session.jsonl"), sessionstore.ReasonCorruption,
		`corrupt session log "`+abs("--w--/empty-id/session.jsonl")+`": header id cannot name a storage path`)
	rrWantErr(t, byPath["--w--/torn-committed/session.jsonl"].Err, abs("--w--/torn-committed/session.jsonl"), sessionstore.ReasonCorruption,
		"corrupt session log: unparsable committed event at line 1")
	// A failed session still reports the header it read.
	if rs := byPath["--w--/identity-a/session.jsonl"]; rs.Header.ID != "identity-b" || rs.Events != nil {
		t.Fatalf("%+v", rs)
	}

	// fn's error stops the walk and is returned.
	stop := errors.New("stop")
	calls := 0
	if err := WalkRoot(root, func(RootSession) error { calls++; return stop }); err != stop || calls != 1 {
		t.Fatalf("err %v after %d calls", err, calls)
	}
	// A root that is not a listable directory is WalkRoot's own error.
	if err := WalkRoot(filepath.Join(root, "absent"), func(RootSession) error { return nil }); err == nil {
		t.Fatal("absent root accepted")
	}
	if err := WalkRoot(abs("--w--/good/session.jsonl"), func(RootSession) error { return nil }); err == nil {
		t.Fatal("file root accepted")
	}
}

// A root holding both encodings (in different sessions) is read session by
// session in each one's own encoding, with a note.
func TestWalkRootMixedEncodings(t *testing.T) {
	root := t.TempDir()
	rrWrite(t, filepath.Join(root, "--home-u-proj--", "demo-1", RawArtifactName), []byte(rrLines(rrSpec12_1...)))
	rrWrite(t, filepath.Join(root, "--home-u-proj--", "plan-1", ArtifactName), rrZstd(rrSpec12_2[0], rrSpec12_2[1:]))
	got := rrWalk(t, root)
	if len(got) != 2 || got[0].Encoding != EncodingJSONL || got[1].Encoding != EncodingZstd {
		t.Fatalf("%+v", got)
	}
	for _, rs := range got {
		if rs.Err != nil || len(rs.Notes) != 1 || !strings.Contains(rs.Notes[0], "separate root") {
			t.Fatalf("%s: %v %q", rs.Path, rs.Err, rs.Notes)
		}
	}
	rrSameEvents(t, "demo-1", rrEvents(got[0]), rrExpected(t, rrSpec12_1))
	rrSameEvents(t, "plan-1", rrEvents(got[1]), rrSpec12_2[1:])
}

// The reference harness's own recorded logs (raw JSONL files, not a root):
// counts after expanding packed rows, contiguity, and the same result when
// the same records are stored as zstd frames.
func TestReadRootSessionRecorded(t *testing.T) {
	dir := refdata.RecordedDir(t)
	cases := []struct {
		name, id string
		events   int
	}{
		{"web-plan-mode.session.jsonl", "rec-plan-mode", 61},
		{"web-fresh-round-trip.session.jsonl", "", 94},
		{"cli-parallel-file-reads.session.jsonl", "", 27},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			path := filepath.Join(dir, c.name)
			rs, err := ReadRootSession(path)
			if err != nil {
				t.Fatal(err)
			}
			if len(rs.Events) != c.events || rs.Torn || len(rs.Notes) != 0 || rs.Encoding != EncodingJSONL {
				t.Fatalf("%d events (want %d), torn %v, notes %q", len(rs.Events), c.events, rs.Torn, rs.Notes)
			}
			if c.id != "" && rs.Header.ID != c.id {
				t.Fatalf("header %+v", rs.Header)
			}
			rrCheckContiguous(t, rs.Events)

			// The same records as a zstd artifact in a root, one frame per 7 lines.
			raw, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			lines := strings.Split(strings.TrimSuffix(string(raw), "\n"), "\n")
			var batches [][]string
			for i := 1; i < len(lines); i += 7 {
				batches = append(batches, lines[i:min(i+7, len(lines))])
			}
			root := t.TempDir()
			zpath, err := ArtifactPath(root, rs.Header)
			if err != nil {
				t.Fatal(err)
			}
			rrWrite(t, zpath, rrZstd(lines[0], batches...))
			walked := rrWalk(t, root)
			if len(walked) != 1 || walked[0].Err != nil || walked[0].Path != zpath {
				t.Fatalf("%+v", walked)
			}
			rrSameEvents(t, "zstd", rrEvents(walked[0]), rrEvents(rs))
		})
	}
}

// FuzzReadRootSession: any raw-mode file bytes give either an error or
// contiguous events; re-reading the committed prefix gives the same events
// and no torn tail; and the same bytes stored as zstd frames (header frame,
// one body frame) give the same events or the same error — except that a
// torn raw tail makes the complete zstd frame "contain a torn JSONL record".
func FuzzReadRootSession(f *testing.F) {
	for _, lines := range [][]string{rrSpec12_1, rrSpec12_2, rrSpec12_4, rrUnicodeLog()} {
		f.Add([]byte(rrLines(lines...)))
	}
	f.Add([]byte(rrLines(rrSpec12_3...) + rrSpec12_3Torn))
	h := rrHeader("f")
	f.Add([]byte(rrLines(h, rrEv("turn/start", 0), "{", rrEv("turn/end", 2))))
	f.Add([]byte(rrLines(h, rrEv("turn/start", 0), `{"type":"text-chunks","seq0":1,"time0":2,"data":{"turn":1,"step":1,"index":0,"dt":[1,-1],"texts":["a","b","c"]}}`, "null")))
	f.Add([]byte(h + "\r\n" + `{"seq":0,"seq":-0}` + "\r\n\n"))
	f.Add([]byte(`{"version":3,"id":1}` + "\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		const path = "/fuzz/session.jsonl"
		rs, committed := decodeRootArtifact(path, EncodingJSONL, data)
		if rs.Err != nil {
			if rs.Events != nil || rs.Torn {
				t.Fatal("events or torn on error")
			}
			var re *RootError
			if !errors.As(rs.Err, &re) || re.Path != path {
				t.Fatalf("error %v does not name the file", rs.Err)
			}
		} else {
			rrCheckContiguous(t, rs.Events)
			if committed > int64(len(data)) || rs.Torn != (committed < int64(len(data))) {
				t.Fatalf("committed %d of %d, torn %v", committed, len(data), rs.Torn)
			}
			again, c2 := decodeRootArtifact(path, EncodingJSONL, data[:committed])
			if again.Err != nil || again.Torn || c2 != committed || len(again.Events) != len(rs.Events) {
				t.Fatalf("committed prefix reads differently: %v torn %v %d events", again.Err, again.Torn, len(again.Events))
			}
			for i := range rs.Events {
				if !bytes.Equal(rs.Events[i], again.Events[i]) {
					t.Fatalf("event %d differs", i)
				}
			}
		}

		nl := bytes.IndexByte(data, '\n')
		if nl < 0 {
			return
		}
		zdata := EncodeFrame(EncodeFrame(nil, data[:nl+1]), data[nl+1:])
		zs, _ := decodeRootArtifact(path, EncodingZstd, zdata)
		switch {
		case rs.Err != nil:
			var a, b *sessionstore.Error
			if zs.Err == nil || !errors.As(rs.Err, &a) || !errors.As(zs.Err, &b) || a.Message != b.Message {
				t.Fatalf("raw error %v, zstd %v", rs.Err, zs.Err)
			}
		case rs.Torn:
			var b *sessionstore.Error
			if zs.Err == nil || !errors.As(zs.Err, &b) || b.Message != "corrupt Zstandard session log: complete frame contains a torn JSONL record" {
				t.Fatalf("raw torn, zstd %v", zs.Err)
			}
		default:
			if zs.Err != nil || zs.Torn || len(zs.Events) != len(rs.Events) {
				t.Fatalf("raw %d events, zstd %v %d", len(rs.Events), zs.Err, len(zs.Events))
			}
			for i := range rs.Events {
				if !bytes.Equal(rs.Events[i], zs.Events[i]) {
					t.Fatalf("event %d differs", i)
				}
			}
		}
	})
}
