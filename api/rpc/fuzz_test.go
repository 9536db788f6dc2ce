package rpc_test

// Fuzzing of every request the three services decode (issue 7: "no panic
// reaches a client"). FuzzRequests feeds arbitrary bytes, as the request
// message of an arbitrary method, to the service handler itself — not
// through the panic-recovering interceptor, so a panic fails the fuzz run —
// against one real single-node cluster per process (Raft, bbolt, artifacts).
// Every answer must be a response or a gRPC status error whose code is not
// UNKNOWN or INTERNAL and that carries the ErrorInfo of the table of docs/api.md.
// FuzzValidators fuzzes the standalone request validators the handlers use.
// Every name starts with "fz".

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/rpc"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/planmode"
	"github.com/sessionstore/sessionstore/sessionlog"
)

const (
	// fzCallTimeout bounds one handler call.
	fzCallTimeout = 2 * time.Second
	// fzMaxMessage is the node's gRPC message limit (above one streamed
	// chunk of rpc.ChunkBytes plus its metadata).
	fzMaxMessage = 2 << 20
	// fzDirPrefix names the fuzz node's data directories in os.TempDir().
	fzDirPrefix = "sessionstore-fuzzrpc-"
	fzNodeID    = "fuzz-node"
	fzTime0     = int64(1755600000000)
)

// fzReasonCode is the error table of docs/api.md: the gRPC code of every reason.
var fzReasonCode = map[string]codes.Code{
	"NOT_FOUND": codes.NotFound, "ALREADY_EXISTS": codes.AlreadyExists,
	"SEQ_MISMATCH": codes.FailedPrecondition, "REVISION_MISMATCH": codes.FailedPrecondition,
	"LIVE_TURN_OPEN": codes.FailedPrecondition, "SESSION_LIVE": codes.FailedPrecondition,
	"LEASE_FENCED": codes.FailedPrecondition, "FORMAT_UNSUPPORTED": codes.FailedPrecondition,
	"INVALID_STORED_EVENT": codes.FailedPrecondition,
	"NOT_JSON":             codes.InvalidArgument, "INVALID_EVENT": codes.InvalidArgument,
	"INVALID_HEADER": codes.InvalidArgument, "INVALID_SESSION_ID": codes.InvalidArgument,
	"INVALID_ARGUMENT": codes.InvalidArgument,
	"CORRUPTION":       codes.DataLoss,
	"TOO_LARGE":        codes.ResourceExhausted, "QUOTA_EXCEEDED": codes.ResourceExhausted,
	"PERMISSION_DENIED": codes.PermissionDenied, "UNAUTHENTICATED": codes.Unauthenticated,
	"NO_LEADER": codes.Unavailable, "SHUTTING_DOWN": codes.Unavailable, "OUTCOME_UNKNOWN": codes.Unavailable,
}

// fzServices are the services whose every method is fuzzed, in the order
// of the method index (a new method joins the table by itself).
var fzServices = []*grpc.ServiceDesc{&pb.SessionPersistence_ServiceDesc, &pb.PlanMode_ServiceDesc, &pb.Cluster_ServiceDesc}

// fzMethod is one method of fzServices.
type fzMethod struct {
	name   string // full method name, /sessionstore.v1.Service/Method
	svc    int    // index into fzServices
	unary  *grpc.MethodDesc
	stream *grpc.StreamDesc
}

func fzMethods() []fzMethod {
	var out []fzMethod
	for i, sd := range fzServices {
		for j := range sd.Methods {
			out = append(out, fzMethod{name: "/" + sd.ServiceName + "/" + sd.Methods[j].MethodName, svc: i, unary: &sd.Methods[j]})
		}
		for j := range sd.Streams {
			if sd.Streams[j].ClientStreams {
				continue // none in docs/api.md; they would need another harness
			}
			out = append(out, fzMethod{name: "/" + sd.ServiceName + "/" + sd.Streams[j].StreamName, svc: i, stream: &sd.Streams[j]})
		}
	}
	return out
}

// fzEnv is the process's node and its services.
type fzEnv struct {
	dir     string
	node    *cluster.Node
	srv     []any // per fzServices entry
	methods []fzMethod
}

var fzState struct {
	once sync.Once
	env  *fzEnv
	err  error
}

// fzGet starts the process's node on first use (every fuzz worker process
// has its own, on its own data directory and ports).
func fzGet(t *testing.T) *fzEnv {
	t.Helper()
	fzState.once.Do(func() { fzState.env, fzState.err = fzStart() })
	if fzState.err != nil {
		t.Fatalf("fuzz node: %v", fzState.err)
	}
	return fzState.env
}

// fzStop closes the node, if one was started, and removes its directory.
func fzStop() {
	if e := fzState.env; e != nil {
		fzState.env, fzState.err = nil, errors.New("fuzz node already closed")
		e.close()
	}
}

// close removes the data directory first: the fuzz coordinator kills a
// worker that takes more than a second to exit, and node.Close can take
// longer (what it still writes fails harmlessly).
func (e *fzEnv) close() {
	_ = os.RemoveAll(e.dir)
	_ = e.node.Close()
	_ = os.RemoveAll(e.dir)
}

