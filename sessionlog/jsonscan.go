package sessionlog

import (
	"bytes"
	"encoding/binary"
	"strconv"
	"unicode/utf8"
)

// maxDepth bounds nesting so that a hostile event cannot exhaust the stack.
// JavaScript engines refuse far shallower documents than Go could parse, so
// nothing the reference accepts in practice is refused here.
const maxDepth = 10000

// syntaxError describes why a text is not a single-line JSON object without
// duplicate keys. The detail is our wording; callers prefix it.
type syntaxError struct {
	detail string
	off    int
}

func (e *syntaxError) Error() string {
	return e.detail + " at byte " + strconv.Itoa(e.off)
}

// scanner is the lexer shared by the validating skip (CheckEvent's hot path,
// which allocates nothing for ordinary events) and the tree parser used by
// the read side. It works on one complete text.
type scanner struct {
	data []byte
	pos  int
	err  *syntaxError
	// lossyAt is the offset of the first number outside the lossless-JSON
	// domain (-1 when none). Syntax errors win over it: a text that is not
	// JSON at all is NOT_JSON, whatever its numbers.
	lossyAt int
	// keys is a stack of the member names of the objects being scanned, used
	// to find duplicate keys at any depth without a map per object.
	keys [][]byte
}

func newScanner(data []byte) *scanner {
	return &scanner{data: data, lossyAt: -1}
}

func (s *scanner) fail(detail string) bool {
	if s.err == nil {
		s.err = &syntaxError{detail: detail, off: s.pos}
	}
	return false
}

// skipSpace skips the JSON whitespace allowed between tokens. Line breaks are
// refused outright: an event is one line of the log.
func (s *scanner) skipSpace() bool {
	if s.pos < len(s.data) && s.data[s.pos] > ' ' {
		return true // the usual case: compact JSON
	}
	for s.pos < len(s.data) {
		switch s.data[s.pos] {
		case ' ', '\t':
			s.pos++
		case '\n', '\r':
			return s.fail("raw line break")
		default:
			return true
		}
	}
	return true
}

