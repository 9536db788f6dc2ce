package jepsen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/cluster"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// fault is one kind of fault. inject picks its targets (the leader, a random
// node, …), injects it and returns the undo; verify, run at the end of the
// hold, checks that the fault took effect.
type fault struct {
	name   string
	weight int
	inject func(ctx context.Context, r *run) (targets []cluster.Node, undo func(context.Context) error, err error)
	verify func(ctx context.Context, r *run, targets []cluster.Node) (bool, string)
	// undoLimit bounds the undo (default a minute): a node that rejoins
	// empty waits out the leader's quiet time after its removal.
	undoLimit time.Duration
	// ready reports whether the fault's preparation is done (nil: always);
	// the first round takes ready faults first.
	ready func(r *run) bool
}

// faultRecord is one injected fault, for the summary and the report.
type faultRecord struct {
	Fault    string
	Targets  []string
	Start    int64
	End      int64
	Injected bool
	Verified bool
	Note     string
}

// The fault menu (jepsen/README.md#scenarios), with the weights of the CI schedule.
var faultMenu = []fault{
	{name: "isolate-leader", weight: 25, inject: isolate(true), verify: verifyNewLeader},
	{name: "kill-leader", weight: 20, inject: kill(true), verify: verifyDown},
	{name: "pause-leader", weight: 15, inject: pause(true), verify: verifyDown},
	{name: "bridge", weight: 15, inject: bridge, verify: verifyLeaderKnown},
	{name: "isolate-one", weight: 10, inject: isolate(false), verify: verifyLeaderKnown},
	{name: "kill-one", weight: 10, inject: kill(false), verify: verifyDown},
	{name: "loss", weight: 5, inject: loss, verify: verifyLeaderKnown},
	{name: "corrupt-disk", weight: 10, inject: corruptDisk, verify: verifyCorruptDisk},
	{name: "foreign-volume", weight: 3, inject: foreignVolume, verify: verifyForeign, undoLimit: 3 * time.Minute, ready: foreignReady},
}

// processFaults are the network and process faults (the menu before the
// disk faults): the default of the scenarios that do not name their own.
var processFaults = []string{"isolate-leader", "kill-leader", "pause-leader", "bridge", "isolate-one", "kill-one", "loss"}

// FaultNames lists the fault menu.
func FaultNames() []string {
	var out []string
	for _, f := range faultMenu {
		out = append(out, f.name)
	}
	return out
}

// target returns the leader (or a random node when leader is false, or when
// no leader is known).
func (r *run) target(ctx context.Context, leader bool) cluster.Node {
	if leader {
		if l := r.leader(ctx); l != "" {
			return l
		}
	}
	nodes := r.b.Nodes()
	return nodes[r.rng.Intn(len(nodes))]
}

func (r *run) others(n cluster.Node) []cluster.Node {
	var out []cluster.Node
	for _, m := range r.b.Nodes() {
		if m != n {
			out = append(out, m)
		}
	}
	return out
}

func isolate(leader bool) func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	return func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
		n := r.target(ctx, leader)
		err := r.b.Partition(ctx, cluster.Complete([]cluster.Node{n}, r.others(n)))
		return []cluster.Node{n}, r.b.Heal, err
	}
}

// bridge cuts the leader from one node; the third still talks to both.
func bridge(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	a := r.target(ctx, true)
	o := r.others(a)
	r.rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
	err := r.b.Partition(ctx, cluster.Bridge(a, o[0], o[1]))
	return []cluster.Node{a, o[0], o[1]}, r.b.Heal, err
}

func kill(leader bool) func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	return func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
		n := r.target(ctx, leader)
		err := r.b.Kill(ctx, n)
		return []cluster.Node{n}, func(ctx context.Context) error { return r.b.Start(ctx, n) }, err
	}
}

func pause(leader bool) func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	return func(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
		n := r.target(ctx, leader)
		err := r.b.Pause(ctx, n)
		return []cluster.Node{n}, func(ctx context.Context) error { return r.b.Resume(ctx, n) }, err
	}
}

func loss(ctx context.Context, r *run) ([]cluster.Node, func(context.Context) error, error) {
	n := r.target(ctx, true)
	err := r.b.Loss(ctx, n, 25)
	return []cluster.Node{n}, r.b.Heal, err
}

// verifyDown: the node does not answer (killed or paused).
func verifyDown(ctx context.Context, r *run, targets []cluster.Node) (bool, string) {
	sctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	if _, err := r.conns.get(targets[0]).Status(sctx); err == nil {
		return false, fmt.Sprintf("%s still answers", targets[0])
	}
	return true, ""
}

// verifyNewLeader: the majority side elected a leader other than the
// isolated node.
func verifyNewLeader(ctx context.Context, r *run, targets []cluster.Node) (bool, string) {
	for _, n := range r.others(targets[0]) {
		sctx, cancel := context.WithTimeout(ctx, time.Second)
		st, err := r.conns.get(n).Status(sctx)
		cancel()
		if err == nil && st.LeaderId != "" && st.LeaderId != string(targets[0]) {
			return true, "new leader " + st.LeaderId
		}
	}
	return false, "the majority side has no other leader"
}

// verifyLeaderKnown: the rules are in place (inject succeeded) and the
// cluster still has a leader (these faults do not depose a majority).
func verifyLeaderKnown(ctx context.Context, r *run, targets []cluster.Node) (bool, string) {
	if l := r.leader(ctx); l != "" {
		return true, "leader " + string(l)
	}
	return true, "no leader agreed by a majority during the fault"
}

