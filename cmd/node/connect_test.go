package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"io"
	"net"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/rpc"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// Helpers and tests of the Connect protocol on the HTTP port (connect.go).
// Every helper name starts with "cj". The helpers speak the protocol by hand
// (docs/api.md "HTTP/JSON (Connect)"), so the tests pin the bytes on the
// wire; one test uses connect-go's own client to show a standard client
// reads them.

// cjError is Connect's error JSON.
type cjError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
	Details []struct {
		Type  string          `json:"type"`
		Value string          `json:"value"`
		Debug json.RawMessage `json:"debug"`
	} `json:"details"`
}

// cjEndStream is the JSON of a stream's last (flags 2) message.
type cjEndStream struct {
	Error    *cjError            `json:"error"`
	Metadata map[string][]string `json:"metadata"`
}

// reason decodes the ErrorInfo detail ("" and a failure when there is none
// or it is not ours).
func (e *cjError) reason(t *testing.T) string {
	t.Helper()
	for _, d := range e.Details {
		if d.Type != "google.rpc.ErrorInfo" {
			continue
		}
		// Connect sends base64 without padding; accept it with, too.
		b, err := base64.RawStdEncoding.DecodeString(strings.TrimRight(d.Value, "="))
		if err != nil {
			t.Fatalf("ErrorInfo value %q: %v", d.Value, err)
		}
		var info errdetails.ErrorInfo
		if err := proto.Unmarshal(b, &info); err != nil {
			t.Fatalf("ErrorInfo value: %v", err)
		}
		if info.Domain != rpc.ErrorDomain {
			t.Fatalf("ErrorInfo domain %q", info.Domain)
		}
		return info.Reason
	}
	return ""
}

// cjOutcome is what a call ended with, in Connect's terms.
type cjOutcome struct{ code, reason, message string }

// cjFromGRPC is a gRPC call's outcome in Connect's terms (the code names
// are the same codes, spelt in snake case).
func cjFromGRPC(err error) cjOutcome {
	if err == nil {
		return cjOutcome{code: "ok"}
	}
	st := status.Convert(err)
	return cjOutcome{code: connect.Code(st.Code()).String(), reason: string(auReason(err)), message: st.Message()}
}

func cjURL(n *testNode, method string) string { return "http://" + n.srv.httpAddr + method }

// cjUnary sends one unary call with a JSON body and returns the status,
// headers and body of the answer.
func cjUnary(ctx context.Context, t *testing.T, n *testNode, token, method string, body []byte) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, cjURL(n, method), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	return resp.StatusCode, resp.Header, out
}

// cjCall makes a unary call with req and decodes the answer into out, or
// returns the error.
func cjCall(ctx context.Context, t *testing.T, n *testNode, token, method string, req, out proto.Message) *cjError {
	t.Helper()
	body, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	code, hdr, resp := cjUnary(ctx, t, n, token, method, body)
	if ct := hdr.Get("Content-Type"); ct != "application/json" {
		t.Fatalf("%s: Content-Type %q (status %d, %s)", method, ct, code, resp)
	}
	if code != http.StatusOK {
		var e cjError
		if err := json.Unmarshal(resp, &e); err != nil || e.Code == "" {
			t.Fatalf("%s: status %d with %q, not a Connect error (%v)", method, code, resp, err)
		}
		if want := cjHTTPStatus[e.Code]; code != want {
			t.Errorf("%s: %s answered with HTTP %d, want %d", method, e.Code, code, want)
		}
		return &e
	}
	if err := protojson.Unmarshal(resp, out); err != nil {
		t.Fatalf("%s: %q: %v", method, resp, err)
	}
	return nil
}

// cjHTTPStatus is the Connect protocol's HTTP status of each error code.
var cjHTTPStatus = map[string]int{
	"canceled": 499, "unknown": 500, "invalid_argument": 400, "deadline_exceeded": 504, "not_found": 404,
	"already_exists": 409, "permission_denied": 403, "resource_exhausted": 429, "failed_precondition": 400,
	"aborted": 409, "out_of_range": 400, "unimplemented": 501, "internal": 500, "unavailable": 503,
	"data_loss": 500, "unauthenticated": 401,
}

// cjStream is an open server stream.
type cjStream struct {
	resp *http.Response
	br   *bufio.Reader
}

