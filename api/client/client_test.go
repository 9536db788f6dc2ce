package client

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net"
	"regexp"
	"sync"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/encoding"
	"google.golang.org/grpc/mem"
	"google.golang.org/grpc/status"
	"google.golang.org/grpc/test/bufconn"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// infoErr is a status error as the server builds it: a code, the message and
// an ErrorInfo of domain "sessionstore".
func infoErr(t *testing.T, code codes.Code, reason sessionstore.Reason, msg string) error {
	t.Helper()
	st, err := status.New(code, msg).WithDetails(&errdetails.ErrorInfo{Reason: string(reason), Domain: "sessionstore"})
	if err != nil {
		t.Fatal(err)
	}
	return st.Err()
}

// recordingCodec is the proto codec that also keeps the wire bytes of every
// request the server decodes, so tests can compare retried requests byte for
// byte.
type recordingCodec struct {
	encoding.CodecV2
	mu   sync.Mutex
	wire map[string][][]byte // by Go type of the request
}

func (c *recordingCodec) Unmarshal(data mem.BufferSlice, v any) error {
	b := data.Materialize()
	c.mu.Lock()
	name := string(proto.MessageName(v.(proto.Message)))
	c.wire[name] = append(c.wire[name], b)
	c.mu.Unlock()
	return c.CodecV2.Unmarshal(data, v)
}

func (c *recordingCodec) bytesOf(name string) [][]byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([][]byte(nil), c.wire[name]...)
}

// fake is a SessionPersistence server whose calls fail with queued errors
// before they answer with canned responses.
type fake struct {
	sessionpb.UnimplementedSessionPersistenceServer

	mu        sync.Mutex
	failures  map[string][]error // per method, the next calls' errors in order
	midStream map[string][]error // per stream method: send the first part, then fail
	calls     map[string]int
	reqs      map[string][]proto.Message

	viewParts []*sessionpb.SessionViewPart
	rawParts  []*sessionpb.ReadRawResponse
	readParts []*sessionpb.ReadFromResponse
	watch     []*sessionpb.WatchResponse
	watchEnd  error
}

func newFake() *fake {
	return &fake{failures: map[string][]error{}, midStream: map[string][]error{}, calls: map[string]int{}, reqs: map[string][]proto.Message{}}
}

func (f *fake) fail(method string, errs ...error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.failures[method] = append(f.failures[method], errs...)
}

func (f *fake) enter(method string, req proto.Message) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[method]++
	f.reqs[method] = append(f.reqs[method], proto.Clone(req))
	if q := f.failures[method]; len(q) > 0 {
		f.failures[method] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fake) callCount(method string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[method]
}

func (f *fake) requests(method string) []proto.Message {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]proto.Message(nil), f.reqs[method]...)
}

func (f *fake) midStreamErr(method string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if q := f.midStream[method]; len(q) > 0 {
		f.midStream[method] = q[1:]
		return q[0]
	}
	return nil
}

func (f *fake) Locate(_ context.Context, req *sessionpb.LocateRequest) (*sessionpb.LocateResponse, error) {
	if err := f.enter("Locate", req); err != nil {
		return nil, err
	}
	return &sessionpb.LocateResponse{Kind: "jsonl", Path: "/data/" + req.GetHeader().GetId(), Url: "http://x/" + req.GetHeader().GetId()}, nil
}

func (f *fake) Create(_ context.Context, req *sessionpb.CreateRequest) (*sessionpb.CreateResponse, error) {
	if err := f.enter("Create", req); err != nil {
		return nil, err
	}
	return &sessionpb.CreateResponse{}, nil
}

func (f *fake) Append(_ context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error) {
	if err := f.enter("Append", req); err != nil {
		return nil, err
	}
	return &sessionpb.AppendResponse{Revision: "r2", NextSeq: int64(len(req.GetEvents())), Duplicate: f.callCount("Append") > 1}, nil
}

func (f *fake) Load(_ context.Context, req *sessionpb.LoadRequest) (*sessionpb.SessionView, error) {
	if err := f.enter("Load", req); err != nil {
		return nil, err
	}
	return &sessionpb.SessionView{Revision: "r1"}, nil
}

func (f *fake) Inspect(_ context.Context, req *sessionpb.InspectRequest) (*sessionpb.SessionView, error) {
	if err := f.enter("Inspect", req); err != nil {
		return nil, err
	}
	return &sessionpb.SessionView{Revision: "r1"}, nil
}

func (f *fake) Prepare(_ context.Context, req *sessionpb.PrepareRequest) (*sessionpb.PrepareResponse, error) {
	if err := f.enter("Prepare", req); err != nil {
		return nil, err
	}
	return &sessionpb.PrepareResponse{View: &sessionpb.SessionView{Revision: "r1"}, Lease: &sessionpb.Lease{SessionId: req.GetSessionId(), Owner: req.GetOwner(), Epoch: 1}}, nil
}

