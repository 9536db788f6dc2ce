package rpc

import (
	"context"
	"io"
	"log/slog"
	"net"
	"reflect"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"

	"github.com/sessionstore/sessionstore"
)

// hintSource hands out the hints it holds (a new pointer on every change,
// as cluster.Node does).
type hintSource struct {
	mu sync.Mutex
	h  *sessionstore.ClientHints
}

func (s *hintSource) ClientHints() *sessionstore.ClientHints {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.h
}

func (s *hintSource) set(h sessionstore.ClientHints) {
	s.mu.Lock()
	s.h = &h
	s.mu.Unlock()
}

// Every answer, a refusal included, carries the current hints; unchanged
// hints reuse one metadata map.
func TestInterceptorsSetHints(t *testing.T) {
	src := &hintSource{}
	src.set(sessionstore.ClientHints{NodeID: "n2", Leader: "n1=a:1", Endpoints: "n1=a:1,n2=b:2"})
	ic := NewInterceptors(slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(nil), nil, nil)
	ic.SetHints(src)
	lis := bufconn.Listen(1 << 20)
	srv := grpc.NewServer(ic.ServerOptions()...)
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(lis) }()
	defer srv.Stop()
	conn, err := grpc.NewClient("passthrough:///bufnet", grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	hc := healthpb.NewHealthClient(conn)

	check := func(service string, wantNode, wantLeader, wantEps string) {
		t.Helper()
		var md metadata.MD
		_, err := hc.Check(context.Background(), &healthpb.HealthCheckRequest{Service: service}, grpc.Header(&md))
		if service != "" && status.Code(err) != codes.NotFound {
			t.Fatalf("Check(%q) = %v, want NOT_FOUND", service, err)
		}
		for key, want := range map[string]string{sessionstore.HintNodeKey: wantNode, sessionstore.HintLeaderKey: wantLeader, sessionstore.HintEndpointsKey: wantEps} {
			got := md.Get(key)
			if (want == "" && len(got) != 0) || (want != "" && (len(got) != 1 || got[0] != want)) {
				t.Fatalf("%s = %q, want %q (all: %v)", key, got, want, md)
			}
		}
		if len(md.Get(RequestIDKey)) != 1 {
			t.Fatalf("no request id in %v", md)
		}
	}
	check("", "n2", "n1=a:1", "n1=a:1,n2=b:2")
	check("unknown-service", "n2", "n1=a:1", "n1=a:1,n2=b:2") // an error answer
	first := reflect.ValueOf(ic.hintHeader()).Pointer()
	if again := reflect.ValueOf(ic.hintHeader()).Pointer(); again != first {
		t.Fatal("unchanged hints built a new metadata map")
	}
	src.set(sessionstore.ClientHints{NodeID: "n2", Endpoints: "n2=b:2"}) // no leader
	check("", "n2", "", "n2=b:2")
}
