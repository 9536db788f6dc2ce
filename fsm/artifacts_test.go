package fsm

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// artifactNode is the part of a node's data directory the artifact writer
// uses: state.db, the node-local raft.db and artifacts/, as cluster lays them out.
type artifactNode struct {
	dir   string
	db    *storage.StateDB
	local *storage.RaftStore
	fsm   *FSM
	arts  *Artifacts
	stop  context.CancelFunc
	done  chan struct{}
}

func openArtifactNode(t *testing.T, dir string) *artifactNode {
	t.Helper()
	n := &artifactNode{dir: dir, done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.db, err = storage.OpenState(filepath.Join(dir, "state.db"), storage.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	if n.local, err = storage.OpenRaftStore(filepath.Join(dir, "raft", "raft.db")); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	n.arts = NewArtifacts(filepath.Join(dir, "artifacts"), n.db, n.local, logger, nil)
	if n.fsm, err = New(n.db, logger, nil, n.arts.Observe); err != nil {
		t.Fatal(err)
	}
	n.fsm.RepairFrom(n.arts) // as cluster wires it
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	go func() { defer close(n.done); n.arts.Run(ctx) }()
	t.Cleanup(n.close)
	return n
}

func (n *artifactNode) idle(t *testing.T) {
	t.Helper()
	if err := n.arts.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.arts.Healthy(); err != nil {
		t.Fatalf("artifact writer: %v", err)
	}
}

// close stops the writer (which persists its watermarks) and closes the files.
func (n *artifactNode) close() {
	if n.stop == nil {
		return
	}
	n.stop()
	<-n.done
	n.stop = nil
	n.local.Close()
	n.db.Close()
}

// A node started on a copy of another node's data directory (cp -a A B, B's
// state.db deleted) removes the artifacts of sessions its state does not hold:
// its own copies, never A's files. Watermarks written by 2f2e872 held A's
// absolute paths; they are reinterpreted under B's artifact directory.
func TestArtifactsOfACopiedDataDirStayInside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool // rewrite B's watermarks as 2f2e872 stored them
	}{
		{"relative watermarks", false},
		{"absolute watermarks of 2f2e872", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dirA, dirB := filepath.Join(base, "A"), filepath.Join(base, "B")
			a := openArtifactNode(t, dirA)
			a.fsm.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
				entry(t, 2, 100, createCmd("s")),
				entry(t, 3, 100, appendCmd("s", 0, openTurn...)),
			})
			a.idle(t)
			w, ok := a.arts.Current("s", 3)
			path, size := w.Path, w.Bytes
			if !ok || size == 0 {
				t.Fatalf("artifact of s not current: %+v %v", w, ok)
			}
			a.close()
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			if out, err := exec.Command("cp", "-a", dirA, dirB).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v: %s", err, out)
			}
			if err := os.Remove(filepath.Join(dirB, "state.db")); err != nil {
				t.Fatal(err)
			}
			if tc.legacy {
				writeLegacyWatermark(t, filepath.Join(dirB, "raft", "raft.db"), "s", path, size)
			}
			copyB, err := filepath.Rel(dirA, path)
			if err != nil {
				t.Fatal(err)
			}
			copyB = filepath.Join(dirB, copyB)
			if _, err := os.Stat(copyB); err != nil {
				t.Fatalf("cp -a did not copy the artifact: %v", err)
			}

			b := openArtifactNode(t, dirB)
			b.idle(t)
			b.close()

			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("A's artifact after B started: %d bytes, %v; want %d bytes untouched", len(got), err, len(want))
			}
			if _, err := os.Stat(copyB); !os.IsNotExist(err) {
				t.Errorf("B's copy of the artifact of a session B does not hold: stat = %v, want removed", err)
			}
		})
	}
}

// writeLegacyWatermark stores a watermark as 2f2e872 did: bucket
// artifact_watermarks, an absolute path after 24 bytes of numbers.
func writeLegacyWatermark(t *testing.T, raftDB, id, path string, size int64) {
	t.Helper()
	db, err := bbolt.Open(raftDB, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"artifact_marks", "artifact_watermarks"} {
			if tx.Bucket([]byte(name)) != nil {
				if err := tx.DeleteBucket([]byte(name)); err != nil {
					return err
				}
			}
		}
		b, err := tx.CreateBucket([]byte("artifact_watermarks"))
		if err != nil {
			return err
		}
		v := make([]byte, 24)
		v[7], v[15], v[23] = 3, byte(size), 1 // LastIndex 3, Bytes, Frames 1
		v[14] = byte(size >> 8)
		return b.Put([]byte(id), append(v, path...))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Damage to an artifact is caught before it is served, counted, and the
// artifact is rewritten from the state database: a same-size flip while the
// node is stopped (the start-up size check cannot see it) and a truncation
// while it runs.
func TestArtifactDamageIsCaughtAndRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool // damage while stopped
		damage  func(path string, data []byte) error
	}{
		{"byte flipped while stopped", true, func(path string, data []byte) error {
			bad := bytes.Clone(data)
			bad[len(bad)/2] ^= 0x20
			return os.WriteFile(path, bad, 0o600)
		}},
		{"truncated while running", false, func(path string, data []byte) error {
			return os.Truncate(path, int64(len(data)-3))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := openArtifactNode(t, dir)
			n.fsm.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
				entry(t, 2, 100, createCmd("s")),
				entry(t, 3, 100, appendCmd("s", 0, openTurn...)),
			})
			n.idle(t)
			w, ok := n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current")
			}
			want, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.arts.Verify("s", w); err != nil {
				t.Fatalf("Verify of an intact artifact: %v", err)
			}
			if tc.restart {
				n.close()
			}
			if err := tc.damage(w.Path, want); err != nil {
				t.Fatal(err)
			}
			if tc.restart {
				n = openArtifactNode(t, dir)
				n.idle(t)
			}
			w, ok = n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current after the damage")
			}
			err = n.arts.Verify("s", w)
			if !errors.Is(err, sessionstore.ErrCorruption) {
				t.Fatalf("Verify of the damaged artifact = %v, want CORRUPTION", err)
			}
			if got := counterValue(t, n.arts.metrics.ArtifactCorrupt); got != 1 {
				t.Errorf("sessionstore_artifact_verify_failures_total = %v, want 1", got)
			}
			n.idle(t)
			w, ok = n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current after the rebuild")
			}
			if err := n.arts.Verify("s", w); err != nil {
				t.Fatalf("Verify after the rebuild: %v", err)
			}
			if got, err := os.ReadFile(w.Path); err != nil || !bytes.Equal(got, want) {
				t.Errorf("rebuilt artifact: %d bytes, %v; want the %d bytes first written", len(got), err, len(want))
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}