func (f *fake) KeepAlive(_ context.Context, req *sessionpb.KeepAliveRequest) (*sessionpb.KeepAliveResponse, error) {
	if err := f.enter("KeepAlive", req); err != nil {
		return nil, err
	}
	return &sessionpb.KeepAliveResponse{Lease: req.GetLease()}, nil
}

func (f *fake) Release(_ context.Context, req *sessionpb.ReleaseRequest) (*sessionpb.ReleaseResponse, error) {
	if err := f.enter("Release", req); err != nil {
		return nil, err
	}
	return &sessionpb.ReleaseResponse{}, nil
}

func (f *fake) List(_ context.Context, req *sessionpb.ListRequest) (*sessionpb.ListResponse, error) {
	if err := f.enter("List", req); err != nil {
		return nil, err
	}
	return &sessionpb.ListResponse{Headers: []*sessionpb.SessionHeader{{Id: "a"}}, NextPageToken: "t"}, nil
}

func (f *fake) ListSnapshots(_ context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error) {
	if err := f.enter("ListSnapshots", req); err != nil {
		return nil, err
	}
	return &sessionpb.ListSnapshotsResponse{Snapshots: []*sessionpb.SessionSnapshot{{Header: &sessionpb.SessionHeader{Id: "a"}, Revision: "r"}}}, nil
}

func sendAll[T any](f *fake, method string, parts []*T, send func(*T) error) error {
	for i, p := range parts {
		if err := send(p); err != nil {
			return err
		}
		if i == 0 {
			if err := f.midStreamErr(method); err != nil {
				return err
			}
		}
	}
	return nil
}

func (f *fake) LoadStream(req *sessionpb.LoadRequest, s grpc.ServerStreamingServer[sessionpb.SessionViewPart]) error {
	if err := f.enter("LoadStream", req); err != nil {
		return err
	}
	return sendAll(f, "LoadStream", f.viewParts, s.Send)
}

func (f *fake) InspectStream(req *sessionpb.InspectRequest, s grpc.ServerStreamingServer[sessionpb.SessionViewPart]) error {
	if err := f.enter("InspectStream", req); err != nil {
		return err
	}
	return sendAll(f, "InspectStream", f.viewParts, s.Send)
}

func (f *fake) PrepareStream(req *sessionpb.PrepareRequest, s grpc.ServerStreamingServer[sessionpb.SessionViewPart]) error {
	if err := f.enter("PrepareStream", req); err != nil {
		return err
	}
	return sendAll(f, "PrepareStream", f.viewParts, s.Send)
}

func (f *fake) ReadFrom(req *sessionpb.ReadFromRequest, s grpc.ServerStreamingServer[sessionpb.ReadFromResponse]) error {
	if err := f.enter("ReadFrom", req); err != nil {
		return err
	}
	return sendAll(f, "ReadFrom", f.readParts, s.Send)
}

func (f *fake) ReadRaw(req *sessionpb.ReadRawRequest, s grpc.ServerStreamingServer[sessionpb.ReadRawResponse]) error {
	if err := f.enter("ReadRaw", req); err != nil {
		return err
	}
	return sendAll(f, "ReadRaw", f.rawParts, s.Send)
}

func (f *fake) Watch(req *sessionpb.WatchRequest, s grpc.ServerStreamingServer[sessionpb.WatchResponse]) error {
	if err := f.enter("Watch", req); err != nil {
		return err
	}
	for _, m := range f.watch {
		if err := s.Send(m); err != nil {
			return err
		}
	}
	if f.watchEnd != nil {
		return f.watchEnd
	}
	<-s.Context().Done()
	return s.Context().Err()
}

// harness is a client connected over bufconn to a fake server.
type harness struct {
	fake  *fake
	codec *recordingCodec
	c     *Client
}

// fastOptions keep retries in the millisecond range.
var fastOptions = Options{MaxAttempts: 8, InitialBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond}

func start(t *testing.T) *harness {
	t.Helper()
	lis := bufconn.Listen(1 << 20)
	codec := &recordingCodec{CodecV2: encoding.GetCodecV2("proto"), wire: map[string][][]byte{}}
	srv := grpc.NewServer(grpc.ForceServerCodecV2(codec))
	f := newFake()
	sessionpb.RegisterSessionPersistenceServer(srv, f)
	sessionpb.RegisterPlanModeServer(srv, planFake{fake: f})
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)

	c, err := Dial(context.Background(), "passthrough:///bufnet",
		grpc.WithContextDialer(func(ctx context.Context, _ string) (net.Conn, error) { return lis.DialContext(ctx) }))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return &harness{fake: f, codec: codec, c: c.WithOptions(fastOptions)}
}

