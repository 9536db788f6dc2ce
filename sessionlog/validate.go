package sessionlog

import "strings"

// ValidateSession is the check the reference runs when it builds a Session
// from normalised events ++ closers (load, inspect, prepare): per event, in
// order, the envelope of docs/events.md#envelope, the request/header and
// message shapes of docs/events.md#message-shapes, seq == index, and the
// surface rules of docs/events.md#surfaces. The first failure is returned as
// INVALID_STORED_EVENT in the load-path form `stored session "<id>" failed
// validation: Error: <msg>`.
func ValidateSession(sessionID string, events [][]byte) error {
	evs := make(logEvents, len(events))
	sf := surface{originals: evs}
	for index, raw := range events {
		e, _ := parseStored(raw)
		evs[index] = e
		if err := sf.check(sessionID, e, index); err != nil {
			return err
		}
	}
	return nil
}

// check validates the event at index (nil: not parsable) and applies it to
// the surface, returning ValidateSession's error for it.
func (sf *surface) check(sessionID string, e *storedEvent, index int) error {
	fail := func(format string, args ...any) error {
		return WrapCorruption(sessionID, storedErr(format, args...))
	}
	if e == nil {
		return fail("seed event at index %d is not losslessly JSON-serializable", index)
	}
	typ := e.get("type")
	if typ.strEq("request/header-delta") {
		return fail("seed event at index %d uses unsupported legacy request/header-delta format", index)
	}
	if msg := envelopeProblem(e); msg != "" {
		return fail("seed event at index %d %s", index, msg)
	}
	switch typ.s { // only these look into data (parsing it is most of the work)
	case "request/header":
		data := e.get("data")
		if msg := requestHeaderProblem(data, index); msg != "" {
			return fail("%s", msg)
		}
		if data.isRecord() && data.get("reason").strEq("fallback") {
			return fail(`seed event at index %d uses unsupported legacy request/header reason "fallback"`, index)
		}
	case "user/message", "assistant/message", "tool/result":
		if msg := messageShapeProblem(typ.s, e.get("data"), "seed "+typ.s+" at index "+itoa(index)); msg != "" {
			return fail("%s", msg)
		}
	}
	if seq := e.get("seq").n; seq != float64(index) {
		return fail("seed event at index %d has seq %s (expected %d); seed must be contiguous from 0", index, jsNumber(seq), index)
	}
	if msg := sf.next(e, index); msg != "" {
		return fail("invalid seed event at index %d: %s", index, msg)
	}
	return nil
}

// envelopeProblem checks the fixed envelope: no member outside the seven
// known keys, string type, non-negative safe integer seq, safe integer
// time, present data, and ignorable absent or exactly true.
func envelopeProblem(e *storedEvent) string {
	const bad = "has an invalid event envelope"
	for i := range e.members {
		if !isEnvelopeKey(e.members[i].key) {
			return bad
		}
	}
	if !e.get("type").isString() || !e.get("seq").isEventSeq() || !e.get("time").isSafeInteger() || !e.has("data") {
		return bad
	}
	if ig := e.get("ignorable"); ig != nil && ig.k != kTrue {
		return bad
	}
	return ""
}

// requestHeaderProblem checks a stored request/header: provider and model,
// an optional non-empty reasoningEffort, and adapterDefaults holding only
// true markers for config fields that are present.
func requestHeaderProblem(data *value, index int) string {
	subject := "seed request/header at index " + itoa(index)
	var header *value
	if h := data.get("header"); h.isRecord() {
		header = h
	}
	config := header.get("config")
	if !hasProviderModel(config) {
		return subject + " lacks provider/model"
	}
	if config.has("reasoningEffort") {
		if re := config.get("reasoningEffort"); !re.isString() || re.s == "" {
			return subject + " has an invalid reasoningEffort"
		}
	}
	defaults := header.get("adapterDefaults")
	if defaults == nil {
		return ""
	}
	invalid := subject + " has invalid adapterDefaults"
	if !defaults.isRecord() {
		return invalid
	}
	for _, mb := range defaults.obj {
		if (mb.key != "reasoningEffort" && mb.key != "maxTokens") || mb.val == nil || mb.val.k != kTrue {
			return invalid
		}
	}
	if (defaults.has("reasoningEffort") && !config.has("reasoningEffort")) ||
		(defaults.has("maxTokens") && !config.has("maxTokens")) {
		return invalid
	}
	return ""
}

// surface replays surface operations (docs/events.md#surfaces) over a log being rebuilt.
type surface struct {
	nodes     []int64 // current surface, as seqs in model-visible order
	originals originals
}

// originals answers what a tool/result replacement compares with: the
// surface node it shadows. ValidateSession looks it up in the whole log; the
// Validator keeps a digest per tool/result on the surface instead.
type originals interface {
	// onSurface notes that e (at seq) joined the surface and that the
	// shadowed nodes left it.
	onSurface(seq int64, e *storedEvent, shadowed []int64)
	// toolResult reports whether seq is a tool/result and whether its data
	// equals stripped outside the inner result content (withoutResultContent).
	toolResult(seq int64, stripped *value) (isToolResult, equal bool)
}

// logEvents is the log so far, indexed by seq.
type logEvents []*storedEvent

func (logEvents) onSurface(int64, *storedEvent, []int64) {}

func (evs logEvents) toolResult(seq int64, stripped *value) (bool, bool) {
	var original *storedEvent
	if seq >= 0 && seq < int64(len(evs)) {
		original = evs[seq]
	}
	if original == nil || !original.get("type").strEq("tool/result") {
		return false, false
	}
	return true, deepEqual(withoutResultContent(original.get("data")), stripped)
}

