package archive

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// Store is the part of the session store's API that export and import use.
// *client.Client (api/client) implements it, with its retries.
type Store interface {
	Status(ctx context.Context) (*sessionpb.StatusResponse, error)
	ListSnapshots(ctx context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error)
	ReadRaw(ctx context.Context, req *sessionpb.ReadRawRequest) (*sessionpb.ReadRawResponse, error)
	Create(ctx context.Context, req *sessionpb.CreateRequest) (*sessionpb.CreateResponse, error)
	Append(ctx context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error)
}

// DefaultMaxFrameBytes is the largest frame plaintext an export writes
// (a single larger event gets a frame of its own).
const DefaultMaxFrameBytes = storage.MaxFramePlain

// ExportOptions select and shape an export.
type ExportOptions struct {
	// Sessions, if non-empty, exports only these ids; an id that is not a
	// materialised session at the start is reported as missing.
	Sessions []string
	// CwdPrefix keeps the sessions whose cwd starts with it (the listing's
	// cwd_prefix: sessions without a cwd are left out).
	CwdPrefix string
	// Since, if non-zero, keeps the sessions whose header createdAt is at or
	// after it.
	Since time.Time
	// Compression is CompressionZstd (default) or CompressionNone.
	Compression string
	// Parallel is how many sessions are read and encoded ahead of the one
	// being written (default 4). Memory is about Parallel+2 sessions.
	Parallel int
	// PageSize of the listing (default 1000).
	PageSize int
	// MaxFrameBytes bounds a zstd frame's plaintext (default 1 MiB).
	MaxFrameBytes int
	// TempDir is where the manifest's session entries wait, one JSON line
	// each, until manifest.json is written (a hidden file, removed however
	// the export ends). Default, and fallback when TempDir refuses the
	// file: os.TempDir(). `sessionstore export` uses the output's parent directory
	// (on many systems /tmp is memory).
	TempDir string
	// Started is called before any session is read, with the number of
	// sessions selected by a first pass over the listing (counting only),
	// for progress. The export itself pages through the listing again as
	// it goes (except with Sessions: the few selected are kept from the
	// first pass); the two agree but for a session registered before the
	// start whose first append lands in between (a session is listed once
	// it has events, and none is ever removed).
	Started func(m *Manifest, total int)
	// Exported is called after each session is written (or has failed,
	// with err set).
	Exported func(s ManifestSession, err error)
	// AfterList, if set, runs after the first pass over the listing, before
	// the export's own and before any session is read (tests use it to
	// change the cluster mid-export).
	AfterList func()
}

// ExportResult is the outcome of an export.
type ExportResult struct {
	// Manifest is the manifest written, without its session entries: they
	// are in the manifest.json written to the sink (holding them would grow
	// with the export). Failed is complete (failures are few, and kept in
	// memory).
	Manifest *Manifest
	// Sessions, Events, TextBytes and Bytes total the manifest's session
	// entries: sessions exported, their events, decoded text and bytes
	// written.
	Sessions  int
	Events    int64
	TextBytes int64
	Bytes     int64
	// Missing are the requested ids (ExportOptions.Sessions) that were not
	// materialised sessions at the start (or were filtered out by the other
	// filters).
	Missing []string
	// Elapsed is the export's duration.
	Elapsed time.Duration
}

// Problems is the number of sessions that were requested or selected but
// not exported.
func (r *ExportResult) Problems() int { return len(r.Missing) + len(r.Manifest.Failed) }

