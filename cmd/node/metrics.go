package main

import (
	"strings"
	"sync"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
)

// hashicorp/raft and memberlist report their timings and events to
// go-metrics' global sink, under dotted keys with timings in milliseconds.
// Exported as they are, the series had camelCase names, millisecond units and
// their name as help. Instead, a sink of our own keeps the keys listed in
// bridgedFamilies, as Prometheus series with our names, seconds and help, and
// drops every other key (per-peer heartbeats, RPC decode times and the like:
// add a family here when one is needed).
//
// go-metrics has one global sink, so a process running several nodes (tests)
// reports their sum.

// bridgeKind says how a family's go-metrics values are exported.
type bridgeKind int

const (
	bridgeTimer   bridgeKind = iota // samples in milliseconds → histogram in seconds
	bridgeSamples                   // plain samples (counts) → histogram
	bridgeCounter                   // increments → counter
	bridgeGauge                     // last value → gauge
)

// bridgedFamily is one Prometheus family fed by one or more go-metrics keys.
type bridgedFamily struct {
	name, help string
	kind       bridgeKind
	buckets    []float64 // histograms; nil: timerBuckets
	// label, when set, tells the family's keys apart: keys maps each key to
	// its value of label; with goLabel set instead, the value is the
	// go-metrics label of that name (samples without it are dropped).
	label, goLabel string
	keys           map[string]string
}

var (
	timerBuckets    = prometheus.ExponentialBuckets(0.0001, 2, 18) // 0.1 ms to 13 s
	snapshotBuckets = prometheus.ExponentialBuckets(0.001, 2, 18)  // 1 ms to 131 s
	countBuckets    = prometheus.ExponentialBuckets(1, 2, 11)      // 1 to 1024
)

