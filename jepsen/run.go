// Package jepsen is a Jepsen-style fault-injection harness for the session
// store: it runs the real cluster (the repository's docker-compose.yml), lets
// concurrent clients work on session logs while a nemesis partitions,
// pauses, kills and restarts nodes, records every operation, heals, reads
// the final state from every node and checks the history (package checker).
package jepsen

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/jepsen/checker"
	"github.com/sessionstore/sessionstore/jepsen/cluster"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Config is one run.
type Config struct {
	// Scenario names the workload mix: "faults" (appends and reads under the
	// full fault menu), "creators-planmode" (concurrent creators and plan-mode
	// toggles), "lease" (lease takeover of paused writers).
	Scenario string
	Seed     int64
	// Duration is the traffic time: warm-up, faults, then a quiet tail.
	Duration time.Duration
	// Warmup is the fault-free start.
	Warmup time.Duration
	// Faults is the fault menu (nil: the scenario's default; empty: none).
	Faults []string
	// Processes is the number of client processes per node (default 3); as
	// many again use every node.
	Processes int
	// OpTimeout bounds one operation (default 2 s).
	OpTimeout time.Duration
	// Out is the directory of this run's outputs.
	Out string
	// Backend runs the cluster. Run brings it up and down.
	Backend cluster.Backend
	// Progress receives one line per phase and fault (nil: discarded).
	Progress io.Writer
}

// Result is what a run produced.
type Result struct {
	Dir     string
	Summary Summary
	Report  checker.Report
}

// run is the state of one run, shared by workers, nemesis and workloads.
type run struct {
	cfg   Config
	b     cluster.Backend
	rec   *history.Recorder
	conns *conns
	rng   *rand.Rand // the schedule's; workers have their own
	wl    workload

	procs   atomic.Int64 // the last process number handed out
	markers atomic.Int64
	phase   atomic.Value // string: the current phase, for summaries

	mu      sync.Mutex
	phases  []phaseMark
	faults  []faultRecord
	unknown []string // reasons the run proved nothing (liveness)

	disk  diskState    // the disk faults' (nemesis only)
	quiet sync.RWMutex // locked: processes start no new operation
}

type phaseMark struct {
	Name  string `json:"name"`
	Start int64  `json:"start_ns"`
	End   int64  `json:"end_ns"`
}

func (r *run) logf(format string, args ...any) {
	if r.cfg.Progress != nil {
		fmt.Fprintf(r.cfg.Progress, "[%6.1fs] %s\n", float64(r.rec.Since())/1e9, fmt.Sprintf(format, args...))
	}
}

func (r *run) newProcess() int { return int(r.procs.Add(1)) }

func (r *run) marker(p int) string { return fmt.Sprintf("p%d-%d", p, r.markers.Add(1)) }

func (r *run) beginPhase(name string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.rec.Since()
	if n := len(r.phases); n > 0 && r.phases[n-1].End == 0 {
		r.phases[n-1].End = now
	}
	r.phases = append(r.phases, phaseMark{Name: name, Start: now})
	r.phase.Store(name)
}

// proc is one client process: one operation at a time, bound to a node (or
// to any node when node is ""). After an operation with an unknown outcome
// that may have written, it continues under a new process number.
type proc struct {
	id     int
	worker int // stable across renumbering: the workload's role for it
	node   cluster.Node
	rng    *rand.Rand
	last   history.Type // the outcome of its last operation
}

// client returns the client for this operation and the node it talks to.
func (r *run) client(p *proc) (*client.Client, cluster.Node) {
	n := p.node
	if n == "" {
		nodes := r.b.Nodes()
		n = nodes[p.rng.Intn(len(nodes))]
	}
	return r.conns.get(n), n
}

// op runs one operation: it records the invocation, runs call under the
// operation deadline, classifies the outcome and records the completion
// (fill adds the response's values). A write with an unknown outcome moves
// the process to a new number.
func (r *run) op(ctx context.Context, p *proc, inv history.Op, write bool,
	call func(ctx context.Context, c *client.Client) (history.Op, error)) history.Op {
	c, node := r.client(p)
	inv.Process, inv.Node = p.id, string(node)
	inv = r.rec.Invoke(inv)
	octx, cancel := context.WithTimeout(ctx, r.cfg.OpTimeout)
	done, err := call(octx, c)
	cancel()
	t, reason, msg := Classify(err)
	done.Type, done.Reason, done.Error = t, reason, msg
	if t != history.OK {
		// Only the outcome is known: values of a failed call are not results.
		done = history.Op{Type: t, Reason: reason, Error: msg}
	}
	out := r.rec.Complete(inv, done)
	p.last = t
	if t == history.Info && write {
		p.id = r.newProcess()
	}
	return out
}

