package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/hashicorp/raft"
	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// artifactNode is the part of a node's data directory the artifact writer
// uses: state.db, the node-local raft.db and artifacts/, as cluster lays them out.
type artifactNode struct {
	dir   string
	db    *storage.StateDB
	local *storage.RaftStore
	fsm   *fsm.FSM
	arts  *Writer
	stop  context.CancelFunc
	done  chan struct{}
}

func openArtifactNode(t *testing.T, dir string) *artifactNode {
	t.Helper()
	return openArtifactNodeMode(t, dir, writerRuns)
}

// How openArtifactNodeMode starts the writer.
const (
	writerRuns   = iota
	writerHeld   // not run: what is applied waits in memory and is lost at close (the watermarks lag behind the state)
	writerNoArts // Off, run
)

func openArtifactNodeMode(t *testing.T, dir string, mode int) *artifactNode {
	t.Helper()
	n := &artifactNode{dir: dir, done: make(chan struct{})}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	if n.db, err = storage.OpenState(filepath.Join(dir, "state.db"), storage.StateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "raft"), 0o700); err != nil {
		t.Fatal(err)
	}
	if n.local, err = storage.OpenRaftStore(filepath.Join(dir, "raft", "raft.db")); err != nil {
		t.Fatal(err)
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	if mode == writerNoArts {
		n.arts = Off(filepath.Join(dir, "artifacts"), n.local, logger, nil)
	} else {
		n.arts = New(filepath.Join(dir, "artifacts"), n.db, n.local, logger, nil)
	}
	if n.fsm, err = fsm.New(n.db, logger, nil, n.arts.Observe); err != nil {
		t.Fatal(err)
	}
	n.fsm.RepairFrom(n.arts) // as cluster wires it
	ctx, cancel := context.WithCancel(context.Background())
	n.stop = cancel
	if mode != writerHeld {
		go func() { defer close(n.done); n.arts.Run(ctx) }()
	} else {
		close(n.done)
	}
	t.Cleanup(n.close)
	return n
}

func (n *artifactNode) idle(t *testing.T) {
	t.Helper()
	if err := n.arts.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := n.arts.Healthy(); err != nil {
		t.Fatalf("artifact writer: %v", err)
	}
}

// close stops the writer (which persists its watermarks) and closes the files.
func (n *artifactNode) close() {
	if n.stop == nil {
		return
	}
	n.stop()
	<-n.done
	n.stop = nil
	n.local.Close()
	n.db.Close()
}

// A node started on a copy of another node's data directory (cp -a A B, B's
// state.db deleted) removes the artifacts of sessions its state does not hold:
// its own copies, never A's files. Watermarks written by 2f2e872 held A's
// absolute paths; they are reinterpreted under B's artifact directory.
func TestArtifactsOfACopiedDataDirStayInside(t *testing.T) {
	for _, tc := range []struct {
		name   string
		legacy bool // rewrite B's watermarks as 2f2e872 stored them
	}{
		{"relative watermarks", false},
		{"absolute watermarks of 2f2e872", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			base := t.TempDir()
			dirA, dirB := filepath.Join(base, "A"), filepath.Join(base, "B")
			a := openArtifactNode(t, dirA)
			a.fsm.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
				entry(t, 2, 100, createCmd("s")),
				entry(t, 3, 100, appendCmd("s", 0, openTurn...)),
			})
			a.idle(t)
			w, ok := a.arts.Current("s", 3)
			path, size := w.Path, w.Bytes
			if !ok || size == 0 {
				t.Fatalf("artifact of s not current: %+v %v", w, ok)
			}
			a.close()
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			if out, err := exec.Command("cp", "-a", dirA, dirB).CombinedOutput(); err != nil {
				t.Fatalf("cp -a: %v: %s", err, out)
			}
			if err := os.Remove(filepath.Join(dirB, "state.db")); err != nil {
				t.Fatal(err)
			}
			if tc.legacy {
				writeLegacyWatermark(t, filepath.Join(dirB, "raft", "raft.db"), "s", path, size)
			}
			copyB, err := filepath.Rel(dirA, path)
			if err != nil {
				t.Fatal(err)
			}
			copyB = filepath.Join(dirB, copyB)
			if _, err := os.Stat(copyB); err != nil {
				t.Fatalf("cp -a did not copy the artifact: %v", err)
			}

			b := openArtifactNode(t, dirB)
			b.idle(t)
			b.close()

			if got, err := os.ReadFile(path); err != nil || !bytes.Equal(got, want) {
				t.Fatalf("A's artifact after B started: %d bytes, %v; want %d bytes untouched", len(got), err, len(want))
			}
			if _, err := os.Stat(copyB); !os.IsNotExist(err) {
				t.Errorf("B's copy of the artifact of a session B does not hold: stat = %v, want removed", err)
			}
		})
	}
}

