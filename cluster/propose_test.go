package cluster

import (
	"testing"
	"time"
)

// TestGroupPacerWait: a group is held only when commits take long enough and
// commands arrive fast enough for the wait to gather more of them.
func TestGroupPacerWait(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		maxWait time.Duration
		commit  time.Duration // every entry's commit time
		gap     time.Duration // between arrivals
		want    time.Duration
	}{
		{name: "nothing committed yet", maxWait: ms, gap: 10 * time.Microsecond, want: 0},
		{name: "slow commits: capped by the maximum", maxWait: ms, commit: 6 * ms, gap: 100 * time.Microsecond, want: ms},
		{name: "fast commits: half the commit time", maxWait: ms, commit: 600 * time.Microsecond, gap: 100 * time.Microsecond, want: 300 * time.Microsecond},
		{name: "arrivals too sparse to fill a group", maxWait: ms, commit: 6 * ms, gap: 600 * time.Microsecond, want: 0},
		{name: "just two arrivals expected", maxWait: ms, commit: 6 * ms, gap: 500 * time.Microsecond, want: ms},
		{name: "holding turned off", maxWait: 0, commit: 6 * ms, gap: 10 * time.Microsecond, want: 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupPacer(tc.maxWait)
			at := time.Unix(1000, 0)
			for range 100 { // long enough for the averages to settle
				at = at.Add(tc.gap)
				g.arrived(at)
				if tc.commit > 0 {
					g.committed(tc.commit)
				}
			}
			if got := g.wait(); got < tc.want*98/100 || got > tc.want {
				t.Errorf("wait() = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestGroupPacerIdle: after an idle spell the arrival rate recovers within a
// few commands (a long gap is clamped), and an answered entry always leaves
// a wake-up token for a holding proposer without ever blocking.
func TestGroupPacerIdle(t *testing.T) {
	g := newGroupPacer(time.Millisecond)
	at := time.Unix(1000, 0)
	for range 50 {
		at = at.Add(50 * time.Microsecond)
		g.arrived(at)
		g.committed(5 * time.Millisecond)
	}
	at = at.Add(time.Hour)
	g.arrived(at)
	if w := g.wait(); w != 0 {
		t.Fatalf("right after an idle hour wait() = %v, want 0", w)
	}
	for i := range 20 {
		at = at.Add(50 * time.Microsecond)
		g.arrived(at)
		if g.wait() > 0 {
			t.Logf("holding again after %d fast arrivals", i+1)
			break
		}
		if i == 19 {
			t.Fatal("20 fast arrivals after an idle spell did not bring holding back")
		}
	}
	// Out-of-order arrival times (goroutines racing to enqueue) count as no gap.
	g.arrived(at.Add(-time.Second))
	if g.arrivalGap < 0 {
		t.Fatalf("negative arrival gap %v", g.arrivalGap)
	}
	g.committed(time.Millisecond)
	g.committed(time.Millisecond) // the token is already there: must not block
	select {
	case <-g.landed:
	default:
		t.Fatal("no wake-up token after an answered entry")
	}
}
