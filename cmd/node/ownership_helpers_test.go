package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf16"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// Helpers of ownership_test.go. Every name starts with "ow" (other test files
// of this package use other prefixes).

// owMeta is the reference fixture meta(id, cwd?) (docs/contract.md):
// {version: 0, id, createdAt: 1000, cwd?}.
func owMeta(id string, cwd ...string) *sessionpb.SessionHeader {
	h := &sessionpb.SessionHeader{Version: 0, Id: id, CreatedAt: 1000}
	if len(cwd) > 0 {
		c := cwd[0]
		h.Cwd = &c
	}
	return h
}

// owOneTurnLog is the reference fixture oneTurnLog() (docs/contract.md):
// six events, seqs 0…5, times 1…6, in the live loop's key order.
func owOneTurnLog() []string {
	return []string{
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`,
		`{"type":"user/message","seq":1,"time":2,"data":{"id":"one-turn-user","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}},"surfaceOp":"append"}`,
		`{"type":"step/start","seq":2,"time":3,"data":{"turn":1,"step":1}}`,
		`{"type":"assistant/message","seq":3,"time":4,"data":{"turn":1,"step":1,"message":{"id":"one-turn-assistant","role":"assistant","content":[{"type":"text","text":"hello"}],"source":{"kind":"model","provider":"mock","model":"mock"}}},"surfaceOp":"append"}`,
		`{"type":"step/end","seq":4,"time":5,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":5,"time":6,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
}

// owEvent renders one event in the envelope order type, seq, time, data.
func owEvent(typ string, seq, tm int64, data string) string {
	return fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s}`, typ, seq, tm, data)
}

func owTurnStart(seq, turn int64) string {
	return owEvent("turn/start", seq, seq+1, fmt.Sprintf(`{"turn":%d}`, turn))
}

func owTurnEnd(seq, turn int64) string {
	return owEvent("turn/end", seq, seq+1, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
}

// owOpenTurn is turn/start{turn} at seq and step/start{turn,1} at seq+1
// (times seq+1, seq+2), the interrupted tail of test C3.
func owOpenTurn(seq, turn int64) []string {
	return []string{
		owTurnStart(seq, turn),
		owEvent("step/start", seq+1, seq+2, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)),
	}
}

// owOpenTurnClosers are the exact closers of owOpenTurn(seq, turn)
// (docs/events.md#crash-repair): step/end then turn/end {interrupted}, both at the
// time of the last real event.
func owOpenTurnClosers(seq, turn int64) []string {
	tm := seq + 2
	return []string{
		owEvent("step/end", seq+2, tm, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)),
		owEvent("turn/end", seq+3, tm, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"interrupted"}}`, turn)),
	}
}

// owConcat joins event lists.
func owConcat(lists ...[]string) []string {
	var out []string
	for _, l := range lists {
		out = append(out, l...)
	}
	return out
}

// owCreate registers meta(id) and fails the test on error.
func owCreate(t *testing.T, n *testNode, h *sessionpb.SessionHeader) {
	t.Helper()
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h}); err != nil {
		t.Fatalf("Create(%q): %v", h.GetId(), err)
	}
}

// owAppend appends events and fails the test on error.
func owAppend(t *testing.T, n *testNode, id string, epoch uint64, events ...string) *sessionpb.AppendResponse {
	t.Helper()
	resp, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: events, LeaseEpoch: epoch})
	if err != nil {
		t.Fatalf("Append(%q, epoch %d, %d events): %v", id, epoch, len(events), err)
	}
	return resp
}

// owSession creates meta(id) and appends events (epoch 0) when there are any.
func owSession(t *testing.T, n *testNode, id string, events ...string) *sessionpb.AppendResponse {
	t.Helper()
	owCreate(t, n, owMeta(id))
	if len(events) == 0 {
		return nil
	}
	return owAppend(t, n, id, 0, events...)
}

// owPrepare takes a lease and fails the test on error.
func owPrepare(t *testing.T, n *testNode, id, owner string, ttl time.Duration) (*sessionpb.SessionView, *sessionpb.Lease) {
	t.Helper()
	v, l, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: owner, TtlMs: ttl.Milliseconds()})
	if err != nil {
		t.Fatalf("Prepare(%q, owner %q): %v", id, owner, err)
	}
	if l == nil {
		t.Fatalf("Prepare(%q, owner %q): no lease in the response", id, owner)
	}
	return v, l
}

// owStored is every stored event of a session (ReadFrom 0).
func owStored(t *testing.T, n *testNode, id string) []string {
	t.Helper()
	r, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadFrom(%q, 0): %v", id, err)
	}
	return r.GetEvents()
}

// owRevision is the session's revision as ListSnapshots reports it ("" when
// the session is not listed).
func owRevision(t *testing.T, n *testNode, id string) string {
	t.Helper()
	for _, s := range owListAllSnapshots(t, n, "", 0) {
		if s.GetHeader().GetId() == id {
			return s.GetRevision()
		}
	}
	return ""
}

// owListAll pages through List and returns every header in order.
func owListAll(t *testing.T, n *testNode, cwdPrefix string, pageSize int32) []*sessionpb.SessionHeader {
	t.Helper()
	var out []*sessionpb.SessionHeader
	token := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("List: more than 1000 pages; the page token does not advance")
		}
		r, err := n.Client.List(n.ctx(), &sessionpb.ListRequest{PageSize: pageSize, PageToken: token, CwdPrefix: cwdPrefix})
		if err != nil {
			t.Fatalf("List(page %d): %v", page, err)
		}
		if pageSize > 0 && int32(len(r.GetHeaders())) > pageSize {
			t.Errorf("List page %d: got %d headers, want at most page_size %d", page, len(r.GetHeaders()), pageSize)
		}
		out = append(out, r.GetHeaders()...)
		if r.GetNextPageToken() == "" {
			return out
		}
		token = r.GetNextPageToken()
	}
}

// owListAllSnapshots pages through ListSnapshots.
func owListAllSnapshots(t *testing.T, n *testNode, cwdPrefix string, pageSize int32) []*sessionpb.SessionSnapshot {
	t.Helper()
	var out []*sessionpb.SessionSnapshot
	token := ""
	for page := 0; ; page++ {
		if page > 1000 {
			t.Fatalf("ListSnapshots: more than 1000 pages; the page token does not advance")
		}
		r, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{PageSize: pageSize, PageToken: token, CwdPrefix: cwdPrefix})
		if err != nil {
			t.Fatalf("ListSnapshots(page %d): %v", page, err)
		}
		if pageSize > 0 && int32(len(r.GetSnapshots())) > pageSize {
			t.Errorf("ListSnapshots page %d: got %d snapshots, want at most page_size %d", page, len(r.GetSnapshots()), pageSize)
		}
		out = append(out, r.GetSnapshots()...)
		if r.GetNextPageToken() == "" {
			return out
		}
		token = r.GetNextPageToken()
	}
}

// owListed reports whether List shows id.
func owListed(t *testing.T, n *testNode, id string) bool {
	t.Helper()
	return slices.ContainsFunc(owListAll(t, n, "", 0), func(h *sessionpb.SessionHeader) bool { return h.GetId() == id })
}

// owWantErr checks that err is a *sessionstore.Error with the reason and,
// when msg is not empty, exactly that message.
func owWantErr(t *testing.T, what string, err error, reason sessionstore.Reason, msg string) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: got success, want %s", what, reason)
		return
	}
	var se *sessionstore.Error
	if !errors.As(err, &se) {
		t.Errorf("%s: got %T %v, want a *sessionstore.Error with reason %s", what, err, err, reason)
		return
	}
	if se.Reason != reason {
		t.Errorf("%s: got reason %s (%q), want %s", what, se.Reason, se.Message, reason)
	}
	if msg != "" && se.Message != msg {
		t.Errorf("%s: got message\n\t%q\nwant\n\t%q", what, se.Message, msg)
	}
}

// owStatus splits a raw gRPC error into its code, ErrorInfo reason (domain
// "sessionstore") and message.
func owStatus(err error) (codes.Code, sessionstore.Reason, string) {
	st, _ := status.FromError(err)
	var reason sessionstore.Reason
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok && ei.GetDomain() == "sessionstore" {
			reason = sessionstore.Reason(ei.GetReason())
		}
	}
	return st.Code(), reason, st.Message()
}

// owRaw is the generated client on the node's connection: no retries, no
// error conversion, so tests see the gRPC code itself.
func owRaw(n *testNode) sessionpb.SessionPersistenceClient {
	return sessionpb.NewSessionPersistenceClient(n.Client.Conn())
}

// owSeq returns an event's seq (-1 when it has none).
func owSeq(t *testing.T, ev string) int64 {
	t.Helper()
	var e struct {
		Seq *int64 `json:"seq"`
	}
	if err := json.Unmarshal([]byte(ev), &e); err != nil || e.Seq == nil {
		t.Fatalf("event %q has no integer seq: %v", ev, err)
	}
	return *e.Seq
}

// owTypes lists the events' types.
func owTypes(t *testing.T, events []string) []string {
	t.Helper()
	out := make([]string, len(events))
	for i, ev := range events {
		var e struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal([]byte(ev), &e); err != nil {
			t.Fatalf("event %d %q: %v", i, ev, err)
		}
		out[i] = e.Type
	}
	return out
}

// owSameEvents compares two event lists byte for byte.
func owSameEvents(t *testing.T, what string, got, want []string) {
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

// owWaitPast polls until the wall clock is past unixMs (plus a margin), i.e.
// until a lease that expires at unixMs has expired for the leader's clock.
func owWaitPast(t *testing.T, unixMs int64) {
	t.Helper()
	clustertest.Eventually(t, 30*time.Second, func() error {
		if time.Now().UnixMilli() <= unixMs+20 {
			return fmt.Errorf("the clock did not pass %d", unixMs)
		}
		return nil
	})
}

// owEncodeSegment is encodeSegment of docs/events.md#layout, written from
// that description: over UTF-16 code units, [A-Za-z0-9._-] are kept, every other unit
// (including "~") becomes ~XXXX; "." and ".." are escaped whole.
func owEncodeSegment(s string) string {
	switch s {
	case ".":
		return "~002E"
	case "..":
		return "~002E~002E"
	}
	var b strings.Builder
	for _, u := range utf16.Encode([]rune(s)) {
		switch {
		case u >= 'A' && u <= 'Z', u >= 'a' && u <= 'z', u >= '0' && u <= '9', u == '.', u == '_', u == '-':
			b.WriteByte(byte(u))
		default:
			fmt.Fprintf(&b, "~%04X", u)
		}
	}
	return b.String()
}

// owCtx is a context bounded to d, cancelled when the test ends.
func owCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}
