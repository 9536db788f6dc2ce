package cluster

// The proposer: client commands queue on proposer.queue; one goroutine
// groups them into Raft entries (group commit), so one Raft round, one WAL
// fdatasync per node and one FSM batch serve many clients. At most
// Config.InFlight entries are outstanding; commands arriving meanwhile queue
// and form the next group.
//
// Adaptive hold. Taking whatever is queued the moment a slot frees makes
// small groups under moderate load: commands come back in bursts (the
// writers an entry answered send their next ones within a round trip), and
// the first of a burst finds a free slot and goes out nearly alone, though
// each entry costs the same Raft, WAL and transport work whatever it
// carries. So a group that has room lingers while commands keep arriving:
// it goes once none has arrived for a quarter of its wait, or once it has
// waited wait = min(half the recent commit time, Config.MaxGroupWait) in
// all, is full, or no other entry is in flight any more. It only lingers
// while another entry is in flight: a lone writer, whose previous entry has
// committed, never waits, and an idle pipeline is never kept waiting. The
// commit time is a moving average (Apply to answer), so the wait shrinks on
// fast disks; MaxGroupWait 0 turns lingering off.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

type proposal struct {
	cmd  *fsmpb.Command
	size int
	done chan proposalResult
	// enqueued, when set, is when the command entered the queue
	// (sessionstore_cluster_queue_wait_seconds); zero: not measured.
	enqueued time.Time
}

type proposalResult struct {
	res *fsmpb.Result
	err error
}

// propose submits one command and waits for its result. Errors follow
// docs/design.md "Retries and outcomes": NO_LEADER and SHUTTING_DOWN only before the
// command is enqueued; anything that goes wrong after is OUTCOME_UNKNOWN.
func (ss *Sessions) propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if ss.node.closing() {
		return nil, sessionstore.ErrShuttingDown
	}
	if ss.raft.State() != raft.Leader {
		return nil, ss.members.notLeader()
	}
	ss.bindRequest(cmd)
	// Disk nearly full (diskspace.go): refuse what grows the store, before
	// enqueueing, so the refusal is definite. Judged by the leader's disk:
	// writes sent to a follower are forwarded here.
	if growsStore(cmd) {
		if err := ss.DiskOK(); err != nil {
			ss.metrics.proposal(err)
			return nil, err
		}
	}
	return ss.proposer.propose(ctx, cmd)
}

// proposer turns commands into Raft entries and answers each with its
// result: the queue, the in-flight slots, the adaptive hold and the budget of
// bytes waiting for Raft. Sessions.propose decides whether a command may be
// proposed at all; this decides how.
type proposer struct {
	ctx     context.Context // ends when the node stops
	raft    *raft.Raft
	cfg     Config
	metrics *Metrics
	packed  func() bool // every voter applies packed entries (fsm.PackedVersion)

	queue chan *proposal
	slots chan struct{} // one per entry in flight
	pacer *groupPacer

	mu      sync.Mutex
	pending int64         // bytes of proposals not yet answered
	freed   chan struct{} // closed and replaced whenever pending shrinks
}

func newProposer(ctx context.Context, r *raft.Raft, cfg Config, m *Metrics, packed func() bool) *proposer {
	return &proposer{ctx: ctx, raft: r, cfg: cfg, metrics: m, packed: packed,
		queue: make(chan *proposal, 4096), slots: make(chan struct{}, cfg.InFlight), pacer: newGroupPacer(cfg.MaxGroupWait),
		freed: make(chan struct{})}
}

// propose queues cmd and waits for its result (see Sessions.propose).
func (pr *proposer) propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	p := &proposal{cmd: cmd, size: proto.Size(cmd), done: make(chan proposalResult, 1), enqueued: time.Now()}
	// Back-pressure: a full pipeline makes callers wait, then refuses them
	// (before enqueueing, so the refusal is definite).
	if err := pr.acquire(ctx, int64(p.size)); err != nil {
		pr.metrics.proposal(err)
		return nil, err
	}
	select {
	case pr.queue <- p:
	case <-ctx.Done():
		pr.release(int64(p.size))
		return nil, ctx.Err()
	case <-pr.ctx.Done():
		pr.release(int64(p.size))
		return nil, sessionstore.ErrShuttingDown
	}
	select {
	case r := <-p.done:
		pr.release(int64(p.size))
		pr.metrics.proposal(r.err)
		return r.res, r.err
	case <-ctx.Done():
		// The command is still queued or in Raft: its bytes stay counted
		// until it is answered.
		go func() { <-p.done; pr.release(int64(p.size)) }()
		pr.metrics.proposal(sessionstore.ErrOutcomeUnknown)
		return nil, sessionstore.ErrOutcomeUnknown
	}
}

// ewmaShift weights the moving average of commit times: each sample counts 1/8.
const ewmaShift = 3

// groupPacer holds what the adaptive hold decides by (see the top of the
// file); it is written by the goroutines that wait for entries.
type groupPacer struct {
	maxWait     time.Duration
	commitNanos atomic.Int64  // moving average of the commit time of entries
	landed      chan struct{} // a token after each entry is answered (capacity 1)
}

