package rpc

import (
	"context"
	"errors"
	"io"
	"net"
	"sync"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
)

// forwardedKey marks a call a follower forwarded to the leader. A forwarded
// call is never forwarded again (no loops while leadership moves): it fails
// with NO_LEADER instead, and the client retries.
const forwardedKey = "sessionstore-forwarded"

// Forwarder sends calls a follower cannot serve to the leader over pooled
// connections, so clients never need to know who leads.
type Forwarder struct {
	// Metrics, when set, counts forwarded calls.
	Metrics *Metrics

	maxMsg int
	dialer net.Dialer
	creds  credentials.TransportCredentials

	mu    sync.Mutex
	conns map[string]*grpc.ClientConn
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
	return &Forwarder{maxMsg: maxMsg, dialer: dialer, creds: creds, conns: map[string]*grpc.ClientConn{}}
}

// Close closes the pooled connections.
func (f *Forwarder) Close() {
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
	if c, ok := f.conns[addr]; ok {
		return c, nil
	}
	d := f.dialer
	c, err := grpc.NewClient(addr, grpc.WithTransportCredentials(f.creds),
		grpc.WithContextDialer(func(ctx context.Context, a string) (net.Conn, error) { return d.DialContext(ctx, "tcp", a) }),
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
	md, ok := metadata.FromIncomingContext(ctx)
	return ok && len(md.Get(forwardedKey)) > 0
}

// failure classifies a forwarding failure (DESIGN.md "Retries and outcomes"):
// an answer of the leader's own (with an ErrorInfo) passes through; anything
// else is OUTCOME_UNKNOWN for a mutating call (it may have been applied) and
// NO_LEADER for a read (safe to retry).
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

// unary forwards one unary call to the leader named by nl.
func (f *Forwarder) unary(ctx context.Context, nl *sessionstore.NotLeaderError, method string, req, resp proto.Message, mutating bool) error {
	if f == nil || isForwarded(ctx) {
		return toStatus(sessionstore.ErrNoLeader)
	}
	c, err := f.conn(nl.LeaderAPI)
	if err != nil {
		return toStatus(sessionstore.ErrNoLeader)
	}
	ctx = metadata.AppendToOutgoingContext(auth.Outgoing(ctx), forwardedKey, "1")
	if err := c.Invoke(ctx, method, req, resp); err != nil {
		err = failure(err, mutating)
		f.count(method, err)
		return err
	}
	f.count(method, nil)
	return nil
}

// stream forwards a server-streaming call, relaying every message.
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

func (f *Forwarder) stream(ctx context.Context, nl *sessionstore.NotLeaderError, method string, req proto.Message, newResp func() proto.Message, send func(proto.Message) error, mutating bool) error {
	if f == nil || isForwarded(ctx) {
		return toStatus(sessionstore.ErrNoLeader)
	}
	c, err := f.conn(nl.LeaderAPI)
	if err != nil {
		return toStatus(sessionstore.ErrNoLeader)
	}
	ctx = metadata.AppendToOutgoingContext(auth.Outgoing(ctx), forwardedKey, "1")
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := c.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, method)
	if err != nil {
		return failure(err, mutating)
	}
	if err := cs.SendMsg(req); err != nil {
		return failure(err, mutating)
	}
	if err := cs.CloseSend(); err != nil {
		return failure(err, mutating)
	}
	for {
		m := newResp()
		if err := cs.RecvMsg(m); err != nil {
			if errors.Is(err, io.EOF) {
				f.count(method, nil)
				return nil
			}
			err = failure(err, mutating)
			f.count(method, err)
			return err
		}
		if err := send(m); err != nil {
			return err
		}
	}
}
