// Command vsetcd measures sessionstore and etcd side by side on this machine
// with one closed-loop load generator: each writer sends one 1 KiB write per
// call and waits for the answer (sessionstore: one event per Append on the
// writer's own session; etcd: a Put of a new key). For every writer count it
// runs --pairs interleaved pairs, each system on a fresh cluster, and prints
// per run the write rate, latency, the servers' CPU per write, the bytes the
// servers wrote to disk per write and node, and the data directory's size,
// then the ratios sessionstore / etcd. scripts/vs-etcd builds both binaries
// and runs it:
//
//	scripts/vs-etcd --pairs 5 --writers 16,256
//	scripts/vs-etcd --nodes 1 --writers 64
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/sessionstore/sessionstore/internal/benchload"
	"github.com/sessionstore/sessionstore/internal/du"
	"github.com/sessionstore/sessionstore/internal/procstat"
)

const (
	callTimeout   = 30 * time.Second       // per write, the client's retries included
	errorPause    = 50 * time.Millisecond  // after a failed write, so a failing server is not hammered
	settleWindow  = time.Second            // CPU is sampled over windows this long while settling
	settleTimeout = 120 * time.Second      // give up waiting for the servers to go quiet
	pollInterval  = 200 * time.Millisecond // applied-index polling while settling
	startAttempts = 3                      // cluster starts tried per run (see measure)
)

type config struct {
	nodeBin, etcdBin, workDir string
	baseBin                   string   // compare against this node build instead of etcd
	nodeFlags, baseFlags      []string // extra serve flags of --node-bin's and the baseline's nodes
	nodes, pairs, eventBytes  int
	levels                    []int
	duration, warmup          time.Duration
	idleCores                 float64
	rate                      float64 // writes/s of all writers together (0: as fast as answered)
	clients                   string  // clientsCluster or clientsNode
}

// How writers reach the servers (--clients).
const (
	// clientsCluster: our writers' clients are given every node, listed
	// from node i mod n for writer i (client.Open, as a deployment connects):
	// they send writes to the leader once an answer has named it, so no
	// follower forwards them.
	clientsCluster = "cluster"
	// clientsNode: writer i's client knows node i mod n only (client.Dial,
	// an agent host configured with one node), which forwards the writes it
	// receives as a follower to the leader.
	clientsNode = "node"
)

func main() {
	var cfg config
	var writers string
	flag.StringVar(&cfg.nodeBin, "node-bin", "", "the sessionstore node binary (go build -o sessionstore ./cmd/node)")
	flag.StringVar(&cfg.etcdBin, "etcd-bin", "", "the etcd v3.7.3 server binary")
	flag.StringVar(&cfg.baseBin, "baseline-node-bin", "", "compare --node-bin against this other node build (before/after a change) instead of etcd; ratios are node-bin/baseline")
	var nodeFlags, baseFlags string
	flag.StringVar(&nodeFlags, "node-flags", "", "extra serve flags of --node-bin's nodes, space-separated (e.g. \"--artifacts off\")")
	flag.StringVar(&baseFlags, "baseline-node-flags", "", "extra serve flags of the baseline's nodes (the same binary may be compared with itself under other flags)")
	flag.StringVar(&cfg.workDir, "work-dir", "", "where the data directories and server logs go (default: a new temporary directory, removed at the end)")
	flag.IntVar(&cfg.nodes, "nodes", 3, "servers per cluster (1 or 3)")
	flag.IntVar(&cfg.pairs, "pairs", 5, "interleaved sessionstore/etcd pairs per writer count")
	flag.StringVar(&writers, "writers", "16,256", "comma-separated writer counts")
	flag.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured time per run")
	flag.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up before each run (its writes count for CPU and disk)")
	flag.IntVar(&cfg.eventBytes, "event-bytes", 1024, "bytes per write (the event; the Put's value)")
	flag.Float64Var(&cfg.rate, "rate", 0, "pace the writers to this many writes/s in all (0: closed loop, each writer sends its next write when the last is answered); both systems then do the same work per second, which makes CPU per write steadier to compare")
	flag.StringVar(&cfg.clients, "clients", clientsCluster, "how our writers reach the nodes: \"cluster\" (writer i's client is given every node, node i mod n first, and sends writes to the leader it learns from the answers) or \"node\" (it knows node i mod n only, which forwards the writes it does not lead); etcd's writers talk to member i mod n either way (clientv3 has no leader routing)")
	flag.Float64Var(&cfg.idleCores, "idle-cores", 0.1, "after the load, the servers count as caught up when their applied indexes agree and all of them together use less CPU than this many cores over a second")
	flag.Parse()
	cfg.nodeFlags, cfg.baseFlags = strings.Fields(nodeFlags), strings.Fields(baseFlags)
	var err error
	if cfg.levels, err = parseWriters(writers); err == nil {
		err = cfg.validate()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg, os.Stdout, os.Stderr); err != nil {
		fmt.Fprintln(os.Stderr, "vsetcd:", err)
		os.Exit(1)
	}
}