func ctxT(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// allEqual reports whether every slice of bs equals the first.
func allEqual(bs [][]byte) bool {
	for _, b := range bs[1:] {
		if !bytes.Equal(b, bs[0]) {
			return false
		}
	}
	return true
}

var hexID = regexp.MustCompile(`^[0-9a-f]{32}$`)

func TestAppendRetriesWithIdenticalBytes(t *testing.T) {
	h := start(t)
	h.fake.fail("Append",
		infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"),
		status.Error(codes.Unavailable, "connection reset"),
		status.Error(codes.DeadlineExceeded, "server timeout"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonShuttingDown, "shutting down"),
	)
	req := &sessionpb.AppendRequest{SessionId: "s1", Events: []string{`{"type":"a","seq":0}`, `{"type":"b","seq":1}`}, LeaseEpoch: 3, ExpectedRevision: "r1"}
	resp, err := h.c.Append(ctxT(t), req)
	if err != nil {
		t.Fatalf("Append: %v", err)
	}
	if n := h.fake.callCount("Append"); n != 6 {
		t.Fatalf("calls = %d, want 6", n)
	}
	if !resp.GetDuplicate() || resp.GetRevision() != "r2" {
		t.Fatalf("resp = %v", resp)
	}
	wire := h.codec.bytesOf("sessionstore.v1.AppendRequest")
	if len(wire) != 6 || !allEqual(wire) {
		t.Fatalf("retried Append bytes differ: %d requests", len(wire))
	}
	want, _ := proto.Marshal(req)
	if !bytes.Equal(wire[0], want) {
		t.Fatalf("wire bytes are not the caller's message")
	}
}

func TestCreateRetriesWithSameRequestID(t *testing.T) {
	h := start(t)
	h.fake.fail("Create",
		infoErr(t, codes.Unavailable, sessionstore.ReasonShuttingDown, "shutting down"),
		status.Error(codes.DeadlineExceeded, "deadline"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown"),
	)
	req := &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Version: 0, Id: "s1", CreatedAt: 7}}
	if _, err := h.c.Create(ctxT(t), req); err != nil {
		t.Fatalf("Create: %v", err)
	}
	if req.RequestId != "" {
		t.Fatalf("caller's request modified: request_id %q", req.RequestId)
	}
	reqs := h.fake.requests("Create")
	if len(reqs) != 4 {
		t.Fatalf("calls = %d, want 4", len(reqs))
	}
	id := reqs[0].(*sessionpb.CreateRequest).GetRequestId()
	if !hexID.MatchString(id) {
		t.Fatalf("minted request id %q is not 128-bit hex", id)
	}
	for _, r := range reqs {
		if got := r.(*sessionpb.CreateRequest).GetRequestId(); got != id {
			t.Fatalf("request id changed across retries: %q then %q", id, got)
		}
	}
	if wire := h.codec.bytesOf("sessionstore.v1.CreateRequest"); !allEqual(wire) {
		t.Fatal("retried Create bytes differ")
	}

	// A caller-chosen id is sent as is; separate calls mint separate ids.
	if _, err := h.c.Create(ctxT(t), &sessionpb.CreateRequest{Header: req.Header, RequestId: "mine"}); err != nil {
		t.Fatal(err)
	}
	if _, err := h.c.Create(ctxT(t), req); err != nil {
		t.Fatal(err)
	}
	reqs = h.fake.requests("Create")
	if got := reqs[4].(*sessionpb.CreateRequest).GetRequestId(); got != "mine" {
		t.Fatalf("caller's id replaced by %q", got)
	}
	if got := reqs[5].(*sessionpb.CreateRequest).GetRequestId(); got == id || !hexID.MatchString(got) {
		t.Fatalf("second call's id %q (first %q)", got, id)
	}
}

