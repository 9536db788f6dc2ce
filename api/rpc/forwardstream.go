package rpc

// The follower's end of forwarding over a stream (the leader's end is
// forwardserver.go). One Forward.Calls stream per leader address carries
// every unary call this node forwards there: callers queue their call, one
// goroutine sends whatever has queued as one message, another matches the
// leader's replies to their callers by id.
//
// Outcomes. A call the leader answered gets that answer. When the stream
// breaks, a call that was never handed to it (still queued, or its message
// failed to send) was not seen by the leader: NO_LEADER, safe to retry. One
// that may have left gets OUTCOME_UNKNOWN if it was a write (failure in
// forward.go), exactly as for a call of its own. A call is marked as possibly
// sent before its message is handed to gRPC, so a break that races with the
// send errs towards OUTCOME_UNKNOWN, never towards a false NO_LEADER.
//
// A leader that is stopping says so (ReplyBatch.draining): the stream takes
// no new calls, sends what was queued, half-closes and ends once the leader
// has answered; the next call starts a new stream.
//
// A caller that gives up (deadline, cancellation) tells the leader with a
// cancel message, best effort; its deadline travels with the call anyway.
// A leader of an older build without the Forward service answers the stream
// with Unimplemented: nothing it carried ran, and the Forwarder sends that
// leader's calls as calls of their own from then on.

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	spb "google.golang.org/genproto/googleapis/rpc/status"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/api/forwardpb"
)

// forwardQueue is how many calls may wait for the sender of one stream;
// beyond it callers wait (within their deadline).
const forwardQueue = 1024

// errNoForwardService: the leader does not serve Forward.Calls (an older
// build); the call did not run there.
var errNoForwardService = errors.New("leader has no forwarding stream")

// errStreamClosing: the stream takes no new calls (its leader is draining).
var errStreamClosing = errors.New("forwarding stream closing")

// fwdStream is one forwarding stream to a leader.
type fwdStream struct {
	f      *Forwarder
	addr   string
	ctx    context.Context
	cancel context.CancelFunc
	queue  chan *fwdCall

	mu      sync.Mutex
	nextID  uint64
	pending map[uint64]*fwdCall // calls queued or sent, not yet answered
	broken  bool
	closing bool          // the leader is draining: no new calls
	pushing atomic.Int64  // enqueues registered but not yet in queue
	drained chan struct{} // closed when closing is set
}

// fwdCall is one call on a stream (or a cancel message: done is nil).
type fwdCall struct {
	msg  *forwardpb.Call
	sent atomic.Bool // its message may have been handed to the stream
	done chan fwdResult
}

// fwdResult is a call's reply, or the stream failure that ended it.
type fwdResult struct {
	reply *forwardpb.Reply
	err   error
	sent  bool // with err: whether the call may have reached the leader
}

