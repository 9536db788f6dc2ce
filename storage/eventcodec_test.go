package storage

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Stored events name no dictionary: a changed eventdict1.jsonl would make
// every packed event stored so far unreadable. A better dictionary is a new
// frame version, never an edit of this one.
func TestEventDictionaryIsPinned(t *testing.T) {
	sum := sha256.Sum256(eventDictText)
	if got, want := hex.EncodeToString(sum[:]), "bed864e8b38d1b38ad0bdf210b29c897eb70d882cb9ee1e9a0aabda30ede84d9"; got != want {
		t.Fatalf("eventdict1.jsonl has SHA-256 %s, want %s: it must never change", got, want)
	}
	if eventDict == nil {
		t.Fatal("the dictionary does not load")
	}
}

// Events pack when that saves bytes, each on its own; what packs unpacks to
// the same bytes, and a frame mixing packed and stored events decodes whole.
func TestPackedFrame(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	noise := make([]byte, 300)
	for i := range noise {
		noise[i] = byte('a' + rng.IntN(26))
	}
	var recorded [][]byte
	for _, f := range []string{"cli-parallel-file-reads", "web-fresh-round-trip", "web-plan-mode"} {
		b, err := os.ReadFile(filepath.Join("..", "testdata", "recorded", f+".session.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			recorded = append(recorded, []byte(l))
		}
	}
	cases := []struct {
		name   string
		events [][]byte
		packed []bool // per event, whether it is stored packed
	}{
		{"short events stay as they are", [][]byte{[]byte(`{}`), []byte(`{"type":"x","seq":1}`)}, []bool{false, false}},
		{"an event of the log packs", [][]byte{[]byte(`{"type":"turn/end","seq":4,"time":1780000000001,"data":{"turn":1,"reason":{"kind":"completed"}}}`)}, []bool{true}},
		{"noise does not", [][]byte{noise}, []bool{false}},
		{"mixed", [][]byte{noise, []byte(`{"type":"step/start","seq":9,"time":1780000000123,"data":{"turn":2,"step":1}}`), []byte(`{}`)}, []bool{false, true, false}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			sums := make([]uint32, len(c.events))
			for i := range sums {
				sums[i] = uint32(i + 1)
			}
			v := encodeFrame(11, c.events, sums, true)
			fp, err := parseFrame(v)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range c.packed {
				if got := fp.sizes[i] > 0; got != want {
					t.Errorf("event %d packed %v, want %v", i, got, want)
				}
			}
			f, err := decodeFrame(v)
			if err != nil {
				t.Fatal(err)
			}
			if f.first != 11 || len(f.events) != len(c.events) {
				t.Fatalf("decoded first %d, %d events", f.first, len(f.events))
			}
			for i, ev := range c.events {
				if !bytes.Equal(f.events[i], ev) || f.sums[i] != sums[i] {
					t.Fatalf("event %d: %q (sum %d), want %q (sum %d)", i, f.events[i], f.sums[i], ev, sums[i])
				}
			}
		})
	}
	// The recorded sessions, one event per frame: each packs to under 0.6 of
	// its size on the whole (0.30–0.49 per session when this was written).
	raw, stored := 0, 0
	for _, ev := range recorded {
		v := encodeFrame(0, [][]byte{ev}, []uint32{0}, true)
		f, err := decodeFrame(v)
		if err != nil || !bytes.Equal(f.events[0], ev) {
			t.Fatalf("%q: %v", ev, err)
		}
		fp, _ := parseFrame(v)
		raw, stored = raw+len(ev), stored+len(fp.stored[0])
	}
	if r := float64(stored) / float64(raw); r > 0.6 {
		t.Fatalf("the recorded sessions pack to %.2f of their size", r)
	}
}
