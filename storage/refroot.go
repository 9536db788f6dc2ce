package storage

// Reading a reference JSONL root (docs/events.md#jsonl; issue 6, import).
//
// A reference root is the directory tree the reference harness's JSONL
// backend writes (docs/events.md#layout):
//
//	<root>/<projectKey(cwd)>|_no-cwd/<encodeSegment(id)>/session.jsonl       compression "none" (docs/events.md#zstd)
//	<root>/<projectKey(cwd)>|_no-cwd/<encodeSegment(id)>/session.jsonl.zstd  compression "zstd" (docs/events.md#zstd)
//
// This file yields, per session, what the reference's load reads from the
// artifact before its coordinator repairs or validates anything: the header
// (first logical line, docs/events.md#header-line) and the contiguous
// committed events (docs/events.md#committed-region), with packed chunk rows
// expanded (docs/events.md#packed-rows) and a torn tail dropped exactly where
// the reference's scanner drops it. Events are returned verbatim (legacy
// shapes are normalised elsewhere, docs/events.md#legacy-shapes); no crash
// closers are added (docs/events.md#crash-repair).

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// Physical encodings of a reference artifact.
const (
	EncodingJSONL = "jsonl" // session.jsonl, compression "none" (docs/events.md#zstd)
	EncodingZstd  = "zstd"  // session.jsonl.zstd, compression "zstd" (docs/events.md#zstd)
)

// RawArtifactName is the file name of a raw-mode (compression "none") artifact.
const RawArtifactName = "session.jsonl"

// RootSession is one session read from a reference root.
type RootSession struct {
	// Header is the stored header (docs/events.md#header-line). On error it is filled in if the
	// header line was read before the failure, and zero otherwise.
	Header sessionstore.Header
	// Events are the committed events, seqs 0…len-1, each one JSON text:
	// verbatim lines (after the reference's UTF-8 decoding, which replaces
	// ill-formed sequences by U+FFFD) and the exact expansion of packed rows.
	// Nil on error.
	Events [][]byte
	// Path is the absolute path of the artifact (or of the offending file
	// or directory when the error is about the layout).
	Path string
	// Encoding is EncodingJSONL or EncodingZstd ("" when unknown).
	Encoding string
	// Torn reports that the artifact has a torn tail the reference ignores
	// (and would truncate on load): raw mode, bytes after the last committed
	// line; zstd mode, a structurally incomplete final frame.
	Torn bool
	// Notes explain anything dropped or repaired, in words.
	Notes []string
	// Err is non-nil when the reference cannot load this session; the walk
	// goes on. It is a *RootError (errors.As), whose cause is a
	// *sessionstore.Error with the reference's text where it has one
	// (errors.Is(err, sessionstore.ErrCorruption), …ErrFormatUnsupported).
	Err error
}

// RootError says why one session (or one entry) of a reference root cannot be read.
type RootError struct {
	Path string // the artifact, or the offending file or directory
	// Offset is the byte offset of the defect in the file: the start of the
	// line (raw mode) or of the frame holding it (zstd mode); -1 when the
	// defect has no position.
	Offset int64
	// PlainOffset is, in zstd mode, the offset of the defective line in
	// that frame's decompressed text; -1 otherwise.
	PlainOffset int64
	// Line is the reference's event-line number (1 = the first line after
	// the header), or 0.
	Line int
	// Err is the cause: a *sessionstore.Error carrying the reference's text
	// where it has one, else an I/O error.
	Err error
	// Detail adds what the reference's text leaves out (the JSON syntax
	// error, the malformed-row reason, the turn/end that commits a defect).
	Detail string
}

func (e *RootError) Error() string {
	var b strings.Builder
	b.WriteString(e.Path)
	b.WriteString(e.where())
	b.WriteString(": ")
	b.WriteString(e.Err.Error())
	b.WriteString(bracket(e.Detail))
	return b.String()
}

// where is the position part of the message.
func (e *RootError) where() string {
	switch {
	case e.PlainOffset >= 0:
		return fmt.Sprintf(" (frame at byte %d, plaintext byte %d)", e.Offset, e.PlainOffset)
	case e.Offset >= 0:
		return fmt.Sprintf(" (byte %d)", e.Offset)
	}
	return ""
}

