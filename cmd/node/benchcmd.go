package main

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"maps"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/grpc"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/benchload"
)

const (
	benchCallTimeout  = 30 * time.Second // per rpc, retries included
	benchKeepAliveDur = 2 * time.Second
	benchErrorPause   = 50 * time.Millisecond // after a failed call, so a failing node is not hammered
)

type benchConfig struct {
	addr, writers, fsyncDir, prefix string
	duration, warmup, fsyncDur      time.Duration
	eventBytes                      int
	keepalive, json, keep           bool
	levels                          []int
	addrs                           []string          // parsed --addr; writer i uses addrs[i%len(addrs)]
	client                          string            // --client: grpc or http
	dial                            []grpc.DialOption // TLS and token (clientflags.go)

	// --replay mode (benchreplay.go)
	replay, agents, serverPIDs string
	agentLevels, pids          []int
}

// benchStats is one measured loop: a count, a rate and latency percentiles.
type benchStats struct {
	Writers   int            `json:"writers,omitempty"`
	Ops       int            `json:"ops"`
	OpsPerSec float64        `json:"ops_per_sec"`
	P50       float64        `json:"p50_ms"`
	P99       float64        `json:"p99_ms"`
	P999      float64        `json:"p999_ms"`
	Max       float64        `json:"max_ms"`
	Errors    int            `json:"errors"`
	Reasons   map[string]int `json:"error_reasons,omitempty"`
}

func benchMain(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg benchConfig
	fs := flag.NewFlagSet("sessionstore bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", defaultGRPCAddr, "gRPC address of the node to measure, or a comma-separated list of nodes (writer i uses address i mod n); a host without a port means port 7400; with --client http the nodes' HTTP addresses, host:port (default 127.0.0.1:7480)")
	fs.StringVar(&cfg.client, "client", "grpc", "how the writers call the node: grpc (the Go client on the gRPC port) or http (the Connect protocol with JSON on the HTTP port, as a browser or Node.js client would; not with --replay)")
	fs.StringVar(&cfg.writers, "writers", "1,16,64", "comma-separated writer counts, one level each; every writer owns one session")
	fs.DurationVar(&cfg.duration, "duration", 10*time.Second, "measured time per level")
	fs.DurationVar(&cfg.warmup, "warmup", time.Second, "unmeasured warm-up before each level")
	fs.IntVar(&cfg.eventBytes, "event-bytes", 1024, "size of the one JSON event each Append carries")
	fs.StringVar(&cfg.fsyncDir, "fsync-dir", ".", "directory on the disk whose fsync rate to probe (use the node's data disk)")
	fs.DurationVar(&cfg.fsyncDur, "fsync-duration", 2*time.Second, "length of the fsync probe (0 skips it)")
	fs.BoolVar(&cfg.keepalive, "keepalive", true, "also measure KeepAlive (one Raft commit each), 1 caller for 2s")
	fs.BoolVar(&cfg.json, "json", false, "print one JSON object instead of the table")
	fs.StringVar(&cfg.prefix, "session-prefix", "", "prefix of the benchmark's session ids (default bench-<random>)")
	fs.BoolVar(&cfg.keep, "keep", false, "keep the benchmark's sessions in the store (by default they are deleted at the end)")
	fs.StringVar(&cfg.replay, "replay", "", "replay the recorded session logs (*.jsonl) in this directory, or this one file, instead of one-event Appends (e.g. testdata/recorded)")
	fs.StringVar(&cfg.agents, "agents", "16,64,256", "with --replay: comma-separated agent counts, one level each")
	fs.StringVar(&cfg.serverPIDs, "server-pids", "", "with --replay: comma-separated PIDs of the server processes (this machine) whose CPU per event to report from /proc")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore bench [flags]

Measures a running node, closed loop, with its shipped durability: each writer
appends one event per Append to its own session and waits for the answer.
First a serial 1 KiB append+fsync probe of --fsync-dir (before any load), then
one level per --writers count, then KeepAlive. With several --addr addresses
(e.g. all nodes of a cluster) writer i talks to address i mod n, as clients
spread over the nodes would (a follower forwards to the leader); the set-up
session and KeepAlive use the first address. Every flag can also be set as
SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR); flags win.