func (c config) validate() error {
	switch {
	case c.nodeBin == "" || c.etcdBin == "" && c.baseBin == "":
		return fmt.Errorf("--node-bin and --etcd-bin (or --baseline-node-bin) are required (scripts/vs-etcd builds both)")
	case c.nodes != 1 && c.nodes != 3:
		return fmt.Errorf("--nodes %d: want 1 or 3", c.nodes)
	case c.clients != clientsCluster && c.clients != clientsNode:
		return fmt.Errorf("--clients %q: want %q or %q", c.clients, clientsCluster, clientsNode)
	case c.pairs <= 0 || c.eventBytes <= 0 || c.duration <= 0 || c.warmup < 0 || c.idleCores <= 0 || c.rate < 0:
		return fmt.Errorf("--pairs, --event-bytes, --duration and --idle-cores must be > 0, --warmup and --rate ≥ 0")
	}
	return nil
}

// parseWriters parses a comma-separated list of positive writer counts.
func parseWriters(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, fmt.Errorf("--writers %q: want a comma-separated list of positive counts, e.g. 16,256", s)
		}
		out = append(out, n)
	}
	return out, nil
}

// result is one measured run of one system.
type result struct {
	opsPerSec, p50, p99 float64 // p50, p99 in ms
	cpuPerWrite         float64 // µs of server CPU (all servers) per acknowledged write
	diskPerWrite        float64 // bytes written to storage per write, mean over servers
	dataBytes           float64 // data directory, mean over servers
	errors              int
	settled             bool // the servers caught up within settleTimeout
}

