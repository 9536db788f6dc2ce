package main

// Tests of `sessionstore export` and `sessionstore import` (issue 6) against real nodes.
// Every top-level helper starts with "ei".

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/archive"
	"github.com/sessionstore/sessionstore/internal/refdata"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// eiSession is one session a test writes: its header, its batches, and
// whether a Load repairs it afterwards.
type eiSession struct {
	h       *sessionpb.SessionHeader
	batches [][]string
	load    bool // Load after the appends (commits the crash closers)
	noEvent bool // register only: never materialised
	// reference: written with the reference's rules (VALIDATION_REFERENCE),
	// because a read refuses it; it round-trips raw, and an import needs
	// --keep-unreadable for it.
	reference bool
}

// eiBlob is an ignorable event carrying n bytes of text.
func eiBlob(seq int64, n int) string {
	var b strings.Builder
	for b.Len() < n {
		b.WriteString(strconv.FormatInt(seq*7919+int64(b.Len()), 36))
		b.WriteByte(' ')
	}
	return `{"type":"x-test/blob","seq":` + strconv.FormatInt(seq, 10) + `,"time":` + strconv.FormatInt(2000+seq, 10) +
		`,"data":{"b":"` + b.String() + `"},"ignorable":true}`
}

// eiVaried is the round trip's set of sessions: a clean turn, an interrupted
// turn repaired by Load, an open turn, unicode (U+2028 included) in id, cwd
// and events, an ignorable unknown event, a parent and its forked child, no
// cwd, an id that needs escaping, more than 1 MiB of events, and a session
// registered but never appended to (which no export lists).
func eiVaried(prefix string) []eiSession {
	p := func(s string) string { return prefix + s }
	one := ctOneTurnLog()
	depth, seed := int32(1), int64(6)
	child := &sessionpb.SessionHeader{Id: p("child"), CreatedAt: 2000, Cwd: ctStr("/home/u/proj"),
		ParentSession: ctStr(p("parent")), SeedLength: &seed, Origin: ctStr("subagent"), DelegationDepth: &depth, AgentPreset: ctStr("explore")}
	childEvents := append(slices.Clone(one),
		ctEv("session/end-seed", 6, 2001, `{}`),
		ctEv("turn/start", 7, 2002, `{"turn":2}`),
		ctEv("turn/end", 8, 2003, `{"turn":2,"reason":{"kind":"completed"}}`))
	var large []string
	for i := range int64(24) {
		large = append(large, eiBlob(i, 64<<10))
	}
	uni := "\u00fcn\u00ef\u2028code-\u65e5\u672c-\U0001F642"
	return []eiSession{
		{h: ctMeta(p("clean"), "/home/u/proj"), batches: [][]string{one[:3], one[3:]}},
		{h: ctMeta(p("repaired"), "/home/u/proj"), batches: [][]string{{
			ctEv("turn/start", 0, 10, `{"turn":1}`),
			ctEv("step/start", 1, 11, `{"turn":1,"step":1}`),
			ctEv("tool/call", 2, 12, `{"turn":1,"step":1,"callId":"call_a","name":"bash","arguments":"{}"}`),
		}}, load: true},
		{h: ctMeta(p("open"), "/home/u/proj"), batches: [][]string{{
			ctEv("turn/start", 0, 10, `{"turn":1}`),
			ctEv("step/start", 1, 11, `{"turn":1,"step":1}`),
		}}},
		{h: ctMeta(p(uni), "/home/\u00fc/pro\u2028j \u65e5\u672c"), batches: [][]string{{
			ctEv("turn/start", 0, 1, `{"turn":1}`),
			// Raw U+2028, U+2029, CJK, an astral emoji and <&> inside a string, and an escaped U+2028.
			ctSurf("user/message", 1, 2, `{"id":"u1","role":"user","content":[{"type":"text","text":"line`+"\u2028"+`sep `+"\u2029 \u65e5\u672c \U0001F642"+` <&> \u2028"}],"source":{"kind":"user"}}`),
			ctEv("turn/end", 2, 3, `{"turn":1,"reason":{"kind":"completed"}}`),
		}}},
		{h: ctMeta(p("ignorable"), "/home/u/other"), batches: [][]string{one, {
			`{"type":"x-acme/audit","seq":6,"time":1755601001000,"data":{"note":"exported"},"ignorable":true}`}}},
		{h: ctMeta(p("parent"), "/home/u/proj"), batches: [][]string{one}},
		{h: child, batches: [][]string{childEvents[:7], childEvents[7:]}},
		{h: ctMeta(p("no-cwd"), ""), batches: [][]string{one}},
		{h: ctMeta(p("a/b ~c"), `C:\work\agent`), batches: [][]string{one}, reference: true}, // a relative cwd for a POSIX read
		{h: ctMeta(p("large"), "/srv/big"), batches: [][]string{large[:8], large[8:16], large[16:]}},
		{h: ctMeta(p("registered-only"), "/home/u/proj"), noEvent: true},
	}
}

// eiFill writes sessions through n.
func eiFill(t *testing.T, n *testNode, sessions []eiSession) {
	t.Helper()
	for _, s := range sessions {
		if s.reference {
			ctCreateRef(t, n, s.h)
			for _, b := range s.batches {
				ctAppendRef(t, n, s.h.GetId(), b...)
			}
			continue
		}
		ctCreate(t, n, s.h)
		for _, b := range s.batches {
			ctAppend(t, n, s.h.GetId(), b...)
		}
		if s.load {
			if v := ctLoad(t, n, s.h.GetId()); !v.GetRepaired() {
				t.Fatalf("Load(%q) did not repair", s.h.GetId())
			}
		}
	}
}

// eiStored is what a node holds of one session.
type eiStored struct {
	header   *sessionpb.SessionHeader
	text     string
	revision string
	events   []string // ReadFrom(0): the stored events
}

