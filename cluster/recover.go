package cluster

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// ErrDataDirInUse is returned by Recover when the data directory's stores are
// open in another process: the node is running.
var ErrDataDirInUse = errors.New("data directory is in use (is the node running?): stop the node first")

// RecoverResult describes what Recover found and wrote.
type RecoverResult struct {
	Old, New  raft.Configuration
	LastIndex uint64 // last index of the Raft log before recovery (the new snapshot's index)
	LastTerm  uint64
	Applied   uint64 // the state database's applied index afterwards
}

// Recover rewrites the Raft configuration of a stopped node after the loss of
// a quorum (raft.RecoverCluster): the node's stores are opened exactly as Open
// opens them (Raft store, WAL, snapshot store, the start-up guard, the state
// database and the FSM) but no transport, gossip or Raft instance is started.
// Every entry of the local log past the latest snapshot is applied to the
// FSM, a snapshot carrying the new configuration is written and the log is
// emptied; the next start serves that configuration.
//
// confirm, when set, is called with the configuration the node holds now and
// the new one while the stores are open (so the node cannot start meanwhile);
// an error from it aborts before anything is written.
//
// Entries that only the lost servers hold are lost. Recover refuses a data
// directory that is in use (ErrDataDirInUse) or has no Raft state.
func Recover(cfg Config, servers []raft.Server, logger *slog.Logger, confirm func(old, new raft.Configuration) error) (res RecoverResult, err error) {
	if cfg.DataDir == "" {
		return res, errors.New("data dir must not be empty")
	}
	newConf := raft.Configuration{Servers: servers}
	if err := checkServers(servers); err != nil {
		return res, err
	}
	// Never create a data directory: a mistyped path must not "recover" nothing.
	for _, p := range []string{cfg.DataDir, raftDir(cfg.DataDir), raftStorePath(cfg.DataDir)} {
		if _, err := os.Stat(p); err != nil {
			return res, fmt.Errorf("%s holds no node's Raft state: %w", cfg.DataDir, err)
		}
	}
	logger = logger.With("component", "recover")
	hl := cfg.raftLogger()
	st, err := OpenStores(cfg.DataDir, logger, hl)
	if err != nil {
		if errors.Is(err, storage.ErrInUse) {
			return res, fmt.Errorf("%s: %w (%v)", cfg.DataDir, ErrDataDirInUse, err)
		}
		return res, err
	}
	defer func() {
		if cerr := st.Close(); cerr != nil {
			err = errors.Join(err, fmt.Errorf("close stores: %w", cerr))
		}
	}()
	local, logs, snaps, state := st.Local, st.Logs, st.Snaps, st.State
	f, err := fsm.New(state, logger, nil, nil)
	if err != nil {
		return res, err
	}
	hasState, err := raft.HasExistingState(logs, local, snaps)
	if err != nil {
		return res, err
	}
	if !hasState {
		return res, fmt.Errorf("%s has no Raft state (no term, log or snapshot): nothing to recover", cfg.DataDir)
	}
	// The index RecoverCluster stamps on its snapshot: the last log entry,
	// or the latest snapshot's when the log holds nothing past it.
	if metas, err := snaps.List(); err != nil {
		return res, err
	} else if len(metas) > 0 {
		res.LastIndex, res.LastTerm = metas[0].Index, metas[0].Term
	}
	if last, err := logs.LastIndex(); err != nil {
		return res, err
	} else if last > res.LastIndex {
		var l raft.Log
		if err := logs.GetLog(last, &l); err != nil {
			return res, fmt.Errorf("read log %d: %w", last, err)
		}
		res.LastIndex, res.LastTerm = l.Index, l.Term
	}

	rc := raft.DefaultConfig()
	localID := cfg.NodeID
	if localID == "" {
		localID = string(servers[0].ID) // only validated, never used by recovery
	}
	rc.LocalID = raft.ServerID(localID)
	rc.Logger = hl
	rc.NoSnapshotRestoreOnStart = true
	rc.SnapshotThreshold = cfg.SnapshotThreshold
	rc.TrailingLogs = cfg.TrailingLogs
	rc.BatchApplyCh = true
	// No network: the file snapshot store ignores the transport, and reading
	// the configuration needs one only to exist.
	_, trans := raft.NewInmemTransport(raft.ServerAddress("recover"))
	defer trans.Close()

	readConf := *rc
	old, err := raft.GetConfiguration(&readConf, f, logs, local, snaps, trans)
	if err != nil {
		return res, fmt.Errorf("read the current configuration: %w", err)
	}
	res.Old, res.New = old, newConf
	if confirm != nil {
		if err := confirm(old, newConf); err != nil {
			return res, err
		}
	}
	logger.Warn("rewriting the Raft configuration (quorum-loss recovery)", "data_dir", cfg.DataDir,
		"old", FormatConfiguration(old), "new", FormatConfiguration(newConf), "last_index", res.LastIndex)
	if err := raft.RecoverCluster(rc, &recoverFSM{FSM: f, last: raft.Log{Index: res.LastIndex, Term: res.LastTerm, Type: raft.LogNoop}}, logs, local, snaps, trans, newConf); err != nil {
		return res, err
	}
	if err := state.Sync(); err != nil {
		return res, fmt.Errorf("sync state database: %w", err)
	}
	res.Applied = f.AppliedIndex()
	return res, nil
}

