package cluster

import (
	"math"

	"github.com/hashicorp/raft"
)

// voterView is what the write path asks about the voters on every proposal:
// the newest command version all of them apply (limits.go, requests.go) and
// whether one of them gossips a nearly full disk (diskspace.go). It is derived
// from the Raft configuration and gossip and recomputed only when either has
// changed, so a proposal neither copies the member map nor walks it.
type voterView struct {
	// servers is the configuration it was computed from. raft hands out the
	// same stored copy until the configuration changes, so comparing the
	// slices' identity tells a change cheaply; were raft to copy on every
	// call, the view would only be recomputed every time. Holding the slice
	// keeps it alive, so a new configuration never reuses its address.
	servers []raft.Server
	gen     uint64 // gossip generation it was computed at

	version uint32        // newest command version every voter advertised
	diskLow raft.ServerID // an alive voter other than this node gossiping a low disk ("": none)
}

// voterView returns the current view, nil when raft cannot say its
// configuration (shutting down).
func (mb *membership) voterView() *voterView {
	f := mb.raft.GetConfiguration()
	if f.Error() != nil {
		return nil
	}
	servers := f.Configuration().Servers
	var gen uint64
	if mb.gossip != nil {
		gen = mb.gossip.generation()
	}
	if v := mb.voterCache.Load(); v != nil && v.gen == gen && sameServers(v.servers, servers) {
		return v
	}
	var peers map[string]peer
	if mb.gossip != nil {
		peers, gen = mb.gossip.peersAt()
	}
	v := computeVoterView(servers, peers, mb.cfg.NodeID)
	v.gen = gen
	// Concurrent callers may store views of different inputs; each is tagged
	// with its inputs, so whichever stays is recomputed once it is outdated.
	mb.voterCache.Store(v)
	return v
}

// votersSupport reports whether every voter has advertised command version v.
func (mb *membership) votersSupport(v uint32) bool { return mb.votersVersion() >= v }

// votersVersion is the newest command version every voter has advertised.
// A node's last advertisement is remembered while it is down, so a stopped
// voter does not switch quotas off; one never heard from counts as older.
func (mb *membership) votersVersion() uint32 {
	v := mb.voterView()
	if v == nil {
		return 0
	}
	return v.version
}

// computeVoterView derives the view from a configuration and gossip's peers
// (by node id; nil: no gossip) on the node self.
func computeVoterView(servers []raft.Server, peers map[string]peer, self string) *voterView {
	v := &voterView{servers: servers, version: math.MaxUint32} // no voter at all: nothing is older
	for _, s := range servers {
		if s.Suffrage != raft.Voter {
			continue
		}
		p, ok := peers[string(s.ID)]
		if !ok {
			// A node's last advertisement is remembered while it is down;
			// one never heard from counts as older.
			v.version = 0
			continue
		}
		v.version = min(v.version, p.meta.Commands)
		if v.diskLow == "" && string(s.ID) != self && p.alive() && p.meta.DiskLow {
			v.diskLow = s.ID
		}
	}
	return v
}

// sameServers reports whether a and b are the same slice (not merely equal).
func sameServers(a, b []raft.Server) bool {
	return len(a) == len(b) && (len(a) == 0 || &a[0] == &b[0])
}
