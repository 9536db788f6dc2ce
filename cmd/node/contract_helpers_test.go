package main

// Helpers of contract_test.go (the acceptance tests of docs/contract.md run
// against a real node). Every name starts with "ct" so that other test files of
// this package cannot collide with them.

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// ctNode starts a fresh single-node cluster for one test, for the tests
// that restart their node or need an empty one. The test runs in parallel
// with the others: most of a node's start-up is waiting for its first
// election.
func ctNode(t *testing.T) *testNode {
	t.Helper()
	t.Parallel()
	return startTestNode(t, "")
}

// ctShared is one node shared by the contract tests that neither restart it
// nor depend on what else it holds (their session ids are distinct). Each
// user takes a reference before it turns parallel, so the node lives until
// the last user's cleanup, which stops it and removes its directory.
var ctShared struct {
	mu   sync.Mutex
	n    *testNode
	refs int
}

// ctSharedTB is the testing.TB of the shared node's boot: start-up failures
// go to the booting test, but the cleanup startTestNode registers is dropped
// (the last user of the node closes it).
type ctSharedTB struct{ testing.TB }

func (ctSharedTB) Cleanup(func()) {}

// ctSharedNode returns this test's handle on the shared node (its ctx,
// WaitArtifacts and failures belong to t) and makes t parallel.
func ctSharedNode(t *testing.T) *testNode {
	t.Helper()
	shared := ctAcquireShared(t)
	t.Cleanup(func() {
		ctShared.mu.Lock()
		defer ctShared.mu.Unlock()
		if ctShared.refs--; ctShared.refs == 0 {
			shared.t = t // close errors are reported to the last user
			shared.Close()
			if err := os.RemoveAll(shared.dir); err != nil {
				t.Errorf("remove %s: %v", shared.dir, err)
			}
			ctShared.n = nil
		}
	})
	t.Parallel() // only once the reference is taken and the lock released
	return &testNode{t: t, dir: shared.dir, srv: shared.srv, Client: shared.Client}
}

// ctAcquireShared takes a reference on the shared node, booting it first if
// needed.
func ctAcquireShared(t *testing.T) *testNode {
	t.Helper()
	ctShared.mu.Lock()
	defer ctShared.mu.Unlock()
	if ctShared.n == nil {
		dir, err := os.MkdirTemp("", "contract-node-")
		if err != nil {
			t.Fatalf("temp dir: %v", err)
		}
		ctShared.n = startTestNode(ctSharedTB{t}, dir)
	}
	ctShared.refs++
	return ctShared.n
}

func ctStr(s string) *string { return &s }

// ctMeta is the reference fixture meta(id, cwd?) of docs/contract.md:
// {version: 0, id, createdAt: 1000, cwd?}. An empty cwd means none.
func ctMeta(id, cwd string) *sessionpb.SessionHeader {
	h := &sessionpb.SessionHeader{Version: 0, Id: id, CreatedAt: 1000}
	if cwd != "" {
		h.Cwd = ctStr(cwd)
	}
	return h
}

// ctEv renders an event envelope in the key order the live Session.append
// produces (type, seq, time, data); data is raw JSON.
func ctEv(typ string, seq, time int64, data string) string {
	return `{"type":` + strconv.Quote(typ) + `,"seq":` + strconv.FormatInt(seq, 10) +
		`,"time":` + strconv.FormatInt(time, 10) + `,"data":` + data + `}`
}

// ctSurf is ctEv for a surface event appended with surfaceOp "append".
func ctSurf(typ string, seq, time int64, data string) string {
	return strings.TrimSuffix(ctEv(typ, seq, time, data), "}") + `,"surfaceOp":"append"}`
}

