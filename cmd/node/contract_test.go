package main

// End-to-end acceptance tests of the persistence contract
// (docs/contract.md#persistence-contract,
// docs/contract.md#coordinator-contract, golden log
// docs/contract.md#log-crash), run against a real node (Raft + bbolt +
// artifacts + gRPC) through the Go client. Each test is named after the
// reference test it covers.
//
// Reference tests that do not apply to a server (docs/contract.md#coordinator-contract):
// they exercise the reference's in-process live Sessions, its write-behind
// buffer or its plugin lifecycle, none of which exists behind this API;
// ownership of a session is a lease here (docs/design.md "Ownership",
// ownership_test.go).
//
//	K1  live Session written through the store and reloaded: no in-process Sessions; the cold equivalent is C1.
//	K2  load refused while a live Session's turn is open: a lease rule here (LIVE_TURN_OPEN), see ownership_test.go.
//	K3  liveness re-checked inside the per-id chain: no live Sessions; leases are checked inside Apply.
//	K4  unmaterialised empty live Session not loadable: no live Sessions (the cold analogue is C6/K32).
//	K5  seedLength through a live Session: live-session wiring (the header field round trip is in K38).
//	K6  delegationDepth through a live Session: live-session wiring (the header field round trip is in K38).
//	K7  frozen source events: JavaScript object freezing; the wire carries copies.
//	K8  frozen load/inspect snapshots: JavaScript object freezing; views are copies by construction.
//	K12 append snapshots the caller's array: gRPC serialises the request when it is sent.
//	K13 fork seed written by the Session constructor: the client writes session/end-seed (docs/design.md: Prepare never does).
//	K14 resume re-seeding without re-appending: client-side Session constructor behaviour.
//	K15 HMR seeds existing live Sessions: no plugin hot reload.
//	K16 HMR dispose drains buffers: no write-behind buffer; every Append is durable when acknowledged.
//	K17 HMR adopts a still-live materialised Session: no plugin hot reload (restart: K31, K40).
//	K18 HMR adoption persists the live suffix: no plugin hot reload.
//	K19 HMR adoption truncates without closers: no live Sessions; a torn tail cannot exist in bbolt.
//	K20 new live Session colliding with a persisted id: live binding (Create collisions: K34).
//	K21 abandoned lazy live Session releases its id: live Session lifecycle.
//	K22 disposal drains buffered events: no write-behind buffer.
//	K23 idempotent initFor on session/created: SessionStore event wiring.
//	K24 live Session claims cursor-0 ownerless state: live binding (ownership is Prepare/lease).
//	K25 fresh live Session reusing a loaded id: live binding.
//	K26 live Session whose seed equals the loaded log: live binding.
//	K27 live Session whose seed extends the loaded log: live binding.
//	K28 cwd fence on cursor-0 claims: live binding.
//	K29 cwd fence on loaded-prefix claims: live binding.
//	K30 cwd fence, no-cwd side: live binding.
//	K39 flush before init resolves: write-behind internals.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// C1: create + append → load returns identical meta and byte-identical events.
func TestContract_C1_RoundTripsASession(t *testing.T) {
	n := ctSharedNode(t)
	log := ctOneTurnLog()
	ctCreate(t, n, ctMeta("s1", "/work"))
	resp := ctAppend(t, n, "s1", log...)
	if resp.GetDuplicate() || resp.GetNextSeq() != 6 {
		t.Errorf("Append: got duplicate=%v next_seq=%d, want false, 6", resp.GetDuplicate(), resp.GetNextSeq())
	}

	v := ctLoad(t, n, "s1")
	h := v.GetHeader()
	if h.GetVersion() != 0 || h.GetId() != "s1" || h.GetCwd() != "/work" || h.GetCreatedAt() != 1000 {
		t.Errorf("Load header: got %v, want version 0, id s1, cwd /work, createdAt 1000", h)
	}
	ctEqualEvents(t, "Load events", v.GetEvents(), log)
	if v.GetRepaired() || v.GetNextSeq() != 6 || v.GetRevision() != resp.GetRevision() {
		t.Errorf("Load: got repaired=%v next_seq=%d revision=%q, want false, 6, the append's %q",
			v.GetRepaired(), v.GetNextSeq(), v.GetRevision(), resp.GetRevision())
	}
}

// C2: a rejected creation timestamp reserves nothing. The wire's int64 cannot
// carry 1.5, so the non-safe-integer values it can carry stand in for it.
func TestContract_C2_RejectsBadCreatedAtWithoutReservingTheID(t *testing.T) {
	n := ctSharedNode(t)
	const id = "fractional-created-at"
	for _, bad := range []int64{-1, 1 << 53} {
		h := ctMeta(id, "")
		h.CreatedAt = bad
		_, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h})
		ctWantErrContains(t, "Create with createdAt "+strconv.FormatInt(bad, 10), err,
			sessionstore.ReasonInvalidHeader, "session metadata createdAt must be a non-negative safe integer")
	}
	owSession(t, n, id, ctOneTurnLog()...)
	if got := ctLoad(t, n, id).GetHeader().GetCreatedAt(); got != 1000 {
		t.Errorf("loaded createdAt: got %d, want 1000", got)
	}
}

// C3: load preserves an interrupted turn and closes it with turn/end
// {interrupted}; Inspect adds the closers in memory only.
func TestContract_C3_CrashRecoveryLoadClosesInterruptedTurn(t *testing.T) {
	n := ctSharedNode(t)
	const id = "interrupted"
	owSession(t, n, id, ctOneTurnLog()...)
	open := []string{
		ctEv("turn/start", 6, 7, `{"turn":2}`),
		ctEv("step/start", 7, 8, `{"turn":2,"step":1}`),
	}
	ctAppend(t, n, id, open...)
	stored := append(ctOneTurnLog(), open...)
	closers := []string{ctStepEndCloser(8, 8, 2, 1), ctTurnEndCloser(9, 8, 2)}

	load := ctInspectThenLoad(t, n, id, stored, closers)
	wantTypes := []string{"turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "step/end", "turn/end"}
	if got := ctTypes(t, load.GetEvents()); !slices.Equal(got, wantTypes) {
		t.Errorf("Load types: got %v, want %v", got, wantTypes)
	}
	if got := ctSeqs(t, load.GetEvents()); !slices.Equal(got, ctRange(0, 9)) {
		t.Errorf("Load seqs: got %v, want 0…9", got)
	}
	ctJSONEq(t, "last reason", ctGet(ctParse(t, load.GetEvents()[9]), "data", "reason"), `{"kind":"interrupted"}`)

	ctAppend(t, n, id,
		ctEv("turn/start", 10, 9, `{"turn":3}`),
		ctEv("turn/end", 11, 10, `{"turn":3,"reason":{"kind":"completed"}}`))
	if got := ctSeqs(t, ctLoad(t, n, id).GetEvents()); !slices.Equal(got, ctRange(0, 11)) {
		t.Errorf("reload seqs: got %v, want 0…11", got)
	}
}

// C4: an assistant tool request that never started gets a retryable
// synthetic result (TOOL_NOT_STARTED) before step/end and turn/end.
func TestContract_C4_CrashRecoveryUnstartedToolRequest(t *testing.T) {
	n := ctSharedNode(t)
	const id = "interrupted-toolcall"
	owSession(t, n, id, ctOneTurnLog()...)
	open := []string{
		ctEv("turn/start", 6, 7, `{"turn":2}`),
		ctEv("step/start", 7, 8, `{"turn":2,"step":1}`),
		ctSurf("assistant/message", 8, 9, `{"turn":2,"step":1,"message":{"id":"c4-assistant","role":"assistant","content":[{"type":"tool-call","id":"call-x","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}}`),
	}
	ctAppend(t, n, id, open...)
	stored := append(ctOneTurnLog(), open...)
	closers := []string{ctToolResultCloser(9, 9, 2, 1, "call-x", -1), ctStepEndCloser(10, 9, 2, 1), ctTurnEndCloser(11, 9, 2)}

	load := ctInspectThenLoad(t, n, id, stored, closers)
	evs := load.GetEvents()
	wantTypes := []string{"turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "assistant/message", "tool/result", "step/end", "turn/end"}
	if got := ctTypes(t, evs); !slices.Equal(got, wantTypes) {
		t.Fatalf("Load types: got %v, want %v", got, wantTypes)
	}
	result := ctParse(t, evs[9])
	ctJSONEq(t, "tool/result source", ctGet(result, "data", "message", "source"), `{"kind":"tool","callId":"call-x"}`)
	ctJSONEq(t, "tool/result block type", ctGet(result, "data", "message", "content", 0, "type"), `"tool-result"`)
	ctJSONEq(t, "tool/result toolCallId", ctGet(result, "data", "message", "content", 0, "toolCallId"), `"call-x"`)
	ctJSONEq(t, "tool/result isError", ctGet(result, "data", "message", "content", 0, "isError"), `true`)
	ctJSONEq(t, "tool/result error code", ctGet(result, "data", "error", "code"), `"TOOL_NOT_STARTED"`)
	ctJSONEq(t, "last assistant tool-call id", ctGet(ctParse(t, evs[8]), "data", "message", "content", 0, "id"), `"call-x"`)
}

// C5: a recorded tool call with no result tells the model to assess retry risk.
func TestContract_C5_CrashRecoveryRecordedToolCallAssessesRetryRisk(t *testing.T) {
	n := ctSharedNode(t)
	const id = "unknown-tool-outcome"
	ctCreate(t, n, ctMeta(id, ""))
	stored := []string{
		ctEv("turn/start", 0, 1, `{"turn":1}`),
		ctEv("step/start", 1, 2, `{"turn":1,"step":1}`),
		ctSurf("assistant/message", 2, 3, `{"turn":1,"step":1,"message":{"id":"c5-assistant","role":"assistant","content":[{"type":"tool-call","id":"call-risk","name":"write","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}}`),
		ctEv("tool/call", 3, 4, `{"turn":1,"step":1,"callId":"call-risk","name":"write","arguments":"{}"}`),
	}
	ctAppend(t, n, id, stored...)
	closers := []string{ctToolResultCloser(4, 4, 1, 1, "call-risk", 3), ctStepEndCloser(5, 4, 1, 1), ctTurnEndCloser(6, 4, 1)}

	load := ctInspectThenLoad(t, n, id, stored, closers)
	var result map[string]any
	for _, ev := range load.GetEvents() {
		if m := ctParse(t, ev); m["type"] == "tool/result" {
			result = m
		}
	}
	if result == nil {
		t.Fatalf("Load: no synthetic tool/result in %v", load.GetEvents())
	}
	ctJSONEq(t, "tool/result error", ctGet(result, "data", "error"), `{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}`)
	text, _ := ctGet(result, "data", "message", "content", 0, "content", 0, "text").(string)
	for _, sub := range []string{"retry only if the operation is read-only or idempotent",
		"if it may have side effects, first verify external state or ask the user"} {
		if !strings.Contains(text, sub) {
			t.Errorf("tool/result text: got %q, want it to contain %q", text, sub)
		}
	}
	block, _ := ctGet(result, "data", "message", "content", 0).(map[string]any)
	ctJSONEq(t, "first block type/toolCallId/isError",
		map[string]any{"type": block["type"], "toolCallId": block["toolCallId"], "isError": block["isError"]},
		`{"type":"tool-result","toolCallId":"call-risk","isError":true}`)
	ctJSONEq(t, "tool/result sourceEventSeqs", result["sourceEventSeqs"], `[3]`)
}

// C6: a created but never appended session is not listed (nor readable).
func TestContract_C6_ListExcludesCreatedButNeverAppended(t *testing.T) {
	n := ctSharedNode(t)
	ctCreate(t, n, ctMeta("empty", ""))
	if listed, _ := ctListed(t, n, "empty"); listed {
		t.Errorf("List/ListSnapshots: got %q listed, want it absent until its first append", "empty")
	}
	_, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: "empty"})
	ctWantErr(t, "Load of an unmaterialised session", err, sessionstore.ReasonNotFound, `session "empty" not found`)
	_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: "empty"})
	ctWantErr(t, "Inspect of an unmaterialised session", err, sessionstore.ReasonNotFound, `session "empty" not found`)
}

