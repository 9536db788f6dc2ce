//go:build bigstate

package storage

// Times each whole-file pass a start makes over a large state database
// (issue 14). Not in CI. BIGSTATE_FILE is a state.db it may write to (a copy:
// opening it commits), e.g. the one cmd/node's TestBigStateGenerate writes:
//
//	BIGSTATE_FILE=/tmp/bigstate/run/state.db go test -tags bigstate -run TestBigStatePasses -count=1 -v ./storage

import (
	"os"
	"strings"
	"testing"
	"time"
)

func TestBigStatePasses(t *testing.T) {
	path := os.Getenv("BIGSTATE_FILE")
	if path == "" {
		t.Skip("BIGSTATE_FILE not set")
	}
	step := func(name string, fn func() error) {
		t.Helper()
		start := time.Now()
		if err := fn(); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		t.Logf("%-58s %8v  %s", name, time.Since(start).Round(time.Millisecond), rss())
	}
	var db *StateDB
	for round := range 2 {
		t.Logf("round %d: file has a synced freelist: %v", round+1, fileHasSyncedFreelist(t, path))
		step("CheckStateFileQuick", func() error {
			deep, err := CheckStateFileQuick(path)
			t.Logf("quick check walked the file: %v", deep)
			return err
		})
		step("CheckStateFile (full walk)", func() error { return CheckStateFile(path) })
		step("OpenState (bbolt Open)", func() (err error) { db, err = OpenState(path, StateOptions{}); return err })
		step("StateDB.Check (bbolt's page check)", db.Check)
		step("StateDB.Close", db.Close)
		step("OpenState, default options (bbolt Open)", func() (err error) { db, err = OpenState(path, DefaultStateOptions()); return err })
		step("AppliedIndex", func() error { _, _, err := db.AppliedIndex(); return err })
		step("ForEachSessionUnchecked (the artifact writer's first pass)", func() error {
			return db.View(func(tx *Tx) error {
				n := 0
				err := tx.ForEachSessionUnchecked(func(string, []byte) error { n++; return nil })
				t.Logf("%d sessions", n)
				return err
			})
		})
		step("StateDB.Close", db.Close)
	}
}

// rss is this process's VmRSS and RssFile.
func rss() string {
	b, _ := os.ReadFile("/proc/self/status")
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssFile") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

func fileHasSyncedFreelist(t *testing.T, path string) bool {
	t.Helper()
	b := make([]byte, 2*4096)
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, 0); err != nil {
		t.Fatal(err)
	}
	m0, err0 := parseBoltMeta(b[:4096])
	m1, err1 := parseBoltMeta(b[4096:])
	m := m0
	if err0 != nil || (err1 == nil && m1.txid > m0.txid) {
		m = m1
	}
	return m.freelist != boltNoFreelist
}