// bridgedFamilies are the raft and memberlist series worth watching: commit,
// log writes (the fsync), FSM hand-off and apply, snapshots, elections, and
// memberlist's view of this node's health. The go-metrics key follows each
// help text, for reading hashicorp's documentation.
var bridgedFamilies = []bridgedFamily{
	{name: "sessionstore_raft_commit_seconds", kind: bridgeTimer,
		help: "Leader: from an entry's write to the leader's log until a quorum has stored it (raft.commitTime).",
		keys: map[string]string{"raft.commitTime": ""}},
	{name: "sessionstore_raft_log_store_seconds", kind: bridgeTimer, label: "role",
		help: "Writes of new entries to this node's Raft log, fsync included: role=leader is the leader's write before it replicates them (raft.leader.dispatchLog), role=follower a follower's write of an AppendEntries batch (raft.rpc.appendEntries.storeLogs).",
		keys: map[string]string{"raft.leader.dispatchLog": "leader", "raft.rpc.appendEntries.storeLogs": "follower"}},
	{name: "sessionstore_raft_replication_append_entries_seconds", kind: bridgeTimer, label: "peer", goLabel: "peer_id",
		help: "Leader: one AppendEntries RPC to a follower, by follower id; a slow follower or link shows here (raft.replication.appendEntries.rpc).",
		keys: map[string]string{"raft.replication.appendEntries.rpc": ""}},
	{name: "sessionstore_raft_fsm_enqueue_seconds", kind: bridgeTimer,
		help: "Time the Raft loop took to hand newly committed entries to the FSM goroutine; it grows when applying falls behind (raft.fsm.enqueue).",
		keys: map[string]string{"raft.fsm.enqueue": ""}},
	{name: "sessionstore_raft_fsm_apply_seconds", kind: bridgeTimer,
		help: "One call of the FSM's apply as hashicorp/raft times it, from the FSM goroutine (raft.fsm.applyBatch, raft.fsm.apply); sessionstore_fsm_apply_batch_seconds times the bbolt transaction inside it.",
		keys: map[string]string{"raft.fsm.applyBatch": "", "raft.fsm.apply": ""}},
	{name: "sessionstore_raft_fsm_apply_batch_entries", kind: bridgeSamples, buckets: countBuckets,
		help: "Entries handed to the FSM in one apply call (raft.fsm.applyBatchNum).",
		keys: map[string]string{"raft.fsm.applyBatchNum": ""}},
	{name: "sessionstore_raft_snapshot_seconds", kind: bridgeTimer, buckets: snapshotBuckets,
		help: "One snapshot attempt, whole: capturing the FSM, creating, persisting and closing the snapshot; failed attempts included (raft.snapshot.takeSnapshot). Failures are counted by sessionstore_fsm_snapshot_errors_total.",
		keys: map[string]string{"raft.snapshot.takeSnapshot": ""}},
	{name: "sessionstore_raft_snapshot_capture_seconds", kind: bridgeTimer, buckets: snapshotBuckets,
		help: "The FSM's Snapshot call, which captures the state to persist (raft.fsm.snapshot).",
		keys: map[string]string{"raft.fsm.snapshot": ""}},
	{name: "sessionstore_raft_snapshot_create_seconds", kind: bridgeTimer, buckets: snapshotBuckets,
		help: "Creating a snapshot in the snapshot store, before it is written (raft.snapshot.create).",
		keys: map[string]string{"raft.snapshot.create": ""}},
	{name: "sessionstore_raft_snapshot_persist_seconds", kind: bridgeTimer, buckets: snapshotBuckets,
		help: "Writing a snapshot into the snapshot store, successful writes only (raft.snapshot.persist).",
		keys: map[string]string{"raft.snapshot.persist": ""}},
	{name: "sessionstore_raft_compact_logs_seconds", kind: bridgeTimer, buckets: snapshotBuckets,
		help: "Truncating the Raft log after a snapshot (raft.compactLogs).",
		keys: map[string]string{"raft.compactLogs": ""}},
	{name: "sessionstore_raft_state_changes_total", kind: bridgeCounter, label: "state",
		help: "Times this node entered each Raft state: leader counts elections it won, candidate elections it started (raft.state.leader, raft.state.candidate, raft.state.follower).",
		keys: map[string]string{"raft.state.leader": "leader", "raft.state.candidate": "candidate", "raft.state.follower": "follower"}},
	{name: "sessionstore_raft_heartbeat_timeouts_total", kind: bridgeCounter,
		help: "Times this node, as a follower, heard from no leader within the heartbeat timeout and stood for election (raft.transition.heartbeat_timeout).",
		keys: map[string]string{"raft.transition.heartbeat_timeout": ""}},
	{name: "sessionstore_raft_leader_lease_timeouts_total", kind: bridgeCounter,
		help: "Times this node, as the leader, stepped down because it had not heard from a quorum within the leader lease timeout (raft.transition.leader_lease_timeout).",
		keys: map[string]string{"raft.transition.leader_lease_timeout": ""}},
	{name: "sessionstore_memberlist_health_score", kind: bridgeGauge,
		help: "memberlist's awareness score of this node: 0 when healthy, higher while it misses probe acknowledgements (its own network or CPU is struggling), which slows its failure detection (memberlist.health.score).",
		keys: map[string]string{"memberlist.health.score": ""}},
	{name: "sessionstore_memberlist_probe_seconds", kind: bridgeTimer,
		help: "One failure-detector probe of a peer, indirect probes included (memberlist.probeNode).",
		keys: map[string]string{"memberlist.probeNode": ""}},
	{name: "sessionstore_memberlist_messages_total", kind: bridgeCounter, label: "type",
		help: "Membership claims this node processed, by type: alive, suspect (a peer failed a probe) and dead (memberlist.msg.alive, memberlist.msg.suspect, memberlist.msg.dead).",
		keys: map[string]string{"memberlist.msg.alive": "alive", "memberlist.msg.suspect": "suspect", "memberlist.msg.dead": "dead"}},
}

// goMetricsBridge is the go-metrics sink of bridgedFamilies and the
// Prometheus collector of their series.
type goMetricsBridge struct {
	byKey      map[string]bridgeTarget
	collectors []prometheus.Collector
}

// bridgeTarget is where one go-metrics key goes.
type bridgeTarget struct {
	kind    bridgeKind
	fixed   string // the label value of the key ("" without a label)
	goLabel string
	hist    *prometheus.HistogramVec
	counter *prometheus.CounterVec
	gauge   *prometheus.GaugeVec
}

