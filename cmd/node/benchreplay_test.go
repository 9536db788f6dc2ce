package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

func TestReplayBatches(t *testing.T) {
	// Event types by letter, so a case reads as the event sequence:
	// T turn/start, S step/start, s step/end, t turn/end, x anything else.
	types := func(code string) []string {
		var out []string
		for _, c := range code {
			out = append(out, map[rune]string{'T': evTurnStart, 'S': evStepStart, 's': evStepEnd, 't': evTurnEnd, 'x': "assistant/chunk"}[c])
		}
		return out
	}
	b := func(start, end int, balanced bool) replayBatch { return replayBatch{start, end, balanced} }
	for _, c := range []struct {
		name      string
		code      string
		maxEvents int
		maxBytes  int // every event is 10 bytes
		want      []replayBatch
	}{
		{"one turn, one step", "TxSxxst", 1000, 1 << 20,
			[]replayBatch{b(0, 2, false), b(2, 6, false), b(6, 7, true)}},
		{"two steps: each step is one Append", "TxSxxsSxxst", 1000, 1 << 20,
			[]replayBatch{b(0, 2, false), b(2, 6, false), b(6, 10, false), b(10, 11, true)}},
		{"settings before the turn are balanced", "xxxTxxSxst", 1000, 1 << 20,
			[]replayBatch{b(0, 3, true), b(3, 6, false), b(6, 9, false), b(9, 10, true)}},
		{"events after the last end go in the final flush", "TSstxx", 1000, 1 << 20,
			[]replayBatch{b(0, 1, false), b(1, 3, false), b(3, 4, true), b(4, 6, true)}},
		{"two turns", "TSstTSst", 1000, 1 << 20,
			[]replayBatch{b(0, 1, false), b(1, 3, false), b(3, 4, true), b(4, 5, false), b(5, 7, false), b(7, 8, true)}},
		{"no boundary: one batch", "xxxx", 1000, 1 << 20, []replayBatch{b(0, 4, true)}},
		{"a start at the very beginning flushes nothing", "Sxs", 1000, 1 << 20, []replayBatch{b(0, 3, true)}},
		{"an open turn at the end", "TSxx", 1000, 1 << 20, []replayBatch{b(0, 1, false), b(1, 4, false)}},
		{"event count limit splits a step", "TSxxxxxst", 4, 1 << 20,
			[]replayBatch{b(0, 1, false), b(1, 5, false), b(5, 8, false), b(8, 9, true)}},
		{"byte limit splits a step", "Sxxxxs", 1000, 30,
			[]replayBatch{b(0, 3, false), b(3, 6, true)}},
		{"limit of one event", "TSst", 1, 1 << 20,
			[]replayBatch{b(0, 1, false), b(1, 2, false), b(2, 3, false), b(3, 4, true)}},
		{"empty", "", 1000, 1 << 20, nil},
	} {
		ts := types(c.code)
		sizes := make([]int, len(ts))
		for i := range sizes {
			sizes[i] = 10
		}
		if got := replayBatches(ts, sizes, c.maxEvents, c.maxBytes); !slices.Equal(got, c.want) {
			t.Errorf("%s (%s): got %v; want %v", c.name, c.code, got, c.want)
		}
	}
}

// replayLog is a log file: the header line, then one line per record.
func replayLog(header string, events ...string) []byte {
	return []byte(header + "\n" + strings.Join(events, "\n") + "\n")
}

const replayHeader = `{"type":"session","version":0,"id":"rec","createdAt":5,"cwd":"/w","delegationDepth":0}`

