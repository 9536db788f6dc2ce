package archive

import (
	"archive/tar"
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// Source kinds (see OpenSource).
const (
	SourceRoot   = "reference root"
	SourceTar    = "tar"
	SourceTarZst = "tar.zst"
)

// maxManifestBytes bounds the manifest read from an archive.
const maxManifestBytes = 256 << 20

// Source is what an import reads: a reference JSONL root directory, or a tar
// file (optionally zstd-compressed) holding one, as Export writes them.
type Source struct {
	path     string // absolute
	kind     string
	manifest *Manifest
	total    int // sessions (an estimate for a root: session directories)
	tar      *tarIndex
	byPath   map[string]*ManifestSession
}

// OpenSource opens path: a directory is a reference root; a file is a tar or
// a zstd-compressed tar, told apart by its first bytes (the zstd magic
// 28 B5 2F FD, the tar "ustar" magic), whatever its name. A tar is read
// through once here, to index its session entries and read its manifest
// (which an export writes last); the import reads it a second time.
func OpenSource(p string) (*Source, error) {
	abs, err := filepath.Abs(p)
	if err != nil {
		return nil, err
	}
	st, err := os.Stat(abs)
	if err != nil {
		return nil, err
	}
	s := &Source{path: abs}
	if st.IsDir() {
		s.kind = SourceRoot
		if data, err := os.ReadFile(filepath.Join(abs, ManifestName)); err == nil {
			if s.manifest, err = parseManifest(data); err != nil {
				return nil, err
			}
		} else if !errors.Is(err, os.ErrNotExist) {
			return nil, err
		}
		s.total = countSessionDirs(abs)
		return s, nil
	}
	kind, err := sniffArchive(abs)
	if err != nil {
		return nil, err
	}
	s.kind = kind
	idx, err := s.indexTar()
	if err != nil {
		return nil, err
	}
	s.tar = idx
	s.manifest = idx.manifest
	s.total = len(idx.sessions)
	return s, nil
}

// Kind is SourceRoot, SourceTar or SourceTarZst.
func (s *Source) Kind() string { return s.kind }

// Path is the source's absolute path.
func (s *Source) Path() string { return s.path }

// Manifest is the export manifest found in the source, or nil (a reference
// root written by the reference harness has none).
func (s *Source) Manifest() *Manifest { return s.manifest }

// Total is the number of sessions the source holds (for a root directory,
// the number of session directories: an estimate).
func (s *Source) Total() int { return s.total }

// Item is one session read from a source.
type Item struct {
	storage.RootSession
	// Rel is the session file relative to the root, with "/" separators
	// (for a session that could not even be located, the offending entry).
	Rel string
	// Display names the session file for messages: a path, or
	// ARCHIVE:ENTRY for an archive.
	Display string
}

// Walk reads the source's sessions one at a time and calls fn for each, in
// the source's order (lexical for a root, entry order for a tar). A session
// that cannot be loaded is passed with Err set, as storage.WalkRoot does;
// when the source has a manifest, a session whose text does not match its
// manifest entry, and a manifest entry with no session file, are passed
// with Err set too. Walk stops at fn's first error and returns it.
func (s *Source) Walk(ctx context.Context, fn func(Item) error) error {
	seen := map[string]bool{}
	wrap := func(it Item) error {
		if err := ctx.Err(); err != nil {
			return err
		}
		seen[it.Rel] = true
		s.checkManifest(&it)
		return fn(it)
	}
	var err error
	if s.kind == SourceRoot {
		err = storage.WalkRoot(s.path, func(rs storage.RootSession) error {
			rel, rerr := filepath.Rel(s.path, rs.Path)
			if rerr != nil {
				rel = rs.Path
			}
			return wrap(Item{RootSession: rs, Rel: filepath.ToSlash(rel), Display: rs.Path})
		})
	} else {
		err = s.walkTar(ctx, wrap)
	}
	if err != nil || s.manifest == nil {
		return err
	}
	for _, ms := range s.manifest.Sessions {
		if seen[ms.Path] {
			continue
		}
		it := Item{Rel: ms.Path, Display: s.display(ms.Path)}
		it.Header.ID = ms.ID
		it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1,
			Err: fmt.Errorf("listed in %s but missing from the export", ManifestName)}
		if err := fn(it); err != nil {
			return err
		}
	}
	return nil
}