func names(ns []cluster.Node) []string {
	var out []string
	for _, n := range ns {
		out = append(out, string(n))
	}
	return out
}

// menu is the scenario's fault menu, or cfg.Faults when set (empty: no faults).
func (r *run) menu() ([]fault, error) {
	allowed := r.cfg.Faults
	if allowed == nil {
		allowed = r.wl.faults()
	}
	var out []fault
	for _, name := range allowed {
		found := false
		for _, f := range faultMenu {
			if f.name == name {
				out, found = append(out, f), true
			}
		}
		if !found {
			return nil, fmt.Errorf("unknown fault %q (known: %v)", name, FaultNames())
		}
	}
	return out, nil
}

func (r *run) minFaults() int {
	if menu, _ := r.menu(); len(menu) == 0 {
		return 0
	}
	return 2
}

// nemesis runs the seeded schedule until the traffic time is over: after
// the warm-up, one fault at a time — health check, inject, hold 4–8 s,
// verify, undo, recover 4–6 s — and a quiet tail.
func (r *run) nemesis(ctx context.Context, total time.Duration) error {
	menu, err := r.menu()
	if err != nil {
		return err
	}
	start := time.Now()
	tail := total / 6
	if tail < 8*time.Second {
		tail = 8 * time.Second
	}
	sleep := func(d time.Duration) bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(d):
			return true
		}
	}
	if !sleep(r.cfg.Warmup) {
		return ctx.Err()
	}
	weight := 0
	for _, f := range menu {
		weight += f.weight
	}
	// The first faults go through the menu once, in a seeded order, so a
	// short run injects each kind; then the weights choose.
	first := r.rng.Perm(len(menu))
	n := 0
	for weight > 0 && time.Since(start)+14*time.Second < total-tail {
		if err := r.waitHealthy(ctx, 30*time.Second); err != nil {
			r.logf("health check before a fault failed: %v", err)
			return fmt.Errorf("cluster unhealthy between faults: %w", err)
		}
		var f fault
		if n < len(first) {
			for k := n; k < len(first); k++ {
				if c := menu[first[k]]; c.ready == nil || c.ready(r) {
					first[n], first[k] = first[k], first[n]
					break
				}
			}
			f = menu[first[n]]
		} else {
			pick := r.rng.Intn(weight)
			for _, c := range menu {
				if pick < c.weight {
					f = c
					break
				}
				pick -= c.weight
			}
		}
		n++
		phase := fmt.Sprintf("%s#%d", f.name, n)
		r.beginPhase(phase)
		rec := faultRecord{Fault: f.name, Start: r.rec.Since()}
		targets, undo, err := f.inject(ctx, r)
		rec.Targets = names(targets)
		rec.Injected = err == nil
		v := history.NemesisValue{Action: history.ActionInject, Fault: f.name, Targets: rec.Targets, OK: err == nil}
		if err != nil {
			v.Error = err.Error()
		}
		r.rec.Note(history.FNemesis, "", v)
		r.logf("inject %s on %v: %v", f.name, rec.Targets, errText(err))
		hold := time.Duration(4000+r.rng.Intn(4000)) * time.Millisecond
		sleep(hold)
		if err == nil {
			rec.Verified, rec.Note = f.verify(ctx, r, targets)
		}
		var uerr error
		if undo != nil {
			limit := f.undoLimit
			if limit == 0 {
				limit = time.Minute
			}
			uctx, cancel := context.WithTimeout(context.Background(), limit)
			uerr = undo(uctx)
			cancel()
		}
		rec.End = r.rec.Since()
		hv := history.NemesisValue{Action: history.ActionHeal, Fault: f.name, Targets: rec.Targets, OK: uerr == nil, Note: rec.Note}
		if uerr != nil {
			hv.Error = uerr.Error()
		}
		r.rec.Note(history.FNemesis, "", hv)
		r.logf("heal %s (verified %v %s): %v", f.name, rec.Verified, rec.Note, errText(uerr))
		r.mu.Lock()
		r.faults = append(r.faults, rec)
		r.mu.Unlock()
		if uerr != nil {
			return fmt.Errorf("undo %s: %w", f.name, uerr)
		}
		r.beginPhase(fmt.Sprintf("recover#%d", n))
		if !sleep(time.Duration(4000+r.rng.Intn(2000)) * time.Millisecond) {
			return ctx.Err()
		}
	}
	r.beginPhase("quiet")
	left := total - time.Since(start)
	if left > 0 && !sleep(left) {
		return ctx.Err()
	}
	return nil
}

func errText(err error) string {
	if err == nil {
		return "ok"
	}
	return err.Error()
}

// healAll undoes every fault that may remain: network rules, pauses, kills.
func (r *run) healAll(ctx context.Context) {
	hctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	var errs []error
	if err := r.b.Heal(hctx); err != nil {
		errs = append(errs, err)
	}
	for _, n := range r.b.Nodes() {
		_ = r.b.Resume(hctx, n) // not paused: an error, nothing to undo
		if err := r.b.Start(hctx, n); err != nil {
			errs = append(errs, err)
		}
	}
	r.rec.Note(history.FNemesis, "", history.NemesisValue{Action: history.ActionHeal, Fault: "all", OK: len(errs) == 0, Error: errText(errors.Join(errs...))})
}
