package sessionlog

import (
	"math"
	"strconv"
	"unicode/utf8"
)

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
