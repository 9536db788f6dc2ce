// Package refdata locates the repository's reference material (testdata/ at
// the module root) for tests in any package.
package refdata

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// RecordedDir returns testdata/recorded: session logs recorded by the
// reference harness (see its README).
func RecordedDir(tb testing.TB) string {
	tb.Helper()
	return Dir(tb, "recorded")
}

// PlanModeSequence returns the text of testdata/planmode/seqN.jsonl: golden
// plan-mode sequence n (docs/contract.md#plan-mode-sequences), one event a
// line.
func PlanModeSequence(tb testing.TB, n int) string {
	tb.Helper()
	b, err := os.ReadFile(filepath.Join(Dir(tb, "planmode"), fmt.Sprintf("seq%d.jsonl", n)))
	if err != nil {
		tb.Fatal(err)
	}
	return string(b)
}

// Dir returns testdata/<name>. It walks up from the test's directory to the
// module root (the directory holding go.mod).
func Dir(tb testing.TB, name string) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "testdata", name)
			if st, err := os.Stat(p); err != nil || !st.IsDir() {
				tb.Fatalf("reference data missing: %s", p)
			}
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			tb.Fatal("module root (go.mod) not found above the test's directory")
		}
		dir = parent
	}
}