func fzStart() (*fzEnv, error) {
	// Directories of earlier runs whose worker was killed before cleaning up.
	if old, _ := filepath.Glob(filepath.Join(os.TempDir(), fzDirPrefix+"*")); len(old) > 0 {
		for _, d := range old {
			if st, err := os.Stat(d); err == nil && time.Since(st.ModTime()) > time.Hour {
				_ = os.RemoveAll(d)
			}
		}
	}
	dir, err := os.MkdirTemp("", fzDirPrefix+"*")
	if err != nil {
		return nil, err
	}
	var logOut io.Writer = io.Discard
	if os.Getenv("SESSIONSTORE_TEST_LOG") != "" {
		logOut = os.Stderr
	}
	logger := slog.New(slog.NewTextHandler(logOut, &slog.HandlerOptions{Level: slog.LevelInfo}))
	cfg := cluster.DefaultConfig()
	cfg.NodeID = fzNodeID
	cfg.DataDir = dir
	cfg.RaftAddr = "127.0.0.1:0"
	cfg.GossipAddr = "127.0.0.1:0"
	cfg.HTTPBase = "http://127.0.0.1:7480"
	cfg.RaftLogOutput = logOut
	// Small limits, so that short inputs reach the size refusals.
	cfg.MaxEventBytes, cfg.MaxBatchBytes, cfg.MaxBatchCount = 2048, 8192, 16
	node, err := cluster.Open(cfg, nil, logger, prometheus.NewRegistry())
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	e := &fzEnv{dir: dir, node: node, methods: fzMethods()}
	// No forwarder: the only node is the leader, nothing is forwarded.
	p := rpc.NewPersistence(node.Sessions(), fzMaxMessage)
	p.WatchProgress = 20 * time.Millisecond // a Watch of nothing new answers at once
	e.srv = []any{p, rpc.NewPlanMode(node.Sessions()), rpc.NewClusterService(node)}
	deadline := time.Now().Add(30 * time.Second)
	for node.Ready() != nil || !node.ReadyForReads() {
		if time.Now().After(deadline) {
			err := node.Ready()
			e.close()
			return nil, fmt.Errorf("not ready after 30 s: %v", err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := fzFixtures(e); err != nil {
		e.close()
		return nil, fmt.Errorf("fixtures: %w", err)
	}
	return e, nil
}

// fzEvent is an ignorable marker event (valid anywhere, never opens a turn).
func fzEvent(seq int64) string {
	return fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"n":%d,"s":"é\u2028<&>"},"ignorable":true}`, seq, fzTime0+seq, seq)
}

func fzEvents(from, n int64) []string {
	var out []string
	for s := from; s < from+n; s++ {
		out = append(out, fzEvent(s))
	}
	return out
}

// fzOpenTurn is a turn left open (Load and Prepare commit its repair).
var fzOpenTurn = []string{
	`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
	`{"type":"user/message","seq":1,"time":2,"data":{"id":"u1","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
	`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
}

func fzHeader(id string) *pb.SessionHeader {
	cwd := "/w/fuzz"
	return &pb.SessionHeader{Id: id, CreatedAt: fzTime0 - 1, Cwd: &cwd}
}

// The fixture sessions the seed corpus names.
const (
	fzLive  = "fz-live"  // markers 0..2
	fzTurn  = "fz-turn"  // an open turn
	fzPlan  = "fz-plan"  // markers 0..1, for plan mode
	fzLease = "fz-lease" // markers 0..1, leased to fzOwner (epoch 1)
	fzLazy  = "fz-lazy"  // created, never appended to
	fzOwner = "fz-owner"
)

// fzFixtures creates the fixture sessions through the services themselves.
func fzFixtures(e *fzEnv) error {
	p := e.srv[0].(*rpc.Persistence)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	for _, s := range []struct {
		id     string
		events []string
	}{{fzLive, fzEvents(0, 3)}, {fzTurn, fzOpenTurn}, {fzPlan, fzEvents(0, 2)}, {fzLease, fzEvents(0, 2)}, {fzLazy, nil}} {
		if _, err := p.Create(ctx, &pb.CreateRequest{Header: fzHeader(s.id), RequestId: "fixture-" + s.id}); err != nil {
			return fmt.Errorf("create %s: %w", s.id, err)
		}
		if len(s.events) > 0 {
			if _, err := p.Append(ctx, &pb.AppendRequest{SessionId: s.id, Events: s.events}); err != nil {
				return fmt.Errorf("append to %s: %w", s.id, err)
			}
		}
	}
	if _, err := p.Prepare(ctx, &pb.PrepareRequest{SessionId: fzLease, Owner: fzOwner, TtlMs: 3_600_000, RequestId: "fixture-lease"}); err != nil {
		return fmt.Errorf("prepare %s: %w", fzLease, err)
	}
	return nil
}

// fzStream is the server side of one server-streaming call: RecvMsg decodes
// the fuzz payload once, SendMsg checks and counts what the handler sends.
type fzStream struct {
	ctx       context.Context
	cancel    context.CancelFunc
	payload   []byte
	received  bool
	decodeErr error
	sent      int
	stopAfter int   // cancel the call after this many messages (0: never)
	limit     int   // the message limit (0: fzMaxMessage)
	sendErr   error // the first message the transport could not have sent
}

func (s *fzStream) SetHeader(metadata.MD) error  { return nil }
func (s *fzStream) SendHeader(metadata.MD) error { return nil }
func (s *fzStream) SetTrailer(metadata.MD)       {}
func (s *fzStream) Context() context.Context     { return s.ctx }

func (s *fzStream) RecvMsg(m any) error {
	if s.received {
		return io.EOF
	}
	s.received = true
	s.decodeErr = proto.Unmarshal(s.payload, m.(proto.Message))
	return s.decodeErr
}

func (s *fzStream) SendMsg(m any) error {
	if err := s.ctx.Err(); err != nil {
		return status.FromContextError(err).Err()
	}
	s.sent++
	if err := fzSendable(m, s.limit); err != nil && s.sendErr == nil {
		s.sendErr = fmt.Errorf("message %d: %w", s.sent, err)
	}
	if s.stopAfter > 0 && s.sent >= s.stopAfter {
		s.cancel()
	}
	return nil
}

// fzSendable reports why gRPC could not send m to a client (it would fail
// the call with INTERNAL or RESOURCE_EXHAUSTED after the handler returned).
func fzSendable(m any, limit int) error {
	if limit == 0 {
		limit = fzMaxMessage
	}
	pm, ok := m.(proto.Message)
	if !ok || pm == nil || !pm.ProtoReflect().IsValid() {
		return fmt.Errorf("response %T is nil", m)
	}
	b, err := proto.Marshal(pm)
	if err != nil {
		return fmt.Errorf("response %T does not marshal: %w", m, err)
	}
	if len(b) > limit {
		return fmt.Errorf("response %T is %d bytes, above the %d-byte message limit", m, len(b), limit)
	}
	return nil
}

// fzCall runs one method on payload. decoded is false when the payload is
// not a request message of the method (the handler did not run).
func fzCall(e *fzEnv, m fzMethod, payload []byte) (decoded bool, err error, bad error) {
	ctx, cancel := context.WithTimeout(context.Background(), fzCallTimeout)
	defer cancel()
	srv := e.srv[m.svc]
	if m.unary != nil {
		var decodeErr error
		dec := func(v any) error {
			decodeErr = proto.Unmarshal(payload, v.(proto.Message))
			return decodeErr
		}
		resp, err := m.unary.Handler(srv, ctx, dec, nil)
		if decodeErr != nil {
			return false, nil, nil
		}
		if err == nil {
			if e := fzSendable(resp, 0); e != nil {
				bad = e
			}
		}
		return true, err, bad
	}
	s := &fzStream{ctx: ctx, cancel: cancel, payload: payload}
	if strings.HasSuffix(m.name, "/Watch") {
		s.stopAfter = 1 // a Watch would otherwise run until its deadline
	}
	err = m.stream.Handler(srv, s)
	if !s.received || s.decodeErr != nil {
		return false, nil, nil
	}
	if err == nil && s.sent == 0 {
		return true, nil, errors.New("the stream ended without an error and without a message")
	}
	return true, err, s.sendErr
}

// fzCheckErr checks a handler's error against docs/api.md: a gRPC status, not
// UNKNOWN or INTERNAL (a bug), with the ErrorInfo of the error table except
// for the context's own CANCELLED and DEADLINE_EXCEEDED.
func fzCheckErr(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Errorf("error is not a gRPC status (%T): %v", err, err)
	}
	switch st.Code() {
	case codes.OK, codes.Unknown, codes.Internal:
		return fmt.Errorf("code %v: %q", st.Code(), st.Message())
	case codes.Canceled, codes.DeadlineExceeded:
		return nil
	}
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			want, known := fzReasonCode[ei.GetReason()]
			switch {
			case ei.GetDomain() != rpc.ErrorDomain:
				return fmt.Errorf("ErrorInfo domain %q (code %v, reason %s): %q", ei.GetDomain(), st.Code(), ei.GetReason(), st.Message())
			case !known:
				return fmt.Errorf("reason %q is not in the table of docs/api.md (code %v): %q", ei.GetReason(), st.Code(), st.Message())
			case want != st.Code():
				return fmt.Errorf("reason %s with code %v, docs/api.md says %v: %q", ei.GetReason(), st.Code(), want, st.Message())
			}
			return nil
		}
	}
	return fmt.Errorf("code %v without an ErrorInfo: %q", st.Code(), st.Message())
}

