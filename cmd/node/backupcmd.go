package main

import (
	"context"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/rpc"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/internal/units"
	"github.com/sessionstore/sessionstore/storage"
)

// backupConfig is `sessionstore backup` after flag parsing.
type backupConfig struct {
	addr    string
	dial    []grpc.DialOption
	out     string
	timeout time.Duration
}

// backupResult is what a backup wrote.
type backupResult struct {
	Meta      sessionstore.BackupMeta
	Trailer   sessionstore.BackupTrailer
	FileBytes int64
	Elapsed   time.Duration
}

func backupCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	var cfg backupConfig
	fs := flag.NewFlagSet("sessionstore backup", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.StringVar(&cfg.addr, "addr", defaultGRPCAddr, "gRPC address of any node of the cluster (a follower forwards to the leader); a host without a port means port 7400")
	fs.StringVar(&cfg.out, "out", "", "backup file to write (required; must not exist)")
	fs.DurationVar(&cfg.timeout, "timeout", 0, "give up after this long (0: no limit)")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore backup --out FILE [flags]

Writes a consistent copy of the whole cluster's state (every session, event,
request-id result, lease and plan-mode state) to FILE. The leader serves it
from one read transaction of its state database after a linearizable read
barrier, so it holds every write acknowledged before the backup started;
writes go on meanwhile. Needs the admin permission.

The file is a JSON header line (cluster id, applied index, term, time, size),
the state snapshot stream (the bbolt file through zstd, as in a Raft
snapshot) and a JSON trailer line with the SHA-256 of the uncompressed
database. It is written beside FILE under a temporary name, verified
(decompressed and hashed) and renamed into place only when complete.
Restore it into a new cluster with 'sessionstore restore FILE --data-dir DIR'.

Progress goes to stderr, the summary to stdout. Every flag can also be set
as SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_ADDR); flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if cfg.out == "" {
		fmt.Fprintln(stderr, "sessionstore backup: --out is required")
		return errUsage
	}
	var err error
	if cfg.dial, err = conn.dialOptions(); err != nil {
		return err
	}
	res, err := runBackup(ctx, cfg, stderr)
	if err != nil {
		return err
	}
	printBackupSummary(stdout, cfg.out, res)
	return nil
}

// runBackup streams a backup into cfg.out.
func runBackup(ctx context.Context, cfg backupConfig, stderr io.Writer) (backupResult, error) {
	var res backupResult
	start := time.Now()
	if cfg.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, cfg.timeout)
		defer cancel()
	}
	if _, err := os.Lstat(cfg.out); err == nil {
		return res, fmt.Errorf("%s exists: remove it or choose another --out", cfg.out)
	}
	c, err := client.Dial(ctx, cfg.addr, cfg.dial...)
	if err != nil {
		return res, err
	}
	defer c.Close()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	st, err := pb.NewClusterClient(c.Conn()).Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		return res, err
	}
	first, err := st.Recv()
	if err != nil {
		return res, err
	}
	if first.GetMeta() == nil {
		return res, errors.New("backup stream does not start with its metadata")
	}
	res.Meta = rpc.BackupMetaFromPB(first.GetMeta())
	f, err := os.CreateTemp(filepath.Dir(cfg.out), "."+filepath.Base(cfg.out)+".*.partial")
	if err != nil {
		return res, err
	}
	tmp := f.Name()
	done := false
	defer func() {
		if !done {
			f.Close()
			os.Remove(tmp)
		}
	}()
	prog := newBackupProgress(stderr, res.Meta.DBBytes)
	prog.logf("backing up cluster %s (applied index %d, term %d, database %s) from node %s to %s",
		res.Meta.ClusterID, res.Meta.AppliedIndex, res.Meta.Term, units.Bytes(res.Meta.DBBytes), res.Meta.NodeID, cfg.out)
	if err := storage.WriteBackupHeader(f, res.Meta); err != nil {
		return res, err
	}
	var got int64
	for {
		m, err := st.Recv()
		if err != nil {
			prog.finish()
			if errors.Is(err, io.EOF) {
				return res, errors.New("backup stream ended without its trailer")
			}
			return res, err
		}
		if t := m.GetTrailer(); t != nil {
			res.Trailer = sessionstore.BackupTrailer{DBBytes: t.DbBytes, StreamBytes: t.StreamBytes, SHA256: t.DbSha256}
			break
		}
		d := m.GetData()
		if d == nil {
			return res, errors.New("unexpected message in the backup stream")
		}
		if _, err := f.Write(d); err != nil {
			return res, err
		}
		got += int64(len(d))
		prog.add(int64(len(d)))
	}
	prog.finish()
	if got != res.Trailer.StreamBytes {
		return res, fmt.Errorf("received %d bytes of stream, the trailer says %d", got, res.Trailer.StreamBytes)
	}
	if err := storage.WriteBackupTrailer(f, res.Trailer); err != nil {
		return res, err
	}
	if err := f.Sync(); err != nil {
		return res, err
	}
	if err := f.Close(); err != nil {
		return res, err
	}
	bf, err := storage.OpenBackup(tmp)
	if err != nil {
		return res, err
	}
	err = bf.Verify()
	bf.Close()
	if err != nil {
		return res, fmt.Errorf("verifying the written file: %w", err)
	}
	if st, err := os.Stat(tmp); err == nil {
		res.FileBytes = st.Size()
	}
	if err := os.Rename(tmp, cfg.out); err != nil {
		return res, err
	}
	done = true
	_ = storage.SyncDir(filepath.Dir(cfg.out))
	res.Elapsed = time.Since(start)
	return res, nil
}