// viaStream forwards one call on the stream to addr.
func (f *Forwarder) viaStream(ctx context.Context, addr, method string, req, resp proto.Message, mutating bool) error {
	b, err := proto.Marshal(req)
	if err != nil {
		return status.Errorf(codes.Internal, "forwarding %s: %v", method, err)
	}
	authz, principal := auth.Forwarded(ctx)
	c := &fwdCall{msg: &forwardpb.Call{Method: method, Request: b, Authorization: authz, Principal: principal,
		RequestId: requestIDFrom(ctx)}, done: make(chan fwdResult, 1)}
	if dl, ok := ctx.Deadline(); ok {
		left := time.Until(dl)
		if left <= 0 {
			return failure(status.FromContextError(context.DeadlineExceeded).Err(), false)
		}
		c.msg.TimeoutMicros = max(1, left.Microseconds())
	}
	if n := proto.Size(&forwardpb.CallBatch{Calls: []*forwardpb.Call{c.msg}}); n > f.maxMsg {
		// What gRPC answers a call over the limit; it never leaves.
		return status.Errorf(codes.ResourceExhausted, "grpc: trying to send message larger than max (%d vs. %d)", n, f.maxMsg)
	}
	var s *fwdStream
	for {
		if s = f.streamTo(addr); s == nil {
			return failure(errors.New("forwarder closed"), false)
		}
		err := s.enqueue(ctx, c)
		if err == nil {
			break
		}
		if !errors.Is(err, errStreamClosing) {
			return failure(err, false)
		}
		// That stream was draining and is forgotten: the next one is new.
	}
	var r fwdResult
	select {
	case r = <-c.done:
	case <-ctx.Done():
		if s.take(c.msg.Id) != nil {
			sent := c.sent.Load()
			if sent {
				s.send(&fwdCall{msg: &forwardpb.Call{Id: c.msg.Id, Cancel: true}})
			}
			return failure(status.FromContextError(ctx.Err()).Err(), mutating && sent)
		}
		r = <-c.done // answered (or failed) just now
	}
	if r.err != nil {
		if status.Code(r.err) == codes.Unimplemented {
			f.setLegacy(addr)
			return errNoForwardService
		}
		return failure(r.err, mutating && r.sent)
	}
	if len(r.reply.Status) > 0 {
		sp := new(spb.Status)
		if err := proto.Unmarshal(r.reply.Status, sp); err != nil {
			return failure(status.Errorf(codes.Internal, "forwarded reply: %v", err), mutating)
		}
		return failure(status.ErrorProto(sp), mutating)
	}
	if err := proto.Unmarshal(r.reply.Response, resp); err != nil {
		return failure(status.Errorf(codes.Internal, "forwarded reply: %v", err), mutating)
	}
	return nil
}

func (f *Forwarder) isLegacy(addr string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.legacy[addr]
}

func (f *Forwarder) setLegacy(addr string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.legacy[addr] = true
}

// streamTo returns the stream to addr, starting one if there is none (nil
// once the Forwarder is closed).
func (f *Forwarder) streamTo(addr string) *fwdStream {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ctx.Err() != nil {
		return nil
	}
	if s := f.streams[addr]; s != nil {
		return s
	}
	ctx, cancel := context.WithCancel(f.ctx)
	s := &fwdStream{f: f, addr: addr, ctx: ctx, cancel: cancel, queue: make(chan *fwdCall, forwardQueue),
		pending: map[uint64]*fwdCall{}, drained: make(chan struct{})}
	f.streams[addr] = s
	conn, err := f.connLocked(addr)
	go s.run(conn, err)
	return s
}

// forget drops s from the streams, so the next call starts a new one.
func (f *Forwarder) forget(s *fwdStream) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.streams[s.addr] == s {
		delete(f.streams, s.addr)
	}
}

// enqueue registers c and queues it for the sender.
func (s *fwdStream) enqueue(ctx context.Context, c *fwdCall) error {
	s.mu.Lock()
	if s.closing {
		s.mu.Unlock()
		return errStreamClosing
	}
	if s.broken {
		s.mu.Unlock()
		return errors.New("forwarding stream closed")
	}
	s.nextID++
	c.msg.Id = s.nextID
	s.pending[c.msg.Id] = c
	s.pushing.Add(1) // under mu: the sender's drain sees it once closing is set
	s.mu.Unlock()
	defer s.pushing.Add(-1)
	select {
	case s.queue <- c:
		return nil
	case <-ctx.Done():
		err := ctx.Err()
		if s.take(c.msg.Id) == nil {
			err = (<-c.done).err // the stream failed first; it was never sent
		}
		return err
	case <-s.ctx.Done():
		if s.take(c.msg.Id) == nil {
			<-c.done
		}
		return errors.New("forwarding stream closed")
	}
}

// send queues a message that expects no reply, if there is room.
func (s *fwdStream) send(c *fwdCall) {
	select {
	case s.queue <- c:
	default:
	}
}

// take removes call id from the pending calls and returns it (nil: it was
// answered or failed already). Whoever takes a call delivers its result.
func (s *fwdStream) take(id uint64) *fwdCall {
	s.mu.Lock()
	defer s.mu.Unlock()
	c := s.pending[id]
	delete(s.pending, id)
	return c
}

