package archive

import (
	"bytes"
	"context"
	"errors"
	"fmt"
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
	Create(ctx context.Context, req *sessionpb.CreateRequest) error
	Append(ctx context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error)
}

// DefaultMaxFrameBytes is the largest frame plaintext an export writes
// (a single larger event gets a frame of its own).
const DefaultMaxFrameBytes = 1 << 20

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
	// Started is called once the set of sessions is fixed, with its size.
	Started func(m *Manifest, total int)
	// Exported is called after each session is written (or has failed,
	// with err set).
	Exported func(s ManifestSession, err error)
	// AfterList, if set, runs after the listing, before any session is
	// read (tests use it to change the cluster mid-export).
	AfterList func()
}

// ExportResult is the outcome of an export.
type ExportResult struct {
	Manifest *Manifest
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
		Sessions:            []ManifestSession{},
	}
	if !opts.Since.IsZero() {
		m.Filters.Since = opts.Since.UTC().Format(time.RFC3339Nano)
	}
	selected, missing, err := listSelected(ctx, st, m.AppliedIndexAtStart, opts)
	if err != nil {
		return nil, err
	}
	res = &ExportResult{Manifest: m, Missing: missing}
	if opts.Started != nil {
		opts.Started(m, len(selected))
	}
	if opts.AfterList != nil {
		opts.AfterList()
	}

	err = exportSessions(ctx, st, selected, opts, func(r exported) error {
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
		m.Sessions = append(m.Sessions, r.entry)
		if opts.Exported != nil {
			opts.Exported(r.entry, nil)
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	m.FinishedAt = time.Now().UTC()
	data, err := m.encode()
	if err != nil {
		return nil, err
	}
	if err := sink.Finish(data); err != nil {
		return nil, fmt.Errorf("finish %s: %w", sink.Where(), err)
	}
	res.Elapsed = time.Since(start)
	return res, nil
}

// listSelected pages through the materialised sessions and applies the
// filters. A session whose revision says it was registered after the start
// index is left out (paging reads later states than the first page).
func listSelected(ctx context.Context, st Store, startIndex uint64, opts ExportOptions) ([]*sessionpb.SessionSnapshot, []string, error) {
	want := map[string]bool{}
	for _, id := range opts.Sessions {
		want[id] = true
	}
	var sinceMs int64
	if !opts.Since.IsZero() {
		sinceMs = opts.Since.UnixMilli()
	}
	var out []*sessionpb.SessionSnapshot
	found := map[string]bool{}
	token := ""
	for {
		resp, err := st.ListSnapshots(ctx, &sessionpb.ListSnapshotsRequest{
			Consistency: sessionpb.Consistency_LINEARIZABLE, PageSize: int32(opts.PageSize),
			PageToken: token, CwdPrefix: opts.CwdPrefix})
		if err != nil {
			return nil, nil, fmt.Errorf("list sessions: %w", err)
		}
		for _, s := range resp.GetSnapshots() {
			h := s.GetHeader()
			if len(want) > 0 && !want[h.GetId()] {
				continue
			}
			if inc, ok := revisionIncarnation(s.GetRevision()); ok && inc > startIndex {
				continue // registered after the export began
			}
			if sinceMs > 0 && h.GetCreatedAt() < sinceMs {
				continue
			}
			found[h.GetId()] = true
			out = append(out, s)
		}
		token = resp.GetNextPageToken()
		if token == "" {
			break
		}
	}
	var missing []string
	for _, id := range opts.Sessions {
		if !found[id] {
			missing = append(missing, id)
			found[id] = true // report a repeated id once
		}
	}
	return out, missing, nil
}

// revisionIncarnation extracts the Raft index of the Create that registered
// a session from its revision, <cluster-id>:<incarnation>:<last change>
// (DESIGN.md "State machine and storage" item 7).
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

// exportSessions reads and encodes the sessions with opts.Parallel workers
// and hands them to write in listing order. At most about Parallel+2
// sessions are in memory at once.
func exportSessions(ctx context.Context, st Store, selected []*sessionpb.SessionSnapshot, opts ExportOptions, write func(exported) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type job struct {
		snap *sessionpb.SessionSnapshot
		done chan exported // buffered: a worker never blocks on it
	}
	jobs := make(chan *job)
	order := make(chan *job, opts.Parallel)
	var wg sync.WaitGroup
	defer wg.Wait()
	for range opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := range jobs {
				j.done <- exportOne(ctx, st, j.snap, opts)
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer close(order)
		defer close(jobs)
		for _, s := range selected {
			j := &job{snap: s, done: make(chan exported, 1)}
			select {
			case order <- j:
			case <-ctx.Done():
				return
			}
			select {
			case jobs <- j:
			case <-ctx.Done():
				return
			}
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
	h := headerFromPB(raw.GetHeader())
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
	start, end := headerEnd, headerEnd
	for end < len(text) {
		nl := bytes.IndexByte(text[end:], '\n')
		next := end + nl + 1
		if next-start > maxFrame && end > start {
			out = storage.EncodeFrame(out, text[start:end])
			start = end
		}
		end = next
	}
	if end > start {
		out = storage.EncodeFrame(out, text[start:end])
	}
	return out
}