// cjOpen starts a server-streaming call: the request is one enveloped
// message.
func cjOpen(ctx context.Context, t *testing.T, client *http.Client, n *testNode, token, method string, req proto.Message) *cjStream {
	t.Helper()
	msg, err := protojson.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	body := append([]byte{0, 0, 0, 0, 0}, msg...)
	binary.BigEndian.PutUint32(body[1:5], uint32(len(msg)))
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, cjURL(n, method), bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	hreq.Header.Set("Content-Type", "application/connect+json")
	if token != "" {
		hreq.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := client.Do(hreq)
	if err != nil {
		t.Fatalf("%s: %v", method, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != http.StatusOK || resp.Header.Get("Content-Type") != "application/connect+json" {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s: status %d, Content-Type %q: %q", method, resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	return &cjStream{resp: resp, br: bufio.NewReader(resp.Body)}
}

// next reads one envelope: its flags and its JSON.
func (s *cjStream) next() (flags byte, msg []byte, err error) {
	var prefix [5]byte
	if _, err := io.ReadFull(s.br, prefix[:]); err != nil {
		return 0, nil, err
	}
	msg = make([]byte, binary.BigEndian.Uint32(prefix[1:]))
	if _, err := io.ReadFull(s.br, msg); err != nil {
		return 0, nil, err
	}
	return prefix[0], msg, nil
}

// recv decodes the next message into out, or returns the end of the stream
// (end true, and its error if any).
func (s *cjStream) recv(t *testing.T, out proto.Message) (end bool, e *cjError) {
	t.Helper()
	flags, msg, err := s.next()
	if err != nil {
		t.Fatalf("stream: %v (a stream must end with an end-stream message)", err)
	}
	if flags&2 != 0 {
		var es cjEndStream
		if err := json.Unmarshal(msg, &es); err != nil {
			t.Fatalf("end-stream message %q: %v", msg, err)
		}
		return true, es.Error
	}
	if flags != 0 {
		t.Fatalf("message flags %#x", flags)
	}
	if err := protojson.Unmarshal(msg, out); err != nil {
		t.Fatalf("stream message %q: %v", msg, err)
	}
	return false, nil
}

// end reads s to its end, decoding each message into out (and dropping it),
// and returns the error the stream ended with.
func (s *cjStream) end(t *testing.T, out proto.Message) *cjError {
	t.Helper()
	for {
		if end, e := s.recv(t, out); end {
			return e
		}
	}
}

// cjOutcomeOf runs m (auth_test.go's table of every rpc) over the HTTP port
// and returns how it ended; a Watch that was let in counts as ok at its
// first message.
func cjOutcomeOf(ctx context.Context, t *testing.T, n *testNode, token string, m auMethod) cjOutcome {
	t.Helper()
	outcome := func(e *cjError) cjOutcome {
		if e == nil {
			return cjOutcome{code: "ok"}
		}
		return cjOutcome{code: e.Code, reason: e.reason(t), message: e.Message}
	}
	if !m.stream {
		return outcome(cjCall(ctx, t, n, token, m.full, m.request, m.response()))
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s := cjOpen(ctx, t, http.DefaultClient, n, token, m.full, m.request)
	defer s.resp.Body.Close()
	for {
		end, e := s.recv(t, m.response())
		if end {
			return outcome(e)
		}
		if strings.HasSuffix(m.full, "/Watch") {
			return cjOutcome{code: "ok"}
		}
	}
}

// A session created, appended to, loaded, read and watched over HTTP/JSON,
// as the README's curl walkthrough does.
func TestConnect_Walkthrough(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	ctx := n.ctx()
	const P = "/sessionstore.v1.SessionPersistence/"

	// The bytes of the README's first call, unchanged.
	code, hdr, body := cjUnary(ctx, t, n, "", P+"Create",
		[]byte(`{"header":{"version":0,"id":"demo-1","createdAt":"1755600000000","cwd":"/home/u/proj"}}`))
	if code != 200 || hdr.Get("Content-Type") != "application/json" || len(hdr.Get(rpc.RequestIDKey)) != 16 {
		t.Fatalf("Create: %d %v %s", code, hdr, body)
	}
	var created sessionpb.CreateResponse
	if err := protojson.Unmarshal(body, &created); err != nil || !created.GetReadable() {
		t.Fatalf("Create: %s (%v)", body, err)
	}
	events := ctOneTurnLog()[:2]
	var appended sessionpb.AppendResponse
	if e := cjCall(ctx, t, n, "", P+"Append", &sessionpb.AppendRequest{SessionId: "demo-1", Events: events}, &appended); e != nil {
		t.Fatalf("Append: %+v", e)
	}
	if appended.NextSeq != 2 || appended.Revision == "" {
		t.Fatalf("Append: %v", &appended)
	}
	// 64-bit integers are JSON strings, as protojson (and Connect) write them.
	if _, _, body := cjUnary(ctx, t, n, "", P+"Append", []byte(`{"sessionId":"demo-1"}`)); !bytes.Contains(body, []byte(`"nextSeq":"2"`)) {
		t.Fatalf("empty Append: %s", body)
	}

	// Load commits the crash closers of the open turn, as over gRPC.
	var view sessionpb.SessionView
	if e := cjCall(ctx, t, n, "", P+"Load", &sessionpb.LoadRequest{SessionId: "demo-1"}, &view); e != nil {
		t.Fatalf("Load: %+v", e)
	}
	if !view.Repaired || len(view.Events) != 3 || view.Events[0] != events[0] {
		t.Fatalf("Load: %v", &view)
	}
	grpcView, err := n.Client.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "demo-1"})
	if err != nil || grpcView.Revision != view.Revision || len(grpcView.Events) != len(view.Events) {
		t.Fatalf("gRPC Inspect after the HTTP Load: %v %v", grpcView, err)
	}

	// A server stream: every message enveloped, then the end of the stream.
	s := cjOpen(ctx, t, http.DefaultClient, n, "", P+"ReadFrom", &sessionpb.ReadFromRequest{SessionId: "demo-1", FromSeq: 1})
	var got []string
	for {
		var m sessionpb.ReadFromResponse
		end, e := s.recv(t, &m)
		if end {
			if e != nil {
				t.Fatalf("ReadFrom ended with %+v", e)
			}
			break
		}
		got = append(got, m.Events...)
	}
	if len(got) != 2 || got[0] != events[1] {
		t.Fatalf("ReadFrom: %q", got)
	}
	// The binary encoding is served too.
	pbody, _ := proto.Marshal(&sessionpb.InspectRequest{SessionId: "demo-1"})
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cjURL(n, P+"Inspect"), bytes.NewReader(pbody))
	req.Header.Set("Content-Type", "application/proto")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	pout, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var pview sessionpb.SessionView
	if resp.StatusCode != 200 || proto.Unmarshal(pout, &pview) != nil || pview.Revision != view.Revision {
		t.Fatalf("Inspect with application/proto: %d %q", resp.StatusCode, pout)
	}
}

// The rest of the HTTP port is unchanged, only the three services are
// served, and only with the Connect protocol.
func TestConnect_MountedBesideTheHTTPPort(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	ctx := n.ctx()
	post := func(path, contentType string) int {
		req, _ := http.NewRequestWithContext(ctx, http.MethodPost, cjURL(n, path), strings.NewReader("{}"))
		req.Header.Set("Content-Type", contentType)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		path, contentType string
		want              int
	}{
		{"/sessionstore.v1.Cluster/Status", "application/json", 200},
		{"/sessionstore.v1.PlanMode/Get", "application/json; charset=utf-8", 400}, // reached: an empty session id is refused
		{"/sessionstore.v1.Cluster/Status", "application/grpc-web+json", 415},
		{"/sessionstore.v1.Cluster/Status", "text/plain", 415},
		{"/sessionstore.v1.Cluster/NoSuchMethod", "application/json", 404},
		{"/sessionstore.internal.v1.Forward/Calls", "application/connect+proto", 404},
		{"/grpc.health.v1.Health/Check", "application/json", 404},
		{"/grpc.reflection.v1.ServerReflection/ServerReflectionInfo", "application/connect+json", 404},
	} {
		if got := post(c.path, c.contentType); got != c.want {
			t.Errorf("POST %s (%s): %d, want %d", c.path, c.contentType, got, c.want)
		}
	}
	for _, path := range []string{"/healthz", "/readyz", "/metrics"} {
		resp, err := http.Get(cjURL(n, path))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Errorf("GET %s: %d", path, resp.StatusCode)
		}
		// The health check tells an HTTP client which node it reached and
		// the leader (the TypeScript client routes writes by them).
		if path == "/healthz" {
			node, leader := resp.Header.Get(sessionstore.HintNodeKey), resp.Header.Get(sessionstore.HintLeaderKey)
			if node != "test-node" || !strings.HasPrefix(leader, "test-node=") {
				t.Errorf("GET /healthz hints: node %q, leader %q; want test-node and test-node=<addr>", node, leader)
			}
		}
	}
	// HTTP/JSON calls are counted with the gRPC ones (the same interceptors).
	resp, err := http.Get(cjURL(n, "/metrics"))
	if err != nil {
		t.Fatal(err)
	}
	metrics, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if !bytes.Contains(metrics, []byte(`sessionstore_rpc_requests_total{code="OK",method="/sessionstore.v1.Cluster/Status"} 1`)) {
		t.Errorf("the HTTP/JSON Status call is not counted:\n%s", metrics)
	}
}

// Each class of error arrives as Connect's error JSON: the code, the
// message (the same text as over gRPC) and the ErrorInfo detail with the
// reason; on a stream, in the end-stream message.
func TestConnect_ErrorsCarryTheReason(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	ctx := n.ctx()
	const P = "/sessionstore.v1.SessionPersistence/"
	ctCreate(t, n, ctMeta("err-1", "/w"))
	ctAppend(t, n, "err-1", ctOneTurnLog()[:2]...)
	ctCreate(t, n, ctMeta("owned", "/w"))
	ctAppend(t, n, "owned", ctOneTurnLog()...)
	if _, _, err := n.Client.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "owned", Owner: "a", TtlMs: 60_000}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name   string
		reason sessionstore.Reason
		method string
		req    proto.Message
	}{
		{"seq mismatch", sessionstore.ReasonSeqMismatch, "Append", &sessionpb.AppendRequest{SessionId: "err-1", Events: ctOneTurnLog()[3:4]}},
		{"not found", sessionstore.ReasonNotFound, "Inspect", &sessionpb.InspectRequest{SessionId: "nobody"}},
		{"lease fenced", sessionstore.ReasonLeaseFenced, "Release", &sessionpb.ReleaseRequest{SessionId: "owned", LeaseEpoch: 7}},
		{"invalid argument", sessionstore.ReasonInvalidArgument, "Prepare", &sessionpb.PrepareRequest{SessionId: "err-1", Owner: "a", TtlMs: 1}},
		{"already exists", sessionstore.ReasonAlreadyExists, "Create", &sessionpb.CreateRequest{Header: ctMeta("err-1", "/other")}},
		{"not json", sessionstore.ReasonNotJSON, "Append", &sessionpb.AppendRequest{SessionId: "err-1", Events: []string{"{"}}},
		{"invalid session id", sessionstore.ReasonInvalidSessionID, "Create", &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{}}},
		{"too large", sessionstore.ReasonTooLarge, "Release", &sessionpb.ReleaseRequest{SessionId: "owned", RequestId: strings.Repeat("r", 300)}},
	}
	for _, c := range cases {
		full := P + c.method
		// The same request over gRPC, for the code and the text.
		err := n.Client.Conn().Invoke(ctx, full, c.req, cjResponseOf(t, full))
		want := cjFromGRPC(err)
		if want.reason != string(c.reason) {
			t.Fatalf("%s: over gRPC %v, want reason %s (the case is wrong)", c.name, err, c.reason)
		}
		e := cjCall(ctx, t, n, "", full, c.req, cjResponseOf(t, full))
		if e == nil {
			t.Fatalf("%s: no error over HTTP/JSON", c.name)
		}
		got := cjOutcome{code: e.Code, reason: e.reason(t), message: e.Message}
		if got != want {
			t.Errorf("%s: HTTP/JSON %+v, gRPC %+v", c.name, got, want)
		}
		if len(e.Details) != 1 || e.Details[0].Type != "google.rpc.ErrorInfo" {
			t.Errorf("%s: details %+v", c.name, e.Details)
		}
	}

	// A stream refused before its first message, and one ended mid-way.
	s := cjOpen(ctx, t, http.DefaultClient, n, "", P+"ReadRaw", &sessionpb.ReadRawRequest{SessionId: "nobody"})
	end, e := s.recv(t, &sessionpb.ReadRawResponse{})
	if !end || e == nil || e.Code != "not_found" || e.reason(t) != string(sessionstore.ReasonNotFound) {
		t.Fatalf("ReadRaw of nobody: end %v, %+v", end, e)
	}
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := cjOpen(wctx, t, http.DefaultClient, n, "", P+"Watch", &sessionpb.WatchRequest{SessionId: "err-1"})
	var first sessionpb.WatchResponse
	if end, e := w.recv(t, &first); end || len(first.Events) != 2 {
		t.Fatalf("Watch: first message %v (end %v, %+v)", &first, end, e)
	}
	if _, err := n.Client.Delete(ctx, &sessionpb.DeleteRequest{SessionId: "err-1"}); err != nil {
		t.Fatal(err)
	}
	if e := w.end(t, &sessionpb.WatchResponse{}); e == nil || e.Code != "not_found" || e.reason(t) != string(sessionstore.ReasonNotFound) {
		t.Fatalf("Watch of a deleted session ended with %+v", e)
	}

	// connect-go's own client reads the same errors.
	c := connect.NewClient[sessionpb.AppendRequest, sessionpb.AppendResponse](http.DefaultClient,
		cjURL(n, P+"Append"), connect.WithProtoJSON())
	_, err := c.CallUnary(ctx, connect.NewRequest(&sessionpb.AppendRequest{SessionId: "owned",
		Events: []string{`{"type":"turn/start","seq":6,"time":7,"data":{"turn":2}}`}})) // without the lease's epoch
	var ce *connect.Error
	if !errors.As(err, &ce) || ce.Code() != connect.CodeFailedPrecondition {
		t.Fatalf("connect-go Append: %v", err)
	}
	var reason string
	for _, d := range ce.Details() {
		if v, err := d.Value(); err == nil {
			if info, ok := v.(*errdetails.ErrorInfo); ok {
				reason = info.Reason
			}
		}
	}
	if reason != string(sessionstore.ReasonLeaseFenced) {
		t.Fatalf("connect-go Append: reason %q (%v)", reason, err)
	}
}

