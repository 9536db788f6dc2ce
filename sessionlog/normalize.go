package sessionlog

import (
	"errors"
	"strings"

	"github.com/sessionstore/sessionstore"
)

// working is one event while the legacy migrations run: the stored event
// plus its current type and data, which a migration may replace.
type working struct {
	e           *storedEvent
	typ         *value
	data        *value
	typeChanged bool
	dataChanged bool
}

func (w *working) is(t string) bool { return w.typ.strEq(t) }

func (w *working) setData(d *value) { w.data, w.dataChanged = d, true }

func storedErr(format string, args ...any) error {
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored, format, args...)
}

// Normalize applies the legacy normalisation of docs/events.md#legacy-shapes and the read
// validation the reference runs on every read path (readFrom included):
// refused legacy vocabulary, malformed legacy shapes, the turn/end shape,
// and the message shapes of docs/events.md#message-shapes (INVALID_STORED_EVENT, unwrapped); then
// the unknown-type rule of docs/events.md#unknown-types (FORMAT_UNSUPPORTED with the raw-log
// suffix). Events that need no change are returned as the identical input
// slices; changed events are re-serialised as JSON.stringify would write the
// migrated object (original key order, new keys appended).
func Normalize(sessionID string, events [][]byte, rawLogPath string) ([][]byte, error) {
	evs, err := parseLog(events)
	if err != nil {
		return nil, err
	}
	if err := assertSupportedEvents(sessionID, evs); err != nil {
		return nil, err
	}
	out := make([][]byte, len(events))
	types := make([]*value, len(events))
	// Message ids by seq, so that a legacy replacement result inherits the
	// id of the result it replaces.
	messageIDs := map[float64]string{}
	for i, e := range evs {
		var err error
		out[i], types[i], err = normalizeEvent(sessionID, e, messageIDs)
		if err != nil {
			return nil, err
		}
	}
	for i, e := range evs {
		if err := unknownType(sessionID, e, types[i], rawLogPath); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// dataRuleTypes are the event types whose data a migration or a shape rule
// below reads. Of any other event, only data.message.id matters here.
var dataRuleTypes = map[string]bool{
	"turn/start": true, "turn/end": true, "steering/message": true,
	"user/message": true, "assistant/message": true, "tool/result": true,
}

// normalizeEvent runs the migrations and shape checks of one event, given the
// message ids of the events before it (which it extends). It returns the
// event to serve (the stored bytes when nothing changed) and its type.
func normalizeEvent(sessionID string, e *storedEvent, messageIDs map[float64]string) ([]byte, *value, error) {
	typ := e.get("type")
	if !typ.isString() || !dataRuleTypes[typ.s] {
		// Nothing below changes such an event, and only eventMessageID
		// looks into its data: parse data.message alone, not the whole
		// data (a chunk's text, a tool's output), most of every log.
		if seq := e.get("seq"); seq != nil && seq.k == kNumber {
			if msg := e.member("data", "message"); msg.isRecord() {
				if id := msg.get("id"); id.isString() {
					messageIDs[seq.n] = id.s
				}
			}
		}
		return e.raw, typ, nil
	}
	return normalizeEventFull(sessionID, e, messageIDs)
}

// normalizeEventFull is normalizeEvent for any type, with the whole data
// parsed.
func normalizeEventFull(sessionID string, e *storedEvent, messageIDs map[float64]string) ([]byte, *value, error) {
	w := &working{e: e, typ: e.get("type"), data: e.get("data")}
	if err := migrateTurnStart(sessionID, w); err != nil {
		return nil, nil, err
	}
	if err := migrateTurnEnd(sessionID, w); err != nil {
		return nil, nil, err
	}
	if err := migrateSteering(sessionID, w); err != nil {
		return nil, nil, err
	}
	migrateMessage(sessionID, w, messageIDs)
	if w.typ.isString() {
		if msg := messageShapeProblem(w.typ.s, w.data, "session event at seq "+seqText(e)); msg != "" {
			return nil, nil, storedErr("%s", msg)
		}
	}
	if seq := e.get("seq"); seq != nil && seq.k == kNumber {
		if id := eventMessageID(w); id != nil {
			messageIDs[seq.n] = id.s
		}
	}
	if !w.typeChanged && !w.dataChanged {
		return e.raw, w.typ, nil
	}
	repl := map[string]*value{}
	if w.typeChanged {
		repl["type"] = w.typ
	}
	if w.dataChanged {
		repl["data"] = w.data
	}
	return appendJSON(nil, e.toValue(repl)), w.typ, nil
}

// unknownType is the unknown-type rule of docs/events.md#unknown-types for one normalised event.
func unknownType(sessionID string, e *storedEvent, typ *value, rawLogPath string) error {
	if ig := e.get("ignorable"); (typ.isString() && KnownEventTypes[typ.s]) || (ig != nil && ig.k == kTrue) {
		return nil
	}
	return sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
		"session %s contains event type %s (seq %s) unknown to this harness and not marked ignorable; refusing to interpret the log \u2014 it was likely written by a newer harness%s",
		sessionstore.Quote(sessionID), sessionstore.Quote(jsString(typ)), seqText(e), rawLogSuffix(rawLogPath))
}

// assertSupportedEvents refuses the retired vocabulary of docs/events.md#legacy-shapes. As in the
// reference, each shape is searched over the whole log in turn, so a
// request/header-delta anywhere is reported before an earlier mode/set.
func assertSupportedEvents(sessionID string, evs []*storedEvent) error {
	id := sessionstore.Quote(sessionID)
	for _, e := range evs {
		if e.get("type").strEq("request/header-delta") {
			return storedErr("session %s contains unsupported legacy request/header-delta event at seq %s", id, seqText(e))
		}
	}
	for _, e := range evs {
		if e.get("type").strEq("mode/set") {
			return storedErr("session %s contains unsupported legacy mode/set event at seq %s", id, seqText(e))
		}
	}
	for _, e := range evs {
		if !e.get("type").strEq("request/header") {
			continue
		}
		reason, err := jsGet(e.get("data"), "reason")
		if err != nil {
			return err
		}
		if reason.strEq("fallback") {
			return storedErr(`session %s contains unsupported legacy request/header reason "fallback" at seq %s`, id, seqText(e))
		}
	}
	return nil
}

func malformed(sessionID, what string, e *storedEvent) error {
	return storedErr("session %s contains malformed pre-react-loop %s at seq %s", sessionstore.Quote(sessionID), what, seqText(e))
}

// migrateTurnStart drops the obsolete trigger of a complete old turn/start.
func migrateTurnStart(sessionID string, w *working) error {
	if !w.is("turn/start") || !w.data.isRecord() || !w.data.has("trigger") {
		return nil
	}
	d := w.data
	turn := d.get("turn")
	trigger := d.get("trigger")
	if !turn.isSafeInteger() || turn.n < 1 || !d.hasOnlyKeys([]string{"turn", "trigger"}) ||
		!trigger.isRecord() || !trigger.get("kind").isString() || trigger.get("kind").s == "" {
		return malformed(sessionID, "turn/start", w.e)
	}
	w.setData(jsObj(jsMem("turn", turn)))
	return nil
}

// migrateTurnEnd upgrades the old turn-end reasons and checks the shape of
// every turn/end (exactly turn and reason, turn >= 1, reason.kind a string).
func migrateTurnEnd(sessionID string, w *working) error {
	if !w.is("turn/end") || !w.data.isRecord() {
		return nil
	}
	d := w.data
	bad := func() error { return malformed(sessionID, "turn/end", w.e) }
	turn := d.get("turn")
	reason := d.get("reason")
	if !turn.isSafeInteger() || turn.n < 1 || !d.hasOnlyKeys([]string{"turn", "reason"}) ||
		!reason.isRecord() || !reason.get("kind").isString() {
		return bad()
	}
	only := []string{"kind"}
	var current *value
	switch reason.get("kind").s {
	case "completed", "blocked", "max-tokens", "interrupted":
		if !reason.hasOnlyKeys(only) {
			return bad()
		}
		return nil
	case "aborted":
		if reason.has("reason") {
			return nil
		}
		if !reason.hasOnlyKeys(only) {
			return bad()
		}
		current = jsObj(jsMem("kind", jsStr("aborted")), jsMem("reason", jsObj(jsMem("kind", jsStr("legacy")))))
	case "disposed":
		if !reason.hasOnlyKeys(only) {
			return bad()
		}
		current = jsObj(jsMem("kind", jsStr("aborted")), jsMem("reason", jsObj(jsMem("kind", jsStr("disposed")))))
	case "error":
		if reason.has("error") {
			return nil
		}
		if step := reason.get("step"); !step.isSafeInteger() || step.n < 0 {
			return bad()
		}
		failure := reason.get("failure")
		absentOr := func(k string, ok func(*value) bool) bool { return !failure.has(k) || ok(failure.get(k)) }
		isNum := func(v *value) bool { return v != nil && v.k == kNumber }
		isStr := func(v *value) bool { return v.isString() }
		if failure.isRecord() && reason.hasOnlyKeys([]string{"kind", "step", "failure"}) &&
			failure.hasOnlyKeys([]string{"message", "code"}, "status", "providerRetryAfterMs", "requestId") &&
			failure.get("message").isString() && failure.get("code").isString() &&
			absentOr("status", isNum) && absentOr("providerRetryAfterMs", isNum) && absentOr("requestId", isStr) {
			current = jsObj(jsMem("kind", jsStr("error")), jsMem("error", failure))
			break
		}
		keys := []string{"kind", "step", "message"}
		if reason.has("code") {
			keys = append(keys, "code")
		}
		code := reason.get("code")
		if !reason.hasOnlyKeys(keys) || !reason.get("message").isString() || (reason.has("code") && !code.isString()) {
			return bad()
		}
		if !code.isString() {
			code = jsStr("UNKNOWN")
		}
		current = jsObj(jsMem("kind", jsStr("error")),
			jsMem("error", jsObj(jsMem("message", reason.get("message")), jsMem("code", code))))
	default:
		// Unknown kinds are merge-extensible and pass through untouched.
		return nil
	}
	w.setData(d.with("reason", current))
	return nil
}

func legacyMessageID(sessionID string, e *storedEvent) *value {
	return jsStr("legacy-message:" + sessionID + ":" + seqText(e))
}

// migrateSteering turns the removed steering/message into a user/message:
// the wrapped {turn, message} form keeps its message, the flat {turn,
// content, source} form gains a legacy id.
func migrateSteering(sessionID string, w *working) error {
	if !w.is("steering/message") {
		return nil
	}
	d := w.data
	if !d.isRecord() {
		return malformed(sessionID, "steering/message", w.e)
	}
	turn := d.get("turn")
	if wrapped := d.get("message"); wrapped.isRecord() && turn.isSafeInteger() && d.hasOnlyKeys([]string{"turn", "message"}) {
		w.typ, w.typeChanged = jsStr("user/message"), true
		w.setData(wrapped)
		return nil
	}
	if !turn.isSafeInteger() || !d.hasOnlyKeys([]string{"turn", "content", "source"}) {
		return malformed(sessionID, "steering/message", w.e)
	}
	w.typ, w.typeChanged = jsStr("user/message"), true
	w.setData(d.without("turn").with("id", legacyMessageID(sessionID, w.e)).with("role", jsStr("user")))
	return nil
}

// migrateMessage upgrades pre-identity message events into the current
// wrapper shape. Current-looking malformed events are left untouched so that
// validation rejects them rather than disguising corruption as legacy data.
func migrateMessage(sessionID string, w *working, messageIDs map[float64]string) {
	d := w.data
	if !d.isRecord() || !w.typ.isString() {
		return
	}
	switch w.typ.s {
	case "user/message":
		if d.has("id") || d.has("role") || d.has("message") || !d.has("content") || !d.has("source") {
			return
		}
		w.setData(d.with("id", legacyMessageID(sessionID, w.e)).with("role", jsStr("user")))
	case "assistant/message":
		if d.has("message") || !d.has("content") || !d.has("provenance") {
			return
		}
		source := jsObj(jsMem("kind", jsStr("model")))
		if p := d.get("provenance"); p.isRecord() {
			source = p.with("kind", jsStr("model"))
		}
		message := jsObj(
			jsMem("id", legacyMessageID(sessionID, w.e)),
			jsMem("role", jsStr("assistant")),
			jsMem("content", d.get("content")),
			jsMem("source", source),
		)
		w.setData(d.without("content", "provenance").with("message", message))
	case "tool/result":
		if d.has("message") || !d.has("callId") || !d.has("content") || !d.has("isError") {
			return
		}
		callID := d.get("callId")
		id := legacyMessageID(sessionID, w.e)
		if start, ok := replacementStart(w.e); ok {
			id = nil // undefined unless the replaced result had an id
			if prev, found := messageIDs[start]; found {
				id = jsStr(prev)
			}
		}
		message := jsObj(
			jsMem("id", id),
			jsMem("role", jsStr("user")),
			jsMem("content", jsArr(jsObj(
				jsMem("type", jsStr("tool-result")),
				jsMem("toolCallId", callID),
				jsMem("content", d.get("content")),
				jsMem("isError", d.get("isError")),
			))),
			jsMem("source", jsObj(jsMem("kind", jsStr("tool")), jsMem("callId", callID))),
		)
		w.setData(d.without("callId", "content", "isError").with("message", message))
	}
}

// replacementStart reads a replace target, leaving malformed surface
// metadata for the session validator to reject.
func replacementStart(e *storedEvent) (float64, bool) {
	op := e.get("surfaceOp")
	if !op.isRecord() || !op.get("op").strEq("replace") {
		return 0, false
	}
	start := op.get("start")
	if start == nil || start.k != kNumber {
		return 0, false
	}
	return start.n, true
}

// eventMessageID returns the id of the message an event carries, if it is a
// string.
func eventMessageID(w *working) *value {
	d := w.data
	if !d.isRecord() {
		return nil
	}
	msg := d
	if !w.is("user/message") {
		msg = d.get("message")
		if !msg.isRecord() {
			return nil
		}
	}
	if id := msg.get("id"); id.isString() {
		return id
	}
	return nil
}

// messageShapeProblem applies the message-shape rules of docs/events.md#message-shapes to a surface
// event and returns the failure text, or "".
func messageShapeProblem(typ string, data *value, subject string) string {
	if typ != "user/message" && typ != "assistant/message" && typ != "tool/result" {
		return ""
	}
	var record *value
	if data != nil && data.k != kNull && (data.k == kObject || data.k == kArray) {
		record = data
	}
	message := record
	if typ != "user/message" {
		message = record.get("message")
	}
	if message == nil || (message.k != kObject && message.k != kArray) || !message.get("id").isString() || message.get("id").s == "" {
		return subject + " lacks an identified message"
	}
	role := "user"
	if typ == "assistant/message" {
		role = "assistant"
	}
	if !message.get("role").strEq(role) {
		return subject + ` message must have role "` + role + `"`
	}
	source := message.get("source")
	if source == nil || (source.k != kObject && source.k != kArray) || !source.get("kind").isString() || source.get("kind").s == "" {
		return subject + " message has invalid source"
	}
	content := message.get("content")
	if content == nil || content.k != kArray {
		return subject + " message has invalid content"
	}
	if typ == "assistant/message" {
		if !source.get("kind").strEq("model") || !hasProviderModel(source) {
			return subject + " message must have model source"
		}
		return ""
	}
	if typ != "tool/result" {
		return ""
	}
	if !source.get("kind").strEq("tool") || !source.get("callId").isString() || source.get("callId").s == "" {
		return subject + " message must have tool source"
	}
	var block *value
	if len(content.arr) > 0 {
		block = content.arr[0]
	}
	if len(content.arr) != 1 || block == nil || (block.k != kObject && block.k != kArray) ||
		!block.get("type").strEq("tool-result") || block.get("content") == nil || block.get("content").k != kArray {
		return subject + " message must contain one tool-result block"
	}
	if tc := block.get("toolCallId"); !tc.isString() || tc.s != source.get("callId").s {
		return subject + " message has mismatched tool call ids"
	}
	return ""
}

// hasProviderModel: an object carrying non-empty string provider and model.
func hasProviderModel(v *value) bool {
	if v == nil || (v.k != kObject && v.k != kArray) {
		return false
	}
	p, m := v.get("provider"), v.get("model")
	return p.isString() && p.s != "" && m.isString() && m.s != ""
}

// WrapCorruption turns an INVALID_STORED_EVENT error into the load-path form
// `stored session "<id>" failed validation: Error: <msg>` (the reference
// wraps String(cause), so its class name leads). FORMAT_UNSUPPORTED and
// every other error pass through unchanged; wrapping twice is a no-op.
func WrapCorruption(sessionID string, err error) error {
	var se *sessionstore.Error
	if !errors.As(err, &se) || se.Reason != sessionstore.ReasonInvalidStored {
		return err
	}
	prefix := "stored session " + sessionstore.Quote(sessionID) + " failed validation: "
	if strings.HasPrefix(se.Message, prefix) {
		return err
	}
	name := "Error"
	if strings.HasPrefix(se.Message, "Cannot read properties of ") {
		name = "TypeError"
	}
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s%s: %s", prefix, name, se.Message)
}