// eiState is every listed session of a node, read linearizably.
func eiState(t *testing.T, n *testNode) map[string]eiStored {
	t.Helper()
	out := map[string]eiStored{}
	token := ""
	for {
		resp, err := n.Client.List(n.ctx(), &sessionpb.ListRequest{PageSize: 3, PageToken: token})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, h := range resp.GetHeaders() {
			raw := ctReadRaw(t, n, h.GetId())
			out[h.GetId()] = eiStored{header: h, text: string(raw.GetContent()), revision: raw.GetRevision(),
				events: ctReadFrom(t, n, h.GetId(), 0).GetEvents()}
		}
		if token = resp.GetNextPageToken(); token == "" {
			return out
		}
	}
}

// eiSameState checks that two nodes hold the same sessions: the same ReadRaw
// text (hence header line and events) and the same event counts. With
// exactHeaders the List headers must be equal too; otherwise an absent
// delegationDepth equals 0 (a reference header line always carries it, so an
// import creates it explicitly).
func eiSameState(t *testing.T, what string, got, want map[string]eiStored, exactHeaders bool) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d sessions, want %d (%v vs %v)", what, len(got), len(want), slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want)))
	}
	for id, w := range want {
		g, ok := got[id]
		if !ok {
			t.Errorf("%s: session %q missing", what, id)
			continue
		}
		if g.text != w.text {
			t.Errorf("%s: session %q: ReadRaw text differs:\n got %.300q\nwant %.300q", what, id, g.text, w.text)
		}
		if len(g.events) != len(w.events) || strings.Count(g.text, "\n") != strings.Count(w.text, "\n") {
			t.Errorf("%s: session %q: %d events, want %d", what, id, len(g.events), len(w.events))
		}
		gh, wh := eiHeader(g.header), eiHeader(w.header)
		if !exactHeaders {
			zero := int64(0)
			if gh.DelegationDepth == nil {
				gh.DelegationDepth = &zero
			}
			if wh.DelegationDepth == nil {
				wh.DelegationDepth = &zero
			}
		}
		if !gh.Equal(wh) {
			t.Errorf("%s: session %q: header %+v, want %+v", what, id, g.header, w.header)
		}
	}
}

// eiHeader converts an API header.
func eiHeader(h *sessionpb.SessionHeader) sessionstore.Header {
	out := sessionstore.Header{Version: int64(h.GetVersion()), ID: h.GetId(), CreatedAt: h.GetCreatedAt(), Cwd: h.Cwd,
		ParentSession: h.ParentSession, SeedLength: h.SeedLength, Origin: h.Origin, AgentPreset: h.AgentPreset}
	if h.DelegationDepth != nil {
		d := int64(*h.DelegationDepth)
		out.DelegationDepth = &d
	}
	return out
}

// eiExport runs `sessionstore export` against n with args (parsed as the command
// parses them) after adjust, and fails the test on error.
func eiExport(t *testing.T, n *testNode, adjust func(*exportConfig), args ...string) (*archive.ExportResult, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cfg, err := parseExportFlags(append([]string{"--addr", n.srv.grpcAddr}, args...), &stderr)
	if err != nil {
		t.Fatalf("export flags %v: %v: %s", args, err, stderr.String())
	}
	if adjust != nil {
		adjust(&cfg)
	}
	res, err := runExport(n.ctx(), cfg, &stdout, &stderr)
	if err != nil {
		t.Fatalf("export %v: %v\nstdout:\n%s\nstderr:\n%s", args, err, stdout.String(), stderr.String())
	}
	return res, stdout.String()
}

// eiImport runs `sessionstore import` into n; the source goes before the flags
// (flags may follow the positional SOURCE).
func eiImport(t *testing.T, ctx context.Context, n *testNode, source string, adjust func(*importConfig), args ...string) (*archive.ImportSummary, string, error) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	cfg, err := parseImportFlags(append([]string{source, "--addr", n.srv.grpcAddr}, args...), &stderr)
	if err != nil {
		t.Fatalf("import flags: %v: %s", err, stderr.String())
	}
	if adjust != nil {
		adjust(&cfg)
	}
	sum, err := runImport(ctx, cfg, &stdout, &stderr)
	return sum, stdout.String() + stderr.String(), err
}

// eiMustImport is eiImport that must succeed.
func eiMustImport(t *testing.T, n *testNode, source string, args ...string) *archive.ImportSummary {
	t.Helper()
	sum, out, err := eiImport(t, n.ctx(), n, source, nil, args...)
	if err != nil {
		t.Fatalf("import %s: %v\n%s", source, err, out)
	}
	return sum
}

// eiCounts renders a summary's non-zero counts, for comparisons.
func eiCounts(s *archive.ImportSummary) string {
	var parts []string
	for _, st := range archive.Statuses {
		if n := s.Counts[st]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s=%d", st, n))
		}
	}
	return strings.Join(parts, " ")
}

// eiReadManifest reads manifest.json of an export directory.
func eiReadManifest(t *testing.T, root string) *archive.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, archive.ManifestName))
	if err != nil {
		t.Fatal(err)
	}
	var m archive.Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		t.Fatalf("manifest: %v", err)
	}
	return &m
}