// cjResponseOf is a new response message of the full method name.
func cjResponseOf(t *testing.T, full string) proto.Message {
	t.Helper()
	for _, m := range auMethods(t, "x") {
		if m.full == full {
			return m.response()
		}
	}
	t.Fatalf("no method %s", full)
	return nil
}

// Authentication and permissions hold alike on both ports: every rpc,
// without a token, with a wrong one, with one for another prefix and with
// one lacking the permission, ends with the same code, reason and message
// over HTTP/JSON as over gRPC.
func TestConnect_AuthSameAsGRPC(t *testing.T) {
	n, _ := auNode(t, nil)
	ctx := n.ctx()
	admin := auAs(t, n, auAdmin)
	const id = "alice/s1"
	if _, err := admin.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")}); err != nil {
		t.Fatal(err)
	}
	if _, err := admin.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[:2]}); err != nil {
		t.Fatal(err)
	}
	before, err := admin.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	refused := map[string]int{}
	for _, token := range []string{"", "wrong-token-00000000000000000", auBob, auReader} {
		conn := auAs(t, n, token).Conn()
		for _, m := range auMethods(t, id) {
			cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
			want := cjFromGRPC(auCall(cctx, conn, m))
			got := cjOutcomeOf(cctx, t, n, token, m)
			cancel()
			if got != want {
				t.Errorf("token %.5q: %s: HTTP/JSON %+v, gRPC %+v", token, m.full, got, want)
			}
			if got.code == "unauthenticated" || got.code == "permission_denied" {
				refused[got.reason]++
			}
		}
	}
	// Every rpc was refused for the first three tokens, and the write and
	// admin ones for the reader.
	if refused[string(sessionstore.ReasonUnauthenticated)] < 2*25 || refused[string(sessionstore.ReasonPermissionDenied)] < 25+10 {
		t.Fatalf("refusals: %v", refused)
	}
	after, err := admin.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil || after.Revision != before.Revision {
		t.Fatalf("the session changed: %s → %v (%v)", before.Revision, after, err)
	}
}