// Export writes every selected session to sink, then the manifest. Sessions
// that vanish or cannot be read are recorded in the manifest's Failed list
// (and passed to Exported) and the export goes on; an error is returned only
// when the export as a whole fails (the start, the sink, the context), in
// which case the sink is aborted.
//
// Memory does not grow with the export: the listing is paged through as
// sessions are exported (after a first pass that only counts them; the
// sessions of requested ids, few, are kept from that pass instead), at most
// about Parallel+2 sessions are held at once, and the manifest's session
// entries are spilled to a temporary file (see ExportOptions.TempDir) from
// which manifest.json is streamed at the end. What stays in memory is the
// Failed list and, with ExportOptions.Sessions, the requested ids.
func Export(ctx context.Context, st Store, sink Sink, opts ExportOptions) (res *ExportResult, err error) {
	defer func() {
		if err != nil {
			sink.Abort()
		}
	}()
	if opts.Compression == "" {
		opts.Compression = CompressionZstd
	}
	if opts.Compression != CompressionZstd && opts.Compression != CompressionNone {
		return nil, fmt.Errorf("compression %q: want %q or %q", opts.Compression, CompressionZstd, CompressionNone)
	}
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 1000
	}
	if opts.MaxFrameBytes <= 0 {
		opts.MaxFrameBytes = DefaultMaxFrameBytes
	}
	start := time.Now()

	// The start: the applied index first, then a linearizable listing (which
	// reflects at least everything applied at that index).
	status, err := st.Status(ctx)
	if err != nil {
		return nil, fmt.Errorf("status: %w", err)
	}
	m := &Manifest{
		Format: ManifestFormat, FormatVersion: ManifestVersion,
		ClusterID: status.GetClusterId(), NodeID: status.GetNodeId(),
		AppliedIndexAtStart: status.GetAppliedIndex(),
		StartedAt:           start.UTC(),
		Filters:             Filters{Sessions: opts.Sessions, CwdPrefix: opts.CwdPrefix},
		Compression:         opts.Compression,
		NotExported:         NotExported,
	}
	if !opts.Since.IsZero() {
		m.Filters.Since = opts.Since.UTC().Format(time.RFC3339Nano)
	}
	// A first pass over the listing counts the sessions for progress; the
	// export pages through it again as it goes. Requested ids are few: their
	// sessions are kept from the first pass instead.
	sel := newSelection(st, m.AppliedIndexAtStart, opts)
	total := 0
	var held []*sessionpb.SessionSnapshot
	// The first pass also records the selected ids (in listing order) in a
	// temporary file: the second pass exports exactly those, so a session
	// materialised after the start (listed only by the later pass) is left
	// out, with memory independent of the number of sessions.
	startSet, err := newIDFile(opts.TempDir)
	if err != nil {
		return nil, err
	}
	defer startSet.close()
	if err := sel.each(ctx, func(s *sessionpb.SessionSnapshot) error {
		total++
		if len(sel.want) > 0 {
			held = append(held, s)
			return nil
		}
		return startSet.add(s.GetHeader().GetId())
	}); err != nil {
		return nil, err
	}
	pass := func(ctx context.Context, fn func(*sessionpb.SessionSnapshot) error) error {
		cur, err := startSet.reader()
		if err != nil {
			return err
		}
		return sel.each(ctx, func(s *sessionpb.SessionSnapshot) error {
			ok, err := cur.contains(s.GetHeader().GetId())
			if err != nil || !ok {
				return err // not selected at the start: materialised since
			}
			return fn(s)
		})
	}
	if len(sel.want) > 0 {
		pass = func(_ context.Context, fn func(*sessionpb.SessionSnapshot) error) error {
			for _, s := range held {
				if err := fn(s); err != nil {
					return err
				}
			}
			return nil
		}
	}
	spill, err := newManifestSpill(opts.TempDir)
	if err != nil {
		return nil, err
	}
	defer spill.close()
	res = &ExportResult{Manifest: m}
	if opts.Started != nil {
		opts.Started(m, total)
	}
	if opts.AfterList != nil {
		opts.AfterList()
	}

	err = exportSessions(ctx, st, pass, opts, func(r exported) error {
		if r.err != nil {
			m.Failed = append(m.Failed, ManifestFailure{ID: r.id, Error: r.err.Error()})
			if opts.Exported != nil {
				opts.Exported(ManifestSession{ID: r.id}, r.err)
			}
			return nil
		}
		if err := sink.Add(r.entry.Path, r.data); err != nil {
			return fmt.Errorf("write %s: %w", r.entry.Path, err)
		}
		if err := spill.add(r.entry); err != nil {
			return err
		}
		res.Sessions++
		res.Events += r.entry.Events
		res.TextBytes += r.entry.TextBytes
		res.Bytes += r.entry.Bytes
		if opts.Exported != nil {
			opts.Exported(r.entry, nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	res.Missing = sel.missing()
	m.FinishedAt = time.Now().UTC()
	manifest, size, err := spill.reader(m)
	if err != nil {
		return nil, err
	}
	if err := sink.Finish(manifest, size); err != nil {
		return nil, fmt.Errorf("finish %s: %w", sink.Where(), err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// selection is the export's set of sessions: the materialised sessions, as
// the listing pages through them, that pass the filters. A session whose
// revision says it was registered after the start index is left out
// (paging reads later states than the first page), which keeps the set the
// one of the start however long the export takes.
type selection struct {
	st         Store
	startIndex uint64
	pageSize   int
	cwdPrefix  string
	sinceMs    int64
	want       map[string]bool // ExportOptions.Sessions, if any
	found      map[string]bool // the wanted ids selected
	ids        []string        // ExportOptions.Sessions, for missing
}

func newSelection(st Store, startIndex uint64, opts ExportOptions) *selection {
	s := &selection{st: st, startIndex: startIndex, pageSize: opts.PageSize, cwdPrefix: opts.CwdPrefix,
		want: map[string]bool{}, found: map[string]bool{}, ids: opts.Sessions}
	for _, id := range opts.Sessions {
		s.want[id] = true
	}
	if !opts.Since.IsZero() {
		s.sinceMs = opts.Since.UnixMilli()
	}
	return s
}

// each pages through the listing and calls fn with each selected session,
// in listing order, one page in memory at a time. It stops at fn's first
// error and returns it.
func (s *selection) each(ctx context.Context, fn func(*sessionpb.SessionSnapshot) error) error {
	token := ""
	for {
		resp, err := s.st.ListSnapshots(ctx, &sessionpb.ListSnapshotsRequest{
			Consistency: sessionpb.Consistency_LINEARIZABLE, PageSize: int32(s.pageSize),
			PageToken: token, CwdPrefix: s.cwdPrefix})
		if err != nil {
			return fmt.Errorf("list sessions: %w", err)
		}
		for _, snap := range resp.GetSnapshots() {
			h := snap.GetHeader()
			if len(s.want) > 0 && !s.want[h.GetId()] {
				continue
			}
			if inc, ok := revisionIncarnation(snap.GetRevision()); ok && inc > s.startIndex {
				continue // registered after the export began
			}
			if s.sinceMs > 0 && h.GetCreatedAt() < s.sinceMs {
				continue
			}
			if len(s.want) > 0 {
				s.found[h.GetId()] = true
			}
			if err := fn(snap); err != nil {
				return err
			}
		}
		token = resp.GetNextPageToken()
		if token == "" {
			return nil
		}
	}
}

// missing is the requested ids not selected, each once.
func (s *selection) missing() []string {
	var out []string
	for _, id := range s.ids {
		if !s.found[id] {
			out = append(out, id)
			s.found[id] = true // report a repeated id once
		}
	}
	return out
}

// revisionIncarnation extracts the Raft index of the Create that registered
// a session from its revision, <cluster-id>:<incarnation>:<last change>
// (docs/design.md "Revisions").
func revisionIncarnation(rev string) (uint64, bool) {
	last := strings.LastIndexByte(rev, ':')
	if last < 0 {
		return 0, false
	}
	mid := strings.LastIndexByte(rev[:last], ':')
	if mid < 0 {
		return 0, false
	}
	inc, err := strconv.ParseUint(rev[mid+1:last], 10, 64)
	return inc, err == nil
}

// exported is one session read and encoded (or its failure).
type exported struct {
	id    string
	entry ManifestSession
	data  []byte
	err   error
}

// exportSessions takes the sessions from pass (a selection's pages, as it
// goes), reads and encodes them with opts.Parallel workers and hands them to
// write in listing order. At most about Parallel+2 sessions are in memory at
// once, and what pass holds (one page of the listing).
func exportSessions(ctx context.Context, st Store, pass func(context.Context, func(*sessionpb.SessionSnapshot) error) error, opts ExportOptions, write func(exported) error) error {
	ctx, cancel := context.WithCancel(ctx)
	type job struct {
		snap *sessionpb.SessionSnapshot
		done chan exported // buffered: a worker never blocks on it
	}
	jobs := make(chan *job)
	order := make(chan *job, opts.Parallel)
	var wg sync.WaitGroup
	defer func() {
		cancel() // first: a lister or worker may be waiting on a send
		wg.Wait()
	}()
	for range opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.done <- exportOne(ctx, st, j.snap, opts)
			}
		}()
	}
	var listErr error // set before order is closed
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		err := pass(ctx, func(s *sessionpb.SessionSnapshot) error {
			j := &job{snap: s, done: make(chan exported, 1)}
			select {
			case order <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return ctx.Err()
			}
			return nil
		})
		if err != nil && ctx.Err() == nil {
			listErr = err
		}
	}()
	for j := range order {
		var r exported
		select {
		case r = <-j.done:
		case <-ctx.Done():
			return ctx.Err()
		}
		if ctx.Err() != nil {
			return ctx.Err()
		}
		if err := write(r); err != nil {
			return err
		}
	}
	if listErr != nil {
		return listErr
	}
	return ctx.Err()
}

// exportOne reads one session and encodes its file.
func exportOne(ctx context.Context, st Store, snap *sessionpb.SessionSnapshot, opts ExportOptions) exported {
	id := snap.GetHeader().GetId()
	r := exported{id: id}
	raw, err := st.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		if errors.Is(err, sessionstore.ErrNotFound) {
			err = fmt.Errorf("vanished after the listing: %w", err)
		} else {
			err = fmt.Errorf("read: %w", err)
		}
		r.err = err
		return r
	}
	h := raw.GetHeader().Domain()
	text := raw.GetContent()
	headerLine := sessionlog.HeaderLine(h)
	if len(text) < len(headerLine)+1 || !bytes.Equal(text[:len(headerLine)], headerLine) || text[len(headerLine)] != '\n' || text[len(text)-1] != '\n' {
		r.err = errors.New("ReadRaw returned a text that does not start with the session's header line or does not end with a newline")
		return r
	}
	abs, err := storage.ArtifactPath("", h)
	if err != nil {
		r.err = fmt.Errorf("the header names no storage path: %w", err)
		return r
	}
	rel := filepath.ToSlash(abs)
	data := text
	if opts.Compression == CompressionNone {
		rel = rel[:len(rel)-len(storage.ArtifactName)] + storage.RawArtifactName
	} else {
		data = encodeFrames(text, len(headerLine)+1, opts.MaxFrameBytes)
	}
	r.entry = ManifestSession{
		ID: id, Path: rel, Revision: raw.GetRevision(),
		Events:    int64(bytes.Count(text, []byte{'\n'}) - 1),
		SHA256:    textDigest(text),
		TextBytes: int64(len(text)),
		Bytes:     int64(len(data)),
	}
	r.data = data
	return r
}

// encodeFrames is the zstd artifact of text: the header line (text[:headerEnd])
// alone in the first frame, then the event lines in frames of at most
// maxFrame bytes of plaintext (a longer line alone in its frame).
func encodeFrames(text []byte, headerEnd, maxFrame int) []byte {
	out := make([]byte, 0, len(text)/3+64)
	out = storage.EncodeFrame(out, text[:headerEnd])
	return storage.EncodeLines(out, text[headerEnd:], maxFrame)
}

// idFile is a temporary file of session ids, one JSON string a line, in
// listing (byte) order.
type idFile struct {
	f *os.File
	w *bufio.Writer
}

func newIDFile(dir string) (*idFile, error) {
	const pattern = ".sessionstore-export-*.ids"
	f, err := os.CreateTemp(dir, pattern)
	if err != nil && dir != "" {
		f, err = os.CreateTemp("", pattern)
	}
	if err != nil {
		return nil, fmt.Errorf("export id file: %w", err)
	}
	return &idFile{f: f, w: bufio.NewWriterSize(f, 64<<10)}, nil
}

func (i *idFile) add(id string) error {
	b, err := json.Marshal(id)
	if err != nil {
		return err
	}
	if _, err := i.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("export id file: %w", err)
	}
	return nil
}

// reader flushes the file and returns a cursor over it from the start.
func (i *idFile) reader() (*idCursor, error) {
	if err := i.w.Flush(); err != nil {
		return nil, fmt.Errorf("export id file: %w", err)
	}
	if _, err := i.f.Seek(0, io.SeekStart); err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(i.f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	return &idCursor{sc: sc}, nil
}

func (i *idFile) close() {
	name := i.f.Name()
	_ = i.f.Close()
	_ = os.Remove(name)
}

// idCursor answers membership for ids asked in ascending order.
type idCursor struct {
	sc   *bufio.Scanner
	cur  string
	have bool
	done bool
}

func (c *idCursor) contains(id string) (bool, error) {
	for !c.done && (!c.have || c.cur < id) {
		if !c.sc.Scan() {
			if err := c.sc.Err(); err != nil {
				return false, fmt.Errorf("export id file: %w", err)
			}
			c.done, c.have = true, false
			break
		}
		if err := json.Unmarshal(c.sc.Bytes(), &c.cur); err != nil {
			return false, fmt.Errorf("export id file: %w", err)
		}
		c.have = true
	}
	return c.have && c.cur == id, nil
}