// checkServers validates a recovery configuration: at least one server, each
// with an id and an address, no id or address twice, and at least one voter.
func checkServers(servers []raft.Server) error {
	if len(servers) == 0 {
		return errors.New("the new configuration has no servers")
	}
	ids, addrs := map[raft.ServerID]bool{}, map[raft.ServerAddress]bool{}
	voters := 0
	for _, s := range servers {
		if s.ID == "" || s.Address == "" {
			return fmt.Errorf("server %q at %q: id and address must not be empty", s.ID, s.Address)
		}
		if ids[s.ID] {
			return fmt.Errorf("server id %q listed twice", s.ID)
		}
		if addrs[s.Address] {
			return fmt.Errorf("server address %q listed twice", s.Address)
		}
		ids[s.ID], addrs[s.Address] = true, true
		if s.Suffrage == raft.Voter {
			voters++
		}
	}
	if voters == 0 {
		return errors.New("the new configuration has no voter")
	}
	return nil
}

// FormatConfiguration renders a configuration as "id=address (suffrage), ...".
func FormatConfiguration(c raft.Configuration) string {
	if len(c.Servers) == 0 {
		return "(none)"
	}
	parts := make([]string, len(c.Servers))
	for i, s := range c.Servers {
		parts[i] = fmt.Sprintf("%s=%s (%s)", s.ID, s.Address, s.Suffrage)
	}
	return strings.Join(parts, ", ")
}

// recoverFSM adapts the FSM to raft.RecoverCluster:
//
//   - Before the snapshot it records last (the index the snapshot is stamped
//     with) as applied. RecoverCluster hands the FSM only command entries;
//     without this a trailing no-op or configuration entry would leave the
//     state's applied index below the snapshot's, and with the log emptied
//     the restarted node could not tell those entries change nothing (reads
//     would wait for them, the start-up guard would restore the snapshot).
//   - It releases each snapshot after persisting it: RecoverCluster never
//     calls Release, and the FSM's snapshot holds a read transaction (and the
//     state database's lock against Close) until it is released.
type recoverFSM struct {
	*fsm.FSM
	last raft.Log
}

func (f *recoverFSM) Snapshot() (raft.FSMSnapshot, error) {
	if f.last.Index > f.FSM.AppliedIndex() {
		f.FSM.ApplyBatch([]*raft.Log{&f.last}) // not a command: only the applied index moves
	}
	s, err := f.FSM.Snapshot()
	if err != nil {
		return nil, err
	}
	return releasingSnapshot{s}, nil
}

type releasingSnapshot struct{ raft.FSMSnapshot }

func (s releasingSnapshot) Persist(sink raft.SnapshotSink) error {
	defer s.FSMSnapshot.Release()
	return s.FSMSnapshot.Persist(sink)
}
