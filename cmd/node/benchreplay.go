package main

// `sessionstore bench --replay DIR`: agents replay recorded session logs (the
// reference harness's own JSONL files) with write-behind batching, the
// traffic an agent host produces, instead of one synthetic event per Append.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/internal/procstat"
	"github.com/sessionstore/sessionstore/sessionlog"
)

const (
	replayOwner    = "bench-replay"
	replayLeaseTTL = time.Minute
	// After a level the servers count as caught up when their applied indexes
	// agree and together they use less than replayIdleCores over replaySettleWindow.
	replayIdleCores     = 0.1
	replaySettleWindow  = time.Second
	replaySettleTimeout = time.Minute
	replayPollInterval  = 200 * time.Millisecond
)

// replaySession is one recorded session as an agent replays it.
type replaySession struct {
	name    string // file name, for the report
	header  sessionstore.Header
	events  []string // logical events, packed rows expanded, seq i at index i
	batches []replayBatch
}

// replayBatch is one Append: events [start, end). balanced reports that the
// log is balanced after it (no turn or step open), so a Prepare there
// commits no closers and the replay can continue under a lease.
type replayBatch struct {
	start, end int
	balanced   bool
}

// Boundary events of the reference's turn/step loop.
const (
	evTurnStart = "turn/start"
	evTurnEnd   = "turn/end"
	evStepStart = "step/start"
	evStepEnd   = "step/end"
)

// replayBatches is the write-behind rule of the replay: events accumulate
// and are flushed as one Append at each turn/step boundary. A start
// (turn/start, step/start) flushes what came before it and opens the next
// batch; an end (step/end, turn/end) closes the batch it ends. So one step
// is one Append, and events between steps (user messages, titles, pre-turn
// settings) travel with the next start or after the last end. The last
// batch is flushed at the end of the log. A batch that would exceed
// maxEvents or maxBytes (the server's limits) is flushed early.
func replayBatches(types []string, sizes []int, maxEvents, maxBytes int) []replayBatch {
	var out []replayBatch
	start, bytes := 0, 0
	turnOpen, stepOpen := false, false
	flush := func(end int) {
		if end > start {
			out = append(out, replayBatch{start: start, end: end, balanced: !turnOpen && !stepOpen})
		}
		start, bytes = end, 0
	}
	for i, t := range types {
		if t == evTurnStart || t == evStepStart {
			flush(i)
		}
		if i > start && (i-start >= maxEvents || bytes+sizes[i] > maxBytes) {
			flush(i)
		}
		bytes += sizes[i]
		switch t {
		case evTurnStart:
			turnOpen = true
		case evStepStart:
			stepOpen = true
		case evStepEnd:
			stepOpen = false
		case evTurnEnd:
			turnOpen, stepOpen = false, false
		}
		if t == evStepEnd || t == evTurnEnd {
			flush(i + 1)
		}
	}
	flush(len(types))
	return out
}

// parseReplaySession reads one reference JSONL log: the header line, then
// one storage record per line (an event, or a packed chunk row that stands
// for several), with seqs contiguous from 0. Every event must pass the
// append-side check, so a replay fails only for reasons of the server under
// test. A final newline is optional; empty lines are refused.
func parseReplaySession(name string, data []byte) (replaySession, error) {
	s := replaySession{name: name}
	data = bytes.TrimSuffix(data, []byte("\n"))
	if len(data) == 0 {
		return s, fmt.Errorf("%s: empty, want a header line and events", name)
	}
	lines := bytes.Split(data, []byte("\n"))
	h, err := sessionlog.ParseHeaderLine(lines[0], "")
	if err != nil {
		return s, fmt.Errorf("%s:1: %w", name, err)
	}
	if err := sessionlog.CheckCreateHeader(h); err != nil {
		return s, fmt.Errorf("%s:1: %w", name, err)
	}
	s.header = h
	var types []string
	var sizes []int
	for i, line := range lines[1:] {
		at := fmt.Sprintf("%s:%d", name, i+2)
		if len(line) == 0 {
			return s, fmt.Errorf("%s: empty line", at)
		}
		rec, err := sessionlog.DecodeStorageLine(line)
		if err != nil {
			return s, fmt.Errorf("%s: %w", at, err)
		}
		if !rec.FirstSeqIs(int64(len(s.events))) {
			return s, fmt.Errorf("%s: seq %s, want %d (seqs must be contiguous from 0)", at, rec.SeqText, len(s.events))
		}
		for _, ev := range rec.Events {
			info, err := sessionlog.CheckEvent(h.ID, ev)
			if err != nil {
				return s, fmt.Errorf("%s: %w", at, err)
			}
			if info.Seq != int64(len(s.events)) {
				return s, fmt.Errorf("%s: seq %d, want %d (seqs must be contiguous from 0)", at, info.Seq, len(s.events))
			}
			s.events = append(s.events, string(ev))
			types, sizes = append(types, info.Type), append(sizes, len(ev))
		}
	}
	if len(s.events) == 0 {
		return s, fmt.Errorf("%s: no events after the header", name)
	}
	lim := cluster.DefaultConfig()
	if big := slices.Max(sizes); big > lim.MaxEventBytes {
		return s, fmt.Errorf("%s: an event of %d bytes exceeds the default event limit (%d)", name, big, lim.MaxEventBytes)
	}
	s.batches = replayBatches(types, sizes, lim.MaxBatchCount, lim.MaxBatchBytes)
	return s, nil
}

