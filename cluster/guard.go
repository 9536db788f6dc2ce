package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/storage"
)

// ErrLogBehindState is returned when the node cannot start because its Raft
// log lost entries its state database (or snapshot) already holds: a damaged
// record at a committed index, or a log cut below the applied index. Running
// on would apply new entries at indexes the state already counts as applied
// (skipping them: divergence), and a voter that lost entries it acknowledged
// could elect a leader without them. `sessionstore repair` rebuilds the log from the
// state (README "Damaged files").
var ErrLogBehindState = errors.New("the Raft log lost committed entries")

// guardState is the start-up guard (README "Damaged files"), run before Raft starts. It
// checks the state database, opens the Raft log (WAL) with the evidence of
// what was committed, and, when the state file is missing, damaged, cannot be
// opened, or is older than the latest snapshot (a crash during a snapshot
// install, a restored old file), restores that snapshot into place (Raft then
// replays the log above it). A damaged file is kept aside, never deleted. It
// returns the opened log.
//
// Every start checks the pages bbolt's Open reads before bbolt sees the file:
// bbolt panics on a damaged page inside a goroutine of its own, where no
// recover reaches, so without the check one bad page crash-loops the node.
// What Open reads depends on how the file was left:
//
//   - after a clean stop (the clean-stop stamp, cleanstop.go, matches the
//     file, and the file holds the freelist StateDB.Close writes), Open reads
//     the meta pages and the freelist, and the start reads the root and meta
//     buckets: storage.CheckStateFileQuick checks those, a few pages whatever
//     the file's size;
//   - otherwise (the process was killed or crashed, the file changed since the
//     stop, a build that wrote no freelist stopped it) Open walks every bucket
//     to rebuild the freelist, and so does storage.CheckStateFile, first.
//
// The trade-off: a page that went bad while the node was stopped cleanly,
// without any write to the file (the medium's own decay), is not found at
// start but by the first read that reaches it, which may crash the process;
// that start was then unclean, so the next one checks every page and moves the
// file aside. A start thus costs a few page reads instead of two or three
// walks over the whole file (each reading all of it, and leaving it resident
// in the process through bbolt's mmap), and damage still costs at most one
// crash, never a crash loop. When verify is set (the operating system may have
// crashed since the file was last synced), every page is checked and bbolt's
// full page check runs too.
//
// A start that checked only what it reads reports it (shallow): the node
// then checks every page in the background once serving (checkStateLater),
// and a damaged page found there fails readiness and sends the next start
// to the full check, which moves the file aside.
//
// The guard opens the file to read its applied index and closes it with
// StateDB.Close, which writes the freelist: the node's own Open that follows
// reads it, so even an unclean start walks the file twice (the check and
// bbolt's Open), not three times.
//
// The WAL drops a damaged last record as a torn write only above the
// committed index it is given: the state's applied index or the latest
// snapshot's, whichever is higher. At or below it the record was committed;
// the open fails and so does the start (ErrLogBehindState), as it does when
// the state's applied index is above the end of the log and of the snapshot.
func guardState(dataDir string, snaps raft.SnapshotStore, logger *slog.Logger, verify bool) (_ *storage.RaftWAL, restored, shallow bool, err error) {
	path := statePath(dataDir)
	// A restore killed part-way leaves its temporary copy behind.
	if stale, _ := filepath.Glob(path + ".restore-*.tmp"); len(stale) > 0 {
		for _, f := range stale {
			_ = os.Remove(f)
		}
		logger.Info("removed temporary files of an interrupted restore", "files", len(stale))
	}
	metas, err := snaps.List()
	if err != nil {
		return nil, false, false, fmt.Errorf("list snapshots: %w", err)
	}
	var snapIndex uint64
	if len(metas) > 0 {
		snapIndex = metas[0].Index
	}
	// Taken (removed) before anything opens the file, whatever follows.
	clean, err := takeCleanStamp(dataDir)
	if err != nil {
		return nil, false, false, err
	}
	need := false
	healthy := false   // the state file exists and opens
	deep := true       // and was checked page by page
	var applied uint64 // its applied index
	var stateCluster string
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		need = len(metas) > 0
	} else if err != nil {
		return nil, false, false, err
	} else {
		var err error
		start := time.Now()
		if clean && !verify {
			deep, err = storage.CheckStateFileQuick(path)
		} else {
			err = storage.CheckStateFile(path)
		}
		if deep {
			logger.Info("checked every page of the state database (the previous run did not stop cleanly, or the file changed since)",
				"seconds", time.Since(start).Seconds())
		}
		var db *storage.StateDB
		if err == nil {
			db, err = storage.OpenState(path, storage.StateOptions{})
		}
		if err == nil && verify {
			logger.Info("verifying the state database after an unclean stop of the previous boot")
			if err = db.Check(); err != nil {
				db.CloseUnchanged() // kept aside as found
			}
		}
		if err == nil {
			applied, _, err = db.AppliedIndex()
			if err == nil {
				err = db.View(func(tx *storage.Tx) error { stateCluster = tx.ClusterID(); return nil })
			}
			db.Close()
		}
		if err != nil {
			aside := fmt.Sprintf("%s.damaged-%d", path, time.Now().UnixNano())
			logger.Error("state database is damaged or cannot be opened; moving it aside and rebuilding it from the latest snapshot and the Raft log", "err", err, "moved_to", aside)
			if err := os.Rename(path, aside); err != nil {
				return nil, false, false, err
			}
			need = len(metas) > 0
		} else {
			healthy = true
		}
	}

	committed := max(applied, snapIndex)
	logs, err := storage.OpenRaftWAL(raftWALDir(dataDir), committed)
	if errors.Is(err, storage.ErrWALCommitted) {
		logger.Error("the Raft log's last record is damaged at an index the node already applied or snapshotted: refusing to start",
			"err", err, "applied_index", applied, "snapshot_index", snapIndex)
		return nil, false, false, fmt.Errorf("%w: %w; %s", ErrLogBehindState, err, repairHint(dataDir))
	}
	if err != nil {
		return nil, false, false, err
	}
	defer func() {
		if err != nil {
			logs.Close()
		}
	}()
	if tr, ok := logs.Truncation(); ok {
		logger.Warn("raft wal: truncated a torn tail (a write that never completed), above the applied and snapshotted indexes",
			"segment", tr.Segment, "offset", tr.Offset, "bytes", tr.Bytes, "index", tr.Index, "reason", tr.Reason,
			"applied_index", applied, "snapshot_index", snapIndex)
	}
	last, err := logs.LastIndex()
	if err != nil {
		return nil, false, false, err
	}
	if healthy && applied > max(last, snapIndex) {
		// A state.db of another cluster is ahead of this log by chance:
		// say that (checkIdentity's words), not "repair the log".
		if logID, _ := logClusterID(logs); stateCluster != "" && logID != "" && logID != stateCluster {
			return nil, false, false, fmt.Errorf("data directory %s mixes two clusters: the state database %s says cluster %s, the Raft log says cluster %s; refusing to start (restore this node's directory from one cluster, or start it empty to join as a new node)",
				dataDir, path, stateCluster, logID)
		}
		logger.Error("the state database is ahead of the Raft log: entries it applied are missing from the log; refusing to start",
			"applied_index", applied, "log_last_index", last, "snapshot_index", snapIndex)
		return nil, false, false, fmt.Errorf("%w: the state database applied index %d, but the Raft log ends at %d and the latest snapshot at %d; %s",
			ErrLogBehindState, applied, last, snapIndex, repairHint(dataDir))
	}
	if healthy && len(metas) > 0 && applied < snapIndex && changesState(logs, applied, snapIndex) {
		logger.Warn("state database is older than the latest snapshot; restoring it", "applied_index", applied, "snapshot_index", snapIndex)
		need = true
	}
	if !need {
		return logs, false, healthy && !deep, nil
	}
	_, rc, err := snaps.Open(metas[0].ID)
	if err != nil {
		return nil, false, false, fmt.Errorf("open snapshot %s: %w", metas[0].ID, err)
	}
	defer rc.Close()
	tmp, err := storage.RestoreFile(rc, path)
	if err != nil {
		return nil, false, false, err
	}
	if err := os.Rename(tmp, path); err != nil {
		return nil, false, false, err
	}
	d, err := os.Open(filepath.Dir(path))
	if err == nil {
		_ = d.Sync()
		d.Close()
	}
	return logs, true, false, nil
}

// repairHint is the operator's way out of ErrLogBehindState.
func repairHint(dataDir string) string {
	return fmt.Sprintf("stop here: the node must not run or vote without those entries; repair with `sessionstore repair --data-dir %s` "+
		"(rebuilds the Raft log's end from the state database; see README \"Damaged files\")", dataDir)
}

// changesState reports whether any entry in (from, to] would change the FSM,
// or cannot be read. A snapshot taken right after a leadership change is
// stamped with the index of a no-op or barrier entry, which the FSM never
// sees; a state database that applied everything before it is current.
func changesState(logs raft.LogStore, from, to uint64) bool {
	for i := to; i > from; i-- {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return true
		}
		if l.Type == raft.LogCommand || l.Type == raft.LogConfiguration {
			return true
		}
	}
	return false
}
