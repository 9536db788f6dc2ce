package artifacts

import (
	"io"
	"log/slog"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// The commands these tests apply (fsm's own tests build the same; a test
// package cannot share them with another).

func entry(t testing.TB, index uint64, now int64, cmds ...*fsmpb.Command) *raft.Log {
	t.Helper()
	data, err := fsm.Encode(&fsmpb.Entry{NowUnixMs: now, Commands: cmds})
	if err != nil {
		t.Fatal(err)
	}
	return &raft.Log{Index: index, Term: 1, Type: raft.LogCommand, Data: data}
}

func createCmd(id string) *fsmpb.Command {
	cwd := "/w"
	return &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
		Header: &fsmpb.Header{Id: id, CreatedAt: 1000, Cwd: &cwd}}}}
}

func appendCmd(id string, first int64, events ...string) *fsmpb.Command {
	a := &fsmpb.Append{SessionId: id, FirstSeq: first}
	for _, e := range events {
		a.Events = append(a.Events, []byte(e))
	}
	return &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: a}}
}

func deleteCmd(id string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_Delete{Delete: &fsmpb.Delete{SessionId: id}}}
}

func convertCmd(layout uint32) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_ConvertLayout{ConvertLayout: &fsmpb.ConvertLayout{Layout: layout}}}
}

var openTurn = []string{
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
	`{"type":"step/start","seq":1,"time":2,"data":{"turn":1,"step":1}}`,
}

// newFSM is an FSM without artifacts on a new state in layout 1, or
// converted to layout 2 by a committed command at index 1.
func newFSM(t *testing.T, layout uint32) (*fsm.FSM, *storage.StateDB) {
	t.Helper()
	db, err := storage.OpenState(filepath.Join(t.TempDir(), "state.db"), storage.StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	f, err := fsm.New(db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if layout > 1 {
		f.ApplyBatch([]*raft.Log{entry(t, 1, 100, convertCmd(layout))})
	}
	return f, db
}