// eiExtract unpacks an export tar (.tar or .tar.zst) into a new directory.
func eiExtract(t *testing.T, file string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var r io.Reader = f
	if strings.HasSuffix(file, ".zst") {
		zr, err := zstd.NewReader(f)
		if err != nil {
			t.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	dir := t.TempDir()
	tr := tar.NewReader(r)
	var names []string
	for {
		hdr, err := tr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("%s: %v", file, err)
		}
		names = append(names, hdr.Name)
		p := filepath.Join(dir, filepath.FromSlash(hdr.Name))
		switch hdr.Typeflag {
		case tar.TypeDir:
			if hdr.Mode != 0o700 {
				t.Errorf("%s: directory mode %o, want 700", hdr.Name, hdr.Mode)
			}
			if err := os.MkdirAll(p, 0o700); err != nil {
				t.Fatal(err)
			}
		case tar.TypeReg:
			data, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(p, data, 0o600); err != nil {
				t.Fatal(err)
			}
		default:
			t.Fatalf("%s: unexpected entry type %q", hdr.Name, hdr.Typeflag)
		}
	}
	if len(names) == 0 || names[len(names)-1] != archive.ManifestName {
		t.Errorf("%s: the last entry is not %s: %v", file, archive.ManifestName, names)
	}
	return dir
}

// eiCheckTree checks an exported root against the source node, file by
// file: the tree holds exactly the manifest's files; each path is the
// reference layout path of its header (ArtifactPath); each file, decoded by
// Debian's zstd (or read, without compression), is the header line
// (HeaderLine) and one line per stored event, equal to the source's ReadRaw
// text and ReadFrom events; the manifest's revision, count and SHA-256 agree.
func eiCheckTree(t *testing.T, zstdBin, root string, src map[string]eiStored) *archive.Manifest {
	t.Helper()
	m := eiReadManifest(t, root)
	if m.Format != archive.ManifestFormat || m.FormatVersion != archive.ManifestVersion || m.ClusterID == "" || m.AppliedIndexAtStart == 0 {
		t.Errorf("manifest head: %+v", m)
	}
	if !strings.Contains(m.NotExported, "leases") || !strings.Contains(m.NotExported, "plan-mode") {
		t.Errorf("manifest not_exported: %q", m.NotExported)
	}
	var files []string
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		if rel != archive.ManifestName {
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for _, s := range m.Sessions {
		listed = append(listed, s.Path)
	}
	slices.Sort(files)
	slices.Sort(listed)
	if !slices.Equal(files, listed) {
		t.Errorf("files %v, manifest %v", files, listed)
	}
	if len(m.Sessions) != len(src) || len(m.Failed) != 0 {
		t.Errorf("manifest: %d sessions, %d failed; the source lists %d", len(m.Sessions), len(m.Failed), len(src))
	}
	for _, ms := range m.Sessions {
		s, ok := src[ms.ID]
		if !ok {
			t.Errorf("manifest: session %q is not in the source", ms.ID)
			continue
		}
		h := eiHeader(s.header)
		wantPath, err := storage.ArtifactPath("", h)
		if err != nil {
			t.Fatal(err)
		}
		wantPath = filepath.ToSlash(wantPath)
		if m.Compression == archive.CompressionNone {
			wantPath = path.Join(path.Dir(wantPath), storage.RawArtifactName)
		}
		if ms.Path != wantPath {
			t.Errorf("%q: path %q, want %q", ms.ID, ms.Path, wantPath)
		}
		file := filepath.Join(root, filepath.FromSlash(ms.Path))
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		text := data
		if m.Compression == archive.CompressionZstd {
			text = ctZstdDecode(t, zstdBin, file)
			// The reference's zstd mode: the header line alone in frame
			// 1, every frame with its checksum, no frame over ~1 MiB.
			if _, err := storage.DecodeArtifact(data); err != nil {
				t.Errorf("%q: %v", ms.ID, err)
			}
			frames, err := ctZstdFrames(data)
			if err != nil {
				t.Fatalf("%q: %v", ms.ID, err)
			}
			for _, f := range frames {
				if !f.Checksum {
					t.Errorf("%q: frame at %d has no checksum", ms.ID, f.Start)
				}
			}
			if int64(len(text)) > archive.DefaultMaxFrameBytes && len(frames) < 3 {
				t.Errorf("%q: %d bytes of text in %d frames", ms.ID, len(text), len(frames))
			}
		}
		if string(text) != s.text {
			t.Errorf("%q: file text differs from ReadRaw:\n got %.200q\nwant %.200q", ms.ID, text, s.text)
		}
		lines := strings.Split(strings.TrimSuffix(string(text), "\n"), "\n")
		if lines[0] != string(sessionlog.HeaderLine(h)) {
			t.Errorf("%q: first line %q, want %q", ms.ID, lines[0], sessionlog.HeaderLine(h))
		}
		if !slices.Equal(lines[1:], s.events) {
			t.Errorf("%q: %d event lines, stored events %d (or different bytes)", ms.ID, len(lines)-1, len(s.events))
		}
		sum := sha256.Sum256(text)
		if ms.SHA256 != hex.EncodeToString(sum[:]) || ms.Events != int64(len(s.events)) || ms.Revision != s.revision ||
			ms.TextBytes != int64(len(text)) || ms.Bytes != int64(len(data)) {
			t.Errorf("%q: manifest entry %+v; want %d events, revision %s, %d text bytes, %d bytes", ms.ID, ms, len(s.events), s.revision, len(text), len(data))
		}
	}
	return m
}

// Acceptance 1: a node with varied sessions is exported to a directory
// (zstd and raw), to .tar and to .tar.zst; each export is exactly the
// reference layout (checked file by file with Debian's zstd), and each
// imports into a fresh node with identical ReadRaw text and event counts for
// every session.
func TestExportImport_RoundTripSingleNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five nodes")
	}
	zstdBin := ctZstdPath(t)
	src := startTestNode(t, "")
	eiFill(t, src, eiVaried("rt-"))
	src.WaitArtifacts()
	want := eiState(t, src)
	if len(want) != 10 {
		t.Fatalf("source lists %d sessions, want 10", len(want))
	}
	out := t.TempDir()
	for _, tc := range []struct{ name, out, compression string }{
		{"dir-zstd", filepath.Join(out, "dir-zstd"), "zstd"},
		{"dir-none", filepath.Join(out, "dir-none"), "none"},
		{"tar", filepath.Join(out, "export.tar"), "zstd"},
		{"tar-zst", filepath.Join(out, "export.tar.zst"), "none"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, stdout := eiExport(t, src, nil, "--out", tc.out, "--compression", tc.compression, "--parallel", "3")
			if res.Sessions != len(want) || !strings.Contains(stdout, "exported   10 sessions") {
				t.Fatalf("export: %d sessions\n%s", res.Sessions, stdout)
			}
			if res.Manifest.Sessions != nil {
				t.Errorf("the result holds %d manifest entries: memory would grow with the export", len(res.Manifest.Sessions))
			}
			root := tc.out
			if archive.OutputKind(tc.out) != archive.OutputDir {
				root = eiExtract(t, tc.out)
			}
			eiCheckTree(t, zstdBin, root, want)

			dst := startTestNode(t, "")
			// Without --keep-unreadable the session a read refuses is refused, alone.
			if sum, out, err := eiImport(t, dst.ctx(), dst, tc.out, nil, "--dry-run"); err == nil || eiCounts(sum) != "valid=9 refused=1" {
				t.Fatalf("dry run: %s, %v\n%s", eiCounts(sum), err, out)
			}
			sum := eiMustImport(t, dst, tc.out, "--keep-unreadable")
			if eiCounts(sum) != "imported=10" || sum.Appended != eiEventCount(want) {
				t.Fatalf("import: %s, %d events appended", eiCounts(sum), sum.Appended)
			}
			eiSameState(t, "imported", eiState(t, dst), want, false)
			// Again: everything is already there.
			if sum := eiMustImport(t, dst, tc.out, "--keep-unreadable"); eiCounts(sum) != "present=10" || sum.Appended != 0 {
				t.Fatalf("re-import: %s, %d appended", eiCounts(sum), sum.Appended)
			}
		})
	}
}

