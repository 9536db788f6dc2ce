package sessionlog

// The storage records of a reference JSONL artifact
// (docs/events.md#header-line, docs/events.md#packed-rows,
// docs/events.md#committed-region): how the reference reads one complete line
// of a session log.
//
// Every line after the header is a *storage record*: either one event stored
// verbatim, or a packed chunk row (`text-chunks`, `reasoning-chunks`,
// `tool-call-chunks`) standing for a run of assistant/chunk delta events.
// The reference reads each line as `JSON.parse(line.toString('utf8'))` and
// hands the value to its row decoder, so this file reproduces both exactly:
//
//   - the bytes are first decoded as WHATWG UTF-8 with replacement (what
//     Buffer.toString('utf8') does), so invalid sequences read as U+FFFD;
//   - the JSON is read with JSON.parse's rules, which are looser than this
//     package's append-side scanner: CR and LF are whitespace, and a repeated
//     key keeps its first position and takes its last value;
//   - a packed row is validated exactly as the reference's decoder validates
//     it and expanded into the event texts the reference reconstructs, each
//     serialised as JSON.stringify writes the reconstructed object.
//
// The header line (the first logical line, docs/events.md#header-line) is read here too, because it
// is the same kind of JSON.parse-then-shape-check step.

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
)

// Packed chunk row tags (docs/events.md#packed-rows).
const (
	RowTextChunks      = "text-chunks"
	RowReasoningChunks = "reasoning-chunks"
	RowToolCallChunks  = "tool-call-chunks"
)

// isRowTag reports whether t is one of the three packed-row tags.
func isRowTag(t string) bool {
	return t == RowTextChunks || t == RowReasoningChunks || t == RowToolCallChunks
}

// ---------------------------------------------------------------------------
// UTF-8 as Buffer.toString('utf8') reads it.

// wellFormedUTF8 returns b decoded as the WHATWG UTF-8 decoder does and
// re-encoded: every maximal subpart of an ill-formed sequence becomes one
// U+FFFD (Unicode's "substitution of maximal subparts"), which is what Node's
// Buffer.toString('utf8') produces. Valid input is returned as is, and
// replaced reports whether anything was substituted. Surrogate code points
// encoded in UTF-8 (ED A0..BF ..) are ill-formed, as in the reference.
func wellFormedUTF8(b []byte) (out []byte, replaced bool) {
	if utf8.Valid(b) {
		return b, false
	}
	out = make([]byte, 0, len(b)+8)
	for i := 0; i < len(b); {
		c := b[i]
		if c < 0x80 {
			out = append(out, c)
			i++
			continue
		}
		var need int
		lo, hi := byte(0x80), byte(0xBF) // the allowed range of the second byte
		switch {
		case c >= 0xC2 && c <= 0xDF:
			need = 1
		case c == 0xE0:
			need, lo = 2, 0xA0
		case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
			need = 2
		case c == 0xED:
			need, hi = 2, 0x9F
		case c == 0xF0:
			need, lo = 3, 0x90
		case c >= 0xF1 && c <= 0xF3:
			need = 3
		case c == 0xF4:
			need, hi = 3, 0x8F
		default:
			out = append(out, "\uFFFD"...)
			i++
			continue
		}
		j := i + 1
		ok := true
		for k := 0; k < need; k++ {
			if j >= len(b) {
				ok = false
				break
			}
			l, h := byte(0x80), byte(0xBF)
			if k == 0 {
				l, h = lo, hi
			}
			if b[j] < l || b[j] > h {
				ok = false
				break
			}
			j++
		}
		if ok {
			out = append(out, b[i:j]...)
		} else {
			// The lead byte and the continuation bytes that fit form one
			// maximal subpart; the byte that did not fit starts afresh.
			out = append(out, "\uFFFD"...)
		}
		i = j
	}
	return out, true
}

// ---------------------------------------------------------------------------
// JSON as JSON.parse reads it.