// ctOneTurnLog is the reference fixture oneTurnLog() (docs/contract.md):
// six events, seqs 0…5, times 1…6.
func ctOneTurnLog() []string {
	return []string{
		ctEv("turn/start", 0, 1, `{"turn":1}`),
		ctSurf("user/message", 1, 2, `{"id":"one-turn-user","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		ctEv("step/start", 2, 3, `{"turn":1,"step":1}`),
		ctSurf("assistant/message", 3, 4, `{"turn":1,"step":1,"message":{"id":"one-turn-assistant","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"mock","model":"mock"}}}`),
		ctEv("step/end", 4, 5, `{"turn":1,"step":1}`),
		ctEv("turn/end", 5, 6, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
}

// The closer texts of docs/events.md#crash-repair.
const (
	ctTextOutcomeUnknown = "The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."
	ctTextNotStarted     = "The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."
)

// ctToolResultCloser is the exact synthetic tool/result of
// docs/events.md#crash-repair step 2; callSeq < 0 means the call was never recorded by a tool/call.
// callID is written as is (no escaping: tests use ids that need none in
// JSON.stringify, which escapes only '"', '\\' and control characters).
func ctToolResultCloser(seq, time, turn, step int64, callID string, callSeq int64) string {
	text, errJSON := ctTextNotStarted, `{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}`
	if callSeq >= 0 {
		text, errJSON = ctTextOutcomeUnknown, `{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}`
	}
	s := fmt.Sprintf(`{"type":"tool/result","seq":%d,"time":%d,"data":{"turn":%d,"step":%d,"message":{"id":"interrupted-tool-result-%s-%d","role":"user","source":{"kind":"tool","callId":"%s"},"content":[{"type":"tool-result","toolCallId":"%s","isError":true,"content":[{"type":"text","text":"%s"}]}]},"error":%s},"surfaceOp":"append"`,
		seq, time, turn, step, callID, seq, callID, callID, text, errJSON)
	if callSeq >= 0 {
		s += fmt.Sprintf(`,"sourceEventSeqs":[%d]`, callSeq)
	}
	return s + "}"
}

// ctStepEndCloser and ctTurnEndCloser are the closers of docs/events.md#crash-repair steps 3 and 4.
func ctStepEndCloser(seq, time, turn, step int64) string {
	return fmt.Sprintf(`{"type":"step/end","seq":%d,"time":%d,"data":{"turn":%d,"step":%d}}`, seq, time, turn, step)
}

func ctTurnEndCloser(seq, time, turn int64) string {
	return fmt.Sprintf(`{"type":"turn/end","seq":%d,"time":%d,"data":{"turn":%d,"reason":{"kind":"interrupted"}}}`, seq, time, turn)
}

// ctCreate registers a session and fails the test on error.
func ctCreate(t *testing.T, n *testNode, h *sessionpb.SessionHeader) {
	t.Helper()
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h}); err != nil {
		t.Fatalf("Create(%q): %v", h.GetId(), err)
	}
}

// ctCreateRef registers a session under the reference's write rules
// (VALIDATION_REFERENCE), which accept headers a read refuses, and fails the
// test on error.
func ctCreateRef(t *testing.T, n *testNode, h *sessionpb.SessionHeader) *sessionpb.CreateResponse {
	t.Helper()
	resp, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h, Validation: sessionpb.Validation_VALIDATION_REFERENCE})
	if err != nil {
		t.Fatalf("Create(%q, reference): %v", h.GetId(), err)
	}
	return resp
}

// ctAppendRef appends one batch under the reference's write rules and fails
// the test on error.
func ctAppendRef(t *testing.T, n *testNode, id string, events ...string) *sessionpb.AppendResponse {
	t.Helper()
	resp, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: events, Validation: sessionpb.Validation_VALIDATION_REFERENCE})
	if err != nil {
		t.Fatalf("Append(%q, %d events, reference): %v", id, len(events), err)
	}
	return resp
}

// ctWantUnreadable checks an answer's readability: readable false, with the
// reason and message a read of the log fails with.
func ctWantUnreadable(t *testing.T, what string, readable bool, reason, message string, wantReason sessionstore.Reason, wantMessage string) {
	t.Helper()
	if readable || reason != string(wantReason) || message != wantMessage {
		t.Errorf("%s: readable=%v %s %q, want readable=false %s %q", what, readable, reason, message, wantReason, wantMessage)
	}
}

// ctAppend appends one batch and fails the test on error.
func ctAppend(t *testing.T, n *testNode, id string, events ...string) *sessionpb.AppendResponse {
	t.Helper()
	resp, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: events})
	if err != nil {
		t.Fatalf("Append(%q, %d events): %v", id, len(events), err)
	}
	return resp
}

// ctTryAppend appends one batch and returns the error.
func ctTryAppend(t *testing.T, n *testNode, id string, events ...string) (*sessionpb.AppendResponse, error) {
	t.Helper()
	return n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: events})
}

