package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// Config configures a client of several nodes (Open).
type Config struct {
	// Endpoints are the nodes' gRPC addresses ("host:port", or any gRPC
	// target), at least one. They always win over the addresses the nodes
	// hand out (see Open).
	Endpoints []string
	// DialOptions are applied to every connection after the defaults
	// (insecure transport credentials, 16 MiB messages both ways, 3 s to
	// connect and at most 5 s between attempts): transport credentials,
	// client.BearerToken, ….
	DialOptions []grpc.DialOption
	// Options are the retries; a zero MaxAttempts means OpenAttempts here.
	Options Options
}

// OpenAttempts is the default MaxAttempts of a client made by Open: with the
// default backoff (20 ms doubling to 1 s) the attempts span several seconds,
// enough to ride out the loss of a node and a leader election. The caller's
// context bounds them too.
const OpenAttempts = 20

// avoidBase and avoidMax bound how long a node that failed is passed over:
// avoidBase after one failure, doubling with each further one, at most
// avoidMax. The first answer from it resets it.
const (
	avoidBase = 500 * time.Millisecond
	avoidMax  = 30 * time.Second
)

// connectParams bound each attempt to connect to a node and the wait
// between attempts (gRPC's defaults are 20 s and up to 2 minutes): a call
// waits while its connection is being made, so a node whose machine stopped,
// or whose packets are dropped, would hold it until its deadline instead of
// letting the client move on, and a restarted node would be reached again
// only minutes later. Config.DialOptions may set others.
var connectParams = grpc.ConnectParams{
	Backoff:           backoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: 5 * time.Second},
	MinConnectTimeout: 3 * time.Second,
}

// probeTimeout bounds the health check that asks each configured endpoint
// for its node id when the client opens.
const probeTimeout = 3 * time.Second

// Open creates a client of several nodes. Calls go to one node at a time:
// writes (Create, Append, Load, Prepare, KeepAlive, Release, Delete and the
// plan-mode writes) to the leader once the client knows it, so that no
// follower has to forward them; reads to the current node. A node that
// fails a call with UNAVAILABLE, NO_LEADER, SHUTTING_DOWN or a lost
// connection is passed over for a while and the call is retried, under the
// retry rules (same bytes, same request id), on another node.
//
// Every answer of a node carries hints (docs/api.md "Failover"): its own node
// id, the leader's id and client address, and the voters' ids and client
// addresses (each node's --advertise-client-addr). Configured endpoints win
// over hinted addresses: the client learns which node each configured
// endpoint reaches from that endpoint's own answers (it asks each one with a
// health check when it opens, and from then on reads every answer), and
// reaches a node through its configured endpoint. A hinted address is used
// only for a node that no configured endpoint reaches, and only once every
// configured endpoint's node is known, so a client that lists every node
// (such as a host client of a container cluster whose nodes advertise
// addresses only the containers can resolve) never dials a hinted address,
// while a client given one node still finds the others.
//
// Connections are made lazily, as with Dial; ctx only guards Open itself.
// Close closes every connection.
func Open(ctx context.Context, cfg Config) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if len(cfg.Endpoints) == 0 {
		return nil, errors.New("client: Open needs at least one endpoint")
	}
	if err := cfg.Options.Validate(); err != nil {
		return nil, err
	}
	opts := cfg.Options
	if opts.MaxAttempts == 0 {
		opts.MaxAttempts = OpenAttempts
	}
	p := &pool{dialOpts: cfg.DialOptions, discover: true, byAddr: map[string]*endpoint{}}
	for _, a := range cfg.Endpoints {
		a = strings.TrimSpace(a)
		if a == "" {
			return nil, errors.New("client: an empty endpoint")
		}
		if p.byAddr[a] != nil {
			continue
		}
		e, err := p.dial(a, true)
		if err != nil {
			p.close()
			return nil, err
		}
		p.add(e)
	}
	probeCtx, cancel := context.WithCancel(context.Background())
	p.stopProbes = cancel
	for _, e := range p.eps {
		p.probes.Add(1)
		go func() {
			defer p.probes.Done()
			p.probe(probeCtx, e)
		}()
	}
	c := &Client{pool: p, opts: opts.withDefaults()}
	return c, nil
}

// endpoint is one node address the client talks to.
type endpoint struct {
	addr       string
	configured bool // given to Open (or New, Dial); false: learned from hints
	conn       grpc.ClientConnInterface
	owned      *grpc.ClientConn // closed by Close; nil when the caller owns it
	rpc        sessionpb.SessionPersistenceClient
	plan       sessionpb.PlanModeClient
	cluster    sessionpb.ClusterClient

	// Guarded by pool.mu.
	nodeID     string    // the node it reached last ("": not known yet)
	failures   int       // consecutive failures
	avoidUntil time.Time // passed over until then
}

