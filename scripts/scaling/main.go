// Command scaling measures how one sessionstore node binary scales with the
// number of stored sessions. For each session count it
//
//  1. fills a lone node with that many sessions of one agent turn each
//     (--events events of about 180 bytes in --appends Appends, --writers
//     concurrent clients), no snapshot meanwhile, and reports the stored
//     event text, state.db (with its free pages from /metrics), the Raft
//     log, the artifacts and the whole data directory (du and file bytes),
//     and RSS split into anonymous and file-backed (state.db's mmap);
//  2. restarts it (SIGTERM, start) and times start → /readyz 200 and a
//     linearizable Inspect;
//  3. grows one session to --long-events events in Appends of --long-batch
//     and compares the mean Append latency and the node's CPU per event
//     (/proc/PID/task/*/schedstat, nanoseconds) of the first and last
//     --window events, and of the first and last ten windows;
//  4. restarts it with --snapshot-threshold 1 and a 1024-entry trailing log,
//     reads the "snapshot persisted" log line's dur and bytes, stops it and
//     measures the data directory again;
//  5. starts it once more (a second restart time, now from a snapshot) and
//     starts an empty node that --joins it: the time until that node's
//     applied index reaches the leader's, its "restored state from
//     snapshot" dur, and the time until its sessionstore_artifact_bytes
//     last changed (stable for 3 s), with both nodes' artifact file counts.
//
// An empty joining node does the work of a wiped follower: snapshot
// install, the log after it, every artifact rebuilt. A lone node's restart
// includes its Raft election timeout (about 1-2 s). Run it once per binary
// to compare two builds:
//
//	go build -o /tmp/sessionstore-new ./cmd/node
//	go run ./scripts/scaling --node-bin /tmp/sessionstore-new --sessions 10000,100000
//
// Times are wall-clock on whatever else the machine runs; CPU and byte
// figures are the steadier ones.
package main

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/serverproc"
)

const (
	callTimeout = 30 * time.Second
	readyID     = "scaling-ready"  // the session readiness reads
	longID      = "scaling-long"   // the session the append-cost phase grows
	idleCores   = 0.1              // settled: the node used less CPU than this over a second
	stopTimeout = 60 * time.Second // SIGTERM to kill: a large state may take a while to close
	// converted, packed and numbered are what a node logs when it converts
	// its state to layout 2, to state format 3 and to state format 4.
	converted = "state database converted to layout 2"
	packed    = "state database in format 3"
	numbered  = "state database in format 4"
)

type config struct {
	nodeBin, workDir              string
	nodeFlags                     []string // extra serve flags of every start
	ids                           string   // idsSeq or idsUUID
	counts                        []int
	writers, events, appends      int
	longEvents, longBatch, window int
	keep                          bool
}

func main() {
	var cfg config
	var sessions string
	flag.StringVar(&cfg.nodeBin, "node-bin", "", "the node binary to measure (go build -o sessionstore ./cmd/node)")
	flag.StringVar(&sessions, "sessions", "10000,100000", "comma-separated session counts")
	var nodeFlags string
	flag.StringVar(&cfg.ids, "ids", idsSeq, "filled sessions' ids: \"seq\" (s0000000, s0000001, ... in order) or \"uuid\" (random version-4 UUIDs, as the reference harness's live system makes; fixed per index, so runs repeat)")
	flag.StringVar(&nodeFlags, "node-flags", "", "extra serve flags of every node start, space-separated (e.g. \"--artifacts off\")")
	flag.StringVar(&cfg.workDir, "work-dir", "", "where data directories and logs go (default: a new temporary directory, removed at the end)")
	flag.BoolVar(&cfg.keep, "keep", false, "keep the work directory")
	flag.IntVar(&cfg.writers, "writers", 64, "concurrent clients filling the node")
	flag.IntVar(&cfg.events, "events", 5, "events per filled session (one turn; at least 5)")
	flag.IntVar(&cfg.appends, "appends", 2, "Appends per filled session (the turn split as evenly as possible)")
	flag.IntVar(&cfg.longEvents, "long-events", 100000, "events appended to the one long session")
	flag.IntVar(&cfg.longBatch, "long-batch", 100, "events per Append to the long session (at least 5)")
	flag.IntVar(&cfg.window, "window", 1000, "events per window when comparing the long session's first and last Appends")
	flag.Parse()
	cfg.nodeFlags = strings.Fields(nodeFlags)
	var err error
	if cfg.counts, err = parseCounts(sessions); err == nil {
		err = cfg.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "scaling:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "scaling:", err)
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.nodeBin == "":
		return errors.New("--node-bin is required")
	case c.ids != idsSeq && c.ids != idsUUID:
		return fmt.Errorf("--ids %q: want %s or %s", c.ids, idsSeq, idsUUID)
	case c.writers <= 0 || c.events < 5 || c.appends <= 0 || c.appends > c.events:
		return errors.New("--writers must be > 0, --events ≥ 5, 0 < --appends ≤ --events")
	case c.longBatch < 5 || c.longEvents < c.longBatch || c.window < c.longBatch:
		return errors.New("--long-batch ≥ 5, --long-events ≥ --long-batch, --window ≥ --long-batch")
	}
	return nil
}

