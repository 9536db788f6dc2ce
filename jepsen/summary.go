package jepsen

import (
	"os/exec"
	"sort"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/checker"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Summary is summary.json: what ran, what the checkers found, and how the
// cluster performed in each phase.
type Summary struct {
	Scenario   string                    `json:"scenario"`
	Seed       int64                     `json:"seed"`
	Backend    string                    `json:"backend"`
	Git        string                    `json:"git,omitempty"`
	Started    time.Time                 `json:"started"`
	DurationS  float64                   `json:"duration_s"`
	Valid      checker.Valid             `json:"valid"`
	Checkers   map[string]CheckerSummary `json:"checkers"`
	Operations int                       `json:"operations"`
	Ops        map[string]map[string]int `json:"ops"`        // f → type → count
	LatencyMs  map[string]Percentiles    `json:"latency_ms"` // f → percentiles of ok operations
	Phases     []PhaseSummary            `json:"phases"`
	Nemesis    []FaultSummary            `json:"nemesis"`
	Processes  int                       `json:"processes"`
}

// CheckerSummary is one checker's verdict.
type CheckerSummary struct {
	Valid     checker.Valid  `json:"valid"`
	Witnesses int            `json:"witnesses,omitempty"`
	Stats     map[string]any `json:"stats,omitempty"`
}

// Percentiles of a latency distribution, in milliseconds.
type Percentiles struct {
	N   int     `json:"n"`
	P50 float64 `json:"p50"`
	P95 float64 `json:"p95"`
	P99 float64 `json:"p99"`
	Max float64 `json:"max"`
}

// PhaseSummary is the throughput and latency of one phase (warm-up, each
// fault, each recovery, the final phase).
type PhaseSummary struct {
	Name    string  `json:"name"`
	StartS  float64 `json:"start_s"`
	EndS    float64 `json:"end_s"`
	OK      int     `json:"ok"`
	Fail    int     `json:"fail"`
	Info    int     `json:"info"`
	OKPerS  float64 `json:"ok_per_s"`
	P99Ms   float64 `json:"p99_ms"`
	MaxGapS float64 `json:"max_gap_s"` // the longest time without an ok operation
}

// FaultSummary is one injected fault.
type FaultSummary struct {
	Fault    string   `json:"fault"`
	Targets  []string `json:"targets"`
	StartS   float64  `json:"start_s"`
	EndS     float64  `json:"end_s"`
	Injected bool     `json:"injected"`
	Verified bool     `json:"verified"`
	Note     string   `json:"note,omitempty"`
}

func percentiles(ms []float64) Percentiles {
	if len(ms) == 0 {
		return Percentiles{}
	}
	sort.Float64s(ms)
	at := func(q float64) float64 {
		i := int(q * float64(len(ms)-1))
		return ms[i]
	}
	return Percentiles{N: len(ms), P50: at(0.50), P95: at(0.95), P99: at(0.99), Max: ms[len(ms)-1]}
}

func gitHead() string {
	out, err := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func (r *run) summary(ops []history.Op, rep checker.Report) Summary {
	s := Summary{
		Scenario: r.cfg.Scenario, Seed: r.cfg.Seed, Backend: r.b.Name(), Git: gitHead(),
		Started: r.rec.Start().UTC(), DurationS: float64(r.rec.Since()) / 1e9, Valid: rep.Valid,
		Checkers: map[string]CheckerSummary{}, Ops: map[string]map[string]int{},
		LatencyMs: map[string]Percentiles{}, Processes: int(r.procs.Load()),
	}
	for _, res := range rep.Results {
		s.Checkers[res.Name] = CheckerSummary{Valid: res.Valid, Witnesses: len(res.Witnesses), Stats: res.Stats}
	}
	pairs := history.Pairs(ops)
	lat := map[string][]float64{}
	for _, p := range pairs {
		f := string(p.Invoke.F)
		if s.Ops[f] == nil {
			s.Ops[f] = map[string]int{}
		}
		t := p.Outcome()
		s.Ops[f][string(t)]++
		s.Operations++
		if t == history.OK {
			lat[f] = append(lat[f], float64(p.Complete.Time-p.Invoke.Time)/1e6)
		}
	}
	for f, ms := range lat {
		s.LatencyMs[f] = percentiles(ms)
	}
	r.mu.Lock()
	phases := append([]phaseMark(nil), r.phases...)
	faults := append([]faultRecord(nil), r.faults...)
	r.mu.Unlock()
	horizon := r.rec.Since()
	for _, ph := range phases {
		end := ph.End
		if end == 0 {
			end = horizon
		}
		s.Phases = append(s.Phases, phaseSummary(ph.Name, ph.Start, end, pairs, horizon))
	}
	for _, f := range faults {
		s.Nemesis = append(s.Nemesis, FaultSummary{Fault: f.Fault, Targets: f.Targets, StartS: float64(f.Start) / 1e9,
			EndS: float64(f.End) / 1e9, Injected: f.Injected, Verified: f.Verified, Note: f.Note})
	}
	return s
}

func phaseSummary(name string, start, end int64, pairs []history.Pair, horizon int64) PhaseSummary {
	ps := PhaseSummary{Name: name, StartS: float64(start) / 1e9, EndS: float64(end) / 1e9}
	var lat []float64
	var okTimes []int64
	for _, p := range pairs {
		done := p.End(horizon)
		if done < start || done >= end {
			continue
		}
		switch p.Outcome() {
		case history.OK:
			ps.OK++
			lat = append(lat, float64(done-p.Invoke.Time)/1e6)
			okTimes = append(okTimes, done)
		case history.Fail:
			ps.Fail++
		default:
			ps.Info++
		}
	}
	if d := float64(end-start) / 1e9; d > 0 {
		ps.OKPerS = float64(ps.OK) / d
	}
	ps.P99Ms = percentiles(lat).P99
	sort.Slice(okTimes, func(i, j int) bool { return okTimes[i] < okTimes[j] })
	prev := start
	var gap int64
	for _, t := range append(okTimes, end) {
		if t-prev > gap {
			gap = t - prev
		}
		prev = t
	}
	ps.MaxGapS = float64(gap) / 1e9
	return ps
}