func run(ctx context.Context, cfg config, stdout, stderr io.Writer) error {
	work := cfg.workDir
	if work == "" {
		var err error
		if work, err = os.MkdirTemp("", "vs-etcd-"); err != nil {
			return err
		}
		defer os.RemoveAll(work)
	}
	pad := benchload.Padding(cfg.eventBytes)
	payload := func(seq int64) string { return benchload.Event(seq, time.Now().UnixMilli(), cfg.eventBytes, pad) }
	other := "etcd"
	if cfg.baseBin != "" {
		other = "baseline"
	}
	loop := "closed loop"
	if cfg.rate > 0 {
		loop = fmt.Sprintf("closed loop paced to %.0f writes/s in all", cfg.rate)
	}
	fmt.Fprintf(stdout, "vs-etcd: %d node(s) on loopback, %d-byte writes, %s, writers' clients of the %s, %v per run after %v warm-up, %d pairs, %s\n",
		cfg.nodes, cfg.eventBytes, loop, cfg.clients, cfg.duration, cfg.warmup, cfg.pairs, time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	if len(cfg.nodeFlags) > 0 || len(cfg.baseFlags) > 0 {
		fmt.Fprintf(stdout, "serve flags: sessionstore %q, baseline %q\n", cfg.nodeFlags, cfg.baseFlags)
	}
	fmt.Fprintln(stdout, "cpu: µs of all servers' CPU per write, from the start of the load until every server has applied everything and gone quiet;")
	fmt.Fprintln(stdout, "disk: bytes written to storage (/proc/PID/io write_bytes) per write, per server; data: data directory per server (du)")
	for _, writers := range cfg.levels {
		fmt.Fprintf(stdout, "\n%d writers\n%-4s  %-12s  %8s  %7s  %7s  %8s  %9s  %8s  %s\n",
			writers, "pair", "system", "writes/s", "p50 ms", "p99 ms", "cpu µs", "disk B", "data MB", "errors")
		var ratios [5][]float64
		for pair := 1; pair <= cfg.pairs; pair++ {
			// Alternate which system goes first, so drift on the shared machine
			// does not always favour the same one.
			order := []string{"sessionstore", other}
			if pair%2 == 0 {
				slices.Reverse(order)
			}
			res := map[string]result{}
			for _, name := range order {
				dir := filepath.Join(work, fmt.Sprintf("w%d-p%d-%s", writers, pair, name))
				fmt.Fprintf(stderr, "%d writers, pair %d: %s ...\n", writers, pair, name)
				r, err := measure(ctx, cfg, name, dir, writers, payload)
				if err != nil {
					return err
				}
				res[name] = r
			}
			for _, name := range []string{"sessionstore", other} {
				r := res[name]
				note := fmt.Sprint(r.errors)
				if !r.settled {
					note += " (servers still busy after the settle timeout: cpu and disk are lower bounds)"
				}
				fmt.Fprintf(stdout, "%-4d  %-12s  %8.0f  %7.2f  %7.2f  %8.0f  %9.0f  %8.1f  %s\n",
					pair, name, r.opsPerSec, r.p50, r.p99, r.cpuPerWrite, r.diskPerWrite, r.dataBytes/1e6, note)
			}
			o, e := res["sessionstore"], res[other]
			q := [5]float64{ratio(o.opsPerSec, e.opsPerSec), ratio(o.p50, e.p50), ratio(o.p99, e.p99),
				ratio(o.cpuPerWrite, e.cpuPerWrite), ratio(o.diskPerWrite, e.diskPerWrite)}
			for i, v := range q {
				ratios[i] = append(ratios[i], v)
			}
			fmt.Fprintf(stdout, "%-4d  %-12s  %8.2f  %7.2f  %7.2f  %8.2f  %9.2f  %8.2f\n",
				pair, "ours/"+other, q[0], q[1], q[2], q[3], q[4], ratio(o.dataBytes, e.dataBytes))
		}
		fmt.Fprintf(stdout, "%-4s  %-12s  %8s  %7s  %7s  %8s  %9s\n", "", "median ratio",
			minMedMax(ratios[0]), minMedMax(ratios[1]), minMedMax(ratios[2]), minMedMax(ratios[3]), minMedMax(ratios[4]))
	}
	return nil
}

func ratio(a, b float64) float64 {
	if b == 0 {
		return math.NaN()
	}
	return a / b
}

// minMedMax is "median (min–max)" of vs, two decimals; the median of an even
// count is the mean of the middle two.
func minMedMax(vs []float64) string {
	s := slices.Clone(vs)
	slices.Sort(s)
	n := len(s)
	if n == 0 {
		return "-"
	}
	med := (s[(n-1)/2] + s[n/2]) / 2
	return fmt.Sprintf("%.2f (%.2f–%.2f)", med, s[0], s[n-1])
}

// measure starts a fresh cluster of the named system in dir, runs the load
// and waits until the servers have caught up, then stops the cluster.
func measure(ctx context.Context, cfg config, name, dir string, writers int, payload func(int64) string) (result, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return result{}, err
	}
	var sys system
	var err error
	// The free ports picked for a cluster can be taken before its servers
	// bind them (another server's outgoing connection may get one): start
	// it again on new ports, in a fresh directory.
	for attempt := 1; ; attempt++ {
		switch name {
		case "etcd":
			sys, err = startEtcd(ctx, cfg.etcdBin, dir, cfg.nodes)
		case "baseline":
			sys, err = startOurs(ctx, cfg.baseBin, dir, cfg.nodes, cfg.clients, cfg.baseFlags)
		default:
			sys, err = startOurs(ctx, cfg.nodeBin, dir, cfg.nodes, cfg.clients, cfg.nodeFlags)
		}
		if err == nil || attempt == startAttempts || ctx.Err() != nil {
			break
		}
		fmt.Fprintf(os.Stderr, "vsetcd: %s did not start (%v); starting it again on other ports\n", name, err)
		if err := os.RemoveAll(dir); err != nil {
			return result{}, err
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return result{}, err
		}
	}
	if err != nil {
		return result{}, err
	}
	defer sys.stop()
	fns := make([]func(context.Context, int64) error, writers)
	for i := range fns {
		if fns[i], err = sys.writer(ctx, i, payload); err != nil {
			return result{}, fmt.Errorf("%s: writer %d: %w", name, i, err)
		}
	}
	before, err := sampleAll(sys.pids())
	if err != nil {
		return result{}, err
	}
	var interval time.Duration // between one writer's writes when paced
	if cfg.rate > 0 {
		interval = time.Duration(float64(writers) / cfg.rate * float64(time.Second))
	}
	lat, acked, errs, elapsed := load(ctx, fns, cfg.warmup, cfg.duration, interval)
	after, settled, err := settle(ctx, sys, cfg.idleCores)
	if err != nil {
		return result{}, fmt.Errorf("%s: %w", name, err)
	}
	r := result{errors: errs, settled: settled}
	slices.Sort(lat)
	r.opsPerSec = float64(len(lat)) / elapsed.Seconds()
	r.p50, r.p99 = ms(benchload.Percentile(lat, 0.50)), ms(benchload.Percentile(lat, 0.99))
	var ticks, written uint64
	for i := range before {
		ticks += after[i].cpuTicks - before[i].cpuTicks
		written += after[i].writeBytes - before[i].writeBytes
	}
	if acked > 0 {
		r.cpuPerWrite = float64(ticks) * 1e6 / procstat.ClockTicks / float64(acked)
		r.diskPerWrite = float64(written) / float64(len(before)) / float64(acked)
	}
	for _, d := range sys.dataDirs() {
		n, err := du.Allocated(d)
		if err != nil {
			return result{}, err
		}
		r.dataBytes += float64(n) / float64(len(sys.dataDirs()))
	}
	return r, ctx.Err()
}