func TestMutatingRPCsRetryWithSameRequestID(t *testing.T) {
	unknown := func() error {
		return infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown")
	}
	cases := []struct {
		method string
		call   func(ctx context.Context, c *Client) error
	}{
		{"Load", func(ctx context.Context, c *Client) error {
			_, err := c.Load(ctx, &sessionpb.LoadRequest{SessionId: "s"})
			return err
		}},
		{"Prepare", func(ctx context.Context, c *Client) error {
			_, lease, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "s", Owner: "o", TtlMs: 1000})
			if err == nil && lease.GetEpoch() != 1 {
				t.Errorf("lease = %v", lease)
			}
			return err
		}},
		{"KeepAlive", func(ctx context.Context, c *Client) error {
			_, err := c.KeepAlive(ctx, &sessionpb.KeepAliveRequest{Lease: &sessionpb.Lease{SessionId: "s", Epoch: 1}})
			return err
		}},
		{"Release", func(ctx context.Context, c *Client) error {
			return c.Release(ctx, &sessionpb.ReleaseRequest{SessionId: "s", LeaseEpoch: 1})
		}},
		{"PlanMode.Set", func(ctx context.Context, c *Client) error {
			_, err := c.PlanSet(ctx, &sessionpb.PlanSetRequest{SessionId: "s", Active: true})
			return err
		}},
		{"PlanMode.PreStep", func(ctx context.Context, c *Client) error {
			_, err := c.PlanPreStep(ctx, &sessionpb.PlanPreStepRequest{SessionId: "s", LeaseEpoch: 1})
			return err
		}},
		{"PlanMode.Command", func(ctx context.Context, c *Client) error {
			_, err := c.PlanCommand(ctx, &sessionpb.PlanCommandRequest{SessionId: "s", RawInput: " off"})
			return err
		}},
		{"PlanMode.ExitPlan", func(ctx context.Context, c *Client) error {
			_, err := c.ExitPlan(ctx, &sessionpb.PlanExitRequest{SessionId: "s", Plan: "# p",
				Answer: &sessionpb.ReviewAnswer{Dismissed: true}})
			return err
		}},
	}
	for _, tc := range cases {
		t.Run(tc.method, func(t *testing.T) {
			h := start(t)
			h.fake.fail(tc.method, unknown(), unknown())
			if err := tc.call(ctxT(t), h.c); err != nil {
				t.Fatal(err)
			}
			reqs := h.fake.requests(tc.method)
			if len(reqs) != 3 {
				t.Fatalf("calls = %d, want 3", len(reqs))
			}
			type withID interface{ GetRequestId() string }
			id := reqs[0].(withID).GetRequestId()
			for _, r := range reqs {
				if r.(withID).GetRequestId() != id || !hexID.MatchString(id) {
					t.Fatalf("request ids %q / %q", id, r.(withID).GetRequestId())
				}
			}
		})
	}
}

func TestDefiniteErrorsAreNotRetried(t *testing.T) {
	h := start(t)
	const text = "seq mismatch: expected 3, got 5"
	h.fake.fail("Append", infoErr(t, codes.FailedPrecondition, sessionstore.ReasonSeqMismatch, text))
	_, err := h.c.Append(ctxT(t), &sessionpb.AppendRequest{SessionId: "s", Events: []string{`{}`}})
	if n := h.fake.callCount("Append"); n != 1 {
		t.Fatalf("Append calls = %d, want 1", n)
	}
	var se *sessionstore.Error
	if !errors.As(err, &se) || se.Reason != sessionstore.ReasonSeqMismatch || se.Message != text {
		t.Fatalf("err = %#v", err)
	}
	if !errors.Is(err, sessionstore.ErrSeqMismatch) {
		t.Fatal("errors.Is(err, ErrSeqMismatch) is false")
	}

	// Definite reasons and codes without ErrorInfo other than
	// Unavailable/DeadlineExceeded: one attempt each.
	for _, e := range []error{
		infoErr(t, codes.NotFound, sessionstore.ReasonNotFound, `session "x" not found`),
		infoErr(t, codes.FailedPrecondition, sessionstore.ReasonLeaseFenced, "fenced"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonCorruption, "odd code, definite reason"),
		status.Error(codes.Internal, "boom"),
		status.Error(codes.Canceled, "cancelled"),
	} {
		h.fake.fail("Load", e)
	}
	for i := 1; i <= 5; i++ {
		if _, err := h.c.Load(ctxT(t), &sessionpb.LoadRequest{SessionId: "x"}); err == nil {
			t.Fatalf("Load %d succeeded", i)
		}
		if n := h.fake.callCount("Load"); n != i {
			t.Fatalf("Load calls = %d after %d definite errors", n, i)
		}
	}
}

