package cluster

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/sessionstore/sessionstore"
)

// Metrics holds every instrument of the cluster package.
type Metrics struct {
	Proposals *prometheus.CounterVec
	GroupSize prometheus.Histogram
}

// NewMetrics registers the cluster instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Proposals: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_cluster_proposals_total", Help: "Commands proposed, by outcome (ok, rejected, no_leader, unknown, error)."},
			[]string{"outcome"}),
		GroupSize: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_cluster_group_commands", Help: "Commands grouped into one Raft entry.",
			Buckets: prometheus.ExponentialBuckets(1, 2, 10)}),
	}
	if reg != nil {
		reg.MustRegister(m.Proposals, m.GroupSize)
	}
	return m
}

func (m *Metrics) proposal(err error) {
	var de *sessionstore.Error
	switch {
	case err == nil:
		m.Proposals.WithLabelValues("ok").Inc()
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
