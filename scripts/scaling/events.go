package main

import (
	"strconv"

	"github.com/sessionstore/sessionstore/internal/benchload"
)

// prose is the text of event bodies, the same as sessionstore bench's and
// scripts/vsetcd's events take theirs from.
var prose = benchload.Prose(1 << 16)

// text is n bytes of prose starting at a position picked by key, so
// different sessions do not store identical bodies.
func text(key int64, n int) string {
	off := int(uint64(key)*2654435761) % (len(prose) - n)
	return prose[off : off+n]
}

type eventWriter struct {
	b []byte
}

func (w *eventWriter) head(typ string, seq, timeMs int64) {
	w.b = append(w.b[:0], `{"type":"`...)
	w.b = append(w.b, typ...)
	w.b = append(w.b, `","seq":`...)
	w.b = strconv.AppendInt(w.b, seq, 10)
	w.b = append(w.b, `,"time":`...)
	w.b = strconv.AppendInt(w.b, timeMs, 10)
	w.b = append(w.b, `,"data":`...)
}

func (w *eventWriter) event(typ string, seq, timeMs int64, data ...string) string {
	w.head(typ, seq, timeMs)
	for _, d := range data {
		w.b = append(w.b, d...)
	}
	w.b = append(w.b, '}')
	return string(w.b)
}

func itoa(n int64) string { return strconv.FormatInt(n, 10) }

// turn is one agent turn of count ≥ 5 events starting at seq: turn/start,
// the user's message, step/start, count-4 streamed text deltas, turn/end
// (shapes as the reference harness writes them; about 200 bytes on
// average for 5 events).
func turn(key, seq int64, turnNo int64, count int, timeMs int64) []string {
	var w eventWriter
	t := itoa(turnNo)
	out := make([]string, 0, count)
	out = append(out, w.event("turn/start", seq, timeMs, `{"turn":`, t, `,"trigger":{"kind":"message","source":{"kind":"user"}}}`))
	// A surface-eligible event carries its surfaceOp after data.
	out = append(out, w.event("user/message", seq+1, timeMs, `{"content":[{"type":"text","text":"`, text(key, 120),
		`"}],"source":{"kind":"user"},"role":"user","id":"msg-`, itoa(key), "-", itoa(seq+1), `"},"surfaceOp":"append"`))
	out = append(out, w.event("step/start", seq+2, timeMs, `{"turn":`, t, `,"step":1}`))
	for i := 3; i < count-1; i++ {
		out = append(out, w.event("assistant/chunk", seq+int64(i), timeMs, `{"turn":`, t, `,"step":1,"chunk":{"type":"text-delta","index":0,"text":"`,
			text(key+int64(i)*7919, 180), `"}}`))
	}
	out = append(out, w.event("turn/end", seq+int64(count-1), timeMs, `{"turn":`, t, `,"reason":{"kind":"completed"}}`))
	return out
}
