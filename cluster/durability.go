package cluster

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore/storage"
)

// The state database commits without fsync (storage.StateOptions.NoSync),
// and the FSM's batches are committed together (storage.StateDB.UpdateDeferred:
// by this flush, by the first read, or every 256 batches): an entry is
// durable once the Raft log holds it, and the state database is a cache of
// the applied log that Raft replays from its applied index after a crash. A
// process crash loses what was applied but not yet committed, which the
// replay applies again. Two mechanisms keep that safe:
//
//   - runSyncer commits and flushes the state database every syncInterval,
//     so replay after a crash stays short and the file on disk is never far
//     behind (a longer interval writes the pages several batches share, the
//     hot session records and the log's right edge, fewer times);
//   - the boot marker tells the start-up guard whether the operating system
//     may have crashed (power loss) since the file was last flushed, in which
//     case page writes may have reached the disk out of order: the guard then
//     checks the whole file and, if it is damaged, rebuilds it from the latest
//     snapshot and the log. A process crash (SIGKILL) keeps the page cache and
//     needs no check.
const syncInterval = 250 * time.Millisecond

func (n *Node) runSyncer() {
	t := time.NewTicker(syncInterval)
	defer t.Stop()
	var synced uint64
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-t.C:
		}
		applied := n.fsm.AppliedIndex()
		if applied == synced {
			continue
		}
		if err := n.state.Sync(); err != nil {
			if errors.Is(err, storage.ErrStateFailed) {
				// Applied entries were lost from the state: it can no longer
				// follow the log. Stop, as the FSM does; a restart replays them.
				panic(fmt.Sprintf("state database: %v", err))
			}
			n.logger.Error("flushing the state database failed; committed entries stay durable in the Raft log", "err", err)
			continue
		}
		synced = applied
	}
}

func bootMarkerPath(dir string) string { return filepath.Join(dir, "state.boot") }

// currentBootID identifies this boot of the operating system ("" if unknown).
func currentBootID() string {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

// needsVerify reports whether the state database must be checked page by
// page: it exists and was not closed cleanly in this boot of the system.
func needsVerify(dir string) bool {
	if _, err := os.Stat(statePath(dir)); err != nil {
		return false
	}
	b, err := os.ReadFile(bootMarkerPath(dir))
	if err != nil {
		return true
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return true
	}
	boot := currentBootID()
	return f[1] != "clean" && (boot == "" || f[0] != boot)
}

// writeBootMarker records this boot's id and whether the state database was
// closed cleanly (flushed) or is open.
func writeBootMarker(dir string, clean bool) error {
	state := "open"
	if clean {
		state = "clean"
	}
	boot := currentBootID()
	if boot == "" {
		boot = "unknown"
	}
	content := []byte(boot + " " + state + "\n")
	if old, err := os.ReadFile(bootMarkerPath(dir)); err == nil && bytes.Equal(old, content) {
		return nil
	}
	tmp := bootMarkerPath(dir) + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		return err
	}
	f, err := os.Open(tmp)
	if err == nil {
		_ = f.Sync()
		f.Close()
	}
	return os.Rename(tmp, bootMarkerPath(dir))
}