// writeLegacyWatermark stores a watermark as 2f2e872 did: bucket
// artifact_watermarks, an absolute path after 24 bytes of numbers.
func writeLegacyWatermark(t *testing.T, raftDB, id, path string, size int64) {
	t.Helper()
	db, err := bbolt.Open(raftDB, 0o600, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bbolt.Tx) error {
		for _, name := range []string{"artifact_marks", "artifact_watermarks"} {
			if tx.Bucket([]byte(name)) != nil {
				if err := tx.DeleteBucket([]byte(name)); err != nil {
					return err
				}
			}
		}
		b, err := tx.CreateBucket([]byte("artifact_watermarks"))
		if err != nil {
			return err
		}
		v := make([]byte, 24)
		v[7], v[15], v[23] = 3, byte(size), 1 // LastIndex 3, Bytes, Frames 1
		v[14] = byte(size >> 8)
		return b.Put([]byte(id), append(v, path...))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Damage to an artifact is caught before it is served, counted, and the
// artifact is rewritten from the state database: a same-size flip while the
// node is stopped (the start-up size check cannot see it) and a truncation
// while it runs.
func TestArtifactDamageIsCaughtAndRebuilt(t *testing.T) {
	for _, tc := range []struct {
		name    string
		restart bool // damage while stopped
		damage  func(path string, data []byte) error
	}{
		{"byte flipped while stopped", true, func(path string, data []byte) error {
			bad := bytes.Clone(data)
			bad[len(bad)/2] ^= 0x20
			return os.WriteFile(path, bad, 0o600)
		}},
		{"truncated while running", false, func(path string, data []byte) error {
			return os.Truncate(path, int64(len(data)-3))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			n := openArtifactNode(t, dir)
			n.fsm.ApplyBatch([]*raft.Log{
				entry(t, 1, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}),
				entry(t, 2, 100, createCmd("s")),
				entry(t, 3, 100, appendCmd("s", 0, openTurn...)),
			})
			n.idle(t)
			w, ok := n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current")
			}
			want, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			if err := n.arts.Verify("s", w); err != nil {
				t.Fatalf("Verify of an intact artifact: %v", err)
			}
			if tc.restart {
				n.close()
			}
			if err := tc.damage(w.Path, want); err != nil {
				t.Fatal(err)
			}
			if tc.restart {
				n = openArtifactNode(t, dir)
				n.idle(t)
			}
			w, ok = n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current after the damage")
			}
			err = n.arts.Verify("s", w)
			if !errors.Is(err, sessionstore.ErrCorruption) {
				t.Fatalf("Verify of the damaged artifact = %v, want CORRUPTION", err)
			}
			if got := counterValue(t, n.arts.metrics.ArtifactCorrupt); got != 1 {
				t.Errorf("sessionstore_artifact_verify_failures_total = %v, want 1", got)
			}
			n.idle(t)
			w, ok = n.arts.Current("s", 3)
			if !ok {
				t.Fatal("artifact of s not current after the rebuild")
			}
			if err := n.arts.Verify("s", w); err != nil {
				t.Fatalf("Verify after the rebuild: %v", err)
			}
			if got, err := os.ReadFile(w.Path); err != nil || !bytes.Equal(got, want) {
				t.Errorf("rebuilt artifact: %d bytes, %v; want the %d bytes first written", len(got), err, len(want))
			}
		})
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// artifactFiles reads every artifact under a node's artifact directory, by
// path relative to it.
func artifactFiles(t *testing.T, n *artifactNode) map[string][]byte {
	t.Helper()
	root := n.arts.Root()
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(root, path)
		if err != nil {
			return err
		}
		out[rel], err = os.ReadFile(path)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// artifactText is the text of a whole artifact (a torn tail fails the test).
func artifactText(t *testing.T, name string, data []byte) []byte {
	t.Helper()
	text, err := storage.ArtifactText(data)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return text
}

// artifactHistory is two batches over enough sessions that a rebuild spreads
// over several read transactions and workers: every session gets one to
// three frames in the first, some get more in the second; one is deleted
// and created again.
func artifactHistory(t *testing.T, layout int) (first, second []*raft.Log) {
	t.Helper()
	const sessions = 3*syncBatch + 7
	idx := uint64(1)
	first = append(first, entry(t, idx, 100, &fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}}))
	if layout == 2 {
		idx++
		first = append(first, entry(t, idx, 100, convertCmd(2)))
	}
	next := map[string]int64{}
	add := func(logs []*raft.Log, cmds ...*fsmpb.Command) []*raft.Log {
		idx++
		return append(logs, entry(t, idx, 100, cmds...))
	}
	// appendN appends k events to session id.
	appendN := func(id string, k int) *fsmpb.Command {
		first := next[id]
		var evs []string
		for ; k > 0; k-- {
			evs = append(evs, fmt.Sprintf(`{"type":"x/e","seq":%d,"time":1,"data":"%s %d"}`, next[id], id, next[id]))
			next[id]++
		}
		return appendCmd(id, first, evs...)
	}
	for s := 0; s < sessions; s++ {
		id := fmt.Sprintf("s%03d", s)
		first = add(first, createCmd(id))
		for f := 0; f <= s%3; f++ {
			first = add(first, appendN(id, 2))
		}
	}
	for s := 0; s < sessions; s += 2 {
		id := fmt.Sprintf("s%03d", s)
		second = add(second, appendN(id, 1))
	}
	second = add(second, deleteCmd("s001"))
	delete(next, "s001")
	second = add(second, createCmd("s001"), appendN("s001", 1))
	return first, second
}

