package rpc

import (
	"testing"
	"time"

	"google.golang.org/grpc"

	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// Every rpc of the three services has a permission: a new rpc without one
// would be refused to everybody, so the table must grow with the services.
func TestEveryMethodHasAPermission(t *testing.T) {
	n := 0
	for _, sd := range []grpc.ServiceDesc{pb.SessionPersistence_ServiceDesc, pb.PlanMode_ServiceDesc, pb.Cluster_ServiceDesc} {
		for _, m := range sd.Methods {
			n++
			if _, ok := methods["/"+sd.ServiceName+"/"+m.MethodName]; !ok {
				t.Errorf("%s/%s has no permission", sd.ServiceName, m.MethodName)
			}
		}
		for _, m := range sd.Streams {
			n++
			if _, ok := methods["/"+sd.ServiceName+"/"+m.StreamName]; !ok {
				t.Errorf("%s/%s has no permission", sd.ServiceName, m.StreamName)
			}
		}
	}
	if n != len(methods) {
		t.Errorf("%d methods, %d rules: the table names a method that does not exist", n, len(methods))
	}
	for m, r := range methods {
		if p := r.perm; p == 0 || p&(p-1) != 0 {
			t.Errorf("%s: want exactly one permission, got %s", m, p)
		}
		if r.mutating == nil {
			t.Errorf("%s: no mutating rule", m)
		}
	}
}

func TestSessionOf(t *testing.T) {
	cases := []struct {
		req  any
		id   string
		some bool
	}{
		{&pb.AppendRequest{SessionId: "a"}, "a", true},
		{&pb.CreateRequest{Header: &pb.SessionHeader{Id: "b"}}, "b", true},
		{&pb.CreateRequest{}, "", true},
		{&pb.LocateRequest{Header: &pb.SessionHeader{Id: "c"}}, "c", true},
		{&pb.KeepAliveRequest{Lease: &pb.Lease{SessionId: "d"}}, "d", true},
		{&pb.PlanSetRequest{SessionId: "e"}, "e", true},
		{&pb.ListRequest{}, "", false},
		{&pb.StatusRequest{}, "", false},
	}
	for _, c := range cases {
		id, ok := sessionOf(c.req)
		if id != c.id || ok != c.some {
			t.Errorf("%T: got %q %v, want %q %v", c.req, id, ok, c.id, c.some)
		}
	}
}

func TestTokenBucket(t *testing.T) {
	t0 := time.Unix(0, 0)
	b := &bucket{rate: 2, burst: 3, tokens: 3, last: t0}
	got := 0
	for range 10 {
		if b.take(t0) {
			got++
		}
	}
	if got != 3 {
		t.Fatalf("burst: %d taken, want 3", got)
	}
	if b.take(t0.Add(400*time.Millisecond)) || !b.take(t0.Add(500*time.Millisecond)) {
		t.Fatal("refill at 2/s: one token after 500 ms, not before")
	}
	if !b.take(t0.Add(time.Hour)) || b.tokens > 2 {
		t.Fatalf("refill is capped at the burst: %v", b.tokens)
	}
}
