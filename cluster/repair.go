package cluster

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// RepairResult describes what Repair found and wrote.
type RepairResult struct {
	Applied, AppliedTerm uint64 // the state database's applied index and term
	SnapshotIndex        uint64 // the latest snapshot's index before the repair
	LogLast              uint64 // the log's last index after its damaged tail was cut
	Truncation           *storage.WALTruncation
	KeptAside            string             // copy of the damaged segment ("" if none)
	NewSnapshot          bool               // a snapshot at Applied was written
	Configuration        raft.Configuration // the configuration the node keeps
	Repaired             bool               // false: the log already covered the state
}

// Repair makes a stopped node whose Raft log lost committed entries
// (ErrLogBehindState: a damaged last record at an applied or snapshotted index,
// a log cut below the applied index) consistent again, without losing what it
// acknowledged: the damaged segment is copied aside, its damaged tail cut, and
// the log's end is rebuilt from what the node still holds. If the state
// database is ahead of the latest snapshot, a snapshot of it is written at its
// applied index and term (with the latest configuration of the snapshot and the
// remaining log); then the log, entirely covered by that snapshot, is emptied.
// The node's last index and term are then what they were before the damage,
// so it votes as before and the leader sends it what follows.
//
// The one thing it cannot rebuild is a membership change that was only in
// the lost record; the result names the configuration the node keeps.
// Repair refuses a data directory in use (ErrDataDirInUse) or without Raft
// state. A damaged state database is moved aside, as a start would.
func Repair(cfg Config, logger *slog.Logger) (res RepairResult, err error) {
	if cfg.DataDir == "" {
		return res, errors.New("data dir must not be empty")
	}
	for _, p := range []string{cfg.DataDir, raftDir(cfg.DataDir), raftStorePath(cfg.DataDir)} {
		if _, err := os.Stat(p); err != nil {
			return res, fmt.Errorf("%s holds no node's Raft state: %w", cfg.DataDir, err)
		}
	}
	logger = logger.With("component", "repair")
	hl := cfg.raftLogger()

	// Not OpenStores: the start-up guard would refuse exactly the log this
	// repairs. The stores are opened one by one below; Close is the same.
	st := &Stores{Dir: cfg.DataDir}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close stores: %w", cerr))
		}
	}()
	var (
		local *storage.RaftStore
		logs  *storage.RaftWAL
		state *storage.StateDB
	)
	// The Raft store's lock is the node's: nothing below runs while it serves.
	if local, err = storage.OpenRaftStore(raftStorePath(cfg.DataDir)); err != nil {
		return res, fmt.Errorf("%s: %w (%v)", cfg.DataDir, ErrDataDirInUse, err)
	}
	st.Local = local
	snaps, err := raft.NewFileSnapshotStoreWithLogger(raftDir(cfg.DataDir), 1, hl)
	if err != nil {
		return res, err
	}
	metas, err := snaps.List()
	if err != nil {
		return res, err
	}
	if len(metas) > 0 {
		res.SnapshotIndex = metas[0].Index
	}
	// A damaged state database goes aside as at a start (which rebuilds it
	// from the snapshot); then only the snapshot is evidence.
	sp := statePath(cfg.DataDir)
	if _, serr := os.Stat(sp); serr == nil {
		if err := storage.CheckStateFile(sp); err != nil {
			aside := fmt.Sprintf("%s.damaged-%d", sp, time.Now().UnixNano())
			logger.Error("state database is damaged; moving it aside (the next start rebuilds it from the latest snapshot)", "err", err, "moved_to", aside)
			if err := os.Rename(sp, aside); err != nil {
				return res, err
			}
		} else {
			if state, err = storage.OpenState(sp, storage.DefaultStateOptions()); err != nil {
				return res, err
			}
			st.State = state
			if res.Applied, res.AppliedTerm, err = state.AppliedIndex(); err != nil {
				return res, err
			}
		}
	}

	// Keep the damaged bytes: copy the last segment aside before the open
	// (without evidence of what is committed) cuts its damaged tail.
	walDir := raftWALDir(cfg.DataDir)
	if segs, _ := filepath.Glob(filepath.Join(walDir, "*.wal")); len(segs) > 0 {
		lastSeg := segs[len(segs)-1] // zero-padded names sort by index
		res.KeptAside = fmt.Sprintf("%s.damaged-%d", lastSeg, time.Now().UnixNano())
		if err := copyFileSynced(lastSeg, res.KeptAside); err != nil {
			return res, err
		}
	}
	if logs, err = storage.OpenRaftWAL(walDir, 0); err != nil {
		return res, fmt.Errorf("the Raft log is damaged in a way this command does not repair: %w", err)
	}
	st.Logs = logs
	if tr, ok := logs.Truncation(); ok {
		res.Truncation = &tr
		logger.Warn("cut the damaged tail of the Raft log", "segment", tr.Segment, "offset", tr.Offset, "bytes", tr.Bytes, "index", tr.Index, "reason", tr.Reason)
	} else if res.KeptAside != "" {
		_ = os.Remove(res.KeptAside) // nothing was cut: no copy needed
		res.KeptAside = ""
	}
	first, err := logs.FirstIndex()
	if err != nil {
		return res, err
	}
	if res.LogLast, err = logs.LastIndex(); err != nil {
		return res, err
	}
	if res.Configuration, err = latestConfiguration(metas, logs, first, res.LogLast); err != nil {
		return res, err
	}
	if res.LogLast >= max(res.Applied, res.SnapshotIndex) {
		return res, nil // the log covers the state: nothing lost
	}
	res.Repaired = true
	if res.Applied > res.SnapshotIndex {
		if err := writeStateSnapshot(snaps, state, logger, res.Applied, res.AppliedTerm, res.Configuration, min(res.Applied, configIndex(metas, logs, first, res.LogLast))); err != nil {
			return res, err
		}
		res.NewSnapshot = true
	}
	// Everything the log still holds is at or below the snapshot now.
	if res.LogLast > 0 {
		if err := logs.DeleteRange(first, res.LogLast); err != nil {
			return res, err
		}
	}
	logger.Warn("rebuilt the Raft log's end from the state: the log is now covered by a snapshot",
		"snapshot_index", max(res.Applied, res.SnapshotIndex), "configuration", FormatConfiguration(res.Configuration))
	return res, nil
}

