// Package refdata locates the repository's recorded reference material
// (testdata/recorded at the module root) for tests in any package.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// RecordedDir returns testdata/recorded: session logs recorded by the
// reference harness (see its README). It walks up from the test's directory to
// the module root (the directory holding go.mod).
func RecordedDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "testdata", "recorded")
			if st, err := os.Stat(p); err != nil || !st.IsDir() {
				tb.Fatalf("recorded sessions missing: %s", p)
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
