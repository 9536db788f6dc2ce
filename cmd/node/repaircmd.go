package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"

	"github.com/sessionstore/sessionstore/cluster"
)

const repairHelp = `Usage: sessionstore repair --data-dir DIR

OFFLINE repair of a node that refuses to start because its Raft log lost
entries it had already applied or snapshotted ("the Raft log lost committed
entries": a damaged last record of raft/wal at an index at or below the state
database's applied index, or a log cut below it). The node must be stopped.

It copies the damaged segment aside (raft/wal/<segment>.damaged-<nanos>), cuts
the damaged tail, and rebuilds the log's end from what the node holds: a Raft
snapshot of state.db at its applied index and term (with the newest membership
configuration of the latest snapshot and the remaining log), after which the
log, entirely covered by it, is emptied. The node keeps its last index and
term, so it votes as before, and the leader sends it what follows. Nothing
acknowledged is lost. What it cannot rebuild is a membership change that was
only in the lost record: it prints the configuration the node keeps; compare it
with 'sessionstore status' against another node. A node whose log already covers its
state is left as it is.

Flags:
`

// repairCmd is `sessionstore repair`: cluster.Repair on a stopped node's data directory.
func repairCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore repair", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", cluster.DefaultConfig().DataDir, "data directory of the stopped node to repair")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), repairHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := refuseIfRunning(*dataDir); err != nil {
		return err
	}
	cfg := cluster.DefaultConfig()
	cfg.DataDir = *dataDir
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	res, err := cluster.Repair(cfg, logger)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "data directory  %s\n", *dataDir)
	fmt.Fprintf(stdout, "state           applied index %d (term %d); latest snapshot %d\n", res.Applied, res.AppliedTerm, res.SnapshotIndex)
	if tr := res.Truncation; tr != nil {
		fmt.Fprintf(stdout, "damaged tail    %s at offset %d: %d bytes from index %d (%s), kept as %s\n", tr.Segment, tr.Offset, tr.Bytes, tr.Index, tr.Reason, res.KeptAside)
	}
	if !res.Repaired {
		fmt.Fprintf(stdout, "nothing to repair: the Raft log (last index %d) covers the state\n", res.LogLast)
		return nil
	}
	if res.NewSnapshot {
		fmt.Fprintf(stdout, "snapshot        written at index %d, term %d\n", res.Applied, res.AppliedTerm)
	}
	fmt.Fprintf(stdout, "raft log        ended at %d; emptied (the snapshot covers it)\n", res.LogLast)
	fmt.Fprintf(stdout, "configuration   %s\n", cluster.FormatConfiguration(res.Configuration))
	fmt.Fprintln(stdout, "Start the node now with its usual flags.")
	return nil
}
