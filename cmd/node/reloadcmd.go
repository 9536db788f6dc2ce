package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"syscall"

	"github.com/sessionstore/sessionstore/cluster"
)

const reloadHelp = `Usage: sessionstore reload [--data-dir DIR]

Sends SIGHUP to the node running on DIR, found by the PID it keeps in
DIR/` + pidFileName + ` while it runs (so no pkill that could hit other
processes). On SIGHUP the node re-reads its --auth-token-file; a file that
fails to parse leaves the previous one in force: check the node's log.
Run it as the node's user, on the node's host (or inside its container).

Flags:
`

// reloadCmd is `sessionstore reload`: SIGHUP to the node on a data directory.
func reloadCmd(_ context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore reload", flag.ContinueOnError)
	fs.SetOutput(stderr)
	dataDir := fs.String("data-dir", cluster.DefaultConfig().DataDir, "data directory of the running node")
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), reloadHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	pid, err := readRunningPID(*dataDir)
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGHUP); err != nil {
		return fmt.Errorf("send SIGHUP to PID %d (the node on %s): %w", pid, *dataDir, err)
	}
	fmt.Fprintf(stdout, "sent SIGHUP to PID %d (the node on %s); its log says what it reloaded\n", pid, *dataDir)
	return nil
}
