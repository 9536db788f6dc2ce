//go:build bigstate

package main

// Restart time and memory with a large state database (issue 14). Not in CI:
// it writes about a gigabyte and starts the real binary several times.
//
//	BIGSTATE_DIR=/tmp/bigstate go test -tags bigstate -run TestBigStateGenerate -count=1 -timeout 30m -v ./cmd/node
//	BIGSTATE_DIR=/tmp/bigstate go test -tags bigstate -run TestBigStateRestart -count=1 -timeout 30m -v ./cmd/node
//
// The generator applies create and append commands through the FSM (the
// storage package's transactions, so the page layout is the one a node
// writes), then resets the applied index to 0 so that a fresh lone node
// adopts the file: its Raft log starts empty. The restart test copies it to
// $BIGSTATE_DIR/run and starts the node there. BIGSTATE_MB sets the size
// (default 1024). The restart test starts the node on the directory, stops it
// with SIGTERM (a clean stop), starts it again, then kills it (SIGKILL, an
// unclean stop) and starts it once more, logging for each start the time from
// exec to "node started" (cluster.Open returned), to /readyz 200, and the
// process's VmRSS/RssFile/RssAnon right after /readyz and 3 s later.
// BIGSTATE_BIN runs another build of the node (a comparison).

import (
	"bufio"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func bigStateDir(t *testing.T) string {
	dir := os.Getenv("BIGSTATE_DIR")
	if dir == "" {
		t.Skip("BIGSTATE_DIR not set")
	}
	return dir
}

func TestBigStateGenerate(t *testing.T) {
	dir := bigStateDir(t)
	mb := 1024
	if v := os.Getenv("BIGSTATE_MB"); v != "" {
		var err error
		if mb, err = strconv.Atoi(v); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "state.db")
	if _, err := os.Stat(path); err == nil {
		t.Fatalf("%s exists", path)
	}
	db, err := storage.OpenState(path, storage.DefaultStateOptions())
	if err != nil {
		t.Fatal(err)
	}
	f, err := fsm.New(db, slog.New(slog.NewTextHandler(io.Discard, nil)), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	const (
		perSession = 500 // events of ~1 KiB
		perAppend  = 20
		batch      = 32 // sessions per Raft entry
	)
	sessions := mb * 1024 / perSession
	pad := strings.Repeat("x", 900)
	idx := uint64(0)
	apply := func(cmds []*fsmpb.Command) {
		idx++
		data, err := fsm.Encode(&fsmpb.Entry{NowUnixMs: time.Now().UnixMilli(), Commands: cmds})
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range f.ApplyBatch([]*raft.Log{{Index: idx, Term: 1, Type: raft.LogCommand, Data: data}}) {
			if err, ok := r.(error); ok {
				t.Fatalf("entry %d: %v", idx, err)
			}
		}
	}
	start := time.Now()
	cwd := "/work/big"
	for first := 0; first < sessions; first += batch {
		var cmds []*fsmpb.Command
		ids := []string{}
		for s := first; s < min(first+batch, sessions); s++ {
			id := fmt.Sprintf("big-%06d", s)
			ids = append(ids, id)
			cmds = append(cmds, &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
				Header: &fsmpb.Header{Id: id, CreatedAt: time.Now().UnixMilli(), Cwd: &cwd}}}})
		}
		apply(cmds)
		// Sessions grow side by side, as live ones do.
		for seq := 0; seq < perSession; seq += perAppend {
			cmds = cmds[:0]
			for _, id := range ids {
				a := &fsmpb.Append{SessionId: id, FirstSeq: int64(seq)}
				for e := seq; e < seq+perAppend; e++ {
					a.Events = append(a.Events, []byte(fmt.Sprintf(`{"type":"x/e","seq":%d,"time":%d,"data":"%s"}`, e, e+1, pad)))
				}
				cmds = append(cmds, &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: a}})
			}
			apply(cmds)
		}
		if first%(batch*16) == 0 {
			t.Logf("%d/%d sessions, %d MiB, %v", first, sessions, db.Size()>>20, time.Since(start).Round(time.Second))
		}
	}
	if err := db.Update(func(tx *storage.Tx) error { return tx.SetApplied(0, 0) }); err != nil {
		t.Fatal(err)
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	st, _ := os.Stat(path)
	t.Logf("%s: %d sessions × %d events, %d MiB, %v", path, sessions, perSession, st.Size()>>20, time.Since(start).Round(time.Second))
}

