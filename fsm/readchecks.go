package fsm

import (
	"container/list"
	"errors"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// An Append is decided against what a read of the session would accept
// (sessionlog.ReadCheck), and that check needs the whole log behind it. The
// FSM keeps it per session between appends, so an append costs its own events
// only, and rebuilds it from the stored log when it has none that matches
// (after a start, a refusal, an eviction, or a write that bypassed it).
//
// The check of a log is a function of the log alone, and a session's log is
// fixed by its incarnation (the Raft index of its Create) and length, so an
// entry is used only when both match: whether it was kept or rebuilt never
// changes a decision, which keeps replicas deterministic. Only the FSM's
// apply goroutine uses it.

// maxReadChecks bounds the sessions whose check is kept (least recently
// appended to goes first). A session evicted pays one read of its log at its
// next append.
const maxReadChecks = 1024

// readCheckChunk is how many events a rebuild reads at a time.
const readCheckChunk = 1024

type readChecks struct {
	max   int
	byID  map[string]*list.Element // of *readCheckEntry
	order *list.List               // front: most recently used
}

type readCheckEntry struct {
	id          string
	incarnation uint64
	check       *sessionlog.ReadCheck
}

func newReadChecks(max int) *readChecks {
	return &readChecks{max: max, byID: map[string]*list.Element{}, order: list.New()}
}

// get returns the kept check of the session's log as stored (n events), or nil.
func (r *readChecks) get(id string, incarnation uint64, n int64) *sessionlog.ReadCheck {
	el := r.byID[id]
	if el == nil {
		return nil
	}
	e := el.Value.(*readCheckEntry)
	if e.incarnation != incarnation || e.check.Len() != n {
		r.drop(id)
		return nil
	}
	r.order.MoveToFront(el)
	return e.check
}

func (r *readChecks) put(id string, incarnation uint64, c *sessionlog.ReadCheck) {
	r.drop(id)
	r.byID[id] = r.order.PushFront(&readCheckEntry{id: id, incarnation: incarnation, check: c})
	for r.order.Len() > r.max {
		r.drop(r.order.Back().Value.(*readCheckEntry).id)
	}
}

func (r *readChecks) drop(id string) {
	if el := r.byID[id]; el != nil {
		r.order.Remove(el)
		delete(r.byID, id)
	}
}

// advance keeps a session's check in step with events written at next
// without a check of their own (plan-mode and repair writes): added when it
// stood at next, left when it already holds them, dropped otherwise.
func (r *readChecks) advance(id string, incarnation uint64, next int64, events [][]byte) {
	el := r.byID[id]
	if el == nil {
		return
	}
	e := el.Value.(*readCheckEntry)
	switch {
	case e.incarnation == incarnation && e.check.Len() == next+int64(len(events)):
	case e.incarnation == incarnation && e.check.Len() == next:
		e.check.Add(events)
	default:
		r.drop(id)
	}
}

// readCheck returns the check of the session's log as stored, kept or rebuilt
// (nil when the applier keeps none: tests that build an applier by hand).
func (a *applier) readCheck(id string, rec *fsmpb.SessionRecord) (*sessionlog.ReadCheck, error) {
	if a.checks == nil {
		return nil, nil
	}
	if c := a.checks.get(id, rec.Incarnation, rec.NextSeq); c != nil {
		return c, nil
	}
	// No raw-log path: only error texts would show it, and they must not
	// depend on a node's configuration.
	c := sessionlog.NewReadCheck(id, HeaderFromPB(rec.Header), "")
	for from := int64(0); from < rec.NextSeq; from += readCheckChunk {
		evs, err := a.events(id, rec, from, min(from+readCheckChunk, rec.NextSeq))
		if err != nil {
			return nil, err
		}
		c.Add(evs)
	}
	a.checks.put(id, rec.Incarnation, c)
	return c, nil
}

// unreadable fills a result's readability from a check.
func unreadable(res *fsmpb.Result, c *sessionlog.ReadCheck) {
	if c == nil {
		return
	}
	if err := c.Err(); err != nil {
		var se *sessionstore.Error
		if !errors.As(err, &se) {
			se = sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", err.Error())
		}
		res.UnreadableReason, res.UnreadableMessage = string(se.Reason), se.Message
	}
}
