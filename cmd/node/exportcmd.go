package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/archive"
	"github.com/sessionstore/sessionstore/internal/units"
)

// exportConfig is `sessionstore export` after flag parsing.
type exportConfig struct {
	addr    string
	dial    []grpc.DialOption // TLS and token (clientflags.go)
	out     string
	timeout time.Duration
	opts    archive.ExportOptions
}

// stringList is a repeatable string flag.
type stringList []string

func (s *stringList) String() string { return strings.Join(*s, ",") }
func (s *stringList) Set(v string) error {
	*s = append(*s, v)
	return nil
}

// exportCmd is `sessionstore export`.
func exportCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseExportFlags(args, stderr)
	if err != nil {
		return err
	}
	_, err = runExport(ctx, cfg, stdout, stderr)
	return err
}

func parseExportFlags(args []string, stderr io.Writer) (exportConfig, error) {
	var cfg exportConfig
	var sessions stringList
	var since string
	fs := flag.NewFlagSet("sessionstore export", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", defaultGRPCAddr, "gRPC address of a node of the cluster to export; a host without a port means port 7400")
	fs.StringVar(&cfg.out, "out", "", "output: a directory (absent or empty), FILE.tar or FILE.tar.zst (required)")
	fs.Var(&sessions, "session", "export only this session id (repeatable)")
	fs.StringVar(&cfg.opts.CwdPrefix, "cwd", "", "export only sessions whose cwd starts with this prefix")
	fs.StringVar(&since, "since", "", "export only sessions created at or after this time: RFC 3339 (2026-01-02T15:04:05Z), a date (2026-01-02, UTC) or a duration ago (72h)")
	fs.StringVar(&cfg.opts.Compression, "compression", archive.CompressionZstd, "session files: zstd (session.jsonl.zstd) or none (session.jsonl)")
	fs.IntVar(&cfg.opts.Parallel, "parallel", 4, "sessions read and encoded ahead of the one being written (memory: about this many sessions plus two)")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up after this long (0: no limit)")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore export --out DIR|FILE.tar|FILE.tar.zst [flags]

Exports the cluster's sessions as a reference JSONL root: the reference
harness's own layout (<projectKey(cwd)>|_no-cwd/<encodeSegment(id)>/session.jsonl.zstd,
or session.jsonl with --compression none), which the reference opens as is,
plus a manifest.json written last: the cluster id, the applied index at the
start, the filters, and per session its id, path, revision, event count,
SHA-256 of the decoded text and size. The output is a directory or the same
tree as a tar file, zstd-compressed as a whole when the name ends in .tar.zst.

The set of sessions is fixed at the start (sessions registered later are left
out); each session is read linearizably at one revision, recorded in the
manifest. Sessions are streamed: memory holds a few sessions, whatever the
size of the export (the listing is paged through as the export goes, and
the manifest's entries wait in a hidden temporary file beside the output
until manifest.json is written; it is removed however the export ends).
Leases and pending plan-mode selections are not exported (they are state
beside the logs, not the logs): imported sessions start cold.
A session that vanishes or cannot be read is reported and the export goes on;
the exit status is then 1.

Progress goes to stderr (a bar on a terminal, else a line every few seconds),
with a total (for the ETA) counted by a first, cheap pass over the listing;
the summary goes to stdout. Every flag can also be set as SESSIONSTORE_<FLAG>
(e.g. SESSIONSTORE_ADDR); flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return cfg, err
	}
	usage := func(format string, a ...any) (exportConfig, error) {
		fmt.Fprintf(stderr, "sessionstore export: "+format+"\n", a...)
		return cfg, errUsage
	}
	cfg.opts.Sessions = sessions
	switch {
	case cfg.out == "":
		return usage("--out is required (a directory, FILE.tar or FILE.tar.zst)")
	case cfg.opts.Compression != archive.CompressionZstd && cfg.opts.Compression != archive.CompressionNone:
		return usage("--compression must be zstd or none, not %q", cfg.opts.Compression)
	case cfg.opts.Parallel < 1:
		return usage("--parallel must be ≥ 1")
	case cfg.timeout < 0:
		return usage("--timeout must be ≥ 0")
	}
	var err error
	if cfg.dial, err = conn.dialOptions(); err != nil {
		return cfg, err
	}
	if since != "" {
		t, err := parseSince(since, time.Now())
		if err != nil {
			return usage("--since: %v", err)
		}
		cfg.opts.Since = t
	}
	return cfg, nil
}

// parseSince reads --since: RFC 3339, a date (UTC), or a duration before now.
func parseSince(s string, now time.Time) (time.Time, error) {
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	if t, err := time.Parse(time.DateOnly, s); err == nil {
		return t, nil
	}
	if d, err := time.ParseDuration(s); err == nil {
		if d < 0 {
			return time.Time{}, fmt.Errorf("duration %q must not be negative", s)
		}
		return now.Add(-d), nil
	}
	return time.Time{}, fmt.Errorf("%q is neither an RFC 3339 time, a date (YYYY-MM-DD) nor a duration (e.g. 72h)", s)
}