// brief is the message without the path, for notes and details about the
// same file.
func (e *RootError) brief() string {
	return e.Err.Error() + e.where() + bracket(e.Detail)
}

func (e *RootError) Unwrap() error { return e.Err }

func corruptf(format string, args ...any) *sessionstore.Error {
	return sessionstore.Errorf(sessionstore.ReasonCorruption, format, args...)
}

// ReadRootSession reads one artifact file. Its encoding is taken from its
// name (".jsonl.zstd" or ".jsonl"), or, for any other name, from its first
// bytes (the Zstandard magic 28 B5 2F FD means zstd). Since the file is
// read on its own, the root-level checks of WalkRoot (identity binding,
// duplicate ids, layout) are not applied. On error the returned session
// carries the same error in Err.
func ReadRootSession(path string) (RootSession, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		abs = path
	}
	rs := RootSession{Path: abs, Encoding: encodingByName(abs)}
	data, err := os.ReadFile(abs)
	if err != nil {
		rs.Err = &RootError{Path: abs, Offset: -1, PlainOffset: -1, Err: err}
		return rs, rs.Err
	}
	if rs.Encoding == "" {
		rs.Encoding = EncodingJSONL
		if bytes.HasPrefix(data, zstdMagic) {
			rs.Encoding = EncodingZstd
		}
	}
	rs, _ = decodeRootArtifact(abs, rs.Encoding, data)
	return rs, rs.Err
}

var zstdMagic = []byte{0x28, 0xB5, 0x2F, 0xFD}

func encodingByName(path string) string {
	switch {
	case strings.HasSuffix(path, ".jsonl.zstd"):
		return EncodingZstd
	case strings.HasSuffix(path, ".jsonl"):
		return EncodingJSONL
	}
	return ""
}

// WalkRoot reads every session of the reference root at root and calls fn
// once per session, one at a time: only one session's bytes and events are
// held at once (plus the list of session paths). If fn returns an error the
// walk stops and WalkRoot returns it.
//
// A session the reference cannot load is still passed to fn, with Err set
// and no events, and the walk goes on: an importer reports "this session is
// unreadable: why" and continues. WalkRoot itself fails only when root
// cannot be listed (it must be an existing directory: an absent root, which
// the reference lists as empty, is an error here so that a mistyped path
// does not import nothing).
//
// Layout (docs/events.md#layout), followed as the reference's listing does: project
// directories are the directories directly under root, session directories
// the directories directly under a project directory (symbolic links,
// other files and directories without an artifact are ignored, as the
// reference ignores them). Order: lexical by name at each level, like
// filepath.WalkDir, so the walk is deterministic.
//
// Per session, in the order the reference's load checks them:
//   - a regular file named *.jsonl or *.jsonl.zstd directly in a project
//     directory is the unsupported flat layout: reported with the
//     reference's text (`session artifact "<path>" uses the unsupported flat-file layout; …`);
//   - a session directory holding both session.jsonl and session.jsonl.zstd
//     is reported unreadable: the reference refuses it in either compression
//     mode (`session artifact "<path>" uses .jsonl, but this backend is
//     configured for compression "zstd"; use a separate root or select the
//     matching compression mode`, in the default zstd mode), and which file
//     is authoritative cannot be known;
//   - one session directory name (one id, encodeSegment being injective) in
//     two or more project directories: every copy is reported with
//     `duplicate JSONL session id "<id>" appears in multiple project directories`;
//   - otherwise the artifact is read in its own encoding (see
//     ReadRootSession and decodeRootArtifact for the rules), and the header's
//     id and cwd must name the file read (docs/events.md#layout identity binding, with the
//     reference's texts; a symlinked or case-insensitive alias of the same
//     file passes, as the reference's realpath comparison lets it).
//
// A root holding raw sessions and zstd sessions side by side is one the
// reference refuses as a whole in either mode ("use a separate root"); each
// session is read in its own encoding, which is what the reference loads
// once the root is split as it asks, and every session gets a Note saying so.
func WalkRoot(root string, fn func(RootSession) error) error {
	abs, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return fmt.Errorf("reference root: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("reference root %s is not a directory", abs)
	}
	cands, err := discoverRoot(abs)
	if err != nil {
		return err
	}

	// Duplicate ids and mixed encodings need the whole list.
	copies := map[string]int{}
	encodings := map[string]bool{}
	for _, c := range cands {
		if c.sessionDir != "" {
			copies[filepath.Base(c.sessionDir)]++
		}
		if c.err == nil && c.encoding != "" {
			encodings[c.encoding] = true
		}
		if c.both {
			encodings[EncodingJSONL], encodings[EncodingZstd] = true, true
		}
	}
	mixed := encodings[EncodingJSONL] && encodings[EncodingZstd]

	for _, c := range cands {
		rs := RootSession{Path: c.path, Encoding: c.encoding}
		switch {
		case c.err != nil:
			rs.Err = c.err
		case c.sessionDir != "" && copies[filepath.Base(c.sessionDir)] > 1:
			name := filepath.Base(c.sessionDir)
			id, ok := decodeSegment(name)
			if !ok {
				id = name
			}
			rs.Err = &RootError{Path: c.path, Offset: -1, PlainOffset: -1,
				Err: corruptf("duplicate JSONL session id %s appears in multiple project directories", sessionstore.Quote(id))}
		default:
			rs = readRootCandidate(abs, c)
		}
		if mixed && c.sessionDir != "" {
			rs.Notes = append(rs.Notes, "the root holds both session.jsonl and session.jsonl.zstd artifacts; the reference refuses such a root in either compression mode (\"use a separate root\"), so this session was read in its own encoding")
		}
		if err := fn(rs); err != nil {
			return err
		}
	}
	return nil
}

