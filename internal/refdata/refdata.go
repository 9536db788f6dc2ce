// Package refdata locates the shared reference material that lies beside the
// repository (../shared from its root, wherever it is cloned) for tests.
package refdata

import (
	"os"
	"path/filepath"
	"testing"
)

// RecordedDir returns shared/testdata/recorded: the reference harness's own
// recorded session logs. Missing, it fails the test under CI=true and skips it
// otherwise.
func RecordedDir(tb testing.TB) string {
	tb.Helper()
	dir, err := os.Getwd()
	if err != nil {
		tb.Fatal(err)
	}
	for {
		p := filepath.Join(dir, "shared", "testdata", "recorded")
		if st, err := os.Stat(p); err == nil && st.IsDir() {
			return p
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			break
		}
		dir = parent
	}
	if os.Getenv("CI") == "true" {
		tb.Fatal("shared/testdata/recorded not found beside the repository")
	}
	tb.Skip("shared/testdata/recorded not found beside the repository")
	return ""
}