// loadReplay reads the *.jsonl files of dir in name order, or the one file
// path names.
func loadReplay(path string) ([]replaySession, error) {
	files := []string{path}
	if st, err := os.Stat(path); err != nil {
		return nil, err
	} else if st.IsDir() {
		ents, err := os.ReadDir(path)
		if err != nil {
			return nil, err
		}
		files = nil
		for _, e := range ents {
			if !e.IsDir() && strings.HasSuffix(e.Name(), ".jsonl") {
				files = append(files, filepath.Join(path, e.Name()))
			}
		}
		if len(files) == 0 {
			return nil, fmt.Errorf("--replay %s: no *.jsonl session logs in it", path)
		}
	}
	var out []replaySession
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			return nil, err
		}
		s, err := parseReplaySession(filepath.Base(f), data)
		if err != nil {
			return nil, fmt.Errorf("--replay: %w", err)
		}
		out = append(out, s)
	}
	return out, nil
}

// replayStats is one replay level.
type replayStats struct {
	Agents int `json:"agents"`
	benchStats
	Events          int     `json:"events"`
	EventsPerSec    float64 `json:"events_per_sec"`
	EventsPerAppend float64 `json:"events_per_append"`
	Replays         int     `json:"replays_completed"`
	Prepares        int     `json:"prepares"`
	// CPU per acknowledged event, warm-up included; absent when unknown.
	ServerCPU *float64 `json:"server_cpu_us_per_event,omitempty"`
	ClientCPU *float64 `json:"client_cpu_us_per_event,omitempty"`
	// Settled is false when the servers did not go quiet within the settle
	// timeout (ServerCPU is then a lower bound).
	Settled bool `json:"settled,omitempty"`
	// FirstErrors is one message per error reason (some agent's first).
	FirstErrors map[string]string `json:"first_errors,omitempty"`
}

// replayRun is one agent's record of a level.
type replayRun struct {
	lat              []time.Duration // Appends started in the measured window
	events, ackedAll int             // events in lat's Appends; all acknowledged events
	replays, leases  int
	errs             map[string]int
	firstErr         map[string]string // the first message of each reason, for the report
	lastDone         time.Time
}

func (r *replayRun) fail(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	k := what + errReason(err)
	if r.errs[k]++; r.errs[k] == 1 {
		r.firstErr[k] = err.Error()
	}
	time.Sleep(benchErrorPause)
}

