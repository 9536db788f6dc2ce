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
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// The manifest streamed from the spill file is byte for byte the one
// json.MarshalIndent gives with every entry in memory, whatever the entries
// and the head hold, and its announced size is exact.
func TestArchiveManifestStreamsAsMarshalIndent(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	for _, tc := range []struct {
		name    string
		n       int
		failed  []ManifestFailure
		filters Filters
	}{
		{"empty", 0, nil, Filters{}},
		{"empty-with-failures", 0, []ManifestFailure{{ID: "f", Error: "vanished"}}, Filters{Sessions: []string{"a", "f"}}},
		{"one", 1, nil, Filters{CwdPrefix: "/home/"}},
		{"many", 257, []ManifestFailure{{ID: "x<&>", Error: `"quoted"`}, {ID: "y", Error: "e"}}, Filters{Sessions: []string{}, Since: "2026-01-01T00:00:00Z"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			m := &Manifest{Format: ManifestFormat, FormatVersion: ManifestVersion,
				ClusterID: "c\n  \"sessions\": []", NodeID: "n", AppliedIndexAtStart: 42,
				StartedAt: at, FinishedAt: at.Add(time.Hour), Filters: tc.filters,
				Compression: CompressionZstd, NotExported: NotExported, Failed: tc.failed}
			spill, err := newManifestSpill(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			defer spill.close()
			full := *m
			full.Sessions = []ManifestSession{}
			for i := range tc.n {
				e := ManifestSession{ID: fmt.Sprintf("s-%d <&> \u2028 \"%s\"", i, strings.Repeat("é", i%7)),
					Path: fmt.Sprintf("--p--/s-%d/session.jsonl.zstd", i), Revision: fmt.Sprintf("c:%d:%d", i, i*3),
					Events: int64(i), SHA256: strings.Repeat("ab", 32), TextBytes: int64(i * 100), Bytes: int64(i * 31)}
				if err := spill.add(e); err != nil {
					t.Fatal(err)
				}
				full.Sessions = append(full.Sessions, e)
			}
			want, err := full.encode()
			if err != nil {
				t.Fatal(err)
			}
			r, size, err := spill.reader(m)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(&oneByteReader{r: r, every: 97}) // odd read sizes
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("streamed manifest differs:\n%s\nwant:\n%s", got, want)
			}
			if size != int64(len(want)) {
				t.Errorf("announced %d bytes, wrote %d", size, len(want))
			}
			if m.Sessions != nil {
				t.Error("reader changed the manifest")
			}
			if back, err := parseManifest(got); err != nil || len(back.Sessions) != tc.n || len(back.Failed) != len(tc.failed) {
				t.Errorf("parse back: %v", err)
			}
		})
	}
}

// oneByteReader reads in small, uneven pieces.
type oneByteReader struct {
	r     io.Reader
	every int
	i     int
}

func (o *oneByteReader) Read(p []byte) (int, error) {
	o.i++
	n := 1 + o.i%o.every
	if len(p) > n {
		p = p[:n]
	}
	return o.r.Read(p)
}

// logStore records the calls an export makes.
type logStore struct {
	*fakeStore
	mu  sync.Mutex
	log []string
}

func (l *logStore) note(s string) {
	l.mu.Lock()
	l.log = append(l.log, s)
	l.mu.Unlock()
}

func (l *logStore) ListSnapshots(ctx context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error) {
	l.note("list " + req.PageToken)
	return l.fakeStore.ListSnapshots(ctx, req)
}

func (l *logStore) ReadRaw(ctx context.Context, req *sessionpb.ReadRawRequest) (*sessionpb.ReadRawResponse, error) {
	l.note("read " + req.SessionId)
	return l.fakeStore.ReadRaw(ctx, req)
}

