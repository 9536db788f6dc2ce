package sessionlog

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// docExamples returns the fenced blocks of docs/events.md that follow a
// "<!-- doc-example: NAME -->" line, by NAME, one []byte per line, so that
// the worked examples of the event format are checked and cannot rot.
func docExamples(t *testing.T) map[string][][]byte {
	t.Helper()
	text, err := os.ReadFile(filepath.Join("..", "docs", "events.md"))
	if err != nil {
		t.Fatal(err)
	}
	const marker = "<!-- doc-example: "
	out := map[string][][]byte{}
	lines := strings.Split(string(text), "\n")
	for i := 0; i < len(lines); i++ {
		name, ok := strings.CutPrefix(lines[i], marker)
		if !ok {
			continue
		}
		name = strings.TrimSuffix(name, " -->")
		if i+1 >= len(lines) || !strings.HasPrefix(lines[i+1], "```") {
			t.Fatalf("doc example %q: no fenced block on the next line", name)
		}
		var block [][]byte
		for i += 2; i < len(lines) && !strings.HasPrefix(lines[i], "```"); i++ {
			block = append(block, []byte(lines[i]))
		}
		if len(block) == 0 {
			t.Fatalf("doc example %q is empty", name)
		}
		out[name] = block
	}
	return out
}

// The worked turn of docs/events.md is accepted on every path of the
// store: its header by Create and by a read, each event by Append, and the
// whole log by the read validation (nothing to normalise, nothing to
// repair); the crash example's closers are exactly what a read adds.
func TestDocEventsExamples(t *testing.T) {
	ex := docExamples(t)
	turn, closers := ex["turn"], ex["closers"]
	if turn == nil || closers == nil {
		t.Fatalf("docs/events.md lacks the examples: got %d blocks, want turn and closers", len(ex))
	}

	h, err := ParseHeaderLine(turn[0], "")
	if err != nil {
		t.Fatalf("header line: %v", err)
	}
	if err := CheckCreateHeader(h); err != nil {
		t.Fatalf("CheckCreateHeader: %v", err)
	}
	if err := CheckStoredHeader(h.ID, h, ""); err != nil {
		t.Fatalf("CheckStoredHeader: %v", err)
	}
	if got := HeaderLine(h); !bytes.Equal(got, turn[0]) {
		t.Errorf("header line as the store writes it:\n  %s\nwant the doc's\n  %s", got, turn[0])
	}

	events := turn[1:]
	for i, ev := range events {
		if _, err := CheckEvent(h.ID, ev); err != nil {
			t.Fatalf("event %d refused on append: %v", i, err)
		}
	}
	norm, err := Normalize(h.ID, events, "")
	if err != nil {
		t.Fatalf("Normalize: %v", err)
	}
	for i := range events {
		if !bytes.Equal(norm[i], events[i]) {
			t.Errorf("event %d rewritten by a read: %s", i, norm[i])
		}
	}
	if err := ValidateSession(h.ID, norm); err != nil {
		t.Fatalf("ValidateSession: %v", err)
	}
	if cl, err := Closers(norm); err != nil || cl != nil {
		t.Fatalf("Closers of the whole turn: got %d, %v; want none", len(cl), err)
	}

	// The crash example: the turn cut after its tool/call (seq 13).
	prefix := norm[:14]
	got, err := Closers(prefix)
	if err != nil {
		t.Fatalf("Closers: %v", err)
	}
	if g, w := joinLines(got), joinLines(closers); g != w {
		t.Errorf("closers of the crashed turn:\n%s\nwant the doc's\n%s", g, w)
	}
	if err := ValidateSession(h.ID, append(append([][]byte{}, prefix...), got...)); err != nil {
		t.Fatalf("ValidateSession of the repaired log: %v", err)
	}
}
