package sessionlog

import (
	"strconv"

	"github.com/sessionstore/sessionstore"
)

// EventInfo is what the write path needs from an accepted event.
type EventInfo struct {
	Type string
	Seq  int64
	Time int64
}

// topMember is one top-level member of an event: its name and the span of
// its value in the event text.
type topMember struct {
	key        []byte
	start, end int
}

// scanTop scans the single JSON object that must make up the whole text,
// recording its top-level members into dst. Nested values are validated by
// skipValue (duplicate keys at any depth, numbers, UTF-8) without being
// built. No blank is allowed before or after the object.
func (s *scanner) scanTop(dst []topMember) ([]topMember, bool) {
	d := s.data
	if len(d) == 0 {
		return dst, s.fail("empty text")
	}
	if d[0] != '{' {
		return dst, s.fail("the text does not start with '{'")
	}
	s.pos = 1
	var seen map[string]struct{}
	if !s.skipSpace() {
		return dst, false
	}
	if s.pos < len(d) && d[s.pos] == '}' {
		s.pos++
	} else {
		for {
			if !s.skipSpace() {
				return dst, false
			}
			if s.pos >= len(d) || d[s.pos] != '"' {
				return dst, s.fail("expected an object key")
			}
			keyAt := s.pos
			ks, ke, esc, ok := s.scanStringSpan()
			if !ok {
				return dst, false
			}
			key := d[ks:ke]
			if esc {
				key = decodeString(nil, key)
			}
			if !s.addKey(0, key, keyAt, &seen) {
				return dst, false
			}
			if !s.skipSpace() {
				return dst, false
			}
			if s.pos >= len(d) || d[s.pos] != ':' {
				return dst, s.fail("expected ':' after an object key")
			}
			s.pos++
			if !s.skipSpace() {
				return dst, false
			}
			vs := s.pos
			if !s.skipValue(1) {
				return dst, false
			}
			dst = append(dst, topMember{key: key, start: vs, end: s.pos})
			if !s.skipSpace() {
				return dst, false
			}
			if s.pos >= len(d) {
				return dst, s.fail("unterminated object")
			}
			if d[s.pos] == ',' {
				s.pos++
				continue
			}
			if d[s.pos] == '}' {
				s.pos++
				break
			}
			return dst, s.fail("expected ',' or '}' in an object")
		}
	}
	if s.pos != len(d) {
		return dst, s.fail("trailing characters after the object")
	}
	return dst, true
}

// topValue returns the raw value of a top-level member, or nil.
func topValue(data []byte, ms []topMember, key string) []byte {
	for i := range ms {
		if string(ms[i].key) == key {
			return data[ms[i].start:ms[i].end]
		}
	}
	return nil
}

// numberValue returns the float64 of a validated number token, with a fast
// path for the short integers that make up nearly every seq and time.
func numberValue(t []byte) float64 {
	if len(t) > 0 && len(t) <= 16 {
		neg := t[0] == '-'
		i := 0
		if neg {
			i = 1
		}
		var n int64
		j := i
		for ; j < len(t) && isDigit(t[j]); j++ {
			n = n*10 + int64(t[j]-'0')
		}
		if j == len(t) && j > i {
			if neg {
				return -float64(n)
			}
			return float64(n)
		}
	}
	f, _ := strconv.ParseFloat(string(t), 64)
	return f
}

// rawString decodes a raw JSON string token (quotes included).
func rawString(t []byte) (string, bool) {
	if len(t) < 2 || t[0] != '"' {
		return "", false
	}
	content := t[1 : len(t)-1]
	for _, c := range content {
		if c == '\\' {
			return string(decodeString(nil, content)), true
		}
	}
	return string(content), true
}

func isNumberToken(t []byte) bool {
	return len(t) > 0 && (t[0] == '-' || isDigit(t[0]))
}

var allowedEnvelopeKeys = [...]string{"type", "seq", "time", "data", "sourceEventSeqs", "surfaceOp", "ignorable"}

func isEnvelopeKey(k []byte) bool {
	for _, a := range allowedEnvelopeKeys {
		if string(k) == a {
			return true
		}
	}
	return false
}