With --replay DIR it measures recorded traffic instead: per --agents count,
that many closed-loop agents replay the reference JSONL logs in DIR (agent i
starts at log i mod n and goes round robin, a fresh session id per replay),
sending one Append per turn/step boundary as a write-behind buffer would,
taking the lease at the first balanced point and carrying its epoch. It
reports events/s, Appends/s, events per Append, Append latency and, with
--server-pids, the servers' CPU per event; no fsync probe or KeepAlive.

At the end (also after an error or an interrupt) the sessions the benchmark
created are deleted, unless --keep.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	addrSet := false
	fs.Visit(func(f *flag.Flag) { addrSet = addrSet || f.Name == "addr" })
	if _, env := os.LookupEnv(envName("addr")); cfg.client == "http" && !addrSet && !env {
		cfg.addr = defaultHTTPAddr
	}
	var err error
	if cfg.addrs, err = parseAddrs(cfg.addr); err == nil {
		cfg.levels, err = parseWriters(cfg.writers)
	}
	if err == nil && cfg.replay != "" {
		if cfg.agentLevels, err = parseCounts("--agents", cfg.agents, "16,64,256"); err == nil {
			cfg.pids, err = parsePIDs(cfg.serverPIDs)
		}
	}
	if err == nil {
		switch {
		case cfg.duration <= 0:
			err = benchUsage("--duration must be > 0")
		case cfg.warmup < 0, cfg.fsyncDur < 0:
			err = benchUsage("--warmup and --fsync-duration must be ≥ 0")
		case cfg.eventBytes <= 0:
			err = benchUsage("--event-bytes must be > 0")
		case cfg.client != "grpc" && cfg.client != "http":
			err = benchUsage("--client %q: want grpc or http", cfg.client)
		case cfg.client == "http" && cfg.replay != "":
			err = benchUsage("--replay runs with --client grpc only")
		}
	}
	if err != nil {
		fmt.Fprintf(stderr, "sessionstore bench: %v\n", err)
		return errUsage
	}
	if cfg.dial, err = conn.dialOptions(); err != nil {
		return err
	}
	if cfg.prefix == "" {
		var b [4]byte
		_, _ = crand.Read(b[:])
		cfg.prefix = "bench-" + hex.EncodeToString(b[:])
	}
	cfg.addr = strings.Join(cfg.addrs, ",")
	b := &bencher{cfg: cfg, pad: benchload.Padding(cfg.eventBytes)}
	defer func() {
		for _, c := range b.clients {
			c.Close()
		}
		for _, c := range b.http {
			c.Close()
		}
	}()
	for _, a := range cfg.addrs {
		if cfg.client == "http" {
			tlsConf, err := conn.httpTLS()
			if err != nil {
				return err
			}
			c := newConnectClient(a, tlsConf, conn.token, slices.Max(cfg.levels)+1)
			b.http = append(b.http, c)
			b.api = append(b.api, c)
			continue
		}
		c, err := client.Dial(ctx, a, cfg.dial...)
		if err != nil {
			return err
		}
		b.clients = append(b.clients, c)
		b.api = append(b.api, c)
	}
	if len(b.clients) > 0 {
		b.c = b.clients[0]
	}
	b.a = b.api[0]
	if !cfg.keep {
		report := stdout
		if cfg.json {
			report = stderr // stdout holds one JSON object
		}
		defer b.cleanup(ctx, report, stderr)
	}
	if cfg.replay != "" {
		return b.replayMain(ctx, stdout, stderr)
	}

	// Setup session: checks that the node answers before anything is measured,
	// and is the session KeepAlive later renews (Prepare needs a stored event).
	setupID := cfg.prefix + "-keepalive"
	if err := b.create(ctx, b.a, setupID); err != nil {
		return fmt.Errorf("create session on %s: %w", cfg.addrs[0], err)
	}
	if _, err := b.append(ctx, b.a, setupID, 0); err != nil {
		return fmt.Errorf("append to %s on %s: %w", setupID, cfg.addrs[0], err)
	}

	out := struct {
		Addr       string       `json:"addr"`
		Client     string       `json:"client"`
		FsyncDir   string       `json:"fsync_dir"`
		EventBytes int          `json:"event_bytes"`
		Duration   string       `json:"duration_per_level"`
		Warmup     string       `json:"warmup"`
		Fsync      *benchStats  `json:"fsync_probe,omitempty"`
		Levels     []benchStats `json:"levels"`
		KeepAlive  *benchStats  `json:"keepalive,omitempty"`
	}{Addr: cfg.addr, Client: cfg.client, FsyncDir: cfg.fsyncDir, EventBytes: cfg.eventBytes, Duration: cfg.duration.String(), Warmup: cfg.warmup.String()}
	if cfg.fsyncDur > 0 {
		fmt.Fprintf(stderr, "fsync probe in %s: running %v (before the append levels) ...\n", cfg.fsyncDir, cfg.fsyncDur)
		st, err := fsyncProbe(ctx, cfg.fsyncDir, cfg.fsyncDur)
		if err != nil {
			return err
		}
		out.Fsync = &st
	}
	for _, n := range cfg.levels {
		fmt.Fprintf(stderr, "level %d writers: running %v (+%v warm-up) ...\n", n, cfg.duration, cfg.warmup)
		out.Levels = append(out.Levels, b.level(ctx, n))
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if cfg.keepalive {
		fmt.Fprintf(stderr, "keepalive (1 caller): running %v ...\n", benchKeepAliveDur)
		st := b.keepAlive(ctx, setupID)
		out.KeepAlive = &st
		if err := ctx.Err(); err != nil {
			return err
		}
	}
	if cfg.json {
		enc := json.NewEncoder(stdout)
		return enc.Encode(out)
	}
	spread := ""
	if n := len(cfg.addrs); n > 1 {
		spread = fmt.Sprintf(" (writer i uses address i mod %d; set-up and KeepAlive use %s)", n, cfg.addrs[0])
	}
	fmt.Fprintf(stdout, "sessionstore bench: %s%s over %s, one %d-byte event per Append, closed loop, %v per level after %v warm-up\n",
		cfg.addr, spread, benchClientText[cfg.client], cfg.eventBytes, cfg.duration, cfg.warmup)
	if f := out.Fsync; f != nil {
		fmt.Fprintf(stdout, "fsync probe (1 KiB append + fsync, serial, %s, run before the append levels): %.0f ops/s, p50 %.2f ms, p99 %.2f ms\n",
			cfg.fsyncDir, f.OpsPerSec, f.P50, f.P99)
	}
	fmt.Fprintf(stdout, "%-7s  %9s  %7s  %7s  %8s  %7s  %s\n", "writers", "events/s", "p50 ms", "p99 ms", "p99.9 ms", "max ms", "errors")
	for _, l := range out.Levels {
		fmt.Fprintf(stdout, "%-7d  %9.0f  %7.2f  %7.2f  %8.2f  %7.2f  %s\n", l.Writers, l.OpsPerSec, l.P50, l.P99, l.P999, l.Max, errorText(l))
	}
	if k := out.KeepAlive; k != nil {
		fmt.Fprintf(stdout, "keepalive (1 caller): %.0f ops/s, p50 %.2f ms, p99 %.2f ms, errors %s\n", k.OpsPerSec, k.P50, k.P99, errorText(*k))
	}
	return nil
}

