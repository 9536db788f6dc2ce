package rpc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// fakeCluster is a ClusterBackend that records its calls and answers with
// canned values or err.
type fakeCluster struct {
	mu      sync.Mutex
	status  sessionstore.NodeStatus
	members []sessionstore.Member
	err     error
	calls   []string // method and argument, in order
}

func (f *fakeCluster) record(call string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, call)
	return f.err
}

func (f *fakeCluster) recorded() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.calls...)
}

func (f *fakeCluster) Status(context.Context) (sessionstore.NodeStatus, error) {
	return f.status, f.record("Status")
}

func (f *fakeCluster) Members(context.Context) ([]sessionstore.Member, error) {
	return f.members, f.record("Members")
}

func (f *fakeCluster) TransferLeadership(_ context.Context, to string) error {
	return f.record("TransferLeadership " + to)
}

func (f *fakeCluster) RemoveMember(_ context.Context, id string) error {
	return f.record("RemoveMember " + id)
}

func (f *fakeCluster) Leave(context.Context) error { return f.record("Leave") }
func (f *fakeCluster) Retention(context.Context, bool) ([]string, error) {
	return nil, f.record("Retention")
}

// startCluster serves a ClusterService over f on an in-process connection,
// with the production interceptors.
func startCluster(t *testing.T, f *fakeCluster) pb.ClusterClient {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(NewInterceptors(slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(nil), nil, nil).ServerOptions()...)
	NewClusterService(f).Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	conn, err := grpc.NewClient("passthrough:///bufnet",
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewClusterClient(conn)
}

func ctxFor(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

func wantCalls(t *testing.T, f *fakeCluster, want ...string) {
	t.Helper()
	got := f.recorded()
	if len(got) != len(want) {
		t.Fatalf("backend calls = %q, want %q", got, want)
	}
	for i := range got {
		if got[i] != want[i] {
			t.Fatalf("backend calls = %q, want %q", got, want)
		}
	}
}

func TestClusterStatus(t *testing.T) {
	f := &fakeCluster{status: sessionstore.NodeStatus{
		NodeID: "node2", State: "Follower", LeaderID: "node1", LeaderAddress: "10.0.0.1:7400",
		Term: 7, CommitIndex: 1234, AppliedIndex: 1230, ClusterID: "3f2a9c0d11aa22bb",
	}}
	c := startCluster(t, f)
	got, err := c.Status(ctxFor(t), &pb.StatusRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.StatusResponse{NodeId: "node2", State: "Follower", LeaderId: "node1", LeaderAddress: "10.0.0.1:7400",
		Term: 7, CommitIndex: 1234, AppliedIndex: 1230, ClusterId: "3f2a9c0d11aa22bb"}
	if !proto.Equal(got, want) {
		t.Fatalf("Status = %v, want %v", got, want)
	}
	wantCalls(t, f, "Status")
}

func TestClusterMembers(t *testing.T) {
	f := &fakeCluster{members: []sessionstore.Member{
		{NodeID: "node1", RaftAddress: "10.0.0.1:7401", APIAddress: "10.0.0.1:7400", Suffrage: "Voter", Health: "alive",
			AppliedIndex: new(uint64(1230)), LastContactMs: new(int64(0)), DiskFreeBytes: new(int64(5 << 30)), DiskLow: new(false), CommandVersion: new(uint32(10))},
		{NodeID: "node2", RaftAddress: "10.0.0.2:7401", APIAddress: "", Suffrage: "Nonvoter", Health: "unknown"},
	}}
	c := startCluster(t, f)
	got, err := c.Members(ctxFor(t), &pb.MembersRequest{})
	if err != nil {
		t.Fatal(err)
	}
	want := &pb.MembersResponse{Members: []*pb.Member{
		{NodeId: "node1", RaftAddress: "10.0.0.1:7401", ApiAddress: "10.0.0.1:7400", Suffrage: "Voter", Health: "alive",
			AppliedIndex: new(uint64(1230)), LastContactMs: new(int64(0)), DiskFreeBytes: new(int64(5 << 30)), DiskLow: new(false), CommandVersion: new(uint32(10))},
		{NodeId: "node2", RaftAddress: "10.0.0.2:7401", ApiAddress: "", Suffrage: "Nonvoter", Health: "unknown"},
	}}
	if !proto.Equal(got, want) {
		t.Fatalf("Members = %v, want %v", got, want)
	}
	// The console reads these names; a zero is written, an unknown value is
	// left out (the Connect JSON writes every populated field).
	var j bytes.Buffer
	if b, err := (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(got); err != nil || json.Compact(&j, b) != nil {
		t.Fatal(err)
	}
	if w := `"appliedIndex":"1230","lastContactMs":"0","diskFreeBytes":"5368709120","diskLow":false,"commandVersion":10}`; !strings.Contains(j.String(), w) ||
		strings.Count(j.String(), "appliedIndex") != 1 {
		t.Fatalf("Members as JSON = %s, want node1 ending %s and node2 without them", j.String(), w)
	}
	wantCalls(t, f, "Members")

	empty := startCluster(t, &fakeCluster{})
	got, err = empty.Members(ctxFor(t), &pb.MembersRequest{})
	if err != nil || len(got.GetMembers()) != 0 {
		t.Fatalf("Members of an empty configuration = %v, %v; want none, nil", got, err)
	}
}

func TestClusterTransferLeadership(t *testing.T) {
	f := &fakeCluster{}
	c := startCluster(t, f)
	for _, to := range []string{"node3", ""} {
		if _, err := c.TransferLeadership(ctxFor(t), &pb.TransferLeadershipRequest{ToNodeId: to}); err != nil {
			t.Fatalf("TransferLeadership(%q): %v", to, err)
		}
	}
	wantCalls(t, f, "TransferLeadership node3", "TransferLeadership ")
}

func TestClusterRemoveMember(t *testing.T) {
	f := &fakeCluster{}
	c := startCluster(t, f)
	if _, err := c.RemoveMember(ctxFor(t), &pb.RemoveMemberRequest{NodeId: "node3"}); err != nil {
		t.Fatal(err)
	}
	// An empty id is refused before the backend is asked.
	_, err := c.RemoveMember(ctxFor(t), &pb.RemoveMemberRequest{})
	checkErrorInfo(t, err, codes.InvalidArgument, sessionstore.ReasonInvalidArgument, "")
	wantCalls(t, f, "RemoveMember node3")
}

func TestClusterLeave(t *testing.T) {
	f := &fakeCluster{}
	c := startCluster(t, f)
	if _, err := c.Leave(ctxFor(t), &pb.LeaveRequest{}); err != nil {
		t.Fatal(err)
	}
	wantCalls(t, f, "Leave")
}

// Every rpc translates the backend's domain errors through toStatus: the code
// of the error table, the message verbatim and an ErrorInfo with the reason.
func TestClusterErrors(t *testing.T) {
	calls := map[string]func(context.Context, pb.ClusterClient) error{
		"Status": func(ctx context.Context, c pb.ClusterClient) error {
			_, err := c.Status(ctx, &pb.StatusRequest{})
			return err
		},
		"Members": func(ctx context.Context, c pb.ClusterClient) error {
			_, err := c.Members(ctx, &pb.MembersRequest{})
			return err
		},
		"TransferLeadership": func(ctx context.Context, c pb.ClusterClient) error {
			_, err := c.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToNodeId: "node2"})
			return err
		},
		"RemoveMember": func(ctx context.Context, c pb.ClusterClient) error {
			_, err := c.RemoveMember(ctx, &pb.RemoveMemberRequest{NodeId: "node2"})
			return err
		},
		"Leave": func(ctx context.Context, c pb.ClusterClient) error {
			_, err := c.Leave(ctx, &pb.LeaveRequest{})
			return err
		},
	}
	domain := []struct {
		reason sessionstore.Reason
		code   codes.Code
	}{
		{sessionstore.ReasonNoLeader, codes.Unavailable},
		{sessionstore.ReasonNotFound, codes.NotFound},
		{sessionstore.ReasonInvalidArgument, codes.InvalidArgument},
		{sessionstore.ReasonOutcomeUnknown, codes.Unavailable},
	}
	for name, call := range calls {
		t.Run(name, func(t *testing.T) {
			for _, d := range domain {
				msg := "cluster says " + string(d.reason)
				c := startCluster(t, &fakeCluster{err: sessionstore.Errorf(d.reason, "%s", msg)})
				checkErrorInfo(t, call(ctxFor(t), c), d.code, d.reason, msg)
			}
			// Anything else is INTERNAL without an ErrorInfo.
			c := startCluster(t, &fakeCluster{err: errors.New("boom")})
			st := status.Convert(call(ctxFor(t), c))
			if st.Code() != codes.Internal || len(st.Details()) != 0 {
				t.Errorf("plain error: code %v details %v, want INTERNAL and none", st.Code(), st.Details())
			}
		})
	}
}

// checkErrorInfo asserts err's code, ErrorInfo reason and domain, and (when
// msg is not empty) its message.
func checkErrorInfo(t *testing.T, err error, code codes.Code, reason sessionstore.Reason, msg string) {
	t.Helper()
	st := status.Convert(err)
	if st.Code() != code {
		t.Errorf("code = %v, want %v (err %v)", st.Code(), code, err)
	}
	if msg != "" && st.Message() != msg {
		t.Errorf("message = %q, want %q", st.Message(), msg)
	}
	var info *errdetails.ErrorInfo
	for _, d := range st.Details() {
		if i, ok := d.(*errdetails.ErrorInfo); ok {
			info = i
		}
	}
	if info == nil || info.Reason != string(reason) || info.Domain != ErrorDomain {
		t.Errorf("ErrorInfo = %v, want reason %s domain %s", info, reason, ErrorDomain)
	}
}