func (s *Source) display(rel string) string {
	if s.kind == SourceRoot {
		return filepath.Join(s.path, filepath.FromSlash(rel))
	}
	return s.path + ":" + rel
}

// checkManifest compares a session with its manifest entry: the event
// count and the SHA-256 of the text rebuilt from what was read (exact for
// the files Export writes).
func (s *Source) checkManifest(it *Item) {
	if s.manifest == nil || it.Err != nil {
		return
	}
	if s.byPath == nil {
		s.byPath = make(map[string]*ManifestSession, len(s.manifest.Sessions))
		for i := range s.manifest.Sessions {
			s.byPath[s.manifest.Sessions[i].Path] = &s.manifest.Sessions[i]
		}
	}
	want := s.byPath[it.Rel]
	if want == nil {
		it.Notes = append(it.Notes, "not listed in "+ManifestName)
		return
	}
	text := rebuildText(it.Header, it.Events)
	got := textDigest(text)
	if got == want.SHA256 && int64(len(it.Events)) == want.Events && want.ID == it.Header.ID {
		return
	}
	it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1, Err: fmt.Errorf(
		"does not match %s: %d events, sha256 %s, id %q; the manifest says %d events, sha256 %s, id %q",
		ManifestName, len(it.Events), got, it.Header.ID, want.Events, want.SHA256, want.ID)}
	it.Events, it.Torn = nil, false
}

// rebuildText is the decoded text of a session as Export writes it: the
// header line and one line per event.
func rebuildText(h sessionstore.Header, events [][]byte) []byte {
	n := 0
	for _, ev := range events {
		n += len(ev) + 1
	}
	line := sessionlog.HeaderLine(h)
	b := make([]byte, 0, len(line)+1+n)
	b = append(b, line...)
	b = append(b, '\n')
	for _, ev := range events {
		b = append(b, ev...)
		b = append(b, '\n')
	}
	return b
}

// countSessionDirs counts the directories two levels under root (the
// candidate session directories), for progress.
func countSessionDirs(root string) int {
	projects, err := os.ReadDir(root)
	if err != nil {
		return 0
	}
	n := 0
	for _, p := range projects {
		if !p.IsDir() {
			continue
		}
		entries, err := os.ReadDir(filepath.Join(root, p.Name()))
		if err != nil {
			continue
		}
		for _, e := range entries {
			if e.IsDir() {
				n++
			}
		}
	}
	return n
}

// sniffArchive tells a tar from a zstd-compressed tar by content.
func sniffArchive(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	head := make([]byte, 512)
	n, _ := io.ReadFull(f, head)
	head = head[:n]
	switch {
	case bytes.HasPrefix(head, []byte{0x28, 0xB5, 0x2F, 0xFD}):
		return SourceTarZst, nil
	case isTarHeader(head):
		return SourceTar, nil
	}
	return "", fmt.Errorf("%s is neither a directory (a reference root) nor a tar or zstd-compressed tar file", p)
}

// isTarHeader reports a POSIX/GNU tar header block ("ustar" at offset 257).
func isTarHeader(b []byte) bool {
	return len(b) >= 263 && bytes.Equal(b[257:262], []byte("ustar"))
}

// openTar opens the archive for one pass.
func (s *Source) openTar() (*tar.Reader, func(), error) {
	f, err := os.Open(s.path)
	if err != nil {
		return nil, nil, err
	}
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	closeAll := func() { f.Close() }
	if s.kind == SourceTarZst {
		zr, err := zstd.NewReader(r, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(1<<27))
		if err != nil {
			f.Close()
			return nil, nil, err
		}
		closeAll = func() { zr.Close(); f.Close() }
		r = zr
		// The content must be a tar, too.
		br := bufio.NewReaderSize(r, 1<<16)
		head, _ := br.Peek(512)
		if !isTarHeader(head) {
			closeAll()
			return nil, nil, fmt.Errorf("%s: the zstd stream does not hold a tar file", s.path)
		}
		r = br
	}
	return tar.NewReader(r), closeAll, nil
}