// CheckEvent validates one event text for Append, exactly as narrowly as
// docs/design.md "Validation": a single-line JSON object with no duplicate
// keys (NOT_JSON), numbers inside the lossless-JSON domain
// (docs/events.md#lossless-json), the envelope members with their JSON types
// (docs/events.md#envelope), the three legacy shapes refused on append
// (docs/events.md#legacy-shapes) and the plan/mode boolean invariant
// (INVALID_EVENT). Message shapes, surface rules and unknown types are left
// to the read side, as the reference does. The EventInfo is meaningful only
// when the error is nil.
func CheckEvent(sessionID string, raw []byte) (EventInfo, error) {
	var info EventInfo
	s := scanner{data: raw, lossyAt: -1}
	var keyBuf [16][]byte
	s.keys = keyBuf[:0]
	var buf [8]topMember
	ms, ok := s.scanTop(buf[:0])
	if !ok {
		return info, sessionstore.Errorf(sessionstore.ReasonNotJSON,
			"event is not a single-line JSON object: %s", s.err.Error())
	}

	typeRaw := topValue(raw, ms, "type")
	seqRaw := topValue(raw, ms, "seq")
	typ, typeOK := rawString(typeRaw)
	label := func() string {
		t := "?"
		if typeOK {
			t = typ
		}
		sq := "?"
		if isNumberToken(seqRaw) && numberLossless(seqRaw) {
			sq = jsNumber(numberValue(seqRaw))
		}
		return `(event "` + t + `" at seq ` + sq + `)`
	}
	if s.lossyAt >= 0 {
		return info, sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
			"session event batch is not losslessly JSON-serializable because it contains non-JSON-serializable data %s", label())
	}
	invalid := func(detail string) error {
		return sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
			"invalid session event envelope %s: %s", label(), detail)
	}

	for i := range ms {
		if !isEnvelopeKey(ms[i].key) {
			return info, invalid("unknown top-level key " + strconv.Quote(string(ms[i].key)))
		}
	}
	if typeRaw == nil {
		return info, invalid(`missing "type"`)
	}
	if !typeOK {
		return info, invalid(`"type" must be a string`)
	}
	if seqRaw == nil || !isNumberToken(seqRaw) {
		return info, invalid(`"seq" must be a non-negative safe integer`)
	}
	seq := numberValue(seqRaw)
	if !isSafeInt(seq) || seq < 0 {
		return info, invalid(`"seq" must be a non-negative safe integer`)
	}
	timeRaw := topValue(raw, ms, "time")
	if timeRaw == nil || !isNumberToken(timeRaw) {
		return info, invalid(`"time" must be a safe integer`)
	}
	tm := numberValue(timeRaw)
	if !isSafeInt(tm) {
		return info, invalid(`"time" must be a safe integer`)
	}
	dataRaw := topValue(raw, ms, "data")
	if dataRaw == nil {
		return info, invalid(`missing "data"`)
	}
	if src := topValue(raw, ms, "sourceEventSeqs"); src != nil {
		if !seqArray(src) {
			return info, invalid(`"sourceEventSeqs" must be an array of non-negative safe integers`)
		}
	}
	if op := topValue(raw, ms, "surfaceOp"); op != nil {
		if string(op) != `"append"` && op[0] != '{' {
			if v, ok := rawString(op); !ok || v != "append" {
				return info, invalid(`"surfaceOp" must be "append" or an object`)
			}
		}
	}
	if ig := topValue(raw, ms, "ignorable"); ig != nil && string(ig) != "true" {
		return info, invalid(`"ignorable" may only be true`)
	}
	info = EventInfo{Type: typ, Seq: int64(seq), Time: int64(tm)}

	switch typ {
	case "request/header-delta":
		return EventInfo{}, sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
			"session %s contains unsupported legacy request/header-delta event at seq %d", sessionstore.Quote(sessionID), info.Seq)
	case "mode/set":
		return EventInfo{}, sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
			"session %s contains unsupported legacy mode/set event at seq %d", sessionstore.Quote(sessionID), info.Seq)
	case "request/header":
		data, _ := parseValue(dataRaw)
		if data.isNull() {
			// The reference reads data.reason unguarded: a null payload makes
			// its append throw this TypeError.
			return EventInfo{}, sessionstore.Errorf(sessionstore.ReasonInvalidEvent, "%s", nullRead("reason"))
		}
		if data.get("reason").strEq("fallback") {
			return EventInfo{}, sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
				`session %s contains unsupported legacy request/header reason "fallback" at seq %d`, sessionstore.Quote(sessionID), info.Seq)
		}
	case "plan/mode":
		data, _ := parseValue(dataRaw)
		active := data.get("active")
		if active == nil || (active.k != kTrue && active.k != kFalse) {
			return EventInfo{}, sessionstore.Errorf(sessionstore.ReasonInvalidEvent,
				"plan/mode carries invalid active state %s; expected a boolean", jsonStringify(active))
		}
	}
	return info, nil
}

// seqArray reports whether a raw (already validated) value is an array of
// non-negative safe integers, the write-side check of sourceEventSeqs. It
// walks the tokens instead of building a tree: this runs on the hot path.
func seqArray(t []byte) bool {
	if t[0] != '[' {
		return false
	}
	i := 1
	for {
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if t[i] == ']' {
			return true
		}
		j := i
		for j < len(t) && (t[j] == '-' || t[j] == '+' || t[j] == '.' || t[j] == 'e' || t[j] == 'E' || isDigit(t[j])) {
			j++
		}
		if j == i {
			return false // not a number
		}
		if f := numberValue(t[i:j]); !isSafeInt(f) || f < 0 {
			return false
		}
		i = j
		for i < len(t) && (t[i] == ' ' || t[i] == '\t') {
			i++
		}
		if t[i] == ',' {
			i++
		}
	}
}

// nullRead is V8's message for reading a property of null, which is what
// the reference throws where it reads a payload member without a guard.
func nullRead(prop string) string {
	return "Cannot read properties of null (reading '" + prop + "')"
}

// undefinedRead is the same for undefined.
func undefinedRead(prop string) string {
	return "Cannot read properties of undefined (reading '" + prop + "')"
}