// skipValue validates one value at s.pos. It records the spans of nothing and
// allocates only for escaped object keys and very wide objects.
func (s *scanner) skipValue(depth int) bool {
	if !s.skipSpace() {
		return false
	}
	if s.pos >= len(s.data) {
		return s.fail("unexpected end of text")
	}
	switch c := s.data[s.pos]; c {
	case '{':
		return s.skipObject(depth + 1)
	case '[':
		return s.skipArray(depth + 1)
	case '"':
		_, _, ok := s.scanString()
		return ok
	case 't':
		return s.literal("true")
	case 'f':
		return s.literal("false")
	case 'n':
		return s.literal("null")
	default:
		if c == '-' || (c >= '0' && c <= '9') {
			start := s.pos
			if !s.scanNumber() {
				return false
			}
			if s.lossyAt < 0 && !numberLossless(s.data[start:s.pos]) {
				s.lossyAt = start
			}
			return true
		}
		return s.fail("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

// skipValidated moves past the value at s.pos of a text that has been
// validated already (parseStored): strings are skipped by finding their
// closing quote, containers by counting brackets outside strings, without
// checking anything again.
func (s *scanner) skipValidated() bool {
	d := s.data
	depth := 0
	for s.pos < len(d) {
		switch d[s.pos] {
		case '"':
			if !s.skipValidatedString() {
				return false
			}
			if depth == 0 {
				return true
			}
			continue
		case '{', '[':
			depth++
		case '}', ']':
			depth--
			if depth < 0 {
				return s.fail("unbalanced brackets")
			}
			if depth == 0 {
				s.pos++
				return true
			}
		default:
			if depth == 0 { // a number or a literal
				return s.skipValue(0)
			}
		}
		s.pos++
	}
	return s.fail("unexpected end of text")
}

// skipValidatedString moves past the string at s.pos (its opening quote) of
// a validated text: to the first quote not escaped by an odd run of
// backslashes.
func (s *scanner) skipValidatedString() bool {
	d := s.data
	for i := s.pos + 1; ; {
		k := bytes.IndexByte(d[i:], '"')
		if k < 0 {
			return s.fail("unterminated string")
		}
		q := i + k
		n := 0
		for n < q-i && d[q-1-n] == '\\' {
			n++
		}
		if n%2 == 0 {
			s.pos = q + 1
			return true
		}
		i = q + 1
	}
}

func (s *scanner) literal(word string) bool {
	if len(s.data)-s.pos < len(word) || string(s.data[s.pos:s.pos+len(word)]) != word {
		return s.fail("invalid literal")
	}
	s.pos += len(word)
	return true
}

func (s *scanner) skipObject(depth int) bool {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.pos++ // '{'
	base := len(s.keys)
	defer func() { s.keys = s.keys[:base] }()
	var seen map[string]struct{}
	if !s.skipSpace() {
		return false
	}
	if s.pos < len(s.data) && s.data[s.pos] == '}' {
		s.pos++
		return true
	}
	for {
		if !s.skipSpace() {
			return false
		}
		if s.pos >= len(s.data) || s.data[s.pos] != '"' {
			return s.fail("expected an object key")
		}
		keyAt := s.pos
		start, end, esc, ok := s.scanStringSpan()
		if !ok {
			return false
		}
		key := s.data[start:end]
		if esc {
			key = decodeString(nil, key)
		}
		if !s.addKey(base, key, keyAt, &seen) {
			return false
		}
		if !s.skipSpace() {
			return false
		}
		if s.pos >= len(s.data) || s.data[s.pos] != ':' {
			return s.fail("expected ':' after an object key")
		}
		s.pos++
		if !s.skipValue(depth) {
			return false
		}
		if !s.skipSpace() {
			return false
		}
		if s.pos >= len(s.data) {
			return s.fail("unterminated object")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case '}':
			s.pos++
			return true
		default:
			return s.fail("expected ',' or '}' in an object")
		}
	}
}

// addKey records a member name of the innermost object and refuses a
// repeat. Keys compare by their decoded value ("a" and "\u0061" collide),
// as JSON.parse would silently keep only the last one.
// A wide object switches to a map so that a hostile event cannot make the
// check quadratic.
func (s *scanner) addKey(base int, key []byte, at int, seen *map[string]struct{}) bool {
	dup := false
	if *seen != nil {
		_, dup = (*seen)[string(key)]
		if !dup {
			(*seen)[string(key)] = struct{}{}
		}
	} else {
		for _, k := range s.keys[base:] {
			if string(k) == string(key) {
				dup = true
				break
			}
		}
		if !dup && len(s.keys)-base >= 32 {
			*seen = make(map[string]struct{}, 64)
			for _, k := range s.keys[base:] {
				(*seen)[string(k)] = struct{}{}
			}
			(*seen)[string(key)] = struct{}{}
		}
	}
	if dup {
		s.pos = at
		return s.fail("duplicate key " + strconv.Quote(string(key)))
	}
	s.keys = append(s.keys, key)
	return true
}

func (s *scanner) skipArray(depth int) bool {
	if depth > maxDepth {
		return s.fail("nesting too deep")
	}
	s.pos++ // '['
	if !s.skipSpace() {
		return false
	}
	if s.pos < len(s.data) && s.data[s.pos] == ']' {
		s.pos++
		return true
	}
	for {
		if !s.skipValue(depth) {
			return false
		}
		if !s.skipSpace() {
			return false
		}
		if s.pos >= len(s.data) {
			return s.fail("unterminated array")
		}
		switch s.data[s.pos] {
		case ',':
			s.pos++
		case ']':
			s.pos++
			return true
		default:
			return s.fail("expected ',' or ']' in an array")
		}
	}
}

// scanString validates a string token and returns its content span.
func (s *scanner) scanString() (start, end int, ok bool) {
	start, end, _, ok = s.scanStringSpan()
	return start, end, ok
}

// scanStringSpan validates the string token at s.pos (which is '"'): escapes,
// no raw control characters, valid UTF-8. It reports whether the content
// holds escapes, in which case decodeString yields the value.
func (s *scanner) scanStringSpan() (start, end int, escaped, ok bool) {
	s.pos++
	start = s.pos
	d := s.data
	for s.pos < len(d) {
		// Fast path: the run of plain ASCII that makes up most text, eight
		// bytes at a time, then byte by byte up to the first other byte.
		i := s.pos
		for i+8 <= len(d) && !notPlain8(binary.LittleEndian.Uint64(d[i:])) {
			i += 8
		}
		for i < len(d) && plainASCII[d[i]] {
			i++
		}
		s.pos = i
		if i >= len(d) {
			break
		}
		c := d[s.pos]
		switch {
		case c == '"':
			end = s.pos
			s.pos++
			return start, end, escaped, true
		case c == '\\':
			escaped = true
			if s.pos+1 >= len(d) {
				return 0, 0, false, s.fail("unterminated string")
			}
			switch d[s.pos+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				s.pos += 2
			case 'u':
				if s.pos+6 > len(d) || !isHex4(d[s.pos+2:s.pos+6]) {
					return 0, 0, false, s.fail("invalid \\u escape")
				}
				s.pos += 6
			default:
				return 0, 0, false, s.fail("invalid escape")
			}
		case c == '\n' || c == '\r':
			return 0, 0, false, s.fail("raw line break")
		case c < 0x20:
			return 0, 0, false, s.fail("raw control character in a string")
		case c < utf8.RuneSelf:
			s.pos++
		default:
			r, size := utf8.DecodeRune(d[s.pos:])
			if r == utf8.RuneError && size <= 1 {
				return 0, 0, false, s.fail("invalid UTF-8 in a string")
			}
			s.pos += size
		}
	}
	return 0, 0, false, s.fail("unterminated string")
}

// scanNumber checks the JSON number grammar at s.pos.
func (s *scanner) scanNumber() bool {
	d := s.data
	if s.pos < len(d) && d[s.pos] == '-' {
		s.pos++
	}
	switch {
	case s.pos < len(d) && d[s.pos] == '0':
		s.pos++
	case s.pos < len(d) && d[s.pos] >= '1' && d[s.pos] <= '9':
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	default:
		return s.fail("invalid number")
	}
	if s.pos < len(d) && d[s.pos] == '.' {
		s.pos++
		if s.pos >= len(d) || !isDigit(d[s.pos]) {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	}
	if s.pos < len(d) && (d[s.pos] == 'e' || d[s.pos] == 'E') {
		s.pos++
		if s.pos < len(d) && (d[s.pos] == '+' || d[s.pos] == '-') {
			s.pos++
		}
		if s.pos >= len(d) || !isDigit(d[s.pos]) {
			return s.fail("invalid number")
		}
		for s.pos < len(d) && isDigit(d[s.pos]) {
			s.pos++
		}
	}
	return true
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// notPlain8 reports whether any of the eight bytes in x is not plainASCII:
// below 0x20, a quote, a backslash or at least 0x80. Each term is the
// classic "some byte is zero / below n" test, exact for the whole word (a
// borrow only spreads from a byte that already matches).
func notPlain8(x uint64) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	quote, backslash := x^(ones*'"'), x^(ones*'\\')
	return ((x-ones*0x20)&^x|(quote-ones)&^quote|(backslash-ones)&^backslash|x)&highs != 0
}

// plainASCII marks the bytes a string token holds without any check:
// printable ASCII other than the quote and the backslash.
var plainASCII = func() (t [256]bool) {
	for c := 0x20; c < 0x80; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

func isHex4(b []byte) bool {
	for _, c := range b {
		if !isHexDigit(c) {
			return false
		}
	}
	return true
}

func isHexDigit(c byte) bool {
	return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')
}

func hexVal(c byte) rune {
	switch {
	case c >= '0' && c <= '9':
		return rune(c - '0')
	case c >= 'a' && c <= 'f':
		return rune(c-'a') + 10
	default:
		return rune(c-'A') + 10
	}
}

// decodeString appends the value of validated string content to dst. The
// result is WTF-8: a lone surrogate escape (legal JSON, and a legal
// JavaScript string) is kept as its three-byte generalised UTF-8 form so that
// re-serialisation can give it back as \udXXX, as JSON.stringify does.
func decodeString(dst, content []byte) []byte {
	for i := 0; i < len(content); {
		c := content[i]
		if c != '\\' {
			dst = append(dst, c)
			i++
			continue
		}
		switch content[i+1] {
		case '"':
			dst = append(dst, '"')
		case '\\':
			dst = append(dst, '\\')
		case '/':
			dst = append(dst, '/')
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r := hex4(content[i+2 : i+6])
			i += 6
			if r >= 0xD800 && r < 0xDC00 && i+6 <= len(content) && content[i] == '\\' && content[i+1] == 'u' {
				lo := hex4(content[i+2 : i+6])
				if lo >= 0xDC00 && lo < 0xE000 {
					dst = utf8.AppendRune(dst, 0x10000+(r-0xD800)<<10+(lo-0xDC00))
					i += 6
					continue
				}
			}
			dst = appendWTF8(dst, r)
			continue
		}
		i += 2
	}
	return dst
}

func hex4(b []byte) rune {
	return hexVal(b[0])<<12 | hexVal(b[1])<<8 | hexVal(b[2])<<4 | hexVal(b[3])
}

// appendWTF8 encodes a code point, including a surrogate, as generalised UTF-8.
func appendWTF8(dst []byte, r rune) []byte {
	if r >= 0xD800 && r < 0xE000 {
		return append(dst, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
	}
	return utf8.AppendRune(dst, r)
}