// replayLevel runs n closed-loop agents for warm-up + duration. Agent i
// replays sessions[(i+k) mod len] as its k-th replay, each under a fresh
// session id, and talks to b.clients[i mod len(b.clients)]. After a failed
// call it abandons that replay (never re-sends: the outcome may be unknown)
// and starts the next. With server PIDs, the servers' CPU is counted from
// the start of the load until they have caught up and gone quiet.
func (b *bencher) replayLevel(ctx context.Context, sessions []replaySession, n int) (replayStats, error) {
	runs := make([]replayRun, n)
	var done sync.WaitGroup
	start := make(chan struct{})
	var warmEnd, end time.Time // set before start is closed
	for i := range runs {
		done.Add(1)
		c := b.writerClient(i)
		go func(r *replayRun) {
			defer done.Done()
			r.errs, r.firstErr = map[string]int{}, map[string]string{}
			<-start
			for k := 0; ctx.Err() == nil && time.Now().Before(end); k++ {
				s := &sessions[(i+k)%len(sessions)]
				id := fmt.Sprintf("%s-l%d-a%d-%d", b.cfg.prefix, n, i, k)
				if b.replayOnce(ctx, c, s, id, r, warmEnd, end) {
					r.replays++
				}
			}
		}(&runs[i])
	}
	before, err := sampleCPU(b.cfg.pids)
	if err != nil {
		return replayStats{}, err
	}
	self0, selfErr := procstat.CPUTicks(os.Getpid())
	warmEnd = time.Now().Add(b.cfg.warmup)
	end = warmEnd.Add(b.cfg.duration)
	close(start)
	done.Wait()
	self1, err := procstat.CPUTicks(os.Getpid())
	if selfErr == nil {
		selfErr = err
	}

	st := replayStats{Agents: n, FirstErrors: map[string]string{}}
	var all []time.Duration
	errs := map[string]int{}
	last, acked := end, 0
	for _, r := range runs {
		all = append(all, r.lat...)
		st.Events += r.events
		st.Replays += r.replays
		st.Prepares += r.leases
		acked += r.ackedAll
		for k, v := range r.errs {
			errs[k] += v
		}
		for k, m := range r.firstErr {
			st.FirstErrors[k] = m
		}
		if r.lastDone.After(last) {
			last = r.lastDone
		}
	}
	st.benchStats = summarize(all, last.Sub(warmEnd), errs)
	if el := last.Sub(warmEnd).Seconds(); el > 0 {
		st.EventsPerSec = float64(st.Events) / el
	}
	if st.Ops > 0 {
		st.EventsPerAppend = float64(st.Events) / float64(st.Ops)
	}
	if acked > 0 && selfErr == nil {
		v := cpuPerEvent(self1-self0, acked)
		st.ClientCPU = &v
	}
	if len(b.cfg.pids) > 0 {
		after, settled, err := b.settle(ctx)
		if err != nil {
			return st, err
		}
		var ticks uint64
		for i := range before {
			ticks += after[i] - before[i]
		}
		st.Settled = settled
		if acked > 0 {
			v := cpuPerEvent(ticks, acked)
			st.ServerCPU = &v
		}
	}
	return st, ctx.Err()
}

// replayOnce replays s as session id: Create, then one Append per batch.
// The first Append materialises the session (epoch 0); at the first
// balanced point with batches left, the agent takes the lease (Prepare,
// which commits nothing there) and carries its epoch on every later Append,
// and releases it at the end. It stops at end, and reports whether the
// whole session was replayed.
func (b *bencher) replayOnce(ctx context.Context, c *client.Client, s *replaySession, id string, r *replayRun, warmEnd, end time.Time) bool {
	h := s.header
	h.ID = id
	b.track(id)
	cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
	_, err := c.Create(cctx, &sessionpb.CreateRequest{Header: sessionpb.HeaderFromDomain(h)})
	cancel()
	if err != nil {
		r.fail(ctx, "Create ", err)
		return false
	}
	var epoch uint64
	for i, bt := range s.batches {
		if ctx.Err() != nil || !time.Now().Before(end) {
			return false
		}
		cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
		t0 := time.Now()
		_, err := c.Append(cctx, &sessionpb.AppendRequest{SessionId: id, Events: s.events[bt.start:bt.end], LeaseEpoch: epoch})
		d := time.Since(t0)
		cancel()
		if err != nil {
			r.fail(ctx, "", err)
			return false
		}
		r.ackedAll += bt.end - bt.start
		if !t0.Before(warmEnd) {
			r.lat = append(r.lat, d)
			r.events += bt.end - bt.start
			r.lastDone = t0.Add(d)
		}
		if epoch == 0 && bt.balanced && i < len(s.batches)-1 {
			v, l, err := b.replayPrepare(ctx, c, id, r, end)
			if err == nil && (v.GetRepaired() || v.GetNextSeq() != int64(bt.end)) {
				err = fmt.Errorf("prepare of %s at seq %d repaired the log (next seq %d)", id, bt.end, v.GetNextSeq())
			}
			if err != nil {
				r.fail(ctx, "Prepare ", err)
				return false
			}
			epoch = l.GetEpoch()
			r.leases++
		}
	}
	if epoch != 0 {
		cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
		err := c.Release(cctx, &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: epoch})
		cancel()
		if err != nil {
			r.fail(ctx, "Release ", err)
			return false
		}
	}
	return true
}

