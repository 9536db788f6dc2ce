package jepsen

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/internal/dockertest"
	"github.com/sessionstore/sessionstore/jepsen/checker"
	"github.com/sessionstore/sessionstore/jepsen/cluster"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Scenario tests: the real cluster from docker-compose.yml under faults.
// They need Docker; without it they skip, except under CI=true, where they
// fail. JEPSEN_SEED replays a schedule (default: a new seed, printed).

func requireDocker(t *testing.T) { dockertest.Require(t, "nsenter", "nft") }

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	return root
}

func testSeed(t *testing.T) int64 {
	if s := os.Getenv("JEPSEN_SEED"); s != "" {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			t.Fatalf("JEPSEN_SEED: %v", err)
		}
		return v
	}
	return time.Now().UnixNano() % 1_000_000
}

// scenarioRun is one scenario test.
type scenarioRun struct {
	scenario string
	d        time.Duration
	faults   []string // nil: the scenario's menu
	image    string   // "" = sessionstore:dev
	tags     string   // Go build tags of the image
	net      string
}

// runScenario builds the image, runs one scenario and returns its result.
// A run's directory (history, summary, report, node logs and data) is under
// jepsen/store/; the caller removes it when the run is what it expected.
func runScenario(t *testing.T, sr scenarioRun) (*Result, string) {
	if testing.Short() {
		t.Skip("scenario tests run the cluster in Docker for minutes")
	}
	requireDocker(t)
	if sr.image == "" {
		// A machine shared with other runs can give this one its own tag.
		sr.image = os.Getenv("JEPSEN_IMAGE")
	}
	root := repoRoot(t)
	seed := testSeed(t)
	out := filepath.Join(root, "jepsen", "store", sr.scenario, fmt.Sprintf("%s-%d", time.Now().UTC().Format("20060102T150405Z"), seed))
	ctx, cancel := context.WithTimeout(context.Background(), sr.d+6*time.Minute)
	defer cancel()
	if b, err := cluster.BuildImage(ctx, root, sr.image, sr.tags); err != nil {
		t.Fatalf("building the image: %v\n%s", err, b)
	}
	b, err := cluster.NewDocker(cluster.DockerConfig{Repo: root, Project: "jepsen-" + sr.scenario, DataDir: filepath.Join(out, "data"),
		Net: sr.net, Image: sr.image})
	if err != nil {
		t.Fatal(err)
	}
	var progress bytes.Buffer
	res, err := Run(ctx, Config{Scenario: sr.scenario, Seed: seed, Duration: sr.d, Faults: sr.faults, Out: out, Backend: b, Progress: &progress})
	t.Logf("seed %d (replay: JEPSEN_SEED=%d)\n%s", seed, seed, progress.String())
	if err != nil {
		t.Fatalf("run failed (outputs kept in %s): %v", out, err)
	}
	s := res.Summary
	t.Logf("%s: valid=%s, %d operations (%v), %d faults, duration %.0f s", sr.scenario, s.Valid, s.Operations, s.Ops, len(s.Nemesis), s.DurationS)
	return res, out
}

// requireValid fails the test on any anomaly or an unknown verdict, keeping
// the run's directory; a valid run's directory is removed.
func requireValid(t *testing.T, res *Result, out string) {
	t.Helper()
	if res.Report.Valid != checker.True {
		for _, r := range res.Report.Results {
			if r.Valid != checker.True {
				for i, w := range r.Witnesses {
					if i == 5 {
						break
					}
					t.Errorf("%s (%s): %s", r.Name, r.Valid, w.Text)
				}
			}
		}
		logSessions(t, res, out)
		t.Fatalf("verdict %s; history, report and node data kept in %s", res.Report.Valid, out)
	}
	_ = os.RemoveAll(out)
}

// logSessions writes to the test log the history records of the first
// sessions a failed checker names, with the nemesis records, so that a
// failure in CI (whose run directory is gone with its machine) can be
// analysed from the log alone.
func logSessions(t *testing.T, res *Result, out string) {
	t.Helper()
	const maxSessions, maxLines = 2, 1500
	var sessions []string
	for _, r := range res.Report.Results {
		for _, w := range r.Witnesses {
			if r.Valid != checker.True && w.Session != "" && !slices.Contains(sessions, w.Session) && len(sessions) < maxSessions {
				sessions = append(sessions, w.Session)
			}
		}
	}
	if len(sessions) == 0 {
		return
	}
	b, err := os.ReadFile(filepath.Join(out, "history.jsonl"))
	if err != nil {
		t.Logf("history: %v", err)
		return
	}
	var lines []string
	for _, line := range strings.Split(string(b), "\n") {
		var o history.Op
		if json.Unmarshal([]byte(line), &o) != nil {
			continue
		}
		if o.F == history.FNemesis || slices.Contains(sessions, o.Session) {
			lines = append(lines, line)
		}
	}
	if len(lines) > maxLines {
		lines = append(lines[:maxLines/2], lines[len(lines)-maxLines/2:]...)
	}
	t.Logf("history of %v (nemesis records included; %d lines):\n%s", sessions, len(lines), strings.Join(lines, "\n"))
	var final history.Final
	if b, err := os.ReadFile(filepath.Join(out, "final.json")); err == nil && json.Unmarshal(b, &final) == nil {
		for _, s := range sessions {
			t.Logf("final log of %s (%d events): %s", s, len(final.Logs[s]), strings.Join(final.Logs[s], " "))
		}
	}
}

func TestScenario_Faults(t *testing.T) {
	res, out := runScenario(t, scenarioRun{scenario: "faults", d: 75 * time.Second, net: "10.211.7"})
	requireValid(t, res, out)
}

func TestScenario_CreatorsPlanMode(t *testing.T) {
	res, out := runScenario(t, scenarioRun{scenario: "creators-planmode", d: 60 * time.Second, net: "10.211.8"})
	requireValid(t, res, out)
}

func TestScenario_LeaseTakeover(t *testing.T) {
	res, out := runScenario(t, scenarioRun{scenario: "lease", d: 60 * time.Second, net: "10.211.9"})
	requireValid(t, res, out)
}

// The harness catches a real bug: an image built with the jepsenbug tag
// skips lease fencing, and the lease workload's stalled writers then land
// writes after a takeover, which the fencing checker must report.
func TestJepsenBug_SkippedFencingIsCaught(t *testing.T) {
	res, out := runScenario(t, scenarioRun{scenario: "lease", d: 40 * time.Second, faults: []string{},
		image: "sessionstore:jepsenbug", tags: "jepsenbug", net: "10.211.10"})
	f := res.Report.Result("fencing")
	if f == nil || f.Valid != checker.False {
		t.Fatalf("the fencing checker did not catch writes past a takeover (%v); outputs in %s", f, out)
	}
	t.Logf("caught: %s", f.Witnesses[0].Text)
	_ = os.RemoveAll(out)
}

// The disk faults: bit flips in a stopped node's state database, Raft log
// and artifacts, and a node started on another cluster's data directory,
// each repaired as the README documents (the node itself, or the
// operator's command the fault runs).
func TestScenario_Disk(t *testing.T) {
	res, out := runScenario(t, scenarioRun{scenario: "disk", d: 100 * time.Second, net: "10.211.11"})
	for _, f := range diskFaults {
		found := false
		for _, rec := range res.Summary.Nemesis {
			found = found || (rec.Fault == f && rec.Verified)
		}
		if !found {
			t.Errorf("fault %s was not injected and verified (outputs in %s)", f, out)
		}
	}
	requireValid(t, res, out)
}
