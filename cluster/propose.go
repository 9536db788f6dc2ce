package cluster

import (
	"context"
	"errors"
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
// DESIGN.md "Retries and outcomes": NO_LEADER and SHUTTING_DOWN only before the
// command is enqueued; anything that goes wrong after is OUTCOME_UNKNOWN.
func (n *Node) propose(ctx context.Context, cmd *fsmpb.Command) (*fsmpb.Result, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	n.mu.Lock()
	closed := n.closed
	n.mu.Unlock()
	if closed {
		return nil, sessionstore.ErrShuttingDown
	}
	if n.raft.State() != raft.Leader {
		return nil, n.notLeader()
	}
	n.bindRequest(cmd)
	// Disk nearly full (diskspace.go): refuse what grows the store, before
	// enqueueing, so the refusal is definite. Judged by the leader's disk:
	// writes sent to a follower are forwarded here.
	if growsStore(cmd) {
		if err := n.DiskOK(); err != nil {
			n.metrics.proposal(err)
			return nil, err
		}
	}
	p := &proposal{cmd: cmd, size: proto.Size(cmd), done: make(chan proposalResult, 1), enqueued: time.Now()}
	// Back-pressure: a full pipeline makes callers wait, then refuses them
	// (before enqueueing, so the refusal is definite).
	if err := n.acquirePending(ctx, int64(p.size)); err != nil {
		n.metrics.proposal(err)
		return nil, err
	}
	select {
	case n.proposals <- p:
	case <-ctx.Done():
		n.releasePending(int64(p.size))
		return nil, ctx.Err()
	case <-n.ctx.Done():
		n.releasePending(int64(p.size))
		return nil, sessionstore.ErrShuttingDown
	}
	select {
	case r := <-p.done:
		n.releasePending(int64(p.size))
		n.metrics.proposal(r.err)
		return r.res, r.err
	case <-ctx.Done():
		// The command is still queued or in Raft: its bytes stay counted
		// until it is answered.
		go func() { <-p.done; n.releasePending(int64(p.size)) }()
		n.metrics.proposal(sessionstore.ErrOutcomeUnknown)
		return nil, sessionstore.ErrOutcomeUnknown
	}
}

// runProposer groups queued commands into Raft entries. At most InFlight
// entries are outstanding; commands that arrive meanwhile wait and are grouped
// into the next entry, so one Raft commit and one bbolt commit serve many
// clients (group commit).
func (n *Node) runProposer() {
	for {
		select {
		case n.slots <- struct{}{}:
		case <-n.ctx.Done():
			n.drainProposals()
			return
		}
		var first *proposal
		select {
		case first = <-n.proposals:
		case <-n.ctx.Done():
			n.drainProposals()
			return
		}
		group := []*proposal{first}
		size := first.size
	gather:
		for len(group) < n.cfg.MaxGroupCommands && size < n.cfg.MaxGroupBytes {
			select {
			case p := <-n.proposals:
				group = append(group, p)
				size += p.size
			default:
				break gather
			}
		}
		n.submit(group)
	}
}

func (n *Node) drainProposals() {
	for {
		select {
		case p := <-n.proposals:
			// Never enqueued in Raft: a definite failure.
			p.done <- proposalResult{err: sessionstore.ErrShuttingDown}
		default:
			return
		}
	}
}

func (n *Node) submit(group []*proposal) {
	entry := &fsmpb.Entry{NowUnixMs: time.Now().UnixMilli(), Commands: make([]*fsmpb.Command, len(group))}
	for i, p := range group {
		entry.Commands[i] = p.cmd
	}
	data, err := fsm.Encode(entry)
	if err != nil {
		<-n.slots
		for _, p := range group {
			p.done <- proposalResult{err: err}
		}
		return
	}
	n.metrics.GroupSize.Observe(float64(len(group)))
	submitted := time.Now()
	for _, p := range group {
		if !p.enqueued.IsZero() {
			n.metrics.QueueSeconds.Observe(submitted.Sub(p.enqueued).Seconds())
		}
	}
	fut := n.raft.Apply(data, n.cfg.ApplyTimeout)
	go func() {
		err := fut.Error()
		n.metrics.CommitSeconds.Observe(time.Since(submitted).Seconds())
		<-n.slots
		if err != nil {
			err = translate(err)
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

// translate maps raft errors to domain errors (the one raft → domain table).
func translate(err error) error {
	switch {
	case errors.Is(err, raft.ErrNotLeader), errors.Is(err, raft.ErrEnqueueTimeout):
		// Refused before the entry was appended to the log.
		return sessionstore.ErrNoLeader
	case errors.Is(err, raft.ErrLeadershipLost), errors.Is(err, raft.ErrRaftShutdown),
		errors.Is(err, raft.ErrAbortedByRestore):
		return sessionstore.ErrOutcomeUnknown
	default:
		return sessionstore.ErrOutcomeUnknown
	}
}