// C7: the reference rejects pre-aborted reads with the signal's reason; here
// a cancelled context fails every call with codes.Canceled and writes nothing.
func TestContract_C7_PreCancelledCallsFailAndWriteNothing(t *testing.T) {
	n := ctNode(t)
	snaps, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{})
	if err != nil || len(snaps.GetSnapshots()) != 0 {
		t.Fatalf("ListSnapshots on a fresh node: got %v, %v; want no snapshots, no error", snaps, err)
	}
	ctCreate(t, n, ctMeta("cancelled-append", ""))

	cctx, cancel := context.WithCancel(context.Background())
	cancel()
	calls := map[string]func() error{
		"List": func() error { _, err := n.Client.List(cctx, &sessionpb.ListRequest{}); return err },
		"ListSnapshots": func() error {
			_, err := n.Client.ListSnapshots(cctx, &sessionpb.ListSnapshotsRequest{})
			return err
		},
		"Inspect": func() error {
			_, err := n.Client.Inspect(cctx, &sessionpb.InspectRequest{SessionId: "cancelled-inspect"})
			return err
		},
		"ReadFrom": func() error {
			_, err := n.Client.ReadFrom(cctx, &sessionpb.ReadFromRequest{SessionId: "cancelled-read-from"})
			return err
		},
		"Create": func() error {
			_, err := n.Client.Create(cctx, &sessionpb.CreateRequest{Header: ctMeta("cancelled-create", "/a")})
			return err
		},
		"Append": func() error {
			_, err := n.Client.Append(cctx, &sessionpb.AppendRequest{SessionId: "cancelled-append", Events: ctOneTurnLog()})
			return err
		},
		"Load": func() error {
			_, err := n.Client.Load(cctx, &sessionpb.LoadRequest{SessionId: "cancelled-append"})
			return err
		},
	}
	for name, call := range calls {
		if err := call(); status.Code(err) != codes.Canceled {
			t.Errorf("%s with a cancelled context: got %v (code %v), want code Canceled", name, err, status.Code(err))
		}
	}

	// Nothing was written: the cancelled Create registered nothing (another
	// header for that id is accepted) and the cancelled Append stored nothing.
	ctCreate(t, n, ctMeta("cancelled-create", "/b"))
	if listed, _ := ctListed(t, n, "cancelled-append"); listed {
		t.Errorf("after a cancelled Append: got %q listed, want absent", "cancelled-append")
	}
	resp := ctAppend(t, n, "cancelled-append", ctOneTurnLog()...)
	if resp.GetDuplicate() || resp.GetNextSeq() != 6 {
		t.Errorf("Append after the cancelled one: got duplicate=%v next_seq=%d, want false, 6", resp.GetDuplicate(), resp.GetNextSeq())
	}
}

// C8: readFrom returns exactly the stored suffix, without mutating the log.
func TestContract_C8_ReadFromReturnsTheStoredSuffix(t *testing.T) {
	n := ctSharedNode(t)
	const id = "read-from"
	log := ctOneTurnLog()
	ctCreate(t, n, ctMeta(id, "/work"))
	ctAppend(t, n, id, log...)
	rev := ctRevision(t, n, id)

	whole := ctReadFrom(t, n, id, 0)
	if whole.GetHeader().GetId() != id || whole.GetHeader().GetCwd() != "/work" {
		t.Errorf("ReadFrom header: got %v, want id %q, cwd /work", whole.GetHeader(), id)
	}
	ctEqualEvents(t, "ReadFrom(0)", whole.GetEvents(), log)
	if whole.GetRevision() != rev || whole.GetNextSeq() != int64(len(log)) {
		t.Errorf("ReadFrom revision %q next seq %d, want %q and %d", whole.GetRevision(), whole.GetNextSeq(), rev, len(log))
	}
	suffix := ctReadFrom(t, n, id, 3)
	ctEqualEvents(t, "ReadFrom(3)", suffix.GetEvents(), log[3:])
	for _, from := range []int64{6, 106} {
		if got := ctReadFrom(t, n, id, from).GetEvents(); len(got) != 0 {
			t.Errorf("ReadFrom(%d): got %d events, want none", from, len(got))
		}
	}
	if got := ctRevision(t, n, id); got != rev {
		t.Errorf("revision after ReadFrom: got %q, want %q (reads change nothing)", got, rev)
	}

	ctAppend(t, n, id, ctEv("turn/start", 6, 7, `{"turn":2}`))
	if got := ctTypes(t, ctReadFrom(t, n, id, 6).GetEvents()); !slices.Equal(got, []string{"turn/start"}) {
		t.Errorf("ReadFrom(6) of an open turn: got types %v, want [turn/start] (no closers)", got)
	}

	_, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: "absent-read-from"})
	ctWantErr(t, "ReadFrom of an absent id", err, sessionstore.ReasonNotFound, `session "absent-read-from" not found`)
	for _, tc := range []struct {
		id   string
		from int64
	}{{id, -1}, {id, 1 << 53}, {"absent-read-from", -1}} {
		_, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: tc.id, FromSeq: tc.from})
		ctWantErrContains(t, "ReadFrom("+tc.id+", bad fromSeq)", err, sessionstore.ReasonInvalidArgument, "non-negative safe integer")
	}
}

// C9: listed revisions are stable and change after an append.
func TestContract_C9_ListsStableRevisionsThatChangeAfterAppend(t *testing.T) {
	n := ctSharedNode(t)
	ctCreate(t, n, ctMeta("s2", ""))
	first := ctAppend(t, n, "s2", ctOneTurnLog()...)
	r1, r2 := ctRevision(t, n, "s2"), ctRevision(t, n, "s2")
	if r1 != r2 {
		t.Errorf("two ListSnapshots: got revisions %q and %q, want equal", r1, r2)
	}
	if r1 != first.GetRevision() {
		t.Errorf("listed revision: got %q, want the append's %q", r1, first.GetRevision())
	}
	second := ctAppend(t, n, "s2", ctEv("turn/start", 6, 7, `{"turn":2}`))
	r3 := ctRevision(t, n, "s2")
	if r3 == r1 || r3 != second.GetRevision() {
		t.Errorf("revision after an append: got %q (append said %q), want a change from %q", r3, second.GetRevision(), r1)
	}
}

