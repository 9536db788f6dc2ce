package benchload

import (
	"encoding/json"
	"strings"
	"testing"
	"time"
)

func TestProse(t *testing.T) {
	long := Prose(1 << 16)
	if len(long) != 1<<16 {
		t.Fatalf("Prose(1<<16) is %d bytes", len(long))
	}
	if strings.Trim(long, " abcdefghijklmnopqrstuvwxyz") != "" {
		t.Error("Prose holds more than lowercase letters and spaces")
	}
	for _, n := range []int{0, 1, 4096, 5120} {
		if got := Prose(n); got != long[:n] {
			t.Errorf("Prose(%d) is not a prefix of Prose(1<<16)", n)
		}
		if got := Padding(n); got != long[:n+4096] {
			t.Errorf("Padding(%d) is not Prose(%d)", n, n+4096)
		}
	}
}

func TestPercentile(t *testing.T) {
	var ms1to1000 []time.Duration
	for i := 1; i <= 1000; i++ {
		ms1to1000 = append(ms1to1000, time.Duration(i)*time.Millisecond)
	}
	for _, c := range []struct {
		in   []time.Duration
		p    float64
		want time.Duration
	}{
		{nil, 0.5, 0},
		{[]time.Duration{7}, 0.5, 7},
		{[]time.Duration{7}, 0.999, 7},
		{[]time.Duration{1, 2}, 0.5, 1},
		{[]time.Duration{1, 2}, 0.51, 2},
		{[]time.Duration{1, 2, 3, 4}, 0, 1},
		{[]time.Duration{1, 2, 3, 4}, 1, 4},
		{ms1to1000, 0.50, 500 * time.Millisecond},
		{ms1to1000, 0.99, 990 * time.Millisecond},
		{ms1to1000, 0.999, 999 * time.Millisecond}, // 0.999·1000 is 999.0000000000001
		{ms1to1000, 1, 1000 * time.Millisecond},
	} {
		if got := Percentile(c.in, c.p); got != c.want {
			t.Errorf("Percentile(%d values, %v) = %v; want %v", len(c.in), c.p, got, c.want)
		}
	}
}

func TestEvent(t *testing.T) {
	const timeMs = 1755600000400
	for _, size := range []int{1, 50, 150, 200, 1024, 4096, 65536} {
		pad := Padding(size)
		for _, seq := range []int64{0, 9, 10, 999, 12345, 1 << 40} {
			ev := Event(seq, timeMs, size, pad)
			if !json.Valid([]byte(ev)) {
				t.Fatalf("size %d seq %d: invalid JSON: %s", size, seq, ev)
			}
			if strings.ContainsAny(ev, "\n\r") {
				t.Fatalf("size %d seq %d: not a single line", size, seq)
			}
			var e struct {
				Type string `json:"type"`
				Seq  int64  `json:"seq"`
				Time int64  `json:"time"`
				Data struct {
					Turn, Step int
					Chunk      struct {
						Type  string `json:"type"`
						Index *int   `json:"index"`
						Text  string `json:"text"`
					} `json:"chunk"`
				} `json:"data"`
			}
			if err := json.Unmarshal([]byte(ev), &e); err != nil {
				t.Fatal(err)
			}
			if e.Type != "assistant/chunk" || e.Seq != seq || e.Time != timeMs || e.Data.Turn != 1 || e.Data.Step != 1 ||
				e.Data.Chunk.Type != "text-delta" || e.Data.Chunk.Index == nil || *e.Data.Chunk.Index != 0 {
				t.Fatalf("size %d seq %d: unexpected event %s", size, seq, ev)
			}
			minimal := len(Event(seq, timeMs, 0, pad))
			if want := max(size, minimal); len(ev) != want {
				t.Errorf("size %d seq %d: %d bytes; want %d", size, seq, len(ev), want)
			}
			if size >= minimal && e.Data.Chunk.Text == "" {
				t.Errorf("size %d seq %d: no padding", size, seq)
			}
		}
	}
}