func ctLoad(t *testing.T, n *testNode, id string) *sessionpb.SessionView {
	t.Helper()
	v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
	if err != nil {
		t.Fatalf("Load(%q): %v", id, err)
	}
	return v
}

func ctInspect(t *testing.T, n *testNode, id string) *sessionpb.SessionView {
	t.Helper()
	v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
	if err != nil {
		t.Fatalf("Inspect(%q): %v", id, err)
	}
	return v
}

func ctReadFrom(t *testing.T, n *testNode, id string, from int64) *sessionpb.ReadFromResponse {
	t.Helper()
	r, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id, FromSeq: from})
	if err != nil {
		t.Fatalf("ReadFrom(%q, %d): %v", id, from, err)
	}
	return r
}

func ctReadRaw(t *testing.T, n *testNode, id string) *sessionpb.ReadRawResponse {
	t.Helper()
	r, err := n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadRaw(%q): %v", id, err)
	}
	return r
}

// ctListed reports whether id is in List and in ListSnapshots (both are
// checked and must agree), and returns its ListSnapshots revision.
func ctListed(t *testing.T, n *testNode, id string) (bool, string) {
	t.Helper()
	l, err := n.Client.List(n.ctx(), &sessionpb.ListRequest{})
	if err != nil {
		t.Fatalf("List: %v", err)
	}
	inList := slices.ContainsFunc(l.GetHeaders(), func(h *sessionpb.SessionHeader) bool { return h.GetId() == id })
	s, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{})
	if err != nil {
		t.Fatalf("ListSnapshots: %v", err)
	}
	inSnaps, rev := false, ""
	for _, sn := range s.GetSnapshots() {
		if sn.GetHeader().GetId() == id {
			inSnaps, rev = true, sn.GetRevision()
		}
	}
	if inList != inSnaps {
		t.Fatalf("session %q: in List = %v but in ListSnapshots = %v", id, inList, inSnaps)
	}
	return inList, rev
}

// ctRevision is the ListSnapshots revision of a listed session.
func ctRevision(t *testing.T, n *testNode, id string) string {
	t.Helper()
	ok, rev := ctListed(t, n, id)
	if !ok {
		t.Fatalf("session %q is not listed", id)
	}
	if rev == "" {
		t.Fatalf("session %q is listed with an empty revision", id)
	}
	return rev
}

// ctDomainErr asserts err is a store error with the given reason and returns it.
func ctDomainErr(t *testing.T, what string, err error, reason sessionstore.Reason) *sessionstore.Error {
	t.Helper()
	if err == nil {
		t.Fatalf("%s: got success, want a %s error", what, reason)
	}
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		t.Fatalf("%s: got %T %v, want a *sessionstore.Error with reason %s", what, err, err, reason)
	}
	if se.Reason != reason {
		t.Fatalf("%s: got reason %s (%q), want %s", what, se.Reason, se.Message, reason)
	}
	return se
}

// ctWantErr asserts err has the reason and exactly the message.
func ctWantErr(t *testing.T, what string, err error, reason sessionstore.Reason, msg string) {
	t.Helper()
	se := ctDomainErr(t, what, err, reason)
	if se.Message != msg {
		t.Errorf("%s: got message\n  %q\nwant\n  %q", what, se.Message, msg)
	}
}

// ctWantErrContains asserts err has the reason and a message containing sub.
func ctWantErrContains(t *testing.T, what string, err error, reason sessionstore.Reason, sub string) *sessionstore.Error {
	t.Helper()
	se := ctDomainErr(t, what, err, reason)
	if !strings.Contains(se.Message, sub) {
		t.Errorf("%s: got message %q, want it to contain %q", what, se.Message, sub)
	}
	return se
}

// ctRaw is the generated stub on the node's connection, for the checks that
// need the gRPC status code itself (the client keeps only reason and text).
func ctRaw(n *testNode) sessionpb.SessionPersistenceClient {
	return sessionpb.NewSessionPersistenceClient(n.Client.Conn())
}

// ctStatus splits a raw gRPC error into its code and its store error (nil
// when it carries no ErrorInfo of the store).
func ctStatus(err error) (codes.Code, *sessionstore.Error) {
	code := status.Code(err)
	var se *sessionstore.Error
	if !errors.As(client.FromStatus(err), &se) {
		se = nil
	}
	return code, se
}

