package sessionstore

import (
	"errors"
	"strings"
	"testing"
)

func TestViewLimitCheck(t *testing.T) {
	const limit = 1 << 20
	room := int64(limit - ViewMessageMargin) // what the events may take with their framing
	for _, c := range []struct {
		name         string
		l            ViewLimit
		count, bytes int64
		refused      bool
	}{
		{"unbounded (stream forms)", ViewLimit{}, 1 << 30, 1 << 40, false},
		{"empty view", ViewLimit{MessageBytes: limit, Stream: "LoadStream"}, 0, 0, false},
		{"exactly the room", ViewLimit{MessageBytes: limit, Stream: "LoadStream"}, 10, room - 10*EventFraming, false},
		{"one byte over", ViewLimit{MessageBytes: limit, Stream: "LoadStream"}, 10, room - 10*EventFraming + 1, true},
		{"framing alone tips it", ViewLimit{MessageBytes: limit, Stream: "InspectStream"}, room / EventFraming, 1, true},
		{"limit below the margin", ViewLimit{MessageBytes: ViewMessageMargin - 1, Stream: "PrepareStream"}, 0, 0, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			err := c.l.Check("s1", c.count, c.bytes)
			if fits := c.l.Fits(ViewBytes(c.count, c.bytes)); fits == c.refused {
				t.Fatalf("Fits = %v, want %v", fits, !c.refused)
			}
			if !c.refused {
				if err != nil {
					t.Fatalf("Check: %v, want nil", err)
				}
				return
			}
			if !errors.Is(err, ErrTooLarge) {
				t.Fatalf("Check: %v, want TOO_LARGE", err)
			}
			// The text names the stream call and the limit, so a client that
			// only shows it tells its user what to call instead.
			for _, want := range []string{`session "s1" view is `, "message limit; use the stream form " + c.l.Stream + ","} {
				if !strings.Contains(err.Error(), want) {
					t.Fatalf("Check: %q, want it to contain %q", err, want)
				}
			}
		})
	}
}