// latestConfiguration is the newest configuration among the latest snapshot's
// and the configuration entries of the log first..last.
func latestConfiguration(metas []*raft.SnapshotMeta, logs raft.LogStore, first, last uint64) (raft.Configuration, error) {
	var conf raft.Configuration
	found := false
	if len(metas) > 0 {
		conf, found = metas[0].Configuration, true
	}
	for i := first; i <= last && i != 0; i++ {
		var l raft.Log
		if err := logs.GetLog(i, &l); err != nil {
			return conf, fmt.Errorf("read log %d: %w", i, err)
		}
		if l.Type == raft.LogConfiguration {
			conf, found = raft.DecodeConfiguration(l.Data), true
		}
	}
	if !found {
		return conf, errors.New("no Raft configuration in the snapshot or the log: nothing to rebuild from")
	}
	return conf, nil
}

// configIndex is the index of the configuration latestConfiguration returns.
func configIndex(metas []*raft.SnapshotMeta, logs raft.LogStore, first, last uint64) uint64 {
	var idx uint64
	if len(metas) > 0 {
		idx = metas[0].ConfigurationIndex
	}
	for i := first; i <= last && i != 0; i++ {
		var l raft.Log
		if logs.GetLog(i, &l) == nil && l.Type == raft.LogConfiguration {
			idx = i
		}
	}
	return idx
}

// writeStateSnapshot stores a Raft snapshot of the state database at index and
// term, as the FSM's snapshots are written.
func writeStateSnapshot(snaps raft.SnapshotStore, state *storage.StateDB, logger *slog.Logger, index, term uint64, conf raft.Configuration, confIndex uint64) error {
	f, err := fsm.New(state, logger, nil, nil)
	if err != nil {
		return err
	}
	_, trans := raft.NewInmemTransport(raft.ServerAddress("repair")) // the file store only encodes peers with it
	defer trans.Close()
	sink, err := snaps.Create(raft.SnapshotVersionMax, index, term, conf, confIndex, trans)
	if err != nil {
		return err
	}
	s, err := f.Snapshot()
	if err != nil {
		_ = sink.Cancel()
		return err
	}
	defer s.Release()
	if err := s.Persist(sink); err != nil {
		return fmt.Errorf("write snapshot at %d: %w", index, err)
	}
	return nil
}

// copyFileSynced copies src to dst (created) and syncs it.
func copyFileSynced(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Sync(); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
