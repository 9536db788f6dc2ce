package planmode

import (
	"bytes"
	"encoding/json"
	"strconv"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// Event types plan mode reads or writes (docs/planmode.md#plan-mode-event).
const (
	TypePlanMode      = "plan/mode"
	TypeTurnStart     = "turn/start"
	TypeTurnEnd       = "turn/end"
	TypeRequestHeader = "request/header"
	TypeCommandRun    = "command/run"
	TypeCommandDone   = "command/done"
)

// Stamp is where the first event a rule appends goes: its seq (the log's
// next seq) and its time (epoch ms, stamped by the proposer). Further events
// of the same call take seq+1, seq+2, … and the same time.
type Stamp struct {
	Seq  int64
	Time int64
}

// parsed is the part of an event plan mode looks at.
type parsed struct {
	typ  string
	data map[string]json.RawMessage // nil unless the type is interesting
}

var typePrefix = []byte(`{"type":"`)

// eventType returns the event's type. Stored events almost always start
// with an unescaped "type" member; that case is read without decoding the
// whole text (the store refuses duplicate keys, so the first one is the one).
func eventType(ev []byte) (string, error) {
	if bytes.HasPrefix(ev, typePrefix) {
		rest := ev[len(typePrefix):]
		if i := bytes.IndexByte(rest, '"'); i >= 0 && bytes.IndexByte(rest[:i], '\\') < 0 {
			return string(rest[:i]), nil
		}
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(ev, &env); err != nil {
		return "", storedErr("event is not a JSON object: " + err.Error())
	}
	var t string
	if raw, ok := env["type"]; !ok || json.Unmarshal(raw, &t) != nil {
		return "", storedErr(`event has no string "type"`)
	}
	return t, nil
}

// parseEvent returns the type and, when interesting(type), the data members
// (exact, case-sensitive keys; nil when data is not an object).
func parseEvent(ev []byte, interesting func(string) bool) (parsed, error) {
	t, err := eventType(ev)
	if err != nil || !interesting(t) {
		return parsed{typ: t}, err
	}
	var env map[string]json.RawMessage
	if err := json.Unmarshal(ev, &env); err != nil {
		return parsed{}, storedErr("event is not a JSON object: " + err.Error())
	}
	p := parsed{typ: t}
	if raw, ok := env["data"]; ok {
		raw = bytes.TrimSpace(raw)
		if len(raw) > 0 && raw[0] == '{' {
			if err := json.Unmarshal(raw, &p.data); err != nil {
				return parsed{}, storedErr("event data is not a JSON object: " + err.Error())
			}
		}
	}
	return p, nil
}

func storedErr(msg string) error {
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", msg)
}

// member returns the trimmed raw text of data[key], nil when absent.
func (p parsed) member(key string) []byte {
	raw, ok := p.data[key]
	if !ok {
		return nil
	}
	return bytes.TrimSpace(raw)
}

// str decodes data[key] as a string.
func (p parsed) str(key string) (string, bool) {
	raw := p.member(key)
	if len(raw) == 0 || raw[0] != '"' {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) != nil {
		return "", false
	}
	return s, true
}

// boolean decodes data[key] as a JSON boolean.
func (p parsed) boolean(key string) (v, ok bool) {
	switch string(p.member(key)) {
	case "true":
		return true, true
	case "false":
		return false, true
	}
	return false, false
}

// planModeActive reads the active state of a plan/mode event; a payload that
// breaks the invariant of docs/planmode.md#invariant yields the reference text.
func planModeActive(ev []byte, p parsed) (bool, error) {
	if v, ok := p.boolean("active"); ok {
		return v, nil
	}
	return false, storedErr(invariantMessage(ev))
}

// invariantMessage is the docs/planmode.md#invariant text for an invalid plan/mode payload,
// produced by the write-side check so both sides word it identically.
func invariantMessage(ev []byte) string {
	if _, err := sessionlog.CheckEvent("", ev); err != nil {
		return err.Error()
	}
	return "plan/mode carries invalid active state undefined; expected a boolean"
}

// ValidateEvent is the plan/mode invariant (docs/planmode.md#invariant) for one event to be
// appended: a plan/mode event whose data.active is not a JSON boolean is
// refused with INVALID_EVENT and the reference text
// "plan/mode carries invalid active state <JSON>; expected a boolean".
// Other event types are not judged here.
func ValidateEvent(ev []byte) error {
	t, err := eventType(ev)
	if err != nil {
		return sessionstore.Errorf(sessionstore.ReasonInvalidEvent, "%s", err.Error())
	}
	if t != TypePlanMode {
		return nil
	}
	p, err := parseEvent(ev, func(string) bool { return true })
	if err != nil {
		return sessionstore.Errorf(sessionstore.ReasonInvalidEvent, "%s", err.Error())
	}
	if _, ok := p.boolean("active"); ok {
		return nil
	}
	return sessionstore.Errorf(sessionstore.ReasonInvalidEvent, "%s", invariantMessage(ev))
}

// ValidateLog sweeps a stored log with ValidateEvent (the companion's
// installation and session-creation sweeps of docs/planmode.md#invariant). No structural rule is
// checked: plan/mode inside or between turns are both valid.
func ValidateLog(events [][]byte) error {
	for _, ev := range events {
		if err := ValidateEvent(ev); err != nil {
			return err
		}
	}
	return nil
}

// --- writers (JSON.stringify key order of the reference) ---

func appendEnvelope(dst []byte, typ string, seq, time int64) []byte {
	dst = append(dst, `{"type":`...)
	dst = sessionlog.AppendJSString(dst, typ)
	dst = append(dst, `,"seq":`...)
	dst = strconv.AppendInt(dst, seq, 10)
	dst = append(dst, `,"time":`...)
	dst = strconv.AppendInt(dst, time, 10)
	return append(dst, `,"data":`...)
}

// PlanModeEvent is `{"type":"plan/mode","seq":S,"time":T,"data":{"active":B}}`.
func PlanModeEvent(active bool, seq, time int64) []byte {
	b := appendEnvelope(make([]byte, 0, 80), TypePlanMode, seq, time)
	b = append(b, `{"active":`...)
	b = strconv.AppendBool(b, active)
	return append(b, "}}"...)
}

// CommandRunEvent is command/run {commandId, name, args, source:{kind:"user"}}.
func CommandRunEvent(commandID, name, args string, seq, time int64) []byte {
	b := appendEnvelope(make([]byte, 0, 128+len(args)), TypeCommandRun, seq, time)
	b = append(b, `{"commandId":`...)
	b = sessionlog.AppendJSString(b, commandID)
	b = append(b, `,"name":`...)
	b = sessionlog.AppendJSString(b, name)
	b = append(b, `,"args":`...)
	b = sessionlog.AppendJSString(b, args)
	return append(b, `,"source":{"kind":"user"}}}`...)
}

// CommandDoneEvent is command/done {commandId, kind, text}.
func CommandDoneEvent(commandID, kind, text string, seq, time int64) []byte {
	b := appendEnvelope(make([]byte, 0, 128+len(text)), TypeCommandDone, seq, time)
	b = append(b, `{"commandId":`...)
	b = sessionlog.AppendJSString(b, commandID)
	b = append(b, `,"kind":`...)
	b = sessionlog.AppendJSString(b, kind)
	b = append(b, `,"text":`...)
	b = sessionlog.AppendJSString(b, text)
	return append(b, "}}"...)
}

// NoticeMessage is the narration user message of docs/planmode.md#narration,
// the data object of the user/message the agent logs:
// {"id","role":"user","content":[{"type":"text","text"}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary"}}.
func NoticeMessage(id, text string) []byte {
	b := make([]byte, 0, 200+2*len(text))
	b = append(b, `{"id":`...)
	b = sessionlog.AppendJSString(b, id)
	b = append(b, `,"role":"user","content":[{"type":"text","text":`...)
	b = sessionlog.AppendJSString(b, text)
	b = append(b, `}],"source":{"kind":"plugin","plugin":"plan-mode","form":"notice","summary":`...)
	b = sessionlog.AppendJSString(b, text)
	return append(b, "}}"...)
}

// --- JavaScript String.prototype.trim ---

// isJSSpace is ECMAScript WhiteSpace ∪ LineTerminator (what trim and \s match).
func isJSSpace(r rune) bool {
	switch r {
	case '\t', '\n', '\v', '\f', '\r', ' ', 0xA0, 0x1680, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000, 0xFEFF:
		return true
	}
	return r >= 0x2000 && r <= 0x200A
}

// jsTrim is String.prototype.trim.
func jsTrim(s string) string {
	start, end := 0, len(s)
	for start < end {
		r, n := decodeRune(s[start:])
		if !isJSSpace(r) {
			break
		}
		start += n
	}
	for end > start {
		r, n := decodeLastRune(s[start:end])
		if !isJSSpace(r) {
			break
		}
		end -= n
	}
	return s[start:end]
}
