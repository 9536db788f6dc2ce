package rpc

import (
	"context"
	"log/slog"
	"math"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/api/forwardpb"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// Authenticator tells who a call is from.
type Authenticator interface {
	Authenticate(ctx context.Context) (*auth.Principal, error)
}

// methodRule is what the guard and the forwarder need to know of an rpc: the
// permission it needs, and whether a call of it may change state. A mutating
// call a follower forwarded that fails once sent may have been applied
// (OUTCOME_UNKNOWN); any other forwarding failure is NO_LEADER (safe to
// retry).
type methodRule struct {
	perm     auth.Perm
	mutating func(ctx context.Context, req any) bool
}

var (
	always = func(context.Context, any) bool { return true }
	never  = func(context.Context, any) bool { return false }
	// Load needs only read: without write it answers as Inspect (no repair).
	withWrite    = func(ctx context.Context, _ any) bool { return !readOnly(ctx) }
	withAnswer   = func(_ context.Context, r any) bool { return r.(*pb.PlanExitRequest).GetAnswer() != nil }
	unlessDryRun = func(_ context.Context, r any) bool { return !r.(*pb.RetentionRequest).GetDryRun() }
)

// methods is the table of every rpc of the three services (a test checks
// it): a method missing here is refused.
var methods = map[string]methodRule{
	pb.SessionPersistence_Locate_FullMethodName:        {auth.Read, never},
	pb.SessionPersistence_Create_FullMethodName:        {auth.Write, always},
	pb.SessionPersistence_Append_FullMethodName:        {auth.Write, always},
	pb.SessionPersistence_Load_FullMethodName:          {auth.Read, withWrite},
	pb.SessionPersistence_Inspect_FullMethodName:       {auth.Read, never},
	pb.SessionPersistence_Prepare_FullMethodName:       {auth.Write, always},
	pb.SessionPersistence_KeepAlive_FullMethodName:     {auth.Write, always},
	pb.SessionPersistence_Release_FullMethodName:       {auth.Write, always},
	pb.SessionPersistence_List_FullMethodName:          {auth.Read, never},
	pb.SessionPersistence_ListSnapshots_FullMethodName: {auth.Read, never},
	pb.SessionPersistence_LoadStream_FullMethodName:    {auth.Read, withWrite},
	pb.SessionPersistence_InspectStream_FullMethodName: {auth.Read, never},
	pb.SessionPersistence_PrepareStream_FullMethodName: {auth.Write, always},
	pb.SessionPersistence_ReadFrom_FullMethodName:      {auth.Read, never},
	pb.SessionPersistence_ReadRaw_FullMethodName:       {auth.Read, never},
	pb.SessionPersistence_Watch_FullMethodName:         {auth.Read, never},
	pb.SessionPersistence_Delete_FullMethodName:        {auth.Write, always},
	pb.PlanMode_Get_FullMethodName:                     {auth.Read, never},
	pb.PlanMode_Set_FullMethodName:                     {auth.Write, always},
	pb.PlanMode_PreStep_FullMethodName:                 {auth.Write, always},
	pb.PlanMode_Command_FullMethodName:                 {auth.Write, always},
	pb.PlanMode_ExitPlan_FullMethodName:                {auth.Write, withAnswer},
	pb.PlanMode_Projection_FullMethodName:              {auth.Read, never},
	pb.Cluster_Status_FullMethodName:                   {auth.Admin, never},
	pb.Cluster_Members_FullMethodName:                  {auth.Admin, never},
	pb.Cluster_TransferLeadership_FullMethodName:       {auth.Admin, always},
	pb.Cluster_RemoveMember_FullMethodName:             {auth.Admin, always},
	pb.Cluster_Leave_FullMethodName:                    {auth.Admin, always},
	pb.Cluster_Retention_FullMethodName:                {auth.Admin, unlessDryRun},
	pb.Cluster_Backup_FullMethodName:                   {auth.Admin, never},
}

// Calls outside the three services: health checks need nothing (load
// balancers probe them); reflection needs any authenticated caller.
const (
	healthPrefix     = "/grpc.health.v1.Health/"
	reflectionPrefix = "/grpc.reflection."
)

// sessionOf is the session a request names, if any.
func sessionOf(req any) (string, bool) {
	switch r := req.(type) {
	case interface{ GetHeader() *pb.SessionHeader }:
		return r.GetHeader().GetId(), true
	case interface{ GetLease() *pb.Lease }:
		return r.GetLease().GetSessionId(), true
	case interface{ GetSessionId() string }:
		return r.GetSessionId(), true
	}
	return "", false
}

// GuardConfig holds the per-principal request rate (per node).
type GuardConfig struct {
	// Rate is each principal's sustained requests per second on this node
	// (0: unlimited); a token-file entry may override it.
	Rate float64
	// Burst is how many requests above the rate a principal may send at once
	// (0: max(1, Rate)).
	Burst int
	// Streams caps the concurrent streams of each principal and of the node
	// (nil: no caps).
	Streams *Streams
}

// Guard authenticates every call, checks its permission and session prefix,
// and applies the per-principal rate, before any handler runs.
type Guard struct {
	auth    Authenticator
	cfg     GuardConfig
	metrics *Metrics
	logger  *slog.Logger

	mu      sync.Mutex
	buckets map[string]*bucket
}

// NewGuard returns a guard over a.
func NewGuard(a Authenticator, cfg GuardConfig, m *Metrics, logger *slog.Logger) *Guard {
	return &Guard{auth: a, cfg: cfg, metrics: m, logger: logger.With("component", "guard"), buckets: map[string]*bucket{}}
}

// admit authenticates and authorises a call; session checks wait for the
// request (check).
func (g *Guard) admit(ctx context.Context, method string) (context.Context, *auth.Principal, error) {
	if strings.HasPrefix(method, healthPrefix) || method == forwardpb.Forward_Calls_FullMethodName {
		// The forwarding stream carries no authority of its own: each call
		// in it is admitted here as if sent directly (forwardserver.go).
		return ctx, nil, nil
	}
	p, err := g.auth.Authenticate(ctx)
	if err != nil {
		return ctx, nil, g.deny(ctx, "unauthenticated", method, "", "", err)
	}
	if !strings.HasPrefix(method, reflectionPrefix) {
		rule, known := methods[method]
		need := rule.perm
		if !known {
			return ctx, nil, g.deny(ctx, "permission", method, p.Name, "",
				sessionstore.Errorf(sessionstore.ReasonPermissionDenied, "unknown method %s", method))
		}
		if !p.Has(need) {
			return ctx, nil, g.deny(ctx, "permission", method, p.Name, "",
				sessionstore.Errorf(sessionstore.ReasonPermissionDenied, "principal %q may not call %s: it needs %s permission", p.Name, method, need))
		}
	}
	if err := g.take(p); err != nil {
		g.logger.Warn("rate limited", "method", method, "principal", p.Name, "request_id", requestIDFrom(ctx))
		return ctx, nil, toStatus(err)
	}
	ctx = auth.NewContext(ctx, p)
	ctx = sessionstore.WithCaller(ctx, sessionstore.Caller{Name: p.Name, MaxSessions: p.MaxSessions})
	return ctx, p, nil
}

// check refuses a request naming a session outside the principal's prefixes.
func (g *Guard) check(ctx context.Context, method string, p *auth.Principal, req any) error {
	if p == nil {
		return nil
	}
	id, ok := sessionOf(req)
	if !ok || p.Covers(id) {
		return nil
	}
	return g.deny(ctx, "session", method, p.Name, id, sessionstore.Errorf(sessionstore.ReasonPermissionDenied,
		"principal %q may not access session %s", p.Name, sessionstore.Quote(id)))
}

// deny logs a refusal (never the credential) and returns its status.
func (g *Guard) deny(ctx context.Context, why, method, principal, session string, err error) error {
	g.metrics.Denied.WithLabelValues(why).Inc()
	attrs := []any{"method", method, "reason", why, "err", err.Error(), "request_id", requestIDFrom(ctx)}
	if principal != "" {
		attrs = append(attrs, "principal", principal)
	}
	if session != "" {
		attrs = append(attrs, "session", session)
	}
	g.logger.Warn("call refused", attrs...)
	return toStatus(err)
}

func (g *Guard) unary(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	ctx, p, err := g.admit(ctx, info.FullMethod)
	if err != nil {
		return nil, err
	}
	if err := g.check(ctx, info.FullMethod, p, req); err != nil {
		return nil, err
	}
	release, err := g.acquire(ctx, info.FullMethod, p)
	if err != nil {
		return nil, err
	}
	defer release()
	return h(ctx, req)
}

// acquire takes a slot of the method's stream cap, if it has one.
func (g *Guard) acquire(ctx context.Context, method string, p *auth.Principal) (release func(), err error) {
	kind, ok := streamKindOf[method]
	if !ok {
		return func() {}, nil
	}
	release, err = g.cfg.Streams.Acquire(kind, p.Name)
	if err != nil {
		g.logger.Warn("stream refused", "method", method, "principal", p.Name, "err", err, "request_id", requestIDFrom(ctx))
		return nil, toStatus(err)
	}
	return release, nil
}

func (g *Guard) stream(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	ctx, p, err := g.admit(ss.Context(), info.FullMethod)
	if err != nil {
		return err
	}
	release, err := g.acquire(ctx, info.FullMethod, p)
	if err != nil {
		return err
	}
	defer release()
	return h(srv, &guardedStream{ServerStream: ss, ctx: ctx, check: func(m any) error { return g.check(ctx, info.FullMethod, p, m) }})
}

// guardedStream carries the principal and checks the (single) request of a
// server-streaming call as the handler receives it.
type guardedStream struct {
	grpc.ServerStream
	ctx   context.Context
	check func(any) error
}

func (s *guardedStream) Context() context.Context { return s.ctx }

func (s *guardedStream) RecvMsg(m any) error {
	if err := s.ServerStream.RecvMsg(m); err != nil {
		return err
	}
	return s.check(m)
}

// take spends one request of p's rate, or refuses with QUOTA_EXCEEDED.
func (g *Guard) take(p *auth.Principal) error {
	rate, burst := g.cfg.Rate, g.cfg.Burst
	if p.Rate > 0 {
		rate, burst = p.Rate, p.Burst
	}
	if rate <= 0 {
		return nil
	}
	if burst <= 0 {
		burst = int(math.Max(1, math.Ceil(rate)))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	b := g.buckets[p.Name]
	if b == nil || b.rate != rate || b.burst != float64(burst) {
		b = &bucket{rate: rate, burst: float64(burst), tokens: float64(burst), last: time.Now()}
		g.buckets[p.Name] = b
	}
	if !b.take(time.Now()) {
		return sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"principal %q exceeds its request rate of %g/s (burst %d) on this node; retry later", p.Name, rate, burst)
	}
	return nil
}

// bucket is a token bucket.
type bucket struct {
	rate, burst, tokens float64
	last                time.Time
}

func (b *bucket) take(now time.Time) bool {
	b.tokens = math.Min(b.burst, b.tokens+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	if b.tokens < 1 {
		return false
	}
	b.tokens--
	return true
}
