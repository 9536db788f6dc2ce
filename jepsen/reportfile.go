package jepsen

import (
	"fmt"
	"path/filepath"
	"strconv"

	"github.com/sessionstore/sessionstore/jepsen/checker"
	"github.com/sessionstore/sessionstore/jepsen/history"
	"github.com/sessionstore/sessionstore/jepsen/report"
)

// writeReport renders report.html from the history, the summary and the
// checkers' verdicts.
func writeReport(dir string, ops []history.Op, s Summary, rep checker.Report) error {
	in := report.Input{
		Title: fmt.Sprintf("sessionstore jepsen: %s, seed %d", s.Scenario, s.Seed),
		Facts: [][2]string{
			{"scenario", s.Scenario}, {"seed", strconv.FormatInt(s.Seed, 10)}, {"backend", s.Backend},
			{"git", s.Git}, {"started", s.Started.Format("2006-01-02 15:04:05 UTC")},
			{"duration", fmt.Sprintf("%.1f s", s.DurationS)}, {"operations", strconv.Itoa(s.Operations)},
			{"processes", strconv.Itoa(s.Processes)}, {"faults", strconv.Itoa(len(s.Nemesis))},
			{"valid", string(s.Valid)},
		},
		Valid: string(rep.Valid),
		Ops:   ops,
	}
	for _, res := range rep.Results {
		v := report.Verdict{Name: res.Name, Valid: string(res.Valid), Stats: res.Stats}
		for _, w := range res.Witnesses {
			v.Witnesses = append(v.Witnesses, report.WitnessText{Session: w.Session, Ops: w.Ops, Text: w.Text})
		}
		in.Verdicts = append(in.Verdicts, v)
	}
	for _, p := range s.Phases {
		in.Phases = append(in.Phases, report.Phase{Name: p.Name, Start: int64(p.StartS * 1e9), End: int64(p.EndS * 1e9)})
	}
	for _, f := range s.Nemesis {
		in.Faults = append(in.Faults, report.Fault{Name: f.Fault, Targets: f.Targets, Start: int64(f.StartS * 1e9),
			End: int64(f.EndS * 1e9), Injected: f.Injected, Verified: f.Verified, Note: f.Note})
	}
	in.PhaseTable.Header = []string{"phase", "start s", "end s", "ok", "fail", "info", "ok/s", "p99 ms", "longest gap s"}
	for _, p := range s.Phases {
		in.PhaseTable.Rows = append(in.PhaseTable.Rows, []string{p.Name, fmt.Sprintf("%.1f", p.StartS), fmt.Sprintf("%.1f", p.EndS),
			strconv.Itoa(p.OK), strconv.Itoa(p.Fail), strconv.Itoa(p.Info), fmt.Sprintf("%.1f", p.OKPerS),
			fmt.Sprintf("%.1f", p.P99Ms), fmt.Sprintf("%.1f", p.MaxGapS)})
	}
	return report.WriteFile(filepath.Join(dir, "report.html"), in)
}
