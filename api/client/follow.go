package client

import (
	"context"
	"errors"
	"io"
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
	c         *Client
	ctx       context.Context
	sessionID string
	next      int64 // seq of the next event to deliver

	stream grpc.ServerStreamingClient[sessionpb.WatchResponse]
	ep     *endpoint
	cancel context.CancelFunc
	fails  int // consecutive failed opens or streams without an event
}

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
		m, err := f.stream.Recv()
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
