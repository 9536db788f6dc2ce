package rpc

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
)

// Metrics holds the rpc package's instruments.
type Metrics struct {
	Requests  *prometheus.CounterVec
	Latency   *prometheus.HistogramVec
	Panics    prometheus.Counter
	Denied    *prometheus.CounterVec
	Refused   *prometheus.CounterVec
	Forwarded *prometheus.CounterVec
}

// NewMetrics registers the rpc instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_rpc_requests_total", Help: "RPCs served, by method and gRPC code."}, []string{"method", "code"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sessionstore_rpc_duration_seconds", Help: "RPC latency by method (streams: until the stream ends).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"method"}),
		Panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_rpc_panics_total", Help: "Handler panics recovered (each one is a bug)."}),
		Denied: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_auth_denied_total", Help: "Calls refused by authentication or authorisation, by reason (unauthenticated, permission, session)."},
			[]string{"reason"}),
		Refused: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_limit_refused_total", Help: "Calls refused by a limit: too_large (TOO_LARGE), quota (QUOTA_EXCEEDED: session and principal quotas, the per-principal request rate, a full Raft pipeline, a nearly full disk)."},
			[]string{"limit"}),
		Forwarded: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_rpc_forwarded_total", Help: "Calls this follower forwarded to the leader, by method and outcome (ok, error, unknown)."},
			[]string{"method", "outcome"}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Latency, m.Panics, m.Denied, m.Refused, m.Forwarded)
	}
	return m
}

// RequestIDKey is the metadata key of a call's request id: taken from the
// caller when it sends one, minted otherwise, returned in the response header
// and logged with every line about the call.
const RequestIDKey = "x-request-id"

type requestIDCtx struct{}

func requestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDCtx{}).(string)
	return id
}

func withRequestID(ctx context.Context) (context.Context, string) {
	var id string
	// ValueFromIncomingContext copies only this key's values, where
	// FromIncomingContext copies all of the metadata.
	if v := metadata.ValueFromIncomingContext(ctx, RequestIDKey); len(v) > 0 && len(v[0]) <= 128 {
		id = v[0]
	} else {
		var b [8]byte
		_, _ = rand.Read(b[:])
		id = hex.EncodeToString(b[:])
	}
	return context.WithValue(ctx, requestIDCtx{}, id), id
}

// reasonOf is the ErrorInfo reason of a status error ("" if none).
func reasonOf(err error) string {
	if err == nil {
		return ""
	}
	st, ok := status.FromError(err)
	if !ok {
		return ""
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			return info.Reason
		}
	}
	return ""
}

// methodMetrics are one method's instruments, resolved once: WithLabelValues
// hashes the label values and looks them up under a lock on every call.
type methodMetrics struct {
	latency prometheus.Observer
	// ok counts the method's OK answers, the common case; resolved at the
	// first one, so the series does not appear before (as before the cache).
	ok atomic.Pointer[prometheus.Counter]
}

// methodCache resolves each method's instruments once.
type methodCache struct {
	m       *Metrics
	methods sync.Map // full method name → *methodMetrics
}

func (c *methodCache) get(method string) *methodMetrics {
	if mm, ok := c.methods.Load(method); ok {
		return mm.(*methodMetrics)
	}
	mm, _ := c.methods.LoadOrStore(method, &methodMetrics{latency: c.m.Latency.WithLabelValues(method)})
	return mm.(*methodMetrics)
}

// count adds one answer of method with code.
func (c *methodCache) count(mm *methodMetrics, method string, code codes.Code) {
	if code != codes.OK {
		c.m.Requests.WithLabelValues(method, code.String()).Inc()
		return
	}
	ok := mm.ok.Load()
	if ok == nil {
		ctr := c.m.Requests.WithLabelValues(method, code.String())
		ok = &ctr
		mm.ok.Store(ok)
	}
	(*ok).Inc()
}

// Interceptors assign request ids, recover panics, refuse over-long request
// fields (CheckFields), log failures and record metrics for every rpc, direct
// or forwarded on a stream (ForwardServer); extra interceptors (the guard)
// run inside them, so their refusals are logged and counted too.
type Interceptors struct {
	unary  grpc.UnaryServerInterceptor
	stream []grpc.StreamServerInterceptor
	hints  HintSource
	hintMD atomic.Pointer[hintMD]
}

// HintSource gives the client hints of this node (cluster.Node). It returns
// the same pointer while they are unchanged, so their metadata is built once.
type HintSource interface {
	ClientHints() *sessionstore.ClientHints
}

// SetHints makes every answer carry src's hints as response header metadata
// (sessionstore.HintNodeKey and the others). Call it before serving.
func (i *Interceptors) SetHints(src HintSource) { i.hints = src }

// hintMD is the metadata of one set of hints.
type hintMD struct {
	src    *sessionstore.ClientHints
	header metadata.MD
}