// Artifacts rebuilt from the state database (whole, or from a watermark
// that lags), in either state layout, hold the text of those written as the
// commands were applied; a whole rebuild is a function of that text alone
// (the header frame, then the lines in frames of up to MaxFramePlain), so
// every node rebuilds the same bytes.
func TestArtifactRebuildHoldsTheSameText(t *testing.T) {
	for _, layout := range []int{1, 2} {
		t.Run(fmt.Sprintf("layout %d", layout), func(t *testing.T) { testArtifactRebuild(t, layout) })
	}
}

func testArtifactRebuild(t *testing.T, layout int) {
	first, second := artifactHistory(t, layout)
	base := t.TempDir()

	ref := openArtifactNode(t, filepath.Join(base, "ref"))
	ref.fsm.ApplyBatch(first)
	ref.fsm.ApplyBatch(second)
	ref.idle(t)
	_ = ref.db.View(func(tx *storage.Tx) error {
		if got := tx.Layout(); got != layout {
			t.Fatalf("state layout %d, want %d", got, layout)
		}
		return nil
	})
	want := artifactFiles(t, ref)
	ref.close()
	if len(want) != 3*syncBatch+7 {
		t.Fatalf("%d artifacts written, want one per session", len(want))
	}

	t.Run("whole, into an empty directory", func(t *testing.T) {
		if err := os.RemoveAll(filepath.Join(base, "ref", "artifacts")); err != nil {
			t.Fatal(err)
		}
		n := openArtifactNode(t, filepath.Join(base, "ref"))
		n.idle(t)
		got := artifactFiles(t, n)
		compareArtifacts(t, got, want)
		for p, data := range got {
			text := artifactText(t, p, data)
			h := bytes.IndexByte(text, '\n') + 1
			if enc := storage.EncodeLines(storage.EncodeFrame(nil, text[:h]), text[h:], storage.MaxFramePlain); !bytes.Equal(data, enc) {
				t.Errorf("%s: rebuilt whole as %d bytes, want its text's encoding, %d bytes", p, len(data), len(enc))
			}
		}
	})
	t.Run("appended to artifacts that lag", func(t *testing.T) {
		dir := filepath.Join(base, "lag")
		n := openArtifactNode(t, dir)
		n.fsm.ApplyBatch(first)
		n.idle(t)
		n.close()
		n = openArtifactNodeMode(t, dir, writerHeld)
		n.fsm.ApplyBatch(second)
		n.close()
		n = openArtifactNode(t, dir)
		n.idle(t)
		compareArtifacts(t, artifactFiles(t, n), want)
	})
}

