package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
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

func owTurnStart(seq, turn int64) string {
	return ctEv("turn/start", seq, seq+1, fmt.Sprintf(`{"turn":%d}`, turn))
}

func owTurnEnd(seq, turn int64) string {
	return ctEv("turn/end", seq, seq+1, fmt.Sprintf(`{"turn":%d,"reason":{"kind":"completed"}}`, turn))
}

// owOpenTurn is turn/start{turn} at seq and step/start{turn,1} at seq+1
// (times seq+1, seq+2), the interrupted tail of test C3.
func owOpenTurn(seq, turn int64) []string {
	return []string{
		owTurnStart(seq, turn),
		ctEv("step/start", seq+1, seq+2, fmt.Sprintf(`{"turn":%d,"step":1}`, turn)),
	}
}

// owOpenTurnClosers are the exact closers of owOpenTurn(seq, turn)
// (docs/events.md#crash-repair): step/end then turn/end {interrupted}, both at the
// time of the last real event.
func owOpenTurnClosers(seq, turn int64) []string {
	return []string{ctStepEndCloser(seq+2, seq+2, turn, 1), ctTurnEndCloser(seq+3, seq+2, turn)}
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
	ctCreate(t, n, ctMeta(id, ""))
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
	return owPages(t, "List", "headers", pageSize, func(token string) ([]*sessionpb.SessionHeader, string, error) {
		r, err := n.Client.List(n.ctx(), &sessionpb.ListRequest{PageSize: pageSize, PageToken: token, CwdPrefix: cwdPrefix})
		return r.GetHeaders(), r.GetNextPageToken(), err
	})
}

// owListAllSnapshots pages through ListSnapshots.
func owListAllSnapshots(t *testing.T, n *testNode, cwdPrefix string, pageSize int32) []*sessionpb.SessionSnapshot {
	t.Helper()
	return owPages(t, "ListSnapshots", "snapshots", pageSize, func(token string) ([]*sessionpb.SessionSnapshot, string, error) {
		r, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{PageSize: pageSize, PageToken: token, CwdPrefix: cwdPrefix})
		return r.GetSnapshots(), r.GetNextPageToken(), err
	})
}

// owPages follows the page tokens of the list call rpc (page answers one
// page) to the end, checking that no page holds more than pageSize items.
func owPages[T any](t *testing.T, rpc, items string, pageSize int32, page func(token string) ([]T, string, error)) []T {
	t.Helper()
	var out []T
	token := ""
	for i := 0; ; i++ {
		if i > 1000 {
			t.Fatalf("%s: more than 1000 pages; the page token does not advance", rpc)
		}
		got, next, err := page(token)
		if err != nil {
			t.Fatalf("%s(page %d): %v", rpc, i, err)
		}
		if pageSize > 0 && int32(len(got)) > pageSize {
			t.Errorf("%s page %d: got %d %s, want at most page_size %d", rpc, i, len(got), items, pageSize)
		}
		out = append(out, got...)
		if next == "" {
			return out
		}
		token = next
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

// owGet downloads u (with the bearer token, if one is given), failing the
// test when there is no answer, and returns the response (its body closed)
// and body.
func owGet(t *testing.T, n *testNode, u string, token ...string) (*http.Response, []byte) {
	t.Helper()
	req, err := http.NewRequestWithContext(n.ctx(), http.MethodGet, u, nil)
	if err != nil {
		t.Fatalf("request %s: %v", u, err)
	}
	for _, tok := range token {
		req.Header.Set("Authorization", "Bearer "+tok)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", u, err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: read body: %v", u, err)
	}
	return resp, body
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
