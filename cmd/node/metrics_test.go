package main

// The operator metrics (issue 7) move under a real workload. Helpers start
// with "mt" (other test files of this package use other prefixes).

import (
	"context"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"strings"
	"testing"
	"time"

	gometrics "github.com/hashicorp/go-metrics"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// A 3-node cluster serves a small workload (create, appends, a fenced append,
// prepare + keepalive + release, load, a snapshot, writes through a follower);
// the leader's and the follower's /metrics then show every family moved. No
// timing is asserted: only that the series exist and counted.
func TestMetrics_WorkloadMovesOperatorMetrics(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	nodes := startCluster(t, 3)
	leader, follower := followerOf(t, nodes)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// Through the leader: a session with a lease cycle and one fenced append.
	const id = "metrics-session"
	if _, err := leader.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: id, CreatedAt: 1}, RequestId: "mt-create"}); err != nil {
		t.Fatalf("create: %v", err)
	}
	for k := int64(0); k < 3; k++ {
		if _, err := leader.Client.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{clEvent(k, fmt.Sprint("m", k))}}); err != nil {
			t.Fatalf("append %d: %v", k, err)
		}
	}
	_, lease, err := leader.Client.Prepare(ctx, &pb.PrepareRequest{SessionId: id, Owner: "mt-owner", TtlMs: 60_000, RequestId: "mt-prepare"})
	if err != nil {
		t.Fatalf("prepare: %v", err)
	}
	if _, err := leader.Client.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{clEvent(3, "m3")}, LeaseEpoch: lease.Epoch}); err != nil {
		t.Fatalf("append under the lease: %v", err)
	}
	_, err = leader.Client.Append(ctx, &pb.AppendRequest{SessionId: id, Events: []string{clEvent(4, "m4")}, LeaseEpoch: lease.Epoch + 1})
	if de := mtDomainErr(err); de == nil || de.Reason != sessionstore.ReasonLeaseFenced {
		t.Fatalf("append with a wrong epoch: %v, want LEASE_FENCED", err)
	}
	if lease, err = leader.Client.KeepAlive(ctx, &pb.KeepAliveRequest{Lease: lease, RequestId: "mt-keepalive"}); err != nil {
		t.Fatalf("keepalive: %v", err)
	}
	if err := leader.Client.Release(ctx, &pb.ReleaseRequest{SessionId: id, LeaseEpoch: lease.Epoch, RequestId: "mt-release"}); err != nil {
		t.Fatalf("release: %v", err)
	}
	if _, err := leader.Client.Load(ctx, &pb.LoadRequest{SessionId: id, RequestId: "mt-load"}); err != nil {
		t.Fatalf("load: %v", err)
	}
	// Through a follower: forwarded to the leader.
	const fid = "metrics-forwarded"
	if _, err := follower.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: fid, CreatedAt: 1}, RequestId: "mt-fcreate"}); err != nil {
		t.Fatalf("create through the follower: %v", err)
	}
	if _, err := follower.Client.Append(ctx, &pb.AppendRequest{SessionId: fid, Events: []string{clEvent(0, "f0")}}); err != nil {
		t.Fatalf("append through the follower: %v", err)
	}
	if err := leader.srv.node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	leader.WaitArtifacts()

	lm := mtScrape(t, leader.srv.httpAddr)
	fm := mtScrape(t, follower.srv.httpAddr)

	const svc = "/sessionstore.v1.SessionPersistence/"
	for _, method := range []string{"Create", "Append", "Prepare", "KeepAlive", "Release", "Load"} {
		mtWantPositive(t, lm, "sessionstore_rpc_requests_total", "method", svc+method, "code", "OK")
	}
	mtWantPositive(t, lm, "sessionstore_rpc_requests_total", "method", svc+"Append", "code", "FailedPrecondition")
	mtWantPositive(t, lm, "sessionstore_rpc_duration_seconds", "method", svc+"Append")
	mtWantPositive(t, fm, "sessionstore_rpc_requests_total", "method", svc+"Create", "code", "OK")

	// Raft state and configuration.
	mtWantValue(t, lm, "sessionstore_raft_state", 1, "state", "leader")
	mtWantValue(t, lm, "sessionstore_raft_state", 0, "state", "follower")
	mtWantValue(t, fm, "sessionstore_raft_state", 1, "state", "follower")
	mtWantValue(t, lm, "sessionstore_raft_servers", 3, "suffrage", "voter")
	mtWantValue(t, lm, "sessionstore_raft_servers", 0, "suffrage", "nonvoter")
	mtWantPositive(t, lm, "sessionstore_raft_term")
	mtWantValue(t, lm, "sessionstore_raft_last_contact_seconds", 0)
	if v, ok := mtValue(fm, "sessionstore_raft_last_contact_seconds"); !ok || math.IsNaN(v) || v < 0 {
		t.Errorf("follower sessionstore_raft_last_contact_seconds = %v (found %v), want a number ≥ 0", v, ok)
	}
	mtWantPositive(t, lm, "sessionstore_raft_commit_index")
	mtWantPresent(t, lm, "sessionstore_cluster_queued_proposals")

	// Commit path and FSM.
	mtWantPositive(t, lm, "sessionstore_cluster_commit_seconds")
	mtWantPositive(t, lm, "sessionstore_cluster_group_commands")
	mtWantPositive(t, lm, "sessionstore_cluster_entry_bytes_total", "form", "encoded")
	mtWantPositive(t, lm, "sessionstore_cluster_entry_bytes_total", "form", "proposed")
	mtWantPositive(t, lm, "sessionstore_cluster_proposals_total", "outcome", "ok")
	mtWantPresent(t, lm, "sessionstore_cluster_queue_wait_seconds")
	mtWantPositive(t, lm, "sessionstore_fsm_applied_entries_total")
	mtWantPositive(t, fm, "sessionstore_fsm_applied_entries_total")
	mtWantPositive(t, lm, "sessionstore_fsm_apply_batch_seconds")
	mtWantPositive(t, lm, "sessionstore_fsm_leases_total", "event", "granted")
	mtWantPositive(t, lm, "sessionstore_fsm_leases_total", "event", "renewed")
	mtWantPositive(t, lm, "sessionstore_fsm_leases_total", "event", "released")
	mtWantPositive(t, lm, "sessionstore_fsm_fenced_appends_total")
	mtWantPositive(t, lm, "sessionstore_fsm_snapshots_total")
	mtWantPositive(t, lm, "sessionstore_fsm_snapshot_bytes")
	mtWantPositive(t, lm, "sessionstore_fsm_snapshot_persist_seconds")
	mtWantPresent(t, lm, "sessionstore_fsm_snapshot_restore_seconds")

	// bbolt files.
	for _, db := range []string{"state", "raft"} {
		mtWantPositive(t, lm, "sessionstore_bbolt_file_bytes", "db", db)
		mtWantPresent(t, lm, "sessionstore_bbolt_free_pages", "db", db)
		mtWantPresent(t, lm, "sessionstore_bbolt_pending_pages", "db", db)
		mtWantPresent(t, lm, "sessionstore_bbolt_freelist_bytes", "db", db)
	}
	mtWantPositive(t, lm, "sessionstore_bbolt_free_bytes", "db", "state")

	// Artifacts.
	mtWantPositive(t, lm, "sessionstore_artifact_written_bytes_total")
	mtWantPositive(t, lm, "sessionstore_artifact_bytes")
	mtWantValue(t, lm, "sessionstore_artifact_lagging_sessions", 0)

	// hashicorp/raft's own go-metrics, bridged (one process-wide sink).
	mtWantPositive(t, lm, "sessionstore_raft_commit_seconds")
	mtWantPositive(t, lm, "sessionstore_raft_log_store_seconds", "role", "leader")
	mtWantPositive(t, fm, "sessionstore_raft_log_store_seconds", "role", "follower")
	mtWantPositive(t, lm, "sessionstore_raft_snapshot_seconds")
	mtWantPositive(t, lm, "sessionstore_raft_state_changes_total", "state", "leader")
	mtWantPositive(t, lm, "sessionstore_cluster_voters_alive")

	// Forwarding is counted by the follower once the forwarder reports it
	// (the family is absent until its first increment).
	if _, ok := lm["sessionstore_rpc_forwarded_total"]; ok || fm["sessionstore_rpc_forwarded_total"] != nil {
		mtWantPositive(t, fm, "sessionstore_rpc_forwarded_total", "method", svc+"Append")
	} else {
		t.Log("sessionstore_rpc_forwarded_total not exported yet: forwarded calls not checked")
	}
}

