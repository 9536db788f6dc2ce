package jepsen

import (
	"context"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// workload generates the client operations of a scenario.
type workload interface {
	// setup runs before the traffic (not part of the checked history).
	setup(ctx context.Context, r *run) error
	// step runs one operation of process p.
	step(ctx context.Context, r *run, p *proc)
	// faults is the scenario's default fault menu.
	faults() []string
	// sessions lists every session the workload touched.
	sessions() []string
	// final runs after the heal: writes that must succeed.
	final(ctx context.Context, r *run) error
}

func newWorkload(scenario string) (workload, error) {
	switch scenario {
	case "faults":
		return newAppendWorkload("faults", processFaults), nil
	case "disk":
		return newAppendWorkload("disk", diskFaults), nil
	case "creators-planmode":
		return newCreatorsPlanMode(), nil
	case "lease":
		return newLeaseWorkload(), nil
	}
	return nil, fmt.Errorf("unknown scenario %q (known: %s)", scenario, strings.Join(Scenarios(), ", "))
}

// Scenarios lists the scenarios.
func Scenarios() []string { return []string{"faults", "creators-planmode", "lease", "disk"} }

// sessionPool is the set of sessions of a workload: a few live ones that
// receive traffic, rotated after maxAppends acknowledged appends.
type sessionPool struct {
	prefix     string
	live       int
	maxAppends int

	mu      sync.Mutex
	all     []string
	active  []*poolSession
	created int
}

type poolSession struct {
	id      string
	next    int64 // the largest next seq any response reported
	appends int
}

func (sp *sessionPool) newID() string {
	sp.created++
	return fmt.Sprintf("%s-%03d", sp.prefix, sp.created)
}

// pick returns a live session, rotating full ones out (the new session's
// id is returned with fresh = true: its creator registers it).
func (sp *sessionPool) pick(p *proc) (s *poolSession, fresh bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	i := p.rng.Intn(len(sp.active))
	s = sp.active[i]
	if s.appends >= sp.maxAppends {
		s = &poolSession{id: sp.newID()}
		sp.active[i] = s
		sp.all = append(sp.all, s.id)
		return s, true
	}
	return s, false
}

func (sp *sessionPool) observe(s *poolSession, next int64, appended bool) {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	if next > s.next {
		s.next = next
	}
	if appended {
		s.appends++
	}
}

func (sp *sessionPool) hint(s *poolSession) int64 {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	return s.next
}

func (sp *sessionPool) ids() []string {
	sp.mu.Lock()
	defer sp.mu.Unlock()
	out := append([]string(nil), sp.all...)
	sort.Strings(out)
	return out
}

// appendWorkload: per-session appends at an expected seq with unique
// markers, and linearizable reads of whole logs (jepsen/README.md#scenarios).
type appendWorkload struct {
	name string
	menu []string
	pool *sessionPool
}

func newAppendWorkload(name string, menu []string) *appendWorkload {
	return &appendWorkload{name: name, menu: menu, pool: &sessionPool{prefix: "s", live: 6, maxAppends: 120}}
}

// diskFaults is the disk scenario's menu.
var diskFaults = []string{"corrupt-disk", "foreign-volume"}

func (w *appendWorkload) faults() []string { return w.menu }
func (w *appendWorkload) sessions() []string {
	return w.pool.ids()
}

func header(id string) *sessionpb.SessionHeader {
	cwd := "/jepsen"
	return &sessionpb.SessionHeader{Id: id, CreatedAt: 1, Cwd: &cwd}
}

func (w *appendWorkload) setup(ctx context.Context, r *run) error {
	c := r.conns.patient(r.b.Nodes()[0])
	for i := 0; i < w.pool.live; i++ {
		id := w.pool.newID()
		if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: header(id), RequestId: "setup-" + id}); err != nil {
			return err
		}
		w.pool.active = append(w.pool.active, &poolSession{id: id})
		w.pool.all = append(w.pool.all, id)
	}
	return nil
}