func TestBigStateRestart(t *testing.T) {
	src := bigStateDir(t)
	// A fresh data directory each time: the node's addresses are new.
	dir := filepath.Join(src, "run")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	crCopyFile(t, filepath.Join(src, "state.db"), filepath.Join(dir, "state.db"))
	bin := os.Getenv("BIGSTATE_BIN") // e.g. an older build, for a comparison
	if bin == "" {
		bin = crBinary(t)
	}
	n := crNewNode(t, bin, dir)
	st, err := os.Stat(filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("state.db: %d MiB", st.Size()>>20)
	rounds := []struct {
		name string
		stop func()
	}{
		{"first start (settles artifacts, then SIGTERM)", n.Term},
		{"after a clean stop (SIGTERM), then SIGTERM", n.Term},
		{"after a clean stop (SIGTERM), then SIGKILL", n.Kill},
		{"after SIGKILL", n.Term},
	}
	for i, r := range rounds {
		begin := time.Now()
		n.Start()
		pid := n.cur.cmd.Process.Pid
		started, ready := time.Duration(0), time.Duration(0)
		hc := &http.Client{Timeout: time.Second}
		for ready == 0 {
			if started == 0 && strings.Contains(n.Log(), "node started") {
				started = time.Since(begin)
			}
			if resp, err := hc.Get("http://" + n.HTTPAddr + "/readyz"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == http.StatusOK {
					ready = time.Since(begin)
				}
			}
			if n.Exited() {
				t.Fatalf("%s: exited", r.name)
			}
			if time.Since(begin) > 5*time.Minute {
				t.Fatalf("%s: not ready", r.name)
			}
			time.Sleep(5 * time.Millisecond)
		}
		rss := procStatus(t, pid)
		if os.Getenv("BIGSTATE_LOG") != "" {
			t.Logf("exec at %s; log:\n%s", begin.UTC().Format("15:04:05.000"), n.Log())
		}
		t.Logf("run %d, %s: node started %v, /readyz %v; %s", i+1, r.name,
			started.Round(time.Millisecond), ready.Round(time.Millisecond), rss)
		if i == 0 {
			// Let the first start write the artifacts of every session, as a
			// long-running node has them.
			waitArtifactsIdle(t, n)
		} else {
			// A SIGTERM right after the election can stall the stop: the
			// leadership barrier (runLeadership) waits on.
			time.Sleep(3 * time.Second)
			t.Logf("run %d, 3 s later: %s", i+1, procStatus(t, pid))
		}
		r.stop()
	}
	for _, l := range strings.Split(n.Log(), "\n") {
		if strings.Contains(l, "state database") || strings.Contains(l, "verif") {
			t.Log(l)
		}
	}
}

// procStatus returns the RSS lines of /proc/<pid>/status.
func procStatus(t *testing.T, pid int) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return err.Error()
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if l := sc.Text(); strings.HasPrefix(l, "VmRSS") || strings.HasPrefix(l, "RssAnon") || strings.HasPrefix(l, "RssFile") || strings.HasPrefix(l, "VmHWM") {
			out = append(out, strings.Join(strings.Fields(l), " "))
		}
	}
	return strings.Join(out, ", ")
}

// waitArtifactsIdle waits for the artifact writer's backlog metric to stay 0.
func waitArtifactsIdle(t *testing.T, n *crNode) {
	hc := &http.Client{Timeout: 5 * time.Second}
	deadline := time.Now().Add(20 * time.Minute)
	last := -1.0
	for time.Now().Before(deadline) {
		time.Sleep(2 * time.Second)
		resp, err := hc.Get("http://" + n.HTTPAddr + "/metrics")
		if err != nil {
			continue
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		lag, size := metricValue(string(b), "sessionstore_artifact_lagging_sessions"), metricValue(string(b), "sessionstore_artifact_bytes")
		if lag == 0 && size > 0 && size == last {
			t.Logf("artifacts written: %.0f MiB", size/(1<<20))
			return
		}
		last = size
	}
	t.Log("artifacts still lagging after 20 minutes")
}

func metricValue(text, name string) float64 {
	for _, l := range strings.Split(text, "\n") {
		if strings.HasPrefix(l, name+" ") {
			v, _ := strconv.ParseFloat(strings.TrimSpace(strings.TrimPrefix(l, name)), 64)
			return v
		}
	}
	return -1
}
