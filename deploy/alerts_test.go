package deploy_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The alerting rules (deploy/prometheus/sessionstore-alerts.yml) name only
// series the node exports, and every rule has an expression, a severity and a
// summary. The file is read line by line (the repository has no YAML parser
// and the file keeps to one key per line); a quoted metric name in a non-test
// .go file is its registration, as TestGrafanaDashboard explains.
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
	want := map[string]bool{"sessionstore_checksum_failures_total": false, "sessionstore_artifact_verify_failures_total": false}
	for _, r := range rules {
		if r.expr == "" || r.severity == "" || r.summary == "" {
			t.Errorf("rule %+v: want an expr, a severity and a summary", *r)
		}
		for _, name := range metricName.FindAllString(r.expr, -1) {
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