// C10: the reference rejects a re-sent batch; this store acknowledges an
// identical re-send as a duplicate (docs/design.md "Retries and outcomes") and
// rejects different bytes at stored seqs with the reference text.
func TestContract_C10_AppendRejectsAMismatchedFirstSeq(t *testing.T) {
	n := ctSharedNode(t)
	const id = "c10"
	log := ctOneTurnLog()
	ctCreate(t, n, ctMeta(id, ""))
	first := ctAppend(t, n, id, log...)

	for name, batch := range map[string][]string{"whole batch": log, "stored middle": log[2:4]} {
		dup := ctAppend(t, n, id, batch...)
		if !dup.GetDuplicate() || dup.GetNextSeq() != 6 || dup.GetRevision() != first.GetRevision() {
			t.Errorf("identical re-send (%s): got duplicate=%v next_seq=%d revision=%q, want true, 6, %q",
				name, dup.GetDuplicate(), dup.GetNextSeq(), dup.GetRevision(), first.GetRevision())
		}
	}

	changed := slices.Clone(log)
	changed[0] = ctEv("turn/start", 0, 99, `{"turn":1}`)
	for _, tc := range []struct {
		name  string
		batch []string
		got   int64
	}{
		{"different bytes at seq 0", changed, 0},
		{"different bytes at seq 5", []string{ctEv("turn/end", 5, 6, `{"turn":1,"reason":{"kind":"aborted","reason":{"kind":"user"}}}`)}, 5},
		{"overlap of stored and new seqs", []string{log[5], ctEv("turn/start", 6, 7, `{"turn":2}`)}, 5},
		{"gap after the stored end", []string{ctEv("turn/start", 7, 7, `{"turn":2}`)}, 7},
	} {
		_, err := ctTryAppend(t, n, id, tc.batch...)
		ctWantErr(t, "Append with "+tc.name, err, sessionstore.ReasonSeqMismatch,
			`append seq mismatch for "c10": expected 6 at index 0, got `+strconv.FormatInt(tc.got, 10))
	}
	if got := ctRevision(t, n, id); got != first.GetRevision() {
		t.Errorf("revision after refused appends: got %q, want %q", got, first.GetRevision())
	}
	ctEqualEvents(t, "stored log after refused appends", ctReadFrom(t, n, id, 0).GetEvents(), log)
}

// C11: append rejects a mid-batch seq gap, writing nothing.
func TestContract_C11_AppendRejectsAMidBatchSeqGap(t *testing.T) {
	n := ctSharedNode(t)
	const id = "c11"
	ctCreate(t, n, ctMeta(id, ""))
	_, err := ctTryAppend(t, n, id, ctEv("turn/start", 0, 1, `{"turn":1}`), ctEv("step/start", 2, 2, `{"turn":1,"step":1}`))
	ctWantErr(t, "Append with a mid-batch gap", err, sessionstore.ReasonSeqMismatch,
		`append seq mismatch for "c11": expected 1 at index 1, got 2`)
	if listed, _ := ctListed(t, n, id); listed {
		t.Errorf("after a refused append: got %q listed, want absent (nothing written)", id)
	}
	ctAppend(t, n, id, ctOneTurnLog()...)
}

// C12: the reference refuses data that is not losslessly JSON-serializable
// (BigInt, undefined, Infinity, functions, Symbols, Maps, cycles). The wire
// carries JSON text, so their text equivalents must be refused: numbers a
// JavaScript reader would not read back exactly, and texts that are not one
// single-line JSON object. Nothing is written.
func TestContract_C12_AppendRejectsNonJSONSerializableData(t *testing.T) {
	n := ctSharedNode(t)
	msg := func(extra string) string {
		return `{"type":"user/message","seq":0,"time":1,"data":{"id":"c12-user","role":"user","content":[{"type":"text","text":"hi"}],"source":{"kind":"user"},"extra":` + extra + `},"surfaceOp":"append"}`
	}
	cases := []struct {
		name     string
		event    string
		lossless bool // a lossless-domain violation (docs/events.md#lossless-json)
	}{
		{"beyond-2^53", msg("9007199254740993"), true},
		{"infinity", msg("1e400"), true},
		{"negative-infinity", msg("-1e400"), true},
		{"negative-zero", msg("-0"), true},
		{"negative-zero-fraction", msg("-0.0"), true},
		{"undefined", msg("undefined"), false},
		{"nan", msg("NaN"), false},
		{"undefined-object", `{"type":"user/message","seq":0,"time":1,"data":{"a":undefined},"surfaceOp":"append"}`, false},
		{"duplicate-key", msg(`1,"extra":2`), false},
		{"duplicate-envelope-key", `{"type":"turn/start","seq":0,"time":1,"time":2,"data":{"turn":1}}`, false},
		{"second-value", msg("1") + ` {"type":"turn/start"}`, false},
		{"newline-between-tokens", strings.Replace(msg("1"), `,"data"`, ",\n\"data\"", 1), false},
		{"newline-in-string", strings.Replace(msg("1"), `"hi"`, "\"h\ni\"", 1), false},
		{"not-an-object", `[1]`, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			id := "c12-" + tc.name
			ctCreate(t, n, ctMeta(id, "/work"))
			_, err := ctRaw(n).Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: []string{tc.event}})
			code, se := ctStatus(err)
			if code != codes.InvalidArgument || se == nil ||
				(se.Reason != sessionstore.ReasonNotJSON && se.Reason != sessionstore.ReasonInvalidEvent) {
				t.Fatalf("Append: got %v, want INVALID_ARGUMENT with reason NOT_JSON or INVALID_EVENT", err)
			}
			if tc.lossless {
				if !regexp.MustCompile(`losslessly JSON-serializable`).MatchString(se.Message) {
					t.Errorf("message: got %q, want it to match /losslessly JSON-serializable/", se.Message)
				}
				if !strings.Contains(se.Message, `"user/message"`) {
					t.Errorf("message: got %q, want it to name the event type (docs/events.md#write-checks)", se.Message)
				}
			}
			if listed, _ := ctListed(t, n, id); listed {
				t.Errorf("after a refused append: got %q listed, want absent", id)
			}
			_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
			ctWantErr(t, "ReadFrom after a refused append", err, sessionstore.ReasonNotFound, `session "`+id+`" not found`)
			resp := ctAppend(t, n, id, ctOneTurnLog()...)
			if resp.GetDuplicate() || resp.GetNextSeq() != 6 {
				t.Errorf("valid append at seq 0: got duplicate=%v next_seq=%d, want false, 6", resp.GetDuplicate(), resp.GetNextSeq())
			}
		})
	}
}

// ctLegacyMessageLog is the pre-identity log of the reference test K9.
func ctLegacyMessageLog() []string {
	return []string{
		ctEv("turn/start", 0, 1, `{"turn":1}`),
		ctSurf("user/message", 1, 2, `{"content":[{"type":"text","text":"hi"}],"source":{"kind":"user"}}`),
		ctEv("step/start", 2, 3, `{"turn":1,"step":1}`),
		ctSurf("assistant/message", 3, 4, `{"turn":1,"step":1,"content":[{"type":"tool-call","id":"call-1","name":"read","arguments":"{}"}],"provenance":{"provider":"mock","model":"mock"}}`),
		ctEv("tool/call", 4, 5, `{"turn":1,"step":1,"callId":"call-1","name":"read","arguments":"{}"}`),
		`{"type":"tool/result","seq":5,"time":6,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"full result"}],"isError":false},"sourceEventSeqs":[4],"surfaceOp":"append"}`,
		`{"type":"tool/result","seq":6,"time":8,"data":{"turn":1,"step":1,"callId":"call-1","content":[{"type":"text","text":"pruned"}],"isError":false},"sourceEventSeqs":[5],"surfaceOp":{"op":"replace","start":5,"end":5}}`,
		ctEv("step/end", 7, 9, `{"turn":1,"step":1}`),
		ctEv("turn/end", 8, 10, `{"turn":1,"reason":{"kind":"completed"}}`),
	}
}