// jsParser reads JSON text with JavaScript's JSON.parse rules on top of the
// package lexer (strings, numbers, literals): whitespace is space, tab, CR
// and LF, and a repeated object key keeps the position of its first
// occurrence and the value of its last. The input must be well-formed UTF-8
// (see wellFormedUTF8). Nesting is bounded by maxDepth, like every other
// parse in this package (JSON.parse itself has no practical limit).
type jsParser struct{ scanner }

func newJSParser(data []byte) *jsParser {
	return &jsParser{scanner{data: data, lossyAt: -1}}
}

func (p *jsParser) ws() {
	for p.pos < len(p.data) {
		switch p.data[p.pos] {
		case ' ', '\t', '\n', '\r':
			p.pos++
		default:
			return
		}
	}
}

// end checks that only whitespace follows the value.
func (p *jsParser) end() bool {
	p.ws()
	if p.pos != len(p.data) {
		return p.fail("trailing characters after the value")
	}
	return true
}

func (p *jsParser) str(start, end int, escaped bool) string {
	if escaped {
		return string(decodeString(nil, p.data[start:end]))
	}
	return string(p.data[start:end])
}

// value reads one value. With build it returns the tree; without, it only
// validates and returns nil. ok is false on a syntax error (p.err is set).
func (p *jsParser) value(depth int, build bool) (*value, bool) {
	p.ws()
	if p.pos >= len(p.data) {
		return nil, p.fail("unexpected end of text")
	}
	switch c := p.data[p.pos]; {
	case c == '{':
		return p.object(depth+1, build)
	case c == '[':
		return p.array(depth+1, build)
	case c == '"':
		start, end, esc, ok := p.scanStringSpan()
		if !ok || !build {
			return nil, ok
		}
		return jsStr(p.str(start, end, esc)), true
	case c == 't':
		return jsTrue, p.literal("true")
	case c == 'f':
		return jsFalse, p.literal("false")
	case c == 'n':
		return jsNull, p.literal("null")
	case c == '-' || isDigit(c):
		start := p.pos
		if !p.scanNumber() {
			return nil, false
		}
		if !build {
			return nil, true
		}
		// Correctly rounded, as JavaScript's; out of range gives ±Inf (JSON.parse
		// gives Infinity too) and the error is irrelevant.
		f, _ := strconv.ParseFloat(string(p.data[start:p.pos]), 64)
		return jsNum(f), true
	default:
		return nil, p.fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

func (p *jsParser) object(depth int, build bool) (*value, bool) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // '{'
	var obj *value
	var index map[string]int
	if build {
		obj = &value{k: kObject}
	}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return obj, true
	}
	for {
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return nil, p.fail("expected an object key")
		}
		ks, ke, kesc, ok := p.scanStringSpan()
		if !ok {
			return nil, false
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return nil, p.fail("expected ':' after an object key")
		}
		p.pos++
		v, ok := p.value(depth, build)
		if !ok {
			return nil, false
		}
		if build {
			index = setMember(obj, index, p.str(ks, ke, kesc), v)
		}
		p.ws()
		if p.pos >= len(p.data) {
			return nil, p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return obj, true
		default:
			return nil, p.fail("expected ',' or '}' in an object")
		}
	}
}

// setMember assigns obj[key] = v as JSON.parse does: a new key is appended,
// a repeated one is overwritten in place. index is built lazily for wide
// objects and returned.
func setMember(obj *value, index map[string]int, key string, v *value) map[string]int {
	if index == nil && len(obj.obj) >= 32 {
		index = make(map[string]int, 64)
		for i, mb := range obj.obj {
			index[mb.key] = i
		}
	}
	if index != nil {
		if i, ok := index[key]; ok {
			obj.obj[i].val = v
			return index
		}
		index[key] = len(obj.obj)
	} else {
		for i := range obj.obj {
			if obj.obj[i].key == key {
				obj.obj[i].val = v
				return nil
			}
		}
	}
	obj.obj = append(obj.obj, member{key, v})
	return index
}

