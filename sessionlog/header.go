package sessionlog

import (
	"strings"
	"unicode/utf8"

	"github.com/sessionstore/sessionstore"
)

// CheckCreateHeader validates the metadata of a Create as the reference's
// create(meta) does (docs/events.md#header), plus our session id rule and a non-empty
// cwd. It checks nothing else: version 99 is accepted (refused on load) and
// cwd absoluteness is a read-side rule.
func CheckCreateHeader(h sessionstore.Header) error {
	lossless := func(p *int64) bool { return p == nil || inSafeRange(*p) }
	if !inSafeRange(h.Version) || !lossless(h.SeedLength) || !lossless(h.DelegationDepth) ||
		!validOptString(h.Cwd) || !validOptString(h.ParentSession) ||
		!validOptString(h.Origin) || !validOptString(h.AgentPreset) {
		return sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "session metadata must be losslessly JSON-serializable")
	}
	if h.CreatedAt < 0 || h.CreatedAt > maxSafe {
		return sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "session metadata createdAt must be a non-negative safe integer")
	}
	if err := ValidateSessionID(h.ID); err != nil {
		return err
	}
	if h.Cwd != nil && *h.Cwd == "" {
		return sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "session metadata cwd must be a non-empty string when present")
	}
	return nil
}

// inSafeRange reports whether an integer is exact as a JavaScript number
// (|v| <= 2^53-1), the lossless domain for header integers.
func inSafeRange(v int64) bool { return v >= -maxSafe && v <= maxSafe }

func validOptString(p *string) bool { return p == nil || utf8.ValidString(*p) }

// HeaderLine returns JSON.stringify of the JSONL header line (docs/events.md#header-line),
// without the trailing newline: keys type, version, id, createdAt, cwd?,
// parentSession?, seedLength?, origin?, delegationDepth (0 when absent),
// agentPreset?.
func HeaderLine(h sessionstore.Header) []byte {
	b := make([]byte, 0, 128+len(h.ID))
	b = append(b, `{"type":"session","version":`...)
	b = appendJSNumber(b, float64(h.Version))
	b = append(b, `,"id":`...)
	b = AppendJSString(b, h.ID)
	b = append(b, `,"createdAt":`...)
	b = appendJSNumber(b, float64(h.CreatedAt))
	optStr := func(key string, p *string) {
		if p != nil {
			b = append(b, ',')
			b = AppendJSString(b, key)
			b = append(b, ':')
			b = AppendJSString(b, *p)
		}
	}
	optStr("cwd", h.Cwd)
	optStr("parentSession", h.ParentSession)
	if h.SeedLength != nil {
		b = append(b, `,"seedLength":`...)
		b = appendJSNumber(b, float64(*h.SeedLength))
	}
	optStr("origin", h.Origin)
	b = append(b, `,"delegationDepth":`...)
	if h.DelegationDepth != nil {
		b = appendJSNumber(b, float64(*h.DelegationDepth))
	} else {
		b = append(b, '0')
	}
	optStr("agentPreset", h.AgentPreset)
	return append(b, '}')
}

// rawLogSuffix is the " (raw log: <path>)" the reference appends to format
// refusals when the backend keeps one artifact per session.
func rawLogSuffix(rawLogPath string) string {
	if rawLogPath == "" {
		return ""
	}
	return " (raw log: " + rawLogPath + ")"
}

// versionRefusal is the direction-aware text of docs/events.md#format-version,
// for any numeric version: the reference interpolates `v${version}`, so 0.5
// or Infinity are possible in a header read from a file.
func versionRefusal(id string, version float64, rawLogPath string) error {
	v := jsNumber(version)
	var msg string
	if version > sessionstore.FormatVersion {
		msg = "session " + sessionstore.Quote(id) + " uses log format v" + v +
			", but this harness reads only v0: the log was written by a newer harness \u2014 upgrade the harness to open it"
	} else {
		msg = "session " + sessionstore.Quote(id) + " uses log format v" + v +
			", older than the supported v0, and this build ships no upgrade path for it"
	}
	return sessionstore.Errorf(sessionstore.ReasonFormatUnsupported, "%s%s", msg, rawLogSuffix(rawLogPath))
}

// identityMismatch is the reference's stored-identity text, unwrapped.
func identityMismatch(requestedID, headerID string) *sessionstore.Error {
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored,
		"stored session identity mismatch: requested %s, header contains %s",
		sessionstore.Quote(requestedID), sessionstore.Quote(headerID))
}

// CheckStoredHeader runs the reference's header checks for a load, inspect
// or prepare, in its order: the identity binding, the format version
// (FORMAT_UNSUPPORTED, never wrapped, with the raw-log suffix when
// rawLogPath is set), then the field checks the Session constructor applies
// (docs/events.md#header). Identity and field failures come back in the load-path
// corruption form `stored session "<id>" failed validation: Error: <text>`.
func CheckStoredHeader(requestedID string, h sessionstore.Header, rawLogPath string) error {
	if h.ID != requestedID {
		return WrapCorruption(requestedID, identityMismatch(requestedID, h.ID))
	}
	if h.Version != sessionstore.FormatVersion {
		return versionRefusal(h.ID, float64(h.Version), rawLogPath)
	}
	if msg := headerFieldProblem(h); msg != "" {
		return WrapCorruption(requestedID, sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", msg))
	}
	return nil
}

// CheckReadFromHeader is the header check of readFrom (docs/events.md#read-checks): the same
// identity and version checks, but readFrom builds no Session, so the header
// fields are not checked and the identity error is returned raw, as the
// reference's readFrom does not wrap.
func CheckReadFromHeader(requestedID string, h sessionstore.Header, rawLogPath string) error {
	if h.ID != requestedID {
		return identityMismatch(requestedID, h.ID)
	}
	if h.Version != sessionstore.FormatVersion {
		return versionRefusal(h.ID, float64(h.Version), rawLogPath)
	}
	return nil
}

// headerFieldProblem returns the first docs/events.md#header reconstruction failure of a
// stored header, or "". Type checks (cwd must be a string, …) cannot fail
// for a typed Header; version and id were checked before.
func headerFieldProblem(h sessionstore.Header) string {
	if h.CreatedAt < 0 || h.CreatedAt > maxSafe {
		return "session header createdAt must be a non-negative safe integer"
	}
	if h.Cwd != nil && !strings.HasPrefix(*h.Cwd, "/") {
		// node:path isAbsolute on POSIX, where the reference runs.
		return `session header cwd must be an absolute path, got "` + *h.Cwd + `"`
	}
	if h.SeedLength != nil && (*h.SeedLength < 0 || *h.SeedLength > maxSafe) {
		return "session header seedLength must be a non-negative safe integer"
	}
	if h.Origin != nil && *h.Origin != "subagent" {
		return `session header origin must be "subagent"`
	}
	if h.DelegationDepth != nil && (*h.DelegationDepth < 0 || *h.DelegationDepth > maxSafe) {
		return "session header delegationDepth must be a non-negative safe integer"
	}
	return ""
}
