package cluster

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log"
	"log/slog"
	"net"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
)

// memberMeta is what each node publishes in gossip. Gossip is advisory: only
// Raft decides membership; the leader folds gossip into the configuration.
type memberMeta struct {
	ID   string `json:"id"`
	Raft string `json:"raft"`
	API  string `json:"api"`
	// Client is the gRPC address clients reach the node at
	// (--advertise-client-addr); absent on builds before it: API.
	Client    string `json:"client,omitempty"`
	ClusterID string `json:"cluster,omitempty"`
	// HasState is set once the node has Raft state: it belongs (or belonged)
	// to a cluster and must never take part in a bootstrap.
	HasState bool   `json:"state,omitempty"`
	Applied  uint64 `json:"applied,omitempty"`
	// Leaving is gossiped just before a graceful leave, so peers can tell a
	// node that left (SIGTERM, sessionstore leave) from one that died.
	Leaving bool `json:"leaving,omitempty"`
	// AuthHash identifies the node's token file (auth.Table.Hash): nodes
	// whose files differ authorise differently, which deserves a warning.
	AuthHash string `json:"auth,omitempty"`
	// Commands is the newest command version the node applies (absent on
	// builds before version 3: they are taken to know at most version 2).
	Commands uint32 `json:"cmd,omitempty"`
	// DiskLow is set while the node's data directory is below
	// --min-free-bytes: the leader then refuses writes for the whole
	// cluster, since every voter must append them.
	DiskLow bool `json:"disk_low,omitempty"`
	// Handshake is the Raft handshake version the node speaks (handshake.go;
	// absent on builds before it, which are dialled without one).
	Handshake uint8 `json:"hs,omitempty"`
	// FreeMiB is the space available on the node's data directory, in whole
	// MiB (rounded down): a write of a few KiB changes nothing to gossip.
	// ContactS is how long ago the node last heard from the leader, in whole
	// seconds (rounded down: 0 on the leader, and on a follower in contact),
	// so heartbeats change nothing to gossip either. Both are absent on
	// builds before them and while the node does not know them (Members
	// then reports them unknown). Short keys: memberlist caps the metadata
	// at 512 bytes.
	FreeMiB  gossipInt `json:"free,omitzero"`
	ContactS gossipInt `json:"lc,omitzero"`
}

// gossipInt is a gossiped number that may be absent: unlike an omitempty
// int, a 0 is still said. It is a plain value, so memberMeta stays
// comparable (update gossips only a change).
type gossipInt struct {
	v   int64
	set bool
}

func knownInt(v int64) gossipInt { return gossipInt{v: v, set: true} }

// get returns the value and whether it is known.
func (g gossipInt) get() (int64, bool) { return g.v, g.set }

func (g gossipInt) IsZero() bool { return !g.set }

func (g gossipInt) MarshalJSON() ([]byte, error) { return strconv.AppendInt(nil, g.v, 10), nil }

func (g *gossipInt) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		*g = gossipInt{}
		return nil
	}
	if err := json.Unmarshal(b, &g.v); err != nil {
		return err
	}
	g.set = true
	return nil
}

// gossip runs memberlist and tracks the peers' metadata.
type gossip struct {
	ml     *memberlist.Memberlist
	logger *slog.Logger
	// address is the local node's gossip address, read once at start:
	// memberlist rewrites its local node under its own lock on every
	// UpdateNode, so reading LocalNode() later races with publishMeta.
	address string

	mu      sync.Mutex
	meta    memberMeta
	members map[string]peer // by memberlist node name, from event callbacks
	changed chan struct{}   // closed and replaced on every membership event
	// gen counts changes to meta and members (written under mu): a view
	// derived from peers() is current while gen has not moved (voters.go).
	gen atomic.Uint64
}

