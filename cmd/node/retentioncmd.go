package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
)

// retentionCmd is `sessionstore retention`: list (default) or delete what the
// cluster's retention policies expire now.
func retentionCmd(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("sessionstore retention", flag.ContinueOnError)
	fs.SetOutput(stderr)
	addr := fs.String("addr", defaultGRPCAddr, "gRPC address of any node; a host without a port means port 7400")
	apply := fs.Bool("apply", false, "delete the expired sessions (default: only list them)")
	timeout := fs.Duration("timeout", 60*time.Second, "give up waiting after this long")
	conn := addClientFlags(fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: sessionstore retention [--apply] [flags]

Lists the sessions the leader's retention policies (sessionstore serve --retention)
expire now: materialised sessions whose last append is older than the max age
of the policy with the longest cwd prefix matching their cwd. With --apply the
leader deletes them through Raft (the same rule, at the leader's time; a
session appended to meanwhile is kept) and prints what it deleted. The leader
also sweeps on its own every --retention-sweep. Needs admin permission.
Every flag can also be set as SESSIONSTORE_<FLAG>; flags win.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	dial, err := conn.dialOptions()
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	c, err := client.Dial(ctx, *addr, dial...)
	if err != nil {
		return err
	}
	defer c.Close()
	ids, err := c.Retention(ctx, !*apply)
	if err != nil {
		return err
	}
	verb := "expired (dry run; --apply deletes them)"
	if *apply {
		verb = "deleted"
	}
	for _, id := range ids {
		fmt.Fprintf(stdout, "%q\n", id)
	}
	fmt.Fprintf(stdout, "%d sessions %s\n", len(ids), verb)
	return nil
}
