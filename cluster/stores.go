package cluster

import (
	"errors"
	"io"
	"log/slog"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/storage"
)

// Stores are the files of one data directory, opened and checked: what Raft
// keeps (stable store, log, snapshots) and the state database. A node (New)
// and a quorum-loss recovery (Recover) open them the same way, with
// OpenStores, and end with Close, which records a clean stop.
type Stores struct {
	Dir   string
	Local *storage.RaftStore // Raft's stable store (term, vote) and node-local buckets
	Logs  *storage.RaftWAL   // the Raft log
	Snaps raft.SnapshotStore
	State *storage.StateDB

	// What the start-up guard (guard.go) did: restored the state from the
	// latest snapshot; checked only the pages bbolt reads at open (the rest
	// is checked once the node serves); how long that took.
	Restored, Shallow bool
	GuardTime         time.Duration
}

// OpenStores opens the stores of an existing or new data directory (the
// caller creates it; Recover never does). The Raft store is opened first:
// its file lock is the node's, so a directory in use fails there, with
// storage.ErrInUse, before anything is written. The start-up guard runs
// before the state database opens.
func OpenStores(dir string, logger *slog.Logger, hl hclog.Logger) (_ *Stores, err error) {
	s := &Stores{Dir: dir}
	defer func() {
		if err != nil {
			err = errors.Join(err, s.Close())
		}
	}()
	if s.Local, err = storage.OpenRaftStore(raftStorePath(dir)); err != nil {
		return nil, err
	}
	if s.Snaps, err = raft.NewFileSnapshotStoreWithLogger(raftDir(dir), 1, hl); err != nil {
		return nil, err
	}
	start := time.Now()
	s.Logs, s.Restored, s.Shallow, err = guardState(dir, s.Snaps, logger, needsVerify(dir)) // opens the WAL too
	s.GuardTime = time.Since(start)
	if err != nil {
		return nil, err
	}
	if err := writeBootMarker(dir, false); err != nil {
		return nil, err
	}
	if s.State, err = storage.OpenState(statePath(dir), storage.DefaultStateOptions()); err != nil {
		return nil, err
	}
	return s, nil
}

// Close closes what is open and, when the state database closed cleanly,
// records the clean stop (the clean-stop stamp and the boot marker).
func (s *Stores) Close() error {
	var errs []error
	if s.State != nil {
		err := s.State.Close()
		errs = append(errs, err)
		if err == nil {
			errs = append(errs, writeCleanStamp(s.Dir), writeBootMarker(s.Dir, true))
		}
	}
	if s.Logs != nil {
		errs = append(errs, s.Logs.Close())
	}
	if s.Local != nil {
		errs = append(errs, s.Local.Close())
	}
	return errors.Join(errs...)
}

// raftLogger is where hashicorp/raft's own log lines go (Config.RaftLogOutput).
func (c Config) raftLogger() hclog.Logger {
	out := c.RaftLogOutput
	if out == nil {
		out = io.Discard
	}
	return hclog.New(&hclog.LoggerOptions{Name: "raft", Level: hclog.Info, Output: out, JSONFormat: c.RaftLogJSON})
}
