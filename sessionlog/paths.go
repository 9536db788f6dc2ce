package sessionlog

import (
	"unicode/utf16"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
)

// maxSegmentBytes is the usual file-name limit; an encoded session id must
// fit in one path segment.
const maxSegmentBytes = 255

// isSafeUnit reports whether a UTF-16 code unit is kept literally by
// encodeSegment and projectKey ([A-Za-z0-9._-]; "~" is the escape character).
func isSafeUnit(u uint16) bool {
	return (u >= 'A' && u <= 'Z') || (u >= 'a' && u <= 'z') || (u >= '0' && u <= '9') ||
		u == '.' || u == '_' || u == '-'
}

const upperHex = "0123456789ABCDEF"

func appendEscape(dst []byte, u uint16) []byte {
	return append(dst, '~', upperHex[u>>12], upperHex[u>>8&0xF], upperHex[u>>4&0xF], upperHex[u&0xF])
}

// utf16Units converts a Go string to the UTF-16 code units a JavaScript
// string would hold. A WTF-8 surrogate becomes its own unit; other invalid
// UTF-8 reads as U+FFFD.
func utf16Units(s string) []uint16 {
	units := make([]uint16, 0, len(s))
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size <= 1 {
			if sur, ok := wtf8Surrogate(s[i:]); ok {
				units = append(units, uint16(sur))
				i += 3
				continue
			}
		}
		if r >= 0x10000 {
			hi, lo := utf16.EncodeRune(r)
			units = append(units, uint16(hi), uint16(lo))
		} else {
			units = append(units, uint16(r))
		}
		i += size
	}
	return units
}

// EncodeSegment is the JSONL backend's injective escaping of one path
// segment (docs/events.md#layout): over UTF-16 code units, [A-Za-z0-9._-] are kept and
// every other unit (including "~") becomes ~XXXX in upper-case hex; "." and
// ".." are escaped whole so that a segment never names a directory link.
func EncodeSegment(s string) (string, error) {
	switch s {
	case "":
		return "", sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "cannot encode an empty path segment")
	case ".":
		return "~002E", nil
	case "..":
		return "~002E~002E", nil
	}
	out := make([]byte, 0, len(s))
	for _, u := range utf16Units(s) {
		if isSafeUnit(u) {
			out = append(out, byte(u))
		} else {
			out = appendEscape(out, u)
		}
	}
	return string(out), nil
}

// ProjectKey is the JSONL backend's project-directory name for a cwd
// (docs/events.md#layout): runs of "/", "\" and ":" become one "-", safe
// units are kept, others become ~XXXX, leading "-" are stripped ("root" when nothing is
// left), the slug is cut to 251 characters and wrapped as --slug--. It is
// lossy by design; the session directory below it is what identifies.
func ProjectKey(cwd string) (string, error) {
	if cwd == "" {
		return "", sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "cannot encode an empty project path")
	}
	readable := make([]byte, 0, len(cwd))
	separatorRun := false
	for _, u := range utf16Units(cwd) {
		switch {
		case u == '/' || u == '\\' || u == ':':
			if !separatorRun {
				readable = append(readable, '-')
			}
			separatorRun = true
		case isSafeUnit(u):
			readable = append(readable, byte(u))
			separatorRun = false
		default:
			readable = appendEscape(readable, u)
			separatorRun = false
		}
	}
	i := 0
	for i < len(readable) && readable[i] == '-' {
		i++
	}
	slug := readable[i:]
	if len(slug) == 0 {
		slug = []byte("root")
	}
	// The slug is ASCII, so 251 bytes are 251 UTF-16 units, as slice(0, 251).
	if len(slug) > 251 {
		slug = slug[:251]
	}
	return "--" + string(slug) + "--", nil
}

// ValidateSessionID accepts any non-empty, valid UTF-8 id whose encoded path
// segment fits in 255 bytes (docs/design.md "Session ids"). Ids such as "..", "a/b" or NUL
// are valid: they are always encoded into one segment, never used as paths.
func ValidateSessionID(id string) error {
	if id == "" {
		return sessionstore.Errorf(sessionstore.ReasonInvalidSessionID, "session id must not be empty")
	}
	if !utf8.ValidString(id) {
		return sessionstore.Errorf(sessionstore.ReasonInvalidSessionID, "session id must be valid UTF-8")
	}
	if n := segmentLen(id); n > maxSegmentBytes {
		return sessionstore.Errorf(sessionstore.ReasonInvalidSessionID,
			"session id is too long: its encoded path segment is %d bytes, the limit is %d", n, maxSegmentBytes)
	}
	return nil
}

// segmentLen is len(EncodeSegment(s)) for valid UTF-8, counted without
// building the segment (every Append checks its session id).
func segmentLen(s string) int {
	switch s {
	case ".":
		return 5
	case "..":
		return 10
	}
	n := 0
	for _, r := range s {
		switch {
		case r < 0x80 && isSafeUnit(uint16(r)):
			n++
		case r >= 0x10000:
			n += 10 // a surrogate pair, each unit ~XXXX
		default:
			n += 5
		}
	}
	return n
}