// parseCounts parses a comma-separated list of positive counts.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("%q: want a comma-separated list of positive counts, e.g. 10000,100000", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one session count's figures.
type result struct {
	sessions, layout            int
	events, eventBytes          int64
	fillErrors                  int64
	fillDur                     time.Duration
	fillCPU                     float64 // µs of server CPU per event, fill start to settled
	afterFill, afterSnap        dirSizes
	rss, rssRestart             memory
	stopDur, restartDur         time.Duration
	restartDur2                 time.Duration // after the snapshot
	snap                        snapshotLine
	snapRSS                     memory
	catchApplied, catchArtifact time.Duration
	catchRestore                time.Duration // the joiner's "restored state from snapshot" dur; 0: replayed the log
	joinFiles, leaderFiles      int
	joinSizes                   dirSizes
	joinRSS                     memory
	long                        appendCost
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	work := cfg.workDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "scaling-"); err != nil {
			return err
		}
		if !cfg.keep {
			defer os.RemoveAll(work)
		}
	}
	bin, err := os.ReadFile(cfg.nodeBin)
	if err != nil {
		return err
	}
	// The newest format the binary converts to, waited for (1: none).
	converts := 1
	switch {
	case bytes.Contains(bin, []byte(numbered)):
		converts = 4
	case bytes.Contains(bin, []byte(packed)):
		converts = 3
	case bytes.Contains(bin, []byte(converted)):
		converts = 2
	}
	var results []result
	for _, n := range cfg.counts {
		dir := filepath.Join(work, fmt.Sprintf("s%d", n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		fmt.Fprintf(stderr, "%d sessions (%s)\n", n, dir)
		r, err := measure(ctx, cfg, dir, n, converts, stderr)
		if err != nil {
			return fmt.Errorf("%d sessions: %w", n, err)
		}
		results = append(results, r)
	}
	printTable(stdout, cfg, results)
	return nil
}

func measure(ctx context.Context, cfg config, dir string, count int, converts int, logw io.Writer) (r result, err error) {
	r.sessions, r.layout = count, 1
	step := func(format string, args ...any) {
		fmt.Fprintf(logw, "  %s %s\n", time.Now().Format("15:04:05"), fmt.Sprintf(format, args...))
	}
	n1, err := newNode(cfg.nodeBin, "n1", dir, cfg.nodeFlags)
	if err != nil {
		return r, err
	}
	defer n1.close()
	// No snapshot while filling: the fill's figures are the writes' alone,
	// and the snapshot is timed on its own below.
	noSnap := []string{"--snapshot-interval", "24h"}
	if err := n1.start(ctx, noSnap...); err != nil {
		return r, err
	}
	err = serverproc.WaitFor(ctx, time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if n1.p.Exited() {
			return serverproc.Permanent(fmt.Errorf("exited:\n%s", n1.p.Tail()))
		}
		return create(ctx, n1, readyID, 0)
	})
	if err == nil {
		// Inspect finds a session only once it has events.
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err = n1.c.Append(cctx, &sessionpb.AppendRequest{SessionId: readyID, Events: turn(0, 0, 1, 5, time.Now().UnixMilli())})
		cancel()
	}
	if err != nil {
		return r, err
	}
	if converts > 1 {
		msg := map[int]string{2: converted, 3: packed, 4: numbered}[converts]
		if err := n1.waitLog(ctx, msg, time.Minute); err != nil {
			return r, err
		}
		r.layout = converts
	}

	step("fill: %d sessions × %d events, %d writers", count, cfg.events, cfg.writers)
	cpu0 := n1.cpu()
	t0 := time.Now()
	r.events, r.eventBytes, r.fillErrors = fill(ctx, n1, cfg, count)
	r.fillDur = time.Since(t0)
	if err := ctx.Err(); err != nil {
		return r, err
	}
	if err := n1.settle(ctx, idleCores); err != nil {
		return r, err
	}
	r.fillCPU = float64(n1.cpu()-cpu0) / 1e3 / float64(max(r.events, 1))
	step("filled in %v (%d errors)", r.fillDur.Round(time.Millisecond), r.fillErrors)
	if r.afterFill, err = n1.sizes(); err != nil {
		return r, err
	}
	r.afterFill.stateFree = n1.boltFree(ctx)
	r.rss = n1.rss()

	step("restart")
	r.stopDur = n1.stop()
	t0 = time.Now()
	if err := n1.start(ctx, noSnap...); err != nil {
		return r, err
	}
	if err := serverproc.WaitFor(ctx, 10*time.Minute, 20*time.Millisecond, func(ctx context.Context) error { return n1.ready(ctx, readyID) }); err != nil {
		return r, err
	}
	r.restartDur = time.Since(t0)
	r.rssRestart = n1.rss()
	if err := n1.settle(ctx, idleCores); err != nil {
		return r, err
	}

	step("append cost: %d events in Appends of %d to one session", cfg.longEvents, cfg.longBatch)
	if r.long, err = longSession(ctx, n1, cfg); err != nil {
		return r, err
	}
	if err := n1.settle(ctx, idleCores); err != nil {
		return r, err
	}

	step("snapshot")
	n1.stop()
	// The node groups commands into Raft entries, so the entry count since
	// the (never taken) last snapshot is not known: threshold 1 snapshots
	// within 1-2 s of the start. Trailing logs 1024 then drop nearly all of
	// the log, so the joining node below must install the snapshot, as a
	// wiped follower of a long-lived cluster would.
	if err := n1.start(ctx, "--snapshot-threshold", "1", "--snapshot-interval", "1s", "--trailing-logs", "1024"); err != nil {
		return r, err
	}
	if err := n1.waitLog(ctx, "snapshot persisted", 10*time.Minute); err != nil {
		return r, err
	}
	var ok bool
	if r.snap, ok, err = findSnapshotLine(n1.log()); err != nil || !ok {
		return r, fmt.Errorf("snapshot line: %v", err)
	}
	r.snapRSS = n1.rss()
	if err := n1.settle(ctx, idleCores); err != nil {
		return r, err
	}
	free := n1.boltFree(ctx)
	n1.stop()
	if r.afterSnap, err = n1.sizes(); err != nil {
		return r, err
	}
	r.afterSnap.stateFree = free
	// Started again without snapshots, so none runs during the catch-up:
	// a second restart time, now from a snapshot and a short log.
	t0 = time.Now()
	if err := n1.start(ctx, noSnap...); err != nil {
		return r, err
	}
	if err := serverproc.WaitFor(ctx, 10*time.Minute, 20*time.Millisecond, func(ctx context.Context) error { return n1.ready(ctx, readyID) }); err != nil {
		return r, err
	}
	r.restartDur2 = time.Since(t0)
	if err := n1.settle(ctx, idleCores); err != nil {
		return r, err
	}

	step("catch-up: an empty node joins")
	n2, err := newNode(cfg.nodeBin, "n2", dir, cfg.nodeFlags)
	if err != nil {
		return r, err
	}
	defer n2.close()
	t0 = time.Now()
	if err := n2.start(ctx, "--join", n1.gossip); err != nil {
		return r, err
	}
	err = serverproc.WaitFor(ctx, 10*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		if n2.p.Exited() {
			return serverproc.Permanent(fmt.Errorf("n2 exited:\n%s", n2.p.Tail()))
		}
		want, err := n1.applied(ctx)
		if err != nil {
			return err
		}
		got, err := n2.applied(ctx)
		if err != nil {
			return err
		}
		if got < want {
			return fmt.Errorf("n2 applied %d of %d", got, want)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.catchApplied = time.Since(t0)
	if !artifactsOn(cfg.nodeFlags) {
		r.joinRSS = n2.rss()
		if err := n2.settle(ctx, idleCores); err != nil {
			return r, err
		}
		r.joinSizes, err = n2.sizes()
		step("done")
		return r, err
	}
	// The artifact writer publishes the bytes it stored at the end of each
	// pass: caught up when that figure is positive and has not moved for 3 s;
	// the time is that of its last change.
	var last float64
	lastChange := time.Now()
	err = serverproc.WaitFor(ctx, 10*time.Minute, 100*time.Millisecond, func(ctx context.Context) error {
		v, err := n2.metric(ctx, "sessionstore_artifact_bytes")
		if err != nil {
			return err
		}
		if v != last {
			last, lastChange = v, time.Now()
		}
		if v <= 0 || time.Since(lastChange) < 3*time.Second {
			return fmt.Errorf("artifacts: %.0f bytes", v)
		}
		return nil
	})
	if err != nil {
		return r, err
	}
	r.catchArtifact = lastChange.Sub(t0)
	r.joinRSS = n2.rss()
	if m, ok := findLogDur(n2.log(), "restored state from snapshot"); ok {
		r.catchRestore = m
	}
	if err := n2.settle(ctx, idleCores); err != nil {
		return r, err
	}
	r.joinFiles = countFiles(filepath.Join(n2.dir, "artifacts"))
	r.leaderFiles = countFiles(filepath.Join(n1.dir, "artifacts"))
	r.joinSizes, err = n2.sizes()
	step("done")
	return r, err
}

// How filled sessions are named (--ids). bbolt leaves pages filled in key
// order half full, and ids in order are always inserted at the end.
const (
	idsSeq  = "seq"
	idsUUID = "uuid"
)

// sessionID is the id of the i-th filled session.
func sessionID(kind string, i int64) string {
	if kind != idsUUID {
		return fmt.Sprintf("s%07d", i)
	}
	var b [16]byte
	r := rand.New(rand.NewPCG(uint64(i), 0x5eed))
	binary.LittleEndian.PutUint64(b[:8], r.Uint64())
	binary.LittleEndian.PutUint64(b[8:], r.Uint64())
	b[6] = b[6]&0x0f | 0x40 // version 4
	b[8] = b[8]&0x3f | 0x80 // RFC 4122 variant
	h := hex.EncodeToString(b[:])
	return h[:8] + "-" + h[8:12] + "-" + h[12:16] + "-" + h[16:20] + "-" + h[20:]
}

// artifactsOn says whether serve flags leave the artifacts on (the default).
func artifactsOn(flags []string) bool {
	on := true
	for i, f := range flags {
		name, val, hasVal := strings.Cut(strings.TrimLeft(f, "-"), "=")
		if name != "artifacts" {
			continue
		}
		if !hasVal && i+1 < len(flags) {
			val = flags[i+1]
		}
		on = val != "off"
	}
	return on
}

// longBytes is the long session's text, stored after the fill.
func (r result) longBytes() int64 { return r.long.textBytes }

// findLogDur returns the dur of the first log line with message msg.
func findLogDur(log, msg string) (time.Duration, bool) {
	for line := range strings.Lines(log) {
		if m, _ := logAttr(line, "msg"); m != msg {
			continue
		}
		d, ok := logAttr(line, "dur")
		if !ok {
			return 0, false
		}
		v, err := time.ParseDuration(strings.TrimSpace(d))
		return v, err == nil
	}
	return 0, false
}

func create(ctx context.Context, n *node, id string, i int) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cwd := fmt.Sprintf("/home/dev/project-%02d", i%50)
	_, err := n.c.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: id, CreatedAt: time.Now().UnixMilli(), Cwd: &cwd}})
	return err
}

