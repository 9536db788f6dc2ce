package cluster

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// Backup streams a consistent copy of the whole state database (`node
// backup`). It is served by the leader only: a linearizable read barrier
// (leadership confirmed by a quorum, every entry committed before the call
// applied) precedes one bbolt read transaction, so the copy holds every write
// acknowledged before the call. A follower answers with a not-leader error
// and the API layer forwards the stream to the leader, as for every
// linearizable read. (Serving from a follower would need a read-index
// protocol this cluster does not have; the leader streams from a read
// transaction while Apply goes on, exactly as for a Raft snapshot.)
//
// meta is called once, before any data; data receives the snapshot stream
// (storage.Snapshot.WriteTo's format). The returned trailer carries the
// sizes and the SHA-256 of the uncompressed database.
func (n *Node) Backup(ctx context.Context, meta func(sessionstore.BackupMeta) error, data io.Writer) (sessionstore.BackupTrailer, error) {
	if err := n.sessions.readBarrier(ctx, sessionstore.Linearizable); err != nil {
		return sessionstore.BackupTrailer{}, err
	}
	sn, err := n.state.BeginSnapshot()
	if err != nil {
		return sessionstore.BackupTrailer{}, err
	}
	defer sn.Release()
	// A backup of damaged state would carry the damage: refuse it loudly.
	if err := fsm.VerifyAll(sn.Tx()); err != nil {
		n.logger.Error("backup refused: the state database is damaged", "err", err)
		return sessionstore.BackupTrailer{}, err
	}
	m := sessionstore.BackupMeta{Time: time.Now(), DBBytes: sn.DBBytes(), NodeID: n.cfg.NodeID, StateFormat: uint32(sn.Format())}
	m.AppliedIndex, m.Term = sn.Tx().Applied()
	m.ClusterID = sn.Tx().ClusterID()
	if err := meta(m); err != nil {
		return sessionstore.BackupTrailer{}, err
	}
	start := time.Now()
	t, err := sn.WriteBackup(&ctxWriter{ctx: ctx, w: data})
	if err != nil {
		return sessionstore.BackupTrailer{}, fmt.Errorf("backup: %w", err)
	}
	n.logger.Info("backup streamed", "applied_index", m.AppliedIndex, "db_bytes", t.DBBytes,
		"stream_bytes", t.StreamBytes, "dur", time.Since(start))
	return t, nil
}

// ctxWriter stops a long stream when the caller goes away.
type ctxWriter struct {
	ctx context.Context
	w   io.Writer
}

func (c *ctxWriter) Write(p []byte) (int, error) {
	if err := c.ctx.Err(); err != nil {
		return 0, err
	}
	return c.w.Write(p)
}

// RestoreResult describes a restored data directory.
type RestoreResult struct {
	Meta     sessionstore.BackupMeta // the backup's header
	Sessions int                     // session records restored
	Leases   int                     // leases dropped (a restored cluster has no live owner)
	Path     string                  // the state database written
}

// ErrDataDirNotEmpty refuses a restore into a directory that holds anything.
var ErrDataDirNotEmpty = errors.New("data directory is not empty")

// RestoreBackup seeds dataDir (absent or empty) from a backup file, offline
// (`sessionstore restore`): it checks the file's framing, decodes the database into a
// temporary file beside state.db (fsynced), verifies its size and SHA-256
// against the trailer, prepares it for a new cluster (fsm.Reseed: no cluster
// id, applied index 0, last-change indexes 0, no leases), and renames it into
// place. Nothing else is written: `sessionstore serve --data-dir DIR` then finds a
// state database and no Raft state, so it bootstraps a new cluster (a lone
// node) whose first leader mints a new cluster id, and rebuilds every
// artifact from the database (no watermark survives).
func RestoreBackup(file, dataDir string) (RestoreResult, error) {
	var res RestoreResult
	if ents, err := os.ReadDir(dataDir); err == nil && len(ents) > 0 {
		return res, fmt.Errorf("%w: %s holds %d entries (restore seeds a new node: give it an empty or absent directory)", ErrDataDirNotEmpty, dataDir, len(ents))
	} else if err != nil && !errors.Is(err, os.ErrNotExist) {
		return res, err
	}
	bf, err := storage.OpenBackup(file)
	if err != nil {
		return res, err
	}
	defer bf.Close()
	res.Meta = bf.Meta
	if err := os.MkdirAll(dataDir, 0o700); err != nil {
		return res, err
	}
	path := statePath(dataDir)
	tmp, err := bf.RestoreTo(path)
	if err != nil {
		return res, err
	}
	ok := false
	defer func() {
		if !ok {
			os.Remove(tmp)
		}
	}()
	db, err := storage.OpenState(tmp, storage.StateOptions{}) // fsynced commits
	if err != nil {
		return res, err
	}
	st, err := fsm.Reseed(db)
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return res, fmt.Errorf("prepare the restored database: %w", err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return res, err
	}
	ok = true
	if err := storage.SyncDir(filepath.Dir(path)); err != nil {
		return res, err
	}
	if err := os.WriteFile(seedMarkerPath(dataDir), []byte(fmt.Sprintf("cluster %s applied index %d\n", res.Meta.ClusterID, res.Meta.AppliedIndex)), 0o600); err != nil {
		return res, err
	}
	// The file was closed cleanly and fsynced: the start-up guard need not
	// check it page by page.
	if err := writeBootMarker(dataDir, true); err != nil {
		return res, err
	}
	res.Sessions, res.Leases, res.Path = st.Sessions, st.Leases, path
	return res, nil
}

