package artifacts

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// fakeState is a state database in memory, for passes run against it.
type fakeState struct {
	sessions map[string]*fakeSession
	reads    atomic.Int64 // appendLines calls
}

type fakeSession struct {
	inc, last uint64     // incarnation, last change index
	frames    [][]string // frames[n-1]: the event lines of frame n
}

func fakeHeader(id string) *fsmpb.Header {
	cwd := "/w"
	return &fsmpb.Header{Id: id, CreatedAt: 1000, Cwd: &cwd}
}

func (f *fakeState) view(fn func(stateView) error) error { return fn(f) }

func (f *fakeState) sessionIDs(fn func(id string)) error {
	for id := range f.sessions {
		fn(id)
	}
	return nil
}

func (f *fakeState) session(id string) (*fsm.Session, error) {
	s := f.sessions[id]
	if s == nil {
		return nil, nil
	}
	return &fsm.Session{Header: fsm.HeaderFromPB(fakeHeader(id)), Record: &fsmpb.SessionRecord{
		Materialized: true, Incarnation: s.inc, LastChangeIndex: s.last, Frames: uint64(len(s.frames))}}, nil
}

func (f *fakeState) appendLines(dst []byte, id string, inc, from, to uint64) ([]byte, error) {
	f.reads.Add(1)
	s := f.sessions[id]
	if s == nil || s.inc != inc || to > uint64(len(s.frames)) {
		return dst, fmt.Errorf("no frames %d..%d of incarnation %d of %s", from, to, inc, id)
	}
	for _, fr := range s.frames[from-1 : to] {
		for _, l := range fr {
			dst = append(append(dst, l...), '\n')
		}
	}
	return dst, nil
}