func eiEventCount(m map[string]eiStored) int {
	n := 0
	for _, s := range m {
		n += len(s.events)
	}
	return n
}

// The same round trip between two three-node clusters: filled through a
// follower, exported from a follower as .tar.zst, imported through a follower
// of a fresh cluster; every node of the target then holds the same sessions.
func TestExportImport_RoundTripThreeNodeClusters(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six nodes")
	}
	ctZstdPath(t)
	_, src := followerOf(t, startCluster(t, 3))
	eiFill(t, src.testNode, eiVaried("c3-"))
	want := eiState(t, src.testNode)
	file := filepath.Join(t.TempDir(), "cluster.tar.zst")
	eiExport(t, src.testNode, nil, "--out", file)

	dstNodes := startCluster(t, 3)
	_, dst := followerOf(t, dstNodes)
	if sum := eiMustImport(t, dst.testNode, file, "--keep-unreadable"); eiCounts(sum) != "imported=10" {
		t.Fatalf("import: %s", eiCounts(sum))
	}
	for _, nd := range dstNodes {
		eiSameState(t, "node "+nd.id, eiState(t, nd.testNode), want, false)
	}
}

// The HTTP downloads stream a session with Content-Length and ETag (the
// revision), and answer a matching If-None-Match with 304.
func TestExportHTTPDownloadHasContentLengthAndETag(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	n := startTestNode(t, "")
	eiFill(t, n, eiVaried("http-")[8:10]) // the escaped id and the large session
	n.WaitArtifacts()
	for _, id := range []string{"http-a/b ~c", "http-large"} {
		raw := ctReadRaw(t, n, id)
		for _, suffix := range []string{"session.jsonl", "session.jsonl.zstd"} {
			u := "http://" + n.srv.httpAddr + "/v1/sessions/" + url.PathEscape(id) + "/" + suffix
			resp, body := owGet(t, n, u)
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET %s: %d", u, resp.StatusCode)
			}
			if cl := resp.Header.Get("Content-Length"); cl != strconv.Itoa(len(body)) {
				t.Errorf("GET %s: Content-Length %q, body %d bytes", u, cl, len(body))
			}
			if et := resp.Header.Get("ETag"); et != `"`+raw.GetRevision()+`"` {
				t.Errorf("GET %s: ETag %q, want the revision %q", u, et, raw.GetRevision())
			}
			text := body
			if suffix == "session.jsonl.zstd" {
				d, err := storage.DecodeArtifact(body)
				if err != nil {
					t.Fatalf("GET %s: %v", u, err)
				}
				text = d.Text
			}
			if !bytes.Equal(text, raw.GetContent()) {
				t.Errorf("GET %s: the text differs from ReadRaw", u)
			}
			req, _ := http.NewRequest(http.MethodGet, u, nil)
			req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
			resp2, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp2.Body.Close()
			if resp2.StatusCode != http.StatusNotModified {
				t.Errorf("GET %s with If-None-Match: %d, want 304", u, resp2.StatusCode)
			}
		}
	}
}