func newGroupPacer(maxWait time.Duration) *groupPacer {
	return &groupPacer{maxWait: maxWait, landed: make(chan struct{}, 1)}
}

// committed records an entry answered after d and wakes a lingering proposer.
func (g *groupPacer) committed(d time.Duration) {
	old := g.commitNanos.Load()
	g.commitNanos.Store(old + (int64(d)-old)>>ewmaShift)
	select {
	case g.landed <- struct{}{}:
	default:
	}
}

// wait is how long the next group may linger in all, and without a new
// command (0: not at all).
func (g *groupPacer) wait() (total, idle time.Duration) {
	total = min(time.Duration(g.commitNanos.Load())/2, g.maxWait)
	if total <= 0 {
		return 0, 0
	}
	return total, total / 4
}

// run groups queued commands into Raft entries until the node stops: see the
// top of the file.
func (pr *proposer) run() {
	hold := time.NewTimer(time.Hour)
	hold.Stop()
	for {
		select {
		case pr.slots <- struct{}{}:
		case <-pr.ctx.Done():
			pr.drain()
			return
		}
		var first *proposal
		select {
		case first = <-pr.queue:
		case <-pr.ctx.Done():
			pr.drain()
			return
		}
		group := []*proposal{first}
		size := first.size
		room := func() bool { return len(group) < pr.cfg.MaxGroupCommands && size < pr.cfg.MaxGroupBytes }
	gather:
		for room() {
			select {
			case p := <-pr.queue:
				group = append(group, p)
				size += p.size
			default:
				break gather
			}
		}
		// othersInFlight: the slots taken, less this group's own.
		othersInFlight := func() bool { return len(pr.slots) > 1 }
		if total, idle := pr.pacer.wait(); total > 0 && room() && othersInFlight() {
			deadline := time.Now().Add(total)
			hold.Reset(idle)
		linger:
			for room() && othersInFlight() {
				select {
				case p := <-pr.queue:
					group = append(group, p)
					size += p.size
					left := time.Until(deadline)
					if left <= 0 {
						break linger
					}
					hold.Reset(min(idle, left))
				case <-pr.pacer.landed: // an entry was answered: recheck
				case <-hold.C:
					break linger
				case <-pr.ctx.Done():
					// Never enqueued in Raft: a definite failure.
					for _, p := range group {
						p.done <- proposalResult{err: sessionstore.ErrShuttingDown}
					}
					<-pr.slots
					pr.drain()
					return
				}
			}
			hold.Stop()
		}
		pr.submit(group)
	}
}

func (pr *proposer) drain() {
	for {
		select {
		case p := <-pr.queue:
			// Never enqueued in Raft: a definite failure.
			p.done <- proposalResult{err: sessionstore.ErrShuttingDown}
		default:
			return
		}
	}
}

func (pr *proposer) submit(group []*proposal) {
	entry := &fsmpb.Entry{NowUnixMs: time.Now().UnixMilli(), Commands: make([]*fsmpb.Command, len(group))}
	for i, p := range group {
		entry.Commands[i] = p.cmd
	}
	data, err := fsm.Encode(entry)
	if err != nil {
		<-pr.slots
		for _, p := range group {
			p.done <- proposalResult{err: err}
		}
		return
	}
	pr.metrics.entryEncoded.Add(float64(len(data)))
	if pr.packed() {
		data = fsm.Pack(data)
	}
	pr.metrics.entryProposed.Add(float64(len(data)))
	pr.metrics.GroupSize.Observe(float64(len(group)))
	submitted := time.Now()
	for _, p := range group {
		if !p.enqueued.IsZero() {
			pr.metrics.QueueSeconds.Observe(submitted.Sub(p.enqueued).Seconds())
		}
	}
	fut := pr.raft.Apply(data, pr.cfg.ApplyTimeout)
	go func() {
		err := fut.Error()
		took := time.Since(submitted)
		pr.metrics.CommitSeconds.Observe(took.Seconds())
		<-pr.slots
		pr.pacer.committed(took)
		if err != nil {
			err = raftErr("", err)
			for _, p := range group {
				p.done <- proposalResult{err: err}
			}
			return
		}
		gr, _ := fut.Response().(*fsm.GroupResult)
		for i, p := range group {
			if gr == nil || i >= len(gr.Results) {
				p.done <- proposalResult{err: sessionstore.ErrOutcomeUnknown}
				continue
			}
			p.done <- proposalResult{res: gr.Results[i], err: fsm.ResultError(gr.Results[i])}
		}
	}()
}

// raftErr maps the error of a Raft future to the domain's, the one raft →
// domain table: refused before anything reached the log (not the leader, the
// queue full) is NO_LEADER; anything else (leadership lost, shut down,
// aborted by a restore, a timeout) may have taken effect: OUTCOME_UNKNOWN,
// with what, when set, naming the operation in the message.
func raftErr(what string, err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
		return sessionstore.ErrNoLeader
	case what == "":
		return sessionstore.ErrOutcomeUnknown
	default:
		return sessionstore.Errorf(sessionstore.ReasonOutcomeUnknown, "%s: %v", what, err)
	}
}
