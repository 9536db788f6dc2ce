package rpc

import (
	"context"
	"net"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/emptypb"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// refusingAddr returns a loopback address nobody listens on: connecting to
// it is refused.
func refusingAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// silentAddr returns a loopback address whose listener never accepts: the
// kernel completes TCP handshakes, and nothing ever answers, as from a
// leader whose machine stopped (or a network that drops its packets).
func silentAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	return ln.Addr().String()
}

// vanishingLeader serves every call (or forwarding stream) by reading its
// first message, signalling got and then dying with the connection open: the
// call reached the leader and was never answered.
func vanishingLeader(t *testing.T) (addr string, got <-chan struct{}) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ch := make(chan struct{}, 1)
	var srv *grpc.Server
	srv = grpc.NewServer(grpc.UnknownServiceHandler(func(_ any, ss grpc.ServerStream) error {
		if err := ss.RecvMsg(new(emptypb.Empty)); err != nil { // any message: its fields are kept as unknown
			return err
		}
		ch <- struct{}{}
		go srv.Stop()
		<-ss.Context().Done()
		return ss.Context().Err()
	}))
	go srv.Serve(ln)
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), ch
}

// A forwarded call that could not be sent (the leader's port refuses, or
// nothing answers there) was definitely not applied: NO_LEADER, so the client
// retries; one that was sent and got no answer may have been applied:
// OUTCOME_UNKNOWN for a write. A leader that does not answer at all fails the
// call once the connection attempt gives up, not at the call's deadline: by
// then the client could have found the new leader.
func TestForwardNeverSentIsNoLeader(t *testing.T) {
	cases := []struct {
		name     string
		sent     bool // the leader receives the call, then dies
		silent   bool // the leader's address never answers
		stream   bool
		mutating bool
		want     sessionstore.Reason
	}{
		{"refused write", false, false, false, true, sessionstore.ReasonNoLeader},
		{"refused read", false, false, false, false, sessionstore.ReasonNoLeader},
		{"refused streamed write", false, false, true, true, sessionstore.ReasonNoLeader},
		{"silent write", false, true, false, true, sessionstore.ReasonNoLeader},
		{"silent read", false, true, false, false, sessionstore.ReasonNoLeader},
		{"silent streamed write", false, true, true, true, sessionstore.ReasonNoLeader},
		{"sent write, no answer", true, false, false, true, sessionstore.ReasonOutcomeUnknown},
		{"sent read, no answer", true, false, false, false, sessionstore.ReasonNoLeader},
		{"sent streamed write, no answer", true, false, true, true, sessionstore.ReasonOutcomeUnknown},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			addr := refusingAddr(t)
			var got <-chan struct{}
			switch {
			case c.sent:
				addr, got = vanishingLeader(t)
			case c.silent:
				addr = silentAddr(t)
			}
			f := NewForwarder(1<<20, net.Dialer{}, nil)
			f.connectTimeout = 300 * time.Millisecond
			defer f.Close()
			// Below gRPC's own 20 s bound on connecting.
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			nl := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: addr}
			req := &pb.AppendRequest{SessionId: "s"}
			var err error
			if c.stream {
				err = f.stream(ctx, nl, pb.SessionPersistence_PrepareStream_FullMethodName, req,
					func() proto.Message { return &pb.AppendResponse{} }, func(proto.Message) error { return nil }, c.mutating)
			} else {
				err = f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName, req, &pb.AppendResponse{}, c.mutating)
			}
			if got != nil {
				select {
				case <-got:
				default:
					t.Fatal("the leader never received the call")
				}
			}
			if r := reasonOf(err); r != string(c.want) {
				t.Fatalf("got %v (reason %q), want %s", err, r, c.want)
			}
			if ctx.Err() != nil {
				t.Fatalf("the call waited for its deadline: %v", err)
			}
		})
	}
}