// A data directory seeded by RestoreBackup holds a state database whose
// contents are in no Raft log: a server that joined the new cluster and
// replicated the log from index 1 would miss all of it. So the restored node
// keeps a marker until, as the lone leader of its new cluster (with the new
// cluster id minted), it has taken a snapshot and compacted its log
// entirely; only then does it add other servers, which therefore start from
// that snapshot. While the marker exists the node must bootstrap alone.
const seedMarkerName = "restored-from-backup"

func seedMarkerPath(dir string) string { return filepath.Join(dir, seedMarkerName) }

// seedPending reports whether this node still has to snapshot restored state.
func (n *Node) seedPending() bool {
	_, err := os.Stat(seedMarkerPath(n.cfg.DataDir))
	return err == nil
}

// checkSeed refuses to start a restored data directory into anything but a
// new one-node cluster.
func (n *Node) checkSeed(hasState bool) error {
	if hasState || !n.seedPending() {
		return nil
	}
	if n.cfg.bootstrapExpect() != 1 {
		return fmt.Errorf("%s was seeded by 'sessionstore restore': it bootstraps a new cluster alone (no --bootstrap-expect other than 1); start the other nodes afterwards with empty data directories and --join", n.cfg.DataDir)
	}
	return nil
}

// runSeedSnapshot snapshots restored state and compacts the Raft log, once.
func (n *Node) runSeedSnapshot() {
	if !n.seedPending() {
		return
	}
	n.logger.Info("state restored from a backup: servers are added once it is snapshotted")
	every(n.ctx, 100*time.Millisecond, func() bool {
		if !n.isLeaderReady() || n.ClusterID() == "" {
			return false
		}
		idx, err := n.compactForSeed()
		if err != nil {
			n.logger.Warn("snapshotting the restored state failed; will retry", "err", err)
			return false
		}
		if err := os.Remove(seedMarkerPath(n.cfg.DataDir)); err != nil && !errors.Is(err, os.ErrNotExist) {
			n.logger.Warn("removing the restore marker failed; will retry", "err", err)
			return false
		}
		_ = storage.SyncDir(n.cfg.DataDir)
		n.logger.Info("restored state snapshotted and the Raft log compacted; other servers may join", "snapshot_index", idx, "cluster_id", n.ClusterID())
		return true
	})
}

func (n *Node) compactForSeed() (uint64, error) {
	rc := n.raft.ReloadableConfig()
	orig := rc.TrailingLogs
	rc.TrailingLogs = 0
	if err := n.raft.ReloadConfig(rc); err != nil {
		return 0, err
	}
	defer func() {
		rc.TrailingLogs = orig
		if err := n.raft.ReloadConfig(rc); err != nil {
			n.logger.Error("restoring TrailingLogs after the seed snapshot failed", "err", err)
		}
	}()
	if err := await(n.ctx, n.raft.Snapshot()); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
		return 0, err
	}
	metas, err := n.snaps.List()
	if err != nil || len(metas) == 0 {
		return 0, fmt.Errorf("no snapshot after taking one: %v", err)
	}
	first, err := n.logs.FirstIndex()
	if err != nil {
		return 0, err
	}
	if first != 0 && first <= metas[0].Index {
		return 0, fmt.Errorf("log still starts at %d, snapshot is at %d", first, metas[0].Index)
	}
	return metas[0].Index, nil
}