// The listing is paged through twice: a first pass that only counts (the
// progress total, given before any session is read), then the export's own,
// which reads sessions while later pages are still to be listed. Requested
// ids keep their missing report.
func TestArchiveExportStreamsTheListing(t *testing.T) {
	st := &logStore{fakeStore: newFakeStore()}
	for i := range 30 {
		st.put(fmt.Sprintf("s%02d", i), evs(2, 1)...)
	}
	st.inFlight = -1000
	var total = -1
	var readsAtStart int
	sink := &memSink{st: st.fakeStore, files: map[string][]byte{}}
	_, err := Export(context.Background(), st, sink, ExportOptions{Parallel: 2, PageSize: 5, TempDir: t.TempDir(),
		Started: func(_ *Manifest, n int) {
			total = n
			for _, e := range st.log {
				if strings.HasPrefix(e, "read ") {
					readsAtStart++
				}
			}
		}})
	if err != nil {
		t.Fatal(err)
	}
	if total != 30 || readsAtStart != 0 {
		t.Fatalf("Started with total %d after %d reads", total, readsAtStart)
	}
	var lists []int // positions of the listing calls
	firstRead := -1
	for i, e := range st.log {
		if strings.HasPrefix(e, "list ") {
			lists = append(lists, i)
		} else if firstRead < 0 {
			firstRead = i
		}
	}
	// 30 sessions in pages of 5: 6 pages per pass.
	if len(lists) != 12 {
		t.Fatalf("%d listing calls, want two passes of 6: %v", len(lists), st.log)
	}
	if firstRead < lists[6] || firstRead > lists[len(lists)-1] {
		t.Errorf("the first read comes at %d, the second pass lists at %v: not streamed", firstRead, lists[6:])
	}
	if m := sink.parsed(t); len(m.Sessions) != 30 || !slices.IsSortedFunc(m.Sessions, func(a, b ManifestSession) int { return strings.Compare(a.ID, b.ID) }) {
		t.Errorf("%d sessions, or out of listing order", len(m.Sessions))
	}

	// Requested ids: found ones exported in listing order, a missing one
	// reported once however often it is given; one pass over the listing
	// (they are few, and kept from it).
	st.log = nil
	sink = &memSink{st: st.fakeStore, files: map[string][]byte{}}
	res, err := Export(context.Background(), st, sink, ExportOptions{PageSize: 4, TempDir: t.TempDir(),
		Sessions: []string{"s17", "nope", "s03", "nope", "s17"},
		Started:  func(_ *Manifest, n int) { total = n }})
	if err != nil {
		t.Fatal(err)
	}
	m := sink.parsed(t)
	if total != 2 || res.Sessions != 2 || len(m.Sessions) != 2 || m.Sessions[0].ID != "s03" || m.Sessions[1].ID != "s17" ||
		!slices.Equal(res.Missing, []string{"nope"}) || !slices.Equal(m.Filters.Sessions, []string{"s17", "nope", "s03", "nope", "s17"}) {
		t.Errorf("requested ids: total %d, %+v, missing %v", total, m.Sessions, res.Missing)
	}
	lists = nil
	for _, e := range st.log {
		if strings.HasPrefix(e, "list ") {
			lists = append(lists, 0)
		}
	}
	if len(lists) != 8 { // 30 sessions in pages of 4
		t.Errorf("%d listing calls with requested ids, want one pass of 8", len(lists))
	}
}

// failStore fails the listing from a given call on.
type failStore struct {
	*fakeStore
	mu     sync.Mutex
	calls  int
	failAt int
}

func (f *failStore) ListSnapshots(ctx context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error) {
	f.mu.Lock()
	f.calls++
	n := f.calls
	f.mu.Unlock()
	if n >= f.failAt {
		return nil, errors.New("listing broke")
	}
	return f.fakeStore.ListSnapshots(ctx, req)
}

type failingSink struct {
	memSink
	addErr, finishErr error
}

func (s *failingSink) Add(rel string, data []byte) error {
	if s.addErr != nil {
		return s.addErr
	}
	return s.memSink.Add(rel, data)
}

func (s *failingSink) Finish(r io.Reader, size int64) error {
	if s.finishErr != nil {
		io.CopyN(io.Discard, r, 10)
		return s.finishErr
	}
	return s.memSink.Finish(r, size)
}

// The spill file is removed however the export ends: success, a sink that
// fails, a listing that fails mid-export, a cancelled context.
func TestArchiveExportRemovesTheSpillFileInEveryPath(t *testing.T) {
	newStore := func() *fakeStore {
		st := newFakeStore()
		for i := range 12 {
			st.put(fmt.Sprintf("s%02d", i), evs(2, 1)...)
		}
		st.inFlight = -1000
		return st
	}
	for _, tc := range []struct {
		name string
		run  func(tmp string) error
		want string
	}{
		{"success", func(tmp string) error {
			st := newStore()
			_, err := Export(context.Background(), st, &memSink{st: st, files: map[string][]byte{}}, ExportOptions{TempDir: tmp})
			return err
		}, ""},
		{"add fails", func(tmp string) error {
			st := newStore()
			_, err := Export(context.Background(), st, &failingSink{memSink: memSink{st: st, files: map[string][]byte{}}, addErr: errors.New("disk full")}, ExportOptions{TempDir: tmp})
			return err
		}, "disk full"},
		{"finish fails", func(tmp string) error {
			st := newStore()
			_, err := Export(context.Background(), st, &failingSink{memSink: memSink{st: st, files: map[string][]byte{}}, finishErr: errors.New("disk full")}, ExportOptions{TempDir: tmp})
			return err
		}, "disk full"},
		{"listing fails mid-export", func(tmp string) error {
			st := &failStore{fakeStore: newStore(), failAt: 5} // pass one: 4 calls (pages of 4)
			sink := &memSink{st: st.fakeStore, files: map[string][]byte{}}
			_, err := Export(context.Background(), st, sink, ExportOptions{TempDir: tmp, PageSize: 4})
			if sink.manifest != nil || !sink.aborted {
				return errors.New("finished despite the listing error")
			}
			return err
		}, "listing broke"},
		{"cancelled", func(tmp string) error {
			st := newStore()
			ctx, cancel := context.WithCancel(context.Background())
			st.readRaw = func(id string) error {
				if id == "s06" {
					cancel()
				}
				return nil
			}
			_, err := Export(ctx, st, &memSink{st: st, files: map[string][]byte{}}, ExportOptions{TempDir: tmp, Parallel: 2})
			return err
		}, context.Canceled.Error()},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tmp := t.TempDir()
			err := tc.run(tmp)
			if (tc.want == "") != (err == nil) || (err != nil && !strings.Contains(err.Error(), tc.want)) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
			if left, _ := os.ReadDir(tmp); len(left) != 0 {
				t.Errorf("left in the temporary directory: %v", left)
			}
		})
	}
}