// benchClientText names each --client in the report.
var benchClientText = map[string]string{"grpc": "gRPC", "http": "HTTP/JSON (Connect)"}

type bencher struct {
	cfg     benchConfig
	clients []*client.Client // gRPC: one per cfg.addrs entry (--replay uses them)
	c       *client.Client   // clients[0]
	http    []*connectClient // --client http: one per cfg.addrs entry
	api     []benchAPI       // the clients of --client, one per cfg.addrs entry
	a       benchAPI         // api[0]: set-up session, KeepAlive, clean-up
	pad     string

	mu      sync.Mutex
	created []string // every id a Create was sent for, for cleanup
}

// track records id before its Create is sent: a Create whose outcome is
// unknown may have stored the session.
func (b *bencher) track(id string) {
	b.mu.Lock()
	b.created = append(b.created, id)
	b.mu.Unlock()
}

const (
	benchCleanupParallel = 8
	// benchCleanupTimeout bounds the cleanup after an interrupt, when the
	// run's context is done (a second Ctrl-C does not stop the process).
	benchCleanupTimeout = 10 * time.Second
)

// cleanup deletes the sessions the benchmark created (ids whose Create
// failed may not exist: NOT_FOUND is not a failure) and says so on report;
// failures go to stderr.
func (b *bencher) cleanup(ctx context.Context, report, stderr io.Writer) {
	b.mu.Lock()
	ids := slices.Clone(b.created)
	b.mu.Unlock()
	if len(ids) == 0 {
		return
	}
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), benchCleanupTimeout)
		defer cancel()
	}
	var (
		mu       sync.Mutex
		deleted  int
		failed   []string
		firstErr error
		wg       sync.WaitGroup
	)
	next := make(chan string)
	for range min(benchCleanupParallel, len(ids)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for id := range next {
				cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
				_, err := b.a.Delete(cctx, &sessionpb.DeleteRequest{SessionId: id})
				cancel()
				mu.Lock()
				switch {
				case err == nil:
					deleted++
				case !errors.Is(err, sessionstore.ErrNotFound):
					failed = append(failed, id)
					if firstErr == nil {
						firstErr = err
					}
				}
				mu.Unlock()
			}
		}()
	}
	for _, id := range ids {
		next <- id
	}
	close(next)
	wg.Wait()
	fmt.Fprintf(report, "deleted %d bench sessions (--keep keeps them)\n", deleted)
	if len(failed) > 0 {
		fmt.Fprintf(stderr, "sessionstore bench: %d bench sessions (ids starting with %s-) could not be deleted, e.g. %s: %v; delete them with 'sessionstore sessions rm'\n",
			len(failed), b.cfg.prefix, failed[0], firstErr)
	}
}