func newEndpoint(addr string, conn grpc.ClientConnInterface, configured bool) *endpoint {
	return &endpoint{addr: addr, configured: configured, conn: conn,
		rpc:  sessionpb.NewSessionPersistenceClient(conn),
		plan: sessionpb.NewPlanModeClient(conn), cluster: sessionpb.NewClusterClient(conn)}
}

// pool is the set of endpoints and what the client knows of the cluster.
type pool struct {
	dialOpts []grpc.DialOption
	// discover: hints are followed (Open); a client of one connection (New,
	// Dial) talks to its node only.
	discover   bool
	probes     sync.WaitGroup
	stopProbes context.CancelFunc

	mu     sync.Mutex
	eps    []*endpoint // configured first, in the configured order
	byAddr map[string]*endpoint
	cur    int    // the endpoint reads (and writes without a known leader) go to
	leader string // the leader's node id ("": not known)
	// hinted is each node's client address as the last hints said.
	hinted map[string]string
	closed bool
}

// single is the pool of a client of one connection.
func single(conn grpc.ClientConnInterface, owned *grpc.ClientConn) *pool {
	e := newEndpoint("", conn, true)
	e.owned = owned
	return &pool{eps: []*endpoint{e}, byAddr: map[string]*endpoint{}}
}

// dial makes the (lazy) connection of an endpoint; its interceptors read
// the hints of every answer.
func (p *pool) dial(addr string, configured bool) (*endpoint, error) {
	e := &endpoint{}
	opts := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithConnectParams(connectParams),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
	}, p.dialOpts...)
	opts = append(opts, grpc.WithChainUnaryInterceptor(p.unaryHints(e)), grpc.WithChainStreamInterceptor(p.streamHints(e)))
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	*e = *newEndpoint(addr, conn, configured)
	e.owned = conn
	return e, nil
}

func (p *pool) add(e *endpoint) {
	p.eps = append(p.eps, e)
	p.byAddr[e.addr] = e
}

// probe asks a configured endpoint for its node id (the answer's hints), so
// that the leader's configured endpoint is known before a write needs it.
// Failures are ignored: calls find a node that does not answer.
func (p *pool) probe(ctx context.Context, e *endpoint) {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	_, _ = healthpb.NewHealthClient(e.conn).Check(ctx, &healthpb.HealthCheckRequest{})
}

func (p *pool) unaryHints(e *endpoint) grpc.UnaryClientInterceptor {
	return func(ctx context.Context, method string, req, reply any, cc *grpc.ClientConn, invoker grpc.UnaryInvoker, opts ...grpc.CallOption) error {
		var md metadata.MD
		err := invoker(ctx, method, req, reply, cc, append(opts, grpc.Header(&md))...)
		p.observe(e, md)
		return err
	}
}

func (p *pool) streamHints(e *endpoint) grpc.StreamClientInterceptor {
	return func(ctx context.Context, desc *grpc.StreamDesc, cc *grpc.ClientConn, method string, streamer grpc.Streamer, opts ...grpc.CallOption) (grpc.ClientStream, error) {
		s, err := streamer(ctx, desc, cc, method, opts...)
		if err != nil {
			return nil, err
		}
		return &hintStream{ClientStream: s, seen: func(md metadata.MD) { p.observe(e, md) }}, nil
	}
}

// hintStream reads the hints once the first message (or the end) arrived,
// when Header no longer blocks.
type hintStream struct {
	grpc.ClientStream
	once sync.Once
	seen func(metadata.MD)
}

func (s *hintStream) RecvMsg(m any) error {
	err := s.ClientStream.RecvMsg(m)
	s.once.Do(func() {
		md, _ := s.Header()
		s.seen(md)
	})
	return err
}

