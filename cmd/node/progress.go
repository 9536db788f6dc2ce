package main

import (
	"fmt"
	"io"
	"os"
	"time"
)

// liveLine shows a progress line on w: redrawn in place on a terminal (at
// most every 100 ms), a plain line every 5 s otherwise; messages interrupt
// it cleanly. It has no lock of its own: its owner serialises the calls.
type liveLine struct {
	w        io.Writer
	tty      bool
	drawn    bool // a line is on screen (tty)
	lastDraw time.Time
	lastLine time.Time
}

func newLiveLine(w io.Writer) liveLine {
	now := time.Now()
	return liveLine{w: w, tty: isTerminal(w), lastDraw: now, lastLine: now}
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0 && os.Getenv("TERM") != "dumb"
}

// show draws (tty) or prints (otherwise) text when its interval has passed
// or force is set; text is only rendered when it is shown.
func (l *liveLine) show(now time.Time, force bool, text func() string) {
	switch {
	case l.tty && (force || now.Sub(l.lastDraw) >= 100*time.Millisecond):
		fmt.Fprint(l.w, "\r\033[K"+text())
		l.drawn, l.lastDraw = true, now
	case !l.tty && (force || now.Sub(l.lastLine) >= 5*time.Second):
		fmt.Fprintln(l.w, text())
		l.lastLine = now
	}
}

// clear removes a drawn line.
func (l *liveLine) clear() {
	if l.drawn {
		fmt.Fprint(l.w, "\r\033[K")
		l.drawn = false
	}
}

// logf prints a message line (above the progress line on a terminal).
func (l *liveLine) logf(format string, args ...any) {
	l.clear()
	fmt.Fprintf(l.w, format+"\n", args...)
}