// hintHeader is the metadata of the current hints (nil without a source),
// built only when they changed. It is never modified: SetHeader copies it.
func (i *Interceptors) hintHeader() metadata.MD {
	if i.hints == nil {
		return nil
	}
	h := i.hints.ClientHints()
	if built := i.hintMD.Load(); built != nil && built.src == h {
		return built.header
	}
	md := metadata.MD{sessionstore.HintNodeKey: {h.NodeID}}
	if h.Leader != "" {
		md[sessionstore.HintLeaderKey] = []string{h.Leader}
	}
	if h.Endpoints != "" {
		md[sessionstore.HintEndpointsKey] = []string{h.Endpoints}
	}
	i.hintMD.Store(&hintMD{src: h, header: md})
	return md
}

// header is the response header metadata of a call: its request id and the
// hints, set with one SetHeader (each call of it copies what was set before).
func (i *Interceptors) header(reqID string) metadata.MD {
	hints := i.hintHeader()
	md := make(metadata.MD, len(hints)+1)
	md[RequestIDKey] = []string{reqID}
	for k, v := range hints {
		md[k] = v // shared, never modified: SetHeader copies the values
	}
	return md
}

// ServerOptions installs the interceptors on a gRPC server.
func (i *Interceptors) ServerOptions() []grpc.ServerOption {
	return []grpc.ServerOption{grpc.UnaryInterceptor(i.unary), grpc.ChainStreamInterceptor(i.stream...)}
}

// Unary is the chain of unary interceptors, for calls that arrive otherwise
// than as gRPC calls of their own (ForwardServer).
func (i *Interceptors) Unary() grpc.UnaryServerInterceptor { return i.unary }

// chainUnary runs us in order, the first outermost.
func chainUnary(us []grpc.UnaryServerInterceptor) grpc.UnaryServerInterceptor {
	if len(us) == 1 {
		return us[0]
	}
	inner := chainUnary(us[1:])
	return func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
		return us[0](ctx, req, info, func(ctx context.Context, req any) (any, error) { return inner(ctx, req, info, h) })
	}
}

// NewInterceptors returns the interceptors, logging to logger and counting
// in m, admitting calls with guard (nil: every call; its Streams also bound
// how long a stream may wait for its reader) and forwarding calls a follower
// cannot serve to the leader with fwd (nil: NO_LEADER).
func NewInterceptors(logger *slog.Logger, m *Metrics, guard *Guard, fwd *Forwarder) *Interceptors {
	logger = logger.With("component", "rpc")
	cache := &methodCache{m: m}
	ic := &Interceptors{}
	done := func(ctx context.Context, method, reqID string, start time.Time, err error) {
		code := status.Code(err)
		mm := cache.get(method)
		cache.count(mm, method, code)
		mm.latency.Observe(time.Since(start).Seconds())
		switch reasonOf(err) {
		case string(sessionstore.ReasonTooLarge):
			m.Refused.WithLabelValues("too_large").Inc()
		case string(sessionstore.ReasonQuotaExceeded):
			m.Refused.WithLabelValues("quota").Inc()
		}
		switch code {
		case codes.OK, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.InvalidArgument, codes.Canceled,
			codes.Unauthenticated, codes.PermissionDenied:
			if !logger.Enabled(ctx, slog.LevelDebug) {
				return // the arguments alone would cost allocations on every call
			}
			logger.Debug("rpc", "method", method, "code", code.String(), "dur", time.Since(start), "request_id", reqID)
		default:
			logger.Warn("rpc failed", "method", method, "code", code.String(), "err", err, "dur", time.Since(start), "request_id", reqID)
		}
	}
	recovered := func(method, reqID string, r any) error {
		m.Panics.Inc()
		logger.Error("panic in handler", "method", method, "request_id", reqID, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error (request id "+reqID+")")
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		ctx, reqID := withRequestID(ctx)
		_ = grpc.SetHeader(ctx, ic.header(reqID))
		defer func() {
			if r := recover(); r != nil {
				err = recovered(info.FullMethod, reqID, r)
			}
			done(ctx, info.FullMethod, reqID, start, err)
		}()
		if pm, ok := req.(proto.Message); ok {
			if err := CheckFields(pm); err != nil {
				return nil, toStatus(err)
			}
		}
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		start := time.Now()
		ctx, reqID := withRequestID(ss.Context())
		_ = ss.SetHeader(ic.header(reqID))
		defer func() {
			if r := recover(); r != nil {
				err = recovered(info.FullMethod, reqID, r)
			}
			done(ctx, info.FullMethod, reqID, start, err)
		}()
		return h(srv, &ctxStream{ServerStream: checkedStream{ss}, ctx: ctx})
	}
	us := []grpc.UnaryServerInterceptor{unary}
	ss := []grpc.StreamServerInterceptor{stream}
	var streams *Streams
	if guard != nil {
		us = append(us, guard.unary)
		ss = append(ss, guard.stream)
		streams = guard.cfg.Streams
	}
	us = append(us, forwardUnary(fwd))
	ss = append(ss, serveStream(fwd, streams))
	ic.unary, ic.stream = chainUnary(us), ss
	return ic
}

// ctxStream is a server stream with a derived context.
type ctxStream struct {
	grpc.ServerStream
	ctx context.Context
}

func (s *ctxStream) Context() context.Context { return s.ctx }
