package client

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// fakeCluster is a set of fake nodes on loopback TCP whose every answer
// carries the hints a real node sends: its id, the leader and the voters,
// each at the address the node advertises.
type fakeCluster struct {
	mu        sync.Mutex
	leader    string            // node id ("": none)
	advertise map[string]string // node id → advertised client address
	nodes     map[string]*fakeNode
	log       []string // the session's events, for Watch
}

type fakeNode struct {
	id   string
	addr string // the listener's address
	fake *fake
	srv  *grpc.Server
	fc   *fakeCluster
	// watchFail ends this node's Watch streams after sending this many
	// event messages (0: never).
	watchFail int
	// watchSilent: this node's Watch sends nothing and holds the stream
	// open, as a paused node whose connection stays up does.
	watchSilent bool
}

// startCluster starts nodes n1..nN; each advertises its listener's address
// unless advertise maps its id to another.
func startCluster(t *testing.T, n int, advertise func(id, addr string) string) *fakeCluster {
	t.Helper()
	fc := &fakeCluster{advertise: map[string]string{}, nodes: map[string]*fakeNode{}}
	for i := 1; i <= n; i++ {
		id := fmt.Sprintf("n%d", i)
		lis, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		nd := &fakeNode{id: id, addr: lis.Addr().String(), fake: newFake(), fc: fc}
		nd.srv = grpc.NewServer(grpc.UnaryInterceptor(nd.unaryHints), grpc.StreamInterceptor(nd.streamHints))
		sessionpb.RegisterSessionPersistenceServer(nd.srv, watchNode{nd.fake, nd})
		healthpb.RegisterHealthServer(nd.srv, health.NewServer())
		go func() { _ = nd.srv.Serve(lis) }()
		t.Cleanup(nd.srv.Stop)
		fc.nodes[id] = nd
		fc.advertise[id] = nd.addr
		if advertise != nil {
			fc.advertise[id] = advertise(id, nd.addr)
		}
	}
	fc.leader = "n1"
	return fc
}

func (fc *fakeCluster) setLeader(id string) {
	fc.mu.Lock()
	fc.leader = id
	fc.mu.Unlock()
}

func (nd *fakeNode) hints() metadata.MD {
	fc := nd.fc
	fc.mu.Lock()
	defer fc.mu.Unlock()
	md := metadata.Pairs(sessionstore.HintNodeKey, nd.id)
	if fc.leader != "" {
		md.Set(sessionstore.HintLeaderKey, fc.leader+"="+fc.advertise[fc.leader])
	}
	var eps []string
	for id := range fc.nodes {
		eps = append(eps, id+"="+fc.advertise[id])
	}
	md.Set(sessionstore.HintEndpointsKey, strings.Join(eps, ","))
	return md
}

func (nd *fakeNode) unaryHints(ctx context.Context, req any, _ *grpc.UnaryServerInfo, h grpc.UnaryHandler) (any, error) {
	_ = grpc.SetHeader(ctx, nd.hints())
	return h(ctx, req)
}

func (nd *fakeNode) streamHints(srv any, ss grpc.ServerStream, _ *grpc.StreamServerInfo, h grpc.StreamHandler) error {
	_ = ss.SetHeader(nd.hints())
	return h(srv, ss)
}

// watchNode serves Watch from the cluster's log: a progress message first,
// then the events from from_seq on, two per message, then (watchFail) an
// UNAVAILABLE end, or it waits for the client.
type watchNode struct {
	*fake
	nd *fakeNode
}