// K9: pre-identity message logs load as current sessions with legacy ids.
func TestContract_K9_LoadsPreIdentityMessageLogs(t *testing.T) {
	n := ctSharedNode(t)
	const id = "legacy-message-load"
	ctCreate(t, n, ctMeta(id, "/w"))
	ctAppend(t, n, id, ctLegacyMessageLog()...)
	wantIDs := []string{"legacy-message:" + id + ":1", "legacy-message:" + id + ":3",
		"legacy-message:" + id + ":5", "legacy-message:" + id + ":5"}

	for _, view := range []struct {
		name string
		v    *sessionpb.SessionView
	}{{"Inspect", ctInspect(t, n, id)}, {"Load", ctLoad(t, n, id)}} {
		var ids []string
		for _, ev := range view.v.GetEvents() {
			m := ctParse(t, ev)
			switch m["type"] {
			case "user/message":
				ids = append(ids, ctStringAt(m, "data", "id"))
				ctJSONEq(t, view.name+" user/message role", ctGet(m, "data", "role"), `"user"`)
			case "assistant/message":
				ids = append(ids, ctStringAt(m, "data", "message", "id"))
				ctJSONEq(t, view.name+" assistant/message source", ctGet(m, "data", "message", "source"),
					`{"provider":"mock","model":"mock","kind":"model"}`)
				ctJSONEq(t, view.name+" assistant/message role", ctGet(m, "data", "message", "role"), `"assistant"`)
			case "tool/result":
				ids = append(ids, ctStringAt(m, "data", "message", "id"))
				ctJSONEq(t, view.name+" tool/result source", ctGet(m, "data", "message", "source"), `{"kind":"tool","callId":"call-1"}`)
			}
		}
		if !slices.Equal(ids, wantIDs) {
			t.Errorf("%s message ids: got %v, want %v", view.name, ids, wantIDs)
		}
		if len(view.v.GetEvents()) != 9 || view.v.GetRepaired() {
			t.Errorf("%s: got %d events, repaired=%v; want 9, false", view.name, len(view.v.GetEvents()), view.v.GetRepaired())
		}
	}

	suffix := ctReadFrom(t, n, id, 6).GetEvents()
	if len(suffix) == 0 {
		t.Fatalf("ReadFrom(6): no events")
	}
	first := ctParse(t, suffix[0])
	if first["type"] != "tool/result" || ctStringAt(first, "seq") != "6" ||
		ctStringAt(first, "data", "message", "id") != "legacy-message:"+id+":5" {
		t.Errorf("ReadFrom(6) first event: got %s, want tool/result seq 6 with message id legacy-message:%s:5", suffix[0], id)
	}
	// Read-side normalisation never rewrites the stored bytes.
	rr := ctReadRaw(t, n, id)
	raw := string(rr.GetContent())
	if !strings.HasSuffix(raw, strings.Join(ctLegacyMessageLog(), "\n")+"\n") {
		t.Errorf("ReadRaw: got %q, want the stored legacy lines verbatim", raw)
	}
	if rr.GetRevision() == "" || rr.GetRevision() != ctRevision(t, n, id) {
		t.Errorf("ReadRaw revision %q, want the session's %q", rr.GetRevision(), ctRevision(t, n, id))
	}
}

// ctStringAt renders the string or number at path ("" for anything else).
func ctStringAt(m map[string]any, path ...any) string {
	switch v := ctGet(m, path...).(type) {
	case string:
		return v
	case json.Number:
		return v.String()
	default:
		return ""
	}
}

// ctPreReactLoopLog is the 22-event old-vocabulary log of the reference test
// K10 (its createUserMessage ids are fixed here).
func ctPreReactLoopLog() []string {
	userTrigger := `"trigger":{"kind":"message","source":{"kind":"user"}}`
	return []string{
		ctEv("turn/start", 0, 1, `{"turn":1,`+userTrigger+`}`),
		ctSurf("user/message", 1, 2, `{"id":"old-prompt-id","role":"user","content":[{"type":"text","text":"old prompt"}],"source":{"kind":"user"}}`),
		ctEv("step/start", 2, 3, `{"turn":1,"step":1}`),
		ctSurf("steering/message", 3, 4, `{"turn":1,"message":{"id":"old-steering-id","role":"user","content":[{"type":"text","text":"old steering"}],"source":{"kind":"user"}}}`),
		ctEv("step/end", 4, 5, `{"turn":1,"step":1}`),
		ctEv("turn/end", 5, 6, `{"turn":1,"reason":{"kind":"completed"}}`),
		ctEv("turn/start", 6, 7, `{"turn":2,"trigger":{"kind":"retry"}}`),
		ctEv("step/start", 7, 8, `{"turn":2,"step":1}`),
		ctEv("step/end", 8, 9, `{"turn":2,"step":1}`),
		ctEv("turn/end", 9, 10, `{"turn":2,"reason":{"kind":"error","step":1,"failure":{"message":"old provider failure","code":"SERVER"}}}`),
		ctEv("turn/start", 10, 11, `{"turn":3,`+userTrigger+`}`),
		ctEv("turn/end", 11, 12, `{"turn":3,"reason":{"kind":"aborted"}}`),
		ctEv("turn/start", 12, 13, `{"turn":4,`+userTrigger+`}`),
		ctEv("turn/end", 13, 14, `{"turn":4,"reason":{"kind":"disposed"}}`),
		ctEv("turn/start", 14, 15, `{"turn":5,`+userTrigger+`}`),
		ctEv("step/start", 15, 16, `{"turn":5,"step":1}`),
		ctEv("step/end", 16, 17, `{"turn":5,"step":1}`),
		ctEv("turn/end", 17, 18, `{"turn":5,"reason":{"kind":"error","step":1,"message":"old thrown value"}}`),
		ctEv("turn/start", 18, 19, `{"turn":6,`+userTrigger+`}`),
		ctEv("turn/end", 19, 20, `{"turn":6,"reason":{"kind":"error","step":0,"failure":{"message":"old detailed provider failure","code":"RATE_LIMIT","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"}}}`),
		ctEv("turn/start", 20, 21, `{"turn":7,`+userTrigger+`}`),
		ctEv("turn/end", 21, 22, `{"turn":7,"reason":{"kind":"error","step":0,"message":"old coded error","code":"CODED"}}`),
	}
}

// K10: pre-react-loop logs load as current sessions.
func TestContract_K10_LoadsPreReactLoopLogs(t *testing.T) {
	n := ctSharedNode(t)
	const id = "pre-react-loop-load"
	ctCreate(t, n, ctMeta(id, "/w"))
	ctAppend(t, n, id, ctPreReactLoopLog()...)

	wantTurnEnds := []string{
		`{"turn":1,"reason":{"kind":"completed"}}`,
		`{"turn":2,"reason":{"kind":"error","error":{"message":"old provider failure","code":"SERVER"}}}`,
		`{"turn":3,"reason":{"kind":"aborted","reason":{"kind":"legacy"}}}`,
		`{"turn":4,"reason":{"kind":"aborted","reason":{"kind":"disposed"}}}`,
		`{"turn":5,"reason":{"kind":"error","error":{"message":"old thrown value","code":"UNKNOWN"}}}`,
		`{"turn":6,"reason":{"kind":"error","error":{"message":"old detailed provider failure","code":"RATE_LIMIT","status":429,"providerRetryAfterMs":1000,"requestId":"request-1"}}}`,
		`{"turn":7,"reason":{"kind":"error","error":{"message":"old coded error","code":"CODED"}}}`,
	}
	views := []struct {
		name   string
		events []string
	}{
		{"Inspect", ctInspect(t, n, id).GetEvents()},
		{"ReadFrom(0)", ctReadFrom(t, n, id, 0).GetEvents()},
		{"Load", ctLoad(t, n, id).GetEvents()},
	}
	for _, v := range views {
		if len(v.events) != 22 {
			t.Errorf("%s: got %d events, want 22", v.name, len(v.events))
		}
		var starts, ends []any
		var userContents []any
		for _, ev := range v.events {
			m := ctParse(t, ev)
			switch m["type"] {
			case "steering/message":
				t.Errorf("%s: a steering/message remains: %s", v.name, ev)
			case "turn/start":
				starts = append(starts, m["data"])
			case "turn/end":
				ends = append(ends, m["data"])
			case "user/message":
				userContents = append(userContents, ctGet(m, "data", "content"))
			}
		}
		ctJSONEq(t, v.name+" turn/start datas", starts,
			`[{"turn":1},{"turn":2},{"turn":3},{"turn":4},{"turn":5},{"turn":6},{"turn":7}]`)
		ctJSONEq(t, v.name+" turn/end datas", ends, "["+strings.Join(wantTurnEnds, ",")+"]")
		ctJSONEq(t, v.name+" user message contents", userContents,
			`[[{"type":"text","text":"old prompt"}],[{"type":"text","text":"old steering"}]]`)
	}

	suffix := ctReadFrom(t, n, id, 3).GetEvents()
	if len(suffix) == 0 {
		t.Fatalf("ReadFrom(3): no events")
	}
	first := ctParse(t, suffix[0])
	if first["type"] != "user/message" || ctStringAt(first, "seq") != "3" || ctStringAt(first, "data", "id") != "old-steering-id" {
		t.Errorf("ReadFrom(3) first event: got %s, want user/message seq 3 with the steering message's id", suffix[0])
	}
	for _, ev := range suffix {
		if m := ctParse(t, ev); m["type"] == "turn/end" && ctGet(m, "data", "step") != nil {
			t.Errorf("ReadFrom(3): turn/end keeps a step key: %s", ev)
		}
	}

	const flatID = "pre-react-loop-flat-steering"
	ctCreate(t, n, ctMeta(flatID, "/w"))
	ctAppend(t, n, flatID, ctSurf("steering/message", 0, 1, `{"turn":1,"content":[{"type":"text","text":"flat steering"}],"source":{"kind":"user"}}`))
	flat := ctParse(t, ctInspect(t, n, flatID).GetEvents()[0])
	if flat["type"] != "user/message" || ctStringAt(flat, "data", "id") != "legacy-message:"+flatID+":0" ||
		ctStringAt(flat, "data", "role") != "user" {
		t.Errorf("flat steering/message: got %v, want a user/message with id legacy-message:%s:0, role user", flat, flatID)
	}
	ctJSONEq(t, "flat steering content", ctGet(flat, "data", "content"), `[{"type":"text","text":"flat steering"}]`)

	const extID = "current-extended-turn-end"
	ext := []string{ctEv("turn/start", 0, 1, `{"turn":1}`), ctEv("turn/end", 1, 2, `{"turn":1,"reason":{"kind":"extension-reason"}}`)}
	ctCreate(t, n, ctMeta(extID, "/w"))
	ctAppend(t, n, extID, ext...)
	ctEqualEvents(t, "extension reason (verbatim)", ctInspect(t, n, extID).GetEvents(), ext)
}

