// Package cluster runs the store's real cluster for the jepsen harness and
// injects faults into it: network partitions, packet loss, pauses, crashes
// and restarts. A Backend hides how the nodes run (Docker containers from the
// repository's docker-compose.yml; other backends may follow).
package cluster

import (
	"context"
	"errors"
)

// ErrUnsupported is returned by a fault a backend cannot inject.
var ErrUnsupported = errors.New("fault not supported by this backend")

// Node names one member of the cluster ("node1" …), the same as its node id.
type Node string

// Backend runs a cluster and injects faults. Every method that waits takes a
// context; faults are undone by Heal (network), Resume (pause) and Start
// (kill).
type Backend interface {
	// Name is a short name for reports ("docker").
	Name() string
	// Up creates and starts a fresh cluster (no data from an earlier run).
	Up(ctx context.Context) error
	// Down stops the cluster and removes its containers (data directories stay).
	Down(ctx context.Context) error
	// Nodes lists the members in a fixed order.
	Nodes() []Node
	// ClientAddr is the gRPC address the harness dials for n.
	ClientAddr(n Node) string
	// HTTPAddr is n's HTTP address (readiness, artifact downloads).
	HTTPAddr(n Node) string

	// Kill stops n at once (SIGKILL: no shutdown, no flush).
	Kill(ctx context.Context, n Node) error
	// Start starts a killed node again on its data.
	Start(ctx context.Context, n Node) error
	// Pause freezes n (every process, timers included) until Resume.
	Pause(ctx context.Context, n Node) error
	Resume(ctx context.Context, n Node) error
	// Partition cuts, for every node, its traffic with each node in
	// grudge[node] (both directions are cut by applying the grudge
	// symmetrically); the client path from the harness is kept.
	Partition(ctx context.Context, grudge map[Node][]Node) error
	// Loss drops pct percent of n's packets to and from its peers.
	Loss(ctx context.Context, n Node, pct int) error
	// Heal removes every partition and loss rule.
	Heal(ctx context.Context) error

	// CollectLogs writes each node's log to dir/<node>.log.
	CollectLogs(ctx context.Context, dir string) error
	// DataDir is n's data directory on the host (Raft log, state database,
	// artifacts), kept after the run.
	DataDir(n Node) string
}

// Complete returns a grudge in which each listed side is cut from every node
// of the other sides.
func Complete(sides ...[]Node) map[Node][]Node {
	g := map[Node][]Node{}
	for i, a := range sides {
		for j, b := range sides {
			if i == j {
				continue
			}
			for _, x := range a {
				g[x] = append(g[x], b...)
			}
		}
	}
	return g
}

// Bridge cuts a from c while b still talks to both (a partial partition:
// b is the bridge).
func Bridge(a, b, c Node) map[Node][]Node {
	return map[Node][]Node{a: {c}, c: {a}}
}
