package sessionstore_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// layers is the allowed direction of imports between the module's packages:
// a package may import only packages of a lower layer. Domain types and
// leaf helpers are at the bottom, the replicated state machine above the
// storage it writes, the cluster above the state machine, and the programs
// (the node, jepsen, the scripts) on top; the gRPC service (api/rpc) declares
// the backend it needs and never imports the cluster, which cmd/node wires
// in. A new package must be given its layer here.
var layers = map[string]int{
	".":                   0, // domain types and errors
	"internal/benchload":  0,
	"internal/corrupt":    0,
	"internal/dockertest": 0,
	"internal/du":         0,
	"internal/procstat":   0,
	"internal/refdata":    0,
	"internal/serverproc": 0,
	"internal/tlsconf":    0,
	"internal/units":      0,
	"fsm/fsmpb":           0,
	"api/forwardpb":       0,
	"api":                 0,
	"deploy":              0,
	"console":             0, // the web console's embedded files; only the standard library

	"sessionlog":    1, // the event log's format and rules
	"api/sessionpb": 1,
	"api/auth":      1,

	"storage":             2, // state database, Raft log, artifacts on disk
	"planmode":            2, // plan mode's pure rules
	"api/client":          2,
	"jepsen/history":      2,
	"jepsen/cluster":      2,
	"jepsen/checker":      3,
	"jepsen/report":       3,
	"fsm":                 3, // the deterministic state machine
	"archive":             3,
	"api/rpc":             3, // the gRPC and HTTP service, over a backend interface
	"artifacts":           4, // the artifact writer, fed by the FSM's observer
	"jepsen":              4,
	"cluster":             5, // Raft, gossip, proposals, reads
	"cluster/clustertest": 6, // in-process clusters for tests
	"cmd/node":            6, // wires everything
	"jepsen/cmd/jepsen":   6,
	"scripts/exportbench": 6,
	"scripts/scaling":     6,
	"scripts/vsetcd":      6,
}

// TestImportsGoDown fails when a package imports one of its own layer or a
// higher one (test files aside: a test may reach up to drive its package).
func TestImportsGoDown(t *testing.T) {
	mod := modulePath(t)
	imports := map[string][]string{} // package dir → module packages its non-test files import
	err := filepath.WalkDir(".", func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if name := d.Name(); path != "." && (strings.HasPrefix(name, ".") || strings.HasPrefix(name, "_") || name == "testdata" || name == "node_modules") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		dir := filepath.ToSlash(filepath.Dir(path))
		if _, ok := imports[dir]; !ok {
			imports[dir] = nil
		}
		if strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly)
		if err != nil {
			return err
		}
		for _, spec := range f.Imports {
			p, _ := strconv.Unquote(spec.Path.Value)
			switch {
			case p == mod:
				imports[dir] = append(imports[dir], ".")
			case strings.HasPrefix(p, mod+"/"):
				imports[dir] = append(imports[dir], strings.TrimPrefix(p, mod+"/"))
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var problems []string
	for dir, deps := range imports {
		l, ok := layers[dir]
		if !ok {
			problems = append(problems, fmt.Sprintf("package %s has no layer (give it one in layers_test.go)", dir))
			continue
		}
		for _, dep := range slices.Compact(slices.Sorted(slices.Values(deps))) {
			if dl, ok := layers[dep]; ok && dl >= l {
				problems = append(problems, fmt.Sprintf("%s (layer %d) imports %s (layer %d)", dir, l, dep, dl))
			}
		}
	}
	for dir := range layers {
		if _, ok := imports[dir]; !ok {
			problems = append(problems, fmt.Sprintf("layers_test.go names %s, which holds no Go package", dir))
		}
	}
	slices.Sort(problems)
	for _, p := range problems {
		t.Error(p)
	}
}

func modulePath(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile("go.mod")
	if err != nil {
		t.Fatal(err)
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if rest, ok := strings.CutPrefix(strings.TrimSpace(line), "module "); ok {
			return strings.TrimSpace(rest)
		}
	}
	t.Fatal("go.mod names no module")
	return ""
}
