package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/archive"
	"github.com/sessionstore/sessionstore/internal/units"
)

// importConfig is `sessionstore import` after flag parsing.
type importConfig struct {
	addr    string
	dial    []grpc.DialOption // TLS and token (clientflags.go)
	source  string
	timeout time.Duration
	opts    archive.ImportOptions
}

// importCmd is `sessionstore import`.
func importCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg, err := parseImportFlags(args, stderr)
	if err != nil {
		return err
	}
	_, err = runImport(ctx, cfg, stdout, stderr)
	return err
}

func parseImportFlags(args []string, stderr io.Writer) (importConfig, error) {
	var cfg importConfig
	fs := flag.NewFlagSet("sessionstore import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", defaultGRPCAddr, "gRPC address of a node of the cluster to import into; a host without a port means port 7400")
	fs.StringVar(&cfg.opts.OnConflict, "on-conflict", archive.OnConflictSkip, "a session that exists with different content: skip (report it and go on) or fail (stop, exit status 1)")
	fs.BoolVar(&cfg.opts.DryRun, "dry-run", false, "read and validate every session, as a read of it would, and report what would be refused; write nothing (the node is not contacted)")
	fs.BoolVar(&cfg.opts.KeepUnreadable, "keep-unreadable", false, "also import sessions a read would refuse (unknown event types, other format versions, malformed messages), with the reference's write rules; they stay readable raw only (default: refuse them, status refused)")
	fs.IntVar(&cfg.opts.Parallel, "parallel", 4, "sessions imported at once")
	fs.IntVar(&cfg.opts.BatchEvents, "batch-events", archive.DefaultBatchEvents, "most events per Append (the node's --max-batch-events)")
	fs.IntVar(&cfg.opts.BatchBytes, "batch-bytes", archive.DefaultBatchBytes, "most event bytes per Append (the node's --max-batch-bytes)")
	fs.IntVar(&cfg.opts.MaxEventBytes, "max-event-bytes", archive.DefaultMaxEventBytes, "largest event accepted (the node's --max-event-bytes); a session with a larger one is invalid")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up after this long (0: no limit)")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore import [flags] SOURCE

Imports sessions through the API. SOURCE is a reference JSONL root (the
reference harness's directory, either compression, packed chunk rows expanded,
torn tails dropped as the reference drops them) or an archive written by
'sessionstore export' (FILE.tar or FILE.tar.zst, recognised by content; its manifest is
checked against every session).

Each session is validated completely (header and every event) before anything
is written for it; one that cannot be read or is invalid is reported and
nothing is written for it. So is one that this store's reads would refuse
(an unknown event type, another format version, a malformed message): status
refused, unless --keep-unreadable stores it with the reference's write rules
(it then reads raw only). --dry-run reports the same verdicts. A new session is created and its events appended
verbatim in batches. A session already in the store must hold the same header
and a prefix of the same events: the missing events are appended (an
interrupted import is completed by running it again; nothing is duplicated).
Otherwise (other header, other events, a longer log, or a change by someone
else during the import) it is a conflict: left untouched and reported; with
--on-conflict fail the import stops. Imported sessions start cold (no lease,
nothing pending): exports do not carry leases or plan-mode selections.

Progress goes to stderr; a summary table goes to stdout. The exit status is 1
when a session was unreadable, invalid, refused or failed, or a conflict stopped the
import (--on-conflict fail); skipped conflicts alone leave it 0. Every flag can
also be set as SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR); flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	pos, err := parseWithPositional(fs, args)
	if err != nil {
		return cfg, err
	}
	usage := func(format string, a ...any) (importConfig, error) {
		fmt.Fprintf(stderr, "sessionstore import: "+format+"\n", a...)
		return cfg, errUsage
	}
	switch {
	case len(pos) != 1:
		return usage("want exactly one SOURCE (a reference root directory, FILE.tar or FILE.tar.zst), got %d", len(pos))
	case cfg.opts.OnConflict != archive.OnConflictSkip && cfg.opts.OnConflict != archive.OnConflictFail:
		return usage("--on-conflict must be skip or fail, not %q", cfg.opts.OnConflict)
	case cfg.opts.Parallel < 1:
		return usage("--parallel must be ≥ 1")
	case cfg.opts.BatchEvents < 1, cfg.opts.BatchBytes < 1, cfg.opts.MaxEventBytes < 1:
		return usage("--batch-events, --batch-bytes and --max-event-bytes must be ≥ 1")
	case cfg.timeout < 0:
		return usage("--timeout must be ≥ 0")
	}
	cfg.source = pos[0]
	if cfg.dial, err = conn.dialOptions(); err != nil {
		return cfg, err
	}
	return cfg, nil
}

