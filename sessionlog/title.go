package sessionlog

import (
	"bytes"
	"strings"
	"unicode/utf8"
)

// MaxTitleBytes bounds the title a store keeps for listings: a title is shown
// on one row, and a session's record must stay small whatever an agent writes.
const MaxTitleBytes = 256

var titleType = []byte(`"session/title"`)

// Title returns the title a session/title event sets (data.title), cut to
// MaxTitleBytes at a character boundary. A lone surrogate, which JSON text
// may hold and the log keeps, becomes U+FFFD here: the title goes into a
// protobuf string, which must be UTF-8. ok is false for any other event,
// and for a session/title event without a string title: such an event
// leaves the session's title as it was. Stored events are checked JSON, so
// a text that does not scan is simply not a title.
func Title(event []byte) (title string, ok bool) {
	// Nearly every event is something else: look for the type's text first.
	if !bytes.Contains(event, titleType) {
		return "", false
	}
	top, good := newScanner(event).scanTop(nil)
	if !good || !bytes.Equal(topValue(event, top, "type"), titleType) {
		return "", false
	}
	data := topValue(event, top, "data")
	if len(data) == 0 || data[0] != '{' {
		return "", false
	}
	members, good := newScanner(data).scanTop(nil)
	if !good {
		return "", false
	}
	t, ok := rawString(topValue(data, members, "title"))
	if !ok {
		return "", false
	}
	return cutTitle(strings.ToValidUTF8(t, "\uFFFD")), true
}

// cutTitle cuts t to at most MaxTitleBytes without splitting a character.
func cutTitle(t string) string {
	if len(t) <= MaxTitleBytes {
		return t
	}
	n := MaxTitleBytes
	for n > 0 && !utf8.RuneStart(t[n]) {
		n--
	}
	return t[:n]
}