// Every series a node serves has a real help text and a Prometheus name:
// snake_case, with no millisecond unit (hashicorp's go-metrics used to come
// through with camelCase names, milliseconds and their name as help).
func TestMetrics_NamesHelpAndUnits(t *testing.T) {
	n := startTestNode(t, "")
	n.waitReady(true)
	const id = "mt-names"
	ctCreate(t, n, ctMeta(id, "/mt"))
	ctAppend(t, n, id, clEvent(0, "a"), clEvent(1, "b"))
	if err := n.srv.node.Snapshot(); err != nil {
		t.Fatalf("snapshot: %v", err)
	}
	fams := mtScrape(t, n.srv.httpAddr)

	snake := regexp.MustCompile(`^[a-z_][a-z0-9_]*$`)
	millis := regexp.MustCompile(`(^|_)(ms|msec|millis|milliseconds?)(_|$)`)
	for name, f := range fams {
		help := strings.TrimSpace(f.GetHelp())
		if help == "" || help == name || strings.EqualFold(strings.TrimSuffix(help, "."), name) {
			t.Errorf("%s: help %q, want a description", name, f.GetHelp())
		}
		if !snake.MatchString(name) {
			t.Errorf("%s: not a snake_case Prometheus name", name)
		}
		if millis.MatchString(name) || strings.Contains(strings.ToLower(help), "in milliseconds") {
			t.Errorf("%s (%q): a millisecond unit; Prometheus wants seconds", name, help)
		}
	}
	// The bridged raft series are there, in seconds, and the single voter is
	// alive.
	mtWantPositive(t, fams, "sessionstore_raft_commit_seconds")
	mtWantPositive(t, fams, "sessionstore_raft_log_store_seconds", "role", "leader")
	mtWantPositive(t, fams, "sessionstore_raft_fsm_apply_seconds")
	mtWantPositive(t, fams, "sessionstore_raft_snapshot_persist_seconds")
	mtWantPresent(t, fams, "sessionstore_raft_leader_lease_timeouts_total")
	mtWantValue(t, fams, "sessionstore_cluster_voters_alive", 1)
}

