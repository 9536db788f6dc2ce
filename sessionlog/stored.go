package sessionlog

import (
	"strconv"

	"github.com/sessionstore/sessionstore"
)

// storedEvent is one event text split into its top-level members. Member
// values are parsed into trees only when asked for, so that the read side
// pays for full parsing only on the few event types it inspects.
type storedEvent struct {
	raw     []byte
	members []topMember
	vals    []*value
	parsed  []bool
}

// parseStored validates one stored event text (the same syntax rules as
// CheckEvent) and indexes its top-level members.
func parseStored(raw []byte) (*storedEvent, error) {
	s := newScanner(raw)
	// Room for an event's usual members and the key stack of its nesting,
	// allocated once instead of grown.
	s.keys = make([][]byte, 0, 16)
	ms, ok := s.scanTop(make([]topMember, 0, 8))
	if !ok {
		return nil, s.err
	}
	return &storedEvent{raw: raw, members: ms, vals: make([]*value, len(ms)), parsed: make([]bool, len(ms))}, nil
}

func (e *storedEvent) index(key string) int {
	for i := range e.members {
		if string(e.members[i].key) == key {
			return i
		}
	}
	return -1
}

// get returns the value of a top-level member, or nil (undefined).
func (e *storedEvent) get(key string) *value {
	i := e.index(key)
	if i < 0 {
		return nil
	}
	return e.at(i)
}

func (e *storedEvent) at(i int) *value {
	if !e.parsed[i] {
		// The span was validated by scanTop, so parsing cannot fail.
		v, err := parseValue(e.raw[e.members[i].start:e.members[i].end])
		if err != nil {
			v = jsNull
		}
		e.vals[i] = v
		e.parsed[i] = true
	}
	return e.vals[i]
}

func (e *storedEvent) has(key string) bool { return e.index(key) >= 0 }

// member returns e[key][sub] as get(key).get(sub) would, but parses only
// that member when e[key] has not been parsed yet: the other members of the
// object are skipped (the text was validated whole by parseStored).
func (e *storedEvent) member(key, sub string) *value {
	i := e.index(key)
	if i < 0 {
		return nil
	}
	if e.parsed[i] {
		return e.vals[i].get(sub)
	}
	s := newScanner(e.raw[e.members[i].start:e.members[i].end])
	if len(s.data) == 0 || s.data[0] != '{' {
		return nil // not an object: no members
	}
	s.pos = 1
	for s.skipSpace() && s.pos < len(s.data) && s.data[s.pos] == '"' {
		ks, ke, esc, ok := s.scanStringSpan()
		if !ok {
			break
		}
		k := s.data[ks:ke]
		if esc {
			k = decodeString(nil, k)
		}
		if !s.skipSpace() || s.pos >= len(s.data) || s.data[s.pos] != ':' {
			break
		}
		s.pos++
		if !s.skipSpace() {
			break
		}
		vs := s.pos
		if !s.skipValidated() {
			break
		}
		if string(k) == sub {
			v, err := parseValue(s.data[vs:s.pos])
			if err != nil {
				break
			}
			return v
		}
		if !s.skipSpace() || s.pos >= len(s.data) || s.data[s.pos] != ',' {
			return nil // '}': no such member
		}
		s.pos++
	}
	if s.err == nil && s.pos < len(s.data) && s.data[s.pos] == '}' {
		return nil // an empty object
	}
	// Unreachable for a validated text; the whole parse decides.
	return e.at(i).get(sub)
}

// typeName returns the event's type when it is a string.
func (e *storedEvent) typeName() (string, bool) {
	i := e.index("type")
	if i < 0 {
		return "", false
	}
	t := e.raw[e.members[i].start:e.members[i].end]
	if len(t) == 0 || t[0] != '"' {
		return "", false
	}
	return e.at(i).s, true
}

// toValue returns the whole event as an object, replacing the members named
// in repl (in place, keeping the key order).
func (e *storedEvent) toValue(repl map[string]*value) *value {
	out := &value{k: kObject, obj: make([]member, len(e.members))}
	for i := range e.members {
		key := string(e.members[i].key)
		v, ok := repl[key]
		if !ok {
			v = e.at(i)
		}
		out.obj[i] = member{key, v}
	}
	return out
}

// parseLog parses every event of a log, reporting the index of a text that
// is not a JSON object.
func parseLog(events [][]byte) ([]*storedEvent, error) {
	out := make([]*storedEvent, len(events))
	for i, raw := range events {
		e, err := parseStored(raw)
		if err != nil {
			return nil, parseLogErr(i, err)
		}
		out[i] = e
	}
	return out, nil
}

// parseLogErr is parseLog's error for the event at index i.
func parseLogErr(i int, err error) error {
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored,
		"stored event at index %d is not a single-line JSON object: %s", i, err.Error())
}

// jsGet reads v[key] the way JavaScript reads a property of a JSON value:
// a member of an object, undefined for a missing member or a primitive, and
// a TypeError for null or undefined. The reference reads payload members
// without guards in a few places; this keeps their failures.
func jsGet(v *value, key string) (*value, error) {
	if v == nil {
		return nil, sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", undefinedRead(key))
	}
	switch v.k {
	case kNull:
		return nil, sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", nullRead(key))
	case kObject:
		return v.get(key), nil
	case kArray:
		if key == "length" {
			return jsNum(float64(len(v.arr))), nil
		}
	case kString:
		if key == "length" {
			return jsNum(float64(len(utf16Units(v.s)))), nil
		}
	}
	return nil, nil
}

// seqText is `${event.seq}` for messages.
func seqText(e *storedEvent) string { return jsString(e.get("seq")) }

func itoa(i int) string { return strconv.Itoa(i) }