// replayPrepare takes the lease on id. A QUOTA_EXCEEDED refusal (e.g. the
// principal's open read streams on the node, which Prepare counts against)
// is definite, nothing applied, so it is counted and retried until end, as
// an agent host would.
func (b *bencher) replayPrepare(ctx context.Context, c *client.Client, id string, r *replayRun, end time.Time) (*sessionpb.SessionView, *sessionpb.Lease, error) {
	for {
		cctx, cancel := context.WithTimeout(ctx, benchCallTimeout)
		v, l, err := c.Prepare(cctx, &sessionpb.PrepareRequest{SessionId: id, Owner: replayOwner, TtlMs: replayLeaseTTL.Milliseconds()})
		cancel()
		if !errors.Is(err, sessionstore.ErrQuotaExceeded) || ctx.Err() != nil || !time.Now().Before(end) {
			return v, l, err
		}
		r.fail(ctx, "Prepare ", err)
	}
}

// settle waits until every --addr node has applied the same index and the
// servers together used less than replayIdleCores over the last
// replaySettleWindow, so deferred work (artifact writer, periodic flushes)
// is counted. It returns the CPU samples taken at the start of that quiet
// window, or the last samples and false after replaySettleTimeout (or when
// a node cannot tell its applied index).
func (b *bencher) settle(ctx context.Context) ([]uint64, bool, error) {
	deadline := time.Now().Add(replaySettleTimeout)
	idle := uint64(replayIdleCores * replaySettleWindow.Seconds() * procstat.ClockTicks)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		if !b.appliedAgree(ctx) {
			time.Sleep(replayPollInterval)
			continue
		}
		t0, err := sampleCPU(b.cfg.pids)
		if err != nil {
			return nil, false, err
		}
		time.Sleep(replaySettleWindow)
		t1, err := sampleCPU(b.cfg.pids)
		if err != nil {
			return nil, false, err
		}
		var used uint64
		for i := range t0 {
			used += t1[i] - t0[i]
		}
		if used <= idle {
			return t0, true, nil
		}
	}
	last, err := sampleCPU(b.cfg.pids)
	return last, false, errors.Join(err, ctx.Err())
}

// appliedAgree reports whether every --addr node answers Status with the
// same applied index.
func (b *bencher) appliedAgree(ctx context.Context) bool {
	var first uint64
	for i, c := range b.clients {
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		st, err := c.Status(cctx)
		cancel()
		if err != nil {
			return false
		}
		if i == 0 {
			first = st.GetAppliedIndex()
		} else if st.GetAppliedIndex() != first {
			return false
		}
	}
	return true
}

func cpuPerEvent(ticks uint64, events int) float64 {
	return float64(ticks) * 1e6 / procstat.ClockTicks / float64(events)
}