// close stops new calls on the stream (its leader is draining) and makes
// the next call start a new one; the sender sends what was queued and
// half-closes.
func (s *fwdStream) close() {
	s.f.forget(s)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.closing {
		s.closing = true
		close(s.drained)
	}
}

// fail ends the stream: every pending call gets err, and the next call
// starts a new stream.
func (s *fwdStream) fail(err error) {
	s.mu.Lock()
	if s.broken {
		s.mu.Unlock()
		return
	}
	s.broken = true
	pending := s.pending
	s.pending = nil
	s.mu.Unlock()
	s.f.forget(s)
	s.cancel()
	for _, c := range pending {
		c.done <- fwdResult{err: err, sent: c.sent.Load()}
	}
}

// run opens the stream and sends what queues until it breaks.
func (s *fwdStream) run(conn *grpc.ClientConn, err error) {
	if err != nil {
		s.fail(err)
		return
	}
	cs, err := forwardpb.NewForwardClient(conn).Calls(s.ctx)
	if err != nil {
		s.fail(err)
		return
	}
	go s.receive(cs)
	limit := s.f.maxMsg
	var next *fwdCall
	for {
		c := next
		next = nil
		if c == nil {
			select {
			case c = <-s.queue:
			case <-s.drained:
				s.sendRest(cs)
				return
			case <-s.ctx.Done():
				s.fail(s.ctx.Err())
				return
			}
		}
		calls := []*fwdCall{c}
		size := proto.Size(c.msg) + 8
	fill:
		for {
			select {
			case c := <-s.queue:
				if size += proto.Size(c.msg) + 8; size > limit {
					next = c
					break fill
				}
				calls = append(calls, c)
			default:
				break fill
			}
		}
		batch := &forwardpb.CallBatch{Calls: make([]*forwardpb.Call, len(calls))}
		for i, c := range calls {
			c.sent.Store(true)
			batch.Calls[i] = c.msg
		}
		if err := cs.Send(batch); err != nil {
			// Not handed to the transport: these never left. The stream is
			// over; its status (e.g. Unimplemented from an older leader)
			// comes from Recv, so let receive end it with that.
			for _, c := range calls {
				c.sent.Store(false)
			}
			select {
			case <-s.ctx.Done():
			case <-time.After(5 * time.Second):
				s.fail(err)
			}
			return
		}
	}
}

// sendRest sends, once the stream is closing, the calls queued or being
// queued, then half-closes; receive goes on until the leader has answered
// them and ended the stream.
func (s *fwdStream) sendRest(cs forwardpb.Forward_CallsClient) {
	for {
		var calls []*forwardpb.Call
	take:
		for {
			select {
			case c := <-s.queue:
				c.sent.Store(true)
				calls = append(calls, c.msg)
			default:
				break take
			}
		}
		if len(calls) > 0 {
			// One call per message: these are few, and none is too large alone.
			for _, m := range calls {
				if err := cs.Send(&forwardpb.CallBatch{Calls: []*forwardpb.Call{m}}); err != nil {
					s.fail(err) // marked sent: a write among them is OUTCOME_UNKNOWN
					return
				}
			}
			continue
		}
		if s.pushing.Load() == 0 && len(s.queue) == 0 {
			break
		}
		time.Sleep(time.Millisecond) // an enqueue registered before closing is on its way
	}
	if err := cs.CloseSend(); err != nil {
		s.fail(err)
	}
}

// receive hands each reply to its caller until the stream breaks.
func (s *fwdStream) receive(cs forwardpb.Forward_CallsClient) {
	for {
		batch, err := cs.Recv()
		if err != nil {
			s.fail(err)
			return
		}
		for _, r := range batch.Replies {
			if c := s.take(r.Id); c != nil {
				c.done <- fwdResult{reply: r}
			}
		}
		if batch.Draining {
			s.close()
		}
	}
}
