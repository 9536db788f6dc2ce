// Package report renders a run's report.html: one self-contained page (inline
// CSS and SVG, no scripts, no external resources) with the verdict, the
// anomalies and their witnesses, the checker breakdown, a timeline of every
// process with the faults and the nodes' Raft state, latency and throughput
// plots, the per-phase table, the faults and a capped operation log.
//
// The package does not depend on the checkers: the caller converts their
// results into Verdicts.
package report

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Verdict is one checker's result.
type Verdict struct {
	Name      string
	Valid     string // "true" | "false" | "unknown"
	Witnesses []WitnessText
	Stats     map[string]any
}

// WitnessText is one minimal witness of an anomaly.
type WitnessText struct {
	Session string
	Ops     []int // indices into Input.Ops of the records involved
	Text    string
}

// Phase is a named interval of the run (warm-up, a fault, a recovery …).
type Phase struct {
	Name       string
	Start, End int64 // nanoseconds since the run began
}

// Fault is one fault the nemesis injected. End <= Start means it was never
// healed (it is drawn to the end of the run).
type Fault struct {
	Name       string
	Targets    []string
	Start, End int64 // nanoseconds since the run began
	Injected   bool  // the injection command succeeded
	Verified   bool  // the fault was observed to take effect
	Note       string
}

// Table is a table rendered as given (cells that parse as numbers are
// right-aligned).
type Table struct {
	Header []string
	Rows   [][]string
}

// Input is everything the report shows.
type Input struct {
	Title      string
	Facts      [][2]string // rows shown at the top: scenario, seed, backend, git, …
	Valid      string      // overall verdict: "true" | "false" | "unknown"
	Verdicts   []Verdict
	Ops        []history.Op // the history; Witness.Ops index into it
	Phases     []Phase
	Faults     []Fault
	PhaseTable Table // per-phase availability and latency
}

// Limits on what is drawn and listed, so the page stays small for long runs.
const (
	maxLanes        = 60    // process lanes in the timeline (beyond: packed, then "other")
	maxTimelineOps  = 10000 // operations drawn in the timeline
	maxLogRows      = 5000  // records listed in the operation log
	maxWitnesses    = 100   // witnesses listed per checker
	maxWitnessLinks = 40    // record links per witness
	maxTextLen      = 300   // error strings and values in the log
	maxWitnessText  = 20000 // characters of one witness text
	maxFNames       = 12    // distinct functions with their own latency toggle
	maxNodes        = 12    // nodes with their own status row
)

const (
	nsPerSec = 1e9
	nsPerMs  = 1e6
)

// WriteHTML renders the report to w.
func WriteHTML(w io.Writer, in Input) error {
	bw := bufio.NewWriterSize(w, 64<<10)
	if err := pageTemplate.Execute(bw, buildPage(in)); err != nil {
		return fmt.Errorf("report: %w", err)
	}
	return bw.Flush()
}

