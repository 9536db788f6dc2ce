package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"google.golang.org/grpc/codes"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/benchload"
)

// bvState is what a view call may commit: a Load's repair changes the
// revision and next seq, a Prepare's lease the owner and epoch.
type bvState struct {
	revision string
	nextSeq  int64
	owner    string
	epoch    uint64
}

// bvStateOf reads a session's state through the node's stream form (no
// limit, nothing committed).
func bvStateOf(t *testing.T, n *testNode, id string) bvState {
	t.Helper()
	var st bvState
	first := true
	err := n.srv.node.Sessions().InspectStream(n.ctx(), id, sessionstore.Linearizable, sessionstore.ViewLimit{}, func(v sessionstore.View) error {
		if first {
			st.revision, st.nextSeq = v.Revision, v.NextSeq
			if v.Lease != nil {
				st.owner, st.epoch = v.Lease.Owner, v.Lease.Epoch
			}
			first = false
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return st
}

// TestUnaryViews_TooLargeRefusedBeforeCommitting: with a small
// --max-message-bytes, a session whose events exceed it (a turn left open,
// so Load and Prepare would commit its repair) gets RESOURCE_EXHAUSTED /
// TOO_LARGE naming the stream call from the unary Load, Prepare and Inspect,
// and none of them commits anything (revision, next seq and lease
// unchanged; before: Load committed the repair and Prepare granted the lease,
// then failed). The refusal comes from the session record, before any event
// is read; a session whose stored events fit but not with the closers the
// repair adds is refused once they are known, still before the repair. The
// Go client's Load, Inspect and Prepare return the whole view.
func TestUnaryViews_TooLargeRefusedBeforeCommitting(t *testing.T) {
	t.Parallel()
	const limit = 256 << 10
	const room = limit - sessionstore.ViewMessageMargin // for a view's events with their framing
	n := startTestNodeWith(t, "", func(c *serveConfig) {
		c.MaxMessageBytes = limit
		c.Cluster.MaxBatchBytes = 128 << 10
		c.Cluster.MaxEventBytes = 64 << 10
	})
	n.waitReady(true)
	pad := benchload.Padding(64 << 10)
	openTurn := func(id string, sizes ...int) []string {
		ctCreate(t, n, ctMeta(id, ""))
		stored := []string{ctEv("turn/start", 0, 1, `{"turn":1}`), ctEv("step/start", 1, 2, `{"turn":1,"step":1}`)}
		for i, size := range sizes {
			seq := int64(len(stored))
			if i == len(sizes)-1 && size == 0 { // the rest of the room
				size = room - int(sessionstore.ViewBytes(seq+1, int64(len(strings.Join(stored, ""))))) - 50
			}
			stored = append(stored, benchload.Event(seq, seq+1, size, pad))
		}
		for _, e := range stored {
			ctAppend(t, n, id, e)
		}
		return stored
	}

	// 420 KiB of events: refused from the record.
	const id = "big-unary-views"
	stored := openTurn(id, 60<<10, 60<<10, 60<<10, 60<<10, 60<<10, 60<<10, 60<<10)
	bvRefused(t, n, id, limit)

	// Refused from the record before any event is read: with a context
	// already cancelled, the first event read would fail with it.
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	lim := func(stream string) sessionstore.ViewLimit {
		return sessionstore.ViewLimit{MessageBytes: limit, Stream: stream}
	}
	nothing := func(sessionstore.View) error { return errors.New("sent a part of a refused view") }
	for name, err := range map[string]error{
		"InspectStream": n.srv.node.Sessions().InspectStream(cancelled, id, sessionstore.Stale, lim("InspectStream"), nothing),
		"LoadStream":    n.srv.node.Sessions().LoadStream(cancelled, id, "big-load-2", lim("LoadStream"), nothing),
		"PrepareStream": n.srv.node.Sessions().PrepareStream(cancelled, id, "o", 60e9, "big-prepare-2", lim("PrepareStream"), nothing),
	} {
		if !errors.Is(err, sessionstore.ErrTooLarge) {
			t.Errorf("node %s under a %d-byte limit with a cancelled context: %v, want TOO_LARGE from the record", name, limit, err)
		}
	}
	bvClientReads(t, n, id, stored)

	// Stored events 50 bytes short of the room: the closers tip the view over.
	const edge = "big-unary-views-edge"
	stored = openTurn(edge, 48<<10, 48<<10, 48<<10, 0)
	bvRefused(t, n, edge, limit)
	bvClientReads(t, n, edge, stored)
}

// bvRefused checks that the unary views of id are refused, naming their
// stream forms, and commit nothing.
func bvRefused(t *testing.T, n *testNode, id string, limit int) {
	t.Helper()
	before := bvStateOf(t, n, id)
	if before.owner != "" {
		t.Fatalf("state before the views: %+v", before)
	}
	raw := ctRaw(n)
	for _, c := range []struct {
		name, stream string
		call         func() error
	}{
		{"Load", "LoadStream", func() error {
			_, err := raw.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id, RequestId: id + "-load"})
			return err
		}},
		{"Prepare", "PrepareStream", func() error {
			_, err := raw.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "o", TtlMs: 60000, RequestId: id + "-prepare"})
			return err
		}},
		{"Inspect", "InspectStream", func() error {
			_, err := raw.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
			return err
		}},
	} {
		err := c.call()
		want := fmt.Sprintf("above the %d-byte message limit; use the stream form %s,", limit, c.stream)
		if code, se := ctStatus(err); code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonTooLarge ||
			!strings.Contains(se.Message, want) {
			t.Fatalf("unary %s of %s, above the message limit: %v, want RESOURCE_EXHAUSTED / TOO_LARGE containing %q", c.name, id, err, want)
		}
		if after := bvStateOf(t, n, id); after != before {
			t.Fatalf("after the refused unary %s %s is %+v, was %+v: it committed something", c.name, id, after, before)
		}
	}
}