// fill creates count sessions of one turn each with cfg.writers concurrent
// clients; it returns the events acknowledged, their JSONL bytes (event +
// newline) and the failed calls. A failed session is abandoned (its outcome
// is unknown; nothing is re-sent).
func fill(ctx context.Context, n *node, cfg config, count int) (events, textBytes, errs int64) {
	var next, ev, tb, fails atomic.Int64
	var wg sync.WaitGroup
	for range cfg.writers {
		wg.Go(func() {
			for ctx.Err() == nil {
				i := next.Add(1) - 1
				if i >= int64(count) {
					return
				}
				id := sessionID(cfg.ids, i)
				if err := create(ctx, n, id, int(i)); err != nil {
					fails.Add(1)
					continue
				}
				all := turn(i, 0, 1, cfg.events, time.Now().UnixMilli())
				for k := range cfg.appends {
					batch := all[k*len(all)/cfg.appends : (k+1)*len(all)/cfg.appends]
					cctx, cancel := context.WithTimeout(ctx, callTimeout)
					_, err := n.c.Append(cctx, &sessionpb.AppendRequest{SessionId: id, Events: batch})
					cancel()
					if err != nil {
						fails.Add(1)
						break
					}
					ev.Add(int64(len(batch)))
					for _, e := range batch {
						tb.Add(int64(len(e) + 1))
					}
				}
			}
		})
	}
	wg.Wait()
	return ev.Load(), tb.Load(), fails.Load()
}

