package client

import (
	"context"
	"errors"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// fakeClusterServer is a Cluster server whose calls fail with queued errors
// (the fake's queue) before they answer.
type fakeClusterServer struct {
	sessionpb.UnimplementedClusterServer
	*fake
}

func (f fakeClusterServer) Status(_ context.Context, r *sessionpb.StatusRequest) (*sessionpb.StatusResponse, error) {
	if err := f.enter("Status", r); err != nil {
		return nil, err
	}
	return &sessionpb.StatusResponse{NodeId: "node1", State: "Leader", LeaderId: "node1", Term: 2, ClusterId: "c1"}, nil
}

func (f fakeClusterServer) Members(_ context.Context, r *sessionpb.MembersRequest) (*sessionpb.MembersResponse, error) {
	if err := f.enter("Members", r); err != nil {
		return nil, err
	}
	return &sessionpb.MembersResponse{Members: []*sessionpb.Member{
		{NodeId: "node1", RaftAddress: "127.0.0.1:7401", ApiAddress: "127.0.0.1:7400", Suffrage: "Voter", Health: "alive"},
	}}, nil
}

func (f fakeClusterServer) TransferLeadership(_ context.Context, r *sessionpb.TransferLeadershipRequest) (*sessionpb.TransferLeadershipResponse, error) {
	return &sessionpb.TransferLeadershipResponse{}, f.enter("TransferLeadership", r)
}

func (f fakeClusterServer) RemoveMember(_ context.Context, r *sessionpb.RemoveMemberRequest) (*sessionpb.RemoveMemberResponse, error) {
	return &sessionpb.RemoveMemberResponse{}, f.enter("RemoveMember", r)
}

func (f fakeClusterServer) Leave(_ context.Context, r *sessionpb.LeaveRequest) (*sessionpb.LeaveResponse, error) {
	return &sessionpb.LeaveResponse{}, f.enter("Leave", r)
}

func startClusterFake(t *testing.T) (*fake, *Client) {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer()
	f := newFake()
	sessionpb.RegisterClusterServer(srv, fakeClusterServer{fake: f})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	c, err := Dial(context.Background(), "passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return f, c.WithOptions(fastOptions)
}

func TestClusterReadsRetryWhenNotServed(t *testing.T) {
	f, c := startClusterFake(t)
	f.fail("Status",
		infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"),
		status.Error(codes.Unavailable, "connection reset"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonShuttingDown, "shutting down"))
	st, err := c.Status(ctxT(t))
	if err != nil || st.GetNodeId() != "node1" || st.GetState() != "Leader" || st.GetTerm() != 2 || st.GetClusterId() != "c1" {
		t.Fatalf("Status = %v, %v", st, err)
	}
	if n := f.callCount("Status"); n != 4 {
		t.Fatalf("Status calls = %d, want 4", n)
	}

	f.fail("Members", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	ms, err := c.Members(ctxT(t))
	if err != nil || len(ms) != 1 || ms[0].GetNodeId() != "node1" || ms[0].GetHealth() != "alive" {
		t.Fatalf("Members = %v, %v", ms, err)
	}
	if n := f.callCount("Members"); n != 2 {
		t.Fatalf("Members calls = %d, want 2", n)
	}
}

// A read is not retried when the server may have served it or the error is
// definite; the error comes back as *sessionstore.Error.
func TestClusterReadsDefiniteErrors(t *testing.T) {
	f, c := startClusterFake(t)
	f.fail("Status", infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown"))
	if _, err := c.Status(ctxT(t)); !errors.Is(err, sessionstore.ErrOutcomeUnknown) {
		t.Fatalf("Status err = %v, want OUTCOME_UNKNOWN", err)
	}
	f.fail("Members", status.Error(codes.DeadlineExceeded, "server timeout"))
	if _, err := c.Members(ctxT(t)); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("Members err = %v, want DEADLINE_EXCEEDED", err)
	}
	if a, b := f.callCount("Status"), f.callCount("Members"); a != 1 || b != 1 {
		t.Fatalf("calls = %d, %d; want 1 each", a, b)
	}
}

// Membership changes are sent once, even on errors a read would retry.
func TestClusterChangesAreNeverRetried(t *testing.T) {
	f, c := startClusterFake(t)
	changes := []struct {
		method string
		call   func(context.Context) error
		want   proto.Message
	}{
		{"TransferLeadership", func(ctx context.Context) error { return c.TransferLeadership(ctx, "node2") },
			&sessionpb.TransferLeadershipRequest{ToNodeId: "node2"}},
		{"RemoveMember", func(ctx context.Context) error { return c.RemoveMember(ctx, "node3") },
			&sessionpb.RemoveMemberRequest{NodeId: "node3"}},
		{"Leave", func(ctx context.Context) error { return c.Leave(ctx) }, &sessionpb.LeaveRequest{}},
	}
	for _, ch := range changes {
		f.fail(ch.method, infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
		if err := ch.call(ctxT(t)); !errors.Is(err, sessionstore.ErrNoLeader) {
			t.Errorf("%s err = %v, want NO_LEADER", ch.method, err)
		}
		f.fail(ch.method, status.Error(codes.Unavailable, "connection reset"))
		if err := ch.call(ctxT(t)); status.Code(err) != codes.Unavailable {
			t.Errorf("%s err = %v, want UNAVAILABLE", ch.method, err)
		}
		if err := ch.call(ctxT(t)); err != nil {
			t.Errorf("%s: %v", ch.method, err)
		}
		if n := f.callCount(ch.method); n != 3 {
			t.Errorf("%s calls = %d, want 3 (one per call)", ch.method, n)
		}
		for _, r := range f.requests(ch.method) {
			if !proto.Equal(r, ch.want) {
				t.Errorf("%s request = %v, want %v", ch.method, r, ch.want)
			}
		}
	}
}
