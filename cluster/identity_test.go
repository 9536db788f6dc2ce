package cluster

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// TestCheckIdentity: a data directory started under another node id, or
// whose identity file, state.db and Raft log name different clusters, is
// refused with both names; otherwise the identity is recorded (a directory
// of 2f2e872, without the file, adopts the node id it is started with).
func TestCheckIdentity(t *testing.T) {
	tests := []struct {
		name    string
		file    string // identity file content ("": none)
		stateID string // cluster id in state.db
		logID   string // cluster id of the SetClusterId entry in the WAL
		nodeID  string
		want    string   // cluster id returned
		errHas  []string // all in the error; nil: success
	}{
		{name: "new directory", nodeID: "n1"},
		{name: "2f2e872 directory: state and log agree", stateID: "aaaa", logID: "aaaa", nodeID: "n1", want: "aaaa"},
		{name: "2f2e872 directory: id only in the log (state.db rebuilt)", logID: "aaaa", nodeID: "n1", want: "aaaa"},
		{name: "recorded", file: `{"node_id":"n1","cluster_id":"aaaa"}`, stateID: "aaaa", logID: "aaaa", nodeID: "n1", want: "aaaa"},
		{name: "another node id", file: `{"node_id":"n1","cluster_id":"aaaa"}`, stateID: "aaaa", nodeID: "n2",
			errHas: []string{`belongs to node "n1"`, "not \"n2\"", "--node-id n1"}},
		{name: "state.db of another cluster than the log", stateID: "bbbb", logID: "aaaa", nodeID: "n1",
			errHas: []string{"cluster bbbb", "cluster aaaa", "state database", "Raft log (entry 2)"}},
		{name: "state.db of another cluster than recorded", file: `{"node_id":"n1","cluster_id":"aaaa"}`, stateID: "bbbb", nodeID: "n1",
			errHas: []string{"identity file", "cluster aaaa", "cluster bbbb"}},
		{name: "damaged identity file", file: `{"node_id":`, nodeID: "n1", errHas: []string{"identity file", "damaged"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			if tc.file != "" {
				if err := os.WriteFile(identityPath(dir), []byte(tc.file), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			state, err := storage.OpenState(statePath(dir), storage.DefaultStateOptions())
			if err != nil {
				t.Fatal(err)
			}
			defer state.Close()
			if tc.stateID != "" {
				if err := state.Update(func(tx *storage.Tx) error { return tx.SetClusterID(tc.stateID) }); err != nil {
					t.Fatal(err)
				}
			}
			logs, err := storage.OpenRaftWAL(filepath.Join(dir, "wal"), 0)
			if err != nil {
				t.Fatal(err)
			}
			defer logs.Close()
			if tc.logID != "" {
				writeClusterIDLog(t, logs, tc.logID)
			}
			got, _, err := checkIdentity(dir, tc.nodeID, state, logs, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if tc.errHas != nil {
				if err == nil {
					t.Fatalf("started; want a refusal naming %q", tc.errHas)
				}
				for _, s := range tc.errHas {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not contain %q", err, s)
					}
				}
				return
			}
			if err != nil || got != tc.want {
				t.Fatalf("checkIdentity = %q, %v; want %q", got, err, tc.want)
			}
			rec, err := readIdentity(dir)
			if err != nil || rec != (identity{NodeID: tc.nodeID, ClusterID: tc.want}) {
				t.Fatalf("recorded identity %+v, %v", rec, err)
			}
		})
	}
}

// writeClusterIDLog writes a bootstrap configuration at index 1 and the
// first leader's SetClusterId at index 2, as a new cluster's log begins.
func writeClusterIDLog(t *testing.T, logs raft.LogStore, id string) {
	t.Helper()
	data, err := fsm.Encode(&fsmpb.Entry{Commands: []*fsmpb.Command{{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: id}}}}})
	if err != nil {
		t.Fatal(err)
	}
	conf := raft.EncodeConfiguration(raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "127.0.0.1:1"}}})
	if err := logs.StoreLogs([]*raft.Log{
		{Index: 1, Term: 1, Type: raft.LogConfiguration, Data: conf},
		{Index: 2, Term: 2, Type: raft.LogCommand, Data: data},
	}); err != nil {
		t.Fatal(err)
	}
}

// TestConfiguredID: the evidence a directory without identity file gives
// about its node id.
func TestConfiguredID(t *testing.T) {
	conf := raft.Configuration{Servers: []raft.Server{{ID: "n1", Address: "h:1"}, {ID: "n2", Address: "h:2"}}}
	tests := []struct {
		nodeID string
		addr   raft.ServerAddress
		errHas string
	}{
		{"n1", "h:1", ""},          // itself
		{"n1", "h:9", ""},          // moved to another address
		{"n3", "h:9", ""},          // nothing known at this address: adopted
		{"n3", "h:1", `node "n1"`}, // n1's directory started as n3
		{"n2", "h:1", ""},          // listed under its own id: addresses are swapped, not ours to judge
	}
	for _, tc := range tests {
		err := configuredID(conf, tc.nodeID, tc.addr, "d")
		if (err == nil) != (tc.errHas == "") || (err != nil && !strings.Contains(err.Error(), tc.errHas)) {
			t.Errorf("configuredID(%s at %s) = %v, want %q", tc.nodeID, tc.addr, err, tc.errHas)
		}
	}
}