// compareArtifacts checks that got holds the artifacts of want, each
// decoding (whole, no torn tail) to the same text.
func compareArtifacts(t *testing.T, got, want map[string][]byte) {
	t.Helper()
	for p, w := range want {
		g, ok := got[p]
		if !ok {
			t.Errorf("%s: missing, want the artifact written on apply", p)
			continue
		}
		if gt, wt := artifactText(t, p, g), artifactText(t, p, w); !bytes.Equal(gt, wt) {
			t.Errorf("%s: text %q, want %q as written on apply", p, gt, wt)
		}
	}
	for p := range got {
		if _, ok := want[p]; !ok {
			t.Errorf("%s: not written on apply", p)
		}
	}
}

// With artifacts off, a node removes the artifacts and watermarks an earlier
// run left, keeps nothing of what it applies, and serves none (so reads
// render from the state database); turned on again, it rebuilds every
// artifact with the text of those written on apply.
func TestArtifactsOffKeepsNone(t *testing.T) {
	first, second := artifactHistory(t, 2)
	base := t.TempDir()
	ref := openArtifactNode(t, filepath.Join(base, "ref"))
	ref.fsm.ApplyBatch(first)
	ref.fsm.ApplyBatch(second)
	ref.idle(t)
	want := artifactFiles(t, ref)
	ref.close()

	dir := filepath.Join(base, "n")
	n := openArtifactNode(t, dir)
	n.fsm.ApplyBatch(first)
	n.idle(t)
	if len(artifactFiles(t, n)) == 0 {
		t.Fatal("no artifacts written with artifacts on")
	}
	n.close()

	n = openArtifactNodeMode(t, dir, writerNoArts)
	n.fsm.ApplyBatch(second)
	<-n.done // Run returns once it has removed what the earlier run left
	if err := n.arts.Healthy(); err != nil {
		t.Fatalf("Healthy = %v", err)
	}
	if _, err := os.Stat(n.arts.Root()); !os.IsNotExist(err) {
		t.Errorf("artifact directory after a start with artifacts off: stat = %v, want removed", err)
	}
	if marks, err := n.local.Watermarks(n.arts.Root()); err != nil || len(marks) != 0 {
		t.Errorf("watermarks after a start with artifacts off: %d, %v; want none", len(marks), err)
	}
	n.arts.in.mu.Lock()
	kept := len(n.arts.in.dirty) + len(n.arts.in.pending)
	n.arts.in.mu.Unlock()
	if kept != 0 {
		t.Errorf("the writer kept %d sessions of what was applied, want none", kept)
	}
	var last uint64
	_ = n.db.View(func(tx *storage.Tx) error {
		rec, err := fsm.ReadRecord(tx, "s000")
		if err != nil || rec == nil {
			t.Fatalf("record of s000: %v, %v", rec, err)
		}
		last = rec.LastChangeIndex
		if _, err := n.arts.RepairEvents(tx, "s000", rec.Incarnation, rec.NextSeq); !errors.Is(err, errNoArtifact) {
			t.Errorf("RepairEvents = %v, want %v", err, errNoArtifact)
		}
		return nil
	})
	if w, ok := n.arts.Current("s000", last); ok {
		t.Errorf("Current = %+v with artifacts off, want none", w)
	}
	if err := n.arts.WaitIdle(context.Background()); err != nil {
		t.Fatal(err)
	}
	n.close()

	n = openArtifactNode(t, dir)
	n.idle(t)
	compareArtifacts(t, artifactFiles(t, n), want)
}

