package artifacts

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// benchArtifacts is an FSM whose observer is an artifact writer that the
// benchmark drives itself (step), so only the writer's work is timed.
type benchArtifacts struct {
	dir   string
	db    *storage.StateDB
	local *storage.RaftStore
	fsm   *fsm.FSM
	arts  *Writer
	index uint64
}

func newBenchArtifacts(b *testing.B) *benchArtifacts {
	b.Helper()
	n := &benchArtifacts{dir: b.TempDir()}
	var err error
	if n.db, err = storage.OpenState(filepath.Join(n.dir, "state.db"), storage.StateOptions{}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { n.db.Close() })
	// Layout 2: what a cluster converts to as soon as every voter can.
	if err := n.db.Update(func(tx *storage.Tx) error { _, err := fsm.ConvertLayout(tx, 1, nil); return err }); err != nil {
		b.Fatal(err)
	}
	n.local = openBenchRaftStore(b, filepath.Join(n.dir, "raft.db"))
	n.arts = New(filepath.Join(n.dir, "artifacts"), n.db, n.local, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
	if n.fsm, err = fsm.New(n.db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, n.arts.Observe); err != nil {
		b.Fatal(err)
	}
	return n
}

func openBenchRaftStore(b *testing.B, path string) *storage.RaftStore {
	b.Helper()
	s, err := storage.OpenRaftStore(path)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// apply commits cmds in entries of at most per commands each, one batch.
func (n *benchArtifacts) apply(b *testing.B, per int, cmds []*fsmpb.Command) {
	b.Helper()
	var logs []*raft.Log
	for len(cmds) > 0 {
		k := min(per, len(cmds))
		n.index++
		logs = append(logs, entry(b, n.index, 1, cmds[:k]...))
		cmds = cmds[k:]
	}
	n.fsm.ApplyBatch(logs)
}

// step runs one pass of the writer and returns the CPU time the process
// spent meanwhile (user and system): on a loaded machine wall time says
// little, and the writer's cost is mostly system time.
func (n *benchArtifacts) step(b *testing.B) time.Duration {
	b.Helper()
	return timeCPU(b, func() error { _, err := n.arts.step(); return err })
}

func timeCPU(b *testing.B, fn func() error) time.Duration {
	b.Helper()
	var before, after syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
	err := fn()
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
	if err != nil {
		b.Fatal(err)
	}
	return time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
}

// BenchmarkArtifactWriter is the writer's cost per appended frame with 256
// active sessions, each Append one ~1 KiB event: a pass gets the frames of
// one applied batch (frames=256: every session appended once; frames=8: a
// few sessions, in turn). Only the pass is timed, not the FSM.
func BenchmarkArtifactWriter(b *testing.B) {
	const sessions = 256
	for _, perPass := range []int{256, 8} {
		b.Run(fmt.Sprintf("sessions=%d/frames=%d", sessions, perPass), func(b *testing.B) {
			n := newBenchArtifacts(b)
			var cmds []*fsmpb.Command
			for s := 0; s < sessions; s++ {
				cmds = append(cmds, createCmd(fmt.Sprintf("s%d", s)))
			}
			n.apply(b, 64, cmds)
			n.step(b)
			pad := strings.Repeat("x", 950)
			next := make([]int64, sessions)
			s := 0
			var cpu time.Duration
			b.ResetTimer()
			b.StopTimer()
			for i := 0; i < b.N; i++ {
				cmds = cmds[:0]
				for k := 0; k < perPass; k++ {
					id := fmt.Sprintf("s%d", s)
					cmds = append(cmds, appendCmd(id, next[s],
						fmt.Sprintf(`{"type":"x/e","seq":%d,"time":1,"data":"%s"}`, next[s], pad)))
					next[s]++
					s = (s + 1) % sessions
				}
				n.apply(b, perPass, cmds)
				b.StartTimer()
				cpu += n.step(b)
				b.StopTimer()
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*perPass), "ns/frame")
			b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*perPass), "cpu-ns/frame")
		})
	}
}

// BenchmarkArtifactRebuild is a wiped follower's catch-up: every artifact of
// 10,000 small sessions (a header and two frames of three events) written
// from the state database into an empty directory with no watermarks.
func BenchmarkArtifactRebuild(b *testing.B) {
	const sessions = 10000
	n := newBenchArtifacts(b)
	var cmds []*fsmpb.Command
	for s := 0; s < sessions; s++ {
		id := fmt.Sprintf("s%d", s)
		cmds = append(cmds, createCmd(id), appendCmd(id, 0, openTurn...),
			appendCmd(id, 2, `{"type":"step/end","seq":2,"time":3,"data":{"turn":1,"step":1}}`))
	}
	n.apply(b, 300, cmds)
	var cpu time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		root := filepath.Join(n.dir, fmt.Sprintf("rebuild%d", i))
		local := openBenchRaftStore(b, filepath.Join(n.dir, fmt.Sprintf("raft%d.db", i)))
		arts := New(root, n.db, local, n.arts.logger, nil)
		b.StartTimer()
		cpu += timeCPU(b, func() error { _, err := arts.step(); return err })
		b.StopTimer()
		if got := arts.marks.Load().bytes; got == 0 {
			b.Fatal("nothing written")
		}
		_ = os.RemoveAll(root)
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*sessions), "ns/session")
	b.ReportMetric(float64(cpu.Nanoseconds())/float64(b.N*sessions), "cpu-ns/session")
}