// The go-metrics bridge: each kept key lands in its family with its label, in
// seconds for timers; other keys, calls of the wrong kind and per-peer samples
// without their peer are dropped.
func TestMetrics_GoMetricsBridge(t *testing.T) {
	peer := []gometrics.Label{{Name: "peer_id", Value: "n2"}}
	tests := []struct {
		name   string
		feed   func(b *goMetricsBridge)
		family string
		labels []string
		count  uint64  // histograms: samples
		value  float64 // histograms: sum; counters and gauges: value
	}{
		{"timer in seconds", func(b *goMetricsBridge) { b.AddSample([]string{"raft", "commitTime"}, 250) },
			"sessionstore_raft_commit_seconds", nil, 1, 0.25},
		{"two keys, one family", func(b *goMetricsBridge) {
			b.AddSample([]string{"raft", "fsm", "applyBatch"}, 2)
			b.AddSample([]string{"raft", "fsm", "apply"}, 3)
		}, "sessionstore_raft_fsm_apply_seconds", nil, 2, 0.005},
		{"fixed label", func(b *goMetricsBridge) { b.AddSample([]string{"raft", "rpc", "appendEntries", "storeLogs"}, 4) },
			"sessionstore_raft_log_store_seconds", []string{"role", "follower"}, 1, 0.004},
		{"label from go-metrics", func(b *goMetricsBridge) {
			b.AddSampleWithLabels([]string{"raft", "replication", "appendEntries", "rpc"}, 8, peer)
			b.AddSample([]string{"raft", "replication", "appendEntries", "rpc"}, 8) // no peer: dropped
		}, "sessionstore_raft_replication_append_entries_seconds", []string{"peer", "n2"}, 1, 0.008},
		{"count samples unscaled", func(b *goMetricsBridge) { b.AddSample([]string{"raft", "fsm", "applyBatchNum"}, 7) },
			"sessionstore_raft_fsm_apply_batch_entries", nil, 1, 7},
		{"counter", func(b *goMetricsBridge) {
			b.IncrCounter([]string{"raft", "state", "leader"}, 1)
			b.IncrCounter([]string{"raft", "state", "leader"}, 1)
		}, "sessionstore_raft_state_changes_total", []string{"state", "leader"}, 0, 2},
		{"counter at 0 before any event", func(b *goMetricsBridge) {},
			"sessionstore_raft_leader_lease_timeouts_total", nil, 0, 0},
		{"gauge", func(b *goMetricsBridge) { b.SetGaugeWithLabels([]string{"memberlist", "health", "score"}, 3, nil) },
			"sessionstore_memberlist_health_score", nil, 0, 3},
		{"wrong kind dropped", func(b *goMetricsBridge) { b.IncrCounter([]string{"raft", "commitTime"}, 5) },
			"sessionstore_raft_commit_seconds", nil, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			b := newGoMetricsBridge(bridgedFamilies)
			tc.feed(b)
			b.AddSample([]string{"raft", "net", "rpcDecode"}, 1) // not kept
			reg := prometheus.NewRegistry()
			reg.MustRegister(b)
			got, err := reg.Gather()
			if err != nil {
				t.Fatal(err)
			}
			fams := map[string]*dto.MetricFamily{}
			for _, f := range got {
				fams[f.GetName()] = f
				if strings.Contains(f.GetName(), "rpc_decode") || strings.Contains(f.GetName(), "rpcDecode") {
					t.Errorf("%s exported: only the listed keys are kept", f.GetName())
				}
			}
			f := fams[tc.family]
			var m *dto.Metric
			if f != nil {
			metric:
				for _, cand := range f.Metric {
					for i := 0; i+1 < len(tc.labels); i += 2 {
						found := false
						for _, lp := range cand.Label {
							found = found || lp.GetName() == tc.labels[i] && lp.GetValue() == tc.labels[i+1]
						}
						if !found {
							continue metric
						}
					}
					m = cand
				}
			}
			switch {
			case m == nil && (tc.count > 0 || tc.value != 0):
				t.Fatalf("%s%v: not exported", tc.family, tc.labels)
			case m == nil:
			case m.Histogram != nil:
				if h := m.Histogram; h.GetSampleCount() != tc.count || math.Abs(h.GetSampleSum()-tc.value) > 1e-9 {
					t.Errorf("%s%v: %d samples summing to %v, want %d summing to %v", tc.family, tc.labels, h.GetSampleCount(), h.GetSampleSum(), tc.count, tc.value)
				}
			case m.Counter != nil:
				if v := m.Counter.GetValue(); v != tc.value {
					t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, v, tc.value)
				}
			case m.Gauge != nil:
				if v := m.Gauge.GetValue(); v != tc.value {
					t.Errorf("%s%v = %v, want %v", tc.family, tc.labels, v, tc.value)
				}
			}
		})
	}
}

