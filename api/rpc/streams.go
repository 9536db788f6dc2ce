package rpc

import (
	"context"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// StreamKind is a class of long-lived responses a node caps.
type StreamKind string

const (
	// StreamRead: a read of a session's events (ReadRaw, ReadFrom, the
	// views, HTTP downloads): a stream holds up to a chunk in memory, a
	// unary view (Load, Inspect, Prepare) up to a message.
	StreamRead StreamKind = "read"
	// StreamWatch: Watch streams, mostly idle, so allowed in larger numbers.
	StreamWatch StreamKind = "watch"
)

// streamKindOf is the class of each capped method.
var streamKindOf = map[string]StreamKind{
	pb.SessionPersistence_Load_FullMethodName:          StreamRead,
	pb.SessionPersistence_Inspect_FullMethodName:       StreamRead,
	pb.SessionPersistence_Prepare_FullMethodName:       StreamRead,
	pb.SessionPersistence_ReadRaw_FullMethodName:       StreamRead,
	pb.SessionPersistence_ReadFrom_FullMethodName:      StreamRead,
	pb.SessionPersistence_LoadStream_FullMethodName:    StreamRead,
	pb.SessionPersistence_InspectStream_FullMethodName: StreamRead,
	pb.SessionPersistence_PrepareStream_FullMethodName: StreamRead,
	pb.SessionPersistence_Watch_FullMethodName:         StreamWatch,
}

// StreamLimit caps the concurrent streams of one kind (0: unlimited).
type StreamLimit struct {
	Node         int // on this node
	PerPrincipal int // of one principal on this node
}

// Streams counts the open streams of each kind, per node and per principal,
// and refuses one above a cap with QUOTA_EXCEEDED (RESOURCE_EXHAUSTED).
// gRPC (through the Guard) and the HTTP downloads share it.
type Streams struct {
	// WriteTimeout ends a stream one of whose messages the client has not
	// taken for this long (0: never): a reader that stops reading holds no
	// goroutine, message or slot for longer (serveStream).
	WriteTimeout time.Duration

	limits map[StreamKind]StreamLimit
	open   *prometheus.GaugeVec
	refuse *prometheus.CounterVec
	stall  *prometheus.CounterVec

	mu    sync.Mutex
	total map[StreamKind]int
	per   map[StreamKind]map[string]int
}

// NewStreams returns the stream caps, its instruments registered on reg
// (nil: unregistered).
func NewStreams(read, watch StreamLimit, reg prometheus.Registerer) *Streams {
	s := &Streams{
		limits: map[StreamKind]StreamLimit{StreamRead: read, StreamWatch: watch},
		open: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "sessionstore_streams_open", Help: "Open read streams on this node, by kind (read: ReadRaw, ReadFrom, views, HTTP downloads; watch)."},
			[]string{"kind"}),
		refuse: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_streams_refused_total", Help: "Streams refused by a cap, by kind and scope (node, principal)."},
			[]string{"kind", "scope"}),
		stall: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_streams_stalled_total", Help: "Streams ended because the client did not read for the stream write timeout, by kind."},
			[]string{"kind"}),
		total: map[StreamKind]int{},
		per:   map[StreamKind]map[string]int{},
	}
	for _, k := range []StreamKind{StreamRead, StreamWatch} {
		s.open.WithLabelValues(string(k))
		s.stall.WithLabelValues(string(k))
		s.refuse.WithLabelValues(string(k), "node")
		s.refuse.WithLabelValues(string(k), "principal")
		s.per[k] = map[string]int{}
	}
	if reg != nil {
		reg.MustRegister(s.open, s.refuse, s.stall)
	}
	return s
}

// Acquire takes a slot for a stream of kind opened by principal; release
// gives it back. A nil Streams caps nothing.
func (s *Streams) Acquire(kind StreamKind, principal string) (release func(), err error) {
	if s == nil {
		return func() {}, nil
	}
	lim := s.limits[kind]
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case lim.Node > 0 && s.total[kind] >= lim.Node:
		s.refuse.WithLabelValues(string(kind), "node").Inc()
		return nil, sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"this node already serves %d %s streams, its limit; retry later or on another node", lim.Node, kind)
	case lim.PerPrincipal > 0 && s.per[kind][principal] >= lim.PerPrincipal:
		s.refuse.WithLabelValues(string(kind), "principal").Inc()
		return nil, sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"principal %q already has %d %s streams open on this node, its limit; close one or retry later", principal, lim.PerPrincipal, kind)
	}
	s.total[kind]++
	s.per[kind][principal]++
	s.open.WithLabelValues(string(kind)).Inc()
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.total[kind]--
			if s.per[kind][principal]--; s.per[kind][principal] == 0 {
				delete(s.per[kind], principal)
			}
			s.open.WithLabelValues(string(kind)).Dec()
		})
	}, nil
}