// Run runs one scenario end to end and writes its outputs under cfg.Out.
func Run(ctx context.Context, cfg Config) (*Result, error) {
	if cfg.Processes <= 0 {
		cfg.Processes = 3
	}
	if cfg.OpTimeout <= 0 {
		cfg.OpTimeout = 2 * time.Second
	}
	if cfg.Warmup <= 0 {
		cfg.Warmup = cfg.Duration / 8
	}
	wl, err := newWorkload(cfg.Scenario)
	if err != nil {
		return nil, err
	}
	if err := os.MkdirAll(cfg.Out, 0o755); err != nil {
		return nil, err
	}
	rec, err := history.NewRecorder(filepath.Join(cfg.Out, "history.jsonl"))
	if err != nil {
		return nil, err
	}
	r := &run{cfg: cfg, b: cfg.Backend, rec: rec, rng: rand.New(rand.NewSource(cfg.Seed)), wl: wl}
	defer rec.Close()

	r.logf("scenario %s, seed %d, backend %s, %v of traffic; outputs in %s", cfg.Scenario, cfg.Seed, r.b.Name(), cfg.Duration, cfg.Out)
	r.beginPhase("setup")
	if menu, err := r.menu(); err != nil {
		return nil, err
	} else if slices.ContainsFunc(menu, func(f fault) bool { return f.name == "foreign-volume" }) {
		// A second deployment takes tens of seconds to form and stop: it
		// runs alongside the set-up and the warm-up.
		startForeign(ctx, r)
		defer r.disk.waitForeign()
	}
	upCtx, cancel := context.WithTimeout(ctx, 3*time.Minute)
	err = r.b.Up(upCtx)
	cancel()
	if err != nil {
		return nil, fmt.Errorf("cluster up: %w", err)
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
		defer cancel()
		_ = r.b.CollectLogs(dctx, filepath.Join(cfg.Out, "nodes"))
		_ = r.b.Down(dctx)
	}()
	if r.conns, err = dialAll(ctx, r.b); err != nil {
		return nil, err
	}
	defer r.conns.close()
	if err := r.waitHealthy(ctx, 2*time.Minute); err != nil {
		return nil, fmt.Errorf("cluster did not become healthy: %w", err)
	}
	if err := wl.setup(ctx, r); err != nil {
		return nil, fmt.Errorf("workload set-up: %w", err)
	}

	// Traffic and faults.
	r.beginPhase("warmup")
	trafficCtx, stopTraffic := context.WithCancel(ctx)
	var wg sync.WaitGroup
	r.startWorkers(trafficCtx, &wg)
	r.startStatusPoller(trafficCtx, &wg)
	nemesisErr := r.nemesis(ctx, cfg.Duration)
	stopTraffic()
	wg.Wait()

	// Heal, recover, final writes and reads.
	r.beginPhase("final")
	r.healAll(ctx)
	final, ferr := r.finalState(ctx)
	r.beginPhase("check")
	ops := rec.Ops()
	opt := checker.Options{MinOKBeforeFaults: 20, MinFaults: r.minFaults(), LinearizableTimeout: 60 * time.Second}
	rep := checker.Check(ops, final, opt)
	if ferr != nil {
		rep = withUnknown(rep, "final", ferr.Error())
	}
	if nemesisErr != nil {
		rep = withUnknown(rep, "nemesis", nemesisErr.Error())
	}
	for _, f := range r.faults {
		// A fault that did not take effect tested nothing: the run proves
		// less than it claims.
		if !f.Injected || !f.Verified {
			rep = withUnknown(rep, "nemesis", fmt.Sprintf("%s on %v at %.1f s was not verified to take effect: %s",
				f.Fault, f.Targets, float64(f.Start)/1e9, f.Note))
		}
	}
	sum := r.summary(ops, rep)
	res := &Result{Dir: cfg.Out, Summary: sum, Report: rep}
	if err := writeJSON(filepath.Join(cfg.Out, "summary.json"), sum); err != nil {
		return res, err
	}
	if err := writeJSON(filepath.Join(cfg.Out, "final.json"), final); err != nil {
		return res, err
	}
	if err := writeReport(cfg.Out, ops, sum, rep); err != nil {
		return res, err
	}
	r.logf("valid: %s (%d operations, %d faults)", rep.Valid, sum.Operations, len(sum.Nemesis))
	return res, nil
}