func sampleCPU(pids []int) ([]uint64, error) {
	out := make([]uint64, len(pids))
	for i, pid := range pids {
		var err error
		if out[i], err = procstat.CPUTicks(pid); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// parsePIDs parses --server-pids: empty, or a comma-separated list of
// distinct positive process ids.
func parsePIDs(s string) ([]int, error) {
	if strings.TrimSpace(s) == "" {
		return nil, nil
	}
	var out []int
	for _, f := range strings.Split(s, ",") {
		p, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || p <= 0 || slices.Contains(out, p) {
			return nil, benchUsage("--server-pids %q: want a comma-separated list of distinct process ids, e.g. 4711,4712,4713", s)
		}
		out = append(out, p)
	}
	return out, nil
}

// replayMain runs the replay levels and prints their table (or JSON).
func (b *bencher) replayMain(ctx context.Context, stdout, stderr io.Writer) error {
	sessions, err := loadReplay(b.cfg.replay)
	if err != nil {
		return err
	}
	if _, err := sampleCPU(b.cfg.pids); err != nil {
		return fmt.Errorf("--server-pids: %w", err)
	}
	type sessionInfo struct {
		Name    string `json:"name"`
		Events  int    `json:"events"`
		Appends int    `json:"appends"`
	}
	out := struct {
		Addr     string        `json:"addr"`
		Replay   string        `json:"replay"`
		Sessions []sessionInfo `json:"sessions"`
		Duration string        `json:"duration_per_level"`
		Warmup   string        `json:"warmup"`
		Levels   []replayStats `json:"levels"`
	}{Addr: b.cfg.addr, Replay: b.cfg.replay, Duration: b.cfg.duration.String(), Warmup: b.cfg.warmup.String()}
	var desc []string
	for _, s := range sessions {
		out.Sessions = append(out.Sessions, sessionInfo{s.name, len(s.events), len(s.batches)})
		desc = append(desc, fmt.Sprintf("%s %d events in %d Appends", s.name, len(s.events), len(s.batches)))
	}
	for _, n := range b.cfg.agentLevels {
		fmt.Fprintf(stderr, "replay, %d agents: running %v (+%v warm-up) ...\n", n, b.cfg.duration, b.cfg.warmup)
		st, err := b.replayLevel(ctx, sessions, n)
		if err != nil {
			return err
		}
		out.Levels = append(out.Levels, st)
		for _, k := range slices.Sorted(maps.Keys(st.FirstErrors)) {
			fmt.Fprintf(stderr, "  %s, e.g.: %s\n", k, st.FirstErrors[k])
		}
	}
	if b.cfg.json {
		return json.NewEncoder(stdout).Encode(out)
	}
	spread := ""
	if n := len(b.cfg.addrs); n > 1 {
		spread = fmt.Sprintf(" (agent i uses address i mod %d)", n)
	}
	fmt.Fprintf(stdout, "sessionstore bench --replay %s: %s%s, closed loop, %v per level after %v warm-up\n",
		b.cfg.replay, b.cfg.addr, spread, b.cfg.duration, b.cfg.warmup)
	fmt.Fprintf(stdout, "sessions (round robin, fresh id per replay, one Append per turn/step boundary): %s\n", strings.Join(desc, "; "))
	cpuNote := "server cpu: --server-pids not given"
	if len(b.cfg.pids) > 0 {
		cpuNote = fmt.Sprintf("server cpu: utime+stime of PIDs %v from the start of the load until the servers caught up and went quiet", b.cfg.pids)
	}
	fmt.Fprintf(stdout, "%s; per acknowledged event, warm-up included\n", cpuNote)
	fmt.Fprintf(stdout, "%-6s  %9s  %9s  %6s  %7s  %7s  %10s  %10s  %7s  %s\n",
		"agents", "events/s", "appends/s", "ev/app", "p50 ms", "p99 ms", "srv µs/ev", "cli µs/ev", "replays", "errors")
	for _, l := range out.Levels {
		srv := fmtCPU(l.ServerCPU)
		if l.ServerCPU != nil && !l.Settled {
			srv += "+"
		}
		fmt.Fprintf(stdout, "%-6d  %9.0f  %9.0f  %6.2f  %7.2f  %7.2f  %10s  %10s  %7d  %s\n",
			l.Agents, l.EventsPerSec, l.OpsPerSec, l.EventsPerAppend, l.P50, l.P99, srv, fmtCPU(l.ClientCPU), l.Replays, errorText(l.benchStats))
	}
	for _, l := range out.Levels {
		if l.ServerCPU != nil && !l.Settled {
			fmt.Fprintf(stdout, "+ the servers were still busy %v after the load: a lower bound\n", replaySettleTimeout)
			break
		}
	}
	return nil
}

func fmtCPU(v *float64) string {
	if v == nil || math.IsNaN(*v) {
		return "-"
	}
	return fmt.Sprintf("%.0f", *v)
}