// bvClientReads checks that the client's Inspect, Load and Prepare of id, a
// turn left open whose events are stored, return the whole views.
func bvClientReads(t *testing.T, n *testNode, id string, stored []string) {
	t.Helper()
	before := bvStateOf(t, n, id)
	insp, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
	if err != nil {
		t.Fatalf("client Inspect of %s: %v", id, err)
	}
	if len(insp.GetEvents()) != len(stored)+2 || !slices.Equal(insp.GetEvents()[:len(stored)], stored) || insp.GetRevision() != before.revision {
		t.Fatalf("client Inspect of %s: %d events at %q, want the %d stored and 2 closers at %q", id, len(insp.GetEvents()), insp.GetRevision(), len(stored), before.revision)
	}
	load, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
	if err != nil {
		t.Fatalf("client Load of %s: %v", id, err)
	}
	if !load.GetRepaired() || !slices.Equal(load.GetEvents(), insp.GetEvents()) || load.GetNextSeq() != int64(len(stored)+2) {
		t.Fatalf("client Load of %s: repaired %v, %d events, next seq %d; want the repaired log of %d events",
			id, load.GetRepaired(), len(load.GetEvents()), load.GetNextSeq(), len(stored)+2)
	}
	view, lease, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "o", TtlMs: 60000})
	if err != nil {
		t.Fatalf("client Prepare of %s: %v", id, err)
	}
	if lease.GetOwner() != "o" || lease.GetEpoch() == 0 || !slices.Equal(view.GetEvents(), load.GetEvents()) {
		t.Fatalf("client Prepare of %s: lease %v, %d events; want a lease of o and the %d events", id, lease, len(view.GetEvents()), len(load.GetEvents()))
	}
	if st := bvStateOf(t, n, id); st.owner != "o" || st.epoch != lease.GetEpoch() {
		t.Fatalf("after the client's Prepare %s is %+v, want leased to o at epoch %d", id, st, lease.GetEpoch())
	}
}