// ctParse decodes one event (numbers as json.Number).
func ctParse(t *testing.T, ev string) map[string]any {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(ev))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		t.Fatalf("event is not a JSON object: %v\n%s", err, ev)
	}
	return m
}

// ctGet walks a decoded JSON value along object keys and array indexes.
func ctGet(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		case int:
			a, ok := v.([]any)
			if !ok || k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

func ctTypes(t *testing.T, events []string) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, ev := range events {
		out[i], _ = ctParse(t, ev)["type"].(string)
	}
	return out
}

func ctSeqs(t *testing.T, events []string) []int64 {
	t.Helper()
	out := make([]int64, len(events))
	for i, ev := range events {
		n, _ := ctParse(t, ev)["seq"].(json.Number)
		out[i], _ = n.Int64()
	}
	return out
}

func ctRange(from, to int64) []int64 {
	var out []int64
	for s := from; s <= to; s++ {
		out = append(out, s)
	}
	return out
}

// ctJSONEq compares a decoded value with a JSON literal structurally.
func ctJSONEq(t *testing.T, what string, got any, want string) {
	t.Helper()
	d := json.NewDecoder(strings.NewReader(want))
	d.UseNumber()
	var w any
	if err := d.Decode(&w); err != nil {
		t.Fatalf("%s: bad want literal %q: %v", what, want, err)
	}
	if !reflect.DeepEqual(got, w) {
		gb, _ := json.Marshal(got)
		t.Errorf("%s: got %s, want %s", what, gb, want)
	}
}

// ctEqualEvents compares event texts byte for byte, and shows both lists
// side by side when they differ.
func ctEqualEvents(t *testing.T, what string, got, want []string) {
	t.Helper()
	if slices.Equal(got, want) {
		return
	}
	var b strings.Builder
	for i := 0; i < max(len(got), len(want)); i++ {
		g, w := "<none>", "<none>"
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		mark := " "
		if g != w {
			mark = "≠"
		}
		fmt.Fprintf(&b, "\n%s %d got  %s\n  %d want %s", mark, i, g, i, w)
	}
	t.Errorf("%s: got %d events, want %d:%s", what, len(got), len(want), b.String())
}

// ctInspectThenLoad runs the cold-repair protocol of docs/events.md#crash-repair on
// a session whose stored log is exactly stored (current-shaped events, so the
// views carry them verbatim) and whose open turn needs exactly closers:
// Inspect adds the closers in memory only (revision unchanged, a repeat is
// identical, ReadFrom shows no closers), Load commits exactly those bytes
// (repaired, new revision), and a second Load changes nothing.
func ctInspectThenLoad(t *testing.T, n *testNode, id string, stored, closers []string) *sessionpb.SessionView {
	t.Helper()
	balanced := append(slices.Clone(stored), closers...)
	next := int64(len(stored))
	rev0 := ctRevision(t, n, id)

	insp := ctInspect(t, n, id)
	ctEqualEvents(t, "Inspect events", insp.GetEvents(), balanced)
	if insp.GetRevision() != rev0 {
		t.Errorf("Inspect revision: got %q, want the listed %q", insp.GetRevision(), rev0)
	}
	if insp.GetRepaired() {
		t.Errorf("Inspect repaired: got true, want false (Inspect commits nothing)")
	}
	if insp.GetNextSeq() != next {
		t.Errorf("Inspect next_seq: got %d, want %d (the closers are not stored)", insp.GetNextSeq(), next)
	}
	insp2 := ctInspect(t, n, id)
	ctEqualEvents(t, "second Inspect events", insp2.GetEvents(), insp.GetEvents())
	if insp2.GetRevision() != rev0 {
		t.Errorf("second Inspect revision: got %q, want %q", insp2.GetRevision(), rev0)
	}
	ctEqualEvents(t, "ReadFrom(0) after Inspect", ctReadFrom(t, n, id, 0).GetEvents(), stored)
	if got := ctRevision(t, n, id); got != rev0 {
		t.Errorf("listed revision after Inspect: got %q, want %q", got, rev0)
	}

	load := ctLoad(t, n, id)
	ctEqualEvents(t, "Load events", load.GetEvents(), balanced)
	if !load.GetRepaired() {
		t.Errorf("Load repaired: got false, want true")
	}
	if load.GetRevision() == rev0 || load.GetRevision() == "" {
		t.Errorf("Load revision: got %q, want a new revision (was %q)", load.GetRevision(), rev0)
	}
	if want := int64(len(balanced)); load.GetNextSeq() != want {
		t.Errorf("Load next_seq: got %d, want %d", load.GetNextSeq(), want)
	}
	if got := ctRevision(t, n, id); got != load.GetRevision() {
		t.Errorf("listed revision after Load: got %q, want Load's %q", got, load.GetRevision())
	}
	ctEqualEvents(t, "ReadFrom(0) after Load", ctReadFrom(t, n, id, 0).GetEvents(), balanced)

	again := ctLoad(t, n, id)
	if again.GetRepaired() {
		t.Errorf("second Load repaired: got true, want false")
	}
	if again.GetRevision() != load.GetRevision() {
		t.Errorf("second Load revision: got %q, want %q", again.GetRevision(), load.GetRevision())
	}
	ctEqualEvents(t, "second Load events", again.GetEvents(), balanced)
	return load
}