func newGoMetricsBridge(families []bridgedFamily) *goMetricsBridge {
	b := &goMetricsBridge{byKey: map[string]bridgeTarget{}}
	for _, f := range families {
		var labels []string
		if f.label != "" {
			labels = []string{f.label}
		}
		var hist *prometheus.HistogramVec
		var counter *prometheus.CounterVec
		var gauge *prometheus.GaugeVec
		switch f.kind {
		case bridgeTimer, bridgeSamples:
			buckets := f.buckets
			if buckets == nil {
				buckets = timerBuckets
			}
			hist = prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: f.name, Help: f.help, Buckets: buckets}, labels)
			b.collectors = append(b.collectors, hist)
		case bridgeCounter:
			counter = prometheus.NewCounterVec(prometheus.CounterOpts{Name: f.name, Help: f.help}, labels)
			b.collectors = append(b.collectors, counter)
		case bridgeGauge:
			gauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: f.name, Help: f.help}, labels)
			b.collectors = append(b.collectors, gauge)
		}
		for key, fixed := range f.keys {
			t := bridgeTarget{kind: f.kind, fixed: fixed, goLabel: f.goLabel, hist: hist, counter: counter, gauge: gauge}
			b.byKey[key] = t
			// Counters and gauges with a fixed label exist from the start, so
			// that rate() and alerts see a 0 before the first event.
			if f.goLabel == "" {
				switch {
				case counter != nil:
					counter.WithLabelValues(t.values(nil)...)
				case gauge != nil:
					gauge.WithLabelValues(t.values(nil)...)
				}
			}
		}
	}
	return b
}

// values is the Prometheus label values of one go-metrics call (nil: drop it).
func (t bridgeTarget) values(labels []gometrics.Label) []string {
	if t.goLabel != "" {
		for _, l := range labels {
			if l.Name == t.goLabel {
				return []string{l.Value}
			}
		}
		return nil
	}
	if t.fixed != "" {
		return []string{t.fixed}
	}
	return []string{}
}

func (b *goMetricsBridge) target(key []string, kind ...bridgeKind) (bridgeTarget, bool) {
	t, ok := b.byKey[strings.Join(key, ".")]
	if !ok {
		return t, false
	}
	for _, k := range kind {
		if t.kind == k {
			return t, true
		}
	}
	return t, false
}

// The go-metrics sink.

func (b *goMetricsBridge) SetGauge(key []string, val float32) { b.SetGaugeWithLabels(key, val, nil) }
func (b *goMetricsBridge) SetGaugeWithLabels(key []string, val float32, labels []gometrics.Label) {
	if t, ok := b.target(key, bridgeGauge); ok {
		if v := t.values(labels); v != nil {
			t.gauge.WithLabelValues(v...).Set(float64(val))
		}
	}
}
func (b *goMetricsBridge) EmitKey(key []string, val float32) {}
func (b *goMetricsBridge) IncrCounter(key []string, val float32) {
	b.IncrCounterWithLabels(key, val, nil)
}
func (b *goMetricsBridge) IncrCounterWithLabels(key []string, val float32, labels []gometrics.Label) {
	if t, ok := b.target(key, bridgeCounter); ok && val >= 0 {
		if v := t.values(labels); v != nil {
			t.counter.WithLabelValues(v...).Add(float64(val))
		}
	}
}
func (b *goMetricsBridge) AddSample(key []string, val float32) { b.AddSampleWithLabels(key, val, nil) }
func (b *goMetricsBridge) AddSampleWithLabels(key []string, val float32, labels []gometrics.Label) {
	t, ok := b.target(key, bridgeTimer, bridgeSamples)
	if !ok {
		return
	}
	v := t.values(labels)
	if v == nil {
		return
	}
	x := float64(val)
	if t.kind == bridgeTimer {
		x /= 1000 // go-metrics timers are in milliseconds (TimerGranularity)
	}
	t.hist.WithLabelValues(v...).Observe(x)
}

// The Prometheus collector.

func (b *goMetricsBridge) Describe(ch chan<- *prometheus.Desc) {
	for _, c := range b.collectors {
		c.Describe(ch)
	}
}

func (b *goMetricsBridge) Collect(ch chan<- prometheus.Metric) {
	for _, c := range b.collectors {
		c.Collect(ch)
	}
}

var raftGoMetricsOnce struct {
	sync.Once
	bridge *goMetricsBridge
}

// raftGoMetrics installs, once per process, the bridge as go-metrics' global
// sink and returns it (nil if go-metrics refused it).
func raftGoMetrics() *goMetricsBridge {
	raftGoMetricsOnce.Do(func() {
		b := newGoMetricsBridge(bridgedFamilies)
		cfg := gometrics.DefaultConfig("") // keys as raft and memberlist name them
		cfg.EnableHostname = false
		cfg.EnableRuntimeMetrics = false // the Go collector covers the runtime
		cfg.TimerGranularity = time.Millisecond
		if _, err := gometrics.NewGlobal(cfg, b); err != nil {
			return
		}
		raftGoMetricsOnce.bridge = b
	})
	return raftGoMetricsOnce.bridge
}
