package fsm

import (
	"bytes"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/storage"
)

// blockingSink holds Persist inside its first Write until released.
type blockingSink struct {
	bytes.Buffer
	started chan struct{}
	release chan struct{}
	once    bool
}

func (s *blockingSink) Write(p []byte) (int, error) {
	if !s.once {
		s.once = true
		close(s.started)
		<-s.release
	}
	return s.Buffer.Write(p)
}
func (s *blockingSink) ID() string    { return "blocking" }
func (s *blockingSink) Cancel() error { return nil }
func (s *blockingSink) Close() error  { return nil }

// Apply must go on while a snapshot is being persisted: the snapshot holds a
// read transaction, and with the shipped InitialMmapSize a growing file never
// has to remap (which would wait for that transaction).
func TestApplyWhileSnapshotPersists(t *testing.T) {
	db, err := storage.OpenState(filepath.Join(t.TempDir(), "state.db"), storage.DefaultStateOptions())
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	f, err := New(db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	f.ApplyBatch([]*raft.Log{entry(t, 1, 1, createCmd("s"))})
	snap, err := f.Snapshot()
	if err != nil {
		t.Fatal(err)
	}
	sink := &blockingSink{started: make(chan struct{}), release: make(chan struct{})}
	persisted := make(chan error, 1)
	go func() { persisted <- snap.Persist(sink) }()
	<-sink.started

	// Grow the file well past its initial size while the snapshot is held.
	pad := strings.Repeat("y", 4000)
	idx := uint64(1)
	for i := int64(0); i < 2000; i++ {
		idx++
		f.ApplyBatch([]*raft.Log{entry(t, idx, 1, appendCmd("s", i, fmt.Sprintf(`{"type":"x/e","seq":%d,"time":1,"data":"%s"}`, i, pad)))})
	}
	if f.AppliedIndex() != idx {
		t.Fatalf("applied %d, want %d", f.AppliedIndex(), idx)
	}
	close(sink.release)
	if err := <-persisted; err != nil {
		t.Fatal(err)
	}
	snap.Release()

	// The snapshot holds the state at the moment it was taken: one session, no events.
	g, db2 := newTestFSM(t)
	if err := g.Restore(io.NopCloser(bytes.NewReader(sink.Bytes()))); err != nil {
		t.Fatal(err)
	}
	if g.AppliedIndex() != 1 {
		t.Errorf("snapshot applied index = %d, want 1", g.AppliedIndex())
	}
	_ = db2.View(func(tx *storage.Tx) error {
		if !tx.HasSession("s") || tx.SumsEnd("s") != 0 {
			t.Error("snapshot should hold the session without events")
		}
		return nil
	})
}