// Watch sends its progress message over HTTP/JSON as over gRPC, flushed at
// once: with a short interval, several arrive before anything is appended,
// then the appended batch.
func TestConnect_WatchHeartbeats(t *testing.T) {
	t.Parallel()
	n := startTestNodeWith(t, "", func(c *serveConfig) { c.watchProgress = 20 * time.Millisecond })
	n.waitReady(true)
	ctx := n.ctx()
	ctCreate(t, n, ctMeta("hb", "/w"))
	ctAppend(t, n, "hb", ctOneTurnLog()[:1]...)
	s := cjOpen(ctx, t, http.DefaultClient, n, "", "/sessionstore.v1.SessionPersistence/Watch", &sessionpb.WatchRequest{SessionId: "hb"})
	var first sessionpb.WatchResponse
	if end, e := s.recv(t, &first); end || len(first.Events) != 1 {
		t.Fatalf("first message: %v (end %v, %+v)", &first, end, e)
	}
	for i := range 3 {
		var m sessionpb.WatchResponse
		if end, e := s.recv(t, &m); end || len(m.Events) != 0 || m.Revision != first.Revision || m.AppliedIndex < first.AppliedIndex {
			t.Fatalf("progress message %d: %v (end %v, %+v)", i, &m, end, e)
		}
	}
	ctAppend(t, n, "hb", ctOneTurnLog()[1:2]...)
	for {
		var m sessionpb.WatchResponse
		if end, e := s.recv(t, &m); end {
			t.Fatalf("watch ended: %+v", e)
		}
		if len(m.Events) > 0 {
			if m.Events[0] != ctOneTurnLog()[1] {
				t.Fatalf("appended batch: %q", m.Events)
			}
			break
		}
	}
}