// rootCandidate is one entry found under a root: a session artifact, or an
// entry the reference refuses.
type rootCandidate struct {
	path       string // the artifact (or offending entry)
	encoding   string
	sessionDir string // the session directory, "" for a flat file or a listing error
	both       bool   // the session directory holds both encodings
	err        error  // set when the entry is unreadable before any read
}

// discoverRoot lists the candidates of root in walk order.
func discoverRoot(root string) ([]rootCandidate, error) {
	projects, err := os.ReadDir(root)
	if err != nil {
		return nil, fmt.Errorf("reference root: %w", err)
	}
	var out []rootCandidate
	for _, p := range projects {
		if !p.IsDir() {
			continue
		}
		pdir := filepath.Join(root, p.Name())
		entries, err := os.ReadDir(pdir)
		if err != nil {
			out = append(out, rootCandidate{path: pdir, err: &RootError{Path: pdir, Offset: -1, PlainOffset: -1, Err: err}})
			continue
		}
		for _, e := range entries {
			name := e.Name()
			if e.Type().IsRegular() && (strings.HasSuffix(name, ".jsonl") || strings.HasSuffix(name, ".jsonl.zstd")) {
				path := filepath.Join(pdir, name)
				out = append(out, rootCandidate{path: path, encoding: encodingByName(path), err: &RootError{
					Path: path, Offset: -1, PlainOffset: -1,
					Err: corruptf("session artifact %s uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading", jsQuote(path)),
				}})
				continue
			}
			if !e.IsDir() {
				continue
			}
			sdir := filepath.Join(pdir, name)
			rawPath, zstdPath := filepath.Join(sdir, RawArtifactName), filepath.Join(sdir, ArtifactName)
			rawOK, rawErr := artifactExists(rawPath)
			zstdOK, zstdErr := artifactExists(zstdPath)
			c := rootCandidate{sessionDir: sdir}
			switch {
			case rawErr != nil:
				c.path, c.encoding, c.err = rawPath, EncodingJSONL, &RootError{Path: rawPath, Offset: -1, PlainOffset: -1, Err: rawErr}
			case zstdErr != nil:
				c.path, c.encoding, c.err = zstdPath, EncodingZstd, &RootError{Path: zstdPath, Offset: -1, PlainOffset: -1, Err: zstdErr}
			case rawOK && zstdOK:
				c.path, c.encoding, c.both = sdir, "", true
				c.err = &RootError{Path: sdir, Offset: -1, PlainOffset: -1,
					Err:    corruptf("session artifact %s uses .jsonl, but this backend is configured for compression \"zstd\"; use a separate root or select the matching compression mode", jsQuote(rawPath)),
					Detail: "the session directory holds both session.jsonl and session.jsonl.zstd; the reference refuses it in either compression mode"}
			case rawOK:
				c.path, c.encoding = rawPath, EncodingJSONL
			case zstdOK:
				c.path, c.encoding = zstdPath, EncodingZstd
			default:
				continue // not a session directory
			}
			out = append(out, c)
		}
	}
	return out, nil
}

