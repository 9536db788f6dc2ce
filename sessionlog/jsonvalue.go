package sessionlog

import (
	"math"
	"strconv"
)

// kind is the JSON type of a value.
type kind uint8

const (
	kNull kind = iota
	kFalse
	kTrue
	kNumber
	kString
	kArray
	kObject
)

// value is an order-preserving JSON value. A nil *value stands for
// JavaScript's undefined: an absent member, which JSON.stringify omits.
type value struct {
	k   kind
	s   string  // string value (WTF-8) for kString
	n   float64 // number value for kNumber
	arr []*value
	obj []member
}

type member struct {
	key string
	val *value
}

var (
	jsNull  = &value{k: kNull}
	jsTrue  = &value{k: kTrue}
	jsFalse = &value{k: kFalse}
)

func jsStr(s string) *value           { return &value{k: kString, s: s} }
func jsNum(n float64) *value          { return &value{k: kNumber, n: n} }
func jsObj(ms ...member) *value       { return &value{k: kObject, obj: ms} }
func jsArr(vs ...*value) *value       { return &value{k: kArray, arr: vs} }
func jsMem(k string, v *value) member { return member{key: k, val: v} }

// get returns the member named key of an object, or nil (undefined).
func (v *value) get(key string) *value {
	if v == nil || v.k != kObject {
		return nil
	}
	for i := range v.obj {
		if v.obj[i].key == key {
			return v.obj[i].val
		}
	}
	return nil
}

// has is Object.hasOwn on a record.
func (v *value) has(key string) bool {
	if v == nil || v.k != kObject {
		return false
	}
	for i := range v.obj {
		if v.obj[i].key == key {
			return true
		}
	}
	return false
}

// isRecord is the reference's asRecord: a non-null, non-array object.
func (v *value) isRecord() bool { return v != nil && v.k == kObject }

func (v *value) isString() bool { return v != nil && v.k == kString }

func (v *value) isNull() bool { return v != nil && v.k == kNull }

// strEq reports v === "s".
func (v *value) strEq(s string) bool { return v != nil && v.k == kString && v.s == s }

// isSafeInteger is Number.isSafeInteger.
func (v *value) isSafeInteger() bool {
	return v != nil && v.k == kNumber && isSafeInt(v.n)
}

func isSafeInt(f float64) bool {
	return f == math.Trunc(f) && math.Abs(f) <= maxSafe
}

const maxSafe = 1<<53 - 1

// isEventSeq is a non-negative safe integer.
func (v *value) isEventSeq() bool { return v.isSafeInteger() && v.n >= 0 }