// idleConn fails a read that waits longer than idle for data, as a client
// or proxy that cuts an idle body does (Node's fetch: 300 s).
type idleConn struct {
	net.Conn
	idle time.Duration
}

func (c idleConn) Read(p []byte) (int, error) {
	_ = c.Conn.SetReadDeadline(time.Now().Add(c.idle))
	return c.Conn.Read(p)
}

// A watch with nothing to report outlives Node's 300 s idle-body limit: a
// client that gives up on 30 s without a byte (the heartbeat's promise)
// still gets the batch appended after 310 s. Long: 5 minutes.
func TestConnect_WatchIdlePastNodeFetchLimit(t *testing.T) {
	if testing.Short() {
		t.Skip("keeps a watch idle for 310 s")
	}
	t.Parallel()
	n := startTestNode(t, "")
	ctCreate(t, n, ctMeta("idle", "/w"))
	ctAppend(t, n, "idle", ctOneTurnLog()[:1]...)
	const idle, quiet = 30 * time.Second, 310 * time.Second
	client := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return idleConn{Conn: c, idle: idle}, nil
	}}}
	ctx, cancel := context.WithTimeout(context.Background(), quiet+time.Minute)
	defer cancel()
	s := cjOpen(ctx, t, client, n, "", "/sessionstore.v1.SessionPersistence/Watch", &sessionpb.WatchRequest{SessionId: "idle"})
	start := time.Now()
	progress := 0
	appended := false
	for {
		var m sessionpb.WatchResponse
		if end, e := s.recv(t, &m); end {
			t.Fatalf("watch ended after %v: %+v", time.Since(start), e)
		}
		if len(m.Events) == 0 {
			progress++
		}
		if !appended && time.Since(start) > quiet {
			ctAppend(t, n, "idle", ctOneTurnLog()[1:2]...)
			appended = true
		}
		if appended && len(m.Events) == 1 && m.Events[0] == ctOneTurnLog()[1] {
			break
		}
	}
	t.Logf("%d progress messages over %v", progress, time.Since(start).Round(time.Second))
}

