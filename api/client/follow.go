package client

import (
	"context"
	"errors"
	"io"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// Follower is a Watch that survives the loss of its node: when the stream
// fails it opens a new one, on another node when the client has several,
// from the seq after the last event it delivered. Next delivers every event
// of the session from the start seq on exactly once, in order; messages
// without events (progress, heartbeats) are not delivered.
type Follower struct {
	// Idle is how long a stream may bring nothing, not even a progress
	// message (a node sends one at least every 30 s), before it is given up
	// as a node that stopped answering with its connection still up (a
	// paused process, a half-open connection) and opened again elsewhere.
	// Zero means FollowIdle. Set it before the first Next.
	Idle time.Duration

	c         *Client
	ctx       context.Context
	sessionID string
	next      int64 // seq of the next event to deliver

	stream grpc.ServerStreamingClient[sessionpb.WatchResponse]
	ep     *endpoint
	cancel context.CancelFunc
	fails  int // consecutive failed opens or streams without an event
}

// FollowIdle is the default Follower.Idle: two missed heartbeats and more.
const FollowIdle = 65 * time.Second

// Follow watches req.SessionId from req.FromSeq on across node failures
// (see Follower). Nothing is sent before the first Next. Cancel ctx or call
// Close to stop.
func (c *Client) Follow(ctx context.Context, req *sessionpb.WatchRequest) *Follower {
	return &Follower{c: c, ctx: ctx, sessionID: req.GetSessionId(), next: req.GetFromSeq()}
}

// NextSeq is the seq of the next event Next delivers.
func (f *Follower) NextSeq() int64 { return f.next }

// Next returns the next message with events (the first event's seq was
// NextSeq before the call). A failed stream is opened again from NextSeq,
// on the node the client picks, with the client's backoff; Next fails when
// ctx ends, on a definite error (NOT_FOUND when the session is deleted,
// PERMISSION_DENIED, …), or after the client's MaxAttempts failures in a
// row without an event.
func (f *Follower) Next() (*sessionpb.WatchResponse, error) {
	for {
		if f.stream == nil {
			e := f.c.pool.pick(false)
			ctx, cancel := context.WithCancel(f.ctx)
			s, err := e.rpc.Watch(ctx, &sessionpb.WatchRequest{SessionId: f.sessionID, FromSeq: f.next})
			if err != nil {
				cancel()
				if err := f.retry(e, err); err != nil {
					return nil, err
				}
				continue
			}
			f.stream, f.ep, f.cancel = s, e, cancel
		}
		m, err := f.recv()
		if err == nil {
			if len(m.GetEvents()) == 0 {
				continue
			}
			f.next += int64(len(m.GetEvents()))
			f.fails = 0
			return m, nil
		}
		f.cancel()
		f.stream = nil
		if errors.Is(err, io.EOF) {
			// The node ended the stream (it is stopping): resume elsewhere.
			err = status.Error(codes.Unavailable, "watch stream ended by the node")
		}
		if err := f.retry(f.ep, err); err != nil {
			return nil, err
		}
	}
}

// recv is the stream's next message, or an UNAVAILABLE error when nothing
// came within Idle (the stream is cancelled).
func (f *Follower) recv() (*sessionpb.WatchResponse, error) {
	idle := f.Idle
	if idle <= 0 {
		idle = FollowIdle
	}
	var silent atomic.Bool
	cancel := f.cancel
	t := time.AfterFunc(idle, func() {
		silent.Store(true)
		cancel()
	})
	m, err := f.stream.Recv()
	t.Stop()
	if err != nil && silent.Load() {
		err = status.Errorf(codes.Unavailable, "watch stream brought nothing for %v", idle)
	}
	return m, err
}

// retry decides whether a failed stream is opened again and waits the
// backoff; it returns the error to give up with.
func (f *Follower) retry(e *endpoint, err error) error {
	f.c.pool.failed(e, err)
	f.fails++
	if f.ctx.Err() != nil || f.fails >= f.c.opts.MaxAttempts || !retryable(f.ctx, read, err) {
		return FromStatus(err)
	}
	select {
	case <-f.ctx.Done():
		return FromStatus(err)
	case <-time.After(f.c.backoff(f.fails - 1)):
		return nil
	}
}

// Close ends the current stream; Next may be called again to resume.
func (f *Follower) Close() {
	if f.stream != nil {
		f.cancel()
		f.stream = nil
	}
}