// fzOutcome is a short description of a call's result, for -v runs.
func fzOutcome(err error) string {
	if err == nil {
		return "OK"
	}
	st, _ := status.FromError(err)
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			return fmt.Sprintf("%v/%s: %.120q", st.Code(), ei.GetReason(), st.Message())
		}
	}
	return fmt.Sprintf("%v: %.120q", st.Code(), st.Message())
}

// fzCheckNode fails when the node no longer serves after a call (a single
// request must not take a node out).
func fzCheckNode(e *fzEnv) error {
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := e.node.Ready()
		if err == nil && e.node.ReadyForReads() {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("the node is not ready 10 s after the call: %v (leader ready: %v)", err, e.node.ReadyForReads())
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// fzSeeds adds the seed corpus: valid requests on the fixture sessions and
// invalid ones, for every method.
func fzSeeds(f *testing.F) {
	ms := fzMethods()
	index := map[string]int{}
	for i, m := range ms {
		index[m.name] = i
	}
	if len(ms) > 256 {
		f.Fatalf("%d methods do not fit the method byte", len(ms))
	}
	covered := map[string]bool{}
	add := func(svc, method string, msg proto.Message) {
		name := "/sessionstore.v1." + svc + "/" + method
		i, ok := index[name]
		if !ok {
			f.Fatalf("seed for unknown method %s", name)
		}
		b, err := proto.MarshalOptions{Deterministic: true}.Marshal(msg)
		if err != nil {
			f.Fatalf("seed for %s: %v", name, err)
		}
		covered[name] = true
		f.Add(byte(i), b)
	}
	const P, M, C = "SessionPersistence", "PlanMode", "Cluster"
	str := func(s string) *string { return &s }
	i64 := func(v int64) *int64 { return &v }
	i32 := func(v int32) *int32 { return &v }
	long := strings.Repeat("é", 200)
	badIDs := []string{"", "a\x00b", "..", "/", strings.Repeat("x", 256), long, "\u2028", "~0041"}

	// Locate and Create.
	add(P, "Locate", &pb.LocateRequest{Header: fzHeader(fzLive)})
	add(P, "Locate", &pb.LocateRequest{})
	add(P, "Locate", &pb.LocateRequest{Header: &pb.SessionHeader{Id: "a\x00b", Cwd: str("C:\\x:/y//z")}})
	add(P, "Locate", &pb.LocateRequest{Header: &pb.SessionHeader{Id: long, Cwd: str(strings.Repeat("/é", 300))}})
	add(P, "Create", &pb.CreateRequest{Header: fzHeader("fz-new"), RequestId: "c1"})
	add(P, "Create", &pb.CreateRequest{Header: fzHeader(fzLive)})
	add(P, "Create", &pb.CreateRequest{})
	add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: "fz-full", Version: 1, CreatedAt: 1, Cwd: str("/a"),
		ParentSession: str(fzLive), SeedLength: i64(2), Origin: str("o"), DelegationDepth: i32(1), AgentPreset: str("p")}})
	add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: "fz-neg", CreatedAt: -1}})
	add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: "fz-big", CreatedAt: 1 << 62, Version: -1 << 31, SeedLength: i64(-1 << 62)}})
	add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: "fz-cwd", Cwd: str("")}})
	add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: "fz-v99", Version: 99, Cwd: str("relative")}})
	for _, id := range badIDs {
		add(P, "Create", &pb.CreateRequest{Header: &pb.SessionHeader{Id: id}})
	}

	// Append: valid, then every kind of refusal.
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: fzEvents(3, 2)})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: fzEvents(0, 3)}) // a duplicate
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLazy, Events: fzEvents(0, 1)})
	add(P, "Append", &pb.AppendRequest{SessionId: fzTurn, Events: []string{`{"type":"step/end","seq":3,"time":4,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":4,"time":5,"data":{"turn":1,"reason":{"kind":"completed"}}}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzPlan, Events: []string{`{"type":"plan/mode","seq":2,"time":1,"data":{"active":true}}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzPlan, Events: []string{`{"type":"plan/mode","seq":2,"time":1,"data":{"active":"yes"}}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLease, Events: fzEvents(2, 1), LeaseEpoch: 1})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLease, Events: fzEvents(2, 1)})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLease, Events: fzEvents(2, 1), LeaseEpoch: 1 << 63})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: fzEvents(3, 1), ExpectedRevision: "nope"})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{"not json"}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":3,"time":0,"data":{"x":1,"x":2}}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{"{\"type\":\"a\",\"seq\":3,\n\"time\":0,\"data\":null}"}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":3,"time":0,"data":null,"extra":1}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":9223372036854775807,"time":0,"data":null}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":-1,"time":0,"data":null}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":1e300,"time":0,"data":null}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":3,"time":0,"data":null,"ignorable":false}`}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{fzEvent(3), fzEvent(5)}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{fzEvent(1 << 40)}})
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: fzEvents(3, 17)})                                                                      // too many
	add(P, "Append", &pb.AppendRequest{SessionId: fzLive, Events: []string{`{"type":"a","seq":3,"time":0,"data":"` + strings.Repeat("x", 2100) + `"}`}}) // too big
	add(P, "Append", &pb.AppendRequest{SessionId: "fz-unknown", Events: fzEvents(0, 1)})
	for _, id := range badIDs {
		add(P, "Append", &pb.AppendRequest{SessionId: id, Events: fzEvents(0, 1)})
	}

	// Reads and ownership.
	for _, id := range []string{fzLive, fzTurn, fzLazy, fzLease, "fz-unknown", "", "a\x00b"} {
		add(P, "Load", &pb.LoadRequest{SessionId: id, RequestId: "l-" + id})
		add(P, "Inspect", &pb.InspectRequest{SessionId: id})
		add(P, "LoadStream", &pb.LoadRequest{SessionId: id})
		add(P, "InspectStream", &pb.InspectRequest{SessionId: id, Consistency: pb.Consistency_STALE})
		add(P, "ReadFrom", &pb.ReadFromRequest{SessionId: id})
		add(P, "ReadRaw", &pb.ReadRawRequest{SessionId: id})
		add(P, "Watch", &pb.WatchRequest{SessionId: id})
		add(P, "Prepare", &pb.PrepareRequest{SessionId: id, Owner: "o2", TtlMs: 1000})
		add(P, "PrepareStream", &pb.PrepareRequest{SessionId: id, Owner: "o3", TtlMs: 50})
	}
	add(P, "Inspect", &pb.InspectRequest{SessionId: fzLive, Consistency: pb.Consistency(7)})
	add(P, "ReadFrom", &pb.ReadFromRequest{SessionId: fzLive, FromSeq: -1 << 63})
	add(P, "ReadFrom", &pb.ReadFromRequest{SessionId: fzLive, FromSeq: 1<<63 - 1, Consistency: pb.Consistency_STALE})
	add(P, "ReadFrom", &pb.ReadFromRequest{SessionId: fzLive, FromSeq: 2})
	add(P, "Watch", &pb.WatchRequest{SessionId: fzLive, FromSeq: -5})
	add(P, "Watch", &pb.WatchRequest{SessionId: fzLive, FromSeq: 1<<63 - 1})
	add(P, "Prepare", &pb.PrepareRequest{SessionId: fzLive, Owner: "", TtlMs: -1})
	add(P, "Prepare", &pb.PrepareRequest{SessionId: fzLive, Owner: "o", TtlMs: 1<<63 - 1})
	add(P, "Prepare", &pb.PrepareRequest{SessionId: fzLease, Owner: fzOwner, TtlMs: 0, RequestId: "p"})
	add(P, "KeepAlive", &pb.KeepAliveRequest{Lease: &pb.Lease{SessionId: fzLease, Owner: fzOwner, Epoch: 1}, RequestId: "k"})
	add(P, "KeepAlive", &pb.KeepAliveRequest{Lease: &pb.Lease{SessionId: fzLease, Owner: "other", Epoch: 0}})
	add(P, "KeepAlive", &pb.KeepAliveRequest{Lease: &pb.Lease{SessionId: fzLive, Epoch: 1<<64 - 1, ExpiresAtUnixMs: -1}})
	add(P, "KeepAlive", &pb.KeepAliveRequest{})
	add(P, "Release", &pb.ReleaseRequest{SessionId: fzLease, LeaseEpoch: 1, RequestId: "r"})
	add(P, "Release", &pb.ReleaseRequest{SessionId: fzLease, LeaseEpoch: 99})
	add(P, "Release", &pb.ReleaseRequest{SessionId: ""})
	add(P, "Delete", &pb.DeleteRequest{SessionId: "fz-never-created", RequestId: "d"})
	add(P, "Delete", &pb.DeleteRequest{SessionId: fzLease, ExpectedRevision: "not-a-revision"})
	add(P, "Delete", &pb.DeleteRequest{SessionId: ""})
	add(P, "List", &pb.ListRequest{})
	add(P, "List", &pb.ListRequest{PageSize: 1, Consistency: pb.Consistency_STALE})
	add(P, "List", &pb.ListRequest{PageSize: -1, PageToken: "garbage", CwdPrefix: "/w"})
	add(P, "List", &pb.ListRequest{PageSize: 1 << 30, PageToken: fzLive, CwdPrefix: "\x00"})
	add(P, "ListSnapshots", &pb.ListSnapshotsRequest{PageSize: 2})
	add(P, "ListSnapshots", &pb.ListSnapshotsRequest{PageSize: -1 << 31, PageToken: "\uffff"})
	add(P, "ListSnapshots", &pb.ListSnapshotsRequest{PageSize: 1, IdPrefix: "fz-", Order: pb.ListOrder_LIST_ORDER_LAST_APPEND, PageToken: "%v1.AQAAAAAAAAAAZg"})
	add(P, "List", &pb.ListRequest{IdPrefix: "\uffff", Order: pb.ListOrder(7), CwdPrefix: "/"})

	// Plan mode.
	for _, id := range []string{fzPlan, fzLease, fzTurn, fzLazy, "fz-unknown", ""} {
		add(M, "Get", &pb.PlanGetRequest{SessionId: id})
		add(M, "Projection", &pb.PlanProjectionRequest{SessionId: id})
		add(M, "Set", &pb.PlanSetRequest{SessionId: id, Active: true, RequestId: "s-" + id})
		add(M, "PreStep", &pb.PlanPreStepRequest{SessionId: id})
		add(M, "Command", &pb.PlanCommandRequest{SessionId: id, RawInput: " draft"})
		add(M, "ExitPlan", &pb.PlanExitRequest{SessionId: id, Plan: "# The plan\n\ndo things"})
	}
	approve := &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{Id: "plan-review", Selected: []string{"Approve"}}}}
	add(M, "Set", &pb.PlanSetRequest{SessionId: fzPlan, Active: false, ExpectedNextSeq: 2})
	add(M, "Set", &pb.PlanSetRequest{SessionId: fzPlan, Active: true, ExpectedNextSeq: -1})
	add(M, "Set", &pb.PlanSetRequest{SessionId: fzLease, Active: true, LeaseEpoch: 1})
	add(M, "PreStep", &pb.PlanPreStepRequest{SessionId: fzLease, LeaseEpoch: 1, ExpectedNextSeq: 1 << 62})
	add(M, "Command", &pb.PlanCommandRequest{SessionId: fzPlan, RawInput: " off"})
	add(M, "Command", &pb.PlanCommandRequest{SessionId: fzPlan, RawInput: ""})
	add(M, "Command", &pb.PlanCommandRequest{SessionId: fzPlan, RawInput: " look", ImageBlocks: []string{
		`{"type":"image","attachment":{"attachmentId":"att-1","mediaType":"image/png"}}`, "not json", "{}"}})
	add(M, "Command", &pb.PlanCommandRequest{SessionId: fzPlan, RawInput: "\t\r\n" + long})
	add(M, "ExitPlan", &pb.PlanExitRequest{SessionId: fzPlan, Plan: "# The plan\n\ndo things", Answer: approve, RequestId: "e"})
	add(M, "ExitPlan", &pb.PlanExitRequest{SessionId: fzPlan, Plan: "no heading", Answer: &pb.ReviewAnswer{Dismissed: true}})
	add(M, "ExitPlan", &pb.PlanExitRequest{SessionId: fzPlan, Plan: "#", Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{
		{Id: "plan-review", Selected: []string{"Approve"}, Custom: str("but")}, {Id: "plan-review"}, {}}}})
	add(M, "ExitPlan", &pb.PlanExitRequest{SessionId: fzPlan, Plan: "#\u00a0x", Answer: &pb.ReviewAnswer{}})

	// Cluster (on the only voter: nothing may take it out).
	add(C, "Status", &pb.StatusRequest{})
	add(C, "Members", &pb.MembersRequest{})
	add(C, "Retention", &pb.RetentionRequest{DryRun: true}) // no policy configured: INVALID_ARGUMENT
	add(C, "Retention", &pb.RetentionRequest{})
	add(C, "TransferLeadership", &pb.TransferLeadershipRequest{})
	add(C, "TransferLeadership", &pb.TransferLeadershipRequest{ToNodeId: fzNodeID})
	add(C, "TransferLeadership", &pb.TransferLeadershipRequest{ToNodeId: "nobody"})
	add(C, "RemoveMember", &pb.RemoveMemberRequest{})
	add(C, "RemoveMember", &pb.RemoveMemberRequest{NodeId: "nobody"})
	add(C, "RemoveMember", &pb.RemoveMemberRequest{NodeId: fzNodeID})
	add(C, "Leave", &pb.LeaveRequest{})
	add(C, "Backup", &pb.BackupRequest{})

	for _, m := range ms {
		if !covered[m.name] {
			f.Fatalf("no seed for %s: add one to fzSeeds", m.name)
		}
	}
	// Payloads that are no request message at all, or barely one.
	for _, raw := range [][]byte{nil, {0xff}, {0x0a, 0x05, 'a'}, {0x0a, 0x02, 0xc3, 0x28}, {0x08, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01}} {
		for i := range ms {
			if i%4 == 0 {
				f.Add(byte(i), raw)
			}
		}
	}
}