// K11: malformed stored events are refused on read, before being returned.
func TestContract_K11_RejectsMalformedPersistedMessageEvents(t *testing.T) {
	n := ctSharedNode(t)
	wrapped := func(id string) string { return `stored session "` + id + `" failed validation: Error: ` }

	// The reference stores these (its write rules); this store does so only
	// under VALIDATION_REFERENCE, and says the log no longer reads.
	const roleID = "invalid-message-read"
	ctCreate(t, n, ctMeta(roleID, "/w"))
	wrongRole := `{"type":"user/message","seq":0,"time":1,"surfaceOp":"append","data":{"id":"wrong-role","role":"assistant","content":[{"type":"text","text":"wrong"}],"source":{"kind":"user"}}}`
	_, err := ctTryAppend(t, n, roleID, wrongRole)
	ctWantErr(t, "strict Append of a user/message with role assistant", err, sessionstore.ReasonInvalidEvent,
		`session "`+roleID+`" would not read after this write: session event at seq 0 message must have role "user"; write it with validation REFERENCE to store it anyway`)
	r := ctAppendRef(t, n, roleID, wrongRole)
	ctWantUnreadable(t, "reference Append of a user/message with role assistant", r.GetReadable(), r.GetUnreadableReason(), r.GetUnreadableMessage(),
		sessionstore.ReasonInvalidStored, wrapped(roleID)+`session event at seq 0 message must have role "user"`)
	_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: roleID})
	ctWantErr(t, "Inspect of a user/message with role assistant", err, sessionstore.ReasonInvalidStored,
		wrapped(roleID)+`session event at seq 0 message must have role "user"`)
	_, err = n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: roleID})
	ctWantErr(t, "Load of a user/message with role assistant", err, sessionstore.ReasonInvalidStored,
		wrapped(roleID)+`session event at seq 0 message must have role "user"`)

	malformed := []struct {
		id, event, what string
	}{
		{"invalid-old-turn-start", ctEv("turn/start", 0, 1, `{"turn":1,"trigger":null}`), "turn/start"},
		{"invalid-old-steering", ctSurf("steering/message", 0, 1, `{"turn":1,"content":[],"source":{"kind":"user"},"extra":true}`), "steering/message"},
		{"invalid-old-steering-data", ctSurf("steering/message", 0, 1, `null`), "steering/message"},
		{"invalid-old-turn-end", ctEv("turn/end", 0, 1, `{"turn":1,"reason":{"kind":"completed","extra":true}}`), "turn/end"},
		{"invalid-old-turn-end-reason", ctEv("turn/end", 0, 1, `{"turn":1,"reason":null}`), "turn/end"},
		{"unsupported-intermediate-turn-end-step", ctEv("turn/end", 0, 1, `{"turn":1,"step":1,"reason":{"kind":"completed"}}`), "turn/end"},
		{"invalid-old-turn-end-aborted", ctEv("turn/end", 0, 1, `{"turn":1,"reason":{"kind":"aborted","extra":true}}`), "turn/end"},
		{"invalid-old-turn-end-disposed", ctEv("turn/end", 0, 1, `{"turn":1,"reason":{"kind":"disposed","extra":true}}`), "turn/end"},
		{"invalid-old-turn-end-error-step", ctEv("turn/end", 0, 1, `{"turn":1,"reason":{"kind":"error","step":-1,"message":"bad step"}}`), "turn/end"},
		{"invalid-old-turn-end-error-code", ctEv("turn/end", 0, 1, `{"turn":1,"reason":{"kind":"error","step":0,"message":"bad code","code":1}}`), "turn/end"},
	}
	for _, m := range malformed {
		t.Run(m.id, func(t *testing.T) {
			ctCreate(t, n, ctMeta(m.id, "/w"))
			text := `session "` + m.id + `" contains malformed pre-react-loop ` + m.what + ` at seq 0`
			_, err := ctTryAppend(t, n, m.id, m.event)
			ctWantErr(t, "strict Append", err, sessionstore.ReasonInvalidEvent,
				`session "`+m.id+`" would not read after this write: `+text+`; write it with validation REFERENCE to store it anyway`)
			r := ctAppendRef(t, n, m.id, m.event)
			ctWantUnreadable(t, "reference Append", r.GetReadable(), r.GetUnreadableReason(), r.GetUnreadableMessage(), sessionstore.ReasonInvalidStored, wrapped(m.id)+text)
			_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: m.id})
			ctWantErr(t, "Inspect", err, sessionstore.ReasonInvalidStored, wrapped(m.id)+text)
			_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: m.id})
			ctWantErr(t, "ReadFrom(0) (readFrom does not wrap)", err, sessionstore.ReasonInvalidStored, text)
		})
	}

	const nullID = "invalid-tool/result"
	ctCreate(t, n, ctMeta(nullID, "/w"))
	if _, err := ctTryAppend(t, n, nullID, ctSurf("tool/result", 0, 1, `{"message":null}`)); !errors.Is(err, sessionstore.ErrInvalidEvent) {
		t.Errorf("strict Append of a tool/result with a null message: %v, want INVALID_EVENT", err)
	}
	ctAppendRef(t, n, nullID, ctSurf("tool/result", 0, 1, `{"message":null}`))
	_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: nullID})
	se := ctWantErrContains(t, "Inspect of a tool/result with a null message", err, sessionstore.ReasonInvalidStored, "lacks an identified message")
	if se != nil && !strings.HasPrefix(se.Message, wrapped(nullID)) {
		t.Errorf("Inspect of a tool/result with a null message: got %q, want the %q wrapping", se.Message, wrapped(nullID))
	}

	const pluginID = "non-object-plugin-event"
	plugin := `{"type":"plugin/test","seq":0,"time":1,"data":null,"ignorable":true}`
	ctCreate(t, n, ctMeta(pluginID, "/w"))
	ctAppend(t, n, pluginID, plugin)
	ctEqualEvents(t, "Inspect of an ignorable plugin event", ctInspect(t, n, pluginID).GetEvents(), []string{plugin})
	ctEqualEvents(t, "ReadFrom of an ignorable plugin event", ctReadFrom(t, n, pluginID, 0).GetEvents(), []string{plugin})

	for _, typ := range []string{"user/message", "assistant/message"} {
		id := "invalid-" + typ + "-without-content"
		ctCreate(t, n, ctMeta(id, "/w"))
		if _, err := ctTryAppend(t, n, id, ctSurf(typ, 0, 1, `{}`)); !errors.Is(err, sessionstore.ErrInvalidEvent) {
			t.Errorf("strict Append of %s with empty data: %v, want INVALID_EVENT", typ, err)
		}
		ctAppendRef(t, n, id, ctSurf(typ, 0, 1, `{}`))
		_, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
		ctWantErrContains(t, "ReadFrom of "+typ+" with empty data", err, sessionstore.ReasonInvalidStored, "lacks an identified message")
	}
}

// K31: an append after a restart (a fresh instance) continues the seq.
func TestContract_K31_AppendAfterRestartContinuesTheSeq(t *testing.T) {
	n := ctNode(t)
	const id = "adopt-append"
	ctCreate(t, n, ctMeta(id, "/w"))
	ctAppend(t, n, id, ctOneTurnLog()...)
	n = n.Restart()
	resp := ctAppend(t, n, id,
		ctEv("turn/start", 6, 7, `{"turn":2}`),
		ctEv("turn/end", 7, 8, `{"turn":2,"reason":{"kind":"completed"}}`))
	if resp.GetDuplicate() || resp.GetNextSeq() != 8 {
		t.Errorf("Append after restart: got duplicate=%v next_seq=%d, want false, 8", resp.GetDuplicate(), resp.GetNextSeq())
	}
	if got := ctSeqs(t, ctLoad(t, n, id).GetEvents()); !slices.Equal(got, ctRange(0, 7)) {
		t.Errorf("reload seqs: got %v, want 0…7", got)
	}
}

// K32: an empty append is a no-op and keeps the session lazy.
func TestContract_K32_EmptyAppendIsANoOp(t *testing.T) {
	n := ctSharedNode(t)
	const id = "empty-batch"
	ctCreate(t, n, ctMeta(id, "/w"))
	resp := ctAppend(t, n, id)
	if resp.GetNextSeq() != 0 || resp.GetDuplicate() {
		t.Errorf("empty Append: got next_seq=%d duplicate=%v, want 0, false", resp.GetNextSeq(), resp.GetDuplicate())
	}
	if listed, _ := ctListed(t, n, id); listed {
		t.Errorf("after an empty append: got %q listed, want absent (still lazy)", id)
	}
	_, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
	ctWantErr(t, "Load after an empty append", err, sessionstore.ReasonNotFound, `session "empty-batch" not found`)
	ctAppend(t, n, id, ctOneTurnLog()...)
	if listed, _ := ctListed(t, n, id); !listed {
		t.Errorf("after the first non-empty append: got %q absent, want listed", id)
	}
}

