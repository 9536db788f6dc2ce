package cluster

import (
	"testing"
	"time"
)

// TestGroupPacerWait: a group lingers for at most half the recent commit
// time, capped by MaxGroupWait, and a quarter of that without a new command.
func TestGroupPacerWait(t *testing.T) {
	const ms = time.Millisecond
	tests := []struct {
		name    string
		maxWait time.Duration
		commits []time.Duration
		want    time.Duration // total; idle is a quarter
	}{
		{name: "nothing committed yet", maxWait: ms, want: 0},
		{name: "slow commits: capped by the maximum", maxWait: ms, commits: repeat(100, 6*ms), want: ms},
		{name: "fast commits: half the commit time", maxWait: ms, commits: repeat(100, 600*time.Microsecond), want: 300 * time.Microsecond},
		{name: "lingering turned off", maxWait: 0, commits: repeat(100, 6*ms), want: 0},
		{name: "commits sped up: the average follows", maxWait: ms, commits: append(repeat(100, 6*ms), repeat(100, 400*time.Microsecond)...), want: 200 * time.Microsecond},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			g := newGroupPacer(tc.maxWait)
			for _, d := range tc.commits {
				g.committed(d)
			}
			total, idle := g.wait()
			if total < tc.want*98/100 || total > tc.want*102/100 || idle != total/4 {
				t.Errorf("wait() = %v, %v; want %v, a quarter of it", total, idle, tc.want)
			}
		})
	}
}

func repeat(n int, d time.Duration) []time.Duration {
	out := make([]time.Duration, n)
	for i := range out {
		out[i] = d
	}
	return out
}

// TestGroupPacerWakes: an answered entry always leaves a wake-up token for
// a lingering proposer, and never blocks when one is already there.
func TestGroupPacerWakes(t *testing.T) {
	g := newGroupPacer(time.Millisecond)
	g.committed(time.Millisecond)
	g.committed(time.Millisecond) // the token is already there: must not block
	select {
	case <-g.landed:
	default:
		t.Fatal("no wake-up token after an answered entry")
	}
}
