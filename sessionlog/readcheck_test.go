package sessionlog

import (
	"errors"
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/internal/benchload"
)

// readWhole is what a read decides over a whole log, from the whole-log
// functions: the header, Normalize, then the view's validation with closers.
func readWhole(id string, h sessionstore.Header, log [][]byte) error {
	if err := CheckStoredHeader(id, h, ""); err != nil {
		return err
	}
	norm, err := Normalize(id, log, "")
	if err != nil {
		return WrapCorruption(id, err)
	}
	_, err = wholeView(id, norm)
	return err
}

func sameErr(a, b error) bool {
	var ae, be *sessionstore.Error
	if a == nil || b == nil {
		return a == nil && b == nil
	}
	return errors.As(a, &ae) && errors.As(b, &be) && *ae == *be
}

// readCheckCorpus is every log the read-side tests refuse (and some they
// accept), so that a read rule those tests cover is covered here too.
func readCheckCorpus(t *testing.T) []struct {
	id  string
	log [][]byte
} {
	var out []struct {
		id  string
		log [][]byte
	}
	add := func(id string, log [][]byte) {
		out = append(out, struct {
			id  string
			log [][]byte
		}{id, log})
	}
	for _, c := range validateSessionCases() {
		add("s", lines(c.log...))
	}
	for _, c := range refusedLegacyCases() {
		add("s", lines(c.log...))
	}
	for _, c := range k11MalformedCases() {
		add("bad", lines(k11Pre, c.ev))
	}
	add("k37", lines(append(oneTurnLog(), `{"type":"future/event","seq":6,"time":99,"data":{"payload":1}}`)...))
	add("s", lines(`{"type":"request/header","seq":0,"time":1,"data":null}`))
	for _, name := range []string{"web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl", "cli-parallel-file-reads.session.jsonl"} {
		_, _, events := recordedLog(t, name)
		add("rec", events)
	}
	return out
}

// TestReadCheck_MatchesRead: after every event, ReadCheck.Err is what a read
// of the log up to there fails with, Err leaves the check unchanged, and
// Finish gives the whole-log functions' closers, whatever the chunking.
func TestReadCheck_MatchesRead(t *testing.T) {
	h := sessionstore.Header{CreatedAt: 1, Cwd: ptr("/w")}
	for ci, c := range readCheckCorpus(t) {
		h.ID = c.id
		rc := NewReadCheck(c.id, h, "")
		if err := rc.Err(); err != nil {
			t.Fatalf("log %d: empty log: %v", ci, err)
		}
		for i := range c.log {
			rc.Add(c.log[i : i+1])
			want := readWhole(c.id, h, c.log[:i+1])
			if got := rc.Err(); !sameErr(got, want) {
				t.Fatalf("log %d, after event %d: Err %v, a read's %v", ci, i, got, want)
			}
		}
		if rc.Len() != int64(len(c.log)) {
			t.Fatalf("log %d: Len %d, want %d", ci, rc.Len(), len(c.log))
		}
		wantClosers, werr := func() ([][]byte, error) {
			if err := readWhole(c.id, h, c.log); err != nil {
				return nil, err
			}
			norm, _ := Normalize(c.id, c.log, "")
			return wholeView(c.id, norm)
		}()
		for _, k := range []int{1, 3, max(len(c.log), 1)} {
			chunked := NewReadCheck(c.id, h, "")
			for i := 0; i < len(c.log); i += k {
				chunked.Add(c.log[i:min(i+k, len(c.log))])
			}
			for _, r := range []*ReadCheck{rc, chunked} {
				got, err := r.Finish()
				if !sameErr(err, werr) || joinLines(got) != joinLines(wantClosers) {
					t.Fatalf("log %d (chunks of %d): Finish %q %v, want %q %v", ci, k, joinLines(got), err, joinLines(wantClosers), werr)
				}
			}
			rc = NewReadCheck(c.id, h, "")
			rc.Add(c.log)
		}
	}
}

func TestReadCheck_Header(t *testing.T) {
	rc := NewReadCheck("s", sessionstore.Header{ID: "s", Version: 1}, "")
	rc.Add(lines(oneTurnLog()...))
	if err := rc.Err(); !errors.Is(err, sessionstore.ErrFormatUnsupported) {
		t.Fatalf("a header of format v1: %v, want FORMAT_UNSUPPORTED", err)
	}
	rc = NewReadCheck("s", sessionstore.Header{ID: "s", Cwd: ptr("rel")}, "")
	if err := rc.Err(); !errors.Is(err, sessionstore.ErrInvalidStored) {
		t.Fatalf("a relative cwd: %v, want INVALID_STORED_EVENT", err)
	}
}