func newGossip(cfg Config, self memberMeta, logger *slog.Logger) (*gossip, error) {
	g := &gossip{logger: logger.With("component", "gossip"), meta: self, members: map[string]peer{}, changed: make(chan struct{})}
	mc := memberlist.DefaultLANConfig()
	mc.Name = cfg.NodeID
	host, port, err := splitHostPort(cfg.GossipAddr)
	if err != nil {
		return nil, fmt.Errorf("gossip address %q: %w", cfg.GossipAddr, err)
	}
	mc.BindAddr, mc.BindPort = host, port
	mc.AdvertisePort = port
	if cfg.GossipAdvertise != "" {
		ah, ap, err := splitHostPort(cfg.GossipAdvertise)
		if err != nil {
			return nil, fmt.Errorf("gossip advertise address %q: %w", cfg.GossipAdvertise, err)
		}
		// memberlist wants an IP; a host name (a container's) is resolved now.
		if net.ParseIP(ah) == nil {
			ips, err := net.LookupIP(ah)
			if err != nil || len(ips) == 0 {
				return nil, fmt.Errorf("gossip advertise host %q: %v", ah, err)
			}
			ah = ips[0].String()
		}
		mc.AdvertiseAddr, mc.AdvertisePort = ah, ap
	}
	if cfg.GossipKey != nil {
		// Encrypted gossip only: a peer without the key (or with another)
		// can neither read nor be read.
		mc.SecretKey = cfg.GossipKey
		mc.GossipVerifyIncoming, mc.GossipVerifyOutgoing = !cfg.GossipPlaintextIn, !cfg.GossipPlaintextOut
	}
	mc.Delegate = g
	mc.Events = g
	mc.Logger = log.New(&memberlistLog{logger: g.logger}, "", 0)
	if g.ml, err = memberlist.Create(mc); err != nil {
		return nil, fmt.Errorf("start gossip on %s: %w", cfg.GossipAddr, err)
	}
	g.address = g.ml.LocalNode().Address()
	return g, nil
}

func splitHostPort(addr string) (string, int, error) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return "", 0, err
	}
	port, err := strconv.Atoi(p)
	if err != nil {
		return "", 0, err
	}
	return h, port, nil
}

// join contacts the seeds; it succeeds when at least one answered.
func (g *gossip) join(seeds []string) (int, error) {
	if len(seeds) == 0 {
		return 0, nil
	}
	return g.ml.Join(seeds)
}

// peers returns every known member with decodable metadata, by node id.
// memberlist mutates the Nodes that Members returns without a lock, so the
// metadata is copied in the event callbacks (which run under its lock) instead.
func (g *gossip) peers() map[string]peer {
	ps, _ := g.peersAt()
	return ps
}

// peersAt is peers with the generation it reflects.
func (g *gossip) peersAt() (map[string]peer, uint64) {
	g.mu.Lock()
	defer g.mu.Unlock()
	out := make(map[string]peer, len(g.members)+1)
	for _, p := range g.members {
		out[p.meta.ID] = p
	}
	out[g.meta.ID] = peer{meta: g.meta, state: memberlist.StateAlive}
	return out, g.gen.Load()
}

// generation changes whenever what peers returns may have changed.
func (g *gossip) generation() uint64 { return g.gen.Load() }

type peer struct {
	meta  memberMeta
	state memberlist.NodeStateType
}

func (p peer) alive() bool { return p.state == memberlist.StateAlive }

func (p peer) health() string {
	switch p.state {
	case memberlist.StateAlive:
		return "alive"
	case memberlist.StateSuspect:
		return "suspect"
	case memberlist.StateDead:
		return "dead"
	case memberlist.StateLeft:
		return "left"
	}
	return "unknown"
}

// update changes this node's metadata and gossips it when it changed.
func (g *gossip) update(fn func(*memberMeta)) {
	g.mu.Lock()
	old := g.meta
	fn(&g.meta)
	same := old == g.meta
	if !same {
		g.gen.Add(1)
	}
	g.mu.Unlock()
	if !same {
		if err := g.ml.UpdateNode(time.Second); err != nil {
			g.logger.Warn("gossiping metadata failed", "err", err)
		}
	}
}