// hasOnlyKeys mirrors the reference helper: every key of the record is in
// required ∪ optional and every required key is present.
func (v *value) hasOnlyKeys(required []string, optional ...string) bool {
	for _, mb := range v.obj {
		if !contains(required, mb.key) && !contains(optional, mb.key) {
			return false
		}
	}
	for _, k := range required {
		if !v.has(k) {
			return false
		}
	}
	return true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// with returns a copy of the object with key set to val, in place when the
// key exists and appended otherwise, as `{...o, key: val}` does.
func (v *value) with(key string, val *value) *value {
	out := &value{k: kObject, obj: make([]member, 0, len(v.obj)+1)}
	found := false
	for _, mb := range v.obj {
		if mb.key == key {
			mb.val = val
			found = true
		}
		out.obj = append(out.obj, mb)
	}
	if !found {
		out.obj = append(out.obj, member{key, val})
	}
	return out
}

// without returns a copy of the object without the given keys (the rest
// pattern `const {a, ...rest} = o`).
func (v *value) without(keys ...string) *value {
	out := &value{k: kObject, obj: make([]member, 0, len(v.obj))}
	for _, mb := range v.obj {
		if !contains(keys, mb.key) {
			out.obj = append(out.obj, mb)
		}
	}
	return out
}

// parseValue parses one complete JSON text (surrounding blanks allowed)
// into a value tree, refusing duplicate keys at any depth.
func parseValue(data []byte) (*value, error) {
	s := newScanner(data)
	if !s.skipSpace() {
		return nil, s.err
	}
	v := s.parse(0)
	if v == nil {
		return nil, s.err
	}
	if !s.skipSpace() {
		return nil, s.err
	}
	if s.pos != len(s.data) {
		s.fail("trailing characters after the value")
		return nil, s.err
	}
	return v, nil
}

func (s *scanner) parse(depth int) *value {
	if !s.skipSpace() {
		return nil
	}
	if s.pos >= len(s.data) {
		s.fail("unexpected end of text")
		return nil
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.parseObject(depth + 1)
	case '[':
		return s.parseArray(depth + 1)
	case '"':
		start, end, esc, ok := s.scanStringSpan()
		if !ok {
			return nil
		}
		if esc {
			return jsStr(string(decodeString(nil, s.data[start:end])))
		}
		return jsStr(string(s.data[start:end]))
	case 't':
		if s.literal("true") {
			return jsTrue
		}
	case 'f':
		if s.literal("false") {
			return jsFalse
		}
	case 'n':
		if s.literal("null") {
			return jsNull
		}
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := s.pos
			if !s.scanNumber() {
				return nil
			}
			if s.lossyAt < 0 && !numberLossless(s.data[start:s.pos]) {
				s.lossyAt = start
			}
			f, _ := strconv.ParseFloat(string(s.data[start:s.pos]), 64)
			return jsNum(f)
		}
		s.fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
	return nil
}

func (s *scanner) parseObject(depth int) *value {
	if depth > maxDepth {
		s.fail("nesting too deep")
		return nil
	}
	s.pos++
	v := &value{k: kObject, obj: make([]member, 0, 4)}
	if !s.skipSpace() {
		return nil
	}
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return v
	}
	var seen map[string]struct{}
	for {
		if !s.skipSpace() {
			return nil
		}
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			s.fail("expected an object key")
			return nil
		}
		keyAt := s.pos
		start, end, esc, ok := s.scanStringSpan()
		if !ok {
			return nil
		}
		var key string
		if esc {
			key = string(decodeString(nil, s.data[start:end]))
		} else {
			key = string(s.data[start:end])
		}
		if seen == nil && len(v.obj) >= 32 {
			seen = make(map[string]struct{}, 64)
			for _, mb := range v.obj {
				seen[mb.key] = struct{}{}
			}
		}
		dup := false
		if seen != nil {
			_, dup = seen[key]
			seen[key] = struct{}{}
		} else {
			dup = v.has(key)
		}
		if dup {
			s.pos = keyAt
			s.fail("duplicate key " + strconv.Quote(key))
			return nil
		}
		if !s.skipSpace() {
			return nil
		}
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			s.fail("expected ':' after an object key")
			return nil
		}
		s.pos++
		val := s.parse(depth)
		if val == nil {
			return nil
		}
		v.obj = append(v.obj, member{key, val})
		if !s.skipSpace() {
			return nil
		}
		if s.pos >= len(s.data) {
			s.fail("unterminated object")
			return nil
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return v
		default:
			s.fail("expected ',' or '}' in an object")
			return nil
		}
	}
}

func (s *scanner) parseArray(depth int) *value {
	if depth > maxDepth {
		s.fail("nesting too deep")
		return nil
	}
	s.pos++
	v := &value{k: kArray}
	if !s.skipSpace() {
		return nil
	}
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return v
	}
	for {
		el := s.parse(depth)
		if el == nil {
			return nil
		}
		v.arr = append(v.arr, el)
		if !s.skipSpace() {
			return nil
		}
		if s.pos >= len(s.data) {
			s.fail("unterminated array")
			return nil
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return v
		default:
			s.fail("expected ',' or ']' in an array")
			return nil
		}
	}
}

// deepEqual is the reference's structural equality over JSON values: key
// order is irrelevant, numbers compare by value.
func deepEqual(a, b *value) bool {
	if a == nil || b == nil {
		return a == b
	}
	if a.k != b.k {
		return false
	}
	switch a.k {
	case kNumber:
		return a.n == b.n
	case kString:
		return a.s == b.s
	case kArray:
		if len(a.arr) != len(b.arr) {
			return false
		}
		for i := range a.arr {
			if !deepEqual(a.arr[i], b.arr[i]) {
				return false
			}
		}
		return true
	case kObject:
		if len(a.obj) != len(b.obj) {
			return false
		}
		for _, mb := range a.obj {
			if !b.has(mb.key) || !deepEqual(mb.val, b.get(mb.key)) {
				return false
			}
		}
		return true
	default:
		return true
	}
}
