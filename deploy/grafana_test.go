package deploy_test

import (
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// The Grafana dashboard (deploy/grafana/sessionstore-dashboard.json) is
// importable and refers only to series the node exports.
//
// What is checked, and why this way: the JSON parses, has the
// ${DS_PROMETHEUS} datasource input every panel and target uses, unique panel
// ids, and every metric name in an expr appears, as a quoted string, in a
// non-test .go file of the repository (histogram and summary series are
// matched by their family name, without _bucket/_sum/_count). Scraping a real
// registry would be exact but needs a running node with every family
// populated (CounterVecs without children are not exported at all); a quoted
// name in the sources is the registration of that name, which is what a typo
// or a renamed metric breaks. Names not spelled out in our sources are listed
// in external, each with where it comes from.
func TestGrafanaDashboard(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join("grafana", "sessionstore-dashboard.json"))
	if err != nil {
		t.Fatal(err)
	}
	var dash struct {
		Inputs        []dashInput `json:"__inputs"`
		SchemaVersion int         `json:"schemaVersion"`
		UID           string      `json:"uid"`
		Title         string      `json:"title"`
		Panels        []panel     `json:"panels"`
	}
	if err := json.Unmarshal(raw, &dash); err != nil {
		t.Fatalf("dashboard JSON: %v", err)
	}
	if dash.SchemaVersion < 36 || dash.UID == "" || dash.Title == "" {
		t.Errorf("schemaVersion %d, uid %q, title %q: want a current schema, a uid and a title", dash.SchemaVersion, dash.UID, dash.Title)
	}
	if !slices.ContainsFunc(dash.Inputs, func(in dashInput) bool {
		return in.Name == "DS_PROMETHEUS" && in.Type == "datasource" && in.PluginID == "prometheus"
	}) {
		t.Errorf("__inputs %+v: want the DS_PROMETHEUS prometheus datasource input", dash.Inputs)
	}

	sources := goSources(t, "..")
	ids := map[int]string{}
	names := map[string][]string{} // metric name → panels using it
	var all []panel
	for _, p := range dash.Panels {
		all = append(all, p)
		all = append(all, p.Panels...) // collapsed rows keep their panels inside
	}
	for _, p := range all {
		if prev, ok := ids[p.ID]; ok || p.ID == 0 {
			t.Errorf("panel %q: id %d missing or already used by %q", p.Title, p.ID, prev)
		}
		ids[p.ID] = p.Title
		if p.GridPos.W == 0 || p.GridPos.H == 0 {
			t.Errorf("panel %q: no gridPos", p.Title)
		}
		if p.Type == "row" {
			continue
		}
		if p.Datasource.UID != "${DS_PROMETHEUS}" {
			t.Errorf("panel %q: datasource %+v, want uid ${DS_PROMETHEUS}", p.Title, p.Datasource)
		}
		if len(p.Targets) == 0 {
			t.Errorf("panel %q: no targets", p.Title)
		}
		refs := map[string]bool{}
		for _, tg := range p.Targets {
			if tg.Datasource.UID != "${DS_PROMETHEUS}" || tg.RefID == "" || refs[tg.RefID] || strings.TrimSpace(tg.Expr) == "" {
				t.Errorf("panel %q target %q: datasource %+v, refId %q (unique, set), expr %q (set)", p.Title, tg.Expr, tg.Datasource, tg.RefID, tg.Expr)
			}
			refs[tg.RefID] = true
			found := false
			for _, n := range metricName.FindAllString(tg.Expr, -1) {
				names[n] = append(names[n], p.Title)
				found = true
			}
			if !found {
				t.Errorf("panel %q: expr %q names no sessionstore_, go_ or process_ series", p.Title, tg.Expr)
			}
		}
	}
	for n, panels := range names {
		if src, ok := external[n]; ok {
			if !strings.Contains(sources, src.marker) {
				t.Errorf("%s (panels %q): comes from %s, but no source contains %q", n, panels, src.from, src.marker)
			}
			continue
		}
		family := n
		for _, suffix := range []string{"_bucket", "_sum", "_count"} {
			if base, ok := strings.CutSuffix(n, suffix); ok && strings.Contains(sources, `"`+base+`"`) {
				family = base
			}
		}
		if !strings.Contains(sources, `"`+family+`"`) {
			t.Errorf("%s (panels %q): not registered anywhere in the Go sources", n, panels)
		}
	}
	for _, want := range []string{"sessionstore_rpc_forwarded_total", "sessionstore_auth_denied_total", "sessionstore_limit_refused_total",
		"sessionstore_raft_state", "sessionstore_cluster_commit_seconds_bucket", "sessionstore_fsm_leases_total", "sessionstore_bbolt_free_bytes",
		"sessionstore_artifact_bytes", "sessionstore_raft_commit_seconds_bucket", "sessionstore_raft_log_store_seconds_bucket",
		"sessionstore_disk_free_bytes", "sessionstore_disk_low", "sessionstore_retention_deleted_total"} {
		if names[want] == nil {
			t.Errorf("no panel shows %s", want)
		}
	}
}

type dashInput struct {
	Name     string `json:"name"`
	Type     string `json:"type"`
	PluginID string `json:"pluginId"`
}

type panel struct {
	ID         int    `json:"id"`
	Type       string `json:"type"`
	Title      string `json:"title"`
	Datasource struct {
		Type string `json:"type"`
		UID  string `json:"uid"`
	} `json:"datasource"`
	GridPos struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		RefID      string `json:"refId"`
		Expr       string `json:"expr"`
		Datasource struct {
			UID string `json:"uid"`
		} `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// metricName finds the series names of an expr (labels, functions and
// keywords never start with these prefixes).
var metricName = regexp.MustCompile(`\b(?:sessionstore|go|process)_[a-zA-Z0-9_:]+`)

// external are series whose names our sources do not spell out: marker is a
// string of the source that makes them exist.
var external = map[string]struct{ from, marker string }{
	// client_golang's process and Go collectors, registered in cmd/node/serve.go.
	"process_cpu_seconds_total":     {"collectors.NewProcessCollector", "collectors.NewProcessCollector("},
	"process_resident_memory_bytes": {"collectors.NewProcessCollector", "collectors.NewProcessCollector("},
	"go_goroutines":                 {"collectors.NewGoCollector", "collectors.NewGoCollector("},
}

// goSources concatenates the repository's non-test .go files.
func goSources(t *testing.T, root string) string {
	t.Helper()
	var b strings.Builder
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "vendor") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		b.Write(data)
		b.WriteByte('\n')
		return nil
	})
	if err != nil {
		t.Fatalf("walk %s: %v", root, err)
	}
	return b.String()
}
