package sessionlog

import (
	"math"
	"strconv"
	"unicode/utf8"
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
	v := &value{k: kObject}
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

// appendJSON serialises v exactly as JavaScript's JSON.stringify would:
// array-index keys first in ascending order, then the other keys in
// insertion order; undefined members omitted and undefined array elements
// written as null; numbers in JavaScript's shortest form.
func appendJSON(dst []byte, v *value) []byte {
	if v == nil {
		return append(dst, "null"...)
	}
	switch v.k {
	case kNull:
		return append(dst, "null"...)
	case kTrue:
		return append(dst, "true"...)
	case kFalse:
		return append(dst, "false"...)
	case kNumber:
		return appendJSNumberJSON(dst, v.n)
	case kString:
		return AppendJSString(dst, v.s)
	case kArray:
		dst = append(dst, '[')
		for i, el := range v.arr {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendJSON(dst, el)
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		first := true
		emit := func(mb member) {
			if mb.val == nil {
				return
			}
			if !first {
				dst = append(dst, ',')
			}
			first = false
			dst = AppendJSString(dst, mb.key)
			dst = append(dst, ':')
			dst = appendJSON(dst, mb.val)
		}
		if idx := indexKeyOrder(v.obj); idx != nil {
			for _, i := range idx {
				emit(v.obj[i])
			}
		}
		for _, mb := range v.obj {
			if _, ok := arrayIndex(mb.key); !ok {
				emit(mb)
			}
		}
		return append(dst, '}')
	}
}

// arrayIndex reports whether a property name is an array index
// (a canonical decimal below 2^32-1), which JavaScript enumerates first.
func arrayIndex(key string) (uint32, bool) {
	if key == "" || len(key) > 10 || (key[0] == '0' && len(key) > 1) {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(key); i++ {
		c := key[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	if n >= 1<<32-1 {
		return 0, false
	}
	return uint32(n), true
}

// indexKeyOrder returns the positions of array-index keys sorted by index,
// or nil when there are none (the usual case).
func indexKeyOrder(ms []member) []int {
	var idx []int
	for i, mb := range ms {
		if _, ok := arrayIndex(mb.key); ok {
			idx = append(idx, i)
		}
	}
	if len(idx) < 2 {
		return idx
	}
	// Insertion sort: such keys are rare and few.
	for i := 1; i < len(idx); i++ {
		for j := i; j > 0; j-- {
			a, _ := arrayIndex(ms[idx[j-1]].key)
			b, _ := arrayIndex(ms[idx[j]].key)
			if a <= b {
				break
			}
			idx[j-1], idx[j] = idx[j], idx[j-1]
		}
	}
	return idx
}

// AppendJSString appends JSON.stringify(s): `"` and `\` escaped, \b \f \n \r
// \t, other control characters as \u00xx (lower-case hex), lone surrogates
// (present only in WTF-8 strings decoded from \uD800-style escapes) as \udxxx,
// and everything else verbatim — no HTML escaping, U+2028/U+2029 unescaped.
// Bytes that are not UTF-8 at all cannot occur in a JavaScript string; they
// are written as U+FFFD, as Go's string-to-rune conversion reads them.
func AppendJSString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' && c < utf8.RuneSelf {
			i++
			continue
		}
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r != utf8.RuneError || size > 1 {
				i += size
				continue
			}
			dst = append(dst, s[start:i]...)
			if sur, ok := wtf8Surrogate(s[i:]); ok {
				dst = append(dst, '\\', 'u')
				dst = appendHex4(dst, sur)
				i += 3
			} else {
				dst = append(dst, "\uFFFD"...)
				i++
			}
			start = i
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"':
			dst = append(dst, '\\', '"')
		case '\\':
			dst = append(dst, '\\', '\\')
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\r':
			dst = append(dst, '\\', 'r')
		case '\t':
			dst = append(dst, '\\', 't')
		default:
			dst = append(dst, '\\', 'u', '0', '0')
			dst = appendHex2(dst, c)
		}
		i++
		start = i
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// wtf8Surrogate decodes a generalised-UTF-8 surrogate (ED A0..BF 80..BF).
func wtf8Surrogate(s string) (rune, bool) {
	if len(s) < 3 || s[0] != 0xED || s[1] < 0xA0 || s[1] > 0xBF || s[2] < 0x80 || s[2] > 0xBF {
		return 0, false
	}
	return 0xD000 | rune(s[1]&0x3F)<<6 | rune(s[2]&0x3F), true
}

const lowerHex = "0123456789abcdef"

func appendHex2(dst []byte, c byte) []byte {
	return append(dst, lowerHex[c>>4], lowerHex[c&0xF])
}

func appendHex4(dst []byte, r rune) []byte {
	return append(dst, lowerHex[r>>12&0xF], lowerHex[r>>8&0xF], lowerHex[r>>4&0xF], lowerHex[r&0xF])
}

// appendJSNumberJSON writes a number as JSON.stringify does (non-finite → null).
func appendJSNumberJSON(dst []byte, f float64) []byte {
	if math.IsInf(f, 0) || math.IsNaN(f) {
		return append(dst, "null"...)
	}
	return appendJSNumber(dst, f)
}

// appendJSNumber writes ECMAScript Number::toString(f): the shortest
// round-tripping digits, in plain notation for exponents in [-7, 21) and as
// d.ddde±x otherwise (1e+21, 1e-7, 1.5e+300).
func appendJSNumber(dst []byte, f float64) []byte {
	switch {
	case math.IsNaN(f):
		return append(dst, "NaN"...)
	case math.IsInf(f, 1):
		return append(dst, "Infinity"...)
	case math.IsInf(f, -1):
		return append(dst, "-Infinity"...)
	case f == 0:
		return append(dst, '0')
	}
	if f < 0 {
		dst = append(dst, '-')
		f = -f
	}
	if f < 1e15 && f == math.Trunc(f) {
		return strconv.AppendInt(dst, int64(f), 10)
	}
	var buf [32]byte
	e := strconv.AppendFloat(buf[:0], f, 'e', -1, 64)
	// e is d[.ddd]e±xx: split digits and exponent.
	var digits [24]byte
	k := 0
	i := 0
	for ; e[i] != 'e'; i++ {
		if e[i] != '.' {
			digits[k] = e[i]
			k++
		}
	}
	x, _ := strconv.Atoi(string(e[i+1:]))
	n := x + 1 // position of the decimal point, as in the spec's n
	ds := digits[:k]
	switch {
	case k <= n && n <= 21:
		dst = append(dst, ds...)
		for j := 0; j < n-k; j++ {
			dst = append(dst, '0')
		}
	case 0 < n && n <= 21:
		dst = append(dst, ds[:n]...)
		dst = append(dst, '.')
		dst = append(dst, ds[n:]...)
	case -6 < n && n <= 0:
		dst = append(dst, '0', '.')
		for j := 0; j < -n; j++ {
			dst = append(dst, '0')
		}
		dst = append(dst, ds...)
	default:
		dst = append(dst, ds[0])
		if k > 1 {
			dst = append(dst, '.')
			dst = append(dst, ds[1:]...)
		}
		dst = append(dst, 'e')
		if n-1 >= 0 {
			dst = append(dst, '+')
		}
		dst = strconv.AppendInt(dst, int64(n-1), 10)
	}
	return dst
}

// jsNumber is String(f).
func jsNumber(f float64) string { return string(appendJSNumber(nil, f)) }

// jsString is JavaScript's String(v), used where the reference interpolates
// a value into a message template.
func jsString(v *value) string {
	if v == nil {
		return "undefined"
	}
	switch v.k {
	case kNull:
		return "null"
	case kTrue:
		return "true"
	case kFalse:
		return "false"
	case kNumber:
		return jsNumber(v.n)
	case kString:
		return v.s
	case kArray:
		// Array.prototype.join: null and undefined become empty.
		var out []byte
		for i, el := range v.arr {
			if i > 0 {
				out = append(out, ',')
			}
			if el != nil && el.k != kNull {
				out = append(out, jsString(el)...)
			}
		}
		return string(out)
	default:
		return "[object Object]"
	}
}

// jsonStringify is JSON.stringify(v) as a string; undefined gives
// "undefined", which is how a template literal shows the missing value.
func jsonStringify(v *value) string {
	if v == nil {
		return "undefined"
	}
	return string(appendJSON(nil, v))
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