// ctRecordedHeader is the header line of a recorded JSONL log.
type ctRecordedHeader struct {
	Type            string  `json:"type"`
	Version         int32   `json:"version"`
	ID              string  `json:"id"`
	CreatedAt       int64   `json:"createdAt"`
	Cwd             *string `json:"cwd"`
	ParentSession   *string `json:"parentSession"`
	SeedLength      *int64  `json:"seedLength"`
	Origin          *string `json:"origin"`
	DelegationDepth *int32  `json:"delegationDepth"`
	AgentPreset     *string `json:"agentPreset"`
}

// ctPackedRow is a packed chunk row (docs/events.md#packed-rows); strings and
// numbers stay raw so that members keep the recorded bytes.
type ctPackedRow struct {
	Type  string `json:"type"`
	Seq0  int64  `json:"seq0"`
	Time0 int64  `json:"time0"`
	Data  struct {
		Turn  json.RawMessage   `json:"turn"`
		Step  json.RawMessage   `json:"step"`
		Index json.RawMessage   `json:"index"`
		DT    []int64           `json:"dt"`
		Texts []json.RawMessage `json:"texts"`
		ID    json.RawMessage   `json:"id"`
		Name  json.RawMessage   `json:"name"`
		Args  []json.RawMessage `json:"args"`
	} `json:"data"`
}

// ctExpandRow decodes a packed row into its assistant/chunk events: member k
// has seq seq0+k and time time0+dt[0]+…+dt[k-1].
func ctExpandRow(line string) ([]string, error) {
	var r ctPackedRow
	if err := json.Unmarshal([]byte(line), &r); err != nil {
		return nil, err
	}
	var chunkType string
	var members []json.RawMessage
	switch r.Type {
	case "text-chunks":
		chunkType, members = "text-delta", r.Data.Texts
	case "reasoning-chunks":
		chunkType, members = "reasoning-delta", r.Data.Texts
	case "tool-call-chunks":
		members = r.Data.Args
	default:
		return nil, fmt.Errorf("not a packed row: %q", r.Type)
	}
	if len(r.Data.DT) != len(members)-1 {
		return nil, fmt.Errorf("%s row at seq0 %d: %d members but %d time gaps", r.Type, r.Seq0, len(members), len(r.Data.DT))
	}
	out := make([]string, len(members))
	tm := r.Time0
	for k, m := range members {
		if k > 0 {
			tm += r.Data.DT[k-1]
		}
		var chunk string
		if r.Type == "tool-call-chunks" {
			chunk = `{"type":"tool-call-delta","index":` + string(r.Data.Index) + `,"id":` + string(r.Data.ID)
			if r.Data.Name != nil {
				chunk += `,"name":` + string(r.Data.Name)
			}
			chunk += `,"argumentsDelta":` + string(m) + `}`
		} else {
			chunk = `{"type":"` + chunkType + `","index":` + string(r.Data.Index) + `,"text":` + string(m) + `}`
		}
		out[k] = ctEv("assistant/chunk", r.Seq0+int64(k), tm,
			`{"turn":`+string(r.Data.Turn)+`,"step":`+string(r.Data.Step)+`,"chunk":`+chunk+`}`)
	}
	return out, nil
}

