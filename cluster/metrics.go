package cluster

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/storage"
)

// Metrics holds every instrument of the cluster package.
type Metrics struct {
	Proposals *prometheus.CounterVec
	// proposalsOK is Proposals' "ok" child, resolved once: it counts every
	// write (the label lookup was ~1 % of a leader's CPU).
	proposalsOK prometheus.Counter
	GroupSize   prometheus.Histogram
	// CommitSeconds: one grouped entry, from raft.Apply until its future
	// resolves (quorum commit and the leader's own apply).
	CommitSeconds prometheus.Histogram
	// QueueSeconds: one command, from enqueue until its group is handed to
	// raft.Apply (observed only for proposals that carry their enqueue time).
	QueueSeconds prometheus.Histogram
	// RetentionDeleted counts sessions retention sweeps deleted (proposed by
	// this node as leader).
	RetentionDeleted prometheus.Counter
	// WatchWakeups counts Watch streams woken by a commit to re-read their
	// session (a commit wakes only the watchers of the sessions it touched).
	WatchWakeups prometheus.Counter
	// HandshakeRefusals counts Raft connections the handshake refused
	// (handshake.go), by direction: another cluster, or no or another key.
	HandshakeRefusals *prometheus.CounterVec
	// EntryBytes counts the bytes of grouped entries this node proposed as
	// leader, as encoded and as proposed (packed, fsm/pack.go): their ratio is
	// what packing saves in every node's Raft log and on the wire.
	EntryBytes                  *prometheus.CounterVec
	entryEncoded, entryProposed prometheus.Counter
}

// NewMetrics registers the cluster instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		HandshakeRefusals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_raft_handshake_refusals_total", Help: "Raft connections refused by the handshake (a node of another cluster, or without this cluster's key), by direction (incoming, outgoing)."},
			[]string{"direction"}),
		RetentionDeleted: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_retention_deleted_total", Help: "Sessions deleted by retention sweeps this node proposed as leader."}),
		WatchWakeups: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_watch_wakeups_total", Help: "Watch streams woken by a commit to re-read their session."}),
		Proposals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_cluster_proposals_total", Help: "Commands proposed, by outcome (ok, rejected, no_leader, unknown, error)."},
			[]string{"outcome"}),
		GroupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_cluster_group_commands", Help: "Commands grouped into one Raft entry.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
		CommitSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_cluster_commit_seconds", Help: "Grouped Raft entries, from raft.Apply until the future resolves (quorum commit and local apply).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
		EntryBytes: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_cluster_entry_bytes_total", Help: "Bytes of grouped Raft entries this node proposed as leader, as encoded and as proposed after packing (compression), by form (encoded, proposed)."},
			[]string{"form"}),
		QueueSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_cluster_queue_wait_seconds", Help: "Commands, from enqueue until their group is submitted to raft.Apply.",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}),
	}
	m.proposalsOK = m.Proposals.WithLabelValues("ok")
	m.entryEncoded = m.EntryBytes.WithLabelValues("encoded")
	m.entryProposed = m.EntryBytes.WithLabelValues("proposed")
	if reg != nil {
		reg.MustRegister(m.Proposals, m.GroupSize, m.CommitSeconds, m.QueueSeconds, m.RetentionDeleted, m.WatchWakeups, m.HandshakeRefusals, m.EntryBytes)
	}
	return m
}

func (m *Metrics) proposal(err error) {
	var de *sessionstore.Error
	switch {
	case err == nil:
		m.proposalsOK.Inc()
	case errors.Is(err, sessionstore.ErrNoLeader):
		m.Proposals.WithLabelValues("no_leader").Inc()
	case errors.Is(err, sessionstore.ErrOutcomeUnknown):
		m.Proposals.WithLabelValues("unknown").Inc()
	case errors.As(err, &de):
		m.Proposals.WithLabelValues("rejected").Inc()
	default:
		m.Proposals.WithLabelValues("error").Inc()
	}
}

// RaftStore exposes the node-local bbolt file (Raft term and vote, artifact
// watermarks) for its scrape-time gauges.
func (n *Node) RaftStore() *storage.RaftStore { return n.local }

// QueuedProposals is the number of commands waiting for a free in-flight slot.
func (n *Node) QueuedProposals() int { return len(n.proposer.queue) }

// PendingBytes is the size of the commands waiting for Raft on this node.
func (n *Node) PendingBytes() int64 {
	n.proposer.mu.Lock()
	defer n.proposer.mu.Unlock()
	return n.proposer.pending
}