func TestReadsRetryOnlyWhenNotServed(t *testing.T) {
	h := start(t)
	h.fake.fail("Inspect", infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown"))
	_, err := h.c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"})
	if !errors.Is(err, sessionstore.ErrOutcomeUnknown) {
		t.Fatalf("err = %v", err)
	}
	if n := h.fake.callCount("Inspect"); n != 1 {
		t.Fatalf("Inspect retried on OUTCOME_UNKNOWN: %d calls", n)
	}

	h.fake.fail("Inspect", status.Error(codes.DeadlineExceeded, "deadline"))
	if _, err := h.c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"}); status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("err = %v", err)
	}
	if n := h.fake.callCount("Inspect"); n != 2 {
		t.Fatalf("Inspect retried on DEADLINE_EXCEEDED: %d calls", n)
	}

	h.fake.fail("Inspect",
		infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"),
		infoErr(t, codes.Unavailable, sessionstore.ReasonShuttingDown, "shutting down"),
		status.Error(codes.Unavailable, "transport"),
	)
	view, err := h.c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"})
	if err != nil || view.GetRevision() != "r1" {
		t.Fatalf("Inspect = %v, %v", view, err)
	}
	if n := h.fake.callCount("Inspect"); n != 6 {
		t.Fatalf("Inspect calls = %d, want 6", n)
	}

	h.fake.fail("List", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	if resp, err := h.c.List(ctxT(t), &sessionpb.ListRequest{}); err != nil || resp.GetNextPageToken() != "t" {
		t.Fatalf("List = %v, %v", resp, err)
	}
	h.fake.fail("ListSnapshots", infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "x"))
	if _, err := h.c.ListSnapshots(ctxT(t), &sessionpb.ListSnapshotsRequest{}); !errors.Is(err, sessionstore.ErrOutcomeUnknown) {
		t.Fatalf("ListSnapshots err = %v", err)
	}
	if h.fake.callCount("List") != 2 || h.fake.callCount("ListSnapshots") != 1 {
		t.Fatalf("List calls %d, ListSnapshots calls %d", h.fake.callCount("List"), h.fake.callCount("ListSnapshots"))
	}
}

func TestMaxAttempts(t *testing.T) {
	h := start(t)
	for range 10 {
		h.fake.fail("Append", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	}
	c := h.c.WithOptions(Options{MaxAttempts: 3, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond})
	_, err := c.Append(ctxT(t), &sessionpb.AppendRequest{SessionId: "s"})
	if !errors.Is(err, sessionstore.ErrNoLeader) {
		t.Fatalf("err = %v", err)
	}
	if n := h.fake.callCount("Append"); n != 3 {
		t.Fatalf("calls = %d, want 3", n)
	}
}

func TestContextBoundsRetriesAndKeepsTheUnknownOutcome(t *testing.T) {
	h := start(t)
	for range 10 {
		h.fake.fail("Append", infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "outcome unknown"))
	}
	c := h.c.WithOptions(Options{InitialBackoff: 5 * time.Second, MaxBackoff: 5 * time.Second})
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: "s"})
	if el := time.Since(start); el > 2*time.Second {
		t.Fatalf("Append took %v despite a 100 ms context", el)
	}
	if !errors.Is(err, sessionstore.ErrOutcomeUnknown) {
		t.Fatalf("err = %v, want the last attempt's OUTCOME_UNKNOWN", err)
	}
	if n := h.fake.callCount("Append"); n != 1 {
		t.Fatalf("calls = %d, want 1", n)
	}

	// A dead context: the transport error is not retried.
	dead, cancelDead := context.WithCancel(context.Background())
	cancelDead()
	if _, err := h.c.Append(dead, &sessionpb.AppendRequest{SessionId: "s"}); status.Code(err) != codes.Canceled {
		t.Fatalf("err = %v", err)
	}
	if n := h.fake.callCount("Append"); n != 1 {
		t.Fatalf("calls = %d after a cancelled call, want 1", n)
	}
}

func TestFromStatus(t *testing.T) {
	plain := errors.New("plain")
	noInfo := status.Error(codes.Unavailable, "transport")
	otherDomain, _ := status.New(codes.NotFound, "nf").WithDetails(&errdetails.ErrorInfo{Reason: "NOT_FOUND", Domain: "example.com"})
	if FromStatus(nil) != nil {
		t.Fatal("FromStatus(nil) != nil")
	}
	for _, err := range []error{plain, noInfo, otherDomain.Err()} {
		if got := FromStatus(err); got != err {
			t.Fatalf("FromStatus(%v) = %v, want it unchanged", err, got)
		}
	}
	got := FromStatus(infoErr(t, codes.FailedPrecondition, sessionstore.ReasonLiveTurnOpen, "a live turn is open"))
	want := &sessionstore.Error{Reason: sessionstore.ReasonLiveTurnOpen, Message: "a live turn is open"}
	var se *sessionstore.Error
	if !errors.As(got, &se) || *se != *want {
		t.Fatalf("FromStatus = %#v, want %#v", got, want)
	}
	if !errors.Is(got, sessionstore.ErrLiveTurnOpen) {
		t.Fatal("errors.Is(…, ErrLiveTurnOpen) is false")
	}
}

func header(id string) *sessionpb.SessionHeader {
	cwd := "/w"
	return &sessionpb.SessionHeader{Version: 0, Id: id, CreatedAt: 42, Cwd: &cwd}
}

