package cluster

import (
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
)

// hints are the client hints with the inputs they were computed from.
type hints struct {
	sessionstore.ClientHints
	leaderID raft.ServerID
	servers  []raft.Server
	gen      uint64
	checked  atomic.Int64 // monoNow when servers was last found current
}

// hintsFresh is how long ClientHints trusts the configuration its hints were
// computed from before asking raft again (GetConfiguration allocates a
// future, and every answer carries the hints): a change of the voters
// reaches the hints within it, a change of leader or gossip at once. Hints
// only steer clients, so this lag costs at most a forwarded call.
const hintsFresh = 100 * time.Millisecond

// monoBase anchors monoNow, a monotonic clock in nanoseconds.
var monoBase = time.Now()

func monoNow() int64 { return int64(time.Since(monoBase)) }

// ClientHints returns the current hints (never nil; the same pointer while
// they are unchanged, so callers may cache what they derive from them). They
// are derived from the leader, the Raft configuration and gossip, and
// recomputed only when one of those has changed (as voterView; the
// configuration is looked at every hintsFresh), so that every call can carry
// them.
func (mb *membership) ClientHints() *sessionstore.ClientHints {
	_, leader := mb.raft.LeaderWithID()
	var gen uint64
	if mb.gossip != nil {
		gen = mb.gossip.generation()
	}
	now := monoNow()
	h := mb.hintCache.Load()
	if h != nil && h.leaderID == leader && h.gen == gen && now-h.checked.Load() < int64(hintsFresh) {
		return &h.ClientHints
	}
	var servers []raft.Server
	if f := mb.raft.GetConfiguration(); f.Error() == nil {
		servers = f.Configuration().Servers
	}
	if h != nil && h.leaderID == leader && h.gen == gen && sameServers(h.servers, servers) {
		h.checked.Store(now)
		return &h.ClientHints
	}
	var peers map[string]peer
	if mb.gossip != nil {
		peers, gen = mb.gossip.peersAt()
	}
	h = computeHints(mb.cfg.NodeID, leader, servers, peers)
	h.gen = gen
	h.checked.Store(now)
	mb.hintCache.Store(h)
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
