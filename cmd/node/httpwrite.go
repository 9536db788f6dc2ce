package main

import (
	"errors"
	"net"
	"net/http"
	"os"
	"time"
)

// writeChunk is the most one write may carry under one deadline, so a
// deadline bounds the time to move a small piece, whatever the size of the
// buffer a handler writes at once.
const writeChunk = 32 << 10

// writeDeadlines gives every response write of h its own deadline of d (0:
// none): a client that stops reading loses its connection after d, while a
// download or live tail that keeps moving runs as long as it needs.
func writeDeadlines(h http.Handler, d time.Duration) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		dw := newDeadlineWriter(w, d)
		dw.extend()
		// The server flushes the rest of the response after the handler
		// returns, and a keep-alive connection must not carry a spent
		// deadline into the next request.
		defer dw.extend()
		h.ServeHTTP(dw, r)
	})
}

// deadlineWriter is an http.ResponseWriter whose every Write and Flush
// first moves the connection's write deadline d into the future. Handlers
// that stream (downloads, tails) may wrap their writer in one directly.
type deadlineWriter struct {
	http.ResponseWriter
	rc *http.ResponseController
	d  time.Duration
	// stalled, when set (downloads), is called once when a write misses
	// its deadline.
	stalled     func()
	stallCalled bool
}

func newDeadlineWriter(w http.ResponseWriter, d time.Duration) *deadlineWriter {
	if dw, ok := w.(*deadlineWriter); ok && dw.d == d {
		return dw
	}
	return &deadlineWriter{ResponseWriter: w, rc: http.NewResponseController(w), d: d}
}

// extend moves the write deadline d ahead of now. A writer that cannot set
// deadlines (a test recorder) is left as it is.
func (w *deadlineWriter) extend() { _ = w.rc.SetWriteDeadline(time.Now().Add(w.d)) }

func (w *deadlineWriter) Write(p []byte) (int, error) {
	n := 0
	for len(p) > 0 {
		c := min(len(p), writeChunk)
		w.extend()
		m, err := w.ResponseWriter.Write(p[:c])
		n += m
		if err != nil {
			var ne net.Error
			if w.stalled != nil && !w.stallCalled && (errors.Is(err, os.ErrDeadlineExceeded) || errors.As(err, &ne) && ne.Timeout()) {
				w.stallCalled = true
				w.stalled()
			}
			return n, err
		}
		p = p[c:]
	}
	return n, nil
}

func (w *deadlineWriter) Flush() {
	w.extend()
	_ = w.rc.Flush()
}

// Unwrap lets http.ResponseController reach the server's writer.
func (w *deadlineWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