// eiWrite writes a file, creating its directories.
func eiWrite(t *testing.T, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// eiLines joins lines, each ending in "\n".
func eiLines(lines ...string) string { return strings.Join(lines, "\n") + "\n" }

// eiZstdArtifact is the reference's zstd mode: the header frame, then one
// frame per batch.
func eiZstdArtifact(header string, batches ...[]string) []byte {
	out := storage.EncodeFrame(nil, []byte(header+"\n"))
	for _, b := range batches {
		out = storage.EncodeFrame(out, []byte(eiLines(b...)))
	}
	return out
}

// docs/contract.md#log-one-turn with its packed row (seqs 6–8 as text-chunks).
func eiSpec12_1(id string) []string {
	return []string{
		`{"type":"session","version":0,"id":"` + id + `","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1755600000100,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1755600000101,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":1755600000102,"data":{"content":[{"type":"text","text":"Say hello"}],"source":{"kind":"user"},"role":"user","id":"5b1e0c7a-0000-4000-8000-000000000001"},"surfaceOp":"append"}`,
		`{"type":"request/header","seq":3,"time":1755600000103,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}`,
		`{"type":"request/context","seq":4,"time":1755600000104,"data":{"provider":"deepseek","model":"deepseek-chat","contextWindow":131072}}`,
		`{"type":"assistant/chunk","seq":5,"time":1755600000400,"data":{"turn":1,"step":1,"chunk":{"type":"block-start","index":0,"blockType":"text"}}}`,
		`{"type":"text-chunks","seq0":6,"time0":1755600000401,"data":{"turn":1,"step":1,"index":0,"dt":[12,9],"texts":["Hel","lo","!"]}}`,
		`{"type":"assistant/chunk","seq":9,"time":1755600000423,"data":{"turn":1,"step":1,"chunk":{"type":"block-end","index":0,"block":{"type":"text","text":"Hello!"}}}}`,
		`{"type":"assistant/chunk","seq":10,"time":1755600000424,"data":{"turn":1,"step":1,"chunk":{"type":"finish","reason":{"kind":"stop"}}}}`,
		`{"type":"assistant/message","seq":11,"time":1755600000425,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"text","text":"Hello!"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"5b1e0c7a-0000-4000-8000-000000000002"}},"sourceEventSeqs":[5,6,7,8,9,10],"surfaceOp":"append"}`,
		`{"type":"step/end","seq":12,"time":1755600000426,"data":{"turn":1,"step":1}}`,
		`{"type":"turn/end","seq":13,"time":1755600000427,"data":{"turn":1,"reason":{"kind":"completed"}}}`,
	}
}

// docs/contract.md#log-crash before recovery: the last line is torn.
func eiSpec12_3(id string) ([]string, string) {
	return []string{
		`{"type":"session","version":0,"id":"` + id + `","createdAt":1755600000000,"cwd":"/home/u/proj","delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1755600001000,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1755600001001,"data":{"turn":1,"step":1}}`,
		`{"type":"user/message","seq":2,"time":1755600001002,"data":{"content":[{"type":"text","text":"Run the tests and show tsconfig.json"}],"source":{"kind":"user"},"role":"user","id":"0f2d7c8e-1111-4a1a-8a1a-000000000002"},"surfaceOp":"append"}`,
		`{"type":"request/header","seq":3,"time":1755600001003,"data":{"header":{"config":{"provider":"deepseek","model":"deepseek-chat"},"system":"You are a coding agent."},"reason":"initial"}}`,
		`{"type":"assistant/message","seq":4,"time":1755600001500,"data":{"turn":1,"step":1,"message":{"role":"assistant","content":[{"type":"tool-call","id":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"},{"type":"tool-call","id":"call_b","name":"read","arguments":"{\"path\":\"tsconfig.json\"}"}],"source":{"kind":"model","provider":"deepseek","model":"deepseek-chat"},"id":"0f2d7c8e-1111-4a1a-8a1a-000000000004"}},"surfaceOp":"append"}`,
		`{"type":"tool/call","seq":5,"time":1755600001501,"data":{"turn":1,"step":1,"callId":"call_a","name":"bash","arguments":"{\"cmd\":\"npm test\"}"}}`,
	}, `{"type":"tool/result","seq":6,"ti`
}

// eiCheckImported checks that every session of a root, as the reference
// loads it (storage.ReadRootSession), is in n: header line and events.
func eiCheckImported(t *testing.T, n *testNode, files ...string) {
	t.Helper()
	for _, f := range files {
		rs, err := storage.ReadRootSession(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		want := string(sessionlog.HeaderLine(rs.Header)) + "\n"
		for _, ev := range rs.Events {
			want += string(ev) + "\n"
		}
		if got := string(ctReadRaw(t, n, rs.Header.ID).GetContent()); got != want {
			t.Errorf("%s: imported text differs from what the reference loads:\n got %.300q\nwant %.300q", f, got, want)
		}
	}
}

// Acceptance 2: a reference root written by hand from docs/events.md#jsonl, in both
// encodings, with a packed chunk row, a torn final line and a torn final
// frame, imports as the reference would load it; so do the real recorded
// sessions placed into a root.
func TestImport_ReferenceRootsAndRecordedSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	n := startTestNode(t, "")

	// Raw mode (compression "none").
	raw := t.TempDir()
	proj := filepath.Join(raw, "--home-u-proj--")
	rawDemo := filepath.Join(proj, "demo-1", storage.RawArtifactName)
	eiWrite(t, rawDemo, []byte(eiLines(eiSpec12_1("demo-1")...)))
	crash, torn := eiSpec12_3("crash-1")
	rawCrash := filepath.Join(proj, "crash-1", storage.RawArtifactName)
	eiWrite(t, rawCrash, []byte(eiLines(crash...)+torn))
	noCwd := filepath.Join(raw, "_no-cwd", "no-cwd-1", storage.RawArtifactName)
	eiWrite(t, noCwd, []byte(eiLines(`{"type":"session","version":0,"id":"no-cwd-1","createdAt":5,"delegationDepth":0}`,
		`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"turn/end","seq":1,"time":2,"data":{"turn":1,"reason":{"kind":"completed"}}}`)))
	// Ignored by the reference's listing, hence by the import.
	eiWrite(t, filepath.Join(raw, "README.txt"), []byte("not a project"))
	eiWrite(t, filepath.Join(proj, "demo-1", "scratch.json"), []byte("{}"))

	// Zstandard mode.
	zr := t.TempDir()
	zproj := filepath.Join(zr, "--home-u-proj--")
	demo := eiSpec12_1("zdemo-1")
	zDemo := filepath.Join(zproj, "zdemo-1", storage.ArtifactName)
	eiWrite(t, zDemo, eiZstdArtifact(demo[0], demo[1:6], demo[6:]))
	// A torn final frame whose checksum is cut short: its records are recovered.
	zcrash, ztorn := eiSpec12_3("zcrash-1")
	zCrash := filepath.Join(zproj, "zcrash-1", storage.ArtifactName)
	data := eiZstdArtifact(zcrash[0], zcrash[1:4])
	last := storage.EncodeFrame(nil, []byte(eiLines(zcrash[4:]...)+ztorn))
	eiWrite(t, zCrash, append(data, last[:len(last)-2]...))
	// A torn final frame cut inside its header: nothing is recovered from it.
	zcut := filepath.Join(zproj, "zcut-1", storage.ArtifactName)
	cut, _ := eiSpec12_3("zcut-1")
	data = eiZstdArtifact(cut[0], cut[1:3])
	last = storage.EncodeFrame(nil, []byte(eiLines(cut[3:]...)))
	eiWrite(t, zcut, append(data, last[:5]...))

	for _, f := range []string{rawCrash, zCrash, zcut} {
		if rs, _ := storage.ReadRootSession(f); !rs.Torn {
			t.Fatalf("%s: the fixture has no torn tail", f)
		}
	}
	if rs, _ := storage.ReadRootSession(rawDemo); len(rs.Events) != 14 {
		t.Fatalf("one-turn example log: the reader gives %d events, want 14", len(rs.Events))
	}

	sum := eiMustImport(t, n, raw)
	if eiCounts(sum) != "imported=3" || sum.Torn != 1 || len(sum.TornSessions) != 1 || sum.TornSessions[0] != rawCrash {
		t.Fatalf("raw root: %s, torn %v", eiCounts(sum), sum.TornSessions)
	}
	sum = eiMustImport(t, n, zr)
	if eiCounts(sum) != "imported=3" || sum.Torn != 2 {
		t.Fatalf("zstd root: %s, torn %v", eiCounts(sum), sum.TornSessions)
	}
	eiCheckImported(t, n, rawDemo, rawCrash, noCwd, zDemo, zCrash, zcut)
	if got := len(ctReadFrom(t, n, "zcrash-1", 0).GetEvents()); got != 6 {
		t.Errorf("zcrash-1: %d events, want seqs 0…5 (the torn frame's complete records recovered)", got)
	}
	if got := len(ctReadFrom(t, n, "zcut-1", 0).GetEvents()); got != 2 {
		t.Errorf("zcut-1: %d events, want 2 (nothing recovered from a frame torn in its header)", got)
	}
	// The imported crash is repaired by Load exactly as docs/contract.md#log-crash says.
	if v := ctLoad(t, n, "crash-1"); len(v.GetEvents()) != 10 || !v.GetRepaired() {
		t.Errorf("Load(crash-1): %d events, repaired %v; want 10, true", len(v.GetEvents()), v.GetRepaired())
	}

	// The recorded sessions, placed into a root at their layout paths.
	dir := refdata.RecordedDir(t)
	rec := t.TempDir()
	var files []string
	wantCounts := map[string]int{}
	for _, name := range []string{"web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl", "cli-parallel-file-reads.session.jsonl"} {
		rs, err := storage.ReadRootSession(filepath.Join(dir, name))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		p, err := storage.ArtifactPath(rec, rs.Header)
		if err != nil {
			t.Fatal(err)
		}
		p = filepath.Join(filepath.Dir(p), storage.RawArtifactName)
		body, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		eiWrite(t, p, body)
		files = append(files, p)
		wantCounts[rs.Header.ID] = len(rs.Events)
	}
	sum = eiMustImport(t, n, rec)
	if eiCounts(sum) != "imported=3" || sum.Appended != 94+61+27 {
		t.Fatalf("recorded root: %s, %d events", eiCounts(sum), sum.Appended)
	}
	eiCheckImported(t, n, files...)
	for id, want := range wantCounts {
		if got := len(ctReadFrom(t, n, id, 0).GetEvents()); got != want {
			t.Errorf("%s: %d events, want %d", id, got, want)
		}
	}
}

// eiRoot writes a raw reference root of generated sessions: count sessions
// of events events each.
func eiRoot(t *testing.T, prefix string, count, events int) string {
	t.Helper()
	root := t.TempDir()
	for i := range count {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		lines := []string{`{"type":"session","version":0,"id":"` + id + `","createdAt":` + strconv.Itoa(1000+i) + `,"cwd":"/w/p` + strconv.Itoa(i%3) + `","delegationDepth":0}`}
		for s := range events {
			lines = append(lines, clEvent(int64(s), fmt.Sprintf("%s/%d", id, s)))
		}
		eiWrite(t, filepath.Join(root, "--w-p"+strconv.Itoa(i%3)+"--", id, storage.RawArtifactName), []byte(eiLines(lines...)))
	}
	return root
}

// Acceptance 4: an import cancelled midway (in the middle of a session) and
// run again ends in exactly the state of a clean import: same sessions, same
// text, nothing duplicated; a third run finds everything present.
func TestImport_InterruptedAndRerunEqualsCleanImport(t *testing.T) {
	if testing.Short() {
		t.Skip("starts two nodes")
	}
	root := eiRoot(t, "int", 6, 30)
	a := startTestNode(t, "")
	b := startTestNode(t, "")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var batches atomic.Int32
	sum, out, err := eiImport(t, ctx, a, root, func(c *importConfig) {
		c.opts.Appended = func(id string, next int64, n int, bytes int64) {
			if batches.Add(1) == 11 { // int-00 took 8 batches; int-03 has 12 of its 30 events
				cancel()
			}
		}
	}, "--batch-events", "4", "--parallel", "1")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted import: err %v\n%s", err, out)
	}
	if !strings.Contains(err.Error(), "run the same import again") {
		t.Errorf("interrupted import: %v", err)
	}
	// The walk is lexical: --w-p0--/int-00 (8 batches), then --w-p0--/int-03.
	partial := eiState(t, a)
	if len(partial) != 2 || len(partial["int-00"].events) != 30 || len(partial["int-03"].events) != 12 {
		t.Fatalf("after the interruption: %d sessions, int-00 has %d events, int-03 %d; want 2 sessions, 30 and 12 events (%s)",
			len(partial), len(partial["int-00"].events), len(partial["int-03"].events), eiCounts(sum))
	}

	sum = eiMustImport(t, a, root, "--batch-events", "7", "--parallel", "3")
	if eiCounts(sum) != "imported=4 completed=1 present=1" || sum.Appended != 6*30-30-12 {
		t.Fatalf("re-run: %s, %d appended", eiCounts(sum), sum.Appended)
	}
	clean := eiMustImport(t, b, root)
	if eiCounts(clean) != "imported=6" {
		t.Fatalf("clean import: %s", eiCounts(clean))
	}
	eiSameState(t, "re-run vs clean", eiState(t, a), eiState(t, b), true)
	if sum := eiMustImport(t, a, root); eiCounts(sum) != "present=6" || sum.Appended != 0 {
		t.Fatalf("third run: %s, %d appended", eiCounts(sum), sum.Appended)
	}

	// The same through an archive of ours: export b, import into a fresh
	// node, interrupt after the first session's Create and first batch, and
	// complete it.
	file := filepath.Join(t.TempDir(), "int.tar")
	eiExport(t, b, nil, "--out", file)
	c := startTestNode(t, "")
	ctx2, cancel2 := context.WithCancel(context.Background())
	defer cancel2()
	_, out, err = eiImport(t, ctx2, c, file, func(c *importConfig) {
		c.opts.Appended = func(string, int64, int, int64) { cancel2() }
	}, "--batch-events", "10", "--parallel", "2")
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("interrupted archive import: %v\n%s", err, out)
	}
	if sum := eiMustImport(t, c, file); sum.Failures() != 0 || sum.Counts[archive.StatusCompleted] == 0 {
		t.Fatalf("archive re-run: %s", eiCounts(sum))
	}
	eiSameState(t, "archive re-run vs clean", eiState(t, c), eiState(t, b), true)
}