// K33: load and inspect reject a missing session.
func TestContract_K33_LoadAndInspectRejectAMissingSession(t *testing.T) {
	n := ctSharedNode(t)
	const want = `session "nope" not found`
	_, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: "nope"})
	ctWantErr(t, "Load", err, sessionstore.ReasonNotFound, want)
	_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: "nope"})
	ctWantErr(t, "Inspect", err, sessionstore.ReasonNotFound, want)
	_, err = n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: "nope"})
	ctWantErr(t, "ReadRaw", err, sessionstore.ReasonNotFound, want)
	_, err = ctRaw(n).Load(n.ctx(), &sessionpb.LoadRequest{SessionId: "nope"})
	if code := status.Code(err); code != codes.NotFound {
		t.Errorf("Load status code: got %v, want NotFound", code)
	}
}

// K34: create rejects a duplicate id, in memory and on a persisted log. A
// Create whose header equals an unmaterialised registration succeeds
// (docs/design.md "Retries and outcomes").
func TestContract_K34_CreateRejectsADuplicateID(t *testing.T) {
	n := ctNode(t)
	const id = "dup"
	const inBackend = `session "dup" already exists in this backend`
	const onDisk = `session "dup" already has a persisted log on disk; load/resume it instead of creating`
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/w"), RequestId: "k34-first"}); err != nil {
		t.Fatalf("Create: %v", err)
	}
	ctCreate(t, n, ctMeta(id, "/w")) // equal header, not materialised: accepted
	other := ctMeta(id, "/w")
	other.CreatedAt = 2000
	_, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: other})
	ctWantErr(t, "Create with another header", err, sessionstore.ReasonAlreadyExists, inBackend)
	_, err = n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/other")})
	ctWantErr(t, "Create at another cwd", err, sessionstore.ReasonAlreadyExists, inBackend)

	ctAppend(t, n, id, ctOneTurnLog()...)
	_, err = n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/w")})
	ctWantErr(t, "Create after materialisation", err, sessionstore.ReasonAlreadyExists, onDisk)
	// A repeated request id returns the first response.
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/w"), RequestId: "k34-first"}); err != nil {
		t.Errorf("repeat of the first Create's request id: got %v, want its first (successful) response", err)
	}

	n = n.Restart()
	_, err = n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/w")})
	ctWantErr(t, "Create on a restarted node", err, sessionstore.ReasonAlreadyExists, onDisk)
	_, err = ctRaw(n).Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, "/w"), RequestId: "k34-raw"})
	if code := status.Code(err); code != codes.AlreadyExists {
		t.Errorf("Create status code: got %v, want AlreadyExists", code)
	}
	ctEqualEvents(t, "log after refused creates", ctLoad(t, n, id).GetEvents(), ctOneTurnLog())
}

// ctLocatePath is Locate's path for a header.
func ctLocatePath(t *testing.T, n *testNode, h *sessionpb.SessionHeader) string {
	t.Helper()
	loc, err := n.Client.Locate(n.ctx(), &sessionpb.LocateRequest{Header: h})
	if err != nil {
		t.Fatalf("Locate(%q): %v", h.GetId(), err)
	}
	if loc.GetKind() != "jsonl" {
		t.Errorf("Locate kind: got %q, want jsonl", loc.GetKind())
	}
	return loc.GetPath()
}

// ctFormatRefusal checks that Load, Inspect and ReadFrom all refuse a session
// with FORMAT_UNSUPPORTED and exactly msg, as FAILED_PRECONDITION.
func ctFormatRefusal(t *testing.T, n *testNode, id, msg string) {
	t.Helper()
	_, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
	ctWantErr(t, "Load", err, sessionstore.ReasonFormatUnsupported, msg)
	_, err = n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
	ctWantErr(t, "Inspect", err, sessionstore.ReasonFormatUnsupported, msg)
	_, err = n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
	ctWantErr(t, "ReadFrom", err, sessionstore.ReasonFormatUnsupported, msg)
	_, err = ctRaw(n).Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id, RequestId: "raw-" + id})
	if code := status.Code(err); code != codes.FailedPrecondition {
		t.Errorf("Load status code: got %v, want FailedPrecondition", code)
	}
}

// K35: a newer format version is refused on load, naming the upgrade direction.
func TestContract_K35_RejectsANewerFormatVersion(t *testing.T) {
	n := ctSharedNode(t)
	h := &sessionpb.SessionHeader{Version: 99, Id: "v99", CreatedAt: 1, Cwd: ctStr("/w")}
	// Strict (the default) refuses the header; the reference's rules store it.
	_, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h})
	ctWantErr(t, "strict Create of a v99 header", err, sessionstore.ReasonFormatUnsupported,
		`session "v99" header has log format v99; this store reads format v0 only, so no read would open the log; write it with validation REFERENCE to store it anyway`)
	refusal := `session "v99" uses log format v99, but this harness reads only v0: the log was written by a newer harness ` + "\u2014" + ` upgrade the harness to open it`
	c := ctCreateRef(t, n, h)
	ctWantUnreadable(t, "reference Create of a v99 header", c.GetReadable(), c.GetUnreadableReason(), c.GetUnreadableMessage(), sessionstore.ReasonFormatUnsupported, refusal)
	a := ctAppendRef(t, n, "v99", ctOneTurnLog()...)
	ctWantUnreadable(t, "reference Append to a v99 session", a.GetReadable(), a.GetUnreadableReason(), a.GetUnreadableMessage(), sessionstore.ReasonFormatUnsupported, refusal)
	if listed, _ := ctListed(t, n, "v99"); !listed {
		t.Errorf("a v99 session: got absent from List, want listed (listing never checks the version)")
	}
	path := ctLocatePath(t, n, h)
	ctFormatRefusal(t, n, "v99", `session "v99" uses log format v99, but this harness reads only v0: the log was written by a newer harness `+
		"\u2014"+` upgrade the harness to open it (raw log: `+path+`)`)
}

// K36: an older format version is refused without claiming an upgrade path.
func TestContract_K36_RejectsAnOlderFormatVersion(t *testing.T) {
	n := ctSharedNode(t)
	h := &sessionpb.SessionHeader{Version: -1, Id: "v-1", CreatedAt: 1, Cwd: ctStr("/w")}
	if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h}); !errors.Is(err, sessionstore.ErrFormatUnsupported) {
		t.Errorf("strict Create of a v-1 header: %v, want FORMAT_UNSUPPORTED", err)
	}
	ctCreateRef(t, n, h)
	ctAppendRef(t, n, "v-1", ctOneTurnLog()...)
	path := ctLocatePath(t, n, h)
	ctFormatRefusal(t, n, "v-1", `session "v-1" uses log format v-1, older than the supported v0, and this build ships no upgrade path for it (raw log: `+path+`)`)
}

// K37: an unknown event type is refused on read unless marked ignorable;
// append never refuses it.
func TestContract_K37_RejectsUnknownEventTypeUnlessIgnorable(t *testing.T) {
	n := ctSharedNode(t)
	h := ctMeta("future", "/w")
	ctCreate(t, n, h)
	unknown := append(ctOneTurnLog(), ctEv("future/event", 6, 99, `{"payload":1}`))
	_, err := ctTryAppend(t, n, "future", unknown...)
	ctWantErr(t, "strict Append of an unknown type", err, sessionstore.ReasonFormatUnsupported,
		`session "future": event type "future/event" (seq 6) is not one this store knows (it reads log format v0) and is not marked "ignorable": true, so a read would refuse the log; write it with validation REFERENCE to store it anyway`)
	a := ctAppendRef(t, n, "future", unknown...)
	if a.GetDuplicate() || a.GetNextSeq() != 7 {
		t.Errorf("reference Append after the refused one: duplicate=%v next_seq=%d, want a first write to 7 (the refusal wrote nothing)", a.GetDuplicate(), a.GetNextSeq())
	}
	ctWantUnreadable(t, "reference Append of an unknown type", a.GetReadable(), a.GetUnreadableReason(), a.GetUnreadableMessage(), sessionstore.ReasonFormatUnsupported,
		`session "future" contains event type "future/event" (seq 6) unknown to this harness and not marked ignorable; refusing to interpret the log `+"\u2014"+` it was likely written by a newer harness`)
	path := ctLocatePath(t, n, h)
	ctFormatRefusal(t, n, "future", `session "future" contains event type "future/event" (seq 6) unknown to this harness and not marked ignorable; `+
		`refusing to interpret the log `+"\u2014"+` it was likely written by a newer harness (raw log: `+path+`)`)

	ignorable := `{"type":"future/event","seq":6,"time":99,"data":{"payload":1},"ignorable":true}`
	ctCreate(t, n, ctMeta("future-ignorable", "/w"))
	if r := ctAppend(t, n, "future-ignorable", append(ctOneTurnLog(), ignorable)...); r.Readable == nil || !*r.Readable || r.GetUnreadableReason() != "" {
		t.Errorf("strict append of a readable log: readable %v %q, want true", r.Readable, r.GetUnreadableReason())
	}
	ctEqualEvents(t, "Load with an ignorable unknown event", ctLoad(t, n, "future-ignorable").GetEvents(), append(ctOneTurnLog(), ignorable))
}