// events returns a channel closed at the next membership event.
func (g *gossip) events() <-chan struct{} {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.changed
}

func (g *gossip) notify() {
	g.mu.Lock()
	close(g.changed)
	g.changed = make(chan struct{})
	g.mu.Unlock()
}

// leave announces a graceful departure, then leaves the pool.
func (g *gossip) leave(timeout time.Duration) error {
	g.update(func(m *memberMeta) { m.Leaving = true })
	return g.ml.Leave(timeout)
}

// joined reports whether this node knows at least one other member.
func (g *gossip) joined() bool { return g.ml.NumMembers() > 1 }

func (g *gossip) shutdown() error { return g.ml.Shutdown() }

// memberlist.Delegate: only the metadata is used.
func (g *gossip) NodeMeta(limit int) []byte {
	g.mu.Lock()
	defer g.mu.Unlock()
	b, _ := json.Marshal(g.meta)
	if len(b) > limit {
		// Long addresses and ids: the values only Members shows go first,
		// so that the node still joins and is told apart.
		m := g.meta
		m.FreeMiB, m.ContactS = gossipInt{}, gossipInt{}
		if b, _ = json.Marshal(m); len(b) > limit {
			return nil
		}
	}
	return b
}
func (g *gossip) NotifyMsg([]byte)                           {}
func (g *gossip) GetBroadcasts(overhead, limit int) [][]byte { return nil }
func (g *gossip) LocalState(join bool) []byte                { return nil }
func (g *gossip) MergeRemoteState(buf []byte, join bool)     {}

// memberlist.EventDelegate: called under memberlist's lock, so n may be read.
// (n.State is not kept current by memberlist; the callback says what happened.)
func (g *gossip) NotifyJoin(n *memberlist.Node)   { g.record(n, memberlist.StateAlive) }
func (g *gossip) NotifyUpdate(n *memberlist.Node) { g.record(n, memberlist.StateAlive) }
func (g *gossip) NotifyLeave(n *memberlist.Node)  { g.record(n, memberlist.StateDead) }

func (g *gossip) record(n *memberlist.Node, state memberlist.NodeStateType) {
	var meta memberMeta
	if err := json.Unmarshal(n.Meta, &meta); err == nil && meta.ID != "" {
		if state == memberlist.StateDead && meta.Leaving {
			state = memberlist.StateLeft
		}
		g.mu.Lock()
		prev, known := g.members[n.Name]
		g.members[n.Name] = peer{meta: meta, state: state}
		g.gen.Add(1)
		mine, self := g.meta.AuthHash, g.meta.ID
		g.mu.Unlock()
		if meta.ID != self && meta.AuthHash != mine && (!known || prev.meta.AuthHash != meta.AuthHash) {
			g.logger.Warn("peer's token file differs from this node's: callers may be authorised differently depending on the node they reach",
				"peer", meta.ID, "peer_auth_hash", meta.AuthHash, "auth_hash", mine)
		}
	}
	g.notify()
}

// memberlistLog forwards memberlist's own log lines ("[WARN] ...") to slog,
// dropping its debug chatter.
type memberlistLog struct{ logger *slog.Logger }

func (w *memberlistLog) Write(p []byte) (int, error) {
	line := string(bytes.TrimSpace(p))
	switch {
	case bytes.Contains(p, []byte("[DEBUG]")):
	case bytes.Contains(p, []byte("[ERR]")):
		w.logger.Error(line)
	case bytes.Contains(p, []byte("[WARN]")):
		w.logger.Warn(line)
	default:
		w.logger.Info(line)
	}
	return len(p), nil
}

// sortedIDs returns the keys of peers in order.
func sortedIDs(ps map[string]peer) []string {
	ids := make([]string, 0, len(ps))
	for id := range ps {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return ids
}

// addr is the gossip address peers reach this node at.
func (g *gossip) addr() string { return g.address }