// appendCost compares the long session's first Appends with its last.
type appendCost struct {
	window          int
	first, last     windowCost // cfg.window events
	first10, last10 windowCost // 10 × cfg.window events (or the first and last tenth)
	appends         int
	textBytes       int64 // the long session's JSONL bytes
}

type windowCost struct {
	latency time.Duration // mean per Append
	cpu     float64       // µs of server CPU per event
}

func longSession(ctx context.Context, n *node, cfg config) (appendCost, error) {
	if err := create(ctx, n, longID, 0); err != nil {
		return appendCost{}, err
	}
	appends := cfg.longEvents / cfg.longBatch
	var textBytes int64
	lat := make([]time.Duration, appends)
	cpu := make([]uint64, appends)
	for k := range appends {
		evs := turn(int64(k), int64(k*cfg.longBatch), int64(k+1), cfg.longBatch, time.Now().UnixMilli())
		for _, e := range evs {
			textBytes += int64(len(e) + 1)
		}
		c0 := n.cpu()
		t0 := time.Now()
		cctx, cancel := context.WithTimeout(ctx, callTimeout)
		_, err := n.c.Append(cctx, &sessionpb.AppendRequest{SessionId: longID, Events: evs})
		cancel()
		lat[k], cpu[k] = time.Since(t0), n.cpu()-c0
		if err != nil {
			return appendCost{}, fmt.Errorf("append %d to the long session: %w", k, err)
		}
	}
	w := cfg.window / cfg.longBatch
	w10 := min(10*w, max(appends/10, 1))
	win := func(from, to int) windowCost {
		var l time.Duration
		var c uint64
		for k := from; k < to; k++ {
			l += lat[k]
			c += cpu[k]
		}
		return windowCost{latency: l / time.Duration(to-from), cpu: float64(c) / 1e3 / float64((to-from)*cfg.longBatch)}
	}
	return appendCost{window: cfg.window, appends: appends, textBytes: textBytes,
		first: win(0, w), last: win(appends-w, appends),
		first10: win(0, w10), last10: win(appends-w10, appends)}, nil
}