// The directory, tar and tar.zst sinks write a streamed manifest of the
// announced size last, and refuse one of another size without leaving a
// manifest (directory) or a file (tar).
func TestArchiveSinksFinishWithAStreamedManifest(t *testing.T) {
	manifest := []byte(`{"format":"x"}` + "\n")
	for _, name := range []string{"out", "out.tar", "out.tar.zst"} {
		for _, size := range []int64{int64(len(manifest)), int64(len(manifest)) + 5, int64(len(manifest)) - 3} {
			dir := t.TempDir()
			out := filepath.Join(dir, name)
			sink, err := CreateSink(out)
			if err != nil {
				t.Fatal(err)
			}
			if err := sink.Add("--p--/a/session.jsonl", []byte("x\n")); err != nil {
				t.Fatal(err)
			}
			err = sink.Finish(bytes.NewReader(manifest), size)
			if size != int64(len(manifest)) {
				if err == nil {
					t.Errorf("%s: a manifest of %d bytes announced as %d was accepted", name, len(manifest), size)
				}
				sink.Abort()
				switch OutputKind(out) {
				case OutputDir:
					if _, err := os.Stat(filepath.Join(out, ManifestName)); !errors.Is(err, os.ErrNotExist) {
						t.Errorf("%s: a partial manifest was left: %v", name, err)
					}
				default:
					if left, _ := os.ReadDir(dir); len(left) != 0 {
						t.Errorf("%s: left %v", name, left)
					}
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			var got []byte
			if OutputKind(out) == OutputDir {
				got, _ = os.ReadFile(filepath.Join(out, ManifestName))
			} else {
				got = lastTarEntry(t, out, ManifestName)
			}
			if !bytes.Equal(got, manifest) {
				t.Errorf("%s: manifest %q", name, got)
			}
		}
	}
}

// lastTarEntry reads a tar (or tar.zst) and returns its last entry, which
// must be named name.
func lastTarEntry(t *testing.T, file, name string) []byte {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if strings.HasSuffix(file, ".zst") {
		dec, _ := zstd.NewReader(nil)
		defer dec.Close()
		if data, err = dec.DecodeAll(data, nil); err != nil {
			t.Fatal(err)
		}
	}
	tr := tar.NewReader(bytes.NewReader(data))
	var last string
	var content []byte
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		last = hdr.Name
		content, _ = io.ReadAll(tr)
	}
	if last != name {
		t.Fatalf("%s: last entry %q, want %q", file, last, name)
	}
	return content
}

// The sinks' memory of the directories they made is bounded: past the
// bound a tar may repeat a directory entry (same mode), which import and
// extraction take as the same directory.
func TestArchiveSinkDirectoriesAreBounded(t *testing.T) {
	var d dirSet
	for i := range 3 * maxDirSet {
		d.add(fmt.Sprint(i), i%2 == 0)
		if len(d.above) > maxDirSet {
			t.Fatalf("%d directories remembered", len(d.above))
		}
	}
	out := filepath.Join(t.TempDir(), "many.tar")
	sink, err := CreateSink(out)
	if err != nil {
		t.Fatal(err)
	}
	n := maxDirSet + 100
	for i := range n {
		if err := sink.Add(fmt.Sprintf("--p%d--/s%05d/session.jsonl", i%3, i), []byte("x\n")); err != nil {
			t.Fatal(err)
		}
	}
	manifest := fmt.Sprintf(`{"format":%q,"format_version":%d}`, ManifestFormat, ManifestVersion)
	if err := sink.Finish(strings.NewReader(manifest), int64(len(manifest))); err != nil {
		t.Fatal(err)
	}
	if ts := sink.(*tarSink); len(ts.made.above) != 3 {
		t.Errorf("%d directories remembered, want the 3 projects", len(ts.made.above))
	}
	// Each directory entry once: the projects and the session directories.
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dirs := map[string]int{}
	tr := tar.NewReader(f)
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if hdr.Typeflag == tar.TypeDir {
			dirs[hdr.Name]++
			if dirs[hdr.Name] > 1 || hdr.Mode != 0o700 {
				t.Fatalf("directory entry %s: %d times, mode %o", hdr.Name, dirs[hdr.Name], hdr.Mode)
			}
		}
	}
	if len(dirs) != n+3 {
		t.Errorf("%d directory entries, want %d", len(dirs), n+3)
	}
	src, err := OpenSource(out)
	if err != nil {
		t.Fatal(err)
	}
	if src.Total() != n {
		t.Errorf("%d sessions indexed, want %d", src.Total(), n)
	}
}