// ctReadRecorded parses a recorded raw JSONL log into its header and its
// logical events (packed rows expanded).
func ctReadRecorded(path string) (*sessionpb.SessionHeader, []string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 0, 1<<20), 16<<20)
	if !sc.Scan() {
		return nil, nil, fmt.Errorf("%s: no header line", path)
	}
	var h ctRecordedHeader
	if err := json.Unmarshal(sc.Bytes(), &h); err != nil || h.Type != "session" {
		return nil, nil, fmt.Errorf("%s: bad header line (%v)", path, err)
	}
	hdr := &sessionpb.SessionHeader{Version: h.Version, Id: h.ID, CreatedAt: h.CreatedAt, Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin,
		DelegationDepth: h.DelegationDepth, AgentPreset: h.AgentPreset}
	var events []string
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		var probe struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(line), &probe); err != nil {
			return nil, nil, fmt.Errorf("%s: line %d: %v", path, len(events)+2, err)
		}
		if strings.HasSuffix(probe.Type, "-chunks") {
			ms, err := ctExpandRow(line)
			if err != nil {
				return nil, nil, fmt.Errorf("%s: %v", path, err)
			}
			events = append(events, ms...)
			continue
		}
		events = append(events, line)
	}
	return hdr, events, sc.Err()
}

// ctZstdFrame is one frame located structurally in a zstd file (RFC 8878).
type ctZstdFrame struct {
	Start, End int
	Checksum   bool // Content_Checksum_flag
}

// ctZstdFrames locates the frames of a zstd file without decompressing them,
// as docs/events.md#zstd describes (the writer emits no skippable frames
// or dictionaries); a truncated or malformed file is an error.
func ctZstdFrames(b []byte) ([]ctZstdFrame, error) {
	var out []ctZstdFrame
	p := 0
	for p < len(b) {
		start := p
		if len(b)-p < 5 || binary.LittleEndian.Uint32(b[p:]) != 0xFD2FB528 {
			return out, fmt.Errorf("no zstd frame magic at byte %d", p)
		}
		p += 4
		fhd := b[p]
		p++
		if fhd&0x08 != 0 {
			return out, fmt.Errorf("reserved frame-header bit at byte %d", p-1)
		}
		single := fhd&0x20 != 0
		if !single {
			p++ // window descriptor
		}
		p += [4]int{0, 1, 2, 4}[fhd&3] // dictionary id
		fcs := [4]int{0, 2, 4, 8}[fhd>>6]
		if fhd>>6 == 0 && single {
			fcs = 1
		}
		p += fcs
		for {
			if p+3 > len(b) {
				return out, fmt.Errorf("frame at byte %d is truncated", start)
			}
			bh := int(b[p]) | int(b[p+1])<<8 | int(b[p+2])<<16
			p += 3
			last, typ, size := bh&1 == 1, (bh>>1)&3, bh>>3
			switch typ {
			case 0, 2:
				p += size
			case 1:
				p++
			default:
				return out, fmt.Errorf("reserved block type at byte %d", p-3)
			}
			if p > len(b) {
				return out, fmt.Errorf("frame at byte %d is truncated", start)
			}
			if last {
				break
			}
		}
		checksum := fhd&0x04 != 0
		if checksum {
			p += 4
		}
		if p > len(b) {
			return out, fmt.Errorf("frame at byte %d is truncated", start)
		}
		out = append(out, ctZstdFrame{Start: start, End: p, Checksum: checksum})
	}
	return out, nil
}

// ctZstdPath finds Debian's zstd: a test that needs it fails in CI and is
// skipped elsewhere when it is missing.
func ctZstdPath(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("zstd")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("zstd is not installed (apt-get install zstd): %v", err)
		}
		t.Skipf("zstd is not installed: %v", err)
	}
	return p
}

// ctZstdDecode runs `zstd -d -c` on a file and returns its output.
func ctZstdDecode(t *testing.T, zstd, path string) []byte {
	t.Helper()
	var stderr bytes.Buffer
	cmd := exec.Command(zstd, "-q", "-d", "-c", path)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("zstd -d -c %s: %v: %s", path, err, stderr.String())
	}
	return out
}
