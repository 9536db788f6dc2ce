package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
)

// forwardedKey marks a call a follower forwarded to the leader. A forwarded
// call is never forwarded again (no loops while leadership moves): it fails
// with NO_LEADER instead, and the client retries.
const forwardedKey = "sessionstore-forwarded"

// forwardConnectTimeout bounds one attempt to connect to the leader. gRPC's
// own bound is 20 s, and a call waits while its connection is being made: a
// leader whose machine stopped, or whose packets are dropped, would hold every
// call forwarded to it until the caller's deadline, although an election
// names a new leader within seconds. Once an attempt gives up, the calls
// waiting on it fail with NO_LEADER (they never left), and the caller retries.
const forwardConnectTimeout = 2 * time.Second

// Forwarder sends calls a follower cannot serve to the leader over pooled
// connections, so clients never need to know who leads.
type Forwarder struct {
	// Metrics, when set, counts forwarded calls.
	Metrics *Metrics

	maxMsg int
	dialer net.Dialer
	creds  credentials.TransportCredentials
	// connectTimeout bounds one attempt to connect to a leader
	// (forwardConnectTimeout; tests shorten it).
	connectTimeout time.Duration

	ctx    context.Context // ends the forwarding streams (Close)
	cancel context.CancelFunc

	mu      sync.Mutex
	conns   map[string]*grpc.ClientConn
	streams map[string]*fwdStream // by leader address
	legacy  map[string]bool       // leaders without the Forward service
}

// NewForwarder returns a forwarder whose connections carry messages up to
// maxMsg bytes and are dialled with dialer (e.g. from the node's own address)
// and secured with creds (nil: plaintext; with TLS, the node's own
// certificate is the client certificate and the leader's is verified for
// the host of its API address).
func NewForwarder(maxMsg int, dialer net.Dialer, creds credentials.TransportCredentials) *Forwarder {
	if creds == nil {
		creds = insecure.NewCredentials()
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Forwarder{maxMsg: maxMsg, dialer: dialer, creds: creds, connectTimeout: forwardConnectTimeout, ctx: ctx, cancel: cancel,
		conns: map[string]*grpc.ClientConn{}, streams: map[string]*fwdStream{}, legacy: map[string]bool{}}
}

// Close ends the forwarding streams and closes the pooled connections.
func (f *Forwarder) Close() {
	f.cancel()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, c := range f.conns {
		c.Close()
	}
	f.conns = map[string]*grpc.ClientConn{}
}

func (f *Forwarder) conn(addr string) (*grpc.ClientConn, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.connLocked(addr)
}

func (f *Forwarder) connLocked(addr string) (*grpc.ClientConn, error) {
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	d := f.dialer
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(f.creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }),
		grpc.WithStatsHandler(sentTracker{}),
		// A bounded attempt, and a leader back at this address is reached
		// again within a second or two (gRPC's backoff grows to 2 minutes).
		grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 2 * time.Second},
			MinConnectTimeout: f.connectTimeout,
		}),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(f.maxMsg), grpc.MaxCallSendMsgSize(f.maxMsg)))
	if err != nil {
		return nil, err
	}
	f.conns[addr] = c
	return c, nil
}

// leaderOf returns the leader named by a not-leader error, or nil.
func leaderOf(err error) *sessionstore.NotLeaderError {
	var nl *sessionstore.NotLeaderError
	if errors.As(err, &nl) && nl.LeaderAPI != "" {
		return nl
	}
	return nil
}

func isForwarded(ctx context.Context) bool {
	// Only this key's values: FromIncomingContext would copy all of them.
	return len(metadata.ValueFromIncomingContext(ctx, forwardedKey)) > 0
}

// sentKey holds, in a forwarded call's context, the flag sentTracker sets
// once the call was handed to a connected transport.
type sentKey struct{}

// sentTracker is the forwarding connections' stats handler. gRPC reports
// OutHeader only after an attempt's stream was queued on an established
// connection; a call that never saw one (connection refused, no route, TLS
// handshake failed) never left this node, so the leader cannot have applied
// it.
type sentTracker struct{}

func (sentTracker) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context { return ctx }
func (sentTracker) TagConn(ctx context.Context, _ *stats.ConnTagInfo) context.Context {
	return ctx
}
func (sentTracker) HandleConn(context.Context, stats.ConnStats) {}
func (sentTracker) HandleRPC(ctx context.Context, s stats.RPCStats) {
	if _, ok := s.(*stats.OutHeader); ok {
		if sent, ok := ctx.Value(sentKey{}).(*atomic.Bool); ok {
			sent.Store(true)
		}
	}
}

// withSent returns ctx carrying a fresh sent flag for sentTracker.
func withSent(ctx context.Context) (context.Context, *atomic.Bool) {
	sent := new(atomic.Bool)
	return context.WithValue(ctx, sentKey{}, sent), sent
}