// artifactExists is the reference's exists(): the path opens (following
// links); only absence is false, every other failure is an error.
func artifactExists(path string) (bool, error) {
	f, err := os.Open(path)
	if err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return false, nil
		}
		return false, err
	}
	f.Close()
	return true, nil
}

// jsQuote is JSON.stringify of a path, which the reference uses in its
// layout messages.
func jsQuote(s string) string { return string(sessionlog.AppendJSString(nil, s)) }

// readRootCandidate reads one artifact of a root and binds its identity.
func readRootCandidate(root string, c rootCandidate) RootSession {
	data, err := os.ReadFile(c.path)
	if err != nil {
		return RootSession{Path: c.path, Encoding: c.encoding, Err: &RootError{Path: c.path, Offset: -1, PlainOffset: -1, Err: err}}
	}
	rs, _ := decodeRootArtifact(c.path, c.encoding, data)
	if rs.Err != nil {
		return rs
	}
	if err := bindRootIdentity(root, c.path, c.encoding, rs.Header); err != nil {
		rs.Events, rs.Torn = nil, false
		rs.Err = &RootError{Path: c.path, Offset: -1, PlainOffset: -1, Err: err}
	}
	return rs
}

// bindRootIdentity is the docs/events.md#layout identity binding: the header's id and cwd
// must compute the path that was read, or resolve to the same file.
func bindRootIdentity(root, path, encoding string, h sessionstore.Header) error {
	expected, err := ArtifactPath(root, h)
	if err != nil {
		return corruptf("corrupt session log %s: header id cannot name a storage path", sessionstore.Quote(path))
	}
	if encoding == EncodingJSONL {
		expected = filepath.Join(filepath.Dir(expected), RawArtifactName)
	}
	if path == expected || sameRealFile(path, expected) {
		return nil
	}
	return corruptf("corrupt session log %s: header id %s and cwd identify %s",
		sessionstore.Quote(path), sessionstore.Quote(h.ID), sessionstore.Quote(expected))
}

// sameRealFile approximates the reference's realpath(a) === realpath(b):
// symbolic links are resolved, and two spellings that differ only in case
// and name the same file (a case-insensitive file system, where realpath
// returns the stored case) count as one.
func sameRealFile(a, b string) bool {
	ra, err := filepath.EvalSymlinks(a)
	if err != nil {
		return false
	}
	rb, err := filepath.EvalSymlinks(b)
	if err != nil {
		return false
	}
	if ra == rb {
		return true
	}
	if !strings.EqualFold(ra, rb) {
		return false
	}
	sa, err := os.Stat(ra)
	if err != nil {
		return false
	}
	sb, err := os.Stat(rb)
	return err == nil && os.SameFile(sa, sb)
}

// decodeSegment inverts sessionlog.EncodeSegment for a canonical encoding.
func decodeSegment(seg string) (string, bool) {
	units := make([]uint16, 0, len(seg))
	for i := 0; i < len(seg); {
		if seg[i] != '~' {
			units = append(units, uint16(seg[i]))
			i++
			continue
		}
		if i+5 > len(seg) {
			return "", false
		}
		var u uint16
		for _, c := range []byte(seg[i+1 : i+5]) {
			switch {
			case c >= '0' && c <= '9':
				u = u<<4 | uint16(c-'0')
			case c >= 'A' && c <= 'F':
				u = u<<4 | uint16(c-'A'+10)
			default:
				return "", false
			}
		}
		units = append(units, u)
		i += 5
	}
	var b []byte
	for i := 0; i < len(units); i++ {
		u := rune(units[i])
		if u >= 0xD800 && u < 0xDC00 && i+1 < len(units) && units[i+1] >= 0xDC00 && units[i+1] < 0xE000 {
			b = append(b, string(0x10000+(u-0xD800)<<10+(rune(units[i+1])-0xDC00))...)
			i++
			continue
		}
		if u >= 0xD800 && u < 0xE000 { // a lone surrogate, kept as WTF-8
			b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			continue
		}
		b = append(b, string(u)...)
	}
	id := string(b)
	if enc, err := sessionlog.EncodeSegment(id); err != nil || enc != seg {
		return "", false
	}
	return id, true
}

