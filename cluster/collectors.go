package cluster

import (
	"context"
	"math"
	"time"

	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore/storage"
)

// registerCollectors exports the node's gauges, read at scrape time: Raft
// state, term, indexes, last contact and configuration, the state database,
// readiness, the proposal queue, the bbolt files' sizes and freelists, and
// the voters gossip sees alive.
func (n *Node) registerCollectors(reg prometheus.Registerer) {
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_raft_is_leader", Help: "1 when this node is the Raft leader."},
			func() float64 {
				if n.raft.State() == raft.Leader {
					return 1
				}
				return 0
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_raft_commit_index", Help: "Raft commit index."},
			func() float64 { return float64(n.raft.CommitIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_raft_applied_index", Help: "Raft index applied to the state database."},
			func() float64 { return float64(n.raft.AppliedIndex()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_state_db_bytes", Help: "Size of the state database file."},
			func() float64 { return float64(n.state.Size()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "sessionstore_checksum_failures_total", Help: "Stored records and events that failed their checksum when read (a damaged state database): never served."},
			func() float64 { return float64(n.state.ChecksumFailures()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_ready", Help: "1 when /readyz would answer 200."},
			func() float64 {
				if n.Ready() == nil {
					return 1
				}
				return 0
			}),
	)
	n.registerOperatorCollectors(reg)
}

// registerOperatorCollectors adds the gauges of issue 7.
func (n *Node) registerOperatorCollectors(reg prometheus.Registerer) {
	r := func() *raft.Raft { return n.raft }
	for _, st := range []raft.RaftState{raft.Leader, raft.Follower, raft.Candidate, raft.Shutdown} {
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sessionstore_raft_state",
			Help:        "1 for this node's current Raft state, 0 for the others.",
			ConstLabels: prometheus.Labels{"state": raftStateLabel(st)},
		}, func() float64 {
			if r().State() == st {
				return 1
			}
			return 0
		}))
	}
	reg.MustRegister(
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_raft_term", Help: "Current Raft term."},
			func() float64 { return float64(r().CurrentTerm()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_raft_last_contact_seconds",
			Help: "Seconds since this node last heard from the leader (0 on the leader; NaN before any contact)."},
			func() float64 {
				if r().State() == raft.Leader {
					return 0
				}
				last := r().LastContact()
				if last.IsZero() {
					return math.NaN()
				}
				return time.Since(last).Seconds()
			}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_cluster_queued_proposals",
			Help: "Commands waiting for an in-flight Raft slot on this n."},
			func() float64 { return float64(n.QueuedProposals()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_cluster_pending_bytes",
			Help: "Bytes of commands waiting for Raft on this node (bounded by --max-pending-bytes)."},
			func() float64 { return float64(n.PendingBytes()) }),
	)
	for _, suffrage := range []raft.ServerSuffrage{raft.Voter, raft.Nonvoter} {
		name := "voter"
		if suffrage == raft.Nonvoter {
			name = "nonvoter"
		}
		reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "sessionstore_raft_servers",
			Help:        "Servers in this node's latest Raft configuration, by suffrage.",
			ConstLabels: prometheus.Labels{"suffrage": name},
		}, func() float64 {
			f := r().GetConfiguration()
			if f.Error() != nil {
				return math.NaN()
			}
			count := 0
			for _, s := range f.Configuration().Servers {
				if s.Suffrage == suffrage {
					count++
				}
			}
			return float64(count)
		}))
	}
	registerBoltMetrics(reg, "state", func() storage.BoltStats { return n.state.Stats() })
	registerBoltMetrics(reg, "raft", func() storage.BoltStats { return n.local.Stats() })
	reg.MustRegister(prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_cluster_voters_alive",
		Help: "Voters of this node's latest Raft configuration that gossip reports alive, this node included; with sessionstore_raft_servers{suffrage=\"voter\"} it tells how many more failures the quorum survives."},
		func() float64 {
			ms, err := n.Members(context.Background())
			if err != nil {
				return math.NaN()
			}
			count := 0
			for _, m := range ms {
				if m.Suffrage == raft.Voter.String() && m.Health == "alive" {
					count++
				}
			}
			return float64(count)
		}))
}

func raftStateLabel(s raft.RaftState) string {
	switch s {
	case raft.Leader:
		return "leader"
	case raft.Follower:
		return "follower"
	case raft.Candidate:
		return "candidate"
	default:
		return "shutdown"
	}
}

// registerBoltMetrics exports one bbolt file's size and freelist, labelled
// db=<db>, read at scrape time.
func registerBoltMetrics(reg prometheus.Registerer, db string, stats func() storage.BoltStats) {
	gauge := func(name, help string, v func(storage.BoltStats) float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: prometheus.Labels{"db": db}},
			func() float64 { return v(stats()) })
	}
	reg.MustRegister(
		gauge("sessionstore_bbolt_file_bytes", "Size of the bbolt file (db=state: the state database; db=raft: Raft term/vote and artifact watermarks).",
			func(s storage.BoltStats) float64 { return float64(s.FileBytes) }),
		gauge("sessionstore_bbolt_free_pages", "Pages on the bbolt freelist, reusable now.",
			func(s storage.BoltStats) float64 { return float64(s.FreePages) }),
		gauge("sessionstore_bbolt_pending_pages", "Pages freed by write transactions, reusable once older read transactions end.",
			func(s storage.BoltStats) float64 { return float64(s.PendingPages) }),
		gauge("sessionstore_bbolt_free_bytes", "Bytes in free and pending pages of the bbolt file.",
			func(s storage.BoltStats) float64 { return float64(s.FreeBytes) }),
		gauge("sessionstore_bbolt_freelist_bytes", "Bytes the bbolt freelist takes in memory (it is not written: NoFreelistSync).",
			func(s storage.BoltStats) float64 { return float64(s.FreelistBytes) }),
	)
}
