package archive

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// fakeStore is an in-memory store with the API's rules that matter here:
// lazy materialisation, Create idempotent for an equal header, Append
// idempotent by content, expected_revision, revisions
// <cluster>:<incarnation>:<last change>.
type fakeStore struct {
	mu       sync.Mutex
	index    uint64
	sessions map[string]*fakeSession
	// hooks
	readRaw  func(id string) error              // called before a ReadRaw is served
	before   func(req *sessionpb.AppendRequest) // called before an Append is served
	appended [][]string                         // every Append batch received
	inFlight int                                // ReadRaw answers not yet written by a sink (export tests)
	maxHeld  int
}

type fakeSession struct {
	header      sessionstore.Header
	events      []string
	incarnation uint64
	last        uint64
}

func newFakeStore() *fakeStore { return &fakeStore{sessions: map[string]*fakeSession{}, index: 10} }

func (f *fakeStore) rev(s *fakeSession) string {
	return fmt.Sprintf("cid:%d:%d", s.incarnation, s.last)
}

func (f *fakeStore) Status(context.Context) (*sessionpb.StatusResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return &sessionpb.StatusResponse{ClusterId: "cid", AppliedIndex: f.index, NodeId: "fake"}, nil
}

func (f *fakeStore) ListSnapshots(_ context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var ids []string
	for id, s := range f.sessions {
		if len(s.events) > 0 && id > req.PageToken {
			ids = append(ids, id)
		}
	}
	sort.Strings(ids)
	out := &sessionpb.ListSnapshotsResponse{}
	for _, id := range ids {
		if len(out.Snapshots) == int(req.PageSize) {
			out.NextPageToken = out.Snapshots[len(out.Snapshots)-1].Header.Id
			break
		}
		s := f.sessions[id]
		out.Snapshots = append(out.Snapshots, &sessionpb.SessionSnapshot{Header: sessionpb.HeaderFromDomain(s.header), Revision: f.rev(s)})
	}
	return out, nil
}