// Stalled counts a stream ended by its write timeout.
func (s *Streams) Stalled(kind StreamKind) {
	if s != nil {
		s.stall.WithLabelValues(string(kind)).Inc()
	}
}

// errStalled ends a stream whose client stopped reading.
func errStalled(d time.Duration) error {
	return sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
		"the stream was ended: the client read nothing for %v (the stream write timeout)", d)
}

// serveStream is the innermost stream interceptor. It sends the handler's
// messages through a deadlineSender when the method is a capped stream kind
// (Streams.WriteTimeout), and forwards a stream the handler answered "not the
// leader" before sending anything to the leader that answer names (as
// forwardUnary does for unary calls; f nil: NO_LEADER), relaying the leader's
// messages through the same sender.
func serveStream(f *Forwarder, streams *Streams) grpc.StreamServerInterceptor {
	return func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) error {
		st := &servedStream{ServerStream: ss, send: ss.SendMsg}
		if kind, ok := streamKindOf[info.FullMethod]; ok && streams != nil && streams.WriteTimeout > 0 {
			d := newDeadlineSender(ss.Context(), streams.WriteTimeout, ss.SendMsg, func() { streams.Stalled(kind) })
			defer d.Close()
			st.send = d.Send
		}
		err := h(srv, st)
		nl := leaderOf(err)
		if nl == nil || st.sent || st.req == nil {
			return err
		}
		rule, known := methods[info.FullMethod]
		if !known {
			return toStatus(sessionstore.ErrNoLeader)
		}
		out, rerr := newResponse(info.FullMethod)
		if rerr != nil {
			return toStatus(sessionstore.ErrNoLeader)
		}
		newResp := func() proto.Message { return proto.Clone(out) }
		return f.stream(st.Context(), nl, info.FullMethod, st.req, newResp, func(m proto.Message) error { return st.SendMsg(m) },
			rule.mutating(st.Context(), st.req))
	}
}

// servedStream is a server stream as serveStream hands it to the handler:
// it keeps the request (a server stream's one message) and notes a send.
type servedStream struct {
	grpc.ServerStream
	send func(any) error
	req  proto.Message
	sent bool
}

func (s *servedStream) RecvMsg(m any) error {
	err := s.ServerStream.RecvMsg(m)
	if pm, ok := m.(proto.Message); ok && err == nil && s.req == nil {
		s.req = pm
	}
	return err
}

func (s *servedStream) SendMsg(m any) error {
	s.sent = true
	return s.send(m)
}

// deadlineSender sends a stream's messages from a goroutine of its own, so the
// handler can give up on a send that blocks (the client stopped reading and
// flow control is full) and end the stream: gRPC's Send cannot be cancelled
// otherwise. Returning from the handler resets the stream, which unblocks the
// pending Send; until then that one message is the memory the stream holds.
type deadlineSender struct {
	ctx     context.Context
	timeout time.Duration
	send    func(any) error
	in      chan any
	out     chan error
	timer   *time.Timer
	busy    bool // a Send gave up on is still pending
	onStall func()
}

// newDeadlineSender returns a sender over send (timeout 0: plain sends).
func newDeadlineSender(ctx context.Context, timeout time.Duration, send func(any) error, onStall func()) *deadlineSender {
	d := &deadlineSender{ctx: ctx, timeout: timeout, send: send, onStall: onStall}
	if timeout > 0 {
		d.in, d.out = make(chan any), make(chan error, 1)
		go func() {
			for m := range d.in {
				d.out <- send(m)
			}
		}()
	}
	return d
}

// Send sends m, or fails when it has not gone out within the timeout.
func (d *deadlineSender) Send(m any) error {
	if d.timeout <= 0 {
		return d.send(m)
	}
	if d.busy {
		return errStalled(d.timeout)
	}
	d.in <- m
	if d.timer == nil {
		d.timer = time.NewTimer(d.timeout)
	} else {
		d.timer.Reset(d.timeout)
	}
	select {
	case err := <-d.out:
		d.timer.Stop()
		return err
	case <-d.timer.C:
		d.busy = true
		if d.onStall != nil {
			d.onStall()
		}
		return errStalled(d.timeout)
	case <-d.ctx.Done():
		d.busy = true
		return d.ctx.Err()
	}
}

// Close stops the sending goroutine (after its pending Send returns).
func (d *deadlineSender) Close() {
	if d.in != nil {
		close(d.in)
	}
}