// A pass run against a state in memory, after a first pass wrote frames 1
// and 2 of session s (incarnation 2, last change 3): what it writes to the
// file, what it reads of the state, and the watermark it publishes.
func TestPassAgainstFakeState(t *testing.T) {
	ev := func(n int) string { return fmt.Sprintf(`{"type":"x/e","seq":%d,"time":1,"data":%d}`, n, n) }
	frame := func(n, index uint64, evs ...string) fsm.Frame {
		f := fsm.Frame{SessionID: "s", N: n, Index: index, Header: fakeHeader("s")}
		for _, e := range evs {
			f.Events = append(f.Events, []byte(e))
		}
		return f
	}
	for _, c := range []struct {
		name string
		// change changes the state, the file or the writer after the first pass.
		change   func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark)
		want     []string // the file's event lines; nil: no file
		appended bool     // the first pass's bytes are kept (else the file is rewritten whole)
		reads    int64    // of the state
	}{
		{"current: nothing written", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			a.Observe(fsm.Applied{Sessions: []string{"s"}})
		}, []string{ev(0), ev(1), ev(2)}, true, 0},
		{"lagging watermark: the missing frames appended from the state", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			s.frames, s.last = append(s.frames, []string{ev(3)}, []string{ev(4), ev(5)}), 7
			a.Observe(fsm.Applied{Sessions: []string{"s"}})
		}, []string{ev(0), ev(1), ev(2), ev(3), ev(4), ev(5)}, true, 1},
		{"frames handed over by Observe: appended, the state not read", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			s.frames, s.last = append(s.frames, []string{ev(3)}, []string{ev(4)}), 7
			a.Observe(fsm.Applied{Sessions: []string{"s"}, Frames: []fsm.Frame{frame(3, 6, ev(3)), frame(4, 7, ev(4))}})
		}, []string{ev(0), ev(1), ev(2), ev(3), ev(4)}, true, 0},
		{"frames handed over that leave a gap: read from the state", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			s.frames, s.last = append(s.frames, []string{ev(3)}, []string{ev(4)}), 7
			a.Observe(fsm.Applied{Sessions: []string{"s"}, Frames: []fsm.Frame{frame(4, 7, ev(4))}})
		}, []string{ev(0), ev(1), ev(2), ev(3), ev(4)}, true, 1},
		{"watermark of a deleted incarnation: rewritten whole", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			*s = fakeSession{inc: 9, last: 10, frames: [][]string{{ev(7)}}}
			a.Observe(fsm.Applied{Sessions: []string{"s"}})
		}, []string{ev(7)}, false, 1},
		{"deletion and a new incarnation handed over: rewritten whole, the state not read", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			*s = fakeSession{inc: 9, last: 10, frames: [][]string{{ev(7)}}}
			a.Observe(fsm.Applied{Sessions: []string{"s"}, Frames: []fsm.Frame{{SessionID: "s", Deleted: true}, frame(1, 10, ev(7))}})
		}, []string{ev(7)}, false, 0},
		{"torn file (its size is not the watermark's): rewritten whole", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			if err := os.Truncate(w.Path, w.Bytes-3); err != nil {
				t.Fatal(err)
			}
			a.Observe(fsm.Applied{Sessions: []string{"s"}})
		}, []string{ev(0), ev(1), ev(2)}, false, 1},
		{"damage Verify found (same size): not served, rewritten whole", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			data, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}
			data[len(data)/2] ^= 0x20
			if err := os.WriteFile(w.Path, data, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := a.Verify("s", w); !errors.Is(err, sessionstore.ErrCorruption) {
				t.Fatalf("Verify of the damaged artifact = %v, want CORRUPTION", err)
			}
			if got, ok := a.Current("s", s.last); ok {
				t.Fatalf("Current of a damaged artifact = %+v", got)
			}
		}, []string{ev(0), ev(1), ev(2)}, false, 1},
		{"deletion handed over: file closed and removed", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			delete(st.sessions, "s")
			a.Observe(fsm.Applied{Sessions: []string{"s"}, Frames: []fsm.Frame{{SessionID: "s", Deleted: true}}})
		}, nil, false, 0},
		{"session without a record: file closed and removed", func(t *testing.T, a *Writer, s *fakeSession, st *fakeState, w storage.Watermark) {
			delete(st.sessions, "s")
			a.Observe(fsm.Applied{Sessions: []string{"s"}})
		}, nil, false, 0},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			local, err := storage.OpenRaftStore(filepath.Join(dir, "raft.db"))
			if err != nil {
				t.Fatal(err)
			}
			defer local.Close()
			s := &fakeSession{inc: 2, last: 3, frames: [][]string{{ev(0), ev(1)}, {ev(2)}}}
			st := &fakeState{sessions: map[string]*fakeSession{"s": s}}
			a := newWriter(filepath.Join(dir, "artifacts"), st, local, slog.New(slog.NewTextHandler(io.Discard, nil)), nil)
			defer func() { // Run closes the files it kept open when it stops
				ctx, cancel := context.WithCancel(context.Background())
				cancel()
				if a.Run(ctx); a.files.Open() != 0 {
					t.Errorf("%d artifacts open after the writer stopped", a.files.Open())
				}
			}()
			if _, err := a.step(); err != nil {
				t.Fatal(err)
			}
			w, ok := a.Current("s", 3)
			if !ok || a.files.Open() != 1 {
				t.Fatalf("the first pass did not write s (and keep it open): %v, %d open", ok, a.files.Open())
			}
			first, err := os.ReadFile(w.Path)
			if err != nil {
				t.Fatal(err)
			}

			c.change(t, a, s, st, w)
			st.reads.Store(0)
			if worked, err := a.step(); !worked || err != nil || a.Healthy() != nil {
				t.Fatalf("second pass: worked %v, %v; Healthy = %v", worked, err, a.Healthy())
			}
			if got := st.reads.Load(); got != c.reads {
				t.Errorf("the pass read the lines of %d sessions from the state, want %d", got, c.reads)
			}
			data, err := os.ReadFile(w.Path)
			if c.want == nil {
				_, marked := a.marks.Load().get("s")
				if !os.IsNotExist(err) || marked || a.files.Open() != 0 {
					t.Fatalf("artifact of a deleted session: %v, watermark kept %v, %d open; want none", err, marked, a.files.Open())
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			text := append(sessionlog.HeaderLine(fsm.HeaderFromPB(fakeHeader("s"))), '\n')
			wantText := append(text, strings.Join(c.want, "\n")+"\n"...)
			if got := artifactText(t, w.Path, data); !bytes.Equal(got, wantText) {
				t.Errorf("artifact text %q, want %q", got, wantText)
			}
			if c.appended && !bytes.HasPrefix(data, first) {
				t.Errorf("artifact of %d bytes does not start with the %d the first pass wrote", len(data), len(first))
			}
			if whole := storage.EncodeLines(storage.EncodeFrame(nil, text), wantText[len(text):], storage.MaxFramePlain); !c.appended && !bytes.Equal(data, whole) {
				t.Errorf("artifact of %d bytes, want its text's whole encoding, %d bytes", len(data), len(whole))
			}
			w, ok = a.Current("s", s.last)
			if !ok || w.Bytes != int64(len(data)) || w.Frames != uint64(len(s.frames)) {
				t.Fatalf("published watermark %+v %v; want %d bytes, frame %d at index %d", w, ok, len(data), len(s.frames), s.last)
			}
			if err := a.Verify("s", w); err != nil {
				t.Errorf("Verify of the published watermark: %v", err)
			}
		})
	}
}
