package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

const usage = `node: a replicated store for AI-agent session logs

Usage:
  node [serve] [flags]     run a node (the default subcommand)
  node status [flags]      print a running node's view of the cluster and its members
  node leave [flags]       make a running node leave the cluster
  node export [flags]      export sessions as a reference JSONL root (directory, .tar or .tar.zst)
  node import [flags] SRC  import a reference JSONL root or an export through the API
  node backup [flags]      write a consistent backup of the whole cluster to a file
  node restore FILE [flags] seed a new cluster's data directory from a backup (offline)
  node bench [flags]       measure append throughput and latency against a running node
  node certs [flags]       write a CA, node and client certificates and a gossip key (TLS)
  node recover [flags]     OFFLINE: rewrite a stopped node's Raft configuration after quorum loss
  node compact [flags]     OFFLINE: compact a stopped node's bbolt files (state.db, raft/raft.db)
  node repair [flags]      OFFLINE: rebuild a stopped node's Raft log end that lost committed entries
  node retention [flags]   list (or, with --apply, delete) the sessions the retention policies expire
  node sessions CMD [flags] look at sessions: ls, show (turn by turn), cat (raw JSONL), tail [-f], rm

Run 'node <subcommand> --help' for the flags of each.
`

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := "serve"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		cmd, args = args[0], args[1:]
	}
	var err error
	switch cmd {
	case "serve":
		err = serve(ctx, args, stdout, stderr)
	case "status":
		err = statusCmd(ctx, args, stdout, stderr)
	case "leave":
		err = leaveCmd(ctx, args, stdout, stderr)
	case "bench":
		err = bench(ctx, args, stdout, stderr)
	case "export":
		err = exportCmd(ctx, args, stdout, stderr)
	case "import":
		err = importCmd(ctx, args, stdout, stderr)
	case "backup":
		err = backupCmd(ctx, args, stdout, stderr)
	case "restore":
		err = restoreCmd(ctx, args, stdout, stderr)
	case "certs":
		err = certsCmd(ctx, args, stdout, stderr)
	case "recover":
		err = recoverCmd(ctx, args, stdout, stderr)
	case "compact":
		err = compactCmd(ctx, args, stdout, stderr)
	case "repair":
		err = repairCmd(ctx, args, stdout, stderr)
	case "retention":
		err = retentionCmd(ctx, args, stdout, stderr)
	case "sessions":
		err = sessionsCmd(ctx, args, stdout, stderr)
	case "help":
		fmt.Fprint(stdout, usage)
		return 0
	default:
		fmt.Fprintf(stderr, "node: unknown subcommand %q\n\n%s", cmd, usage)
		return 2
	}
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "node %s: %v\n", cmd, err)
		return 1
	}
}

var errUsage = errors.New("usage error")
