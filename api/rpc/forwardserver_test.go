package rpc

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

const (
	fwdAliceToken = "alice-token-0123456789abcdef"
	fwdReaderTok  = "reader-token-0123456789abcdef"
)

// echoLeader is a leader's persistence service that answers Append with
// what the call looked like on the leader: the principal, whether it was
// marked forwarded and how long it had left.
type echoLeader struct {
	pb.UnimplementedSessionPersistenceServer
	block    chan struct{}  // when set, Append waits for it or its context
	canceled chan struct{}  // gets a token when a blocked Append's context ends
	seen     map[string]int // session id → calls served
	mu       sync.Mutex
}

func (e *echoLeader) Append(ctx context.Context, r *pb.AppendRequest) (*pb.AppendResponse, error) {
	e.mu.Lock()
	e.seen[r.SessionId]++
	e.mu.Unlock()
	if e.block != nil {
		select {
		case <-e.block:
		case <-ctx.Done():
			e.canceled <- struct{}{}
			return nil, ctx.Err()
		}
	}
	left := "none"
	if dl, ok := ctx.Deadline(); ok {
		left = fmt.Sprint(time.Until(dl) > time.Minute)
	}
	rev := fmt.Sprintf("%s|forwarded=%v|long-deadline=%s|%s", auth.FromContext(ctx).Name, isForwarded(ctx), left, r.SessionId)
	return &pb.AppendResponse{Revision: rev, NextSeq: int64(len(r.Events))}, nil
}

// startLeader serves e with the production interceptors and guard over a
// token file, with (stream) or without (an older build) the Forward service.
func startLeader(t *testing.T, e *echoLeader, stream bool) string {
	t.Helper()
	addr, _, _ := startLeaderServer(t, e, stream)
	return addr
}

func startLeaderServer(t *testing.T, e *echoLeader, stream bool) (string, *ForwardServer, *grpc.Server) {
	t.Helper()
	tokens := filepath.Join(t.TempDir(), "tokens")
	table := fwdAliceToken + " alice read,write alice/\n" + fwdReaderTok + " reader read *\n"
	if err := os.WriteFile(tokens, []byte(table), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := auth.New(tokens, nil)
	if err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	m := NewMetrics(nil)
	ic := NewInterceptors(logger, m, NewGuard(a, GuardConfig{}, m, logger), nil)
	srv := grpc.NewServer(ic.ServerOptions()...)
	var reg grpc.ServiceRegistrar = srv
	var fs *ForwardServer
	if stream {
		fs = NewForwardServer(1<<20, ic.Unary())
		fs.Register(srv)
		reg = fs.Registrar(srv)
	}
	pb.RegisterSessionPersistenceServer(reg, e)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(srv.Stop)
	return ln.Addr().String(), fs, srv
}

// asClient is the context of a call a follower received from a client with
// token (and authenticated as principal).
func asClient(ctx context.Context, token, principal string) context.Context {
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs("authorization", "Bearer "+token))
	return auth.NewContext(ctx, &auth.Principal{Name: principal})
}

// Forwarded calls run on the leader as direct calls would: each is
// authenticated and authorised by its own credentials, carries its deadline
// and the forwarded mark, and gets its own answer, whether the leader has the
// forwarding stream or is an older build without it.
func TestForwardRunsEachCallAsDirect(t *testing.T) {
	for _, stream := range []bool{true, false} {
		t.Run(fmt.Sprintf("stream=%v", stream), func(t *testing.T) {
			e := &echoLeader{seen: map[string]int{}}
			addr := startLeader(t, e, stream)
			f := NewForwarder(1<<20, net.Dialer{}, nil)
			defer f.Close()
			nl := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: addr}

			cases := []struct {
				token, session string
				deadline       time.Duration
				wantRev        string
				wantCode       codes.Code
				wantReason     sessionstore.Reason
			}{
				{fwdAliceToken, "alice/a", 0, "alice|forwarded=true|long-deadline=none|alice/a", codes.OK, ""},
				{fwdAliceToken, "alice/b", 5 * time.Minute, "alice|forwarded=true|long-deadline=true|alice/b", codes.OK, ""},
				{fwdAliceToken, "alice/c", 30 * time.Second, "alice|forwarded=true|long-deadline=false|alice/c", codes.OK, ""},
				{fwdAliceToken, "bob/a", 0, "", codes.PermissionDenied, sessionstore.ReasonPermissionDenied},
				{fwdReaderTok, "alice/a", 0, "", codes.PermissionDenied, sessionstore.ReasonPermissionDenied},
				{"unknown-token-0123456789abcdef", "alice/a", 0, "", codes.Unauthenticated, sessionstore.ReasonUnauthenticated},
			}
			var wg sync.WaitGroup
			for i := 0; i < 20; i++ { // concurrently, so replies come back interleaved
				for _, c := range cases {
					wg.Add(1)
					go func() {
						defer wg.Done()
						ctx := asClient(context.Background(), c.token, "")
						var cancel context.CancelFunc = func() {}
						if c.deadline > 0 {
							ctx, cancel = context.WithTimeout(ctx, c.deadline)
						}
						defer cancel()
						out := new(pb.AppendResponse)
						err := f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName,
							&pb.AppendRequest{SessionId: c.session, Events: []string{"{}"}}, out, true)
						if status.Code(err) != c.wantCode || reasonOf(err) != string(c.wantReason) {
							t.Errorf("%s %s: got %v, want %v %s", c.token[:5], c.session, err, c.wantCode, c.wantReason)
							return
						}
						if err == nil && (out.Revision != c.wantRev || out.NextSeq != 1) {
							t.Errorf("%s %s: got %q next %d, want %q", c.token[:5], c.session, out.Revision, out.NextSeq, c.wantRev)
						}
					}()
				}
			}
			wg.Wait()
			if got := e.seen["alice/a"]; got != 20 {
				t.Errorf("alice/a served %d times, want 20 (refused calls never reach the handler)", got)
			}
			if f.isLegacy(addr) == stream {
				t.Errorf("legacy(%s) = %v with the stream %v", addr, !stream, stream)
			}
		})
	}
}