func (p *jsParser) array(depth int, build bool) (*value, bool) {
	if depth > maxDepth {
		return nil, p.fail("nesting too deep")
	}
	p.pos++ // '['
	var arr *value
	if build {
		arr = &value{k: kArray}
	}
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == ']' {
		p.pos++
		return arr, true
	}
	for {
		v, ok := p.value(depth, build)
		if !ok {
			return nil, false
		}
		if build {
			arr.arr = append(arr.arr, v)
		}
		p.ws()
		if p.pos >= len(p.data) {
			return nil, p.fail("unterminated array")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case ']':
			p.pos++
			return arr, true
		default:
			return nil, p.fail("expected ',' or ']' in an array")
		}
	}
}

// jsonParse is JSON.parse over well-formed UTF-8 text.
func jsonParse(text []byte) (*value, error) {
	p := newJSParser(text)
	v, ok := p.value(0, true)
	if !ok || !p.end() {
		return nil, p.err
	}
	return v, nil
}

// jsonParseTop is JSON.parse for the scanner's per-line decisions: it
// validates the whole text but builds only the top-level members "type" and
// "seq" of an object (the last occurrence of each, as JSON.parse keeps).
// top is the kind of the top-level value.
func jsonParseTop(text []byte) (top kind, typ, seq *value, err error) {
	p := newJSParser(text)
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '{' {
		top = kObject
		if !p.topObject(&typ, &seq) || !p.end() {
			return 0, nil, nil, p.err
		}
		return top, typ, seq, nil
	}
	if _, ok := p.value(0, false); !ok || !p.end() {
		return 0, nil, nil, p.err
	}
	switch c := text[firstNonSpace(text)]; {
	case c == '[':
		top = kArray
	case c == '"':
		top = kString
	case c == 't':
		top = kTrue
	case c == 'f':
		top = kFalse
	case c == 'n':
		top = kNull
	default:
		top = kNumber
	}
	return top, nil, nil, nil
}

func firstNonSpace(b []byte) int {
	i := 0
	for i < len(b) && (b[i] == ' ' || b[i] == '\t' || b[i] == '\n' || b[i] == '\r') {
		i++
	}
	return i
}

// topObject reads the top-level object, building only "type" and "seq".
func (p *jsParser) topObject(typ, seq **value) bool {
	p.pos++ // '{'
	p.ws()
	if p.pos < len(p.data) && p.data[p.pos] == '}' {
		p.pos++
		return true
	}
	for {
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != '"' {
			return p.fail("expected an object key")
		}
		ks, ke, kesc, ok := p.scanStringSpan()
		if !ok {
			return false
		}
		key := ""
		if ke-ks == 4 || ke-ks == 3 || kesc {
			key = p.str(ks, ke, kesc)
		}
		p.ws()
		if p.pos >= len(p.data) || p.data[p.pos] != ':' {
			return p.fail("expected ':' after an object key")
		}
		p.pos++
		want := key == "type" || key == "seq"
		v, ok := p.value(1, want)
		if !ok {
			return false
		}
		switch key {
		case "type":
			*typ = v
		case "seq":
			*seq = v
		}
		p.ws()
		if p.pos >= len(p.data) {
			return p.fail("unterminated object")
		}
		switch p.data[p.pos] {
		case ',':
			p.pos++
		case '}':
			p.pos++
			return true
		default:
			return p.fail("expected ',' or '}' in an object")
		}
	}
}

// ---------------------------------------------------------------------------
// The header line (docs/events.md#header-line).