// parseWithPositional parses flags placed before, between or after the
// positional arguments, then applies the environment (parseFlags).
func parseWithPositional(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		if fs.NArg() == 0 {
			break
		}
		pos = append(pos, fs.Arg(0))
		args = fs.Args()[1:]
	}
	return pos, parseFlags(fs, nil)
}

// runImport runs an import whose flags are parsed (tests set hooks in
// cfg.opts). It prints the summary on stdout.
func runImport(ctx context.Context, cfg importConfig, stdout, stderr io.Writer) (*archive.ImportSummary, error) {
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	src, err := archive.OpenSource(cfg.source)
	if err != nil {
		return nil, err
	}
	meter := newMeter(stderr, "imported")
	var c *client.Client
	target := "(dry run: nothing is written)"
	if !cfg.opts.DryRun {
		if c, err = client.Dial(ctx, cfg.addr, cfg.dial...); err != nil {
			return nil, err
		}
		defer c.Close()
		st, err := c.Status(ctx)
		if err != nil {
			return nil, fmt.Errorf("status of %s: %w", cfg.addr, err)
		}
		target = fmt.Sprintf("into cluster %s via %s", st.GetClusterId(), cfg.addr)
	}
	what := src.Kind()
	if src.Manifest() != nil {
		what += fmt.Sprintf(", exported from cluster %s at applied index %d", src.Manifest().ClusterID, src.Manifest().AppliedIndexAtStart)
	}
	meter.start(src.Total())
	meter.logf("importing %s (%s, %d sessions) %s", src.Path(), what, src.Total(), target)

	opts := cfg.opts
	done, appended := opts.Done, opts.Appended
	opts.Done = func(r archive.SessionResult) {
		if !r.Status.OK() {
			meter.logf("%s %q (%s): %s", r.Status, r.ID, r.Where, r.Reason)
		}
		meter.add(1, 0, 0)
		if done != nil {
			done(r)
		}
	}
	opts.Appended = func(id string, next int64, n int, b int64) {
		meter.add(0, int64(n), b)
		if appended != nil {
			appended(id, next, n, b)
		}
	}
	var st archive.Store
	if c != nil {
		st = c
	}
	sum, err := archive.Import(ctx, st, src, opts)
	meter.finish()
	if sum != nil {
		printImportSummary(stdout, sum, target)
	}
	if err != nil {
		if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
			return sum, fmt.Errorf("interrupted: %w (run the same import again to complete it)", err)
		}
		return sum, err
	}
	if n := sum.Failures(); n > 0 {
		return sum, fmt.Errorf("%d sessions were not imported (unreadable, invalid, refused or failed; see above)", n)
	}
	return sum, nil
}

func printImportSummary(w io.Writer, s *archive.ImportSummary, target string) {
	fmt.Fprintf(w, "import of %s (%s) %s\n\n", s.Source, s.SourceKind, target)
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintln(tw, "STATUS\tSESSIONS\tEVENTS")
	total, events := 0, 0
	for _, st := range archive.Statuses {
		n := s.Counts[st]
		if n == 0 && (st == archive.StatusValid || st == archive.StatusEmpty) {
			continue
		}
		fmt.Fprintf(tw, "%s\t%d\t%d\n", st, n, s.Events[st])
		total += n
		events += s.Events[st]
	}
	fmt.Fprintf(tw, "total\t%d\t%d\n", total, events)
	tw.Flush()
	if total == 0 {
		fmt.Fprintln(w, "\nno sessions found: a reference root holds <project>/<session>/session.jsonl or session.jsonl.zstd")
	}
	fmt.Fprintf(w, "\nappended %d events (%s) in %s\n", s.Appended, units.Bytes(s.Bytes), s.Elapsed.Round(time.Millisecond))
	if s.Torn > 0 {
		fmt.Fprintf(w, "%d sessions had a torn tail, dropped as the reference drops it:\n", s.Torn)
		for _, p := range s.TornSessions {
			fmt.Fprintf(w, "  %s\n", p)
		}
	}
	if s.StoppedEarly {
		fmt.Fprintln(w, "stopped at the first conflict (--on-conflict fail): sessions after it were not looked at")
	}
	if len(s.Problems) > 0 {
		fmt.Fprintln(w, "\nnot imported:")
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  %-10s %q  %s\n    %s\n", p.Status, p.ID, p.Where, p.Reason)
		}
	}
}