// failure classifies a forwarding failure (docs/design.md "Retries and outcomes"):
// an answer of the leader's own (with an ErrorInfo) passes through; anything
// else is OUTCOME_UNKNOWN for a mutating call that reached the leader's
// connection (it may have been applied) and NO_LEADER for a read or a call
// that was never sent (safe to retry).
func failure(err error, mutating bool) error {
	if st, ok := status.FromError(err); ok {
		for _, d := range st.Details() {
			if _, ok := d.(*errdetails.ErrorInfo); ok {
				return err
			}
		}
	}
	if mutating {
		return toStatus(sessionstore.ErrOutcomeUnknown)
	}
	return toStatus(sessionstore.ErrNoLeader)
}

// forwardUnary is the innermost unary interceptor: a call the handler
// answered "not the leader" (toStatus keeps the backend's NotLeaderError in
// the status it returns) goes, as it came, to the leader that answer names,
// where it runs through the same interceptors and handler; the method table
// (guard.go) says whether it may have taken effect there if it fails once
// sent. f nil: NO_LEADER instead.
func forwardUnary(f *Forwarder) grpc.UnaryServerInterceptor {
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		resp, err := h(ctx, req)
		nl := leaderOf(err)
		if nl == nil {
			return resp, err
		}
		rule, known := methods[info.FullMethod]
		out, rerr := newResponse(info.FullMethod)
		pm, ok := req.(proto.Message)
		if !known || rerr != nil || !ok {
			return nil, toStatus(sessionstore.ErrNoLeader)
		}
		return out, f.unary(ctx, nl, info.FullMethod, pm, out, rule.mutating(ctx, req))
	}
}

// responses caches, per full method name, the type of its response message.
var responses sync.Map // string → protoreflect.MessageType

// newResponse returns an empty response message of the unary method
// ("/package.Service/Method"), found in the registry of generated types.
func newResponse(method string) (proto.Message, error) {
	if mt, ok := responses.Load(method); ok {
		return mt.(protoreflect.MessageType).New().Interface(), nil
	}
	svc, name, ok := strings.Cut(strings.TrimPrefix(method, "/"), "/")
	if !ok {
		return nil, fmt.Errorf("method %q: want /package.Service/Method", method)
	}
	d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(svc))
	if err != nil {
		return nil, err
	}
	sd, ok := d.(protoreflect.ServiceDescriptor)
	if !ok {
		return nil, fmt.Errorf("%s is not a service", svc)
	}
	md := sd.Methods().ByName(protoreflect.Name(name))
	if md == nil {
		return nil, fmt.Errorf("service %s has no method %s", svc, name)
	}
	mt, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
	if err != nil {
		return nil, err
	}
	responses.Store(method, mt)
	return mt.New().Interface(), nil
}

// unary forwards one unary call to the leader named by nl: as a message on
// this node's forwarding stream to it (forwardstream.go), or as a call of its
// own to a leader that predates that stream.
func (f *Forwarder) unary(ctx context.Context, nl *sessionstore.NotLeaderError, method string, req, resp proto.Message, mutating bool) error {
	if f == nil || isForwarded(ctx) {
		return toStatus(sessionstore.ErrNoLeader)
	}
	if !f.isLegacy(nl.LeaderAPI) {
		err := f.viaStream(ctx, nl.LeaderAPI, method, req, resp, mutating)
		if !errors.Is(err, errNoForwardService) {
			f.count(method, err)
			return err
		}
	}
	c, err := f.conn(nl.LeaderAPI)
	if err != nil {
		return toStatus(sessionstore.ErrNoLeader)
	}
	ctx = metadata.AppendToOutgoingContext(auth.Outgoing(ctx), forwardedKey, "1")
	ctx, sent := withSent(ctx)
	if err := c.Invoke(ctx, method, req, resp); err != nil {
		err = failure(err, mutating && sent.Load())
		f.count(method, err)
		return err
	}
	f.count(method, nil)
	return nil
}

// count records a forwarded call's outcome.
func (f *Forwarder) count(method string, err error) {
	if f.Metrics == nil {
		return
	}
	outcome := "ok"
	switch reasonOf(err) {
	case "":
		if err != nil {
			outcome = "error"
		}
	case string(sessionstore.ReasonOutcomeUnknown):
		outcome = "unknown"
	default:
		outcome = "error"
	}
	f.Metrics.Forwarded.WithLabelValues(method, outcome).Inc()
}

// stream forwards a server-streaming call, relaying every message.
func (f *Forwarder) stream(ctx context.Context, nl *sessionstore.NotLeaderError, method string, req proto.Message, newResp func() proto.Message, send func(proto.Message) error, mutating bool) error {
	if f == nil || isForwarded(ctx) {
		return toStatus(sessionstore.ErrNoLeader)
	}
	c, err := f.conn(nl.LeaderAPI)
	if err != nil {
		return toStatus(sessionstore.ErrNoLeader)
	}
	ctx = metadata.AppendToOutgoingContext(auth.Outgoing(ctx), forwardedKey, "1")
	ctx, sent := withSent(ctx)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return failure(err, mutating && sent.Load())
	}
	if err := cs.SendMsg(req); err != nil {
		return failure(err, mutating && sent.Load())
	}
	if err := cs.CloseSend(); err != nil {
		return failure(err, mutating && sent.Load())
	}
	for {
		m := newResp()
		if err := cs.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				f.count(method, nil)
				return nil
			}
			err = failure(err, mutating && sent.Load())
			f.count(method, err)
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
}