// K38: a header with parentSession round-trips (as do the other optional
// header fields, which the reference round-trips through live Sessions in
// K5 and K6).
func TestContract_K38_RoundTripsParentSession(t *testing.T) {
	n := ctSharedNode(t)
	h := &sessionpb.SessionHeader{Version: 0, Id: "forked-child", CreatedAt: 1, Cwd: ctStr("/w"), ParentSession: ctStr("the-parent")}
	ctCreate(t, n, h)
	ctAppend(t, n, "forked-child", ctOneTurnLog()...)
	if got := ctLoad(t, n, "forked-child").GetHeader().GetParentSession(); got != "the-parent" {
		t.Errorf("loaded parentSession: got %q, want the-parent", got)
	}

	seed, depth := int64(3), int32(2)
	full := &sessionpb.SessionHeader{Version: 0, Id: "full-header", CreatedAt: 1755600000000, Cwd: ctStr("/w"),
		ParentSession: ctStr("root"), SeedLength: &seed, Origin: ctStr("subagent"), DelegationDepth: &depth, AgentPreset: ctStr("coder")}
	ctCreate(t, n, full)
	ctAppend(t, n, "full-header", ctOneTurnLog()...)
	got := ctLoad(t, n, "full-header").GetHeader()
	if got.GetParentSession() != "root" || got.GetSeedLength() != 3 || got.GetOrigin() != "subagent" ||
		got.GetDelegationDepth() != 2 || got.GetAgentPreset() != "coder" || got.GetCreatedAt() != 1755600000000 {
		t.Errorf("loaded header: got %v, want every optional field as created", got)
	}
	want := `{"type":"session","version":0,"id":"full-header","createdAt":1755600000000,"cwd":"/w","parentSession":"root","seedLength":3,"origin":"subagent","delegationDepth":2,"agentPreset":"coder"}`
	if line, _, _ := strings.Cut(string(ctReadRaw(t, n, "full-header").GetContent()), "\n"); line != want {
		t.Errorf("header line: got %s, want %s", line, want)
	}
}

// K40: the reference truncates a torn tail and closes the open turn on load.
// bbolt holds no torn tail, so this is the same open turn across a restart:
// Load on the fresh instance commits the closers.
func TestContract_K40_OpenTurnClosedByLoadAfterRestart(t *testing.T) {
	n := ctNode(t)
	const id = "torn"
	ctCreate(t, n, ctMeta(id, "/w"))
	ctAppend(t, n, id, ctOneTurnLog()...)
	ctAppend(t, n, id, ctEv("turn/start", 6, 7, `{"turn":2}`), ctEv("step/start", 7, 8, `{"turn":2,"step":1}`))
	before := ctRevision(t, n, id)

	n = n.Restart()
	// The first read after the restart is a linearizable one, before any
	// write; it must be served (bounded here so that a hang fails fast).
	rctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	snaps, err := n.Client.ListSnapshots(rctx, &sessionpb.ListSnapshotsRequest{})
	cancel()
	if err != nil {
		t.Errorf("first ListSnapshots after restart (no write yet): got %v, want it served", err)
		// Any committed command lets reads through again; the rest of the
		// test still runs.
		ctCreate(t, n, ctMeta("k40-unblock", ""))
	} else if len(snaps.GetSnapshots()) != 1 || snaps.GetSnapshots()[0].GetRevision() != before {
		t.Errorf("ListSnapshots after restart: got %v, want %q at the unchanged revision %q", snaps.GetSnapshots(), id, before)
	}
	v := ctLoad(t, n, id)
	if got := ctSeqs(t, v.GetEvents()); !slices.Equal(got, ctRange(0, 9)) {
		t.Errorf("Load seqs: got %v, want 0…9", got)
	}
	wantTypes := []string{"turn/start", "user/message", "step/start", "assistant/message", "step/end", "turn/end",
		"turn/start", "step/start", "step/end", "turn/end"}
	if got := ctTypes(t, v.GetEvents()); !slices.Equal(got, wantTypes) {
		t.Errorf("Load types: got %v, want %v", got, wantTypes)
	}
	if len(v.GetEvents()) == 10 {
		ctJSONEq(t, "last reason", ctGet(ctParse(t, v.GetEvents()[9]), "data", "reason"), `{"kind":"interrupted"}`)
	}
	if !v.GetRepaired() || v.GetRevision() == before {
		t.Errorf("Load: got repaired=%v revision=%q, want true and a change from %q", v.GetRepaired(), v.GetRevision(), before)
	}
	ctAppend(t, n, id, ctEv("turn/start", 10, 9, `{"turn":3}`), ctEv("turn/end", 11, 10, `{"turn":3,"reason":{"kind":"completed"}}`))
	if got := ctSeqs(t, ctLoad(t, n, id).GetEvents()); !slices.Equal(got, ctRange(0, 11)) {
		t.Errorf("reload seqs: got %v, want 0…11", got)
	}
}

// The stored log and closers of docs/contract.md#log-crash, verbatim.
const (
	ctGoldenHeaderLine = `{"type":"session","version":0,"id":"crash-1","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`
	ctGoldenStored     = `{"type":"turn/start","seq":0,"time":1755600001000,"data":{"turn":1}}
{"type":"step/start","seq":1,"time":1755600001001,"data":{"turn":1,"step":1}}
{"type":"user/message","seq":2,"time":1755600001002,"data":{"content":[{"type":"text","text":"Run the tests and show tsconfig.json"}],"source":{"kind":"user"},"role":"user","id":"0f2d7c8e-1111-4a1a-8a1a-000000000002"},"surfaceOp":"append"}
{"type":"request/header","seq":3,"time":1755600001003,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}
{"type":"assistant/message","seq":4,"time":1755600001500,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"},{"type":"tool-call","id":"call_b","name":"read","arguments":"{\"path\":\"tsconfig.json\"}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"0f2d7c8e-1111-4a1a-8a1a-000000000004"}},"surfaceOp":"append"}
{"type":"tool/call","seq":5,"time":1755600001501,"data":{"turn":1,"step":1,"callId":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"}}`
	ctGoldenClosers = `{"type":"tool/result","seq":6,"time":1755600001501,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call_a-6","role":"user","source":{"kind":"tool","callId":"call_a"},"content":[{"type":"tool-result","toolCallId":"call_a","isError":true,"content":[{"type":"text","text":"The tool call was interrupted after it was recorded, but no result was durably recorded. Its outcome is unknown. Decide whether to retry from the tool semantics: retry only if the operation is read-only or idempotent; if it may have side effects, first verify external state or ask the user. Do not retry blindly."}]}]},"error":{"name":"ToolOutcomeUnknownError","code":"TOOL_OUTCOME_UNKNOWN"}},"surfaceOp":"append","sourceEventSeqs":[5]}
{"type":"tool/result","seq":7,"time":1755600001501,"data":{"turn":1,"step":1,"message":{"id":"interrupted-tool-result-call_b-7","role":"user","source":{"kind":"tool","callId":"call_b"},"content":[{"type":"tool-result","toolCallId":"call_b","isError":true,"content":[{"type":"text","text":"The tool call was interrupted before the Harness recorded it as started. Retry it if it is still needed."}]}]},"error":{"name":"ToolNotStartedError","code":"TOOL_NOT_STARTED"}},"surfaceOp":"append"}
{"type":"step/end","seq":8,"time":1755600001501,"data":{"turn":1,"step":1}}
{"type":"turn/end","seq":9,"time":1755600001501,"data":{"turn":1,"reason":{"kind":"interrupted"}}}`
)

// Golden (docs/contract.md#log-crash): the four closers of a crash mid-turn with pending tool
// calls, byte for byte, and the raw text after the repair.
func TestContract_Golden_12_3_CrashMidTurnClosers(t *testing.T) {
	n := ctSharedNode(t)
	stored := strings.Split(ctGoldenStored, "\n")
	closers := strings.Split(ctGoldenClosers, "\n")
	ctCreate(t, n, &sessionpb.SessionHeader{Version: 0, Id: "crash-1", CreatedAt: 1755600000000, Cwd: ctStr("/home/u/proj")})
	ctAppend(t, n, "crash-1", stored...)

	load := ctInspectThenLoad(t, n, "crash-1", stored, closers)
	if evs := load.GetEvents(); len(evs) == 10 {
		ctEqualEvents(t, "the four closers", evs[6:], closers)
	}
	raw := ctReadRaw(t, n, "crash-1")
	want := ctGoldenHeaderLine + "\n" + ctGoldenStored + "\n" + ctGoldenClosers + "\n"
	if got := string(raw.GetContent()); got != want {
		t.Errorf("ReadRaw content:\n got %q\nwant %q", got, want)
	}
	if raw.GetFilename() != "session.jsonl" {
		t.Errorf("ReadRaw filename: got %q, want session.jsonl", raw.GetFilename())
	}
	resp := ctAppend(t, n, "crash-1", ctEv("turn/start", 10, 1755600002000, `{"turn":2}`))
	if resp.GetNextSeq() != 11 {
		t.Errorf("next append: got next_seq %d, want 11", resp.GetNextSeq())
	}
}

