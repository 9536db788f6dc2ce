package fsm

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds every instrument of the fsm package.
type Metrics struct {
	ApplySeconds    prometheus.Histogram
	ApplyEntries    prometheus.Counter
	SnapshotBytes   prometheus.Gauge
	SnapshotSeconds prometheus.Histogram
	Restores        prometheus.Counter
	ArtifactErrors  prometheus.Counter
	ArtifactBytes   prometheus.Counter
	ArtifactLagging prometheus.Gauge
}

// NewMetrics registers the fsm instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		ApplySeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_fsm_apply_batch_seconds", Help: "Duration of one ApplyBatch (one bbolt transaction).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 16)}),
		ApplyEntries: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_applied_entries_total", Help: "Raft entries handed to the FSM."}),
		SnapshotBytes: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionstore_fsm_snapshot_bytes", Help: "Compressed size of the last persisted snapshot."}),
		SnapshotSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_fsm_snapshot_persist_seconds", Help: "Duration of snapshot persists.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		Restores: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_snapshot_restores_total", Help: "Snapshots restored into the state database."}),
		ArtifactErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_artifact_write_errors_total", Help: "Failed artifact writes (retried)."}),
		ArtifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_artifact_written_bytes_total", Help: "Bytes written to artifacts."}),
		ArtifactLagging: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionstore_artifact_lagging_sessions", Help: "Sessions whose artifact is behind the state database."}),
	}
	if reg != nil {
		reg.MustRegister(m.ApplySeconds, m.ApplyEntries, m.SnapshotBytes, m.SnapshotSeconds, m.Restores,
			m.ArtifactErrors, m.ArtifactBytes, m.ArtifactLagging)
	}
	return m
}

func (m *Metrics) observeBatch(n int, d time.Duration) {
	m.ApplyEntries.Add(float64(n))
	m.ApplySeconds.Observe(d.Seconds())
}