// FuzzRequests decodes payload as the request of method (modulo the number
// of methods) and calls its handler directly on the process's node.
func FuzzRequests(f *testing.F) {
	fzSeeds(f)
	f.Cleanup(fzStop)
	f.Fuzz(func(t *testing.T, method byte, payload []byte) {
		e := fzGet(t)
		m := e.methods[int(method)%len(e.methods)]
		decoded, err, bad := fzCall(e, m, payload)
		if !decoded {
			return
		}
		if bad != nil {
			t.Fatalf("%s(%x): %v", m.name, payload, bad)
		}
		if err != nil {
			if cerr := fzCheckErr(err); cerr != nil {
				t.Fatalf("%s(%x): %v", m.name, payload, cerr)
			}
		}
		if testing.Verbose() {
			t.Logf("%s: %s", m.name, fzOutcome(err))
		}
		if nerr := fzCheckNode(e); nerr != nil {
			t.Fatalf("%s(%x): %v", m.name, payload, nerr)
		}
	})
}

// FuzzValidators fuzzes the standalone validators of request fields: session
// ids and their path segment, cwds and their project key, Create headers
// and the header line written from them, plan/mode events, command lines
// and plan texts. Each must refuse with a domain error, never panic, and
// what it accepts must have the documented shape.
func FuzzValidators(f *testing.F) {
	for _, s := range []struct {
		id, cwd string
		created int64
		line    string
	}{
		{"fz-live", "/w/fuzz", fzTime0, `{"type":"plan/mode","seq":2,"time":1,"data":{"active":true}}`},
		{"..", "C:\\x:/y//z", 0, `{"type":"plan/mode","seq":2,"time":1,"data":{"active":"yes"}}`},
		{"a\x00b", "", -1, `{"type":"session","version":0,"id":"x","createdAt":1,"cwd":"/a","delegationDepth":0}`},
		{"~0041", strings.Repeat("/é", 300), 1 << 53, "/plan draft it"},
		{strings.Repeat("é", 60), "relative", 1<<53 - 1, "/Plan\tx"},
		{"\u2028\ud7ff\U0010ffff", "\\\\server\\share", 1, "# The plan\n\ndo"},
		{"\xff", "/\xfe", 1, `{"type":"session","version":2,"id":"x"}`},
	} {
		f.Add(s.id, s.cwd, s.created, []byte(s.line))
	}
	f.Fuzz(func(t *testing.T, id, cwd string, created int64, line []byte) {
		domain := func(what string, err error) {
			t.Helper()
			var de *sessionstore.Error
			if !errors.As(err, &de) {
				t.Fatalf("%s: error is not a domain error (%T): %v", what, err, err)
			}
			if _, ok := fzReasonCode[string(de.Reason)]; !ok {
				t.Fatalf("%s: reason %q is not in the table of docs/api.md", what, de.Reason)
			}
		}
		safe := func(s string) bool {
			for i := 0; i < len(s); i++ {
				c := s[i]
				if !(c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._-~", c) >= 0) {
					return false
				}
			}
			return true
		}

		// Session ids: accepted iff non-empty UTF-8 whose segment fits a file name.
		idErr := sessionlog.ValidateSessionID(id)
		seg, segErr := sessionlog.EncodeSegment(id)
		if idErr != nil {
			domain("ValidateSessionID", idErr)
			if id != "" && utf8.ValidString(id) && segErr == nil && len(seg) <= 255 {
				t.Fatalf("ValidateSessionID(%q) refused an id whose segment %q fits: %v", id, seg, idErr)
			}
		} else {
			switch {
			case segErr != nil:
				t.Fatalf("EncodeSegment(%q) of a valid id: %v", id, segErr)
			case seg == "" || len(seg) > 255 || seg == "." || seg == ".." || !safe(seg):
				t.Fatalf("valid id %q has segment %q", id, seg)
			}
		}
		if id == "" {
			domain("EncodeSegment", segErr)
		}

		// Request field limits: accepted, or TOO_LARGE naming the field.
		if err := rpc.CheckFields(&pb.CreateRequest{Header: &pb.SessionHeader{Id: id, Cwd: &cwd}, RequestId: string(line)}); err != nil {
			domain("CheckFields", err)
			if len(id) <= rpc.MaxSessionIDBytes && len(cwd) <= rpc.MaxCwdBytes && len(line) <= rpc.MaxRequestIDBytes {
				t.Fatalf("CheckFields refused fields within their limits: %v", err)
			}
		}

		// Project keys.
		if key, err := sessionlog.ProjectKey(cwd); err != nil {
			domain("ProjectKey", err)
			if cwd != "" {
				t.Fatalf("ProjectKey(%q) refused a non-empty cwd: %v", cwd, err)
			}
		} else if !strings.HasPrefix(key, "--") || !strings.HasSuffix(key, "--") || len(key) > 255 || !safe(key) {
			t.Fatalf("ProjectKey(%q) = %q", cwd, key)
		}

		// Create headers and the header line written from an accepted one.
		h := sessionstore.Header{ID: id, CreatedAt: created, Cwd: &cwd}
		if err := sessionlog.CheckCreateHeader(h); err != nil {
			domain("CheckCreateHeader", err)
		} else {
			text := sessionlog.HeaderLine(h)
			if !json.Valid(text) || strings.ContainsAny(string(text), "\n\r") {
				t.Fatalf("HeaderLine of accepted header %+v is not one JSON line: %s", h, text)
			}
			back, err := sessionlog.ParseHeaderLine(text, "")
			if err != nil {
				t.Fatalf("ParseHeaderLine(HeaderLine(%+v)) = %v (line %s)", h, err, text)
			}
			if back.ID != id || back.CreatedAt != created || back.Cwd == nil || *back.Cwd != cwd {
				t.Fatalf("header line %s reads back as %+v, want id %q createdAt %d cwd %q", text, back, id, created, cwd)
			}
		}
		if _, err := sessionlog.ParseHeaderLine(line, ""); err != nil {
			domain("ParseHeaderLine", err)
		}

		// plan/mode events, command lines, plan texts.
		if err := planmode.ValidateEvent(line); err != nil {
			domain("planmode.ValidateEvent", err)
		}
		if name, rawInput, ok := planmode.ParseCommandLine(string(line)); ok {
			if "/"+name+rawInput != string(line) || name == "" || name[0] < 'a' || name[0] > 'z' {
				t.Fatalf("ParseCommandLine(%q) = %q, %q", line, name, rawInput)
			}
		}
		_ = planmode.ValidPlan(string(line))
	})
}

