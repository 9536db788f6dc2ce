// Command sessionstore is the session store's one binary, built from this
// directory with `go build -o sessionstore ./cmd/node` (the name keeps it apart
// from Node.js's `node` on the hosts that run agents): `sessionstore serve` runs a node,
// the other subcommands talk to a running node over gRPC.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}
