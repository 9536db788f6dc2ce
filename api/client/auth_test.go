package client

import (
	"context"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/test/bufconn"
)

// BearerToken sends "authorization: Bearer <token>" with every call, also
// over a plaintext connection.
func TestBearerToken(t *testing.T) {
	tests := []struct {
		name  string
		opts  []grpc.DialOption
		token string
		want  []string
	}{
		{"token", []grpc.DialOption{grpc.WithPerRPCCredentials(BearerToken("s3cret"))}, "s3cret", []string{"Bearer s3cret"}},
		{"no token", nil, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lis := bufconn.Listen(1 << 20)
			got := make(chan []string, 1)
			srv := grpc.NewServer(grpc.UnaryInterceptor(func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
				md, _ := metadata.FromIncomingContext(ctx)
				got <- md.Get("authorization")
				return h(ctx, req)
			}))
			healthpb.RegisterHealthServer(srv, health.NewServer())
			go func() { _ = srv.Serve(lis) }()
			defer srv.Stop()

			opts := append([]grpc.DialOption{grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) })}, tt.opts...)
			c, err := Dial(context.Background(), "passthrough:///bufnet", opts...)
			if err != nil {
				t.Fatal(err)
			}
			defer c.Close()
			if _, err := healthpb.NewHealthClient(c.Conn()).Check(context.Background(), &healthpb.HealthCheckRequest{}); err != nil {
				t.Fatalf("call over plaintext: %v", err)
			}
			md := <-got
			if len(md) != len(tt.want) || (len(md) > 0 && md[0] != tt.want[0]) {
				t.Fatalf("authorization metadata %q, want %q", md, tt.want)
			}
		})
	}
	if BearerToken("x").RequireTransportSecurity() {
		t.Error("RequireTransportSecurity: a loopback node may be plaintext")
	}
}