// fzBigBackend serves one session of many small events (only the methods
// the stream forms call are implemented).
type fzBigBackend struct {
	rpc.Backend
	events [][]byte
}

func (b fzBigBackend) header() sessionstore.Header {
	return sessionstore.Header{ID: "big", CreatedAt: 1}
}

func (b fzBigBackend) ReadFrom(_ context.Context, _ string, _ int64, _ sessionstore.Consistency, send func(sessionstore.Suffix) error) error {
	return send(sessionstore.Suffix{Header: b.header(), Events: b.events, Revision: "r1", NextSeq: int64(len(b.events))})
}

func (b fzBigBackend) Inspect(context.Context, string, sessionstore.Consistency) (sessionstore.View, error) {
	return sessionstore.View{Header: b.header(), Events: b.events, Revision: "r1", NextSeq: int64(len(b.events))}, nil
}

// InspectStream ignores the limit (as no backend should): the unary form's
// own check answers.
func (b fzBigBackend) InspectStream(ctx context.Context, id string, c sessionstore.Consistency, _ sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	v, _ := b.Inspect(ctx, id, c)
	return send(v)
}

func (b fzBigBackend) OpenRaw(context.Context, string, sessionstore.Consistency) (sessionstore.Header, string, io.ReadSeeker, int64, error) {
	var text []byte
	for _, e := range b.events {
		text = append(append(text, e...), '\n')
	}
	return b.header(), "r1", bytes.NewReader(text), int64(len(text)), nil
}