// runExport runs an export whose flags are parsed (tests set hooks in
// cfg.opts). It prints the summary on stdout and returns an error when the
// export failed or left sessions out.
func runExport(ctx context.Context, cfg exportConfig, stdout, stderr io.Writer) (*archive.ExportResult, error) {
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	c, err := client.Dial(ctx, cfg.addr, cfg.dial...)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	sink, err := archive.CreateSink(cfg.out)
	if err != nil {
		return nil, err
	}
	meter := newMeter(stderr, "exported")
	opts := cfg.opts
	if opts.TempDir == "" {
		opts.TempDir = filepath.Dir(sink.Where()) // beside the output, not in a /tmp that may be memory
	}
	started, exported := opts.Started, opts.Exported
	opts.Started = func(m *archive.Manifest, total int) {
		meter.start(total)
		meter.logf("exporting %d sessions of cluster %s (applied index %d at the start) to %s",
			total, m.ClusterID, m.AppliedIndexAtStart, sink.Where())
		if started != nil {
			started(m, total)
		}
	}
	opts.Exported = func(s archive.ManifestSession, err error) {
		if err != nil {
			meter.logf("session %q not exported: %v", s.ID, err)
			meter.add(1, 0, 0)
		} else {
			meter.add(1, s.Events, s.Bytes)
		}
		if exported != nil {
			exported(s, err)
		}
	}
	res, err := archive.Export(ctx, c, sink, opts)
	meter.finish()
	if err != nil {
		if archive.OutputKind(cfg.out) == archive.OutputDir {
			return nil, fmt.Errorf("%w (the directory %s holds the sessions written so far and no %s)", err, cfg.out, archive.ManifestName)
		}
		return nil, err
	}
	for _, id := range res.Missing {
		meter.logf("session %q not exported: not a session of the cluster at the start, or filtered out by --cwd/--since", id)
	}
	printExportSummary(stdout, res, sink.Where())
	if n := res.Problems(); n > 0 {
		return res, fmt.Errorf("%d selected sessions were not exported (see above)", n)
	}
	return res, nil
}

func printExportSummary(w io.Writer, res *archive.ExportResult, where string) {
	m := res.Manifest
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "output\t%s\n", where)
	fmt.Fprintf(tw, "cluster\t%s (applied index %d at the start)\n", m.ClusterID, m.AppliedIndexAtStart)
	fmt.Fprintf(tw, "exported\t%d sessions, %d events, %s of text, %s written (compression %s)\n",
		res.Sessions, res.Events, units.Bytes(res.TextBytes), units.Bytes(res.Bytes), m.Compression)
	fmt.Fprintf(tw, "failed\t%d\n", len(m.Failed))
	if len(res.Missing) > 0 {
		fmt.Fprintf(tw, "missing\t%d (requested with --session)\n", len(res.Missing))
	}
	fmt.Fprintf(tw, "time\t%s\n", res.Elapsed.Round(time.Millisecond))
	tw.Flush()
	for _, f := range m.Failed {
		fmt.Fprintf(w, "FAILED  %q: %s\n", f.ID, f.Error)
	}
	for _, id := range res.Missing {
		fmt.Fprintf(w, "MISSING %q\n", id)
	}
}

// meter shows progress on stderr: on a terminal, one line redrawn in place
// (sessions done of total, bytes, rate, ETA); otherwise a plain line every
// few seconds or every 1,000 sessions. Messages interrupt it cleanly.
type meter struct {
	mu     sync.Mutex
	out    liveLine
	verb   string
	total  int
	began  time.Time
	done   int
	events int64
	bytes  int64
}

func newMeter(w io.Writer, verb string) *meter {
	return &meter{out: newLiveLine(w), verb: verb, began: time.Now()}
}

func (m *meter) start(total int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.total = total
	m.began = time.Now()
	m.out.lastLine = m.began
}

func (m *meter) add(sessions int, events, bytes int64) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.done += sessions
	m.events += events
	m.bytes += bytes
	now := time.Now()
	// The last session redraws the bar; a log gets a line every 1,000.
	force := m.done == m.total
	if !m.out.tty {
		force = sessions > 0 && m.done%1000 == 0
	}
	m.out.show(now, force, func() string { return m.text(now) })
}

// logf prints a message line (above the bar on a terminal).
func (m *meter) logf(format string, args ...any) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.out.logf(format, args...)
	if m.out.tty && m.total > 0 {
		now := time.Now()
		m.out.show(now, true, func() string { return m.text(now) })
	}
}

func (m *meter) finish() {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.out.clear()
	if m.done > 0 || m.total > 0 {
		fmt.Fprintln(m.out.w, m.line(time.Now()))
	}
}

// text is what show draws: the bar first on a terminal.
func (m *meter) text(now time.Time) string {
	if m.out.tty {
		return m.bar() + " " + m.line(now)
	}
	return m.line(now)
}

func (m *meter) bar() string {
	const width = 24
	if m.total <= 0 {
		return ""
	}
	n := min(width, m.done*width/m.total)
	return "[" + strings.Repeat("#", n) + strings.Repeat(".", width-n) + "]"
}

func (m *meter) line(now time.Time) string {
	el := now.Sub(m.began)
	var b strings.Builder
	if m.total > 0 {
		fmt.Fprintf(&b, "%s %d/%d sessions", m.verb, m.done, m.total)
	} else {
		fmt.Fprintf(&b, "%s %d sessions", m.verb, m.done)
	}
	fmt.Fprintf(&b, ", %d events, %s", m.events, units.Bytes(m.bytes))
	if sec := el.Seconds(); sec > 0.05 {
		fmt.Fprintf(&b, ", %s/s", units.Bytes(int64(float64(m.bytes)/sec)))
	}
	if m.total > 0 && m.done > 0 && m.done < m.total {
		eta := time.Duration(float64(el) / float64(m.done) * float64(m.total-m.done))
		fmt.Fprintf(&b, ", ETA %s", eta.Round(time.Second))
	}
	fmt.Fprintf(&b, ", %s elapsed", el.Round(100*time.Millisecond))
	return b.String()
}