// Conflicts: a session that exists with other events, another header, a
// longer log, or a registration with another header is reported and left
// untouched; a partially present one is completed; --on-conflict fail stops
// with exit status 1. An unimportable session (an event the API refuses, a
// log the reference cannot load) is reported and nothing is written for it.
func TestImport_ConflictsAndUnimportableSessions(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	n := startTestNode(t, "")
	one := ctOneTurnLog()
	root := t.TempDir()
	put := func(root, id, cwd string, events ...string) string {
		h := `{"type":"session","version":0,"id":"` + id + `","createdAt":1000,"cwd":"` + cwd + `","delegationDepth":0}`
		p := filepath.Join(root, "--home-u-proj--", id, storage.RawArtifactName)
		eiWrite(t, p, []byte(eiLines(append([]string{h}, events...)...)))
		return p
	}
	for _, id := range []string{"cf-diff", "cf-header", "cf-longer", "cf-registered", "cf-partial", "cf-ok"} {
		put(root, id, "/home/u/proj", one...)
	}
	// The store's side.
	ctCreate(t, n, ctMeta("cf-diff", "/home/u/proj"))
	other := slices.Clone(one)
	other[1] = strings.Replace(other[1], `"hi"`, `"hello"`, 1)
	ctAppend(t, n, "cf-diff", other...)
	h := ctMeta("cf-header", "/home/u/proj")
	h.CreatedAt = 999
	ctCreate(t, n, h)
	ctAppend(t, n, "cf-header", one...)
	ctCreate(t, n, ctMeta("cf-longer", "/home/u/proj"))
	ctAppend(t, n, "cf-longer", append(slices.Clone(one), ctEv("turn/start", 6, 7, `{"turn":2}`))...)
	ctCreate(t, n, ctMeta("cf-registered", "/elsewhere"))
	ctCreate(t, n, ctMeta("cf-partial", "/home/u/proj"))
	ctAppend(t, n, "cf-partial", one[:2]...)
	before := eiState(t, n)

	sum, out, err := eiImport(t, n.ctx(), n, root, nil)
	if err != nil {
		t.Fatalf("import with skipped conflicts must succeed: %v\n%s", err, out)
	}
	if eiCounts(sum) != "imported=1 completed=1 conflict=4" {
		t.Fatalf("import: %s\n%s", eiCounts(sum), out)
	}
	reasons := map[string]string{}
	for _, p := range sum.Problems {
		reasons[p.ID] = p.Reason
	}
	for id, want := range map[string]string{
		"cf-diff":       "the stored event at seq 1 differs",
		"cf-header":     "different header",
		"cf-longer":     "longer than the source's (7 events, the source has 6)",
		"cf-registered": "registered (never appended to) with a different header",
	} {
		if !strings.Contains(reasons[id], want) {
			t.Errorf("%s: reason %q, want it to say %q", id, reasons[id], want)
		}
		if !strings.Contains(out, id) {
			t.Errorf("the output does not name %s:\n%s", id, out)
		}
	}
	after := eiState(t, n)
	for _, id := range []string{"cf-diff", "cf-header", "cf-longer"} {
		if after[id].revision != before[id].revision || after[id].text != before[id].text {
			t.Errorf("%s was touched", id)
		}
	}
	if _, listed := after["cf-registered"]; listed {
		t.Error("cf-registered was materialised")
	}
	if got := after["cf-partial"].events; !slices.Equal(got, one) {
		t.Errorf("cf-partial: %d events, want the source's 6", len(got))
	}

	// --on-conflict fail: the first conflict stops the import, status 1.
	var stdout, stderr bytes.Buffer
	code := run(n.ctx(), []string{"import", "--addr", n.srv.grpcAddr, "--on-conflict", "fail", "--parallel", "1", root}, &stdout, &stderr)
	if code != 1 || !strings.Contains(stderr.String(), "conflict") || !strings.Contains(stdout.String(), "stopped at the first conflict") {
		t.Fatalf("--on-conflict fail: exit %d\nstdout:\n%s\nstderr:\n%s", code, stdout.String(), stderr.String())
	}
	if again := eiState(t, n); again["cf-diff"].revision != before["cf-diff"].revision {
		t.Error("cf-diff was touched by the failing run")
	}

	// Unimportable sessions: nothing written for them.
	bad := t.TempDir()
	put(bad, "bad-event", "/home/u/proj", one[0], `{"type":"step/start","seq":1,"time":3,"data":{"turn":1,"step":1},"extra":true}`)
	put(bad, "bad-corrupt", "/home/u/proj", one[0], `{not json`, one[5])
	put(bad, "bad-legacy", "/home/u/proj", one[0], `{"type":"mode/set","seq":1,"time":3,"data":{}}`)
	put(bad, "good", "/home/u/proj", one...)
	eiWrite(t, filepath.Join(bad, "--home-u-proj--", "flat.jsonl"), []byte("{}\n"))
	code = run(n.ctx(), []string{"import", "--addr", n.srv.grpcAddr, bad}, &stdout, &stderr)
	if code != 1 {
		t.Fatalf("import of unimportable sessions: exit %d, want 1\n%s", code, stderr.String())
	}
	sum, out, err = eiImport(t, n.ctx(), n, bad, nil)
	if err == nil || eiCounts(sum) != "present=1 unreadable=2 invalid=2" {
		t.Fatalf("unimportable: %v, %s\n%s", err, eiCounts(sum), out)
	}
	for _, want := range []string{`unknown top-level key "extra"`, "unsupported legacy mode/set", "unparsable committed event at line 2", "unsupported flat-file layout"} {
		if !strings.Contains(out, want) {
			t.Errorf("the report does not say %q:\n%s", want, out)
		}
	}
	for _, id := range []string{"bad-event", "bad-corrupt", "bad-legacy"} {
		if _, err := n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id}); !errors.Is(err, sessionstore.ErrNotFound) {
			t.Errorf("%s: ReadRaw: %v, want NOT_FOUND", id, err)
		}
		// Not even registered: a Create with any header succeeds.
		ctCreate(t, n, ctMeta(id, "/somewhere/else"))
	}

	// A dry run reads and validates, writes nothing, needs no node.
	sum, out, err = eiImport(t, n.ctx(), n, root, nil, "--dry-run")
	if err != nil || eiCounts(sum) != "valid=6" {
		t.Fatalf("dry run: %v %s\n%s", err, eiCounts(sum), out)
	}
}