// observe folds one answer's hints in: e reached node NodeID, the leader is
// as it says, and the voters are at those client addresses.
func (p *pool) observe(e *endpoint, md metadata.MD) {
	node := first(md, sessionstore.HintNodeKey)
	if node == "" {
		return // not a node of ours, or no answer at all
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if e.nodeID != node {
		// Another endpoint that claimed this node reached it before a
		// restart on another address: the newest answer wins.
		for _, o := range p.eps {
			if o != e && o.nodeID == node {
				o.nodeID = ""
			}
		}
		e.nodeID = node
	}
	e.failures, e.avoidUntil = 0, time.Time{}
	if !p.discover {
		return
	}
	if p.hinted == nil {
		p.hinted = map[string]string{}
	}
	id, addr, _ := strings.Cut(first(md, sessionstore.HintLeaderKey), "=")
	p.leader = id
	if id != "" && addr != "" {
		p.hinted[id] = addr
	}
	for _, kv := range strings.Split(first(md, sessionstore.HintEndpointsKey), ",") {
		if id, addr, ok := strings.Cut(kv, "="); ok && id != "" && addr != "" {
			p.hinted[id] = addr
		}
	}
}

func first(md metadata.MD, key string) string {
	if v := md.Get(key); len(v) > 0 {
		return v[0]
	}
	return ""
}

// pick returns the endpoint for the next attempt: for a write the leader's
// when it is known and not being avoided, otherwise the current one (or,
// when that is being avoided, the next that is not; when every one is, the
// one free soonest).
func (p *pool) pick(write bool) *endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	if write && p.leader != "" {
		if e := p.resolve(p.leader); e != nil && !now.Before(e.avoidUntil) {
			return e
		}
	}
	n := len(p.eps)
	best := p.cur
	for i := range n {
		j := (p.cur + i) % n
		e := p.eps[j]
		if !now.Before(e.avoidUntil) {
			p.cur = j
			return e
		}
		if e.avoidUntil.Before(p.eps[best].avoidUntil) {
			best = j
		}
	}
	p.cur = best
	return p.eps[best]
}

// resolve is the endpoint of node id under the rule of Open: the endpoint
// known to reach it (configured ones first), else its hinted address (dialled
// now) when no configured endpoint's node is unknown; nil otherwise.
// Called with mu held.
func (p *pool) resolve(id string) *endpoint {
	var found *endpoint
	unknown := false
	for _, e := range p.eps {
		if e.nodeID == id && (found == nil || (e.configured && !found.configured)) {
			found = e
		}
		if e.configured && e.nodeID == "" {
			unknown = true
		}
	}
	if found != nil || !p.discover || p.closed {
		return found
	}
	addr := p.hinted[id]
	if addr == "" {
		return nil
	}
	if e := p.byAddr[addr]; e != nil {
		if e.nodeID == "" {
			return e // a configured address the node hands out itself
		}
		return nil // known to reach another node: the hint is stale
	}
	if unknown {
		return nil
	}
	e, err := p.dial(addr, false)
	if err != nil {
		return nil
	}
	e.nodeID = id
	p.add(e)
	return e
}

// failed records an attempt on e that failed with err: an error that says the
// node cannot serve (a lost connection, UNAVAILABLE without the store's
// reason, NO_LEADER, SHUTTING_DOWN) makes the client pass it over for a
// while and forget a leader it was; other errors change nothing.
func (p *pool) failed(e *endpoint, err error) {
	if !nodeFailure(err) {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.eps) == 1 {
		return // nowhere else to go
	}
	d := avoidBase << min(e.failures, 8)
	e.failures++
	e.avoidUntil = time.Now().Add(min(d, avoidMax))
	if e.nodeID != "" && e.nodeID == p.leader {
		p.leader = ""
	}
	if p.eps[p.cur] == e {
		p.cur = (p.cur + 1) % len(p.eps)
	}
}

// nodeFailure reports an error after which another node may serve the call.
func nodeFailure(err error) bool {
	if reason, _, ok := errorInfo(err); ok {
		return reason == sessionstore.ReasonNoLeader || reason == sessionstore.ReasonShuttingDown
	}
	return status.Code(err) == codes.Unavailable
}

// current is the endpoint calls that are not retried go to.
func (p *pool) current() *endpoint {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.eps[p.cur]
}

func (p *pool) close() error {
	if p.stopProbes != nil {
		p.stopProbes()
	}
	p.probes.Wait()
	p.mu.Lock()
	p.closed = true
	eps := append([]*endpoint(nil), p.eps...)
	p.mu.Unlock()
	var errs []error
	for _, e := range eps {
		if e.owned != nil {
			errs = append(errs, e.owned.Close())
		}
	}
	return errors.Join(errs...)
}

// Endpoints returns the addresses the client uses, configured first, each
// with the node id it reached last ("" when not known yet), and the leader's
// node id as the client knows it. For logs and tests.
func (c *Client) Endpoints() (eps []EndpointInfo, leader string) {
	p := c.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for i, e := range p.eps {
		eps = append(eps, EndpointInfo{Addr: e.addr, NodeID: e.nodeID, Configured: e.configured, Current: i == p.cur})
	}
	return eps, p.leader
}

// EndpointInfo describes one endpoint of a client.
type EndpointInfo struct {
	Addr       string
	NodeID     string
	Configured bool
	// Current: reads, and writes while the leader is unknown, go here.
	Current bool
}