// ParseHeaderLine reads the first logical line of a reference JSONL
// artifact (without its "\n") as the reference's parseHeaderRecord does,
// with its texts and in its order (docs/events.md#header-line):
//
//  1. not JSON → `corrupt session log: header line is not valid JSON`;
//  2. an object whose version is a number other than 0 is refused first
//     (FORMAT_UNSUPPORTED, docs/events.md#format-version, naming String(id), with
//     ` (raw log: <rawLogPath>)` appended when rawLogPath is set);
//  3. the shape check → `corrupt session log: first line is not a session header`
//     (type "session", numeric version, string id, createdAt and
//     delegationDepth non-negative safe integers and not -0, origin absent
//     or "subagent", agentPreset absent or a string; unknown fields tolerated);
//  4. sandboxMode or approvalPolicy → `session header uses retired policy baseline fields`.
//
// The reference copies cwd, parentSession and seedLength without checking
// their types and refuses wrong ones only when it builds the Session (docs/events.md#header);
// a Header cannot hold them, so they are refused here with that load-path
// text (`stored session "<id>" failed validation: Error: session header cwd
// must be a string`, … `parentSession must be a string`, … `seedLength must
// be a non-negative safe integer`). Every other docs/events.md#header rule (cwd absolute, …)
// is left to CheckStoredHeader. Unknown fields are dropped, as the reference
// drops them; the returned header always has DelegationDepth.
func ParseHeaderLine(line []byte, rawLogPath string) (sessionstore.Header, error) {
	text, _ := wellFormedUTF8(line)
	v, err := jsonParse(text)
	if err != nil {
		return sessionstore.Header{}, sessionstore.Errorf(sessionstore.ReasonCorruption, "corrupt session log: header line is not valid JSON")
	}
	if v.k == kObject {
		if ver := v.get("version"); ver != nil && ver.k == kNumber && ver.n != 0 {
			id := v.get("id")
			name := jsString(id)
			return sessionstore.Header{}, versionRefusal(name, ver.n, rawLogPath)
		}
	}
	if !isHeaderShape(v) {
		return sessionstore.Header{}, sessionstore.Errorf(sessionstore.ReasonCorruption, "corrupt session log: first line is not a session header")
	}
	if v.has("sandboxMode") || v.has("approvalPolicy") {
		return sessionstore.Header{}, sessionstore.Errorf(sessionstore.ReasonCorruption, "session header uses retired policy baseline fields")
	}
	h := sessionstore.Header{
		Version:   0, // anything else was refused above (-0 === 0)
		ID:        v.get("id").s,
		CreatedAt: int64(v.get("createdAt").n),
	}
	depth := int64(v.get("delegationDepth").n)
	h.DelegationDepth = &depth
	field := func(msg string) error {
		return WrapCorruption(h.ID, sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", msg))
	}
	if c := v.get("cwd"); c != nil {
		if c.k != kString {
			return sessionstore.Header{}, field("session header cwd must be a string")
		}
		s := c.s
		h.Cwd = &s
	}
	if ps := v.get("parentSession"); ps != nil {
		if ps.k != kString {
			return sessionstore.Header{}, field("session header parentSession must be a string")
		}
		s := ps.s
		h.ParentSession = &s
	}
	if sl := v.get("seedLength"); sl != nil {
		if !sl.isSafeInteger() || sl.n < 0 {
			return sessionstore.Header{}, field("session header seedLength must be a non-negative safe integer")
		}
		n := int64(sl.n)
		h.SeedLength = &n
	}
	if o := v.get("origin"); o != nil {
		s := o.s
		h.Origin = &s
	}
	if ap := v.get("agentPreset"); ap != nil {
		s := ap.s
		h.AgentPreset = &s
	}
	return h, nil
}

// isHeaderShape is the reference's isHeaderLine guard.
func isHeaderShape(v *value) bool {
	if v == nil || v.k != kObject {
		return false
	}
	nonNegInt := func(x *value) bool {
		return x.isSafeInteger() && x.n >= 0 && !math.Signbit(x.n)
	}
	ver := v.get("version")
	id := v.get("id")
	origin := v.get("origin")
	preset := v.get("agentPreset")
	return v.get("type").strEq("session") &&
		ver != nil && ver.k == kNumber &&
		id.isString() &&
		nonNegInt(v.get("createdAt")) &&
		nonNegInt(v.get("delegationDepth")) &&
		(origin == nil || origin.strEq("subagent")) &&
		(preset == nil || preset.isString())
}

// ---------------------------------------------------------------------------
// Storage records (docs/events.md#packed-rows, docs/events.md#committed-region).

// StoredRecord is what one complete line after the header stores, as the
// reference's scanner sees it (`decodeStorageRecord(JSON.parse(line))`).
type StoredRecord struct {
	// Events are the stored event texts: the line itself for a verbatim
	// record (byte for byte, after the UTF-8 repair below), or the expanded
	// members of a packed row, serialised as JSON.stringify writes them.
	Events [][]byte
	// Row is the packed-row tag, or "" for a verbatim record.
	Row string
	// Seq is the seq the scanner compares with the expected one: the
	// event's top-level "seq" member, or a row's seq0 (a valid row's members
	// are contiguous from seq0, so its first member decides). SeqIsNumber is
	// false when that value is not a JSON number (or absent).
	Seq         float64
	SeqIsNumber bool
	// SeqText is `${seq}`: how the reference prints the value in its
	// `seq gap … (expected e, got g)` message ("undefined" when absent).
	SeqText string
	// TurnEnd reports that a record event is an object whose type is the
	// string "turn/end" (the scanner's commit marker).
	TurnEnd bool
	// Null reports that the line is JSON null: the reference's scanner then
	// throws a TypeError reading its seq (or type) instead of classifying it.
	Null bool
	// Repaired reports that the line held ill-formed UTF-8, which was
	// replaced by U+FFFD as the reference's decoding does.
	Repaired bool
}

// FirstSeqIs reports whether the record continues a log of n events: the
// reference's `event.seq !== expected` test, false for a non-number.
func (r *StoredRecord) FirstSeqIs(n int64) bool {
	return r.SeqIsNumber && r.Seq == float64(n)
}

// DecodeStorageLine decodes one complete line after the header (without
// its "\n"). A line that JSON.parse refuses is an error; so is a malformed
// packed row (`malformed <tag> storage row: <why>`, docs/events.md#packed-rows), which the
// reference's scanner treats exactly like an unparsable line. Any other
// JSON value is a verbatim record: it is not validated here (the scanner
// checks only its seq; envelope and vocabulary are judged on load, docs/events.md#read-checks).
// Both errors have reason CORRUPTION.
func DecodeStorageLine(line []byte) (StoredRecord, error) {
	text, repaired := wellFormedUTF8(line)
	top, typ, seq, err := jsonParseTop(text)
	if err != nil {
		return StoredRecord{}, sessionstore.Errorf(sessionstore.ReasonCorruption, "not valid JSON: %s", err.Error())
	}
	rec := StoredRecord{Repaired: repaired}
	if top == kObject && typ != nil && typ.k == kString && isRowTag(typ.s) {
		v, err := jsonParse(text)
		if err != nil { // cannot happen: the same text just parsed
			return StoredRecord{}, sessionstore.Errorf(sessionstore.ReasonCorruption, "not valid JSON: %s", err.Error())
		}
		events, err := expandRowValue(v, typ.s)
		if err != nil {
			return StoredRecord{}, err
		}
		seq0 := v.get("seq0").n
		rec.Events = events
		rec.Row = typ.s
		rec.Seq, rec.SeqIsNumber, rec.SeqText = seq0, true, jsNumber(seq0)
		return rec, nil
	}
	if repaired {
		rec.Events = [][]byte{text}
	} else {
		rec.Events = [][]byte{line}
	}
	switch top {
	case kNull:
		rec.Null = true
	case kObject:
		rec.TurnEnd = typ.strEq("turn/end")
		rec.SeqText = jsString(seq)
		if seq != nil && seq.k == kNumber {
			rec.Seq, rec.SeqIsNumber = seq.n, true
		}
	default:
		// (42).seq, "s".seq, [].seq and true.seq are all undefined.
		rec.SeqText = "undefined"
	}
	return rec, nil
}

// IsPackedRow reports whether a line is a packed chunk row, and its tag: a
// JSON object whose top-level type is one of the three row tags. It says
// nothing about the row being well formed (ExpandPackedRow does). A line
// that is not JSON is not a row.
func IsPackedRow(line []byte) (bool, string) {
	text, _ := wellFormedUTF8(line)
	top, typ, _, err := jsonParseTop(text)
	if err != nil || top != kObject || typ == nil || typ.k != kString || !isRowTag(typ.s) {
		return false, ""
	}
	return true, typ.s
}

// ExpandPackedRow expands one packed chunk row (a line without its "\n")
// into the assistant/chunk events the reference reconstructs (docs/events.md#packed-rows):
// member k has seq seq0+k and time time0+dt[0]+…+dt[k-1], and each event is
// serialised as JSON.stringify writes the reconstructed object:
//
//	{"type":"assistant/chunk","seq":S,"time":T,"data":{"turn":…,"step":…,"chunk":C}}
//
// with C = {"type":"text-delta"|"reasoning-delta","index":…,"text":…} or
// {"type":"tool-call-delta","index":…,"id":…,["name":…,]"argumentsDelta":…}.
// The row is validated exactly as the reference validates it; a malformed
// row gives `malformed <tag> storage row: <why>` with the reference's
// reasons. A line that is not a row, or not JSON, is an error too. Errors
// have reason CORRUPTION. Pure.
func ExpandPackedRow(line []byte) ([][]byte, error) {
	text, _ := wellFormedUTF8(line)
	v, err := jsonParse(text)
	if err != nil {
		return nil, sessionstore.Errorf(sessionstore.ReasonCorruption, "not valid JSON: %s", err.Error())
	}
	typ := v.get("type")
	if v.k != kObject || typ == nil || typ.k != kString || !isRowTag(typ.s) {
		return nil, sessionstore.Errorf(sessionstore.ReasonCorruption, "not a packed chunk row: its type is not %s, %s or %s",
			RowTextChunks, RowReasoningChunks, RowToolCallChunks)
	}
	return expandRowValue(v, typ.s)
}

// exactKeys is the reference's hasExactKeys on a record: Object.keys(v)
// has exactly the given names. An array's keys are its indices, never
// these names, so an array never matches.
func exactKeys(v *value, keys ...string) bool {
	if v.k != kObject || len(v.obj) != len(keys) {
		return false
	}
	for _, k := range keys {
		if !v.has(k) {
			return false
		}
	}
	return true
}

func malformedRow(tag, why string) error {
	return sessionstore.Errorf(sessionstore.ReasonCorruption, "malformed %s storage row: %s", tag, why)
}

// expandRowValue validates a row-tagged object exactly as the reference's
// validateRow does (same checks, same order, same reasons) and expands it.
func expandRowValue(v *value, tag string) ([][]byte, error) {
	if !exactKeys(v, "type", "seq0", "time0", "data") {
		return nil, malformedRow(tag, "envelope must be exactly {type, seq0, time0, data}")
	}
	seq0, time0 := v.get("seq0"), v.get("time0")
	if !seq0.isSafeInteger() || seq0.n < 0 {
		return nil, malformedRow(tag, "seq0 must be a non-negative safe integer")
	}
	if !time0.isSafeInteger() {
		return nil, malformedRow(tag, "time0 must be a safe integer")
	}
	data := v.get("data")
	if data.k != kObject && data.k != kArray { // isRecord: any non-null object
		return nil, malformedRow(tag, "data must be an object")
	}
	var (
		payloadKey = "texts"
		withName   bool
	)
	if tag == RowToolCallChunks {
		payloadKey = "args"
		withName = exactKeys(data, "turn", "step", "index", "id", "name", "dt", "args")
		if !withName && !exactKeys(data, "turn", "step", "index", "id", "dt", "args") {
			return nil, malformedRow(tag, "data must be exactly {turn, step, index, id, name?, dt, args}")
		}
		if !data.get("id").isString() || (withName && !data.get("name").isString()) {
			return nil, malformedRow(tag, "id (and name when present) must be strings")
		}
	} else if !exactKeys(data, "turn", "step", "index", "dt", "texts") {
		return nil, malformedRow(tag, "data must be exactly {turn, step, index, dt, texts}")
	}
	turn, step, index := data.get("turn"), data.get("step"), data.get("index")
	if turn.k != kNumber || step.k != kNumber || index.k != kNumber {
		return nil, malformedRow(tag, "turn/step/index must be numbers")
	}
	payload := data.get(payloadKey)
	if payload.k != kArray || len(payload.arr) == 0 {
		return nil, malformedRow(tag, payloadKey+" must be a non-empty string array")
	}
	for _, el := range payload.arr {
		if el.k != kString {
			return nil, malformedRow(tag, payloadKey+" must be a non-empty string array")
		}
	}
	dt := data.get("dt")
	if dt.k != kArray {
		return nil, malformedRow(tag, "dt must be an array of safe integers")
	}
	for _, gap := range dt.arr {
		if !gap.isSafeInteger() {
			return nil, malformedRow(tag, "dt must be an array of safe integers")
		}
	}
	n := len(payload.arr)
	if len(dt.arr) != n-1 {
		return nil, malformedRow(tag, "dt length "+itoa(len(dt.arr))+" does not match "+itoa(n)+" members")
	}
	// Reconstruction bounds, in the reference's float arithmetic:
	// `seq0 + payload.length - 1` evaluates left to right.
	last := seq0.n + float64(n)
	last -= 1
	if !isSafeInt(last) {
		return nil, malformedRow(tag, "member seqs must stay safe integers")
	}
	t := time0.n
	for _, gap := range dt.arr {
		t += gap.n
		if !isSafeInt(t) {
			return nil, malformedRow(tag, "member times must stay safe integers")
		}
	}

	// The fixed part of every member: `,"data":{"turn":…,"step":…,"chunk":{"type":"…","index":…,`
	// and, for tool calls, `"id":…,["name":…,]`.
	var mid []byte
	mid = append(mid, `,"data":{"turn":`...)
	mid = appendJSNumberJSON(mid, turn.n)
	mid = append(mid, `,"step":`...)
	mid = appendJSNumberJSON(mid, step.n)
	mid = append(mid, `,"chunk":{"type":`...)
	memberKey := `"text":`
	switch tag {
	case RowTextChunks:
		mid = append(mid, `"text-delta"`...)
	case RowReasoningChunks:
		mid = append(mid, `"reasoning-delta"`...)
	default:
		mid = append(mid, `"tool-call-delta"`...)
		memberKey = `"argumentsDelta":`
	}
	mid = append(mid, `,"index":`...)
	mid = appendJSNumberJSON(mid, index.n)
	mid = append(mid, ',')
	if tag == RowToolCallChunks {
		mid = append(mid, `"id":`...)
		mid = AppendJSString(mid, data.get("id").s)
		mid = append(mid, ',')
		if withName {
			mid = append(mid, `"name":`...)
			mid = AppendJSString(mid, data.get("name").s)
			mid = append(mid, ',')
		}
	}
	mid = append(mid, memberKey...)

	events := make([][]byte, n)
	t = time0.n
	for k := 0; k < n; k++ {
		if k > 0 {
			t += dt.arr[k-1].n
		}
		s := payload.arr[k].s
		b := make([]byte, 0, 48+len(mid)+len(s)+8)
		b = append(b, `{"type":"assistant/chunk","seq":`...)
		b = appendJSNumberJSON(b, seq0.n+float64(k))
		b = append(b, `,"time":`...)
		b = appendJSNumberJSON(b, t)
		b = append(b, mid...)
		b = AppendJSString(b, s)
		b = append(b, "}}}"...)
		events[k] = b
	}
	return events, nil
}