// appendLines, which reads a session's events in one pass, holds for every
// range of frames exactly the lines EncodeFrames encodes frame by frame, in
// both state layouts (layout 2: frames in index blocks and a linked tail),
// and in layout 1 also when the stored frame ends are not increasing (not
// written by this build).
func TestAppendLinesMatchesEncodeFrames(t *testing.T) {
	dec, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatal(err)
	}
	defer dec.Close()
	const frames = 70 // two index blocks of layout 2 and a tail
	for _, layout := range []int{1, 2} {
		t.Run(fmt.Sprintf("layout %d", layout), func(t *testing.T) {
			f, db := newFSM(t, uint32(layout))
			logs := []*raft.Log{entry(t, 2, 100, createCmd("s"))}
			seq := int64(0)
			for n := 0; n < frames; n++ {
				var evs []string
				for k := 0; k < 1+n%3; k++ {
					evs = append(evs, fmt.Sprintf(`{"type":"x/e","seq":%d,"time":3,"data":%d}`, seq+int64(k), n))
				}
				logs = append(logs, entry(t, uint64(3+n), 100, appendCmd("s", seq, evs...)))
				seq += int64(len(evs))
			}
			f.ApplyBatch(logs)
			check := func(t *testing.T) {
				t.Helper()
				err := db.View(func(tx *storage.Tx) error {
					if got := tx.Layout(); got != layout {
						t.Fatalf("state layout %d, want %d", got, layout)
					}
					rec, err := fsm.ReadRecord(tx, "s")
					if err != nil || rec == nil || rec.Frames != frames {
						t.Fatalf("record: %+v, %v", rec, err)
					}
					for from := uint64(1); from <= rec.Frames+1; from++ {
						for to := from - 1; to <= rec.Frames; to++ {
							frames, err := EncodeFrames(tx, "s", rec.Incarnation, from, to)
							if err != nil {
								return err
							}
							want := []byte("x")
							for _, f := range frames {
								if want, err = dec.DecodeAll(f, want); err != nil {
									t.Fatal(err)
								}
							}
							got, err := appendLines([]byte("x"), tx, "s", rec.Incarnation, from, to)
							if err != nil || !bytes.Equal(got, want) {
								t.Fatalf("frames %d..%d: %q, %v; want %q", from, to, got, err, want)
							}
						}
					}
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
			}
			t.Run("as written", check)
			if layout == 1 {
				if err := db.Update(func(tx *storage.Tx) error { return tx.PutFrame("s", 2, 1) }); err != nil {
					t.Fatal(err)
				}
				t.Run("frame ends not increasing", check)
			}
		})
	}
}

// decideSync: what a watermark needs to catch up with its session's record.
func TestDecideSync(t *testing.T) {
	const path = "/a/x.jsonl.zstd"
	cur := storage.Watermark{LastIndex: 9, Frames: 3, Bytes: 100, Path: path, HasSum: true}
	rec := func(inc, last, frames uint64) *fsm.Session {
		return &fsm.Session{Record: &fsmpb.SessionRecord{Materialized: true, Incarnation: inc, LastChangeIndex: last, Frames: frames}}
	}
	noSum := cur
	noSum.HasSum = false
	for _, c := range []struct {
		name  string
		w     storage.Watermark
		s     *fsm.Session
		sized bool
		op    syncOp
		full  bool
		from  uint64
	}{
		{"current", cur, rec(2, 9, 3), true, syncKeep, false, 0},
		{"lagging watermark appends the missing frames", cur, rec(2, 12, 5), true, syncWrite, false, 4},
		{"deleted session", cur, nil, true, syncRemove, false, 0},
		{"registration without events", storage.Watermark{}, &fsm.Session{Record: &fsmpb.SessionRecord{}}, false, syncKeep, false, 0},
		{"new artifact", storage.Watermark{}, rec(2, 5, 1), false, syncWrite, true, 1},
		{"watermark of a deleted incarnation", cur, rec(20, 22, 3), true, syncWrite, true, 1},
		{"torn file", cur, rec(2, 9, 3), false, syncWrite, true, 1},
		{"torn file behind a lagging watermark", cur, rec(2, 12, 5), false, syncWrite, true, 1},
		{"watermark without a checksum", noSum, rec(2, 9, 3), true, syncWrite, true, 1},
		{"watermark ahead of the record", cur, rec(2, 9, 2), true, syncWrite, true, 1},
		{"file elsewhere (a copied data directory)", storage.Watermark{LastIndex: 9, Frames: 3, Bytes: 100, Path: "/b/x.jsonl.zstd", HasSum: true}, rec(2, 9, 3), true, syncWrite, true, 1},
	} {
		got, from := decideSync(c.w, c.s, path, func(string, int64) bool { return c.sized })
		if got.op != c.op || got.full != c.full || from != c.from {
			t.Errorf("%s: op %d full %v from %d; want op %d full %v from %d", c.name, got.op, got.full, from, c.op, c.full, c.from)
		}
		if got.op == syncWrite && (got.path != path || got.last != c.s.Record.LastChangeIndex || got.frames != c.s.Record.Frames) {
			t.Errorf("%s: plan %+v does not name the record's path, last change and frames", c.name, got)
		}
	}
}
