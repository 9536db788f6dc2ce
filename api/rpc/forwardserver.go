package rpc

// The leader's end of forwarding (the follower's end is forward.go). A
// follower sends the unary calls it cannot serve as messages on one
// long-lived Forward.Calls stream; the leader runs each through the same
// interceptors and handler as a call sent to it directly, and answers on the
// stream in whatever order calls finish. A unary gRPC call per forwarded write
// cost the leader a new HTTP/2 stream, its headers and a goroutine of the
// transport each; on the stream a call is a few dozen bytes of a message that
// usually carries many.
//
// Authority. The stream carries none of its own (the guard lets it open).
// Each call carries its client's authorization header and the principal the
// follower authenticated, and is admitted exactly as a direct call would be:
// the named principal is trusted only when the stream's peer presents a
// verified node certificate (auth.Authenticator), and a stranger's calls on
// the stream are refused one by one as they would be on their own.
//
// Stopping. Drain tells every follower that the stream is ending: it sends
// nothing more there (its next call opens a new stream) and half-closes; the
// leader answers what it received and ends the stream, so a graceful stop
// of the gRPC server does not wait on streams that would never end.
//
// Bounds. At most forwardInflight calls of one stream run at once; beyond
// that the stream is not read, so HTTP/2 flow control holds the follower
// back. A reply larger than the message limit is replaced by the error a
// direct call would have got.

import (
	"context"
	"errors"
	"io"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/api/forwardpb"
)

// forwardInflight bounds the calls of one forwarding stream that run at once.
const forwardInflight = 4096

// replyOverhead is room left in a message for the envelope around a reply.
const replyOverhead = 1 << 10

// unaryMethod is a registered unary method and the service implementing it.
type unaryMethod struct {
	srv     any
	handler grpc.MethodHandler
}

// ForwardServer serves Forward.Calls: calls forwarded by followers, run as if
// sent here directly.
type ForwardServer struct {
	forwardpb.UnimplementedForwardServer

	maxMsg    int
	intercept grpc.UnaryServerInterceptor
	methods   map[string]unaryMethod // full method name → handler
	workers   workers

	drainOnce sync.Once
	drain     chan struct{} // closed by Drain
}

// NewForwardServer returns a forward server whose calls pass intercept (the
// server's unary interceptors, Interceptors.Unary) and whose replies fit
// maxMsg bytes. Services become reachable through it when registered with
// Registrar.
func NewForwardServer(maxMsg int, intercept grpc.UnaryServerInterceptor) *ForwardServer {
	return &ForwardServer{maxMsg: maxMsg, intercept: intercept, methods: map[string]unaryMethod{},
		workers: workers{work: make(chan func()), idle: 10 * time.Second}, drain: make(chan struct{})}
}

// Drain asks the followers to end their streams (the node is stopping): each
// is told to send nothing more and to half-close, and its stream ends once
// every call it carried is answered, so a graceful stop of the gRPC server
// does not wait for streams that would otherwise stay open, and no call is
// cut off unanswered.
func (f *ForwardServer) Drain() { f.drainOnce.Do(func() { close(f.drain) }) }

// workers run forwarded calls on goroutines that outlive one call: a fresh
// goroutine per call grew its stack through the handler's depth every time
// (runtime.newstack and copystack were 7 % of a leader's CPU).
type workers struct {
	work chan func()
	idle time.Duration // a worker without work for this long exits
}

// run runs fn on an idle worker, or on a new one.
func (w *workers) run(fn func()) {
	select {
	case w.work <- fn:
	default:
		go w.loop(fn)
	}
}

func (w *workers) loop(fn func()) {
	t := time.NewTimer(w.idle)
	defer t.Stop()
	for {
		fn()
		t.Reset(w.idle)
		select {
		case fn = <-w.work:
		case <-t.C:
			return
		}
	}
}

// Register registers the Forward service on s.
func (f *ForwardServer) Register(s grpc.ServiceRegistrar) { forwardpb.RegisterForwardServer(s, f) }

// Registrar returns a registrar that registers services on s and makes their
// unary methods reachable through forwarding. Register every service before
// the server starts.
func (f *ForwardServer) Registrar(s grpc.ServiceRegistrar) grpc.ServiceRegistrar {
	return registrar{f: f, next: s}
}

type registrar struct {
	f    *ForwardServer
	next grpc.ServiceRegistrar
}

func (r registrar) RegisterService(desc *grpc.ServiceDesc, impl any) {
	r.next.RegisterService(desc, impl)
	for _, m := range desc.Methods {
		r.f.methods["/"+desc.ServiceName+"/"+m.MethodName] = unaryMethod{srv: impl, handler: m.Handler}
	}
}

