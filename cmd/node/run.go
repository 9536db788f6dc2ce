package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"
)

// command is one subcommand: its name, argument synopsis, one-line summary
// and entry point. The table drives both dispatch and the help text.
type command struct {
	name, args, summary string
	run                 func(ctx context.Context, args []string, stdout, stderr io.Writer) error
}

var commands = []command{
	{"serve", "[flags]", "run a node (the default subcommand)", serve},
	{"status", "[flags]", "print a running node's view of the cluster and its members", statusCmd},
	{"leave", "[flags]", "make a running node leave the cluster", leaveCmd},
	{"reload", "[flags]", "send SIGHUP to the node running on a data directory (re-reads its token file)", reloadCmd},
	{"export", "[flags]", "export sessions as a reference JSONL root (directory, .tar or .tar.zst)", exportCmd},
	{"import", "[flags] SRC", "import a reference JSONL root or an export through the API", importCmd},
	{"backup", "[flags]", "write a consistent backup of the whole cluster to a file", backupCmd},
	{"restore", "FILE [flags]", "seed a new cluster's data directory from a backup (offline)", restoreCmd},
	{"bench", "[flags]", "measure append throughput and latency against a running node", bench},
	{"certs", "[flags]", "write a CA, node and client certificates and a gossip key (TLS)", certsCmd},
	{"recover", "[flags]", "OFFLINE: rewrite a stopped node's Raft configuration after quorum loss", recoverCmd},
	{"compact", "[flags]", "OFFLINE: compact a stopped node's bbolt files (state.db, raft/raft.db)", compactCmd},
	{"repair", "[flags]", "OFFLINE: rebuild a stopped node's Raft log end that lost committed entries", repairCmd},
	{"retention", "[flags]", "list (or, with --apply, delete) the sessions the retention policies expire", retentionCmd},
	{"sessions", "ls|show|cat|tail|rm [flags]", "look at sessions from the shell: list, show turn by turn, print, follow, delete", sessionsCmd},
}

// writeUsage writes the subcommand list, one line each.
func writeUsage(w io.Writer) {
	lines := [][2]string{}
	for _, c := range commands {
		lines = append(lines, [2]string{c.name + " " + c.args, c.summary})
	}
	lines = append(lines,
		[2]string{"version", "print the version, commit, Go version and command version"},
		[2]string{"help [SUBCOMMAND]", "this text, or a subcommand's flags"})
	width := 0
	for _, l := range lines {
		width = max(width, len(l[0]))
	}
	fmt.Fprint(w, "sessionstore: a replicated store for AI-agent session logs\n\nUsage:\n")
	for _, l := range lines {
		fmt.Fprintf(w, "  sessionstore %-*s  %s\n", width, l[0], l[1])
	}
	fmt.Fprint(w, "\nRun 'sessionstore <subcommand> --help' for the flags of each.\n")
}

// writeHelp is what --help, -h and help print: the subcommands, then the
// flags of serve, the default subcommand.
func writeHelp(w io.Writer) {
	writeUsage(w)
	fs := flag.NewFlagSet("sessionstore serve", flag.ContinueOnError)
	fs.SetOutput(w)
	cfg := defaultServeConfig()
	serveFlags(&cfg, fs)
	fmt.Fprint(w, "\nFlags of 'sessionstore serve' (every flag can also be set as SESSIONSTORE_<FLAG>,\ne.g. SESSIONSTORE_DATA_DIR; flags win):\n")
	fs.PrintDefaults()
}

// run dispatches a subcommand and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	name := "serve"
	if len(args) > 0 {
		switch args[0] {
		case "-h", "-help", "--help":
			writeHelp(stdout)
			return 0
		case "-version", "--version":
			writeVersion(stdout)
			return 0
		}
		if !strings.HasPrefix(args[0], "-") {
			name, args = args[0], args[1:]
		}
	}
	switch name {
	case "help":
		if len(args) > 0 && args[0] != "help" {
			return run(ctx, []string{args[0], "--help"}, stdout, stderr)
		}
		writeHelp(stdout)
		return 0
	case "version":
		writeVersion(stdout)
		return 0
	}
	var cmd *command
	for i := range commands {
		if commands[i].name == name {
			cmd = &commands[i]
		}
	}
	if cmd == nil {
		fmt.Fprintf(stderr, "sessionstore: unknown subcommand %q\n\n", name)
		writeUsage(stderr)
		return 2
	}
	err := cmd.run(ctx, args, stdout, stderr)
	switch {
	case err == nil:
		return 0
	case errors.Is(err, flag.ErrHelp):
		return 0
	case errors.Is(err, errUsage):
		return 2
	default:
		fmt.Fprintf(stderr, "sessionstore %s: %v\n", name, err)
		return 1
	}
}

var errUsage = errors.New("usage error")
