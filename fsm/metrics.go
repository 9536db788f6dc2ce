package fsm

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics holds every instrument of the fsm package.
//
// The lease counters are incremented while entries are applied, on every
// replica (and again by a replica that replays entries after a restore): they
// count what this node applied, not what the cluster decided once. They are
// side effects only; the FSM never reads them back, so Apply stays
// deterministic.
type Metrics struct {
	ApplySeconds    prometheus.Histogram
	ApplyEntries    prometheus.Counter
	SnapshotBytes   prometheus.Gauge
	SnapshotSeconds prometheus.Histogram
	Snapshots       prometheus.Counter
	SnapshotErrors  prometheus.Counter
	Restores        prometheus.Counter
	RestoreSeconds  prometheus.Histogram
	ArtifactErrors  prometheus.Counter
	ArtifactBytes   prometheus.Counter
	ArtifactLagging prometheus.Gauge
	ArtifactStored  prometheus.Gauge
	ArtifactCorrupt prometheus.Counter

	LeasesGranted  prometheus.Counter
	LeasesRenewed  prometheus.Counter
	LeasesReleased prometheus.Counter
	FencedAppends  prometheus.Counter
}

// NewMetrics registers the fsm instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	leases := prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "sessionstore_fsm_leases_total",
		Help: "Lease commands applied on this replica, by event: granted (Prepare of a cold session), renewed (KeepAlive), released (Release)."},
		[]string{"event"})
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
		Snapshots: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_snapshots_total", Help: "Snapshots taken and persisted by this node."}),
		SnapshotErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_snapshot_errors_total", Help: "Snapshot persists that failed."}),
		Restores: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_snapshot_restores_total", Help: "Snapshots restored into the state database (installed by Raft, or by the start-up guard)."}),
		RestoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name: "sessionstore_fsm_snapshot_restore_seconds", Help: "Duration of snapshot restores into the state database.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14)}),
		ArtifactErrors: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_artifact_write_errors_total", Help: "Failed artifact writes (retried)."}),
		ArtifactBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_artifact_written_bytes_total", Help: "Bytes written to artifacts."}),
		ArtifactLagging: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionstore_artifact_lagging_sessions", Help: "Sessions whose artifact is behind the state database."}),
		ArtifactStored: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "sessionstore_artifact_bytes", Help: "Total size of this node's artifacts, as recorded by the artifact writer's watermarks (no directory walk)."}),
		ArtifactCorrupt: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_artifact_verify_failures_total", Help: "Artifacts that failed verification when served (damaged on disk); each is served from the state database and rewritten."}),
		LeasesGranted:  leases.WithLabelValues("granted"),
		LeasesRenewed:  leases.WithLabelValues("renewed"),
		LeasesReleased: leases.WithLabelValues("released"),
		FencedAppends: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_fsm_fenced_appends_total", Help: "Appends refused with LEASE_FENCED (a superseded or missing lease epoch), applied on this replica."}),
	}
	if reg != nil {
		reg.MustRegister(m.ApplySeconds, m.ApplyEntries, m.SnapshotBytes, m.SnapshotSeconds, m.Snapshots, m.SnapshotErrors,
			m.Restores, m.RestoreSeconds, m.ArtifactErrors, m.ArtifactBytes, m.ArtifactLagging, m.ArtifactStored, m.ArtifactCorrupt,
			leases, m.FencedAppends)
	}
	return m
}

func (m *Metrics) observeBatch(n int, d time.Duration) {
	m.ApplyEntries.Add(float64(n))
	m.ApplySeconds.Observe(d.Seconds())
}