func (w watchNode) Watch(req *sessionpb.WatchRequest, s grpc.ServerStreamingServer[sessionpb.WatchResponse]) error {
	if err := w.enter("Watch", req); err != nil {
		return err
	}
	if w.nd.watchSilent {
		<-s.Context().Done()
		return s.Context().Err()
	}
	if err := s.Send(&sessionpb.WatchResponse{Revision: "progress"}); err != nil {
		return err
	}
	w.nd.fc.mu.Lock()
	log := append([]string(nil), w.nd.fc.log...)
	w.nd.fc.mu.Unlock()
	sent := 0
	for i := int(req.GetFromSeq()); i < len(log); i += 2 {
		if w.nd.watchFail > 0 && sent == w.nd.watchFail {
			return status.Error(codes.Unavailable, "connection reset")
		}
		if err := s.Send(&sessionpb.WatchResponse{Events: log[i:min(i+2, len(log))]}); err != nil {
			return err
		}
		if err := s.Send(&sessionpb.WatchResponse{Revision: "heartbeat"}); err != nil {
			return err
		}
		sent++
	}
	<-s.Context().Done()
	return s.Context().Err()
}

func (fc *fakeCluster) addrs(ids ...string) []string {
	var out []string
	for _, id := range ids {
		out = append(out, fc.nodes[id].addr)
	}
	return out
}

