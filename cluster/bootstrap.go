package cluster

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hashicorp/raft"
)

// bootstrapStable is how many consecutive checks (500 ms apart) must see the
// same set of expected servers before the cluster is bootstrapped.
const bootstrapStable = 4

// checkPeersConfigured refuses, at start, a node that would wait forever:
// without Raft state it must see BootstrapExpect servers, and with more than
// one expected and no seeds it has nobody to look for. A node with state
// knows its peers from the Raft configuration and needs no seeds.
func (c Config) checkPeersConfigured(hasState bool) error {
	if hasState || c.BootstrapExpect <= 1 || len(c.Join) > 0 {
		return nil
	}
	return fmt.Errorf("--bootstrap-expect %d but no peers are configured (no --join): this node would wait forever for %d other servers it has no way to find; "+
		"give every node --join with the gossip addresses (host:port of --gossip-addr) of the others, e.g. --join node2:7402,node3:7402, "+
		"or start a single-node cluster with --bootstrap-expect 1", c.BootstrapExpect, c.BootstrapExpect-1)
}

// runBootstrap forms exactly one cluster (docs/design.md "Cluster"): a node with
// Raft state never bootstraps; otherwise, once exactly BootstrapExpect servers
// without state see each other and that set has been stable for two seconds,
// the one with the smallest node id bootstraps a configuration of all of them
// as voters and the others receive it from the new leader. A node that sees a
// formed cluster (a peer with state) only waits to be added. More servers than
// expected seeing each other is refused loudly rather than guessed at.
func (mb *membership) runBootstrap(hasState bool) {
	expect := mb.cfg.bootstrapExpect()
	if hasState || expect == 0 {
		return
	}
	if expect == 1 && len(mb.cfg.Join) == 0 {
		mb.bootstrap([]raft.Server{{Suffrage: raft.Voter, ID: raft.ServerID(mb.cfg.NodeID), Address: mb.local.raftAddr}})
		return
	}
	t := time.NewTicker(500 * time.Millisecond)
	defer t.Stop()
	var lastSet string
	stable := 0
	warned := time.Time{}
	for {
		select {
		case <-mb.ctx.Done():
			return
		case <-t.C:
		}
		if mb.hasConfiguration() {
			return // added by a leader
		}
		var cands []string
		formed := false
		ps := mb.gossip.peers()
		for _, id := range sortedIDs(ps) {
			p := ps[id]
			if !p.alive() {
				continue
			}
			if id != mb.cfg.NodeID && (p.meta.HasState || p.meta.ClusterID != "") {
				formed = true
			}
			cands = append(cands, id)
		}
		if formed {
			mb.logger.Info("a cluster already exists among the gossip peers; waiting to be added to it")
			return
		}
		set := strings.Join(cands, ",")
		if len(cands) != expect {
			if time.Since(warned) > 10*time.Second {
				warned = time.Now()
				if len(cands) > expect {
					mb.logger.Error("more servers than --bootstrap-expect see each other; not bootstrapping (start exactly that many, then add more)",
						"expect", expect, "seen", set)
				} else {
					mb.logger.Info("waiting for servers before bootstrapping", "expect", expect, "seen", set)
				}
			}
			lastSet, stable = "", 0
			continue
		}
		if set != lastSet {
			lastSet, stable = set, 0
			continue
		}
		if stable++; stable < bootstrapStable {
			continue
		}
		if cands[0] != mb.cfg.NodeID {
			continue // the smallest id bootstraps; we get the configuration from it
		}
		servers := make([]raft.Server, 0, len(cands))
		for _, id := range cands {
			servers = append(servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(id), Address: raft.ServerAddress(ps[id].meta.Raft)})
		}
		mb.bootstrap(servers)
		return
	}
}

func (mb *membership) bootstrap(servers []raft.Server) {
	err := mb.raft.BootstrapCluster(raft.Configuration{Servers: servers}).Error()
	if err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
		mb.logger.Error("bootstrap failed", "err", err)
		return
	}
	ids := make([]string, len(servers))
	for i, s := range servers {
		ids[i] = string(s.ID)
	}
	mb.logger.Info("bootstrapped the cluster", "voters", strings.Join(ids, ","))
	mb.gossip.update(func(m *memberMeta) { m.HasState = true })
}

func (mb *membership) hasConfiguration() bool {
	f := mb.raft.GetConfiguration()
	return f.Error() == nil && len(f.Configuration().Servers) > 0
}
