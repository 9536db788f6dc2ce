package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/cluster"
)

// recoverStdin answers recover's confirmation prompt (a variable for tests).
var recoverStdin io.Reader = os.Stdin

const recoverHelp = `Usage: sessionstore recover --data-dir DIR --peers ID=RAFTADDR[,ID=RAFTADDR...] [--yes]

OFFLINE quorum-loss recovery. The node must be stopped: a data directory in
use is refused. Rewrites the Raft configuration stored in DIR so that the
servers listed in --peers (all voters) are the whole cluster, then exits; start
the node afterwards with its usual flags and it serves with that
configuration (a single listed server elects itself at once).

Use it only when a majority of the voters is permanently lost and the cluster
cannot elect a leader. It is an operator's decision, with these risks:

  * Every entry that was committed only on the lost servers is LOST: the
    surviving node keeps what its own log and state hold (including entries it
    received but never saw committed, which become committed now).
  * The lost servers must NEVER come back with their old data: with their old
    configuration they can elect a leader among themselves and accept writes
    (split brain, two diverging histories). Wipe their data directories and
    join them as new servers (--join, no --bootstrap-expect).
  * Run it on ONE survivor, then start that node. If other survivors are to
    stay in the cluster, stop them and recover each with the SAME --peers
    (same ids and addresses) before starting any of them; or, simpler, recover
    one node with only itself in --peers, start it, wipe the others and let
    them join fresh.

The command prints the configuration it found and the one it writes, then asks
to type "yes" (or pass --yes). It applies the local log past the latest
snapshot to the state database, writes a snapshot carrying the new
configuration and empties the Raft log; sessions, events and artifacts stay.
--node-id (this node's id) is checked to be among --peers when given.
Every flag can also be set as SESSIONSTORE_<FLAG>; flags win.

Flags:
`

// recoverCmd is `sessionstore recover`: raft.RecoverCluster on a stopped node's data directory.
func recoverCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore recover", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", cluster.DefaultConfig().DataDir, "data directory of the stopped node to recover")
	peers := fs.String("peers", "", "the new configuration: comma-separated ID=RAFT_ADDRESS of the servers that remain (all voters)")
	nodeID := fs.String("node-id", "", "this node's id; when given it must be among --peers")
	yes := fs.Bool("yes", false, "do not ask for confirmation")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), recoverHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	servers, err := parsePeers(*peers)
	if err != nil {
		fmt.Fprintf(stderr, "sessionstore recover: --peers: %v\n", err)
		return errUsage
	}
	if *nodeID != "" {
		found := false
		for _, s := range servers {
			found = found || string(s.ID) == *nodeID
		}
		if !found {
			fmt.Fprintf(stderr, "sessionstore recover: --node-id %q is not among --peers: the node would not be a voter of its own cluster\n", *nodeID)
			return errUsage
		}
	}
	if err := refuseIfRunning(*dataDir); err != nil {
		return err
	}
	cfg := cluster.DefaultConfig()
	cfg.DataDir, cfg.NodeID = *dataDir, *nodeID
	logger := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	confirm := func(old, new raft.Configuration) error {
		fmt.Fprintf(stdout, "data directory  %s\n", *dataDir)
		fmt.Fprintf(stdout, "old configuration (%d servers):\n%s", len(old.Servers), renderServers(old))
		fmt.Fprintf(stdout, "new configuration (%d servers):\n%s", len(new.Servers), renderServers(new))
		if *nodeID == "" {
			fmt.Fprintln(stdout, "note: --node-id not given; make sure this node's id is one of the new servers")
		}
		if *yes {
			return nil
		}
		fmt.Fprint(stdout, "Entries committed only on the servers left out are lost, and those servers must be wiped\n"+
			"before they come back. Type \"yes\" to rewrite the configuration: ")
		line, _ := bufio.NewReader(recoverStdin).ReadString('\n')
		if strings.TrimSpace(line) != "yes" {
			fmt.Fprintln(stdout)
			return errors.New("not confirmed: nothing was changed (type yes, or pass --yes)")
		}
		return nil
	}
	res, err := cluster.Recover(cfg, servers, logger, confirm)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "recovered: log up to index %d (term %d) applied, state applied index %d;\n"+
		"snapshot written with the new configuration, Raft log emptied.\n"+
		"Start the node now with its usual flags; wipe the servers left out before they return.\n",
		res.LastIndex, res.LastTerm, res.Applied)
	return nil
}

// parsePeers parses "id=addr,id=addr" into voters.
func parsePeers(s string) ([]raft.Server, error) {
	if strings.TrimSpace(s) == "" {
		return nil, errors.New("required: at least one ID=RAFT_ADDRESS")
	}
	var out []raft.Server
	for _, part := range strings.Split(s, ",") {
		id, addr, ok := strings.Cut(strings.TrimSpace(part), "=")
		id, addr = strings.TrimSpace(id), strings.TrimSpace(addr)
		if !ok || id == "" || addr == "" {
			return nil, fmt.Errorf("%q: want ID=RAFT_ADDRESS", part)
		}
		out = append(out, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(addr)})
	}
	return out, nil
}

func renderServers(c raft.Configuration) string {
	if len(c.Servers) == 0 {
		return "  (none)\n"
	}
	var b strings.Builder
	for _, s := range c.Servers {
		fmt.Fprintf(&b, "  %-12s %-9s %s\n", s.ID, s.Suffrage, s.Address)
	}
	return b.String()
}