func viewParts() []*sessionpb.SessionViewPart {
	return []*sessionpb.SessionViewPart{
		{ViewPart: &sessionpb.SessionView{Header: header("s"), Events: []string{"e0", "e1"}, Revision: "rev", Repaired: true, NextSeq: 5},
			Lease: &sessionpb.Lease{SessionId: "s", Owner: "o", Epoch: 4, ExpiresAtUnixMs: 99}},
		{ViewPart: &sessionpb.SessionView{Events: []string{"e2"}}},
		{ViewPart: &sessionpb.SessionView{Events: []string{"e3", "e4"}}},
	}
}

func TestViewStreamsAssemble(t *testing.T) {
	h := start(t)
	h.fake.viewParts = viewParts()
	check := func(rpc string, v *sessionpb.SessionView) {
		t.Helper()
		want := &sessionpb.SessionView{Header: header("s"), Events: []string{"e0", "e1", "e2", "e3", "e4"}, Revision: "rev", Repaired: true, NextSeq: 5}
		if !proto.Equal(v, want) {
			t.Fatalf("%s view = %v, want %v", rpc, v, want)
		}
	}
	v, err := h.c.LoadStream(ctxT(t), &sessionpb.LoadRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	check("LoadStream", v)
	v, err = h.c.InspectStream(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	check("InspectStream", v)
	v, lease, err := h.c.PrepareStream(ctxT(t), &sessionpb.PrepareRequest{SessionId: "s", Owner: "o"})
	if err != nil {
		t.Fatal(err)
	}
	check("PrepareStream", v)
	if !proto.Equal(lease, &sessionpb.Lease{SessionId: "s", Owner: "o", Epoch: 4, ExpiresAtUnixMs: 99}) {
		t.Fatalf("lease = %v", lease)
	}

	// An empty stream is an error, not an empty view.
	h.fake.viewParts = nil
	if _, err := h.c.InspectStream(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"}); status.Code(err) != codes.Internal {
		t.Fatalf("empty stream: err = %v", err)
	}
}

func TestLoadStreamRetriesFromScratch(t *testing.T) {
	h := start(t)
	h.fake.viewParts = viewParts()
	h.fake.fail("LoadStream", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	h.fake.midStream["LoadStream"] = []error{infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "leadership lost")}
	v, err := h.c.LoadStream(ctxT(t), &sessionpb.LoadRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if got := len(v.GetEvents()); got != 5 {
		t.Fatalf("events = %v: parts of the broken attempt leaked into the view", v.GetEvents())
	}
	reqs := h.fake.requests("LoadStream")
	if len(reqs) != 3 {
		t.Fatalf("calls = %d, want 3", len(reqs))
	}
	id := reqs[0].(*sessionpb.LoadRequest).GetRequestId()
	for _, r := range reqs {
		if r.(*sessionpb.LoadRequest).GetRequestId() != id {
			t.Fatal("request id changed across stream retries")
		}
	}

	// A read stream broken mid-way by OUTCOME_UNKNOWN is not retried.
	h.fake.midStream["InspectStream"] = []error{infoErr(t, codes.Unavailable, sessionstore.ReasonOutcomeUnknown, "x")}
	if _, err := h.c.InspectStream(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"}); !errors.Is(err, sessionstore.ErrOutcomeUnknown) {
		t.Fatalf("err = %v", err)
	}
	if n := h.fake.callCount("InspectStream"); n != 1 {
		t.Fatalf("InspectStream calls = %d", n)
	}
}

func TestReadRawAssembles(t *testing.T) {
	h := start(t)
	h.fake.rawParts = []*sessionpb.ReadRawResponse{
		{Header: header("s"), Filename: "session.jsonl", Content: []byte("{\"v\":0}\n")},
		{Content: []byte("{\"seq\":0}\n")},
		{Content: []byte("{\"seq\":1}\n")},
	}
	h.fake.fail("ReadRaw", status.Error(codes.Unavailable, "transport"))
	h.fake.midStream["ReadRaw"] = []error{infoErr(t, codes.Unavailable, sessionstore.ReasonShuttingDown, "bye")}
	raw, err := h.c.ReadRaw(ctxT(t), &sessionpb.ReadRawRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	want := &sessionpb.ReadRawResponse{Header: header("s"), Filename: "session.jsonl", Content: []byte("{\"v\":0}\n{\"seq\":0}\n{\"seq\":1}\n")}
	if !proto.Equal(raw, want) {
		t.Fatalf("ReadRaw = %v, want %v", raw, want)
	}
	if n := h.fake.callCount("ReadRaw"); n != 3 {
		t.Fatalf("calls = %d, want 3", n)
	}
}

func TestReadFromCollects(t *testing.T) {
	h := start(t)
	h.fake.readParts = []*sessionpb.ReadFromResponse{
		{Header: header("s"), Events: []string{"a"}},
		{Events: []string{"b", "c"}},
	}
	got, err := h.c.ReadFrom(ctxT(t), &sessionpb.ReadFromRequest{SessionId: "s", FromSeq: 2})
	if err != nil {
		t.Fatal(err)
	}
	if want := (&sessionpb.ReadFromResponse{Header: header("s"), Events: []string{"a", "b", "c"}}); !proto.Equal(got, want) {
		t.Fatalf("ReadFrom = %v, want %v", got, want)
	}
}

func TestWatch(t *testing.T) {
	h := start(t)
	h.fake.watch = []*sessionpb.WatchResponse{
		{Events: []string{"a"}, Revision: "r1", AppliedIndex: 10},
		{Revision: "r1", AppliedIndex: 11},
	}
	h.fake.watchEnd = status.Error(codes.Unavailable, "no leader for two election timeouts")
	recv, err := h.c.Watch(ctxT(t), &sessionpb.WatchRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range h.fake.watch {
		m, err := recv()
		if err != nil || !proto.Equal(m, want) {
			t.Fatalf("message %d = %v, %v", i, m, err)
		}
	}
	if _, err := recv(); status.Code(err) != codes.Unavailable {
		t.Fatalf("end = %v", err)
	}
	if n := h.fake.callCount("Watch"); n != 1 {
		t.Fatalf("Watch retried: %d calls", n)
	}

	// Cancelling the context ends the watch.
	h.fake.watchEnd = nil
	ctx, cancel := context.WithCancel(context.Background())
	recv, err = h.c.Watch(ctx, &sessionpb.WatchRequest{SessionId: "s"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recv(); err != nil {
		t.Fatal(err)
	}
	cancel()
	for {
		_, err := recv()
		if err == nil {
			continue
		}
		if status.Code(err) != codes.Canceled || errors.Is(err, io.EOF) {
			t.Fatalf("after cancel: %v", err)
		}
		break
	}
}

func TestLocate(t *testing.T) {
	h := start(t)
	h.fake.fail("Locate", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	resp, err := h.c.Locate(ctxT(t), &sessionpb.LocateRequest{Header: header("s")})
	if err != nil || resp.GetKind() != "jsonl" || resp.GetPath() != "/data/s" {
		t.Fatalf("Locate = %v, %v", resp, err)
	}
}

func TestBackoff(t *testing.T) {
	c := New(nil, Options{InitialBackoff: 20 * time.Millisecond, MaxBackoff: time.Second})
	for attempt, full := range []time.Duration{20, 40, 80, 160, 320, 640, 1000, 1000, 1000} {
		full *= time.Millisecond
		for range 50 {
			if d := c.backoff(attempt); d < full/2 || d > full {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", attempt, d, full/2, full)
			}
		}
	}
	if d := DefaultOptions(); d.MaxAttempts != 8 || d.InitialBackoff != 20*time.Millisecond || d.MaxBackoff != time.Second {
		t.Fatalf("defaults = %+v", d)
	}
	if c := New(nil, Options{}); c.opts != DefaultOptions() {
		t.Fatalf("zero options = %+v", c.opts)
	}
	if err := (Options{MaxAttempts: -1}).Validate(); err == nil {
		t.Fatal("negative MaxAttempts accepted")
	}
}

// planFake serves the PlanMode service over the same recorded calls.
type planFake struct {
	*fake
	sessionpb.UnimplementedPlanModeServer
}

func (f planFake) Set(_ context.Context, req *sessionpb.PlanSetRequest) (*sessionpb.PlanSetResponse, error) {
	if err := f.enter("PlanMode.Set", req); err != nil {
		return nil, err
	}
	return &sessionpb.PlanSetResponse{Outcome: sessionpb.Outcome_QUEUED}, nil
}

func (f planFake) PreStep(_ context.Context, req *sessionpb.PlanPreStepRequest) (*sessionpb.PlanPreStepResponse, error) {
	if err := f.enter("PlanMode.PreStep", req); err != nil {
		return nil, err
	}
	return &sessionpb.PlanPreStepResponse{}, nil
}

func (f planFake) Command(_ context.Context, req *sessionpb.PlanCommandRequest) (*sessionpb.PlanCommandResponse, error) {
	if err := f.enter("PlanMode.Command", req); err != nil {
		return nil, err
	}
	return &sessionpb.PlanCommandResponse{Kind: "success"}, nil
}

func (f planFake) ExitPlan(_ context.Context, req *sessionpb.PlanExitRequest) (*sessionpb.PlanExitResponse, error) {
	if err := f.enter("PlanMode.ExitPlan", req); err != nil {
		return nil, err
	}
	return &sessionpb.PlanExitResponse{IsError: true}, nil
}

// ExitPlan without an answer only validates: it is a read and carries no
// request id.
func TestExitPlanValidationIsARead(t *testing.T) {
	h := start(t)
	h.fake.fail("PlanMode.ExitPlan", infoErr(t, codes.Unavailable, sessionstore.ReasonNoLeader, "no leader"))
	if _, err := h.c.ExitPlan(ctxT(t), &sessionpb.PlanExitRequest{SessionId: "s", Plan: "# p"}); err != nil {
		t.Fatal(err)
	}
	reqs := h.fake.requests("PlanMode.ExitPlan")
	if len(reqs) != 2 || reqs[1].(*sessionpb.PlanExitRequest).RequestId != "" {
		t.Fatalf("requests %v", reqs)
	}
}

// TestUnaryViewsFallBackToStreams: Load, Inspect and Prepare of a view too
// large for one message (TOO_LARGE, or gRPC's RESOURCE_EXHAUSTED without an
// ErrorInfo) return the whole view read with the stream form, sending the
// unary call's request (same request id); other refusals, QUOTA_EXCEEDED
// included, are returned as they are.
func TestUnaryViewsFallBackToStreams(t *testing.T) {
	type result struct {
		view  *sessionpb.SessionView
		lease *sessionpb.Lease
		err   error
	}
	calls := []struct {
		unary, stream string
		call          func(*Client) result
		requestID     func(proto.Message) string
	}{
		{"Load", "LoadStream", func(c *Client) result {
			v, err := c.Load(ctxT(t), &sessionpb.LoadRequest{SessionId: "s"})
			return result{view: v, err: err}
		}, func(m proto.Message) string { return m.(*sessionpb.LoadRequest).GetRequestId() }},
		{"Inspect", "InspectStream", func(c *Client) result {
			v, err := c.Inspect(ctxT(t), &sessionpb.InspectRequest{SessionId: "s"})
			return result{view: v, err: err}
		}, nil},
		{"Prepare", "PrepareStream", func(c *Client) result {
			v, l, err := c.Prepare(ctxT(t), &sessionpb.PrepareRequest{SessionId: "s", Owner: "o", TtlMs: 1000})
			return result{view: v, lease: l, err: err}
		}, func(m proto.Message) string { return m.(*sessionpb.PrepareRequest).GetRequestId() }},
	}
	for _, c := range calls {
		for _, e := range []struct {
			name     string
			err      func() error
			fallback bool
			reason   sessionstore.Reason // of the error returned without fallback
		}{
			{"TOO_LARGE", func() error {
				return infoErr(t, codes.ResourceExhausted, sessionstore.ReasonTooLarge, "view is 24000000 bytes; use the stream form")
			}, true, ""},
			{"RESOURCE_EXHAUSTED without ErrorInfo", func() error {
				return status.Error(codes.ResourceExhausted, "grpc: received message larger than max (24000000 vs. 16777216)")
			}, true, ""},
			{"QUOTA_EXCEEDED", func() error {
				return infoErr(t, codes.ResourceExhausted, sessionstore.ReasonQuotaExceeded, "too many read streams")
			}, false, sessionstore.ReasonQuotaExceeded},
			{"NOT_FOUND", func() error {
				return infoErr(t, codes.NotFound, sessionstore.ReasonNotFound, `session "s" not found`)
			}, false, sessionstore.ReasonNotFound},
		} {
			t.Run(c.unary+"/"+e.name, func(t *testing.T) {
				h := start(t)
				h.fake.viewParts = viewParts()
				h.fake.fail(c.unary, e.err())
				got := c.call(h.c)
				if !e.fallback {
					var se *sessionstore.Error
					if !errors.As(got.err, &se) || se.Reason != e.reason {
						t.Fatalf("%s: %v, want %s", c.unary, got.err, e.reason)
					}
					if n := h.fake.callCount(c.stream); n != 0 {
						t.Fatalf("%s called %s %d times after %s", c.unary, c.stream, n, e.name)
					}
					return
				}
				if got.err != nil {
					t.Fatalf("%s after %s: %v, want the view of %s", c.unary, e.name, got.err, c.stream)
				}
				if len(got.view.GetEvents()) != 5 || got.view.GetRevision() != "rev" {
					t.Fatalf("%s after %s: view %v, want the 5 events of %s", c.unary, e.name, got.view, c.stream)
				}
				if c.unary == "Prepare" && got.lease.GetEpoch() != 4 {
					t.Fatalf("Prepare after %s: lease %v, want the stream's", e.name, got.lease)
				}
				if n := h.fake.callCount(c.stream); n != 1 {
					t.Fatalf("%s calls = %d, want 1", c.stream, n)
				}
				if c.requestID != nil {
					first, again := c.requestID(h.fake.requests(c.unary)[0]), c.requestID(h.fake.requests(c.stream)[0])
					if first == "" || first != again {
						t.Fatalf("request id %q on %s, %q on %s: want the same", first, c.unary, again, c.stream)
					}
				}
			})
		}
	}
}