// With TLS on the HTTP port a client certificate listed in the token file
// is that principal over HTTP/JSON too, and calls travel over HTTP/2.
func TestConnectTLS_ClientCertificate(t *testing.T) {
	t.Parallel()
	dir := tlsCerts(t, []string{"n1"}, []string{"alice", "mallory"})
	tokens := auTokenFile(t, auCertTokens)
	ca := filepath.Join(dir, "ca.pem")
	n := startNode(t, nodeOpts{id: "n1", freePorts: true, dial: tlsDial(t, clientFlags{ca: ca, token: auAdmin}), tune: func(c *serveConfig) {
		tlsFiles(c, dir, "n1")
		c.Auth.TokenFile = tokens
	}})
	n.waitReady(true)
	ctx := n.ctx()
	create := func(name, id string) error {
		f := clientFlags{ca: ca}
		if name != "" {
			f.cert, f.key = filepath.Join(dir, "client-"+name+".pem"), filepath.Join(dir, "client-"+name+"-key.pem")
		}
		tlsConf, err := f.httpTLS()
		if err != nil {
			t.Fatal(err)
		}
		var proto int
		hc := &http.Client{Transport: cjProtoSeen{&http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}, &proto}}
		c := connect.NewClient[sessionpb.CreateRequest, sessionpb.CreateResponse](hc,
			"https://"+n.srv.httpAddr+"/sessionstore.v1.SessionPersistence/Create", connect.WithProtoJSON())
		_, err = c.CallUnary(ctx, connect.NewRequest(&sessionpb.CreateRequest{Header: ctMeta(id, "/w")}))
		if proto != 2 {
			t.Errorf("%s: HTTP/%d, want HTTP/2", name, proto)
		}
		return fromConnect(err)
	}
	if err := create("alice", "alice/c1"); err != nil {
		t.Fatalf("alice's create: %v", err)
	}
	for _, c := range []struct {
		name, id string
		want     error
	}{
		{"alice", "bob/c1", sessionstore.ErrPermissionDenied},
		{"mallory", "alice/c2", sessionstore.ErrUnauthenticated},
		{"", "alice/c3", sessionstore.ErrUnauthenticated},
	} {
		if err := create(c.name, c.id); !errors.Is(err, c.want) {
			t.Errorf("%q creating %s: %v, want %v", c.name, c.id, err, c.want)
		}
	}
}

