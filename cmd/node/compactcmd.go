package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/internal/units"
	"github.com/sessionstore/sessionstore/storage"
)

const compactHelp = `Usage: sessionstore compact --data-dir DIR [--raft-store=true]

OFFLINE compaction of a stopped node's bbolt files (a data directory in use is
refused; there is no online mode yet: stop the node, compact, start it again,
one node at a time so the cluster keeps its quorum).

bbolt never gives freed pages back to the file system: after large deletions
(or a long history of rewritten session records) state.db keeps its peak size.
The metric sessionstore_bbolt_free_bytes{db="state"} of a running node shows
how many bytes a compaction would reclaim.

For DIR/state.db (and, with --raft-store, DIR/raft/raft.db: Raft term, vote and
artifact watermarks) the command copies every bucket, key and value into a new
file with bbolt's Compact, syncs it, reopens it with the store's own open
function and checks it (page check, applied index, a SHA-256 digest of the
whole content equal to the original's), keeps the original as
<file>.precompact while the copy is renamed over it and the directory is
synced, then removes the original. It prints the sizes before and after.
A running node grows state.db in steps of 16 MiB (bbolt's allocation size), so
part of what a small file "reclaims" is that preallocated tail, taken again by
the next writes; compaction pays off when the free bytes are well above that.
The Raft log (raft/wal/) and snapshots are not touched.
Every flag can also be set as SESSIONSTORE_<FLAG>; flags win.

Flags:
`

// compactCmd is `sessionstore compact`: offline bbolt compaction of a stopped node's files.
func compactCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore compact", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", cluster.DefaultConfig().DataDir, "data directory of the stopped node")
	raftStore := fs.Bool("raft-store", true, "also compact raft/raft.db")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), compactHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := refuseIfRunning(*dataDir); err != nil {
		return err
	}
	files := []struct {
		name string
		fn   func(string) (storage.CompactResult, error)
	}{{filepath.Join(*dataDir, "state.db"), storage.CompactState}}
	if *raftStore {
		files = append(files, struct {
			name string
			fn   func(string) (storage.CompactResult, error)
		}{filepath.Join(*dataDir, "raft", "raft.db"), storage.CompactRaftStore})
	}
	for _, f := range files {
		if _, err := os.Stat(f.name); err != nil {
			return fmt.Errorf("%s: %w (is --data-dir a node's data directory?)", f.name, err)
		}
	}
	for _, f := range files {
		res, err := f.fn(f.name)
		if err != nil {
			return err
		}
		saved := res.Before - res.After
		pct := 0.0
		if res.Before > 0 {
			pct = 100 * float64(saved) / float64(res.Before)
		}
		fmt.Fprintf(stdout, "%s: %d -> %d bytes (%s -> %s, %.1f%% smaller; free pages before: %s), content verified (sha256 %.16s…)\n",
			res.Path, res.Before, res.After, units.Bytes(res.Before), units.Bytes(res.After), pct, units.Bytes(res.FreeBefore), res.Digest)
	}
	return nil
}