func replayEv(typ string, seq int, data string) string {
	return fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s}`, typ, seq, 1000+seq, data)
}

func TestParseReplaySession(t *testing.T) {
	good := []string{
		replayEv("turn/start", 0, `{"turn":1}`),
		replayEv("step/start", 1, `{"turn":1,"step":1}`),
		`{"type":"text-chunks","seq0":2,"time0":1002,"data":{"turn":1,"step":1,"index":0,"dt":[1,1],"texts":["a","b","c"]}}`,
		replayEv("step/end", 5, `{"turn":1,"step":1}`),
		replayEv("turn/end", 6, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
	s, err := parseReplaySession("ok.jsonl", replayLog(replayHeader, good...))
	if err != nil {
		t.Fatal(err)
	}
	if s.header.ID != "rec" || s.header.CreatedAt != 5 || s.header.Cwd == nil || *s.header.Cwd != "/w" {
		t.Errorf("header %+v", s.header)
	}
	if len(s.events) != 7 {
		t.Fatalf("%d events; want 7 (the packed row expands to 3)", len(s.events))
	}
	for i, ev := range s.events {
		var e struct {
			Type string
			Seq  int
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil || e.Seq != i {
			t.Errorf("event %d: %s (%v)", i, ev, err)
		}
		if i >= 2 && i <= 4 && !strings.Contains(ev, `"text-delta"`) {
			t.Errorf("event %d is not an expanded text-delta: %s", i, ev)
		}
	}
	want := []replayBatch{{0, 1, false}, {1, 6, false}, {6, 7, true}}
	if !slices.Equal(s.batches, want) {
		t.Errorf("batches %v; want %v", s.batches, want)
	}
	// Without the final newline it is the same log.
	s2, err := parseReplaySession("ok.jsonl", bytes.TrimSuffix(replayLog(replayHeader, good...), []byte("\n")))
	if err != nil || !slices.Equal(s2.events, s.events) {
		t.Errorf("without final newline: %v, %d events", err, len(s2.events))
	}

	for _, c := range []struct {
		name string
		data []byte
		want string
	}{
		{"empty", nil, "empty"},
		{"header only", []byte(replayHeader + "\n"), "no events"},
		{"not a header", replayLog(good[0], good[1:]...), "ok.jsonl:1"},
		{"empty cwd", replayLog(strings.Replace(replayHeader, `"/w"`, `""`, 1), good...), "ok.jsonl:1: session metadata cwd"},
		{"seq gap", replayLog(replayHeader, good[0], good[3]), "ok.jsonl:3: seq 5, want 1"},
		{"seq not from 0", replayLog(replayHeader, good[1]), "ok.jsonl:2: seq 1, want 0"},
		{"empty line", replayLog(replayHeader, good[0], "", good[1]), "ok.jsonl:3: empty line"},
		{"not JSON", replayLog(replayHeader, good[0], "{nope"), "ok.jsonl:3"},
		{"refused on append", replayLog(replayHeader, replayEv("plan/mode", 0, `{"active":"yes"}`)), "ok.jsonl:2"},
		{"malformed packed row", replayLog(replayHeader, good[0], good[1],
			`{"type":"text-chunks","seq0":2,"time0":1,"data":{"turn":1,"step":1,"index":0,"dt":[1],"texts":["a","b","c"]}}`), "ok.jsonl:4"},
	} {
		if _, err := parseReplaySession("ok.jsonl", c.data); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v; want one containing %q", c.name, err, c.want)
		}
	}
}

func TestLoadReplayRecorded(t *testing.T) {
	ss, err := loadReplay(filepath.Join("..", "..", "testdata", "recorded"))
	if err != nil {
		t.Fatal(err)
	}
	// The README of testdata/recorded gives the logical event counts.
	got := map[string]int{}
	for _, s := range ss {
		got[s.name] = len(s.events)
		if s.batches[0].start != 0 || s.batches[len(s.batches)-1].end != len(s.events) {
			t.Errorf("%s: batches %v do not cover the %d events", s.name, s.batches, len(s.events))
		}
	}
	want := map[string]int{"cli-parallel-file-reads.session.jsonl": 27, "web-fresh-round-trip.session.jsonl": 94, "web-plan-mode.session.jsonl": 61}
	if !maps.Equal(got, want) || !slices.IsSortedFunc(ss, func(a, b replaySession) int { return strings.Compare(a.name, b.name) }) {
		t.Errorf("sessions %v; want %v in name order", got, want)
	}
	one, err := loadReplay(filepath.Join("..", "..", "testdata", "recorded", "web-plan-mode.session.jsonl"))
	if err != nil || len(one) != 1 || len(one[0].events) != 61 {
		t.Errorf("one file: %v, %d sessions", err, len(one))
	}
	if _, err := loadReplay(t.TempDir()); err == nil || !strings.Contains(err.Error(), "no *.jsonl") {
		t.Errorf("empty directory: %v", err)
	}
}

func FuzzParseReplaySession(f *testing.F) {
	for _, name := range []string{"cli-parallel-file-reads", "web-fresh-round-trip", "web-plan-mode"} {
		data, err := os.ReadFile(filepath.Join("..", "..", "testdata", "recorded", name+".session.jsonl"))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add(replayLog(replayHeader, replayEv("turn/start", 0, `{"turn":1}`)))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := parseReplaySession("f.jsonl", data)
		if err != nil {
			return
		}
		if len(s.events) == 0 || len(s.batches) == 0 {
			t.Fatalf("accepted with %d events, %d batches", len(s.events), len(s.batches))
		}
		next := 0
		for _, b := range s.batches {
			if b.start != next || b.end <= b.start {
				t.Fatalf("batches %v do not tile the %d events", s.batches, len(s.events))
			}
			next = b.end
		}
		if next != len(s.events) {
			t.Fatalf("batches %v end at %d, not %d", s.batches, next, len(s.events))
		}
	})
}

func TestParsePIDs(t *testing.T) {
	for in, want := range map[string][]int{"": nil, " ": nil, "4711": {4711}, "1, 2 ,3": {1, 2, 3}} {
		if got, err := parsePIDs(in); err != nil || !slices.Equal(got, want) {
			t.Errorf("parsePIDs(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, in := range []string{"0", "-1", "a", "1,,2", "1,1", "1;2"} {
		if got, err := parsePIDs(in); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--server-pids") {
			t.Errorf("parsePIDs(%q) = %v, %v; want a usage error naming the flag", in, got, err)
		}
	}
	if _, err := parseCounts("--agents", "16,x", "16,64,256"); !errors.Is(err, errUsage) || !strings.Contains(err.Error(), "--agents") {
		t.Errorf("parseCounts: %v", err)
	}
}

// TestBenchReplaySmoke replays the recorded sessions against one in-process
// node for a second and checks what the agents stored: each replayed
// session holds, byte for byte, a prefix of whole batches of its recording
// (all of it when the replay finished). Not parallel: the CPU settle watches
// this process, which must go quiet.
func TestBenchReplaySmoke(t *testing.T) {
	if testing.Short() {
		t.Skip("runs a node for a few seconds")
	}
	n := startTestNode(t, "")
	dir := filepath.Join("..", "..", "testdata", "recorded")
	var out, errb bytes.Buffer
	args := []string{"--addr", n.srv.grpcAddr, "--replay", dir, "--agents", "3", "--duration", "1s", "--warmup", "0s",
		"--session-prefix", "smoke", "--server-pids", fmt.Sprint(os.Getpid()), "--json", "--keep"}
	if err := benchMain(context.Background(), args, &out, &errb); err != nil {
		t.Fatalf("bench --replay: %v\n%s", err, errb.String())
	}
	var res struct {
		Levels []replayStats `json:"levels"`
	}
	if err := json.Unmarshal(out.Bytes(), &res); err != nil || len(res.Levels) != 1 {
		t.Fatalf("output %s: %v", out.String(), err)
	}
	l := res.Levels[0]
	if l.Agents != 3 || l.Errors != 0 || l.Events == 0 || l.Ops == 0 || l.EventsPerAppend < 1 {
		t.Errorf("level %+v: want 3 agents, no errors, events acknowledged", l)
	}
	if l.ServerCPU == nil || l.ClientCPU == nil {
		t.Errorf("level %+v: no CPU figures", l)
	}

	sessions, err := loadReplay(dir)
	if err != nil {
		t.Fatal(err)
	}
	n.WaitArtifacts()
	stored := 0
	for agent := range 3 {
		for k := range 2 {
			s := sessions[(agent+k)%len(sessions)]
			id := fmt.Sprintf("smoke-l3-a%d-%d", agent, k)
			resp, err := n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id})
			if errors.Is(err, sessionstore.ErrNotFound) {
				continue // created but cut before its first Append
			}
			if err != nil {
				t.Fatalf("ReadRaw %s: %v", id, err)
			}
			lines := strings.Split(strings.TrimSuffix(string(resp.GetContent()), "\n"), "\n")
			evs := lines[1:]
			ends := []int{0}
			for _, b := range s.batches {
				ends = append(ends, b.end)
			}
			if !slices.Contains(ends, len(evs)) || !slices.Equal(evs, s.events[:len(evs)]) {
				t.Errorf("%s (%s): %d stored events are not a batch-aligned prefix of the recording", id, s.name, len(evs))
			}
			stored += len(evs)
		}
	}
	if stored == 0 {
		t.Error("no replayed session was stored")
	}
}
