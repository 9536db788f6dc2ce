package cluster

import (
	"sort"
	"strings"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// hints are the client hints with the inputs they were computed from.
type hints struct {
	sessionstore.ClientHints
	leaderID raft.ServerID
	servers  []raft.Server
	gen      uint64
}

// ClientHints returns the current hints (never nil; the same pointer while
// they are unchanged, so callers may cache what they derive from them). They
// are derived from the leader, the Raft configuration and gossip, and
// recomputed only when one of those has changed (as voterView), so that every
// call can carry them.
func (n *Node) ClientHints() *sessionstore.ClientHints {
	_, leader := n.raft.LeaderWithID()
	var servers []raft.Server
	if f := n.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	var gen uint64
	if n.gossip != nil {
		gen = n.gossip.generation()
	}
	if h := n.hintCache.Load(); h != nil && h.leaderID == leader && h.gen == gen && sameServers(h.servers, servers) {
		return &h.ClientHints
	}
	var peers map[string]peer
	if n.gossip != nil {
		peers, gen = n.gossip.peersAt()
	}
	h := computeHints(n.cfg.NodeID, leader, servers, peers)
	h.gen = gen
	n.hintCache.Store(h)
	return &h.ClientHints
}

// computeHints derives the hints of node self from the leader's id, the
// configuration and gossip's peers (by node id).
func computeHints(self string, leader raft.ServerID, servers []raft.Server, peers map[string]peer) *hints {
	h := &hints{ClientHints: sessionstore.ClientHints{NodeID: self}, leaderID: leader, servers: servers}
	if leader != "" {
		h.Leader = string(leader) + "=" + peers[string(leader)].meta.clientAddr()
	}
	var eps []string
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		if a := peers[string(s.ID)].meta.clientAddr(); a != "" {
			eps = append(eps, string(s.ID)+"="+a)
		}
	}
	sort.Strings(eps)
	h.Endpoints = strings.Join(eps, ",")
	return h
}

// clientAddr is the address clients reach the node at: its advertised
// client address, else (a build before --advertise-client-addr) its API
// address.
func (m memberMeta) clientAddr() string {
	if m.Client != "" {
		return m.Client
	}
	return m.API
}