// WriteFile renders the report to path (written to a temporary file in the
// same directory, then renamed, so a reader never sees half a report).
func WriteFile(path string, in Input) error {
	f, err := os.CreateTemp(filepath.Dir(path), ".report-*.html")
	if err != nil {
		return err
	}
	tmp := f.Name()
	err = WriteHTML(f, in)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

// model is the history digested once for every section.
type model struct {
	in       Input
	horizon  int64 // ns: the end of the time axis
	pairs    []history.Pair
	pos      map[int]int // record ID of an invoke → its position in in.Ops
	compPos  map[int]int // record ID of a completion → its position in in.Ops
	witness  map[int]bool
	inLog    map[int]bool // positions listed in the operation log
	fIndex   map[history.F]int
	fNames   []string // by fIndex; the last may be "other"
	status   []poll
	nodes    []string
	faultHue map[string]string
	x        xscale
}

func newModel(in Input) *model {
	m := &model{in: in, pos: map[int]int{}, compPos: map[int]int{}, witness: map[int]bool{},
		fIndex: map[history.F]int{}, faultHue: map[string]string{}}
	for i, o := range in.Ops {
		if o.Time > m.horizon {
			m.horizon = o.Time
		}
		switch {
		case o.Type == history.Invoke:
			m.pos[o.ID] = i
		case o.Process != history.NemesisProcess:
			if _, ok := m.compPos[o.ID]; !ok {
				m.compPos[o.ID] = i
			}
		}
	}
	for _, p := range in.Phases {
		m.horizon = max(m.horizon, p.End, p.Start)
	}
	for _, f := range in.Faults {
		m.horizon = max(m.horizon, f.End, f.Start)
	}
	if m.horizon <= 0 {
		m.horizon = nsPerSec
	}
	m.pairs = history.Pairs(in.Ops)
	for _, v := range in.Verdicts {
		for _, w := range v.Witnesses {
			for _, i := range w.Ops {
				if i >= 0 && i < len(in.Ops) {
					m.witness[i] = true
				}
			}
		}
	}
	// Functions, most frequent first, for the latency toggles.
	counts := map[history.F]int{}
	for _, p := range m.pairs {
		counts[p.Invoke.F]++
	}
	fs := make([]history.F, 0, len(counts))
	for f := range counts {
		fs = append(fs, f)
	}
	sort.Slice(fs, func(a, b int) bool {
		if counts[fs[a]] != counts[fs[b]] {
			return counts[fs[a]] > counts[fs[b]]
		}
		return fs[a] < fs[b]
	})
	for i, f := range fs {
		if i >= maxFNames-1 && len(fs) > maxFNames {
			m.fIndex[f] = maxFNames - 1
			continue
		}
		m.fIndex[f] = i
		m.fNames = append(m.fNames, string(f))
	}
	if len(fs) > maxFNames {
		m.fNames = append(m.fNames, "other")
	}
	for _, f := range in.Faults {
		if _, ok := m.faultHue[f.Name]; !ok {
			m.faultHue[f.Name] = faultPalette[len(m.faultHue)%len(faultPalette)]
		}
	}
	m.status, m.nodes = parseStatus(in.Ops)
	m.x = newXScale(m.horizon)
	return m
}

// outcomeClass is the CSS class of a pair's outcome: o(k), f(ail), i(nfo),
// n(ever completed).
func outcomeClass(p history.Pair) string {
	if p.Complete == nil {
		return "n"
	}
	switch p.Complete.Type {
	case history.OK:
		return "o"
	case history.Fail:
		return "f"
	default:
		return "i"
	}
}

func outcomeWord(c string) string {
	switch c {
	case "o":
		return "ok"
	case "f":
		return "fail"
	case "i":
		return "info"
	default:
		return "never completed"
	}
}

// normValid maps any verdict string onto true/false/unknown.
func normValid(s string) string {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true", "valid":
		return "true"
	case "false", "invalid":
		return "false"
	default:
		return "unknown"
	}
}

// truncate shortens s to at most n runes, marking the cut.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n]) + "…"
}

// secs formats ns as seconds with millisecond precision.
func secs(ns int64) string { return fmt.Sprintf("%.3f", float64(ns)/nsPerSec) }

// shortSecs formats ns as seconds with one decimal.
func shortSecs(ns int64) string { return fmt.Sprintf("%.1f s", float64(ns)/nsPerSec) }

// msText formats a latency in ms compactly.
func msText(ms float64) string {
	switch {
	case ms >= 10000:
		return fmt.Sprintf("%.1f s", ms/1000)
	case ms >= 100:
		return fmt.Sprintf("%.0f ms", ms)
	case ms >= 10:
		return fmt.Sprintf("%.1f ms", ms)
	default:
		return fmt.Sprintf("%.2f ms", ms)
	}
}

func procName(p int) string {
	if p == history.NemesisProcess {
		return "nemesis"
	}
	return fmt.Sprintf("p%d", p)
}
