// Package clustertest runs clusters of real nodes (cluster.Node: Raft, the
// FSM, the state database on disk, gossip on loopback) inside one test
// process, with Raft over hashicorp/raft's in-memory transport, so a test can
// cut and heal the network between nodes without root or a firewall.
//
// What is real: every store, the start-up guard, Raft, snapshots, gossip
// (UDP and TCP on 127.0.0.1) and the node's goroutines. What is not: the Raft
// transport (no TCP, TLS or handshake: those are tested in cluster and
// cmd/node), and a partition cuts Raft only, so gossip still sees every node.
package clustertest

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/cluster"
)

// rpcTimeout bounds one Raft RPC between connected nodes (snapshots get ten
// times as long): the TCP transport's is 10 s; a busy test machine under the
// race detector needs more than raft's in-memory default of 500 ms.
const rpcTimeout = 5 * time.Second

// Network connects the Raft transports of the nodes started on it. Every
// pair is connected unless a partition separates them.
type Network struct {
	mu    sync.Mutex
	nodes map[raft.ServerAddress]*transport
	cut   map[[2]raft.ServerAddress]bool // both orders
}

// NewNetwork returns an empty network.
func NewNetwork() *Network {
	return &Network{nodes: map[raft.ServerAddress]*transport{}, cut: map[[2]raft.ServerAddress]bool{}}
}

// transport is one node's end: raft's in-memory transport without pipelined
// AppendEntries (as the TCP transport, cluster/transport.go), and an Admit
// that checks the peer is on this network and reachable.
type transport struct {
	*raft.InmemTransport
	net *Network
}

func (t *transport) AppendEntriesPipeline(raft.ServerID, raft.ServerAddress) (raft.AppendPipeline, error) {
	return nil, raft.ErrPipelineReplicationNotSupported
}

func (t *transport) Admit(_ context.Context, _ string, addr raft.ServerAddress) bool {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	_, ok := t.net.nodes[addr]
	return ok && !t.net.cut[[2]raft.ServerAddress{t.LocalAddr(), addr}]
}

// Close takes the node off the network: every peer forgets it at once, so no
// RPC waits for a consumer that has stopped.
func (t *transport) Close() error {
	t.net.mu.Lock()
	defer t.net.mu.Unlock()
	me := t.LocalAddr()
	if t.net.nodes[me] == t {
		delete(t.net.nodes, me)
	}
	for _, p := range t.net.nodes {
		p.Disconnect(me)
	}
	return t.InmemTransport.Close()
}

// Transport is the cluster.TransportMaker of the node at addr; the address
// must be free on this network (a restarted node reuses its own).
func (nw *Network) Transport(addr raft.ServerAddress) cluster.TransportMaker {
	return func(context.Context, *cluster.Handshaker, hclog.Logger) (cluster.Transport, error) {
		nw.mu.Lock()
		defer nw.mu.Unlock()
		if _, ok := nw.nodes[addr]; ok {
			return nil, fmt.Errorf("clustertest: raft address %s is in use", addr)
		}
		_, it := raft.NewInmemTransportWithTimeout(addr, rpcTimeout)
		t := &transport{InmemTransport: it, net: nw}
		for a, p := range nw.nodes {
			if !nw.cut[[2]raft.ServerAddress{addr, a}] {
				t.Connect(a, p.InmemTransport)
				p.Connect(addr, t.InmemTransport)
			}
		}
		nw.nodes[addr] = t
		return t, nil
	}
}

// Partition cuts every link between the groups; links within a group and
// links to nodes in no group stay as they are.
func (nw *Network) Partition(groups ...[]raft.ServerAddress) {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	for i, g := range groups {
		for _, h := range groups[i+1:] {
			for _, a := range g {
				for _, b := range h {
					nw.cut[[2]raft.ServerAddress{a, b}] = true
					nw.cut[[2]raft.ServerAddress{b, a}] = true
					if t := nw.nodes[a]; t != nil {
						t.Disconnect(b)
					}
					if t := nw.nodes[b]; t != nil {
						t.Disconnect(a)
					}
				}
			}
		}
	}
}

// Heal reconnects every pair of nodes on the network.
func (nw *Network) Heal() {
	nw.mu.Lock()
	defer nw.mu.Unlock()
	clear(nw.cut)
	for a, t := range nw.nodes {
		for b, p := range nw.nodes {
			if a != b {
				t.Connect(b, p.InmemTransport)
			}
		}
	}
}