// decodeRootArtifact reads the bytes of one artifact as the reference's
// load does (its readPrefix), without identity binding, and returns the
// session (with Err set on failure) and the committed byte offset (raw: the
// end of the last committed line; zstd: the torn frame's start, or the file
// size).
//
// Raw mode (docs/events.md#zstd, docs/events.md#committed-region; the reference's scanLog):
//   - no "\n" at all → `empty or header-less session log`; the header is
//     the bytes before the first "\n" (sessionlog.ParseHeaderLine, docs/events.md#header-line);
//   - every following "\n"-terminated line is one storage record; a final
//     line without "\n" is always a torn fragment;
//   - the committed region is the longest prefix of lines that decode and
//     continue the seqs 0, 1, 2, …; the first line that does not parse (or is
//     a malformed packed row) or has the wrong seq is an issue
//     (`corrupt session log: unparsable committed event at line <n>` /
//     `corrupt session log: seq gap in committed region at line <n> (expected <e>, got <g>)`,
//     lines counted from 1 after the header, empty lines included);
//   - after an issue the rest is still parsed: if the offending line or any
//     later parsable line holds a turn/end, the issue is an error (committed
//     corruption); otherwise everything after the committed prefix is the
//     torn tail, dropped (Torn, with a Note);
//   - a line that is JSON null makes the reference's scanner throw a
//     TypeError (`Cannot read properties of null (reading 'seq')`, or
//     'type' after an issue): an error here too.
//
// Zstd mode (docs/events.md#zstd, docs/events.md#committed-region; the
// reference's readZstdPrefix): frames are located structurally (ScanFrames;
// its errors are errors); no complete frame → `empty or header-less Zstandard
// session log`; frame 1 is decompressed with checksum verification and must be
// exactly one header line; the following complete frames are decompressed one
// by one (a failure → `corrupt Zstandard session log: frame at byte <start>
// failed validation`) and their plaintext is scanned as one stream with the
// raw-mode rules, so a line may span two complete frames; at the end of the
// complete frames every byte must be committed, else `corrupt Zstandard
// session log: complete frame contains a torn JSONL record` (a
// tolerated-looking defect or a final unterminated line inside complete frames
// is never a torn tail); finally a structurally incomplete final frame is the
// torn tail: its available bytes are decoded in flush mode and the records
// that continue the log are kept (Torn is set either way).
func decodeRootArtifact(path, encoding string, data []byte) (RootSession, int64) {
	rs := RootSession{Path: path, Encoding: encoding}
	fail := func(e *RootError) (RootSession, int64) {
		if e.Path == "" {
			e.Path = path
		}
		rs.Events, rs.Torn = nil, false
		rs.Err = e
		return rs, 0
	}
	if encoding == EncodingZstd {
		return decodeZstdRoot(rs, data, fail)
	}

	nl := bytes.IndexByte(data, '\n')
	if nl < 0 {
		return fail(&RootError{Offset: -1, PlainOffset: -1, Err: corruptf("empty or header-less session log")})
	}
	h, err := sessionlog.ParseHeaderLine(data[:nl], path)
	if err != nil {
		return fail(&RootError{Offset: 0, PlainOffset: -1, Err: err})
	}
	rs.Header = h
	s := newRecordScanner(int64(nl + 1))
	if e := s.write(data[nl+1:]); e != nil {
		return fail(e)
	}
	rs.Events = s.events
	rs.Notes = append(rs.Notes, s.notes...)
	if s.committed < int64(len(data)) {
		rs.Torn = true
		if s.issue != nil {
			rs.Notes = append(rs.Notes, fmt.Sprintf("torn tail of %d bytes from byte %d dropped: %s (no turn/end follows, so the reference treats it as uncommitted)",
				int64(len(data))-s.committed, s.committed, s.issue.brief()))
		} else {
			rs.Notes = append(rs.Notes, fmt.Sprintf("torn final line of %d bytes without a newline at byte %d dropped", int64(len(data))-s.committed, s.committed))
		}
	}
	return rs, s.committed
}