func openT(t *testing.T, endpoints []string) *Client {
	t.Helper()
	c, err := Open(context.Background(), Config{Endpoints: endpoints,
		Options: Options{MaxAttempts: 20, InitialBackoff: time.Millisecond, MaxBackoff: 5 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// waitKnown waits until the client knows the node of every configured
// endpoint (the health checks Open sends).
func waitKnown(t *testing.T, c *Client) {
	t.Helper()
	clustertest.Eventually(t, 10*time.Second, func() error {
		eps, _ := c.Endpoints()
		for _, e := range eps {
			if e.Configured && e.NodeID == "" {
				return fmt.Errorf("endpoints never all known: %+v", eps)
			}
		}
		return nil
	})
}

func appendReq(seq int) *sessionpb.AppendRequest {
	return &sessionpb.AppendRequest{SessionId: "s", Events: []string{fmt.Sprintf(`{"type":"x","seq":%d,"time":1,"data":{}}`, seq)}}
}

func calls(fc *fakeCluster, method string) map[string]int {
	out := map[string]int{}
	for id, nd := range fc.nodes {
		if n := nd.fake.callCount(method); n > 0 {
			out[id] = n
		}
	}
	return out
}

// Writes go to the leader's configured endpoint once the client knows it;
// reads stay on the current node.
func TestOpenSendsWritesToTheLeader(t *testing.T) {
	fc := startCluster(t, 3, nil)
	fc.setLeader("n2")
	c := openT(t, fc.addrs("n1", "n2", "n3"))
	waitKnown(t, c)
	if _, err := c.List(ctxT(t), &sessionpb.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		if _, err := c.Append(ctxT(t), appendReq(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(fc, "Append"); len(got) != 1 || got["n2"] != 3 {
		t.Fatalf("Append calls by node = %v, want all 3 on the leader n2", got)
	}
	if got := calls(fc, "List"); got["n1"] != 1 {
		t.Fatalf("List calls by node = %v, want the read on n1 (the first endpoint)", got)
	}
	if _, leader := c.Endpoints(); leader != "n2" {
		t.Fatalf("client's leader = %q", leader)
	}
}

// The leader dies: the write in flight moves to a survivor with the same
// bytes, and once the survivors name a new leader the writes go there.
func TestOpenFailsOverWhenTheLeaderDies(t *testing.T) {
	fc := startCluster(t, 3, nil)
	fc.setLeader("n2")
	c := openT(t, fc.addrs("n1", "n2", "n3"))
	waitKnown(t, c)
	req := appendReq(0)
	if _, err := c.Append(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	fc.nodes["n2"].srv.Stop()
	fc.setLeader("n3")
	fc.nodes["n1"].fake.fail("Append", infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "forwarded call got no answer"))
	req = appendReq(1)
	if _, err := c.Append(ctxT(t), req); err != nil {
		t.Fatalf("Append after the leader died: %v", err)
	}
	if _, err := c.Append(ctxT(t), appendReq(2)); err != nil {
		t.Fatal(err)
	}
	got := calls(fc, "Append")
	if got["n2"] != 1 || got["n3"] < 1 {
		t.Fatalf("Append calls by node = %v: want 1 on n2 before it died, then the new leader n3", got)
	}
	var sent []proto.Message
	for _, id := range []string{"n1", "n3"} {
		for _, r := range fc.nodes[id].fake.requests("Append") {
			if r.(*sessionpb.AppendRequest).GetEvents()[0] == req.Events[0] {
				sent = append(sent, r)
			}
		}
	}
	for _, r := range sent {
		if !proto.Equal(r, req) {
			t.Fatalf("a retry of the batch differs: %v, want %v", r, req)
		}
	}
	if last := fc.nodes["n3"].fake.requests("Append"); !proto.Equal(last[len(last)-1], appendReq(2)) {
		t.Fatalf("the write after the failover did not go to the new leader n3: %v", got)
	}
}

// NO_LEADER and SHUTTING_DOWN move a read to another node; a definite error
// does not.
func TestOpenMovesOnNoLeader(t *testing.T) {
	fc := startCluster(t, 2, nil)
	fc.setLeader("")
	c := openT(t, fc.addrs("n1", "n2"))
	fc.nodes["n1"].fake.fail("Inspect",
		infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"),
		infoErr(t, codes.NotFound, sessionstore.ReasonNotFound, "not found"))
	if _, err := c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"}); err != nil {
		t.Fatal(err)
	}
	if got := calls(fc, "Inspect"); got["n1"] != 1 || got["n2"] != 1 {
		t.Fatalf("Inspect calls by node = %v, want n1 then n2", got)
	}
	fc.nodes["n2"].fake.fail("Inspect", infoErr(t, codes.NotFound, sessionstore.ReasonNotFound, "not found"))
	if _, err := c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"}); !errors.Is(err, sessionstore.ErrNotFound) {
		t.Fatalf("err = %v", err)
	}
	if got := calls(fc, "Inspect"); got["n2"] != 2 || got["n1"] != 1 {
		t.Fatalf("Inspect calls by node = %v: a definite error moved the client", got)
	}
}

// A configured endpoint that never answers (its machine stopped: the
// connection is accepted, or its packets dropped, and nothing comes back)
// fails the attempt once connecting gives up, well before the call's
// deadline (10 s, below gRPC's own 20 s bound), and the call moves on.
func TestOpenLeavesASilentEndpoint(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0") // never accepts: silent
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	fc := startCluster(t, 1, nil)
	fc.setLeader("n1")
	c := openT(t, append([]string{ln.Addr().String()}, fc.addrs("n1")...))
	if _, err := c.List(ctxT(t), &sessionpb.ListRequest{}); err != nil {
		t.Fatalf("List with the first endpoint silent: %v", err)
	}
	if got := calls(fc, "List"); got["n1"] != 1 {
		t.Fatalf("List calls by node = %v, want one on n1", got)
	}
}

// Nodes that advertise addresses the client cannot reach (containers'
// names): the configured endpoints win, found by node id.
func TestOpenConfiguredEndpointsWin(t *testing.T) {
	fc := startCluster(t, 3, func(id, _ string) string { return id + ".invalid:7400" })
	fc.setLeader("n3")
	c := openT(t, fc.addrs("n1", "n2", "n3"))
	waitKnown(t, c)
	for i := range 2 {
		if _, err := c.Append(ctxT(t), appendReq(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(fc, "Append"); got["n3"] != 2 {
		t.Fatalf("Append calls by node = %v, want both on n3 through its configured endpoint", got)
	}
	eps, _ := c.Endpoints()
	for _, e := range eps {
		if !e.Configured || strings.Contains(e.Addr, ".invalid") {
			t.Fatalf("the client dialled a hinted address: %+v", eps)
		}
	}
}

// Given one node, the client finds the leader at its hinted address.
func TestOpenDiscoversTheLeader(t *testing.T) {
	fc := startCluster(t, 3, nil)
	fc.setLeader("n3")
	c := openT(t, fc.addrs("n1"))
	if _, err := c.List(ctxT(t), &sessionpb.ListRequest{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctxT(t), appendReq(0)); err != nil {
		t.Fatal(err)
	}
	if got := calls(fc, "Append"); got["n3"] != 1 {
		t.Fatalf("Append calls by node = %v, want the write on the leader n3", got)
	}
	// The configured node dies: reads go on through the discovered one.
	fc.nodes["n1"].srv.Stop()
	if _, err := c.List(ctxT(t), &sessionpb.ListRequest{}); err != nil {
		t.Fatalf("List after the configured node died: %v", err)
	}
}

// A client of one connection (Dial) stays on its node whatever it is told.
func TestDialIgnoresHints(t *testing.T) {
	fc := startCluster(t, 2, nil)
	fc.setLeader("n2")
	c, err := Dial(context.Background(), fc.nodes["n1"].addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for i := range 2 {
		if _, err := c.Append(ctxT(t), appendReq(i)); err != nil {
			t.Fatal(err)
		}
	}
	if got := calls(fc, "Append"); got["n1"] != 2 {
		t.Fatalf("Append calls by node = %v, want both on n1", got)
	}
}

// Follow delivers every event once, in order, across broken streams and
// nodes, and skips messages without events.
func TestFollowResumesOnAnotherNode(t *testing.T) {
	fc := startCluster(t, 3, nil)
	for i := range 11 {
		fc.log = append(fc.log, fmt.Sprintf("e%d", i))
	}
	fc.nodes["n1"].watchFail = 2 // two messages (4 events), then the stream breaks
	fc.nodes["n2"].watchFail = 1
	c := openT(t, fc.addrs("n1", "n2", "n3"))
	f := c.Follow(ctxT(t), &sessionpb.WatchRequest{SessionId: "s", FromSeq: 1})
	defer f.Close()
	var got []string
	for len(got) < 10 {
		m, err := f.Next()
		if err != nil {
			t.Fatalf("Next after %v: %v", got, err)
		}
		if len(m.GetEvents()) == 0 {
			t.Fatal("a message without events was delivered")
		}
		got = append(got, m.GetEvents()...)
	}
	if want := fc.log[1:]; strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("events = %v, want %v", got, want)
	}
	if f.NextSeq() != 11 {
		t.Fatalf("NextSeq = %d", f.NextSeq())
	}
	var froms []int64
	for _, id := range []string{"n1", "n2", "n3"} {
		for _, r := range fc.nodes[id].fake.requests("Watch") {
			froms = append(froms, r.(*sessionpb.WatchRequest).GetFromSeq())
		}
	}
	if fmt.Sprint(froms) != "[1 5 7]" {
		t.Fatalf("watches opened from %v, want [1 5 7] (n1, then n2, then n3)", froms)
	}

	// A definite error ends it.
	fc.nodes["n3"].fake.fail("Watch", infoErr(t, codes.NotFound, sessionstore.ReasonNotFound, "deleted"))
	f2 := c.Follow(ctxT(t), &sessionpb.WatchRequest{SessionId: "s"})
	for {
		_, err := f2.Next()
		if err != nil {
			if !errors.Is(err, sessionstore.ErrNotFound) {
				t.Fatalf("err = %v", err)
			}
			break
		}
	}
}

// A stream that brings nothing, not even the progress messages a node sends
// at least every 30 s, is given up after Idle and opened on another node.
func TestFollowLeavesASilentNode(t *testing.T) {
	fc := startCluster(t, 2, nil)
	for i := range 5 {
		fc.log = append(fc.log, fmt.Sprintf("e%d", i))
	}
	fc.nodes["n1"].watchSilent = true
	c := openT(t, fc.addrs("n1", "n2"))
	f := c.Follow(ctxT(t), &sessionpb.WatchRequest{SessionId: "s"})
	f.Idle = 50 * time.Millisecond
	defer f.Close()
	var got []string
	for len(got) < 5 {
		m, err := f.Next()
		if err != nil {
			t.Fatalf("Next after %v: %v", got, err)
		}
		got = append(got, m.GetEvents()...)
	}
	if strings.Join(got, ",") != strings.Join(fc.log, ",") {
		t.Fatalf("events = %v, want %v", got, fc.log)
	}
	if n := len(fc.nodes["n1"].fake.requests("Watch")); n != 1 {
		t.Fatalf("watches opened on the silent node = %d, want 1", n)
	}
}

// The keeper renews the lease, appends under its epoch, and on LEASE_FENCED
// closes Lost and refuses appends without sending them.
func TestLeaseKeeper(t *testing.T) {
	fc := startCluster(t, 1, nil)
	f := fc.nodes["n1"].fake
	c := openT(t, fc.addrs("n1"))
	k, _, err := c.KeepLease(ctxT(t), &sessionpb.PrepareRequest{SessionId: "s", Owner: "o", TtlMs: 300})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	if k.Lease().GetEpoch() != 1 {
		t.Fatalf("lease = %v", k.Lease())
	}
	waitCalls(t, f, "KeepAlive", 2)
	if _, err := k.Append(ctxT(t), appendReq(0)); err != nil {
		t.Fatal(err)
	}
	if r := f.requests("Append")[0].(*sessionpb.AppendRequest); r.GetLeaseEpoch() != 1 {
		t.Fatalf("Append sent epoch %d, want the lease's 1", r.GetLeaseEpoch())
	}
	if err := k.Err(); err != nil {
		t.Fatalf("Err while held: %v", err)
	}

	f.fail("KeepAlive", infoErr(t, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, "fenced"))
	select {
	case <-k.Lost():
	case <-ctxT(t).Done():
		t.Fatal("Lost never closed after LEASE_FENCED")
	}
	if !errors.Is(k.Err(), sessionstore.ErrLeaseFenced) {
		t.Fatalf("Err = %v", k.Err())
	}
	if _, err := k.Append(ctxT(t), appendReq(1)); !errors.Is(err, sessionstore.ErrLeaseFenced) {
		t.Fatalf("Append after the loss: %v", err)
	}
	if n := f.callCount("Append"); n != 1 {
		t.Fatalf("an Append was sent after the loss (%d calls)", n)
	}
}

// Renewals that keep failing without an answer lose the lease once it has
// run out by the client's clock.
func TestLeaseKeeperLosesAnExpiredLease(t *testing.T) {
	fc := startCluster(t, 1, nil)
	f := fc.nodes["n1"].fake
	for range 1000 {
		f.fail("KeepAlive", status.Error(codes.Unavailable, "connection refused"))
	}
	c := openT(t, fc.addrs("n1"))
	k, _, err := c.KeepLease(ctxT(t), &sessionpb.PrepareRequest{SessionId: "s", Owner: "o", TtlMs: 200})
	if err != nil {
		t.Fatal(err)
	}
	defer k.Stop()
	select {
	case <-k.Lost():
	case <-ctxT(t).Done():
		t.Fatal("Lost never closed")
	}
	if !errors.Is(k.Err(), sessionstore.ErrLeaseFenced) || !strings.Contains(k.Err().Error(), "ran out") {
		t.Fatalf("Err = %v", k.Err())
	}
	// Release after a loss sends nothing.
	if err := k.Release(ctxT(t)); err != nil || f.callCount("Release") != 0 {
		t.Fatalf("Release = %v, %d calls", err, f.callCount("Release"))
	}
}

func waitCalls(t *testing.T, f *fake, method string, n int) {
	t.Helper()
	clustertest.Eventually(t, 10*time.Second, func() error {
		if got := f.callCount(method); got < n {
			return fmt.Errorf("%s called %d times, want %d", method, got, n)
		}
		return nil
	})
}
