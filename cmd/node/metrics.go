package main

import (
	"math"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	gmprom "github.com/hashicorp/go-metrics/prometheus"
	"github.com/hashicorp/raft"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/storage"
)

// registerOperatorMetrics adds the scrape-time gauges of issue 7 to reg: Raft
// state, term, last contact and configuration, the proposal queue, and the
// bbolt files' sizes and freelists. It also exports hashicorp/raft's and
// memberlist's own go-metrics (see raftGoMetrics).
func registerOperatorMetrics(reg prometheus.Registerer, node *cluster.Node) {
	r := node.Raft
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
			Help: "Commands waiting for an in-flight Raft slot on this node."},
			func() float64 { return float64(node.QueuedProposals()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "sessionstore_cluster_pending_bytes",
			Help: "Bytes of commands waiting for Raft on this node (bounded by --max-pending-bytes)."},
			func() float64 { return float64(node.PendingBytes()) }),
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
			n := 0
			for _, s := range f.Configuration().Servers {
				if s.Suffrage == suffrage {
					n++
				}
			}
			return float64(n)
		}))
	}
	registerBoltMetrics(reg, "state", func() storage.BoltStats { return node.State().Stats() })
	registerBoltMetrics(reg, "raft", func() storage.BoltStats { return node.RaftStore().Stats() })
	if sink := raftGoMetrics(); sink != nil {
		_ = reg.Register(sink) // AlreadyRegistered cannot happen: one sink per registry
	}
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

var raftGoMetricsOnce struct {
	sync.Once
	sink *gmprom.PrometheusSink
}

// raftGoMetrics installs, once per process, a Prometheus sink as go-metrics'
// global sink, which hashicorp/raft and memberlist report to: their own
// timings appear as sessionstore_raft_* and sessionstore_memberlist_*
// (summaries in milliseconds, e.g. sessionstore_raft_commitTime,
// sessionstore_raft_fsm_applyBatch, sessionstore_raft_replication_appendEntries_rpc;
// series unchanged for a minute are dropped). go-metrics has one global sink,
// so a process running several nodes (tests) reports their sum.
func raftGoMetrics() *gmprom.PrometheusSink {
	raftGoMetricsOnce.Do(func() {
		sink, err := gmprom.NewPrometheusSinkFrom(gmprom.PrometheusOpts{
			Expiration: time.Minute,
			Name:       "sessionstore_gometrics_sink",
			Registerer: prometheus.NewRegistry(), // not the default registry; each node's registry adds it
		})
		if err != nil {
			return
		}
		cfg := gometrics.DefaultConfig("sessionstore")
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false // the Go collector covers the runtime
		if _, err := gometrics.NewGlobal(cfg, sink); err != nil {
			return
		}
		raftGoMetricsOnce.sink = sink
	})
	return raftGoMetricsOnce.sink
}