// Sessions registered after the export began are left out, and the manifest
// records the applied index at the start; a session appended to after the
// listing is exported consistently at the revision its read returned.
func TestExport_LeavesOutSessionsMaterialisedAfterTheStart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	n := startTestNode(t, "")
	one := ctOneTurnLog()
	for _, id := range []string{"early-1", "early-2"} {
		ctCreate(t, n, ctMeta(id, "/home/u/proj"))
		ctAppend(t, n, id, one...)
	}
	lastBefore := ctRevision(t, n, "early-2")
	out := filepath.Join(t.TempDir(), "export")
	var lateRev, grownRev string
	res, stdout := eiExport(t, n, func(c *exportConfig) {
		c.opts.AfterList = func() {
			ctCreate(t, n, ctMeta("late-1", "/home/u/proj"))
			ctAppend(t, n, "late-1", one...)
			grownRev = ctAppend(t, n, "early-1", ctEv("turn/start", 6, 7, `{"turn":2}`)).GetRevision()
			lateRev = ctRevision(t, n, "late-1")
		}
	}, "--out", out)
	m := eiReadManifest(t, out)
	var ids []string
	for _, s := range m.Sessions {
		ids = append(ids, s.ID)
		if s.ID == "early-1" && (s.Revision != grownRev || s.Events != 7) {
			t.Errorf("early-1: revision %s with %d events, want %s with 7 (read after the append)", s.Revision, s.Events, grownRev)
		}
	}
	if !slices.Equal(ids, []string{"early-1", "early-2"}) {
		t.Fatalf("exported %v, want the two early sessions\n%s", ids, stdout)
	}
	idx := func(rev string, field int) uint64 {
		parts := strings.Split(rev, ":")
		v, err := strconv.ParseUint(parts[len(parts)-3+field], 10, 64)
		if err != nil {
			t.Fatalf("revision %q: %v", rev, err)
		}
		return v
	}
	if start := m.AppliedIndexAtStart; start < idx(lastBefore, 2) || start >= idx(lateRev, 1) {
		t.Errorf("applied index at start %d: want ≥ %d (the last write before) and < %d (late-1's registration)",
			start, idx(lastBefore, 2), idx(lateRev, 1))
	}
	if res.Manifest.AppliedIndexAtStart != m.AppliedIndexAtStart {
		t.Error("the result and the written manifest disagree")
	}

	// Filters: --session (with a missing id: exit status 1), --cwd, --since.
	var so, se bytes.Buffer
	code := run(n.ctx(), []string{"export", "--addr", n.srv.grpcAddr, "--out", filepath.Join(t.TempDir(), "x.tar"),
		"--session", "early-2", "--session", "nope"}, &so, &se)
	if code != 1 || !strings.Contains(so.String(), `MISSING "nope"`) || !strings.Contains(so.String(), "exported   1 sessions") {
		t.Errorf("--session with a missing id: exit %d\n%s\n%s", code, so.String(), se.String())
	}
	ctCreate(t, n, &sessionpb.SessionHeader{Id: "recent", CreatedAt: time.Now().UnixMilli(), Cwd: ctStr("/other")})
	ctAppend(t, n, "recent", one...)
	since := filepath.Join(t.TempDir(), "since")
	res, _ = eiExport(t, n, nil, "--out", since, "--since", "1h")
	if m := eiReadManifest(t, since); res.Sessions != 1 || len(m.Sessions) != 1 || m.Sessions[0].ID != "recent" || m.Filters.Since == "" {
		t.Errorf("--since 1h: %d sessions, %+v", res.Sessions, m.Sessions)
	}
	cwd := filepath.Join(t.TempDir(), "cwd")
	res, _ = eiExport(t, n, nil, "--out", cwd, "--cwd", "/home/")
	if m := eiReadManifest(t, cwd); res.Sessions != 3 || len(m.Sessions) != 3 || m.Filters.CwdPrefix != "/home/" {
		t.Errorf("--cwd /home/: %d sessions, %d in the manifest", res.Sessions, len(m.Sessions))
	}
	// No spill file is left beside the outputs.
	for _, dir := range []string{filepath.Dir(since), filepath.Dir(cwd), filepath.Dir(out)} {
		if left, _ := filepath.Glob(filepath.Join(dir, ".sessionstore-export-*")); len(left) > 0 {
			t.Errorf("left behind: %v", left)
		}
	}
}

// Usage errors exit with status 2; --help with 0.
func TestExportImport_Usage(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"export"}, 2, "--out is required"},
		{[]string{"export", "--out", "x", "--compression", "lz4"}, 2, "--compression must be zstd or none"},
		{[]string{"export", "--out", "x", "--since", "yesterday"}, 2, "--since"},
		{[]string{"export", "--help"}, 0, "manifest.json"},
		{[]string{"import"}, 2, "want exactly one SOURCE"},
		{[]string{"import", "a", "b"}, 2, "want exactly one SOURCE"},
		{[]string{"import", "--on-conflict", "merge", "a"}, 2, "--on-conflict must be skip or fail"},
		{[]string{"import", "--help"}, 0, "Usage: sessionstore import"},
		{[]string{"import", "--dry-run", "/nonexistent/root"}, 1, "no such file"},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		if code != tc.code || !strings.Contains(stdout.String()+stderr.String(), tc.want) {
			t.Errorf("%v: exit %d, want %d with %q\n%s%s", tc.args, code, tc.code, tc.want, stdout.String(), stderr.String())
		}
	}
}
