package cluster

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore/storage"
)

const (
	deepCheckMsg = "checked every page of the state database"
	movedMsg     = "state database is damaged or cannot be opened; moving it aside"
)

// guardDir writes a data directory whose state.db holds sessions with events
// over many pages, closed as the node closes it (closeStores: the clean-stop
// stamp and boot marker).
func guardDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(raftDir(dir), 0o700); err != nil {
		t.Fatal(err)
	}
	s, err := storage.OpenState(statePath(dir), storage.StateOptions{InitialMmapSize: 1 << 20, NoSync: true})
	if err != nil {
		t.Fatal(err)
	}
	for i := range 2 { // two writes: the second frees pages of the first
		err = s.Update(func(tx *storage.Tx) error {
			for j := range 8 {
				id := fmt.Sprintf("s%d", j)
				if err := tx.PutRecord(id, []byte("record"), nil); err != nil {
					return err
				}
				var evs [][]byte
				for k := range 40 {
					evs = append(evs, fmt.Appendf(nil, `{"seq":%d,"pad":"%0300d"}`, i*40+k, k))
				}
				if err := tx.PutEvents(id, 1, int64(i*40), evs); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if err := (&Stores{Dir: dir, State: s}).Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// runGuard runs the start-up guard on dir and returns its log.
func runGuard(t *testing.T, dir string, verify bool) string {
	t.Helper()
	snaps, err := raft.NewFileSnapshotStore(raftDir(dir), 1, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	logs, _, _, err := guardState(dir, snaps, slog.New(slog.NewTextHandler(&log, nil)), verify)
	if err != nil {
		t.Fatalf("guard: %v\n%s", err, log.String())
	}
	logs.Close()
	return log.String()
}

// zeroLeaf zeroes a leaf page of events in state.db (one a start does not
// read), as a tool writing the file would.
func zeroLeaf(t *testing.T, dir string) {
	t.Helper()
	path := statePath(dir)
	tmp := filepath.Join(t.TempDir(), "copy.db")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	db, err := bbolt.Open(tmp, 0o600, &bbolt.Options{ReadOnly: true, PreLoadFreelist: true})
	if err != nil {
		t.Fatal(err)
	}
	leaf := 0
	ps := os.Getpagesize()
	_ = db.View(func(tx *bbolt.Tx) error {
		for id := 2; ; id++ {
			info, err := tx.Page(id)
			if err != nil || info == nil {
				return err
			}
			if info.Type == "leaf" && bytes.Contains(b[id*ps:(id+1)*ps], []byte(`"pad"`)) {
				leaf = id
			}
			id += info.OverflowCount
		}
	})
	db.Close()
	if leaf == 0 {
		t.Fatal("no events leaf page")
	}
	clear(b[leaf*ps : (leaf+1)*ps])
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
	// A change time one clock tick later than the clean stop's is certain in
	// life (the stop, then a tool); here the write may share its tick.
	old := time.Unix(1, 0)
	if err := os.Chtimes(path, old, old); err != nil {
		t.Fatal(err)
	}
}

// crashState replaces state.db with the bytes a process killed after a write
// leaves: the freelist dropped, no Close.
func crashState(t *testing.T, dir string) {
	t.Helper()
	s, err := storage.OpenState(statePath(dir), storage.StateOptions{InitialMmapSize: 1 << 20})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Update(func(tx *storage.Tx) error { return tx.SetClock(42) }); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(statePath(dir))
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if err := os.WriteFile(statePath(dir), b, 0o600); err != nil {
		t.Fatal(err)
	}
	_ = os.Remove(cleanStampPath(dir))
}

// TestGuardCleanStop: after a clean stop the guard reads only what a start
// reads; after an unclean one, or when the file changed since the stop, or
// when the operating system may have crashed, it checks every page, and a
// damaged page is moved aside as before. Whatever it did, the file it leaves
// has a synced freelist (the node's Open does not walk it) and the stamp is
// gone.
func TestGuardCleanStop(t *testing.T) {
	cases := []struct {
		name    string
		prepare func(t *testing.T, dir string)
		verify  bool
		deep    bool
		moved   bool
	}{
		{"clean stop", func(*testing.T, string) {}, false, false, false},
		{"clean stop, then a page zeroed by a write to the file", zeroLeaf, false, true, true},
		{"clean stop, file replaced", func(t *testing.T, dir string) {
			b, err := os.ReadFile(statePath(dir))
			if err != nil {
				t.Fatal(err)
			}
			tmp := statePath(dir) + ".new"
			if err := os.WriteFile(tmp, b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(tmp, statePath(dir)); err != nil {
				t.Fatal(err)
			}
		}, false, true, false},
		{"clean stop, operating system crash since (verify)", func(*testing.T, string) {}, true, true, false},
		{"unclean stop", crashState, false, true, false},
		{"unclean stop, a page zeroed", func(t *testing.T, dir string) { crashState(t, dir); zeroLeaf(t, dir) }, false, true, true},
		{"unclean stop, a page zeroed, a stamp of the damaged file", func(t *testing.T, dir string) {
			// As a stop of a build that wrote no freelist would leave it:
			// the stamp matches, the file needs the walk.
			crashState(t, dir)
			zeroLeaf(t, dir)
			if err := writeCleanStamp(dir); err != nil {
				t.Fatal(err)
			}
		}, false, true, true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			dir := guardDir(t)
			tc.prepare(t, dir)
			if tc.name == "clean stop, then a page zeroed by a write to the file" {
				// The premise: only the stale stamp sends this file to the
				// full check.
				if deep, err := storage.CheckStateFileQuick(statePath(dir)); err != nil || deep {
					t.Fatalf("CheckStateFileQuick of the damaged file = %v, %v; want a quick pass", deep, err)
				}
			}
			log := runGuard(t, dir, tc.verify)
			if got := strings.Contains(log, deepCheckMsg); got != tc.deep {
				t.Errorf("checked every page: %v, want %v; log:\n%s", got, tc.deep, log)
			}
			aside, _ := filepath.Glob(statePath(dir) + ".damaged-*")
			if got := strings.Contains(log, movedMsg); got != tc.moved || len(aside) != map[bool]int{true: 1}[tc.moved] {
				t.Errorf("moved aside: log %v, files %v; want %v; log:\n%s", got, aside, tc.moved, log)
			}
			if _, err := os.Stat(cleanStampPath(dir)); !os.IsNotExist(err) {
				t.Errorf("the clean-stop stamp outlived the guard: %v", err)
			}
			if tc.moved {
				return // no snapshot to rebuild from: no state.db
			}
			if deep, err := storage.CheckStateFileQuick(statePath(dir)); err != nil || deep {
				t.Errorf("after the guard: CheckStateFileQuick = %v, %v; want a synced freelist", deep, err)
			}
		})
	}
}

// TestCleanStampAfterCloseStores: closeStores leaves a stamp that matches the
// file; any write to the file makes it stale.
func TestCleanStampAfterCloseStores(t *testing.T) {
	dir := guardDir(t)
	b, err := os.ReadFile(cleanStampPath(dir))
	if err != nil {
		t.Fatal(err)
	}
	if ok, err := takeCleanStamp(dir); err != nil || !ok {
		t.Fatalf("takeCleanStamp = %v, %v; want a match (stamp %q)", ok, err, b)
	}
	if ok, err := takeCleanStamp(dir); err != nil || ok {
		t.Fatalf("second takeCleanStamp = %v, %v; want none: it was removed", ok, err)
	}
	if err := os.WriteFile(cleanStampPath(dir), b, 0o600); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(statePath(dir), os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(make([]byte, 4096)); err != nil {
		t.Fatal(err)
	}
	f.Close()
	if ok, err := takeCleanStamp(dir); err != nil || ok {
		t.Fatalf("takeCleanStamp after a write = %v, %v; want no match", ok, err)
	}
}

// TestCheckStateLater: damage the background check finds is kept for Ready
// and withdraws the clean stop (no stamp: the next start checks every page
// and moves the file aside); a sound file leaves the stamp in place.
func TestCheckStateLater(t *testing.T) {
	for _, damaged := range []bool{false, true} {
		t.Run(fmt.Sprintf("damaged=%v", damaged), func(t *testing.T) {
			dir := guardDir(t)
			if damaged {
				// Damage as the medium would leave it: the stamp still
				// matches the file.
				zeroLeaf(t, dir)
				if err := writeCleanStamp(dir); err != nil {
					t.Fatal(err)
				}
			}
			log := runGuard(t, dir, false)
			if strings.Contains(log, deepCheckMsg) {
				t.Fatalf("the guard checked every page (want the quick check); log:\n%s", log)
			}
			s, err := storage.OpenState(statePath(dir), storage.StateOptions{InitialMmapSize: 1 << 20, NoSync: true})
			if err != nil {
				t.Fatal(err)
			}
			var buf bytes.Buffer
			n := &Node{cfg: Config{DataDir: dir}, stores: &Stores{Dir: dir, State: s}, state: s, logger: slog.New(slog.NewTextHandler(&buf, nil))}
			n.ctx, n.cancel = context.WithCancel(context.Background())
			defer n.cancel()
			n.checkStateLater()
			if got := n.stateDamage.Load() != nil; got != damaged {
				t.Fatalf("damage recorded: %v, want %v; log:\n%s", got, damaged, buf.String())
			}
			if err := n.closeStores(); err != nil {
				t.Fatal(err)
			}
			_, err = os.Stat(cleanStampPath(dir))
			if stamped := err == nil; stamped == damaged {
				t.Fatalf("clean-stop stamp after the stop: %v, want %v", stamped, !damaged)
			}
			log = runGuard(t, dir, false)
			if got := strings.Contains(log, movedMsg); got != damaged {
				t.Fatalf("next start moved the file aside: %v, want %v; log:\n%s", got, damaged, log)
			}
		})
	}
}