func printBackupSummary(w io.Writer, out string, r backupResult) {
	tw := tabwriter.NewWriter(w, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "output\t%s\n", out)
	fmt.Fprintf(tw, "cluster\t%s (applied index %d, term %d, served by %s at %s)\n", r.Meta.ClusterID, r.Meta.AppliedIndex, r.Meta.Term,
		r.Meta.NodeID, r.Meta.Time.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "database\t%s (sha256 %s)\n", units.Bytes(r.Trailer.DBBytes), hex.EncodeToString(r.Trailer.SHA256))
	fmt.Fprintf(tw, "file\t%s\n", units.Bytes(r.FileBytes))
	fmt.Fprintf(tw, "time\t%s\n", r.Elapsed.Round(time.Millisecond))
	tw.Flush()
}

// backupProgress prints bytes received on stderr: one line redrawn on a
// terminal, otherwise a line every few seconds.
type backupProgress struct {
	mu    sync.Mutex
	out   liveLine
	db    int64
	n     int64
	began time.Time
}

func newBackupProgress(w io.Writer, db int64) *backupProgress {
	return &backupProgress{out: newLiveLine(w), db: db, began: time.Now()}
}

func (p *backupProgress) line(now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "received %s (compressed) of a %s database", units.Bytes(p.n), units.Bytes(p.db))
	if el := now.Sub(p.began); el.Seconds() > 0.05 {
		fmt.Fprintf(&b, ", %s/s, %s elapsed", units.Bytes(int64(float64(p.n)/el.Seconds())), el.Round(100*time.Millisecond))
	}
	return b.String()
}

func (p *backupProgress) add(n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n += n
	now := time.Now()
	p.out.show(now, false, func() string { return p.line(now) })
}

func (p *backupProgress) logf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.logf(format, args...)
}

func (p *backupProgress) finish() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.out.clear()
	fmt.Fprintln(p.out.w, p.line(time.Now()))
}

// restoreCmd is `sessionstore restore FILE --data-dir DIR`.
func restoreCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore restore", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", "", "data directory to seed (required; absent or empty)")
	nodeID := fs.String("node-id", "", "id the restored node will be served with (node ids are not stored in the data directory: this only completes the printed 'sessionstore serve' command)")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore restore FILE --data-dir DIR [--node-id ID]

Seeds a NEW cluster from a backup file, offline. DIR must be absent or empty.
The file's framing, size and SHA-256 are verified; the state database is
decoded beside its final name, fsynced and renamed into DIR/state.db.

What does not carry over to the new cluster is reset: the cluster id (the
new cluster's first leader mints a new one, so revisions differ from the old
cluster's), the applied Raft index and term (the new Raft log starts at 1),
every session's last-change index (set to 0, so no revision can repeat) and
the leases (a restored cluster starts with no live owner; epochs are kept, so
the next Prepare or Load repairs an open turn and fences the old owner).
Sessions, events, request-id results and plan-mode state are kept as they are.

Then start the node with 'sessionstore serve --data-dir DIR' (no --join): it has no
Raft state, so it bootstraps a one-node cluster from the restored state and
rebuilds every artifact. More nodes join it with empty data directories
(--join, e.g. with --bootstrap-expect unset) and receive everything by Raft snapshot.

Flags:
`)
		fs.PrintDefaults()
	}
	// FILE may come before or after the flags.
	var file string
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		file, args = args[0], args[1:]
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return err
		}
		return errUsage
	}
	if file == "" && fs.NArg() > 0 {
		file = fs.Arg(0)
		args = fs.Args()[1:]
		if err := fs.Parse(args); err != nil {
			return errUsage
		}
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "sessionstore restore: unexpected arguments: %v\n", fs.Args())
		return errUsage
	}
	if file == "" || *dataDir == "" {
		fmt.Fprintln(stderr, "sessionstore restore: give the backup FILE and --data-dir DIR")
		return errUsage
	}
	start := time.Now()
	res, err := cluster.RestoreBackup(file, *dataDir)
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(stdout, 0, 0, 3, ' ', 0)
	fmt.Fprintf(tw, "restored\t%s\n", res.Path)
	fmt.Fprintf(tw, "from\tcluster %s, applied index %d, term %d, taken %s\n", res.Meta.ClusterID, res.Meta.AppliedIndex, res.Meta.Term,
		res.Meta.Time.UTC().Format(time.RFC3339))
	fmt.Fprintf(tw, "database\t%s, checksum verified\n", units.Bytes(res.Meta.DBBytes))
	fmt.Fprintf(tw, "sessions\t%d (%d leases dropped)\n", res.Sessions, res.Leases)
	fmt.Fprintf(tw, "reset\tcluster id, applied index/term, last-change indexes, leases\n")
	fmt.Fprintf(tw, "time\t%s\n", time.Since(start).Round(time.Millisecond))
	tw.Flush()
	next := "sessionstore serve --data-dir " + *dataDir
	if *nodeID != "" {
		next += " --node-id " + *nodeID
	}
	fmt.Fprintf(stdout, "next: %s   (bootstraps a new cluster; other nodes join it with empty data directories)\n", next)
	return nil
}