// Calls serves one follower's stream until it ends.
func (f *ForwardServer) Calls(stream forwardpb.Forward_CallsServer) error {
	ctx, cancelAll := context.WithCancel(stream.Context())
	defer cancelAll()
	replies := make(chan *forwardpb.Reply, 256)
	sent := make(chan error, 1)
	go func() { sent <- f.sendReplies(stream, replies, cancelAll) }()

	var (
		mu      sync.Mutex
		cancels = map[uint64]context.CancelFunc{}
		running sync.WaitGroup
		slots   = make(chan struct{}, forwardInflight)
	)
	var recvErr error
recv:
	for {
		batch, err := stream.Recv()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				recvErr = err
				cancelAll()
			}
			break
		}
		for _, c := range batch.Calls {
			if c.Cancel {
				mu.Lock()
				if cancel := cancels[c.Id]; cancel != nil {
					cancel()
				}
				mu.Unlock()
				continue
			}
			select {
			case slots <- struct{}{}:
			case <-ctx.Done():
				break recv
			}
			cctx, cancel := f.callContext(ctx, c)
			mu.Lock()
			cancels[c.Id] = cancel
			mu.Unlock()
			running.Add(1)
			f.workers.run(func() {
				defer running.Done()
				r := f.serve(cctx, c)
				mu.Lock()
				delete(cancels, c.Id)
				mu.Unlock()
				cancel()
				<-slots
				select {
				case replies <- r:
				case <-ctx.Done():
				}
			})
		}
	}
	running.Wait()
	close(replies)
	if err := <-sent; err != nil {
		return err
	}
	return recvErr
}

// sendReplies sends replies as they come, several per message when several
// are ready, until replies is closed. A failed send ends the stream's calls.
func (f *ForwardServer) sendReplies(stream forwardpb.Forward_CallsServer, replies <-chan *forwardpb.Reply, cancelAll context.CancelFunc) error {
	limit := f.maxMsg - replyOverhead
	drain := f.drain
	var next *forwardpb.Reply
	for {
		r := next
		next = nil
		if r == nil {
			var ok bool
			select {
			case r, ok = <-replies:
				if !ok {
					return nil
				}
			case <-drain:
				drain = nil
				if err := stream.Send(&forwardpb.ReplyBatch{Draining: true}); err != nil {
					cancelAll()
					for range replies {
					}
					return err
				}
				continue
			}
		}
		batch := &forwardpb.ReplyBatch{Replies: []*forwardpb.Reply{r}}
		size := proto.Size(r)
	fill:
		for {
			select {
			case r, ok := <-replies:
				if !ok {
					break fill
				}
				if size += proto.Size(r); size > limit {
					next = r
					break fill
				}
				batch.Replies = append(batch.Replies, r)
			default:
				break fill
			}
		}
		if err := stream.Send(batch); err != nil {
			cancelAll()
			for range replies { // let the running calls finish
			}
			return err
		}
	}
}

// callContext is the context a forwarded call runs in: the stream's peer
// (its certificate), the call's own credentials and request id as incoming
// metadata, its deadline, and the forwarded mark (never forwarded again).
func (f *ForwardServer) callContext(ctx context.Context, c *forwardpb.Call) (context.Context, context.CancelFunc) {
	md := metadata.MD{forwardedKey: []string{"1"}}
	if c.Authorization != "" {
		md["authorization"] = []string{c.Authorization}
	}
	if c.Principal != "" {
		md[auth.PrincipalKey] = []string{c.Principal}
	}
	if c.RequestId != "" {
		md[RequestIDKey] = []string{c.RequestId}
	}
	ctx = metadata.NewIncomingContext(ctx, md)
	// Not the Forward stream's: a call's response headers (the request id)
	// have no stream of their own to go on.
	ctx = grpc.NewContextWithServerTransportStream(ctx, callStream(c.Method))
	if c.TimeoutMicros > 0 {
		return context.WithTimeout(ctx, time.Duration(c.TimeoutMicros)*time.Microsecond)
	}
	return context.WithCancel(ctx)
}

// callStream is a forwarded call's grpc.ServerTransportStream: it names the
// method and drops headers and trailers (the reply carries neither; the
// follower answers its client with its own).
type callStream string

func (m callStream) Method() string             { return string(m) }
func (callStream) SetHeader(metadata.MD) error  { return nil }
func (callStream) SendHeader(metadata.MD) error { return nil }
func (callStream) SetTrailer(metadata.MD) error { return nil }

// serve runs one call and returns its reply.
func (f *ForwardServer) serve(ctx context.Context, c *forwardpb.Call) *forwardpb.Reply {
	m, ok := f.methods[c.Method]
	if !ok {
		return statusReply(c.Id, status.Errorf(codes.Unimplemented, "method %s cannot be forwarded", c.Method))
	}
	dec := func(v any) error {
		if err := proto.Unmarshal(c.Request, v.(proto.Message)); err != nil {
			return status.Errorf(codes.Internal, "forwarded request of %s: %v", c.Method, err)
		}
		return nil
	}
	resp, err := m.handler(m.srv, ctx, dec, f.intercept)
	if err != nil {
		return statusReply(c.Id, err)
	}
	b, err := proto.Marshal(resp.(proto.Message))
	if err != nil {
		return statusReply(c.Id, status.Errorf(codes.Internal, "forwarded response of %s: %v", c.Method, err))
	}
	if len(b) > f.maxMsg-replyOverhead {
		// What gRPC answers a direct call whose response is over the limit.
		return statusReply(c.Id, status.Errorf(codes.ResourceExhausted,
			"grpc: trying to send message larger than max (%d vs. %d)", len(b), f.maxMsg))
	}
	return &forwardpb.Reply{Id: c.Id, Response: b}
}

// statusReply answers call id with err as gRPC would send it: a status as
// is, a context error as its code, anything else as Unknown.
func statusReply(id uint64, err error) *forwardpb.Reply {
	st, ok := status.FromError(err)
	if !ok {
		st = status.FromContextError(err)
	}
	b, merr := proto.Marshal(st.Proto())
	if merr != nil {
		b, _ = proto.Marshal(status.New(codes.Internal, "forwarded call failed").Proto())
	}
	return &forwardpb.Reply{Id: id, Status: b}
}