func (f *fakeStore) ReadRaw(_ context.Context, req *sessionpb.ReadRawRequest) (*sessionpb.ReadRawResponse, error) {
	if f.readRaw != nil {
		if err := f.readRaw(req.SessionId); err != nil {
			return nil, err
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	s := f.sessions[req.SessionId]
	if s == nil || len(s.events) == 0 {
		return nil, sessionstore.NotFound(req.SessionId)
	}
	f.inFlight++
	f.maxHeld = max(f.maxHeld, f.inFlight)
	text := string(sessionlog.HeaderLine(s.header)) + "\n" + strings.Join(s.events, "\n") + "\n"
	return &sessionpb.ReadRawResponse{Header: sessionpb.HeaderFromDomain(s.header), Filename: "session.jsonl", Content: []byte(text), Revision: f.rev(s)}, nil
}

func (f *fakeStore) Create(_ context.Context, req *sessionpb.CreateRequest) (*sessionpb.CreateResponse, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	h := req.Header.Domain()
	if s := f.sessions[h.ID]; s != nil {
		if len(s.events) > 0 || !bytes.Equal(sessionlog.HeaderLine(s.header), sessionlog.HeaderLine(h)) {
			return nil, sessionstore.Errorf(sessionstore.ReasonAlreadyExists, "exists")
		}
		return &sessionpb.CreateResponse{Readable: proto.Bool(true)}, nil
	}
	f.index++
	f.sessions[h.ID] = &fakeSession{header: h, incarnation: f.index, last: f.index}
	return &sessionpb.CreateResponse{Readable: proto.Bool(true)}, nil
}

func (f *fakeStore) Append(_ context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error) {
	if f.before != nil {
		f.before(req)
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.appended = append(f.appended, req.Events)
	s := f.sessions[req.SessionId]
	if s == nil {
		return nil, sessionstore.NotFound(req.SessionId)
	}
	first, _ := sessionlog.CheckEvent(req.SessionId, []byte(req.Events[0]))
	if int(first.Seq)+len(req.Events) <= len(s.events) && slices.Equal(s.events[first.Seq:int(first.Seq)+len(req.Events)], req.Events) {
		return &sessionpb.AppendResponse{Revision: f.rev(s), NextSeq: int64(len(s.events)), Duplicate: true}, nil
	}
	if req.ExpectedRevision != "" && req.ExpectedRevision != f.rev(s) {
		return nil, sessionstore.Errorf(sessionstore.ReasonRevisionMismatch, "revision")
	}
	if int(first.Seq) != len(s.events) {
		return nil, sessionstore.Errorf(sessionstore.ReasonSeqMismatch, "seq")
	}
	f.index++
	s.events = append(s.events, req.Events...)
	s.last = f.index
	return &sessionpb.AppendResponse{Revision: f.rev(s), NextSeq: int64(len(s.events))}, nil
}

// put materialises a session directly.
func (f *fakeStore) put(id string, events ...string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.index++
	cwd := "/p"
	f.sessions[id] = &fakeSession{header: sessionstore.Header{ID: id, CreatedAt: 1, Cwd: &cwd}, events: events, incarnation: f.index, last: f.index}
}

func ev(seq int, extra string) string {
	return fmt.Sprintf(`{"type":"x-t/e","seq":%d,"time":%d,"data":{"x":%q},"ignorable":true}`, seq, seq, extra)
}

func evs(n int, size int) []string {
	var out []string
	for i := range n {
		out = append(out, ev(i, strings.Repeat("a", size)))
	}
	return out
}

// memSink records what an export writes and how many sessions were read
// but not yet written.
type memSink struct {
	st       *fakeStore
	files    map[string][]byte
	order    []string
	manifest []byte
	aborted  bool
}

func (s *memSink) Add(rel string, data []byte) error {
	s.st.mu.Lock()
	s.st.inFlight--
	s.st.mu.Unlock()
	s.files[rel] = data
	s.order = append(s.order, rel)
	return nil
}
func (s *memSink) Finish(r io.Reader, size int64) error {
	m, err := io.ReadAll(r)
	if err != nil {
		return err
	}
	if int64(len(m)) != size {
		return fmt.Errorf("manifest of %d bytes, announced %d", len(m), size)
	}
	s.manifest = m
	return nil
}
func (s *memSink) Abort()        { s.aborted = true }
func (s *memSink) Where() string { return "memory" }

// parsed is the manifest the sink received.
func (s *memSink) parsed(t *testing.T) *Manifest {
	t.Helper()
	m, err := parseManifest(s.manifest)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// Export reads ahead a bounded number of sessions (memory does not grow
// with the export), writes them in listing order across pages, records a
// vanished session as failed and goes on, and leaves out sessions whose
// revision says they were registered after the start.
func TestArchiveExportIsBoundedOrderedAndSkipsLaterRegistrations(t *testing.T) {
	st := newFakeStore()
	for i := range 40 {
		st.put(fmt.Sprintf("s%02d", i), evs(3, 10)...)
	}
	start := st.index
	st.put("s99-late", evs(2, 1)...)
	st.index = start // as if Status answered before the late registration
	st.readRaw = func(id string) error {
		if id == "s07" {
			return sessionstore.NotFound(id)
		}
		return nil
	}
	sink := &memSink{st: st, files: map[string][]byte{}}
	res, err := Export(context.Background(), st, sink, ExportOptions{Parallel: 3, PageSize: 7, TempDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if res.Manifest.Sessions != nil || res.Sessions != 39 || res.Events != 39*3 {
		t.Errorf("result: %d entries held, %d sessions, %d events", len(res.Manifest.Sessions), res.Sessions, res.Events)
	}
	m := sink.parsed(t)
	if len(m.Sessions) != 39 || len(m.Failed) != 1 || m.Failed[0].ID != "s07" || !strings.Contains(m.Failed[0].Error, "vanished") {
		t.Fatalf("%d sessions, failed %+v", len(m.Sessions), m.Failed)
	}
	if m.AppliedIndexAtStart != start {
		t.Errorf("applied index %d, want %d", m.AppliedIndexAtStart, start)
	}
	var ids []string
	for _, s := range m.Sessions {
		ids = append(ids, s.ID)
	}
	if !slices.IsSorted(ids) || slices.Contains(ids, "s99-late") {
		t.Errorf("order or selection: %v", ids)
	}
	if st.maxHeld > 3+2 {
		t.Errorf("up to %d sessions read and not yet written; want ≤ Parallel+2", st.maxHeld)
	}
	if sink.manifest == nil || sink.aborted {
		t.Error("no manifest written")
	}
	// Each file decodes to the session's text.
	for _, s := range m.Sessions {
		d, err := storage.DecodeArtifact(sink.files[s.Path])
		if err != nil || textDigest(d.Text) != s.SHA256 || s.Events != 3 {
			t.Errorf("%s: %v", s.ID, err)
		}
	}
}

// A cancelled export aborts its sink.
func TestArchiveExportCancelledAbortsTheSink(t *testing.T) {
	st := newFakeStore()
	for i := range 20 {
		st.put(fmt.Sprintf("s%02d", i), evs(2, 1)...)
	}
	ctx, cancel := context.WithCancel(context.Background())
	st.readRaw = func(id string) error {
		if id == "s05" {
			cancel()
		}
		return nil
	}
	sink := &memSink{st: st, files: map[string][]byte{}}
	if _, err := Export(ctx, st, sink, ExportOptions{Parallel: 2}); !errors.Is(err, context.Canceled) || !sink.aborted || sink.manifest != nil {
		t.Fatalf("err %v, aborted %v", err, sink.aborted)
	}
}

// Frames: the header alone first, events in frames of at most the limit,
// a longer event alone; the whole decodes to the text.
func TestArchiveEncodeFrames(t *testing.T) {
	h := string(sessionlog.HeaderLine(sessionstore.Header{ID: "x"})) + "\n"
	lines := []string{ev(0, strings.Repeat("a", 300)), ev(1, strings.Repeat("b", 300)), ev(2, strings.Repeat("c", 2000)), ev(3, "d"), ev(4, "e")}
	text := h + strings.Join(lines, "\n") + "\n"
	data := encodeFrames([]byte(text), len(h), 1000)
	d, err := storage.DecodeArtifact(data)
	if err != nil || string(d.Text) != text {
		t.Fatalf("decode: %v", err)
	}
	// header | 0,1 | 2 (alone, over the limit) | 3,4
	if len(d.Frames) != 4 {
		t.Fatalf("%d frames, want 4", len(d.Frames))
	}
	dec, _ := zstd.NewReader(nil)
	defer dec.Close()
	var sizes []int
	for _, f := range d.Frames {
		p, err := dec.DecodeAll(data[f.Start:f.End], nil)
		if err != nil {
			t.Fatal(err)
		}
		sizes = append(sizes, len(p))
	}
	if sizes[0] != len(h) || sizes[2] != len(lines[2])+1 || sizes[1] > 1000 {
		t.Errorf("frame plaintext sizes %v", sizes)
	}
	// A header-only text is one frame.
	if d, err := storage.DecodeArtifact(encodeFrames([]byte(h), len(h), 1000)); err != nil || len(d.Frames) != 1 {
		t.Errorf("header only: %v", err)
	}
}

// tarOf builds a tar from name → content ("" content with a trailing "/"
// name is a directory).
func tarOf(t *testing.T, compress bool, entries ...[2]string) string {
	t.Helper()
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		hdr := &tar.Header{Name: e[0], Mode: 0o600, Size: int64(len(e[1])), Typeflag: tar.TypeReg}
		if strings.HasSuffix(e[0], "/") {
			hdr = &tar.Header{Name: e[0], Mode: 0o700, Typeflag: tar.TypeDir}
		}
		if err := tw.WriteHeader(hdr); err != nil {
			t.Fatal(err)
		}
		if _, err := tw.Write([]byte(e[1])); err != nil {
			t.Fatal(err)
		}
	}
	tw.Close()
	data := buf.Bytes()
	if compress {
		enc, _ := zstd.NewWriter(nil)
		data = enc.EncodeAll(data, nil)
	}
	p := filepath.Join(t.TempDir(), "in.bin") // the name says nothing: content decides
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func rawSession(id, cwd string, n int) string {
	h := sessionstore.Header{ID: id, CreatedAt: 1}
	if cwd != "" {
		h.Cwd = &cwd
	}
	text := string(sessionlog.HeaderLine(h)) + "\n"
	for _, e := range evs(n, 1) {
		text += e + "\n"
	}
	return text
}

func walkAll(t *testing.T, src *Source) map[string]Item {
	t.Helper()
	out := map[string]Item{}
	if err := src.Walk(context.Background(), func(it Item) error { out[it.Rel] = it; return nil }); err != nil {
		t.Fatal(err)
	}
	return out
}

// A tar source is told by content, "./" prefixes are accepted, and the
// layout rules of a root apply to its entries: flat files, both encodings,
// one id in two projects, and a header that names another path.
func TestArchiveTarSourceLayout(t *testing.T) {
	zs := string(eiZstd(rawSession("z1", "/p", 2)))
	for _, compress := range []bool{false, true} {
		p := tarOf(t, compress,
			[2]string{"./--p--/", ""},
			[2]string{"./--p--/ok/session.jsonl", rawSession("ok", "/p", 3)},
			[2]string{"--p--/z1/session.jsonl.zstd", zs},
			[2]string{"--p--/both/session.jsonl", rawSession("both", "/p", 1)},
			[2]string{"--p--/both/session.jsonl.zstd", string(eiZstd(rawSession("both", "/p", 1)))},
			[2]string{"--p--/dup/session.jsonl", rawSession("dup", "/p", 1)},
			[2]string{"--q--/dup/session.jsonl", rawSession("dup", "/q", 1)},
			[2]string{"--p--/moved/session.jsonl", rawSession("other", "/p", 1)},
			[2]string{"--p--/flat.jsonl", "x"},
			[2]string{"--p--/ok/notes.txt", "ignored"},
			[2]string{"README", "ignored"},
		)
		src, err := OpenSource(p)
		if err != nil {
			t.Fatal(err)
		}
		want := SourceTar
		if compress {
			want = SourceTarZst
		}
		if src.Kind() != want || src.Total() != 8 || src.Manifest() != nil {
			t.Fatalf("kind %s total %d", src.Kind(), src.Total())
		}
		items := walkAll(t, src)
		if it := items["--p--/ok/session.jsonl"]; it.Err != nil || len(it.Events) != 3 || it.Header.ID != "ok" {
			t.Errorf("ok: %+v", it)
		}
		if it := items["--p--/z1/session.jsonl.zstd"]; it.Err != nil || len(it.Events) != 2 || it.Encoding != storage.EncodingZstd {
			t.Errorf("z1: %+v", it.Err)
		}
		for rel, msg := range map[string]string{
			"--p--/both":                "uses .jsonl, but this backend is configured for compression",
			"--p--/dup/session.jsonl":   `duplicate JSONL session id "dup" appears in multiple project directories`,
			"--q--/dup/session.jsonl":   `duplicate JSONL session id "dup"`,
			"--p--/moved/session.jsonl": `header id "other" and cwd identify "` + p + `:--p--/other/session.jsonl"`,
			"--p--/flat.jsonl":          "unsupported flat-file layout",
		} {
			it, ok := items[rel]
			if !ok || it.Err == nil || !strings.Contains(it.Err.Error(), msg) || it.Events != nil {
				t.Errorf("%s: %v, want %q", rel, it.Err, msg)
			}
			if ok && strings.Contains(it.Err.Error(), os.TempDir()+"/sessionstore-import-") {
				t.Errorf("%s: the message names the temporary file: %v", rel, it.Err)
			}
		}
		if len(items) != 7 {
			t.Errorf("%d items: %v", len(items), slices.Sorted(func(y func(string) bool) {
				for k := range items {
					if !y(k) {
						return
					}
				}
			}))
		}
	}
	// Neither a directory nor a tar.
	p := filepath.Join(t.TempDir(), "x.tar")
	os.WriteFile(p, []byte("hello"), 0o600)
	if _, err := OpenSource(p); err == nil || !strings.Contains(err.Error(), "neither a directory") {
		t.Errorf("not a tar: %v", err)
	}
	// zstd that does not hold a tar.
	enc, _ := zstd.NewWriter(nil)
	os.WriteFile(p, enc.EncodeAll([]byte(strings.Repeat("x", 1000)), nil), 0o600)
	if _, err := OpenSource(p); err == nil || !strings.Contains(err.Error(), "does not hold a tar") {
		t.Errorf("zstd without tar: %v", err)
	}
}

func eiZstd(text string) []byte {
	nl := strings.IndexByte(text, '\n') + 1
	return encodeFrames([]byte(text), nl, DefaultMaxFrameBytes)
}

// An export's manifest is checked on import: a session whose text differs
// from its entry, and an entry without a file, are unreadable.
func TestArchiveManifestIsChecked(t *testing.T) {
	st := newFakeStore()
	st.put("a", evs(2, 1)...)
	st.put("b", evs(3, 1)...)
	dir := filepath.Join(t.TempDir(), "out")
	sink, err := CreateSink(dir)
	if err != nil {
		t.Fatal(err)
	}
	st.inFlight = -100 // the real sinks do not count
	if _, err := Export(context.Background(), st, sink, ExportOptions{Compression: CompressionNone}); err != nil {
		t.Fatal(err)
	}
	if _, err := CreateSink(dir); err == nil || !strings.Contains(err.Error(), "not empty") {
		t.Errorf("second export into the same directory: %v", err)
	}
	// Tamper: a changes (still a valid log), b disappears.
	a := filepath.Join(dir, "--p--", "a", storage.RawArtifactName)
	os.WriteFile(a, []byte(rawSession("a", "/p", 1)), 0o600)
	os.RemoveAll(filepath.Join(dir, "--p--", "b"))
	src, err := OpenSource(dir)
	if err != nil || src.Manifest() == nil {
		t.Fatal(err)
	}
	items := walkAll(t, src)
	if it := items["--p--/a/session.jsonl"]; it.Err == nil || !strings.Contains(it.Err.Error(), "does not match manifest.json") {
		t.Errorf("a: %v", it.Err)
	}
	if it := items["--p--/b/session.jsonl"]; it.Err == nil || !strings.Contains(it.Err.Error(), "missing from the export") || it.Header.ID != "b" {
		t.Errorf("b: %v", it.Err)
	}
	// And Import reports both as unreadable, writing nothing.
	dst := newFakeStore()
	sum, err := Import(context.Background(), dst, src, ImportOptions{})
	if err != nil || sum.Counts[StatusUnreadable] != 2 || len(dst.appended) != 0 {
		t.Fatalf("import: %v %v", err, sum.Counts)
	}
}

// Import batches by events and bytes, completes a prefix, and refuses what
// it cannot import without writing.
func TestArchiveImportBatchesAndRules(t *testing.T) {
	root := t.TempDir()
	write := func(id string, text string) {
		p := filepath.Join(root, "--p--", id, storage.RawArtifactName)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte(text), 0o600)
	}
	write("big", rawSession("big", "/p", 0)+strings.Join(evs(25, 100), "\n")+"\n")
	write("pre", rawSession("pre", "/p", 10))
	write("empty", rawSession("empty", "/p", 0))
	write("huge", rawSession("huge", "/p", 0)+ev(0, strings.Repeat("h", 3000))+"\n")
	st := newFakeStore()
	st.put("pre", evs(4, 1)...)
	src, err := OpenSource(root)
	if err != nil {
		t.Fatal(err)
	}
	var results []SessionResult
	sum, err := Import(context.Background(), st, src, ImportOptions{BatchEvents: 10, BatchBytes: 1000, MaxEventBytes: 2000,
		Done: func(r SessionResult) { results = append(results, r) }})
	if err != nil {
		t.Fatal(err)
	}
	if sum.Counts[StatusImported] != 1 || sum.Counts[StatusCompleted] != 1 || sum.Counts[StatusEmpty] != 1 || sum.Counts[StatusInvalid] != 1 {
		t.Fatalf("counts %v", sum.Counts)
	}
	for _, b := range st.appended {
		n := 0
		for _, e := range b {
			n += len(e)
		}
		if len(b) > 10 || n > 1000 {
			t.Errorf("a batch of %d events, %d bytes", len(b), n)
		}
	}
	if got := st.sessions["big"].events; len(got) != 25 {
		t.Errorf("big: %d events", len(got))
	}
	if got := st.sessions["pre"].events; len(got) != 10 || sum.Appended != 25+6 {
		t.Errorf("pre: %d events, %d appended", len(got), sum.Appended)
	}
	if _, ok := st.sessions["huge"]; ok {
		t.Error("huge was written")
	}
	// A second run sends nothing.
	st.appended = nil
	sum, err = Import(context.Background(), st, src, ImportOptions{BatchEvents: 10, BatchBytes: 1000, MaxEventBytes: 2000})
	if err != nil || sum.Counts[StatusPresent] != 2 || len(st.appended) != 0 {
		t.Fatalf("second run: %v %v, %d appends", err, sum.Counts, len(st.appended))
	}
	// A change by someone else between the read and the append is a
	// conflict (expected_revision), and nothing of ours is interleaved.
	write("race", rawSession("race", "/p", 6))
	st.put("race", evs(3, 1)...)
	st.before = func(req *sessionpb.AppendRequest) {
		if req.SessionId == "race" && req.ExpectedRevision != "" {
			st.before = nil
			st.put("race", append(evs(3, 1), ev(3, "theirs"))...)
		}
	}
	src, _ = OpenSource(root)
	results = nil
	sum, _ = Import(context.Background(), st, src, ImportOptions{Parallel: 1, Done: func(r SessionResult) { results = append(results, r) }})
	if sum.Counts[StatusConflict] != 1 || len(st.sessions["race"].events) != 4 {
		t.Errorf("race: counts %v, %d events", sum.Counts, len(st.sessions["race"].events))
	}
	for _, r := range results {
		if r.ID == "race" && !strings.Contains(r.Reason, "changed while it was being imported") {
			t.Errorf("race: %s", r.Reason)
		}
	}
}

func TestArchiveRevisionIncarnation(t *testing.T) {
	for rev, want := range map[string]uint64{"abc:12:40": 12, "a:b:c:7:9": 7} {
		if got, ok := revisionIncarnation(rev); !ok || got != want {
			t.Errorf("%s: %d %v", rev, got, ok)
		}
	}
	for _, rev := range []string{"", "x", "a:9", "a:x:1"} {
		if _, ok := revisionIncarnation(rev); ok {
			t.Errorf("%q parsed", rev)
		}
	}
}

// A session registered before the start but materialised only during the
// export (after the first pass) is left out: the second pass exports exactly
// the sessions the first pass selected.
func TestArchiveExportLeavesOutSessionsMaterialisedDuringIt(t *testing.T) {
	st := newFakeStore()
	for i := range 12 {
		st.put(fmt.Sprintf("s%02d", i), evs(2, 5)...)
	}
	cwd := "/p"
	st.mu.Lock()
	// Registered (incarnation below the start index) but not materialised.
	st.sessions["s05-empty"] = &fakeSession{header: sessionstore.Header{ID: "s05-empty", CreatedAt: 1, Cwd: &cwd}, incarnation: 1, last: 1}
	st.mu.Unlock()
	sink := &memSink{st: st, files: map[string][]byte{}}
	res, err := Export(context.Background(), st, sink, ExportOptions{Parallel: 2, PageSize: 5, TempDir: t.TempDir(),
		AfterList: func() {
			st.mu.Lock()
			st.sessions["s05-empty"].events = evs(1, 5) // its first append lands now
			st.mu.Unlock()
		}})
	if err != nil {
		t.Fatal(err)
	}
	m := sink.parsed(t)
	for _, s := range m.Sessions {
		if s.ID == "s05-empty" {
			t.Fatal("a session materialised after the start was exported")
		}
	}
	if len(m.Sessions) != 12 || res.Sessions != 12 {
		t.Fatalf("%d sessions exported, want 12", len(m.Sessions))
	}
}

// A session a read would refuse is refused whole by default (and by a dry
// run), and imported with the reference's write rules under KeepUnreadable.
func TestArchiveImportRefusesUnreadableUnlessKept(t *testing.T) {
	root := t.TempDir()
	write := func(id string, text string) {
		p := filepath.Join(root, "--p--", id, storage.RawArtifactName)
		os.MkdirAll(filepath.Dir(p), 0o700)
		os.WriteFile(p, []byte(text), 0o600)
	}
	unknown := `{"type":"future/event","seq":1,"time":1,"data":{}}`
	write("unknown", rawSession("unknown", "/p", 1)+unknown+"\n")
	write("fine", rawSession("fine", "/p", 2))
	for _, c := range []struct {
		name   string
		opts   ImportOptions
		status Status
		stored bool
	}{
		{"dry run", ImportOptions{DryRun: true}, StatusRefused, false},
		{"strict", ImportOptions{}, StatusRefused, false},
		{"dry run, kept", ImportOptions{DryRun: true, KeepUnreadable: true}, StatusValid, false},
		{"kept", ImportOptions{KeepUnreadable: true}, StatusImported, true},
	} {
		t.Run(c.name, func(t *testing.T) {
			st := newFakeStore()
			var mu sync.Mutex // import workers append concurrently
			var validations []sessionpb.Validation
			st.before = func(req *sessionpb.AppendRequest) {
				mu.Lock()
				defer mu.Unlock()
				validations = append(validations, req.Validation)
			}
			src, err := OpenSource(root)
			if err != nil {
				t.Fatal(err)
			}
			results := map[string]SessionResult{}
			sum, err := Import(context.Background(), st, src, ImportOptions{DryRun: c.opts.DryRun, KeepUnreadable: c.opts.KeepUnreadable,
				Done: func(r SessionResult) { results[r.ID] = r }})
			if err != nil {
				t.Fatal(err)
			}
			r := results["unknown"]
			if r.Status != c.status || (c.status == StatusRefused && !strings.Contains(r.Reason, `event type "future/event"`)) {
				t.Errorf("unknown: %s %q, want %s", r.Status, r.Reason, c.status)
			}
			if _, ok := st.sessions["unknown"]; ok != c.stored {
				t.Errorf("unknown stored: %v, want %v", ok, c.stored)
			}
			if !results["fine"].Status.OK() {
				t.Errorf("fine: %s %q", results["fine"].Status, results["fine"].Reason)
			}
			if c.status == StatusRefused && sum.Failures() == 0 {
				t.Error("a refused session is not counted as a failure (exit status 1)")
			}
			for _, v := range validations {
				if want := map[bool]sessionpb.Validation{true: sessionpb.Validation_VALIDATION_REFERENCE, false: sessionpb.Validation_VALIDATION_STRICT}[c.opts.KeepUnreadable]; v != want {
					t.Errorf("an append asked for %v, want %v", v, want)
				}
			}
		})
	}
}
