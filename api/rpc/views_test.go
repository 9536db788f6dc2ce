package rpc_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/rpc"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// vwBackend records the limit each view call gets and refuses, as the
// cluster does, a view above it: its events take size bytes.
type vwBackend struct {
	rpc.Backend
	size   int64
	limits map[string]sessionstore.ViewLimit
}

func (b *vwBackend) view(call string, id string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	b.limits[call] = limit
	if err := limit.Check(id, 1, b.size); err != nil {
		return err
	}
	return send(sessionstore.View{Header: sessionstore.Header{ID: id, CreatedAt: 1}, Events: [][]byte{[]byte(`{}`)}, Revision: "r1", NextSeq: 1})
}

func (b *vwBackend) LoadStream(_ context.Context, id, _ string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	return b.view("Load", id, limit, send)
}

func (b *vwBackend) InspectStream(_ context.Context, id string, _ sessionstore.Consistency, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	return b.view("Inspect", id, limit, send)
}

func (b *vwBackend) PrepareStream(_ context.Context, id, _ string, _ time.Duration, _ string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	return b.view("Prepare", id, limit, send)
}

// TestUnaryViewsPassTheirLimit: each unary view hands the backend the node's
// message limit and the name of its stream form, so the backend refuses a
// view too large for one message before committing anything (a Load's
// repair, a Prepare's lease), and the refusal reaches the client as
// RESOURCE_EXHAUSTED / TOO_LARGE naming that stream form; the stream forms
// are not bounded.
func TestUnaryViewsPassTheirLimit(t *testing.T) {
	const limit = 1 << 20
	type call struct {
		name, stream string
		unary        func(*rpc.Persistence) error
		streamed     func(*rpc.Persistence, grpc.ServerStream) error
	}
	calls := []call{
		{"Load", "LoadStream",
			func(p *rpc.Persistence) error {
				_, err := p.Load(context.Background(), &pb.LoadRequest{SessionId: "v"})
				return err
			},
			func(p *rpc.Persistence, s grpc.ServerStream) error {
				return p.LoadStream(&pb.LoadRequest{SessionId: "v"}, &grpc.GenericServerStream[pb.LoadRequest, pb.SessionViewPart]{ServerStream: s})
			}},
		{"Inspect", "InspectStream",
			func(p *rpc.Persistence) error {
				_, err := p.Inspect(context.Background(), &pb.InspectRequest{SessionId: "v"})
				return err
			},
			func(p *rpc.Persistence, s grpc.ServerStream) error {
				return p.InspectStream(&pb.InspectRequest{SessionId: "v"}, &grpc.GenericServerStream[pb.InspectRequest, pb.SessionViewPart]{ServerStream: s})
			}},
		{"Prepare", "PrepareStream",
			func(p *rpc.Persistence) error {
				_, err := p.Prepare(context.Background(), &pb.PrepareRequest{SessionId: "v", Owner: "o", TtlMs: 1000})
				return err
			},
			func(p *rpc.Persistence, s grpc.ServerStream) error {
				return p.PrepareStream(&pb.PrepareRequest{SessionId: "v", Owner: "o", TtlMs: 1000}, &grpc.GenericServerStream[pb.PrepareRequest, pb.SessionViewPart]{ServerStream: s})
			}},
	}
	for _, c := range calls {
		for _, size := range []struct {
			name  string
			bytes int64
			fits  bool
		}{{"small", 100, true}, {"above the limit", 2 * limit, false}} {
			t.Run(c.name+"/"+size.name, func(t *testing.T) {
				b := &vwBackend{size: size.bytes, limits: map[string]sessionstore.ViewLimit{}}
				p := rpc.NewPersistence(b, limit)
				err := c.unary(p)
				if want := (sessionstore.ViewLimit{MessageBytes: limit, Stream: c.stream}); b.limits[c.name] != want {
					t.Fatalf("unary %s gave the backend %+v, want %+v", c.name, b.limits[c.name], want)
				}
				if size.fits {
					if err != nil {
						t.Fatalf("unary %s: %v", c.name, err)
					}
				} else {
					st, _ := status.FromError(err)
					if st.Code() != codes.ResourceExhausted || fzCheckErr(err) != nil ||
						!strings.Contains(st.Message(), "above the 1048576-byte message limit; use the stream form "+c.stream+",") {
						t.Fatalf("unary %s of a view above the limit: %v, want RESOURCE_EXHAUSTED / TOO_LARGE naming %s", c.name, err, c.stream)
					}
				}

				// The stream form serves any size: no limit.
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				if err := c.streamed(p, &fzStream{ctx: ctx, cancel: cancel, limit: 4 * limit}); err != nil {
					t.Fatalf("%s: %v", c.stream, err)
				}
				if got := b.limits[c.name]; got.Bounded() {
					t.Fatalf("%s gave the backend %+v, want no limit", c.stream, got)
				}
			})
		}
	}
}