// tarIndex is what the first pass over a tar finds.
type tarIndex struct {
	manifest *Manifest
	sessions []tarSession
	// dup and both flag session directories the reference refuses: one
	// encoded id in several project directories, or both encodings in one
	// session directory.
	dup  map[string]bool // session directory name → duplicated
	both map[string]bool // session directory (project/session) → both encodings
}

type tarSession struct {
	rel      string
	encoding string
	flat     bool // a session file directly in a project directory
	notFile  bool // not a regular file
}

// tarEntryName cleans an entry name ("./a/b" → "a/b"); "" when it is not a
// relative path inside the root.
func tarEntryName(name string) string {
	name = strings.TrimPrefix(name, "./")
	name = strings.TrimSuffix(name, "/")
	if name == "" || name == "." || !validRel(name) {
		return ""
	}
	return name
}

// classify says whether a tar entry is a session file of the layout.
func classify(name string) (tarSession, bool) {
	parts := strings.Split(name, "/")
	base := parts[len(parts)-1]
	switch {
	case len(parts) == 3 && (base == storage.RawArtifactName || base == storage.ArtifactName):
		enc := storage.EncodingJSONL
		if base == storage.ArtifactName {
			enc = storage.EncodingZstd
		}
		return tarSession{rel: name, encoding: enc}, true
	case len(parts) == 2 && (strings.HasSuffix(base, ".jsonl") || strings.HasSuffix(base, ".jsonl.zstd")):
		return tarSession{rel: name, flat: true}, true
	}
	return tarSession{}, false
}

func (s *Source) indexTar() (*tarIndex, error) {
	tr, closeAll, err := s.openTar()
	if err != nil {
		return nil, err
	}
	defer closeAll()
	idx := &tarIndex{dup: map[string]bool{}, both: map[string]bool{}}
	dirs := map[string]map[string]bool{} // session dir name → project dirs
	encs := map[string]int{}             // project/session → encodings seen
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: reading the archive: %w", s.path, err)
		}
		name := tarEntryName(hdr.Name)
		if name == ManifestName && hdr.Typeflag == tar.TypeReg {
			data, err := io.ReadAll(io.LimitReader(tr, maxManifestBytes))
			if err != nil {
				return nil, fmt.Errorf("%s: reading %s: %w", s.path, ManifestName, err)
			}
			if idx.manifest, err = parseManifest(data); err != nil {
				return nil, fmt.Errorf("%s: %w", s.path, err)
			}
			continue
		}
		ts, ok := classify(name)
		if !ok {
			continue
		}
		if hdr.Typeflag != tar.TypeReg {
			if hdr.Typeflag == tar.TypeDir {
				continue
			}
			ts.notFile = true
		}
		idx.sessions = append(idx.sessions, ts)
		if ts.flat {
			continue
		}
		sdir := path.Dir(name)
		project, sname := path.Dir(sdir), path.Base(sdir)
		if dirs[sname] == nil {
			dirs[sname] = map[string]bool{}
		}
		dirs[sname][project] = true
		encs[sdir]++
	}
	for sname, projects := range dirs {
		if len(projects) > 1 {
			idx.dup[sname] = true
		}
	}
	for sdir, n := range encs {
		if n > 1 {
			idx.both[sdir] = true
		}
	}
	return idx, nil
}

