package deploy_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The alerting rules (deploy/prometheus/sessionstore-alerts.yml) name only
// series the node exports, every rule has an expression, a severity and a
// summary, the conditions operators need are covered, and every rule has a
// promtool test (TestAlertRules_Promtool runs them). The file is read line by
// line (the repository has no YAML parser and the file keeps to one key per
// line); a quoted metric name in a non-test .go file is its registration, as
// TestGrafanaDashboard explains (histograms by their family name).
func TestAlertRules(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("prometheus", "sessionstore-alerts.yml"))
	if err != nil {
		t.Fatal(err)
	}
	sources := goSources(t, "..")
	type rule struct{ name, expr, severity, summary string }
	var rules []*rule
	field := regexp.MustCompile(`^\s*(?:- )?(alert|expr|severity|summary):\s*(.*)$`)
	for _, line := range strings.Split(string(raw), "\n") {
		m := field.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		if m[1] == "alert" {
			rules = append(rules, &rule{name: m[2]})
			continue
		}
		if len(rules) == 0 {
			t.Fatalf("%q before the first alert", line)
		}
		r := rules[len(rules)-1]
		switch m[1] {
		case "expr":
			r.expr = m[2]
		case "severity":
			r.severity = m[2]
		case "summary":
			r.summary = m[2]
		}
	}
	tests, err := os.ReadFile(filepath.Join("prometheus", "sessionstore-alerts.test.yml"))
	if err != nil {
		t.Fatal(err)
	}
	// The series an alert must watch: integrity, no leader, quorum at risk,
	// apply lag, fsync latency, disk low, snapshot failures.
	want := map[string]bool{}
	for _, name := range []string{"sessionstore_checksum_failures_total", "sessionstore_artifact_verify_failures_total",
		"sessionstore_raft_is_leader", "sessionstore_cluster_voters_alive", "sessionstore_raft_applied_index",
		"sessionstore_raft_log_store_seconds", "sessionstore_disk_low", "sessionstore_fsm_snapshot_errors_total"} {
		want[name] = false
	}
	for _, r := range rules {
		if r.expr == "" || r.severity == "" || r.summary == "" {
			t.Errorf("rule %+v: want an expr, a severity and a summary", *r)
		}
		if !strings.Contains(string(tests), "alertname: "+r.name+"\n") {
			t.Errorf("rule %s: no test in prometheus/sessionstore-alerts.test.yml", r.name)
		}
		for _, name := range metricName.FindAllString(r.expr, -1) {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				if base, ok := strings.CutSuffix(name, suffix); ok && strings.Contains(sources, `"`+base+`"`) {
					name = base
				}
			}
			if !strings.Contains(sources, `"`+name+`"`) {
				t.Errorf("rule %s: metric %s is not registered in any non-test .go file", r.name, name)
			}
			if _, ok := want[name]; ok {
				want[name] = true
			}
		}
	}
	for name, found := range want {
		if !found {
			t.Errorf("no rule alerts on %s", name)
		}
	}
}

// promtool checks the rules and runs their tests
// (prometheus/sessionstore-alerts.test.yml): each alert fires when it should,
// with its labels and texts, and not for the healthy nodes beside it. Without
// promtool (Debian package prometheus) the test is skipped, except under
// CI=true, where it fails: CI installs it.
func TestAlertRules_Promtool(t *testing.T) {
	promtool, err := exec.LookPath("promtool")
	if err != nil {
		msg := "promtool not found on PATH (apt-get install prometheus): the alert rule tests did not run"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg)
		}
		t.Skip(msg)
	}
	for _, args := range [][]string{
		{"check", "rules", filepath.Join("prometheus", "sessionstore-alerts.yml")},
		{"test", "rules", filepath.Join("prometheus", "sessionstore-alerts.test.yml")},
	} {
		out, err := exec.Command(promtool, args...).CombinedOutput()
		if err != nil {
			t.Errorf("promtool %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
}