func (w *appendWorkload) step(ctx context.Context, r *run, p *proc) {
	s, fresh := w.pool.pick(p)
	if fresh {
		// The rotating process registers the new session; a failed or unknown
		// create is retried by later appends' NOT_FOUND until one lands.
		r.op(ctx, p, history.Op{F: history.FCreate, Session: s.id, Owner: "pool"}, true,
			func(ctx context.Context, c *client.Client) (history.Op, error) {
				_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: header(s.id), RequestId: "create-" + s.id})
				return history.Op{}, err
			})
		return
	}
	if p.rng.Intn(100) < 40 {
		readOp(ctx, r, p, s.id, func(next int64) { w.pool.observe(s, next, false) })
		return
	}
	seq := w.pool.hint(s)
	if p.rng.Intn(100) < 15 && seq > 0 {
		seq -= int64(1 + p.rng.Intn(3)) // a stale expectation: must fail with SEQ_MISMATCH
		if seq < 0 {
			seq = 0
		}
	}
	n := 1 + p.rng.Intn(3)
	var events, ids []string
	now := time.Now().UnixMilli()
	for i := 0; i < n; i++ {
		m := r.marker(p.id)
		ids = append(ids, m)
		events = append(events, history.WorkloadEvent(m, seq+int64(i), now))
	}
	done := r.op(ctx, p, history.Op{F: history.FAppend, Session: s.id, Seq: seq, Events: ids}, true,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			res, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: s.id, Events: events})
			return history.Op{NextSeq: res.GetNextSeq(), Revision: res.GetRevision(), Duplicate: res.GetDuplicate()}, err
		})
	if done.Type == history.OK {
		w.pool.observe(s, done.NextSeq, true)
	} else if done.Reason == "NOT_FOUND" {
		// The rotation's create has not landed: register it again (idempotent).
		r.op(ctx, p, history.Op{F: history.FCreate, Session: s.id, Owner: "pool"}, true,
			func(ctx context.Context, c *client.Client) (history.Op, error) {
				_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: header(s.id), RequestId: "create-" + s.id})
				return history.Op{}, err
			})
	}
}

// readOp reads a whole session log linearizably (ReadFrom from seq 0).
func readOp(ctx context.Context, r *run, p *proc, id string, seen func(next int64)) history.Op {
	done := r.op(ctx, p, history.Op{F: history.FRead, Session: id}, false,
		func(ctx context.Context, c *client.Client) (history.Op, error) {
			res, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id})
			if err != nil {
				return history.Op{}, err
			}
			return history.Op{Events: identities(res.GetEvents()), Revision: res.GetRevision(), NextSeq: res.GetNextSeq()}, nil
		})
	if done.Type == history.OK && seen != nil {
		seen(done.NextSeq)
	}
	return done
}

func identities(events []string) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = history.Identity([]byte(e))
	}
	return out
}

// final appends one tombstone event per session that must succeed (retried
// with the same bytes: an identical retry is acknowledged as a duplicate).
func (w *appendWorkload) final(ctx context.Context, r *run) error {
	return tombstones(ctx, r, w.sessions(), nil)
}

// tombstones appends one marker per session at its current end, through a
// final process, retrying each attempt as its own recorded operation until
// one is acknowledged. epoch gives a session's lease epoch (nil: none).
func tombstones(ctx context.Context, r *run, ids []string, epoch func(id string) uint64) error {
	p := &proc{id: r.newProcess(), rng: r.rng}
	for _, id := range ids {
		ok := false
		for attempt := 0; attempt < 20 && !ok; attempt++ {
			p.node = r.leader(ctx)
			rd := readOp(ctx, r, p, id, nil)
			if rd.Type != history.OK {
				if rd.Reason == "NOT_FOUND" {
					ok = true // never created: nothing to seal
				}
				time.Sleep(200 * time.Millisecond)
				continue
			}
			m := r.marker(p.id)
			seq := rd.NextSeq
			ev := history.WorkloadEvent(m, seq, time.Now().UnixMilli())
			var e uint64
			if epoch != nil {
				e = epoch(id)
			}
			done := r.op(ctx, p, history.Op{F: history.FAppend, Session: id, Seq: seq, Events: []string{m}, Epoch: e}, true,
				func(ctx context.Context, c *client.Client) (history.Op, error) {
					res, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{ev}, LeaseEpoch: e})
					return history.Op{NextSeq: res.GetNextSeq(), Revision: res.GetRevision(), Duplicate: res.GetDuplicate()}, err
				})
			ok = done.Type == history.OK
		}
		if !ok {
			return fmt.Errorf("the final append to %s never succeeded", id)
		}
	}
	return nil
}