func isSurfaceType(t string) bool {
	return t == "user/message" || t == "assistant/message" || t == "tool/result"
}

// next validates one event against the current surface and applies it,
// returning the reference's failure text (without the seed prefix) or "".
func (sf *surface) next(e *storedEvent, index int) string {
	typ := e.get("type").s
	q := `session event "` + typ + `"`
	if !isSurfaceType(typ) {
		if e.has("surfaceOp") {
			return q + " is not surface-eligible and cannot carry surfaceOp"
		}
		if e.has("sourceEventSeqs") {
			return q + " is not surface-eligible and cannot carry sourceEventSeqs"
		}
		return ""
	}
	op := e.get("surfaceOp")
	if op == nil {
		return q + " is surface-eligible and requires a surfaceOp marker"
	}
	seq := int64(e.get("seq").n)
	if op.strEq("append") {
		if msg := provenanceProblem(e, nil); msg != "" {
			return msg
		}
		sf.nodes = append(sf.nodes, seq)
		sf.originals.onSurface(seq, e, nil)
		return ""
	}
	if !op.isRecord() {
		return q + " carries an invalid surfaceOp"
	}
	if len(op.obj) != 3 || !op.has("op") || !op.has("start") || !op.has("end") ||
		!op.get("op").strEq("replace") || !op.get("start").isEventSeq() || !op.get("end").isEventSeq() {
		return q + " carries an invalid replace surfaceOp"
	}
	start, end := int64(op.get("start").n), int64(op.get("end").n)
	si, ei := indexOf(sf.nodes, start), indexOf(sf.nodes, end)
	if si < 0 {
		return "surface replace: start seq " + i64(start) + " not found in surface"
	}
	if ei < 0 {
		return "surface replace: end seq " + i64(end) + " not found in surface"
	}
	if si > ei {
		return "surface replace: start seq " + i64(start) + " (index " + itoa(si) + ") is after end seq " +
			i64(end) + " (index " + itoa(ei) + ")"
	}
	shadowed := append([]int64(nil), sf.nodes[si:ei+1]...)
	if msg := provenanceProblem(e, shadowed); msg != "" {
		return msg
	}
	if typ == "tool/result" {
		if msg := sf.toolResultRewriteProblem(e, shadowed); msg != "" {
			return msg
		}
	}
	rest := append([]int64{seq}, sf.nodes[ei+1:]...)
	sf.nodes = append(sf.nodes[:si], rest...)
	sf.originals.onSurface(seq, e, shadowed)
	return ""
}

func indexOf(nodes []int64, seq int64) int {
	for i, n := range nodes {
		if n == seq {
			return i
		}
	}
	return -1
}

func i64(n int64) string { return jsNumber(float64(n)) }

// provenanceProblem checks sourceEventSeqs: an array when present, empty
// only on assistant/message, non-negative safe integers, no duplicates, all
// earlier than the event, and covering every shadowed node of a replace.
func provenanceProblem(e *storedEvent, shadowed []int64) string {
	typ := e.get("type").s
	seq := e.get("seq").n
	sources := map[float64]bool{}
	if e.has("sourceEventSeqs") {
		raw := e.get("sourceEventSeqs")
		if raw.k != kArray {
			return "sourceEventSeqs on event at seq " + jsNumber(seq) + " must be an array when present"
		}
		if len(raw.arr) == 0 && typ != "assistant/message" {
			return "sourceEventSeqs must not be empty except on assistant/message"
		}
		var nonEarlier *value
		for _, src := range raw.arr {
			if !src.isEventSeq() {
				return `session event "` + typ + `" sourceEventSeqs must densely contain non-negative safe integers`
			}
			sources[src.n] = true
			if nonEarlier == nil && src.n >= seq {
				nonEarlier = src
			}
		}
		if len(sources) != len(raw.arr) {
			return "sourceEventSeqs must not contain duplicates"
		}
		if nonEarlier != nil {
			return "sourceEventSeqs must reference earlier events: " + jsNumber(nonEarlier.n) + " >= current seq " + jsNumber(seq)
		}
	}
	var missing []string
	for _, s := range shadowed {
		if !sources[float64(s)] {
			missing = append(missing, i64(s))
		}
	}
	if len(missing) > 0 {
		return "surface replace: sourceEventSeqs must include every shadowed surface node; missing " + strings.Join(missing, ", ")
	}
	return ""
}

// toolResultRewriteProblem restricts a tool/result replacement to one
// current tool/result whose data may differ only in the inner result content.
func (sf *surface) toolResultRewriteProblem(e *storedEvent, shadowed []int64) string {
	if len(shadowed) != 1 {
		return "tool/result surface replacement must rewrite exactly one current node"
	}
	isToolResult, equal := sf.originals.toolResult(shadowed[0], withoutResultContent(e.get("data")))
	if !isToolResult {
		return "tool/result surface replacement must target a current tool/result"
	}
	if !equal {
		return "tool/result surface replacement may change only content"
	}
	return ""
}

// withoutResultContent is {...data, message: {...data.message, content:
// [{...data.message.content[0], content: null}]}}.
func withoutResultContent(data *value) *value {
	message := data.get("message")
	var first *value
	if c := message.get("content"); c != nil && c.k == kArray && len(c.arr) > 0 {
		first = c.arr[0]
	}
	block := spreadWith(first, "content", jsNull)
	return spreadWith(data, "message", spreadWith(message, "content", jsArr(block)))
}

// spreadWith is `{...v, key: val}` for a JSON value: a copy of an object
// with key set (in place when present), or {key: val} for anything else.
func spreadWith(v *value, key string, val *value) *value {
	if v.isRecord() {
		return v.with(key, val)
	}
	return jsObj(jsMem(key, val))
}
