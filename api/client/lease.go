package client

import (
	"context"
	"errors"
	"sync"
	"time"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// LeaseKeeper holds the lease of a session an owner has Prepared: it renews
// the lease with KeepAlive every third of its ttl, and appends under it.
// When the lease is lost (KeepAlive answered LEASE_FENCED or another
// definite error, or no renewal succeeded before the lease ran out by this
// client's clock, counted from when the last successful renewal was sent)
// Lost is closed, Err says why, and Append refuses without sending, with
// LEASE_FENCED: another owner may hold the session by then.
type LeaseKeeper struct {
	c   *Client
	ttl time.Duration

	mu       sync.Mutex
	lease    *sessionpb.Lease
	validTo  time.Time // local estimate of the lease's end
	err      error     // why the lease is no longer held (nil while held)
	lost     chan struct{}
	stop     context.CancelFunc
	loopDone chan struct{}
}

// KeepLease Prepares req.SessionId for req.Owner (as Prepare does, same
// retries) and keeps the lease it grants until Release or Stop. ctx bounds
// the Prepare only; the renewals run until the keeper stops.
func (c *Client) KeepLease(ctx context.Context, req *sessionpb.PrepareRequest) (*LeaseKeeper, *sessionpb.SessionView, error) {
	sent := time.Now()
	view, lease, err := c.Prepare(ctx, req)
	if err != nil {
		return nil, nil, err
	}
	ttl := time.Duration(req.GetTtlMs()) * time.Millisecond
	loopCtx, stop := context.WithCancel(context.Background())
	k := &LeaseKeeper{c: c, ttl: ttl, lease: lease, validTo: sent.Add(ttl),
		lost: make(chan struct{}), stop: stop, loopDone: make(chan struct{})}
	go k.run(loopCtx)
	return k, view, nil
}

// Lease is the lease as last granted or renewed.
func (k *LeaseKeeper) Lease() *sessionpb.Lease {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.lease
}

// Lost is closed when the lease is lost (not on Release or Stop).
func (k *LeaseKeeper) Lost() <-chan struct{} { return k.lost }

// Err is nil while the lease is held, then why it is not.
func (k *LeaseKeeper) Err() error {
	k.mu.Lock()
	defer k.mu.Unlock()
	return k.err
}

// run renews the lease every third of its ttl until ctx ends or the lease is
// lost.
func (k *LeaseKeeper) run(ctx context.Context) {
	defer close(k.loopDone)
	every := max(k.ttl/3, time.Millisecond)
	t := time.NewTimer(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		k.mu.Lock()
		lease, validTo := k.lease, k.validTo
		k.mu.Unlock()
		// Each renewal may retry until the lease would run out: a renewal
		// that succeeds after that is still reported as lost (by then
		// another owner may have Prepared).
		callCtx, cancel := context.WithDeadline(ctx, validTo)
		sent := time.Now()
		renewed, err := k.c.KeepAlive(callCtx, &sessionpb.KeepAliveRequest{Lease: lease})
		cancel()
		if ctx.Err() != nil {
			return
		}
		switch {
		case err == nil && sent.Before(validTo):
			k.mu.Lock()
			k.lease, k.validTo = renewed, sent.Add(k.ttl)
			k.mu.Unlock()
		case definite(err):
			k.lose(err)
			return
		case !time.Now().Before(validTo):
			k.lose(sessionstore.Errorf(sessionstore.ReasonLeaseFenced,
				"lease of session %s epoch %d was not renewed before it ran out (last error: %v)",
				sessionstore.Quote(lease.GetSessionId()), lease.GetEpoch(), err))
			return
		}
		// After a failed renewal try again soon, well before the lease ends.
		next := every
		if err != nil {
			next = min(every, max(time.Until(validTo)/4, time.Millisecond))
		}
		t.Reset(next)
	}
}

// definite reports an error that says the outcome (a refusal) for certain.
func definite(err error) bool {
	var se *sessionstore.Error
	return err != nil && errors.As(err, &se) && !errors.Is(err, sessionstore.ErrOutcomeUnknown) &&
		se.Reason != sessionstore.ReasonNoLeader && se.Reason != sessionstore.ReasonShuttingDown &&
		se.Reason != sessionstore.ReasonQuotaExceeded
}

// lose records the loss (the first reason wins) and closes Lost.
func (k *LeaseKeeper) lose(err error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	if k.err != nil {
		return
	}
	k.err = err
	close(k.lost)
}

// Append appends under the lease: req's LeaseEpoch is set to the lease's
// epoch (on a copy; req is not modified) and the batch is sent as Append
// sends it. Once the lease is lost (or released) it refuses with
// LEASE_FENCED without sending; a LEASE_FENCED answer marks the lease lost.
func (k *LeaseKeeper) Append(ctx context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error) {
	k.mu.Lock()
	err, epoch := k.err, k.lease.GetEpoch()
	k.mu.Unlock()
	if err != nil {
		return nil, k.fenced(err)
	}
	if req.GetLeaseEpoch() != epoch {
		req = proto.Clone(req).(*sessionpb.AppendRequest)
		req.LeaseEpoch = epoch
	}
	resp, err := k.c.Append(ctx, req)
	if errors.Is(err, sessionstore.ErrLeaseFenced) {
		k.lose(err)
	}
	return resp, err
}

// fenced is the LEASE_FENCED error of a call refused because of cause.
func (k *LeaseKeeper) fenced(cause error) error {
	var se *sessionstore.Error
	if errors.As(cause, &se) && se.Reason == sessionstore.ReasonLeaseFenced {
		return cause
	}
	return sessionstore.Errorf(sessionstore.ReasonLeaseFenced, "the lease is no longer held: %v", cause)
}

// errStopped is why a stopped keeper's lease is not held.
var errStopped = errors.New("the lease keeper was stopped")

// Stop ends the renewals without releasing the lease (it runs out after its
// ttl); Append refuses from then on.
func (k *LeaseKeeper) Stop() {
	k.stop()
	<-k.loopDone
	k.mu.Lock()
	if k.err == nil {
		k.err = errStopped
	}
	k.mu.Unlock()
}

// Release stops the renewals and releases the lease (Release, retried with
// one request id); the session becomes cold. It returns the error of the
// Release call, nil when the lease had already been lost.
func (k *LeaseKeeper) Release(ctx context.Context) error {
	k.stop()
	<-k.loopDone
	k.mu.Lock()
	lost, lease := k.err, k.lease
	if k.err == nil {
		k.err = errStopped
	}
	k.mu.Unlock()
	if lost != nil {
		return nil
	}
	return k.c.Release(ctx, &sessionpb.ReleaseRequest{SessionId: lease.GetSessionId(), LeaseEpoch: lease.GetEpoch()})
}