// writerClient is writer i's client: address i mod n of --addr.
func (b *bencher) writerClient(i int) *client.Client { return b.clients[i%len(b.clients)] }

func (b *bencher) create(ctx context.Context, c benchAPI, id string) error {
	b.track(id)
	ctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	defer cancel()
	cwd := "/bench"
	_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{
		Version: 0, Id: id, CreatedAt: time.Now().UnixMilli(), Cwd: &cwd}})
	return err
}

// append sends the event with seq and returns the call's latency (event
// construction excluded). Retries are the client library's own.
func (b *bencher) append(ctx context.Context, c benchAPI, id string, seq int64) (time.Duration, error) {
	ev := benchload.Event(seq, time.Now().UnixMilli(), b.cfg.eventBytes, b.pad)
	ctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	defer cancel()
	t0 := time.Now()
	_, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{ev}})
	return time.Since(t0), err
}

// writerRun is one writer's record of a level.
type writerRun struct {
	lat      []time.Duration
	errs     map[string]int
	lastDone time.Time
}

// level runs n closed-loop writers for warm-up + duration and summarises the
// appends that started inside the measured window. Errors are counted over
// the whole level, warm-up included; after one, the writer continues on a
// fresh session (it never re-sends on its own: the outcome may be unknown).
// Writer i talks to b.api[i mod len(b.api)].
func (b *bencher) level(ctx context.Context, n int) benchStats {
	runs := make([]writerRun, n)
	var ready, done sync.WaitGroup
	start := make(chan struct{})
	var warmEnd, end time.Time // set before start is closed
	// Preallocated for 20k events/s in all; append grows it beyond.
	perWriter := min(int(b.cfg.duration.Seconds()*20000)/n+1024, 1<<20)
	for i := range runs {
		ready.Add(1)
		done.Add(1)
		c := b.api[i%len(b.api)]
		go func(r *writerRun) {
			defer done.Done()
			r.lat, r.errs = make([]time.Duration, 0, perWriter), map[string]int{}
			gen, seq, created := 0, int64(0), false
			id := ""
			create := func() { // on failure the next try uses a fresh id: the old one may exist
				gen, seq = gen+1, 0
				id = fmt.Sprintf("%s-l%d-w%d-%d", b.cfg.prefix, n, i, gen)
				err := b.create(ctx, c, id)
				if created = err == nil; !created && ctx.Err() == nil {
					r.errs["Create "+errReason(err)]++
					time.Sleep(benchErrorPause)
				}
			}
			create()
			ready.Done()
			<-start
			for ctx.Err() == nil && time.Now().Before(end) {
				if !created {
					create()
					continue
				}
				t0 := time.Now()
				d, err := b.append(ctx, c, id, seq)
				if err != nil {
					if ctx.Err() == nil {
						r.errs[errReason(err)]++
						time.Sleep(benchErrorPause)
					}
					created = false // continue on a fresh session, never re-send ourselves
					continue
				}
				seq++
				if !t0.Before(warmEnd) {
					r.lat = append(r.lat, d)
					r.lastDone = t0.Add(d)
				}
			}
		}(&runs[i])
	}
	ready.Wait()
	warmEnd = time.Now().Add(b.cfg.warmup)
	end = warmEnd.Add(b.cfg.duration)
	close(start)
	done.Wait()

	total, last := 0, end
	for _, r := range runs {
		total += len(r.lat)
		if r.lastDone.After(last) {
			last = r.lastDone
		}
	}
	all := make([]time.Duration, 0, total)
	errs := map[string]int{}
	for _, r := range runs {
		all = append(all, r.lat...)
		for k, v := range r.errs {
			errs[k] += v
		}
	}
	st := summarize(all, last.Sub(warmEnd), errs)
	st.Writers = n
	return st
}