// cjProtoSeen records the HTTP major version of each answer.
type cjProtoSeen struct {
	http.RoundTripper
	major *int
}

func (p cjProtoSeen) RoundTrip(r *http.Request) (*http.Response, error) {
	resp, err := p.RoundTripper.RoundTrip(r)
	if err == nil {
		*p.major = resp.ProtoMajor
	}
	return resp, err
}

// A node that stops ends its watches with SHUTTING_DOWN, over HTTP/JSON in
// the end-of-stream message and over gRPC as the stream's status, so
// watchers resume elsewhere instead of seeing a broken transport.
func TestConnect_WatchEndsWithShuttingDown(t *testing.T) {
	t.Parallel()
	n := startTestNode(t, "")
	ctx := n.ctx()
	ctCreate(t, n, ctMeta("stop", "/w"))
	ctAppend(t, n, "stop", ctOneTurnLog()[:1]...)
	s := cjOpen(ctx, t, http.DefaultClient, n, "", "/sessionstore.v1.SessionPersistence/Watch", &sessionpb.WatchRequest{SessionId: "stop"})
	var first sessionpb.WatchResponse
	if end, e := s.recv(t, &first); end {
		t.Fatalf("HTTP watch ended at once: %+v", e)
	}
	gc, err := client.Dial(ctx, n.srv.grpcAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer gc.Close()
	recv, err := gc.Watch(ctx, &sessionpb.WatchRequest{SessionId: "stop"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := recv(); err != nil {
		t.Fatalf("gRPC watch: %v", err)
	}
	closed := make(chan struct{})
	go func() { n.Close(); close(closed) }()
	if e := s.end(t, &sessionpb.WatchResponse{}); e == nil || e.Code != "unavailable" || e.reason(t) != string(sessionstore.ReasonShuttingDown) {
		t.Fatalf("HTTP watch of a stopping node ended with %+v", e)
	}
	for {
		_, err := recv()
		if err == nil {
			continue
		}
		if !errors.Is(err, sessionstore.ErrShuttingDown) {
			t.Fatalf("gRPC watch of a stopping node ended with %v", err)
		}
		break
	}
	<-closed
}
