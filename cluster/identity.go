package cluster

import (
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/storage"
)

// A data directory belongs to one node of one cluster. The identity file
// records which: written at the first start (node id) and as soon as the
// cluster id is known, checked at every start before Raft runs. It is a file
// of its own, outside state.db and the Raft stores, so that a change of their
// layout keeps it.
func identityPath(dir string) string { return filepath.Join(dir, "identity.json") }

// identity is the identity file's content.
type identity struct {
	NodeID    string `json:"node_id"`
	ClusterID string `json:"cluster_id,omitempty"`
}

// identityScan is how many entries from the start of the Raft log are read
// for the SetClusterId entry: the first leader mints the id right after the
// bootstrap configuration, so it is among the first few entries of a log that
// still starts at index 1 (a compacted log has it in a snapshot, which
// state.db was restored from).
const identityScan = 64

// checkIdentity refuses a data directory that belongs to another node or
// whose stores disagree about the cluster, and returns the cluster id this
// directory belongs to ("" while none is minted). The evidence, in order:
// the identity file, state.db, and the SetClusterId entry of the Raft log.
// A directory written before the identity file existed adopts the node id it
// is started with.
func checkIdentity(dir, nodeID string, state *storage.StateDB, logs raft.LogStore, logger *slog.Logger) (clusterID string, adopted bool, err error) {
	rec, err := readIdentity(dir)
	if err != nil {
		return "", false, err
	}
	adopted = rec.NodeID == ""
	if rec.NodeID != "" && rec.NodeID != nodeID {
		return "", false, fmt.Errorf("data directory %s belongs to node %q (recorded in %s), not %q: start it with --node-id %s, or give node %s an empty data directory to join as a new node",
			dir, rec.NodeID, identityPath(dir), nodeID, rec.NodeID, nodeID)
	}
	var stateID string
	if err := state.View(func(tx *storage.Tx) error { stateID = tx.ClusterID(); return nil }); err != nil {
		return "", false, err
	}
	logID, logIndex := logClusterID(logs)
	sources := []struct{ what, id string }{
		{"the identity file " + identityPath(dir), rec.ClusterID},
		{"the state database " + statePath(dir), stateID},
		{fmt.Sprintf("the Raft log (entry %d)", logIndex), logID},
	}
	known := ""
	for i, a := range sources {
		if a.id == "" {
			continue
		}
		if known == "" {
			known = a.id
		}
		for _, b := range sources[i+1:] {
			if b.id != "" && b.id != a.id {
				return "", false, fmt.Errorf("data directory %s mixes two clusters: %s says cluster %s, %s says cluster %s; refusing to start (restore this node's directory from one cluster, or start it empty to join as a new node)",
					dir, a.what, a.id, b.what, b.id)
			}
		}
	}
	if rec.NodeID != nodeID || rec.ClusterID != known {
		if rec.NodeID == "" {
			logger.Info("recording this data directory's identity", "cluster_id", known, "file", identityPath(dir)) // the logger names the node
		}
		if err := writeIdentity(dir, identity{NodeID: nodeID, ClusterID: known}); err != nil {
			return "", false, err
		}
	}
	return known, adopted, nil
}

// checkAdoptedID: a directory without an identity file (written before it
// existed) takes the node id it is started with, unless the Raft
// configuration is evidence against it: it lists this node's Raft address
// under another id and does not list this id. Then the start is refused and
// the file just written removed. Raft has read the configuration (from the
// snapshot and the log) when it started, so this costs nothing.
func (n *Node) checkAdoptedID(adopted bool) error {
	if !adopted {
		return nil
	}
	f := n.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	if err := configuredID(f.Configuration(), n.cfg.NodeID, n.transport.LocalAddr(), n.cfg.DataDir); err != nil {
		_ = n.raft.Shutdown().Error()
		_ = os.Remove(identityPath(n.cfg.DataDir))
		return err
	}
	return nil
}

func configuredID(c raft.Configuration, nodeID string, addr raft.ServerAddress, dir string) error {
	other := ""
	for _, s := range c.Servers {
		if string(s.ID) == nodeID {
			return nil
		}
		if s.Address == addr {
			other = string(s.ID)
		}
	}
	if other == "" {
		return nil
	}
	return fmt.Errorf("data directory %s belongs to node %q (its Raft configuration lists %q at this node's Raft address %s), not %q: start it with --node-id %s, or give node %s an empty data directory to join as a new node",
		dir, other, other, addr, nodeID, other, nodeID)
}

// recordClusterID adds a newly learnt cluster id to the identity file.
func recordClusterID(dir, nodeID, clusterID string) error {
	rec, err := readIdentity(dir)
	if err != nil {
		return err
	}
	if rec.ClusterID == clusterID {
		return nil
	}
	if rec.ClusterID != "" {
		return fmt.Errorf("identity file %s names cluster %s, the state now %s", identityPath(dir), rec.ClusterID, clusterID)
	}
	return writeIdentity(dir, identity{NodeID: nodeID, ClusterID: clusterID})
}

// logClusterID finds the SetClusterId entry among the first entries of a log
// that still starts at index 1; "" when there is none there.
func logClusterID(logs raft.LogStore) (string, uint64) {
	first, err := logs.FirstIndex()
	if err != nil || first > 1 {
		return "", 0
	}
	last, err := logs.LastIndex()
	if err != nil {
		return "", 0
	}
	for i := uint64(1); i <= last && i <= identityScan; i++ {
		var l raft.Log
		if logs.GetLog(i, &l) != nil || l.Type != raft.LogCommand {
			continue
		}
		e, err := fsm.Decode(l.Data)
		if err != nil {
			continue
		}
		for _, c := range e.Commands {
			if id := c.GetSetClusterId().GetClusterId(); id != "" {
				return id, i
			}
		}
	}
	return "", 0
}

func readIdentity(dir string) (identity, error) {
	var rec identity
	b, err := os.ReadFile(identityPath(dir))
	if errors.Is(err, os.ErrNotExist) {
		return rec, nil
	}
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil || rec.NodeID == "" {
		return rec, fmt.Errorf("identity file %s is damaged (%v): it records which node and cluster this data directory belongs to; restore it, or delete it to have it rewritten from the node id given at start", identityPath(dir), err)
	}
	return rec, nil
}

func writeIdentity(dir string, rec identity) error {
	b, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	tmp := identityPath(dir) + ".tmp"
	f, err := os.OpenFile(tmp, os.O_CREATE|os.O_TRUNC|os.O_WRONLY, 0o600)
	if err != nil {
		return err
	}
	_, err = f.Write(append(b, '\n'))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Rename(tmp, identityPath(dir)); err != nil {
		return err
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		d.Close()
	}
	return nil
}
