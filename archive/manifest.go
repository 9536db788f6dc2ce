package archive

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"time"
)

// ManifestName is the manifest's name at the root of an export.
const ManifestName = "manifest.json"

// Manifest format identification.
const (
	ManifestFormat  = "sessionstore-export"
	ManifestVersion = 1
)

// Compression modes of the session files (the reference's "compression").
const (
	CompressionZstd = "zstd"
	CompressionNone = "none"
)

// NotExported is what the manifest says an export leaves out.
const NotExported = "leases (owners and epochs), pending plan-mode selections and approved plan exits, and request-id deduplication records: state beside the logs, not the logs; imported sessions start cold"

// Manifest is manifest.json, the last entry of an export. An export never
// holds it whole: Export streams the session entries into it (see
// manifestSpill), and its result's Manifest has no Sessions. Import reads
// it whole (up to maxManifestBytes).
type Manifest struct {
	Format        string `json:"format"`         // ManifestFormat
	FormatVersion int    `json:"format_version"` // ManifestVersion
	ClusterID     string `json:"cluster_id"`
	// NodeID is the node that answered the export's Status call.
	NodeID string `json:"node_id,omitempty"`
	// AppliedIndexAtStart is that node's applied Raft index when the export
	// began; sessions registered after it are not in the export.
	AppliedIndexAtStart uint64    `json:"applied_index_at_start"`
	StartedAt           time.Time `json:"started_at"`
	FinishedAt          time.Time `json:"finished_at"`
	Filters             Filters   `json:"filters"`
	// Compression is CompressionZstd (session.jsonl.zstd files) or
	// CompressionNone (session.jsonl).
	Compression string            `json:"compression"`
	NotExported string            `json:"not_exported"`
	Sessions    []ManifestSession `json:"sessions"`
	// Failed lists the sessions that were selected but could not be
	// exported (vanished, unreadable); they have no file.
	Failed []ManifestFailure `json:"failed,omitempty"`
}

// Filters are the export's selection, as given.
type Filters struct {
	Sessions  []string `json:"sessions,omitempty"`
	CwdPrefix string   `json:"cwd_prefix,omitempty"`
	// Since is the earliest header createdAt exported (RFC 3339), if any.
	Since string `json:"since,omitempty"`
}

// ManifestSession describes one exported session.
type ManifestSession struct {
	ID string `json:"id"`
	// Path is the session file, relative to the root, with "/" separators.
	Path string `json:"path"`
	// Revision is the revision the session was read at.
	Revision string `json:"revision"`
	// Events is the number of events (lines after the header).
	Events int64 `json:"events"`
	// SHA256 is the hex SHA-256 of the decoded text (header line and event
	// lines, each ending in "\n"), whatever the compression.
	SHA256 string `json:"sha256"`
	// TextBytes is the length of the decoded text.
	TextBytes int64 `json:"text_bytes"`
	// Bytes is the length of the file as written.
	Bytes int64 `json:"bytes"`
}

// ManifestFailure is a selected session that could not be exported.
type ManifestFailure struct {
	ID    string `json:"id"`
	Error string `json:"error"`
}

// encode renders the manifest with a trailing newline.
func (m *Manifest) encode() ([]byte, error) {
	b, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}

// parseManifest reads a manifest and checks its format.
func parseManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, fmt.Errorf("%s: %w", ManifestName, err)
	}
	if m.Format != ManifestFormat {
		return nil, fmt.Errorf("%s: format %q is not %q", ManifestName, m.Format, ManifestFormat)
	}
	if m.FormatVersion != ManifestVersion {
		return nil, fmt.Errorf("%s: format version %d is not supported (this build reads %d)", ManifestName, m.FormatVersion, ManifestVersion)
	}
	return &m, nil
}

// textDigest is the SHA-256 of a session's decoded text.
func textDigest(text []byte) string {
	s := sha256.Sum256(text)
	return hex.EncodeToString(s[:])
}

// manifestSpill keeps an export's session entries out of memory: each entry
// is appended to a temporary file as one JSON line when its session is
// written, and manifest.json is rendered from that file at the end, entry
// by entry (see reader). It also counts the bytes the entries will take in
// manifest.json, since a tar header needs the size before the content.
type manifestSpill struct {
	f       *os.File
	w       *bufio.Writer
	n       int   // entries spilled
	body    int64 // bytes of the entries in manifest.json, separators included
	scratch bytes.Buffer
}

// manifestIndent is how json.MarshalIndent(m, "", "  ") indents an element
// of the manifest's sessions array: the prefix of its lines after the first.
const manifestIndent = "    "