// withUnknown adds a result that makes the report unknown unless it is
// already false.
func withUnknown(rep checker.Report, name, why string) checker.Report {
	rep.Results = append(rep.Results, checker.Result{Name: name, Valid: checker.Unknown,
		Witnesses: []checker.Witness{{Text: why}}})
	if rep.Valid == checker.True {
		rep.Valid = checker.Unknown
	}
	return rep
}

func writeJSON(path string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// startWorkers runs Processes bound workers per node and as many unbound.
func (r *run) startWorkers(ctx context.Context, wg *sync.WaitGroup) {
	var bindings []cluster.Node
	for _, n := range r.b.Nodes() {
		for i := 0; i < r.cfg.Processes; i++ {
			bindings = append(bindings, n)
		}
	}
	for i := 0; i < r.cfg.Processes; i++ {
		bindings = append(bindings, "")
	}
	for i, n := range bindings {
		p := &proc{id: r.newProcess(), worker: i, node: n, rng: rand.New(rand.NewSource(r.cfg.Seed*1000 + int64(i)))}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				r.quiet.RLock() // held by the nemesis while it wants no new writes
				r.quiet.RUnlock()
				r.wl.step(ctx, r, p)
				// Pace the processes (about 20 operations a second each), and
				// back off after a failure: a node that refuses connections
				// must not turn the history into a flood of instant errors.
				pause := time.Duration(20+p.rng.Intn(40)) * time.Millisecond
				if p.last != history.OK {
					pause = time.Duration(150+p.rng.Intn(200)) * time.Millisecond
				}
				select {
				case <-ctx.Done():
				case <-time.After(pause):
				}
			}
		}()
	}
}

// startStatusPoller records every node's Raft view once a second.
func (r *run) startStatusPoller(ctx context.Context, wg *sync.WaitGroup) {
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Second)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			view := map[string]any{}
			for _, n := range r.b.Nodes() {
				sctx, cancel := context.WithTimeout(ctx, 500*time.Millisecond)
				st, err := r.conns.get(n).Status(sctx)
				cancel()
				if err != nil {
					view[string(n)] = map[string]any{"error": "unreachable"}
					continue
				}
				view[string(n)] = map[string]any{"state": st.State, "leader": st.LeaderId, "term": st.Term,
					"commit": st.CommitIndex, "applied": st.AppliedIndex}
			}
			r.rec.Note(history.FStatus, "", view)
		}
	}()
}

// leader returns the node every reachable node agrees leads, "" if none.
func (r *run) leader(ctx context.Context) cluster.Node {
	votes := map[string]int{}
	for _, n := range r.b.Nodes() {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := r.conns.get(n).Status(sctx)
		cancel()
		if err == nil && st.LeaderId != "" {
			votes[st.LeaderId]++
		}
	}
	for id, v := range votes {
		if v*2 > len(r.b.Nodes()) {
			return cluster.Node(id)
		}
	}
	return ""
}

// waitHealthy waits until every node answers Status, all follow one
// leader, and each has applied at least the commit index the leader had when
// it was first seen (under load the commit index keeps moving; catching up
// to a fixed point is what "caught up" means).
func (r *run) waitHealthy(ctx context.Context, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	var target uint64
	var targetLeader, last string
	for time.Now().Before(deadline) {
		if err := ctx.Err(); err != nil {
			return err
		}
		leader, commit, statuses, why := r.poll(ctx)
		switch {
		case why != "":
			last = why
		case leader != targetLeader:
			targetLeader, target = leader, commit
			last = "leader changed to " + leader
		default:
			last = ""
			for n, st := range statuses {
				if st.LeaderId != leader {
					last = fmt.Sprintf("%s follows %q, not %s", n, st.LeaderId, leader)
				} else if st.AppliedIndex < target {
					last = fmt.Sprintf("%s applied %d < %d", n, st.AppliedIndex, target)
				}
			}
			if last == "" {
				return nil
			}
		}
		time.Sleep(250 * time.Millisecond)
	}
	return fmt.Errorf("after %v: %s", limit, last)
}

// poll reads every node's Status; why says what is missing.
func (r *run) poll(ctx context.Context) (leader string, commit uint64, statuses map[cluster.Node]*sessionpb.StatusResponse, why string) {
	statuses = map[cluster.Node]*sessionpb.StatusResponse{}
	for _, n := range r.b.Nodes() {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := r.conns.get(n).Status(sctx)
		cancel()
		if err != nil {
			return "", 0, nil, fmt.Sprintf("%s does not answer: %v", n, err)
		}
		statuses[n] = st
		if st.State == "Leader" {
			leader, commit = st.NodeId, st.CommitIndex
		}
	}
	if leader == "" {
		return "", 0, nil, "no leader"
	}
	return leader, commit, statuses, ""
}