// A client that gives up cancels its call on the leader too, and learns
// that its write may have been applied.
func TestForwardCancelReachesTheLeader(t *testing.T) {
	e := &echoLeader{seen: map[string]int{}, block: make(chan struct{}), canceled: make(chan struct{}, 1)}
	addr := startLeader(t, e, true)
	f := NewForwarder(1<<20, net.Dialer{}, nil)
	defer f.Close()
	nl := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: addr}
	ctx, cancel := context.WithCancel(asClient(context.Background(), fwdAliceToken, ""))
	errc := make(chan error, 1)
	go func() {
		errc <- f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName, &pb.AppendRequest{SessionId: "alice/x"}, new(pb.AppendResponse), true)
	}()
	for {
		e.mu.Lock()
		n := e.seen["alice/x"]
		e.mu.Unlock()
		if n > 0 {
			break
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	if err := <-errc; reasonOf(err) != string(sessionstore.ReasonOutcomeUnknown) {
		t.Fatalf("got %v, want OUTCOME_UNKNOWN", err)
	}
	select {
	case <-e.canceled:
	case <-time.After(30 * time.Second):
		t.Fatal("the leader's call was never cancelled")
	}
	// The stream outlives the cancelled call.
	close(e.block)
	out := new(pb.AppendResponse)
	if err := f.unary(asClient(context.Background(), fwdAliceToken, ""), nl, pb.SessionPersistence_Append_FullMethodName,
		&pb.AppendRequest{SessionId: "alice/y"}, out, true); err != nil || !strings.HasPrefix(out.Revision, "alice|") {
		t.Fatalf("after a cancel: %v %v", out, err)
	}
}

// A request too large for a message is refused before it leaves, and does
// not disturb the stream's other calls.
func TestForwardOversizedCallNeverLeaves(t *testing.T) {
	e := &echoLeader{seen: map[string]int{}}
	addr := startLeader(t, e, true)
	f := NewForwarder(64<<10, net.Dialer{}, nil)
	defer f.Close()
	nl := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: addr}
	ctx := asClient(context.Background(), fwdAliceToken, "")
	big := &pb.AppendRequest{SessionId: "alice/big", Events: []string{strings.Repeat("x", 64<<10)}}
	if err := f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName, big, new(pb.AppendResponse), true); status.Code(err) != codes.ResourceExhausted {
		t.Fatalf("oversized: got %v, want ResourceExhausted", err)
	}
	if err := f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName, &pb.AppendRequest{SessionId: "alice/small"}, new(pb.AppendResponse), true); err != nil {
		t.Fatal(err)
	}
	if e.seen["alice/big"] != 0 {
		t.Fatal("the oversized call reached the leader")
	}
}

// A stopping leader drains its forwarding streams: the call it is running is
// answered (not cut off as OUTCOME_UNKNOWN), the follower half-closes, and
// the server's graceful stop, which waits for every stream, completes.
// Calls sent meanwhile start a new stream and are still served.
func TestForwardDrainAnswersEveryCall(t *testing.T) {
	e := &echoLeader{seen: map[string]int{}, block: make(chan struct{}), canceled: make(chan struct{}, 1)}
	addr, fs, srv := startLeaderServer(t, e, true)
	f := NewForwarder(1<<20, net.Dialer{}, nil)
	defer f.Close()
	nl := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: addr}
	ctx := asClient(context.Background(), fwdAliceToken, "")
	call := func(id string) <-chan error {
		errc := make(chan error, 1)
		go func() {
			out := new(pb.AppendResponse)
			err := f.unary(ctx, nl, pb.SessionPersistence_Append_FullMethodName, &pb.AppendRequest{SessionId: id}, out, true)
			if err == nil && !strings.HasSuffix(out.Revision, "|"+id) {
				err = fmt.Errorf("answer %q is not %s's", out.Revision, id)
			}
			errc <- err
		}()
		return errc
	}
	seen := func(id string) bool {
		e.mu.Lock()
		defer e.mu.Unlock()
		return e.seen[id] > 0
	}
	running := call("alice/running")
	for !seen("alice/running") {
		time.Sleep(time.Millisecond)
	}
	fs.Drain()
	stopped := make(chan struct{})
	go func() { srv.GracefulStop(); close(stopped) }()
	later := call("alice/later") // on a new stream, or refused by the stopping server
	close(e.block)
	if err := <-running; err != nil {
		t.Fatalf("the running call: %v, want its answer", err)
	}
	if err := <-later; err != nil && reasonOf(err) != string(sessionstore.ReasonNoLeader) {
		t.Fatalf("a call during the stop: %v, want its answer or NO_LEADER", err)
	}
	select {
	case <-stopped:
	case <-time.After(30 * time.Second):
		t.Fatal("graceful stop still waits for a forwarding stream")
	}
}