// TestStreamsFitMessageLimit: the stream forms (ReadFrom, InspectStream,
// ReadRaw) must send every message within the node's message limit, for a
// session of any size (docs/api.md: "for a session of any size"). With --max-message-bytes
// 1 MiB they cut events into chunks of rpc.ChunkBytes = 1 MiB of event
// bytes, and the chunk's framing pushes the message above the limit: gRPC
// then fails the call with RESOURCE_EXHAUSTED "trying to send message larger
// than max" (found by the flood test, cmd/node/flood_test.go).
func TestStreamsFitMessageLimit(t *testing.T) {
	const limit = 1 << 20
	var events [][]byte
	for seq := 0; seq < 1000; seq++ {
		events = append(events, fmt.Appendf(nil, `{"type":"x","seq":%d,"time":1,"data":"%s","ignorable":true}`, seq, strings.Repeat("p", 2000)))
	}
	p := rpc.NewPersistence(fzBigBackend{events: events}, limit)
	for _, c := range []struct {
		name string
		call func(s *fzStream) error
	}{
		{"ReadFrom", func(s *fzStream) error {
			return p.ReadFrom(&pb.ReadFromRequest{SessionId: "big"}, &grpc.GenericServerStream[pb.ReadFromRequest, pb.ReadFromResponse]{ServerStream: s})
		}},
		{"InspectStream", func(s *fzStream) error {
			return p.InspectStream(&pb.InspectRequest{SessionId: "big"}, &grpc.GenericServerStream[pb.InspectRequest, pb.SessionViewPart]{ServerStream: s})
		}},
		{"ReadRaw", func(s *fzStream) error {
			return p.ReadRaw(&pb.ReadRawRequest{SessionId: "big"}, &grpc.GenericServerStream[pb.ReadRawRequest, pb.ReadRawResponse]{ServerStream: s})
		}},
	} {
		ctx, cancel := context.WithCancel(context.Background())
		s := &fzStream{ctx: ctx, cancel: cancel, limit: limit}
		if err := c.call(s); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
		cancel()
		if s.sendErr != nil {
			t.Errorf("%s of %d events of %d bytes with a %d-byte message limit: %v", c.name, len(events), len(events[0]), limit, s.sendErr)
		}
	}
	// The unary form, collected from the stream form, answers TOO_LARGE
	// with the view's size (event bytes and their framing, 8 bytes each) and
	// names the stream form.
	size := 0
	for _, e := range events {
		size += len(e) + 8
	}
	_, err := p.Inspect(context.Background(), &pb.InspectRequest{SessionId: "big"})
	want := fmt.Sprintf("view is %d bytes (%d events), above the %d-byte message limit; use the stream form InspectStream,", size, len(events), limit)
	if st, _ := status.FromError(err); st.Code() != codes.ResourceExhausted || !strings.Contains(st.Message(), want) || fzCheckErr(err) != nil {
		t.Errorf("unary Inspect of a view above the message limit: %v, want TOO_LARGE %q", err, want)
	}
}