func sampleAll(pids []int) ([]procSample, error) {
	out := make([]procSample, len(pids))
	for i, pid := range pids {
		var err error
		if out[i], err = sampleProc(pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// load runs one closed-loop goroutine per write function for warm-up +
// duration, each sending at most one write per interval when interval > 0. It returns the latencies of the writes started inside the
// measured window, the count of all acknowledged writes (warm-up included:
// the servers' CPU and disk are counted from the start of the load), the
// failed writes and the measured window's length (up to the last answer).
func load(ctx context.Context, fns []func(context.Context, int64) error, warmup, duration, interval time.Duration) ([]time.Duration, int, int, time.Duration) {
	type writerRun struct {
		lat           []time.Duration
		acked, failed int
		lastDone      time.Time
	}
	runs := make([]writerRun, len(fns))
	warmEnd := time.Now().Add(warmup)
	end := warmEnd.Add(duration)
	var wg sync.WaitGroup
	for i, fn := range fns {
		wg.Go(func() {
			r := &runs[i]
			// Paced writers start spread over one interval and keep their
			// own schedule; one that falls behind sends at once.
			next := time.Now().Add(interval * time.Duration(i) / time.Duration(len(fns)))
			for seq := int64(0); ctx.Err() == nil && time.Now().Before(end); {
				if interval > 0 {
					time.Sleep(time.Until(next))
					next = next.Add(interval)
				}
				t0 := time.Now()
				if err := fn(ctx, seq); err != nil {
					r.failed++
					time.Sleep(errorPause)
					continue
				}
				d := time.Since(t0)
				seq++
				r.acked++
				if !t0.Before(warmEnd) {
					r.lat = append(r.lat, d)
					r.lastDone = t0.Add(d)
				}
			}
		})
	}
	wg.Wait()
	var lat []time.Duration
	acked, failed, last := 0, 0, end
	for _, r := range runs {
		lat = append(lat, r.lat...)
		acked += r.acked
		failed += r.failed
		if r.lastDone.After(last) {
			last = r.lastDone
		}
	}
	return lat, acked, failed, last.Sub(warmEnd)
}

// settle waits until every server has applied the same index and all of them
// together used less than idleCores of CPU over the last settleWindow: the
// deferred work (artifact writer, periodic flushes, etcd's backend commit)
// has then finished. It returns the servers' samples taken at the start of
// that quiet window (so the idle second itself is not counted), or the last
// samples and false if the servers did not go quiet within settleTimeout.
func settle(ctx context.Context, sys system, idleCores float64) ([]procSample, bool, error) {
	deadline := time.Now().Add(settleTimeout)
	idleTicks := uint64(idleCores * settleWindow.Seconds() * procstat.ClockTicks)
	var last []procSample
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return nil, false, err
		}
		a, err := sys.applied(ctx)
		if err != nil {
			return nil, false, err
		}
		if slices.Min(a) != slices.Max(a) {
			time.Sleep(pollInterval)
			continue
		}
		t0, err := sampleAll(sys.pids())
		if err != nil {
			return nil, false, err
		}
		time.Sleep(settleWindow)
		if last, err = sampleAll(sys.pids()); err != nil {
			return nil, false, err
		}
		var used uint64
		for i := range t0 {
			used += last[i].cpuTicks - t0[i].cpuTicks
		}
		if used <= idleTicks {
			return t0, true, nil
		}
	}
	if last == nil {
		var err error
		if last, err = sampleAll(sys.pids()); err != nil {
			return nil, false, err
		}
	}
	return last, false, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