func bracket(s string) string {
	if s == "" {
		return ""
	}
	return " [" + s + "]"
}

func decodeZstdRoot(rs RootSession, data []byte, fail func(*RootError) (RootSession, int64)) (RootSession, int64) {
	frames, tornStart, err := ScanFrames(data)
	if err != nil {
		return fail(&RootError{Offset: -1, PlainOffset: -1, Err: err})
	}
	if len(frames) == 0 {
		return fail(&RootError{Offset: -1, PlainOffset: -1, Err: corruptf("empty or header-less Zstandard session log")})
	}
	header, err := zstdFrameDecoder.DecodeAll(data[frames[0].Start:frames[0].End], nil)
	if err != nil {
		return fail(&RootError{Offset: frames[0].Start, PlainOffset: -1,
			Err: corruptf("corrupt Zstandard session log: frame at byte %d failed validation", frames[0].Start), Detail: err.Error()})
	}
	if len(header) == 0 || bytes.IndexByte(header, '\n') != len(header)-1 {
		return fail(&RootError{Offset: 0, PlainOffset: -1, Err: corruptf("corrupt Zstandard session log: first frame is not exactly one header line")})
	}
	h, err := sessionlog.ParseHeaderLine(header[:len(header)-1], rs.Path)
	if err != nil {
		return fail(&RootError{Offset: 0, PlainOffset: -1, Err: err})
	}
	rs.Header = h
	s := newRecordScanner(int64(len(header)))
	s.frames = []frameAt{{plain: 0, file: 0}}
	var plain []byte
	for _, f := range frames[1:] {
		plain, err = zstdFrameDecoder.DecodeAll(data[f.Start:f.End], plain[:0])
		if err != nil {
			return fail(&RootError{Offset: f.Start, PlainOffset: -1,
				Err: corruptf("corrupt Zstandard session log: frame at byte %d failed validation", f.Start), Detail: err.Error()})
		}
		s.frames = append(s.frames, frameAt{plain: s.input, file: f.Start})
		if e := s.write(plain); e != nil {
			return fail(e)
		}
	}
	if s.committed != s.input {
		e := s.errAt(s.committed, 0, corruptf("corrupt Zstandard session log: complete frame contains a torn JSONL record"), "")
		if s.issue != nil {
			e.Detail = "inside the complete frames: " + s.issue.brief()
		} else {
			e.Detail = fmt.Sprintf("the last complete frame ends inside a line (%d bytes unterminated)", s.input-s.committed)
		}
		return fail(e)
	}
	if tornStart < 0 {
		rs.Events = s.events
		rs.Notes = append(rs.Notes, s.notes...)
		return rs, int64(len(data))
	}

	complete := len(s.events)
	recovered := recoverTornZstdFrame(data[tornStart:])
	s.frames = append(s.frames, frameAt{plain: s.input, file: tornStart})
	if e := s.write(recovered); e != nil {
		return fail(e)
	}
	rs.Events = s.events
	rs.Notes = append(rs.Notes, s.notes...)
	rs.Torn = true
	note := fmt.Sprintf("torn final frame of %d bytes at byte %d: %d complete events recovered from it",
		int64(len(data))-tornStart, tornStart, len(s.events)-complete)
	if s.issue != nil {
		note += fmt.Sprintf("; the rest of its recovered text dropped: %s", s.issue.brief())
	}
	rs.Notes = append(rs.Notes, note)
	return rs, tornStart
}

// frameAt maps the start of a frame's plaintext to the frame's file offset.
type frameAt struct{ plain, file int64 }