// newManifestSpill creates the spill file in dir (os.TempDir() if empty,
// and as a fallback when dir refuses it).
func newManifestSpill(dir string) (*manifestSpill, error) {
	const pattern = ".sessionstore-export-*.manifest.jsonl"
	f, err := os.CreateTemp(dir, pattern)
	if err != nil && dir != "" {
		f, err = os.CreateTemp("", pattern)
	}
	if err != nil {
		return nil, fmt.Errorf("manifest spill file: %w", err)
	}
	return &manifestSpill{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

// add appends one entry.
func (s *manifestSpill) add(e ManifestSession) error {
	line, err := json.Marshal(e)
	if err != nil {
		return err
	}
	s.scratch.Reset()
	if err := json.Indent(&s.scratch, line, manifestIndent, "  "); err != nil {
		return err
	}
	// ",\n    " before every entry but the first, which has "\n    ".
	s.body += int64(len("\n"+manifestIndent) + s.scratch.Len())
	if s.n > 0 {
		s.body++
	}
	s.n++
	if _, err := s.w.Write(line); err != nil {
		return fmt.Errorf("manifest spill file: %w", err)
	}
	if err := s.w.WriteByte('\n'); err != nil {
		return fmt.Errorf("manifest spill file: %w", err)
	}
	return nil
}

// sessionsKey is where json.MarshalIndent(m, "", "  ") puts the manifest's
// sessions array when it is empty. Only the top level is indented by two
// spaces (Filters.Sessions is at four), and a quote inside a JSON string is
// escaped, so the match is unique.
const sessionsKey = "\n  \"sessions\": []"

// reader renders manifest.json (head and Failed from m, whose Sessions must
// be empty; the sessions from the spill file), byte for byte what
// json.MarshalIndent(m, "", "  ") plus a newline gives for the manifest
// with every entry in memory, and returns its size.
func (s *manifestSpill) reader(m *Manifest) (io.Reader, int64, error) {
	if len(m.Sessions) != 0 {
		return nil, 0, errors.New("manifest: the session entries are in the spill file, not in memory")
	}
	head := *m
	head.Sessions = []ManifestSession{} // "sessions": [], to be filled
	data, err := head.encode()
	if err != nil {
		return nil, 0, err
	}
	i := bytes.Index(data, []byte(sessionsKey))
	if i < 0 || bytes.Count(data, []byte(sessionsKey)) != 1 {
		return nil, 0, errors.New("manifest: no unique sessions array to fill")
	}
	open := i + len(sessionsKey) - 1 // just past "["
	prefix, tail := data[:open], data[open:]
	size := int64(len(data))
	if s.n > 0 {
		size += s.body + int64(len("\n  "))
		tail = append([]byte("\n  "), tail...)
	}
	if err := s.w.Flush(); err != nil {
		return nil, 0, fmt.Errorf("manifest spill file: %w", err)
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil, 0, fmt.Errorf("manifest spill file: %w", err)
	}
	sc := bufio.NewScanner(bufio.NewReaderSize(s.f, 64<<10))
	sc.Buffer(make([]byte, 0, 64<<10), 64<<20)
	r := &manifestReader{pending: prefix, sc: sc, want: s.n, tail: tail}
	return r, size, nil
}

// close closes and removes the spill file.
func (s *manifestSpill) close() {
	s.f.Close()
	os.Remove(s.f.Name())
}

// manifestReader streams manifest.json: the head, each spilled entry
// indented as an element of the sessions array, then the tail.
type manifestReader struct {
	pending []byte
	sc      *bufio.Scanner
	buf     bytes.Buffer
	n, want int // entries rendered, entries spilled
	tail    []byte
	done    bool // the tail is pending or sent
}

func (r *manifestReader) Read(p []byte) (int, error) {
	for len(r.pending) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if err := r.next(); err != nil {
			return 0, err
		}
	}
	n := copy(p, r.pending)
	r.pending = r.pending[n:]
	return n, nil
}

// next makes the next piece pending: an entry, or the tail.
func (r *manifestReader) next() error {
	if !r.sc.Scan() {
		if err := r.sc.Err(); err != nil {
			return fmt.Errorf("manifest spill file: %w", err)
		}
		if r.n != r.want {
			return fmt.Errorf("manifest spill file: %d entries, want %d", r.n, r.want)
		}
		r.pending, r.done = r.tail, true
		return nil
	}
	r.buf.Reset()
	if r.n > 0 {
		r.buf.WriteByte(',')
	}
	r.buf.WriteString("\n" + manifestIndent)
	if err := json.Indent(&r.buf, r.sc.Bytes(), manifestIndent, "  "); err != nil {
		return fmt.Errorf("manifest spill file: %w", err)
	}
	r.n++
	r.pending = r.buf.Bytes()
	return nil
}