// keepAlive prepares id and renews its lease in a closed loop.
func (b *bencher) keepAlive(ctx context.Context, id string) benchStats {
	errs := map[string]int{}
	pctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	_, lease, err := b.a.Prepare(pctx, &sessionpb.PrepareRequest{SessionId: id, Owner: "bench", TtlMs: 30000})
	cancel()
	if err != nil {
		errs["Prepare "+errReason(err)]++
		return summarize(nil, 0, errs)
	}
	var lat []time.Duration
	t0 := time.Now()
	end := t0.Add(benchKeepAliveDur)
	for ctx.Err() == nil && time.Now().Before(end) {
		cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
		s := time.Now()
		l, err := b.a.KeepAlive(cctx, &sessionpb.KeepAliveRequest{Lease: lease})
		d := time.Since(s)
		cancel()
		if err != nil {
			errs[errReason(err)]++
			time.Sleep(benchErrorPause)
			continue
		}
		lat, lease = append(lat, d), l
	}
	st := summarize(lat, time.Since(t0), errs)
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), benchCallTimeout)
	defer cancel()
	_ = b.a.Release(rctx, &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: lease.GetEpoch()})
	return st
}

// fsyncProbe appends 1 KiB to a temporary file in dir and fsyncs, serially,
// for d: the disk's bound on one durable write at a time.
func fsyncProbe(ctx context.Context, dir string, d time.Duration) (benchStats, error) {
	f, err := os.CreateTemp(dir, ".node-bench-fsync-*")
	if err != nil {
		return benchStats{}, fmt.Errorf("fsync probe: %w", err)
	}
	defer os.Remove(f.Name())
	defer f.Close()
	buf := make([]byte, 1024)
	for i := range buf {
		buf[i] = 'a' + byte(i%26)
	}
	lat := make([]time.Duration, 0, int(d.Seconds()*10000)+1024)
	t0 := time.Now()
	for end := t0.Add(d); ctx.Err() == nil && time.Now().Before(end); {
		s := time.Now()
		if _, err := f.Write(buf); err != nil {
			return benchStats{}, fmt.Errorf("fsync probe: %w", err)
		}
		if err := f.Sync(); err != nil {
			return benchStats{}, fmt.Errorf("fsync probe: %w", err)
		}
		lat = append(lat, time.Since(s))
	}
	return summarize(lat, time.Since(t0), nil), nil
}

