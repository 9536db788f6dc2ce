// Package benchload holds what the load generators (sessionstore bench,
// scripts/vsetcd, scripts/scaling) write and how they summarise latency: the
// prose-like event text and the nearest-rank percentile. One copy keeps
// their figures comparable: the same bytes stored, the same percentile.
package benchload

import (
	"math"
	"math/rand/v2"
	"strconv"
	"time"
)

// Prose is n bytes of lowercase-words text: it needs no JSON escaping and
// compresses like prose. The same n always gives the same text, and a
// shorter one is a prefix of a longer one.
func Prose(n int) string {
	r := rand.New(rand.NewPCG(1, 2))
	b := make([]byte, n)
	for i := range b {
		if r.IntN(6) == 0 {
			b[i] = ' '
		} else {
			b[i] = 'a' + byte(r.IntN(26))
		}
	}
	return string(b)
}

// Padding is the text Event takes its padding from: Prose long enough for
// events of up to eventBytes at any of Event's offsets.
func Padding(eventBytes int) string { return Prose(eventBytes + 4096) }

// Event is one single-line assistant/chunk text-delta event padded to
// exactly size bytes (or its minimum size, if larger), the write sessionstore bench
// appends. pad comes from Padding(size) or is at least size+4096 bytes of
// safe text.
func Event(seq, timeMs int64, size int, pad string) string {
	b := make([]byte, 0, max(size, 160))
	b = append(b, `{"type":"assistant/chunk","seq":`...)
	b = strconv.AppendInt(b, seq, 10)
	b = append(b, `,"time":`...)
	b = strconv.AppendInt(b, timeMs, 10)
	b = append(b, `,"data":{"turn":1,"step":1,"chunk":{"type":"text-delta","index":0,"text":"`...)
	const tail = `"}}}`
	n := max(size-len(b)-len(tail), 0)
	off := int(seq*131) % 4096
	b = append(b, pad[off:off+n]...)
	return string(append(b, tail...))
}

// Percentile is the nearest-rank percentile (p in [0,1]) of an ascending
// slice: the smallest value with at least p·n values ≤ it; 0 when empty.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	rank := int(math.Ceil(p*float64(n) - 1e-9)) // the epsilon absorbs 0.999·1000 = 999.0000000000001
	return sorted[min(max(rank, 1), n)-1]
}