// walkTar is the second pass: each session entry is copied to a temporary
// file and read with storage.ReadRootSession, then bound to its path as
// storage.WalkRoot binds a root's files.
func (s *Source) walkTar(ctx context.Context, fn func(Item) error) error {
	tmpDir, err := os.MkdirTemp("", "sessionstore-import-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmpDir)
	tr, closeAll, err := s.openTar()
	if err != nil {
		return err
	}
	defer closeAll()
	reportedBoth := map[string]bool{}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return fmt.Errorf("%s: reading the archive: %w", s.path, err)
		}
		ts, ok := classify(tarEntryName(hdr.Name))
		if !ok || hdr.Typeflag == tar.TypeDir {
			continue
		}
		it := Item{Rel: ts.rel, Display: s.display(ts.rel)}
		it.Encoding = ts.encoding
		it.Path = it.Display
		fail := func(err error) error {
			it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1, Err: err}
			return fn(it)
		}
		sdir := path.Dir(ts.rel)
		switch {
		case ts.flat:
			err = fail(sessionstore.Errorf(sessionstore.ReasonCorruption,
				"session artifact %s uses the unsupported flat-file layout; use a separate root or move it into a project/session directory before loading", jsQuote(it.Display)))
		case ts.notFile:
			err = fail(fmt.Errorf("the archive entry is not a regular file (type %q)", hdr.Typeflag))
		case s.tar.both[sdir]:
			if reportedBoth[sdir] {
				continue
			}
			reportedBoth[sdir] = true
			it.Rel, it.Display, it.Encoding = sdir, s.display(sdir), ""
			it.Path = it.Display
			err = fail(sessionstore.Errorf(sessionstore.ReasonCorruption,
				"session artifact %s uses .jsonl, but this backend is configured for compression \"zstd\"; use a separate root or select the matching compression mode",
				jsQuote(s.display(sdir+"/"+storage.RawArtifactName))))
		case s.tar.dup[path.Base(sdir)]:
			err = fail(sessionstore.Errorf(sessionstore.ReasonCorruption,
				"duplicate JSONL session id %s appears in multiple project directories", sessionstore.Quote(path.Base(sdir))))
		default:
			err = fn(s.readTarSession(tr, tmpDir, it))
		}
		if err != nil {
			return err
		}
	}
}

// readTarSession reads the current entry through a temporary file.
func (s *Source) readTarSession(tr *tar.Reader, tmpDir string, it Item) Item {
	name := storage.ArtifactName
	if it.Encoding == storage.EncodingJSONL {
		name = storage.RawArtifactName
	}
	tmp := filepath.Join(tmpDir, name)
	f, err := os.Create(tmp)
	if err == nil {
		_, err = io.Copy(f, tr)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
	}
	if err != nil {
		it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1, Err: err}
		return it
	}
	defer os.Remove(tmp)
	rs, _ := storage.ReadRootSession(tmp)
	rs.Path = it.Display
	rs.Notes = replaceAll(rs.Notes, tmp, it.Display)
	it.RootSession = rs
	var re *storage.RootError
	if errors.As(rs.Err, &re) {
		// Messages name the archive entry, not the temporary file.
		re.Path = it.Display
		var se *sessionstore.Error
		if errors.As(re.Err, &se) {
			se.Message = strings.ReplaceAll(se.Message, tmp, it.Display)
		}
		return it
	}
	// Identity binding (docs/events.md#layout): the header's id and cwd must name this entry.
	expected, err := storage.ArtifactPath("", rs.Header)
	if err != nil {
		it.Events, it.Torn = nil, false
		it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1, Err: sessionstore.Errorf(sessionstore.ReasonCorruption,
			"corrupt session log %s: header id cannot name a storage path", sessionstore.Quote(it.Display))}
		return it
	}
	expected = filepath.ToSlash(expected)
	if it.Encoding == storage.EncodingJSONL {
		expected = path.Join(path.Dir(expected), storage.RawArtifactName)
	}
	if expected != it.Rel {
		it.Events, it.Torn = nil, false
		it.Err = &storage.RootError{Path: it.Display, Offset: -1, PlainOffset: -1, Err: sessionstore.Errorf(sessionstore.ReasonCorruption,
			"corrupt session log %s: header id %s and cwd identify %s", sessionstore.Quote(it.Display),
			sessionstore.Quote(rs.Header.ID), sessionstore.Quote(s.display(expected)))}
	}
	return it
}

func replaceAll(notes []string, old, repl string) []string {
	for i := range notes {
		notes[i] = strings.ReplaceAll(notes[i], old, repl)
	}
	return notes
}

// jsQuote is JSON.stringify of a path, as the reference's layout messages
// quote paths.
func jsQuote(s string) string { return string(sessionlog.AppendJSString(nil, s)) }