// Artifact: after appends and a repair, each artifact decodes with Debian's
// zstd to exactly ReadRaw's text, its first frame is exactly the header line,
// every frame is checksummed and holds whole lines (the writer puts a pass's
// lines of a session in one frame, where the reference writes a frame per
// write), and ids and cwds that need escaping stay inside <dir>/artifacts.
func TestContract_Artifact_DecodesWithZstdToReadRaw(t *testing.T) {
	n := ctNode(t)
	zstd := ctZstdPath(t)
	root := filepath.Join(n.dir, "artifacts")
	const oddCwd = "/tmp/p <>&\u2028 q/../x"
	sessions := []*sessionpb.SessionHeader{
		ctMeta("..", oddCwd),
		ctMeta("a/b", oddCwd),
		ctMeta("x <>&\u2028 y", "/home/u/proj"),
		ctMeta("../../escape", ""),
		ctMeta(".", "/"),
	}
	paths := map[string]string{}
	for _, h := range sessions {
		id := h.GetId()
		ctCreate(t, n, h)
		ctAppend(t, n, id, ctOneTurnLog()...)
		ctAppend(t, n, id, ctEv("turn/start", 6, 7, `{"turn":2}`), ctEv("step/start", 7, 8, `{"turn":2,"step":1}`))
		if v := ctLoad(t, n, id); !v.GetRepaired() {
			t.Fatalf("Load(%q): got repaired=false, want a committed repair", id)
		}
		project := "_no-cwd"
		if h.Cwd != nil {
			k, err := sessionlog.ProjectKey(h.GetCwd())
			if err != nil {
				t.Fatalf("ProjectKey(%q): %v", h.GetCwd(), err)
			}
			project = k
		}
		seg, err := sessionlog.EncodeSegment(id)
		if err != nil {
			t.Fatalf("EncodeSegment(%q): %v", id, err)
		}
		path := filepath.Join(root, project, seg, "session.jsonl.zstd")
		paths[id] = path
		if got := ctLocatePath(t, n, h); got != path {
			t.Errorf("Locate(%q): got %q, want %q", id, got, path)
		}
		rel, err := filepath.Rel(root, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) ||
			len(strings.Split(rel, string(filepath.Separator))) != 3 {
			t.Errorf("artifact of %q at %q is not three segments inside %q", id, path, root)
		}
	}
	n.WaitArtifacts()

	tmp := t.TempDir()
	for i, h := range sessions {
		id := h.GetId()
		raw := ctReadRaw(t, n, id).GetContent()
		data, err := os.ReadFile(paths[id])
		if err != nil {
			t.Errorf("artifact of %q: %v", id, err)
			continue
		}
		cp := filepath.Join(tmp, "copy-"+strconv.Itoa(i)+".jsonl.zstd")
		if err := os.WriteFile(cp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if got := ctZstdDecode(t, zstd, cp); !bytes.Equal(got, raw) {
			t.Errorf("artifact of %q: zstd -d gives\n  %q\nwant ReadRaw's\n  %q", id, got, raw)
		}

		frames, err := ctZstdFrames(data)
		if err != nil {
			t.Errorf("artifact of %q: %v", id, err)
			continue
		}
		// The store's own frame scanner must agree with this independent one.
		scanned, torn, err := storage.ScanFrames(data)
		if err != nil || torn != -1 || len(scanned) != len(frames) {
			t.Errorf("artifact of %q: storage.ScanFrames gives %v, torn %d, %v; want the %d frames %v and no torn frame",
				id, scanned, torn, err, len(frames), frames)
		} else {
			for j := range scanned {
				if scanned[j].Start != int64(frames[j].Start) || scanned[j].End != int64(frames[j].End) {
					t.Errorf("artifact of %q: frame %d: storage.ScanFrames gives %v, want [%d, %d)", id, j, scanned[j], frames[j].Start, frames[j].End)
				}
			}
		}
		if len(frames) < 2 {
			t.Errorf("artifact of %q: got %d frames, want the header's and at least one of events", id, len(frames))
		}
		for j := 1; j < len(frames); j++ {
			fp := filepath.Join(tmp, "frame-"+strconv.Itoa(i)+"-"+strconv.Itoa(j)+".zst")
			if err := os.WriteFile(fp, data[frames[j].Start:frames[j].End], 0o600); err != nil {
				t.Fatal(err)
			}
			if text := ctZstdDecode(t, zstd, fp); len(text) == 0 || text[len(text)-1] != '\n' {
				t.Errorf("artifact of %q: frame %d decodes to %q, want whole lines", id, j, text)
			}
		}
		for j, f := range frames {
			if !f.Checksum {
				t.Errorf("artifact of %q: frame %d has no content checksum", id, j)
			}
		}
		if len(frames) == 0 {
			continue
		}
		first := filepath.Join(tmp, "first-"+strconv.Itoa(i)+".zst")
		if err := os.WriteFile(first, data[frames[0].Start:frames[0].End], 0o600); err != nil {
			t.Fatal(err)
		}
		wantHeader := string(sessionlog.HeaderLine(sessionstore.Header{Version: 0, ID: id, CreatedAt: 1000, Cwd: h.Cwd})) + "\n"
		if got := string(ctZstdDecode(t, zstd, first)); got != wantHeader {
			t.Errorf("artifact of %q: first frame decodes to %q, want exactly the header line %q", id, got, wantHeader)
		}
		if !bytes.HasPrefix(raw, []byte(wantHeader)) {
			t.Errorf("ReadRaw of %q: got %q, want it to start with %q", id, raw, wantHeader)
		}
	}

	// Nothing was written anywhere else under the artifact root.
	want := map[string]bool{}
	for _, p := range paths {
		want[p] = true
	}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && !want[p] {
			t.Errorf("unexpected file under the artifact root: %q", p)
		}
		return nil
	})
	if err != nil {
		t.Errorf("walk %s: %v", root, err)
	}
}

// JSON the server writes itself (header lines, closers) serialises as
// JavaScript's JSON.stringify: no escaping of <>& or U+2028/U+2029.
func TestContract_JSStringify_ServerWrittenJSONIsNotEscaped(t *testing.T) {
	n := ctSharedNode(t)
	const id = "js-1"
	const cwd = "/home/u/<>&\u2028\u2029 x"
	const callID = "call<>&\u2028\u2029"
	ctCreate(t, n, ctMeta(id, cwd))
	stored := []string{
		ctEv("turn/start", 0, 1, `{"turn":1}`),
		ctEv("step/start", 1, 2, `{"turn":1,"step":1}`),
		ctSurf("assistant/message", 2, 3, `{"turn":1,"step":1,"message":{"id":"js-assistant","role":"assistant","content":[{"type":"tool-call","id":"`+callID+`","name":"bash","arguments":"{}"}],"source":{"kind":"model","provider":"mock","model":"mock"}}}`),
		ctEv("tool/call", 3, 4, `{"turn":1,"step":1,"callId":"`+callID+`","name":"bash","arguments":"{}"}`),
	}
	ctAppend(t, n, id, stored...)
	closers := []string{ctToolResultCloser(4, 4, 1, 1, callID, 3), ctStepEndCloser(5, 4, 1, 1), ctTurnEndCloser(6, 4, 1)}
	ctInspectThenLoad(t, n, id, stored, closers)

	raw := string(ctReadRaw(t, n, id).GetContent())
	header := `{"type":"session","version":0,"id":"js-1","createdAt":1000,"cwd":"` + cwd + `","delegationDepth":0}`
	if line, _, _ := strings.Cut(raw, "\n"); line != header {
		t.Errorf("header line: got %q, want %q", line, header)
	}
	want := header + "\n" + strings.Join(append(stored, closers...), "\n") + "\n"
	if raw != want {
		t.Errorf("ReadRaw content:\n got %q\nwant %q", raw, want)
	}
	for _, esc := range []string{`\u003c`, `\u003e`, `\u0026`, `\u2028`, `\u2029`} {
		if strings.Contains(raw, esc) {
			t.Errorf("ReadRaw content contains the escape %s; JSON.stringify writes the character itself", esc)
		}
	}
}

// Recorded logs: the reference harness's own recorded sessions (packed rows
// expanded, docs/events.md#packed-rows) append in batches of 10 and load with the
// event counts of testdata/recorded/README.md.
func TestContract_Recorded_LogsLoadWithTheirEventCounts(t *testing.T) {
	dir := refdata.RecordedDir(t)
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no recorded logs in %s (%v)", dir, err)
	}
	wantCounts := map[string]int{
		"web-fresh-round-trip.session.jsonl":    94,
		"web-plan-mode.session.jsonl":           61,
		"cli-parallel-file-reads.session.jsonl": 27,
	}
	n := ctSharedNode(t)
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) {
			h, events, err := ctReadRecorded(f)
			if err != nil {
				t.Fatal(err)
			}
			want, ok := wantCounts[filepath.Base(f)]
			if !ok {
				want = len(events)
			}
			if len(events) != want {
				t.Fatalf("expanded log: got %d events, want %d", len(events), want)
			}
			ctCreate(t, n, h)
			for i := 0; i < len(events); i += 10 {
				ctAppend(t, n, h.GetId(), events[i:min(i+10, len(events))]...)
			}
			v := ctLoad(t, n, h.GetId())
			if len(v.GetEvents()) != want || v.GetRepaired() || v.GetNextSeq() != int64(want) {
				t.Errorf("Load: got %d events, repaired=%v, next_seq=%d; want %d, false, %d",
					len(v.GetEvents()), v.GetRepaired(), v.GetNextSeq(), want, want)
			}
			if got := ctSeqs(t, v.GetEvents()); !slices.Equal(got, ctRange(0, int64(want-1))) {
				t.Errorf("Load seqs: got %v, want 0…%d", got, want-1)
			}
			if got := len(ctReadFrom(t, n, h.GetId(), 0).GetEvents()); got != want {
				t.Errorf("ReadFrom(0): got %d events, want %d", got, want)
			}
		})
	}
}