// mtScrape GETs /metrics and parses the text format.
func mtScrape(t *testing.T, httpAddr string) map[string]*dto.MetricFamily {
	t.Helper()
	hc := &http.Client{Timeout: 10 * time.Second}
	resp, err := hc.Get("http://" + httpAddr + "/metrics")
	if err != nil {
		t.Fatalf("GET /metrics: %v", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /metrics: %s", resp.Status)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(resp.Body)
	if err != nil {
		t.Fatalf("parse /metrics: %v", err)
	}
	return fams
}

// mtValue sums the samples of family name whose labels include the given
// name/value pairs: counter and gauge values, histogram and summary counts.
func mtValue(fams map[string]*dto.MetricFamily, name string, labels ...string) (float64, bool) {
	f := fams[name]
	if f == nil {
		return 0, false
	}
	var sum float64
	found := false
metric:
	for _, m := range f.Metric {
		for i := 0; i+1 < len(labels); i += 2 {
			match := false
			for _, lp := range m.Label {
				if lp.GetName() == labels[i] && lp.GetValue() == labels[i+1] {
					match = true
				}
			}
			if !match {
				continue metric
			}
		}
		found = true
		switch {
		case m.Counter != nil:
			sum += m.Counter.GetValue()
		case m.Gauge != nil:
			sum += m.Gauge.GetValue()
		case m.Histogram != nil:
			sum += float64(m.Histogram.GetSampleCount())
		case m.Summary != nil:
			sum += float64(m.Summary.GetSampleCount())
		case m.Untyped != nil:
			sum += m.Untyped.GetValue()
		}
	}
	return sum, found
}

func mtWantPresent(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) {
	t.Helper()
	if _, ok := mtValue(fams, name, labels...); !ok {
		t.Errorf("%s%v: missing", name, labels)
	}
}

func mtWantPositive(t *testing.T, fams map[string]*dto.MetricFamily, name string, labels ...string) {
	t.Helper()
	if v, ok := mtValue(fams, name, labels...); !ok || !(v > 0) {
		t.Errorf("%s%v = %v (found %v), want > 0", name, labels, v, ok)
	}
}

func mtWantValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want float64, labels ...string) {
	t.Helper()
	if v, ok := mtValue(fams, name, labels...); !ok || v != want {
		t.Errorf("%s%v = %v (found %v), want %v", name, labels, v, ok, want)
	}
}

// mtDomainErr decodes a gRPC error's ErrorInfo into the domain error.
func mtDomainErr(err error) *sessionstore.Error {
	if err == nil {
		return nil
	}
	_, de := ctStatus(err)
	return de
}