// TestReadCheck_WriteRefusalIsTheReadRule: over every log the read-side
// tests refuse, a strict write is refused exactly where a read of the log
// would fail, with a write reason, and never where it reads.
func TestReadCheck_WriteRefusalIsTheReadRule(t *testing.T) {
	h := sessionstore.Header{CreatedAt: 1, Cwd: ptr("/w")}
	writeReasons := map[sessionstore.Reason]bool{sessionstore.ReasonInvalidEvent: true, sessionstore.ReasonFormatUnsupported: true}
	refusals := 0
	for ci, c := range readCheckCorpus(t) {
		h.ID = c.id
		rc := NewReadCheck(c.id, h, "")
		for i := range c.log {
			rc.Add(c.log[i : i+1])
			read := readWhole(c.id, h, c.log[:i+1])
			refusal := rc.WriteRefusal()
			if (read == nil) != (refusal == nil) {
				t.Fatalf("log %d, event %d: a read says %v, a strict write %v", ci, i, read, refusal)
			}
			if refusal != nil {
				refusals++
				if !writeReasons[refusal.Reason] || !strings.HasSuffix(refusal.Message, "write it with validation REFERENCE to store it anyway") {
					t.Fatalf("log %d, event %d: refusal %s %q", ci, i, refusal.Reason, refusal.Message)
				}
			}
		}
	}
	if refusals == 0 {
		t.Fatal("the corpus refused nothing")
	}
	for _, c := range []struct {
		h      sessionstore.Header
		reason sessionstore.Reason
		msg    string
	}{
		{sessionstore.Header{ID: "s", Version: 1}, sessionstore.ReasonFormatUnsupported,
			`session "s" header has log format v1; this store reads format v0 only, so no read would open the log; write it with validation REFERENCE to store it anyway`},
		{sessionstore.Header{ID: "s", Cwd: ptr("rel/dir")}, sessionstore.ReasonInvalidHeader,
			`session header cwd must be an absolute path, got "rel/dir": a read would refuse the log; write it with validation REFERENCE to store it anyway`},
		{sessionstore.Header{ID: "s", Origin: ptr("user")}, sessionstore.ReasonInvalidHeader,
			`session header origin must be "subagent": a read would refuse the log; write it with validation REFERENCE to store it anyway`},
	} {
		got := NewReadCheck("s", c.h, "").WriteRefusal()
		if got == nil || got.Reason != c.reason || got.Message != c.msg {
			t.Errorf("header %+v: %v, want %s %q", c.h, got, c.reason, c.msg)
		}
	}
}

// BenchmarkReadCheckAdd: the strict-write check of one event on top of a
// kept check, for the bench's 1 KiB assistant/chunk and for the recorded
// sessions' events (each replayed into a fresh check).
func BenchmarkReadCheckAdd(b *testing.B) {
	h := sessionstore.Header{Version: sessionstore.FormatVersion, ID: "s", CreatedAt: 1}
	b.Run("chunk-1KiB", func(b *testing.B) {
		pad := benchload.Padding(1024)
		c := NewReadCheck("s", h, "")
		c.Add(lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`))
		evs := make([][]byte, 512)
		for i := range evs {
			evs[i] = []byte(benchload.Event(int64(2+i), 2, 1024, pad))
		}
		b.SetBytes(1024)
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			if i%len(evs) == 0 && i > 0 {
				b.StopTimer()
				c = NewReadCheck("s", h, "")
				c.Add(lines(`{"type":"turn/start","seq":0,"time":1,"data":{"turn":1}}`, `{"type":"step/start","seq":1,"time":1,"data":{"turn":1,"step":1}}`))
				b.StartTimer()
			}
			c.Add(evs[i%len(evs) : i%len(evs)+1])
		}
		if err := c.Err(); err != nil {
			b.Fatal(err)
		}
	})
	b.Run("recorded", func(b *testing.B) {
		var all [][]byte
		for _, name := range []string{"web-fresh-round-trip.session.jsonl", "web-plan-mode.session.jsonl", "cli-parallel-file-reads.session.jsonl"} {
			_, _, events := recordedLog(b, name)
			all = append(all, events...)
		}
		var size int64
		for _, e := range all {
			size += int64(len(e))
		}
		b.SetBytes(size / int64(len(all)))
		b.ReportAllocs()
		b.ResetTimer()
		for i := 0; i < b.N; {
			rh := h
			rh.ID = "rec"
			c := NewReadCheck("rec", rh, "")
			for j := range all {
				if i == b.N {
					break
				}
				c.Add(all[j : j+1])
				i++
			}
		}
	})
}