// recordScanner is the reference's SessionLogScanner (docs/events.md#committed-region): it consumes
// the plaintext after the header in chunks, splits it into "\n"-terminated
// lines (a line may span chunks), and keeps the contiguous committed prefix.
type recordScanner struct {
	events    [][]byte
	line      int   // event lines seen
	input     int64 // plaintext bytes consumed, header included
	committed int64 // end of the last committed line
	frag      []byte
	fragAt    int64
	issue     *RootError // the first defect, tolerated until a turn/end follows
	frames    []frameAt  // zstd only; nil for raw mode (plaintext offset = file offset)
	notes     []string
}

func newRecordScanner(headerLen int64) *recordScanner {
	return &recordScanner{input: headerLen, committed: headerLen}
}

// errAt builds an error located at a plaintext offset.
func (s *recordScanner) errAt(plain int64, line int, err error, detail string) *RootError {
	e := &RootError{Offset: plain, PlainOffset: -1, Line: line, Err: err, Detail: detail}
	if s.frames != nil {
		i := sort.Search(len(s.frames), func(i int) bool { return s.frames[i].plain > plain }) - 1
		if i < 0 {
			i = 0
		}
		e.Offset, e.PlainOffset = s.frames[i].file, plain-s.frames[i].plain
	}
	return e
}

// write consumes the next plaintext chunk; a non-nil result is committed
// corruption (the reference throws it).
func (s *recordScanner) write(chunk []byte) *RootError {
	start := s.input
	s.input += int64(len(chunk))
	lineStart := 0
	for {
		nl := bytes.IndexByte(chunk[lineStart:], '\n')
		if nl < 0 {
			break
		}
		nl += lineStart
		line, at := chunk[lineStart:nl], start+int64(lineStart)
		if s.frag != nil {
			line, at = append(s.frag, line...), s.fragAt
			s.frag = nil
		}
		if e := s.consume(line, at, start+int64(nl)+1); e != nil {
			return e
		}
		lineStart = nl + 1
	}
	if lineStart < len(chunk) {
		if s.frag == nil {
			s.fragAt = start + int64(lineStart)
		}
		s.frag = append(s.frag, chunk[lineStart:]...)
	}
	return nil
}

// consume is the reference's consumeEventLine.
func (s *recordScanner) consume(line []byte, at, end int64) *RootError {
	s.line++
	rec, err := sessionlog.DecodeStorageLine(line)
	if err != nil {
		if s.issue == nil {
			s.issue = s.errAt(at, s.line, corruptf("corrupt session log: unparsable committed event at line %d", s.line), err.Error())
		}
		return nil
	}
	if rec.Null {
		prop := "seq"
		if s.issue != nil {
			prop = "type"
		}
		return s.errAt(at, s.line, corruptf("Cannot read properties of null (reading '%s')", prop),
			"the line is JSON null, which the reference's scanner cannot classify (a TypeError)")
	}
	if s.issue != nil {
		if rec.TurnEnd {
			s.issue.Detail = joinDetail(s.issue.Detail, fmt.Sprintf("line %d holds a turn/end, so the defect is in the committed region", s.line))
			return s.issue
		}
		return nil
	}
	expected := int64(len(s.events))
	if !rec.FirstSeqIs(expected) {
		s.issue = s.errAt(at, s.line, corruptf("corrupt session log: seq gap in committed region at line %d (expected %d, got %s)", s.line, expected, rec.SeqText), "")
		if rec.TurnEnd {
			s.issue.Detail = "the line holds a turn/end, so the defect is in the committed region"
			return s.issue
		}
		return nil
	}
	for _, ev := range rec.Events {
		if rec.Row == "" {
			ev = bytes.Clone(ev) // ev aliases the caller's buffer
		}
		s.events = append(s.events, ev)
	}
	if rec.Repaired {
		s.notes = append(s.notes, fmt.Sprintf("line %d holds ill-formed UTF-8, read with U+FFFD replacements as the reference decodes it", s.line))
	}
	s.committed = end
	return nil
}

func joinDetail(a, b string) string {
	if a == "" {
		return b
	}
	return a + "; " + b
}