// summarize sorts lat and computes the rate over elapsed and the percentiles.
func summarize(lat []time.Duration, elapsed time.Duration, errs map[string]int) benchStats {
	slices.Sort(lat)
	st := benchStats{Ops: len(lat), Reasons: errs}
	if elapsed > 0 {
		st.OpsPerSec = float64(len(lat)) / elapsed.Seconds()
	}
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	st.P50, st.P99 = ms(benchload.Percentile(lat, 0.50)), ms(benchload.Percentile(lat, 0.99))
	st.P999, st.Max = ms(benchload.Percentile(lat, 0.999)), ms(benchload.Percentile(lat, 1))
	for _, v := range errs {
		st.Errors += v
	}
	return st
}

func errorText(s benchStats) string {
	if s.Errors == 0 {
		return "0"
	}
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(s.Reasons)) {
		parts = append(parts, fmt.Sprintf("%s %d", k, s.Reasons[k]))
	}
	return fmt.Sprintf("%d (%s)", s.Errors, strings.Join(parts, ", "))
}

// errReason classifies an error: the store's reason, else the gRPC or
// Connect code.
func errReason(err error) string {
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return string(se.Reason)
	}
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code().String()
	}
	if st, ok := status.FromError(err); ok {
		return st.Code().String()
	}
	return "other"
}

// benchUsageError is a bad flag value: its message for the user, errUsage for
// errors.Is.
type benchUsageError string

func (e benchUsageError) Error() string { return string(e) }
func (e benchUsageError) Unwrap() error { return errUsage }

func benchUsage(format string, args ...any) error {
	return benchUsageError(fmt.Sprintf(format, args...))
}

// parseAddrs parses --addr: one gRPC address or a comma-separated list of
// distinct ones, blanks around each trimmed.
func parseAddrs(s string) ([]string, error) {
	var out []string
	for _, f := range strings.Split(s, ",") {
		a := strings.TrimSpace(f)
		if a == "" {
			return nil, benchUsage("--addr %q: want an address or a comma-separated list of addresses, e.g. 127.0.0.1:7400,127.0.0.1:7410", s)
		}
		if slices.Contains(out, a) {
			return nil, benchUsage("--addr %q: %s is listed twice", s, a)
		}
		out = append(out, a)
	}
	return out, nil
}

// parseWriters parses a comma-separated list of positive writer counts.
func parseWriters(s string) ([]int, error) { return parseCounts("--writers", s, "1,16,64") }

// parseCounts parses flag's comma-separated list of positive counts.
func parseCounts(flag, s, example string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n <= 0 {
			return nil, benchUsage("%s %q: want a comma-separated list of positive counts, e.g. %s", flag, s, example)
		}
		out = append(out, n)
	}
	return out, nil
}
