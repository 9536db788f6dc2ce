package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// testRaftLog builds a deterministic entry whose fields vary with the index:
// empty and nil Data, Extensions present or not, zero and non-zero AppendedAt with
// nanoseconds, every log type.
func testRaftLog(index uint64) *raft.Log {
	l := &raft.Log{
		Index: index,
		Term:  1 + index/7 + (index%3)<<40,
		Type:  raft.LogType(index % 6),
	}
	switch index % 4 {
	case 0: // nil Data
	case 1:
		l.Data = []byte{}
	default:
		l.Data = bytes.Repeat([]byte{byte(index)}, int(index%300)+1)
	}
	if index%5 == 0 {
		l.Extensions = []byte(fmt.Sprintf("ext-%d", index))
	}
	if index%2 == 1 {
		l.AppendedAt = time.Date(2025, 11, 29, 23, 58, 0, int(index)*1_000_003%1_000_000_000, time.FixedZone("x", 3600))
	}
	return l
}

func testRaftLogs(from, to uint64) []*raft.Log {
	logs := make([]*raft.Log, 0, to-from+1)
	for i := from; i <= to; i++ {
		logs = append(logs, testRaftLog(i))
	}
	return logs
}

// checkRaftLogEqual reports every field of got that differs from want.
func checkRaftLogEqual(tb testing.TB, got, want *raft.Log) {
	tb.Helper()
	if got.Index != want.Index || got.Term != want.Term || got.Type != want.Type {
		tb.Errorf("log %d: got index %d term %d type %v, want index %d term %d type %v",
			want.Index, got.Index, got.Term, got.Type, want.Index, want.Term, want.Type)
	}
	if !bytes.Equal(got.Data, want.Data) {
		tb.Errorf("log %d: got data %q, want %q", want.Index, got.Data, want.Data)
	}
	if !bytes.Equal(got.Extensions, want.Extensions) {
		tb.Errorf("log %d: got extensions %q, want %q", want.Index, got.Extensions, want.Extensions)
	}
	if !got.AppendedAt.Equal(want.AppendedAt) || got.AppendedAt.IsZero() != want.AppendedAt.IsZero() {
		tb.Errorf("log %d: got appended_at %v, want %v", want.Index, got.AppendedAt, want.AppendedAt)
	}
}

// walOpenTest opens a RaftWAL in dir and closes it when the test ends.
func walOpenTest(tb testing.TB, dir string) *RaftWAL {
	tb.Helper()
	w, err := OpenRaftWAL(dir, 0)
	if err != nil {
		tb.Fatalf("OpenRaftWAL(%s): %v", dir, err)
	}
	tb.Cleanup(func() { w.Close() })
	return w
}

// walReopenTest closes w and opens its directory again with the same segment size.
func walReopenTest(tb testing.TB, w *RaftWAL) *RaftWAL {
	tb.Helper()
	if err := w.Close(); err != nil {
		tb.Fatalf("Close: %v", err)
	}
	w2 := walOpenTest(tb, w.dir)
	w2.segmentSize = w.segmentSize
	return w2
}

func walCheckBounds(tb testing.TB, w *RaftWAL, first, last uint64) {
	tb.Helper()
	if got, err := w.FirstIndex(); err != nil || got != first {
		tb.Errorf("FirstIndex() = %d, %v; want %d, nil", got, err, first)
	}
	if got, err := w.LastIndex(); err != nil || got != last {
		tb.Errorf("LastIndex() = %d, %v; want %d, nil", got, err, last)
	}
}

// walCheckLogs checks that every index in from..to reads back as want(index).
func walCheckLogs(tb testing.TB, w *RaftWAL, from, to uint64, want func(uint64) *raft.Log) {
	tb.Helper()
	for i := from; i <= to && i != 0; i++ {
		var got raft.Log
		if err := w.GetLog(i, &got); err != nil {
			tb.Fatalf("GetLog(%d): %v", i, err)
		}
		checkRaftLogEqual(tb, &got, want(i))
	}
}

// walCheckAbsent checks that every index in idxs is raft.ErrLogNotFound, compared
// with == as raft does.
func walCheckAbsent(tb testing.TB, w *RaftWAL, idxs ...uint64) {
	tb.Helper()
	for _, i := range idxs {
		var l raft.Log
		if err := w.GetLog(i, &l); err != raft.ErrLogNotFound {
			tb.Errorf("GetLog(%d) = %v, want raft.ErrLogNotFound", i, err)
		}
	}
}

// walStoreTest stores testRaftLog(from..to) in StoreLogs calls of batch entries.
func walStoreTest(tb testing.TB, w *RaftWAL, from, to uint64, batch int) {
	tb.Helper()
	logs := testRaftLogs(from, to)
	for i := 0; i < len(logs); i += batch {
		if err := w.StoreLogs(logs[i:min(i+batch, len(logs))]); err != nil {
			tb.Fatalf("StoreLogs(from %d): %v", logs[i].Index, err)
		}
	}
}

// walSegmentBases lists the first indexes of dir's segment files.
func walSegmentBases(tb testing.TB, dir string) []uint64 {
	tb.Helper()
	bases, err := walListSegments(dir)
	if err != nil {
		tb.Fatal(err)
	}
	return bases
}

// walRecordSpans returns the offset and length of every record of a valid segment.
func walRecordSpans(tb testing.TB, path string) (offs []int64, lens []int64) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	for off := int64(0); off < int64(len(b)); {
		n := walHeaderSize + int64(binary.BigEndian.Uint32(b[off:]))
		offs, lens = append(offs, off), append(lens, n)
		off += n
	}
	return offs, lens
}

func walLastSegment(tb testing.TB, dir string) string {
	tb.Helper()
	bases := walSegmentBases(tb, dir)
	if len(bases) == 0 {
		tb.Fatal("no segment")
	}
	return filepath.Join(dir, walSegName(bases[len(bases)-1]))
}

// walEditFile applies edit to the contents of path.
func walEditFile(tb testing.TB, path string, edit func([]byte) []byte) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	if err := os.WriteFile(path, edit(b), 0o600); err != nil {
		tb.Fatal(err)
	}
}

// walNewTermLog is an entry of a later term that replaces a conflicting one.
func walNewTermLog(i uint64) *raft.Log {
	return &raft.Log{Index: i, Term: 999, Type: raft.LogCommand, Data: []byte(fmt.Sprintf("new-%d", i)), AppendedAt: time.Unix(1700000000, int64(i))}
}

func walNewTermLogs(from, to uint64) []*raft.Log {
	var logs []*raft.Log
	for i := from; i <= to; i++ {
		logs = append(logs, walNewTermLog(i))
	}
	return logs
}

func TestRaftWAL_Empty(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "wal")
	w := walOpenTest(t, dir)
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("directory mode %v, want 0700", perm)
	}
	check := func(w *RaftWAL) {
		t.Helper()
		walCheckBounds(t, w, 0, 0)
		walCheckAbsent(t, w, 0, 1, 1<<63)
	}
	check(w)
	if err := w.DeleteRange(1, 10); err != nil {
		t.Errorf("DeleteRange on an empty log: %v", err)
	}
	if err := w.StoreLogs(nil); err != nil {
		t.Errorf("StoreLogs(nil): %v", err)
	}
	check(w)
	w = walReopenTest(t, w)
	check(w)
	if got := walSegmentBases(t, dir); len(got) != 0 {
		t.Errorf("segments of an empty log: %v", got)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	var l raft.Log
	if _, err := w.LastIndex(); !errors.Is(err, walErrClosed) {
		t.Errorf("LastIndex after Close = %v, want walErrClosed", err)
	}
	if err := w.GetLog(1, &l); !errors.Is(err, walErrClosed) {
		t.Errorf("GetLog after Close = %v, want walErrClosed", err)
	}
	if err := w.StoreLog(testRaftLog(1)); !errors.Is(err, walErrClosed) {
		t.Errorf("StoreLog after Close = %v, want walErrClosed", err)
	}
}

func TestRaftWAL_StoreAndGet(t *testing.T) {
	tests := []struct {
		name  string
		last  uint64
		batch int // entries per StoreLogs call; 0 means StoreLog one at a time
	}{
		{"one entry StoreLog", 1, 0},
		{"one entry StoreLogs", 1, 1},
		{"1000 entries one at a time", 1000, 1},
		{"1000 entries in batches of 64", 1000, 64},
		{"1000 entries in one call", 1000, 1000},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := walOpenTest(t, t.TempDir())
			want := testRaftLogs(1, tt.last)
			calls := uint64(0)
			for i := 0; i < len(want); {
				writes, syncs := w.writes.Load(), w.syncs.Load()
				var err error
				if tt.batch == 0 {
					err = w.StoreLog(want[i])
					i++
				} else {
					err = w.StoreLogs(want[i:min(i+tt.batch, len(want))])
					i += tt.batch
				}
				if err != nil {
					t.Fatalf("StoreLogs: %v", err)
				}
				calls++
				// The point of the store: one write and one fdatasync per call.
				if dw, ds := w.writes.Load()-writes, w.syncs.Load()-syncs; dw != 1 || ds != 1 {
					t.Fatalf("StoreLogs call %d: %d writes and %d fdatasyncs, want 1 and 1", calls, dw, ds)
				}
			}
			for round := 0; round < 2; round++ { // before and after a restart
				walCheckBounds(t, w, 1, tt.last)
				walCheckLogs(t, w, 1, tt.last, testRaftLog)
				walCheckAbsent(t, w, 0, tt.last+1, 1<<64-1)
				w = walReopenTest(t, w)
			}
			// Appends continue after the restart.
			walStoreTest(t, w, tt.last+1, tt.last+3, 2)
			walCheckBounds(t, w, 1, tt.last+3)
			walCheckLogs(t, w, tt.last-1+1, tt.last+3, testRaftLog)
		})
	}
}

func TestRaftWAL_FieldRoundTrip(t *testing.T) {
	at := time.Date(2026, 1, 2, 3, 4, 5, 123456789, time.FixedZone("CET", 3600))
	tests := []struct {
		name string
		log  raft.Log // Index is set from the position in the table
	}{
		{"zero entry", raft.Log{}},
		{"empty data, empty extensions", raft.Log{Term: 1, Data: []byte{}, Extensions: []byte{}}},
		{"all fields", raft.Log{Term: 9, Type: raft.LogConfiguration, Data: []byte("cmd"), Extensions: []byte{0, 1, 2}, AppendedAt: at}},
		{"extensions without data", raft.Log{Term: 9, Extensions: []byte("ext")}},
		{"appended_at with monotonic reading", raft.Log{Term: 9, Data: []byte{0}, AppendedAt: time.Now()}},
		{"appended_at before 1970", raft.Log{Term: 9, AppendedAt: time.Date(1900, 1, 1, 0, 0, 0, 1, time.UTC)}},
		{"appended_at beyond int64 nanoseconds", raft.Log{AppendedAt: time.Date(9999, 12, 31, 23, 59, 59, 999999999, time.UTC)}},
		{"max term, type 255, 64 KiB data", raft.Log{Term: 1<<64 - 1, Type: 255, Data: bytes.Repeat([]byte{0xff}, 1<<16)}},
		{"binary data", raft.Log{Term: 2, Data: []byte{0, 0xff, '\n', 0x80}, Extensions: []byte("x")}},
	}
	w := walOpenTest(t, t.TempDir())
	for i, tt := range tests {
		tt.log.Index = uint64(i + 1)
		if err := w.StoreLog(&tt.log); err != nil {
			t.Fatalf("%s: StoreLog: %v", tt.name, err)
		}
	}
	for round := 0; round < 2; round++ {
		for i, tt := range tests {
			t.Run(fmt.Sprintf("%s/round %d", tt.name, round), func(t *testing.T) {
				tt.log.Index = uint64(i + 1)
				got := raft.Log{Data: []byte("stale"), Extensions: []byte("stale"), AppendedAt: time.Now()}
				if err := w.GetLog(tt.log.Index, &got); err != nil {
					t.Fatalf("GetLog: %v", err)
				}
				checkRaftLogEqual(t, &got, &tt.log)
			})
		}
		w = walReopenTest(t, w)
	}
	// The codec alone, at the largest index too.
	for _, l := range []*raft.Log{{Index: 1<<64 - 1, Term: 1<<64 - 1, Type: 255, Data: []byte("d"), Extensions: []byte("e"), AppendedAt: at}, testRaftLog(7)} {
		rec := walAppendRecord(nil, l)
		if len(rec) > walMaxEncodedSize(l) {
			t.Errorf("record of %d bytes, walMaxEncodedSize says at most %d", len(rec), walMaxEncodedSize(l))
		}
		var got raft.Log
		if err := walDecodeRecord(rec, &got); err != nil {
			t.Fatalf("walDecodeRecord(walAppendRecord(%d)): %v", l.Index, err)
		}
		checkRaftLogEqual(t, &got, l)
	}
}

// GetLog serves the newest entries from memory: the very slices StoreLogs was
// given, capacity-limited, so appending to them copies. Older entries (here:
// after a reopen) are read from disk into memory of their own, which neither
// aliases the store nor another GetLog.
func TestRaftWAL_GetLogSharing(t *testing.T) {
	w := walOpenTest(t, t.TempDir())
	in := &raft.Log{Index: 1, Term: 1, Data: append(make([]byte, 0, 64), "abc"...), Extensions: []byte("ext")}
	if err := w.StoreLog(in); err != nil {
		t.Fatal(err)
	}
	var a raft.Log
	if err := w.GetLog(1, &a); err != nil {
		t.Fatal(err)
	}
	if &a.Data[0] != &in.Data[0] || &a.Extensions[0] != &in.Extensions[0] {
		t.Error("a recent entry was not served from memory")
	}
	if cap(a.Data) != len(a.Data) || cap(a.Extensions) != len(a.Extensions) {
		t.Errorf("recent entry's slices have capacity %d/%d beyond their length %d/%d", cap(a.Data), cap(a.Extensions), len(a.Data), len(a.Extensions))
	}
	_ = append(a.Data, "more"...)
	if string(in.Data[:4]) == "abcm" {
		t.Error("appending to a recent entry's Data wrote into the stored entry's spare capacity")
	}

	w = walReopenTest(t, w)
	var b, c raft.Log
	if err := w.GetLog(1, &b); err != nil {
		t.Fatal(err)
	}
	b.Data[1] = 'Y'
	b.Data = append(b.Data, "more"...) // capacity-limited: must not run into Extensions
	if string(b.Extensions) != "ext" {
		t.Errorf("appending to Data changed Extensions to %q", b.Extensions)
	}
	b.Extensions[0] = 'Z'
	if err := w.GetLog(1, &c); err != nil {
		t.Fatal(err)
	}
	if string(c.Data) != "abc" || string(c.Extensions) != "ext" {
		t.Errorf("GetLog from disk after caller edits = %q/%q, want abc/ext", c.Data, c.Extensions)
	}
}

// TestRaftWAL_RecentModel runs random stores and deletes against a store that
// keeps few entries in memory and checks, after each, every index against a
// model, the memory bounds, and at the end that a reopened store (reading
// from disk) agrees.
func TestRaftWAL_RecentModel(t *testing.T) {
	for seed := uint64(1); seed <= 4; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 0))
			w := walOpenTest(t, t.TempDir())
			w.segmentSize = 2 << 10
			w.recentEntries, w.recentBytes = 8, 600
			var model []*raft.Log // model[i] has index first+i
			var first uint64
			entry := func(i uint64) *raft.Log {
				l := testRaftLog(i)
				l.Term = rng.Uint64N(1 << 20)
				l.Data = bytes.Repeat([]byte{byte(rng.Uint32())}, rng.IntN(250))
				if rng.IntN(50) == 0 {
					l.Data = make([]byte, 700) // larger than all of memory
				}
				return l
			}
			last := func() uint64 { return first + uint64(len(model)) - 1 }
			for op := 0; op < 400; op++ {
				switch r := rng.IntN(20); {
				case r < 14 || len(model) == 0: // append a batch
					k := uint64(1)
					if len(model) > 0 {
						k = last() + 1
					} else if first != 0 {
						k = first
					}
					var batch []*raft.Log
					for i := range 1 + rng.IntN(5) {
						batch = append(batch, entry(k+uint64(i)))
					}
					if err := w.StoreLogs(batch); err != nil {
						t.Fatal(err)
					}
					if len(model) == 0 {
						first = k
					}
					model = append(model, batch...)
				case r < 16: // overwrite a suffix by storing inside the log
					k := first + uint64(rng.IntN(len(model)))
					batch := []*raft.Log{entry(k), entry(k + 1)}
					if err := w.StoreLogs(batch); err != nil {
						t.Fatal(err)
					}
					model = append(model[:k-first], batch...)
				case r < 18: // delete a suffix, as a follower with conflicting entries does
					k := first + uint64(rng.IntN(len(model)))
					if err := w.DeleteRange(k, last()); err != nil {
						t.Fatal(err)
					}
					model = model[:k-first]
				case r < 19: // delete a prefix (compaction)
					k := first + uint64(rng.IntN(len(model)))
					if err := w.DeleteRange(first, k); err != nil {
						t.Fatal(err)
					}
					model = model[k-first+1:]
					first = k + 1
				default: // delete everything
					if err := w.DeleteRange(first, last()); err != nil {
						t.Fatal(err)
					}
					first, model = last()+1, nil
				}
				if len(model) == 0 {
					walCheckAbsent(t, w, first, first+1)
				} else {
					walCheckBounds(t, w, first, last())
					walCheckLogs(t, w, first, last(), func(i uint64) *raft.Log { return model[i-first] })
					walCheckAbsent(t, w, last()+1)
				}
				if n := w.recentLast - w.recentFirst; w.recentFirst != 0 && (int(n) >= w.recentEntries || w.recentSize > w.recentBytes ||
					w.recentFirst < first || w.recentLast != last()) {
					t.Fatalf("op %d: memory holds %d..%d (%d bytes) of log %d..%d", op, w.recentFirst, w.recentLast, w.recentSize, first, last())
				}
			}
			if len(model) > 0 {
				w = walReopenTest(t, w)
				walCheckLogs(t, w, first, last(), func(i uint64) *raft.Log { return model[i-first] })
			}
		})
	}
}

func TestRaftWAL_Segments(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir)
	w.segmentSize = 2 << 10
	walStoreTest(t, w, 1, 700, 7)
	bases := walSegmentBases(t, dir)
	if len(bases) < 20 {
		t.Fatalf("%d segments with 2 KiB segments, want many", len(bases))
	}
	// Each segment is named after its first record, holds whole batches, and goes
	// past the limit only by its last batch.
	for i, b := range bases {
		if (b-1)%7 != 0 {
			t.Errorf("segment %d starts at %d, inside a batch", i, b)
		}
		fi, err := os.Stat(filepath.Join(dir, walSegName(b)))
		if err != nil {
			t.Fatal(err)
		}
		if i < len(bases)-1 && fi.Size() > w.segmentSize+7*400 {
			t.Errorf("segment %d is %d bytes", i, fi.Size())
		}
	}
	for round := 0; round < 2; round++ {
		walCheckBounds(t, w, 1, 700)
		walCheckLogs(t, w, 1, 700, testRaftLog)
		w = walReopenTest(t, w)
	}
	walStoreTest(t, w, 701, 800, 10)
	w = walReopenTest(t, w)
	walCheckBounds(t, w, 1, 800)
	walCheckLogs(t, w, 1, 800, testRaftLog)
	if got := walSegmentBases(t, dir); len(got) <= len(bases) {
		t.Errorf("%d segments after 100 more entries, had %d", len(got), len(bases))
	}
	// A single batch larger than a segment is written whole, into one segment.
	big := []*raft.Log{{Index: 801, Term: 3, Data: bytes.Repeat([]byte("b"), 10<<10)}, {Index: 802, Term: 3}}
	if err := w.StoreLogs(big); err != nil {
		t.Fatal(err)
	}
	w = walReopenTest(t, w)
	walCheckLogs(t, w, 801, 802, func(i uint64) *raft.Log { return big[i-801] })
}

func TestRaftWAL_DeleteRange(t *testing.T) {
	type deletion struct{ min, max uint64 }
	// The log is 1..100 in ten segments of ten entries: 1, 11, ..., 91.
	tests := []struct {
		name        string
		deletes     []deletion
		wantErr     bool
		first, last uint64
		segments    []uint64 // bases of the segment files left
	}{
		{"prefix inside the first segment", []deletion{{1, 5}}, false, 6, 100, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
		{"prefix across segments", []deletion{{1, 35}}, false, 36, 100, []uint64{31, 41, 51, 61, 71, 81, 91}},
		{"prefix to a segment boundary", []deletion{{1, 40}}, false, 41, 100, []uint64{41, 51, 61, 71, 81, 91}},
		{"prefix from below the first index", []deletion{{0, 20}}, false, 21, 100, []uint64{21, 31, 41, 51, 61, 71, 81, 91}},
		{"prefix twice", []deletion{{1, 15}, {16, 57}}, false, 58, 100, []uint64{51, 61, 71, 81, 91}},
		{"prefix of the last segment", []deletion{{1, 95}}, false, 96, 100, []uint64{91}},
		{"suffix inside the last segment", []deletion{{96, 100}}, false, 1, 95, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
		{"suffix across segments", []deletion{{45, 100}}, false, 1, 44, []uint64{1, 11, 21, 31, 41}},
		{"suffix from a segment boundary", []deletion{{51, 100}}, false, 1, 50, []uint64{1, 11, 21, 31, 41, 51}},
		{"suffix to beyond the end", []deletion{{90, 1<<64 - 1}}, false, 1, 89, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81}},
		{"prefix then suffix", []deletion{{1, 35}, {60, 100}}, false, 36, 59, []uint64{31, 41, 51}},
		{"suffix then prefix", []deletion{{60, 100}, {1, 35}}, false, 36, 59, []uint64{31, 41, 51}},
		{"everything", []deletion{{1, 100}}, false, 0, 0, nil},
		{"everything after a prefix", []deletion{{1, 35}, {36, 100}}, false, 0, 0, nil},
		{"wider than the log", []deletion{{0, 1<<64 - 1}}, false, 0, 0, nil},
		{"beyond the log", []deletion{{101, 200}}, false, 1, 100, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
		{"below the log", []deletion{{1, 20}, {3, 9}}, false, 21, 100, []uint64{21, 31, 41, 51, 61, 71, 81, 91}},
		{"min above max", []deletion{{70, 30}}, false, 1, 100, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
		{"middle is refused", []deletion{{40, 60}}, true, 1, 100, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
		{"single entry in the middle is refused", []deletion{{50, 50}}, true, 1, 100, []uint64{1, 11, 21, 31, 41, 51, 61, 71, 81, 91}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := walOpenTest(t, dir)
			w.segmentSize = 1 // every StoreLogs call starts a segment
			walStoreTest(t, w, 1, 100, 10)
			for i, d := range tt.deletes {
				err := w.DeleteRange(d.min, d.max)
				if last := i == len(tt.deletes)-1; last && tt.wantErr {
					if !errors.Is(err, walErrRange) {
						t.Fatalf("DeleteRange(%d, %d) = %v, want a walErrRange error", d.min, d.max, err)
					}
				} else if err != nil {
					t.Fatalf("DeleteRange(%d, %d): %v", d.min, d.max, err)
				}
			}
			check := func(w *RaftWAL) {
				t.Helper()
				walCheckBounds(t, w, tt.first, tt.last)
				walCheckLogs(t, w, tt.first, tt.last, testRaftLog)
				for i := uint64(0); i <= 101; i++ {
					if tt.last == 0 || i < tt.first || i > tt.last {
						// Entries of a partly covered segment are still in its file,
						// and must not be served.
						walCheckAbsent(t, w, i)
					}
				}
				if got := walSegmentBases(t, dir); !slices.Equal(got, tt.segments) {
					t.Errorf("segment files %v, want %v", got, tt.segments)
				}
			}
			check(w)
			w = walReopenTest(t, w)
			check(w)

			// Appends go on at the end; an empty log takes any index, here one below
			// the entries it deleted.
			next := tt.last + 1
			if tt.last == 0 {
				next = 7
			}
			walStoreTest(t, w, next, next+4, 2)
			w = walReopenTest(t, w)
			first := tt.first
			if tt.last == 0 {
				first = next
			}
			walCheckBounds(t, w, first, next+4)
			walCheckLogs(t, w, first, next+4, testRaftLog)
		})
	}
}

// raft truncates a follower's conflicting suffix with DeleteRange(k, last) and
// stores the leader's entries from k; StoreLogs at an index inside the log does
// both at once.
func TestRaftWAL_OverwriteSuffix(t *testing.T) {
	tests := []struct {
		name        string
		k           uint64
		deleteFirst bool
	}{
		{"delete then store, inside the last segment", 96, true},
		{"delete then store, across segments", 45, true},
		{"delete then store, at a segment boundary", 51, true},
		{"delete then store, after the first entry", 2, true},
		{"store over the last entry", 100, false},
		{"store over a suffix across segments", 45, false},
		{"store over the whole log", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := walOpenTest(t, dir)
			w.segmentSize = 1
			walStoreTest(t, w, 1, 100, 10)
			if tt.deleteFirst {
				if err := w.DeleteRange(tt.k, 100); err != nil {
					t.Fatal(err)
				}
				walCheckBounds(t, w, 1, tt.k-1)
			}
			if err := w.StoreLogs(walNewTermLogs(tt.k, tt.k+4)); err != nil {
				t.Fatalf("StoreLogs(%d..): %v", tt.k, err)
			}
			for round := 0; round < 2; round++ {
				walCheckBounds(t, w, 1, tt.k+4)
				walCheckLogs(t, w, 1, tt.k-1, testRaftLog)
				walCheckLogs(t, w, tt.k, tt.k+4, walNewTermLog)
				walCheckAbsent(t, w, tt.k+5)
				w = walReopenTest(t, w)
			}
		})
	}
}

func TestRaftWAL_StoreLogsRefused(t *testing.T) {
	tests := []struct {
		name string
		logs []*raft.Log
	}{
		{"gap after the last entry", testRaftLogs(22, 23)},
		{"below the first entry", testRaftLogs(5, 6)},
		{"index 0", []*raft.Log{{Index: 0}}},
		{"entries not consecutive", []*raft.Log{testRaftLog(21), testRaftLog(23)}},
		{"entries repeated", []*raft.Log{testRaftLog(21), testRaftLog(21)}},
		{"entries wrapping around", []*raft.Log{{Index: 1<<64 - 1}, {Index: 0}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := walOpenTest(t, t.TempDir())
			walStoreTest(t, w, 1, 20, 20)
			if err := w.DeleteRange(1, 9); err != nil {
				t.Fatal(err)
			}
			if err := w.StoreLogs(tt.logs); !errors.Is(err, walErrRange) {
				t.Fatalf("StoreLogs = %v, want a walErrRange error", err)
			}
			walCheckBounds(t, w, 10, 20)
			walCheckLogs(t, w, 10, 20, testRaftLog)
			walStoreTest(t, w, 21, 21, 1) // and the store is still usable
		})
	}
	t.Run("gap into an empty log is fine", func(t *testing.T) {
		w := walOpenTest(t, t.TempDir())
		walStoreTest(t, w, 1000, 1010, 4)
		w = walReopenTest(t, w)
		walCheckBounds(t, w, 1000, 1010)
		walCheckAbsent(t, w, 999, 1)
	})
}

// A damaged tail of the last segment is a write that never completed: reopen
// cuts it off and keeps everything before it.
func TestRaftWAL_TornTail(t *testing.T) {
	// The log: 1..20 one per StoreLogs, then 21..30 in one call.
	type damage func(t *testing.T, path string, offs, lens []int64)
	cutAt := func(off int64) func([]byte) []byte { return func(b []byte) []byte { return b[:off] } }
	flip := func(off int64) func([]byte) []byte { return func(b []byte) []byte { b[off] ^= 0x20; return b } }
	n := func(offs []int64) int { return len(offs) - 1 }
	tests := []struct {
		name     string
		segSize  int64
		damage   damage
		wantLast uint64
	}{
		{"garbage appended", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, func(b []byte) []byte {
				return append(b, []byte("\x00\x00\x01\x00 this is not a record at all, just noise")...)
			})
		}, 30},
		{"zeros appended", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, func(b []byte) []byte { return append(b, make([]byte, 8192)...) })
		}, 30},
		{"half a header appended", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, func(b []byte) []byte { return append(b, 0, 0, 0) })
		}, 30},
		{"a header promising more than there is", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, func(b []byte) []byte { return append(b, 0, 0, 1, 0, 1, 2, 3, 4, 1, 2) })
		}, 30},
		{"last record cut in half", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, cutAt(offs[n(offs)]+lens[n(offs)]/2))
		}, 29},
		{"last record cut inside its header", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, cutAt(offs[n(offs)]+5))
		}, 29},
		{"last record missing its last byte", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, cutAt(offs[n(offs)]+lens[n(offs)]-1))
		}, 29},
		{"byte flipped in the last record's data", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, flip(offs[n(offs)]+lens[n(offs)]-3))
		}, 29},
		{"byte flipped in the last record's checksum", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, flip(offs[n(offs)]+5))
		}, 29},
		{"byte flipped in the last record's length", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, flip(offs[n(offs)]+3))
		}, 29},
		{"last record zeroed", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, func(b []byte) []byte { clear(b[offs[n(offs)]:]); return b })
		}, 29},
		{"last batch cut inside its third record", 0, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, cutAt(offs[22]+4)) // record 23
		}, 22},
		{"last segment's only record cut", 1, func(t *testing.T, p string, offs, lens []int64) {
			walEditFile(t, p, cutAt(lens[0]-2))
		}, 20}, // with one segment per call, the last holds 21..30; it stays, empty
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := walOpenTest(t, dir)
			if tt.segSize != 0 {
				w.segmentSize = tt.segSize
			}
			walStoreTest(t, w, 1, 20, 1)
			walStoreTest(t, w, 21, 30, 10)
			if tt.segSize == 1 {
				// Make the last segment hold one record: 21..30 as one batch is too many.
				if err := w.DeleteRange(22, 30); err != nil {
					t.Fatal(err)
				}
			}
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			path := walLastSegment(t, dir)
			offs, lens := walRecordSpans(t, path)
			tt.damage(t, path, offs, lens)

			w = walOpenTest(t, dir)
			walCheckBounds(t, w, 1, tt.wantLast)
			walCheckLogs(t, w, 1, tt.wantLast, testRaftLog)
			walCheckAbsent(t, w, tt.wantLast+1)
			// The file was cut back to its last whole record.
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			var wantSize int64 // with one segment per call, the last keeps no record
			if tt.segSize == 0 {
				wantSize = offs[tt.wantLast-1] + lens[tt.wantLast-1]
			}
			if fi.Size() != wantSize {
				t.Errorf("segment is %d bytes after recovery, want %d", fi.Size(), wantSize)
			}
			// New entries go on at the right index, and all of it survives a restart.
			if tt.segSize != 0 {
				w.segmentSize = tt.segSize
			}
			walStoreTest(t, w, tt.wantLast+1, tt.wantLast+5, 2)
			w = walReopenTest(t, w)
			walCheckBounds(t, w, 1, tt.wantLast+5)
			walCheckLogs(t, w, 1, tt.wantLast+5, testRaftLog)
		})
	}
	t.Run("the only record torn: empty log", func(t *testing.T) {
		dir := t.TempDir()
		w := walOpenTest(t, dir)
		walStoreTest(t, w, 1, 1, 1)
		w.Close()
		path := walLastSegment(t, dir)
		walEditFile(t, path, func(b []byte) []byte { return b[:len(b)-1] })
		w = walOpenTest(t, dir)
		walCheckBounds(t, w, 0, 0)
		walStoreTest(t, w, 1, 3, 3)
		w = walReopenTest(t, w)
		walCheckBounds(t, w, 1, 3)
		walCheckLogs(t, w, 1, 3, testRaftLog)
	})
}

// The torn-tail rule is decided by evidence: a damaged last record at or below
// the committed index the caller passes (state.db's applied index, the latest
// snapshot's) is never dropped: the open fails with ErrWALCommitted and leaves
// the files as they were. Above it, the tail is cut and Truncation says what.
func TestRaftWAL_DamageAtACommittedIndex(t *testing.T) {
	flipData := func(b []byte, off, n int64) []byte { b[off+n-3] ^= 0x01; return b }
	flipCRC := func(b []byte, off, n int64) []byte { b[off+5] ^= 0x01; return b }
	cutHalf := func(b []byte, off, n int64) []byte { return b[:off+n/2] }
	garbage := func(b []byte, off, n int64) []byte { return append(b, 0, 0, 1, 0, 9, 9) }
	tests := []struct {
		name      string
		damage    func(b []byte, off, n int64) []byte
		committed uint64
		wantErr   bool   // ErrWALCommitted, nothing changed
		wantLast  uint64 // otherwise: the last index after the cut
		wantIndex uint64 // and the index Truncation reports
	}{
		{"one bit of the last record's data, record applied", flipData, 30, true, 0, 0},
		{"one bit of the last record's checksum, record applied", flipCRC, 30, true, 0, 0},
		{"last record cut, record applied", cutHalf, 30, true, 0, 0},
		{"last record flipped, applied index beyond it", flipData, 35, true, 0, 0},
		{"one bit of the last record's data, not applied", flipData, 29, false, 29, 30},
		{"last record cut, nothing known committed", cutHalf, 0, false, 29, 30},
		{"garbage after the applied last record", garbage, 30, false, 30, 31},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := walOpenTest(t, dir)
			walStoreTest(t, w, 1, 20, 1)
			walStoreTest(t, w, 21, 30, 10)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			path := walLastSegment(t, dir)
			offs, lens := walRecordSpans(t, path)
			last := len(offs) - 1
			walEditFile(t, path, func(b []byte) []byte { return tt.damage(b, offs[last], lens[last]) })
			damaged, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}

			w, err = OpenRaftWAL(dir, tt.committed)
			if tt.wantErr {
				if !errors.Is(err, ErrWALCommitted) {
					t.Fatalf("OpenRaftWAL(committed %d) = %v, want ErrWALCommitted", tt.committed, err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "record 30") {
					t.Errorf("error %q does not name the segment and the record", err)
				}
				if after, _ := os.ReadFile(path); !bytes.Equal(after, damaged) {
					t.Errorf("the refused open changed the segment")
				}
				// The lock was released: the directory can be opened again.
				w, err := OpenRaftWAL(dir, 0)
				if err != nil {
					t.Fatalf("open without evidence: %v", err)
				}
				w.Close()
				return
			}
			if err != nil {
				t.Fatalf("OpenRaftWAL(committed %d): %v", tt.committed, err)
			}
			t.Cleanup(func() { w.Close() })
			walCheckBounds(t, w, 1, tt.wantLast)
			tr, ok := w.Truncation()
			if !ok || tr.Index != tt.wantIndex || tr.Segment != path || tr.Bytes != int64(len(damaged))-tr.Offset || tr.Reason == "" {
				t.Errorf("Truncation() = %+v, %v; want index %d in %s, %d bytes from the offset", tr, ok, tt.wantIndex, path, int64(len(damaged))-tr.Offset)
			}
		})
	}
	t.Run("no damage: no truncation", func(t *testing.T) {
		dir := t.TempDir()
		w := walOpenTest(t, dir)
		walStoreTest(t, w, 1, 3, 3)
		w = walReopenTest(t, w)
		if tr, ok := w.Truncation(); ok {
			t.Errorf("Truncation() = %+v after a clean reopen", tr)
		}
	})
}

// Damage that a torn write cannot explain refuses the open, names the file and
// offset, and leaves the files as they were.
func TestRaftWAL_Corrupt(t *testing.T) {
	// The log: 1..30 in three segments of ten (1, 11, 21).
	seg := func(dir string, base uint64) string { return filepath.Join(dir, walSegName(base)) }
	tests := []struct {
		name     string
		damage   func(t *testing.T, dir string) (file string, off int64)
		wantErr  error
		wantText string
	}{
		{"byte flipped in an early record of the last segment", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 21)
			offs, lens := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { b[offs[1]+lens[1]-2] ^= 1; return b })
			return p, offs[1]
		}, walErrCorrupt, "followed by a valid record (index 23)"},
		{"length flipped in an early record of the last segment", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 21)
			offs, _ := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { b[offs[4]+1] ^= 0x40; return b })
			return p, offs[4]
		}, walErrCorrupt, "followed by a valid record"},
		{"zeroed record in the middle of the last segment", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 21)
			offs, lens := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { clear(b[offs[5] : offs[5]+lens[5]]); return b })
			return p, offs[5]
		}, walErrCorrupt, "followed by a valid record (index 27)"},
		{"byte flipped in a segment that is not the last", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 11)
			offs, lens := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { b[offs[9]+lens[9]-1] ^= 1; return b })
			return p, offs[9]
		}, walErrCorrupt, "not the last segment"},
		{"segment that is not the last cut short", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 1)
			offs, _ := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { return b[:len(b)-3] })
			return p, offs[9]
		}, walErrCorrupt, "not the last segment"},
		{"missing segment", func(t *testing.T, dir string) (string, int64) {
			if err := os.Remove(seg(dir, 11)); err != nil {
				t.Fatal(err)
			}
			return seg(dir, 21), -1
		}, walErrCorrupt, "previous segment ends at 10"},
		{"segment named after the wrong index", func(t *testing.T, dir string) (string, int64) {
			if err := os.Rename(seg(dir, 21), seg(dir, 22)); err != nil {
				t.Fatal(err)
			}
			return seg(dir, 22), -1
		}, walErrCorrupt, "previous segment ends at 20"},
		{"valid record at the wrong index", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 21)
			offs, _ := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte { return walAppendRecord(b[:offs[4]], testRaftLog(77)) })
			return p, offs[4]
		}, walErrCorrupt, "record has index 77, want 25"},
		{"valid checksum over a record of another version", func(t *testing.T, dir string) (string, int64) {
			p := seg(dir, 21)
			offs, _ := walRecordSpans(t, p)
			walEditFile(t, p, func(b []byte) []byte {
				rec := walAppendRecord(nil, testRaftLog(30))
				rec[walHeaderSize] = 2
				binary.BigEndian.PutUint32(rec[4:], walChecksum(rec[:4], rec[walHeaderSize:]))
				return append(b[:offs[9]], rec...)
			})
			return p, offs[9]
		}, walErrVersion, "record version 2"},
		{"meta file damaged", func(t *testing.T, dir string) (string, int64) {
			p := filepath.Join(dir, walMetaName)
			walEditFile(t, p, func(b []byte) []byte { b[15] ^= 1; return b })
			return p, -1
		}, walErrCorrupt, "checksum"},
		{"meta file missing", func(t *testing.T, dir string) (string, int64) {
			if err := os.Remove(filepath.Join(dir, walMetaName)); err != nil {
				t.Fatal(err)
			}
			return walMetaName, -1
		}, walErrCorrupt, "3 segment files but no"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			w := walOpenTest(t, dir)
			w.segmentSize = 1
			walStoreTest(t, w, 1, 30, 10)
			if err := w.Close(); err != nil {
				t.Fatal(err)
			}
			file, off := tt.damage(t, dir)
			before := walSnapshotDir(t, dir)
			w2, err := OpenRaftWAL(dir, 0)
			if err == nil {
				w2.Close()
				t.Fatal("OpenRaftWAL of a damaged log succeeded")
			}
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("OpenRaftWAL error %v does not wrap %v", err, tt.wantErr)
			}
			msg := err.Error()
			if !strings.Contains(msg, filepath.Base(file)) || !strings.Contains(msg, tt.wantText) {
				t.Errorf("OpenRaftWAL error %q should name %s and say %q", msg, filepath.Base(file), tt.wantText)
			}
			if off >= 0 && !strings.Contains(msg, fmt.Sprintf("offset %d ", off)) && !strings.Contains(msg, fmt.Sprintf("offset %d:", off)) {
				t.Errorf("OpenRaftWAL error %q should name offset %d", msg, off)
			}
			if after := walSnapshotDir(t, dir); !maps.Equal(before, after) {
				t.Error("a failed OpenRaftWAL changed the files")
			}
		})
	}
}

// walSnapshotDir reads every file of dir.
func walSnapshotDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]string{}
	for _, e := range entries {
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		m[e.Name()] = string(b)
	}
	return m
}

func TestRaftWAL_Lock(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir)
	if w2, err := OpenRaftWAL(dir, 0); err == nil {
		w2.Close()
		t.Fatal("second OpenRaftWAL of an open directory succeeded")
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	walOpenTest(t, dir) // released by Close
}

// Readers run while entries are appended, segments roll and the prefix is
// compacted; they see whole entries or raft.ErrLogNotFound, never a torn record.
// Meant for -race.
func TestRaftWAL_Concurrent(t *testing.T) {
	w := walOpenTest(t, t.TempDir())
	w.segmentSize = 8 << 10
	const last = 1000
	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for r := 0; r < 3; r++ {
		wg.Add(1)
		go func(seed uint64) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(seed, 1))
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads > 0 {
						return
					}
				default:
				}
				lastIdx, err := w.LastIndex()
				if err != nil {
					errs <- err
					return
				}
				if lastIdx == 0 {
					continue
				}
				i := lastIdx - rng.Uint64N(min(lastIdx, 50))
				var l raft.Log
				switch err := w.GetLog(i, &l); {
				case err == raft.ErrLogNotFound:
					if first, _ := w.FirstIndex(); i >= first {
						errs <- fmt.Errorf("GetLog(%d) not found, first index is %d", i, first)
						return
					}
				case err != nil:
					errs <- fmt.Errorf("GetLog(%d): %v", i, err)
					return
				case l.Index != i || !bytes.Equal(l.Data, testRaftLog(i).Data) || l.Term != testRaftLog(i).Term:
					errs <- fmt.Errorf("GetLog(%d) = index %d term %d, %d bytes of data", i, l.Index, l.Term, len(l.Data))
					return
				}
			}
		}(uint64(r))
	}
	logs := testRaftLogs(1, last)
	for i := 0; i < len(logs); i += 5 {
		if err := w.StoreLogs(logs[i:min(i+5, len(logs))]); err != nil {
			t.Fatal(err)
		}
		if i%300 == 0 && i > 100 {
			if err := w.DeleteRange(1, uint64(i-100)); err != nil {
				t.Fatal(err)
			}
		}
	}
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

// raftTestFSM counts applied commands; its snapshot is the count.
type raftTestFSM struct {
	mu    sync.Mutex
	count uint64
}

func (f *raftTestFSM) Apply(l *raft.Log) any {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count++
	return f.count
}

func (f *raftTestFSM) Count() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.count
}

func (f *raftTestFSM) Snapshot() (raft.FSMSnapshot, error) {
	return raftTestFSMSnapshot(f.Count()), nil
}

func (f *raftTestFSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	var b [8]byte
	if _, err := io.ReadFull(rc, b[:]); err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.count = binary.BigEndian.Uint64(b[:])
	return nil
}

type raftTestFSMSnapshot uint64

func (s raftTestFSMSnapshot) Persist(sink raft.SnapshotSink) error {
	if _, err := sink.Write(binary.BigEndian.AppendUint64(nil, uint64(s))); err != nil {
		sink.Cancel()
		return err
	}
	return sink.Close()
}

func (raftTestFSMSnapshot) Release() {}

// waitForRaft polls cond until it holds or the deadline passes.
func waitForRaft(tb testing.TB, timeout time.Duration, what string, cond func() bool) {
	tb.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	tick := time.NewTicker(5 * time.Millisecond)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			tb.Fatalf("timed out after %v waiting for %s", timeout, what)
		case <-tick.C:
		}
	}
}

// walStartTestRaft starts a single-voter raft with logs as its LogStore, stable as
// its StableStore and snaps as its snapshot store, and waits until it leads.
func walStartTestRaft(tb testing.TB, logs raft.LogStore, stable *RaftStore, snaps raft.SnapshotStore, bootstrap bool) (*raft.Raft, *raftTestFSM) {
	tb.Helper()
	conf := raft.DefaultConfig()
	conf.LocalID = "node-1"
	conf.HeartbeatTimeout = 50 * time.Millisecond
	conf.ElectionTimeout = 50 * time.Millisecond
	conf.LeaderLeaseTimeout = 50 * time.Millisecond
	conf.CommitTimeout = 5 * time.Millisecond
	conf.TrailingLogs = 10
	conf.SnapshotThreshold = 1 << 30 // only the snapshot the test asks for
	conf.SnapshotInterval = time.Hour
	conf.Logger = hclog.NewNullLogger()
	addr, trans := raft.NewInmemTransport("node-1")
	fsm := &raftTestFSM{}
	r, err := raft.NewRaft(conf, fsm, logs, stable, snaps, trans)
	if err != nil {
		tb.Fatalf("raft.NewRaft: %v", err)
	}
	tb.Cleanup(func() { r.Shutdown().Error() })
	if bootstrap {
		cfg := raft.Configuration{Servers: []raft.Server{{ID: conf.LocalID, Address: addr}}}
		if err := r.BootstrapCluster(cfg).Error(); err != nil {
			tb.Fatalf("BootstrapCluster: %v", err)
		}
	}
	waitForRaft(tb, 10*time.Second, "leadership", func() bool { return r.State() == raft.Leader })
	return r, fsm
}

// A real hashicorp/raft node runs on RaftWAL (with RaftStore as its stable store),
// compacts its log after a snapshot through DeleteRange, and after a restart
// replays snapshot and log into a fresh FSM.
func TestRaftWAL_WithRaft(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir)
	w.segmentSize = 512 // the compaction removes whole segments
	stable := openTestRaftStore(t)
	snaps := raft.NewInmemSnapshotStore()
	if ok, err := raft.HasExistingState(w, stable, snaps); err != nil || ok {
		t.Fatalf("HasExistingState(fresh) = %v, %v; want false, nil", ok, err)
	}
	r, fsm := walStartTestRaft(t, w, stable, snaps, true)
	apply := func(r *raft.Raft, from, to int) {
		t.Helper()
		for i := from; i <= to; i++ {
			f := r.Apply([]byte(fmt.Sprintf("cmd-%d", i)), 5*time.Second)
			if err := f.Error(); err != nil {
				t.Fatalf("Apply %d: %v", i, err)
			}
			if got := f.Response(); got != uint64(i) {
				t.Fatalf("Apply %d response = %v", i, got)
			}
		}
	}
	apply(r, 1, 200)
	segsBefore := walSegmentBases(t, dir)
	if err := r.Snapshot().Error(); err != nil {
		t.Fatalf("Snapshot: %v", err)
	}
	first, _ := w.FirstIndex()
	last, _ := w.LastIndex()
	if first <= 100 || last < first || last-first+1 < 10 {
		t.Fatalf("log after the snapshot holds %d..%d, want it compacted to about the 10 trailing entries", first, last)
	}
	if segsAfter := walSegmentBases(t, dir); len(segsAfter) >= len(segsBefore) || segsAfter[0] > first {
		t.Fatalf("segments %v after compacting to %d (before: %d segments)", segsAfter, first, len(segsBefore))
	}
	apply(r, 201, 300)
	if got := fsm.Count(); got != 300 {
		t.Fatalf("FSM count = %d, want 300", got)
	}
	lastBefore := r.LastIndex()
	if err := r.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}

	w = walReopenTest(t, w)
	stable = reopenTestRaftStore(t, stable)
	walCheckBounds(t, w, first, lastBefore)
	if term, err := stable.GetUint64([]byte("CurrentTerm")); err != nil || term == 0 {
		t.Errorf("stable CurrentTerm after restart = %d, %v; want > 0", term, err)
	}
	if ok, err := raft.HasExistingState(w, stable, snaps); err != nil || !ok {
		t.Fatalf("HasExistingState(after run) = %v, %v; want true, nil", ok, err)
	}
	var l raft.Log
	if err := w.GetLog(lastBefore, &l); err != nil || l.Type != raft.LogCommand || string(l.Data) != "cmd-300" {
		t.Fatalf("GetLog(last %d) = %+v, %v; want cmd-300", lastBefore, l, err)
	}
	// No bootstrap: snapshot, then the log. The new leader's no-op commits
	// everything before it.
	r2, fsm2 := walStartTestRaft(t, w, stable, snaps, false)
	waitForRaft(t, 10*time.Second, "the FSM to replay", func() bool { return fsm2.Count() >= 300 })
	if got := fsm2.Count(); got != 300 {
		t.Errorf("replayed FSM count = %d, want 300", got)
	}
	apply(r2, 301, 301)
	if err := r2.Shutdown().Error(); err != nil {
		t.Fatalf("Shutdown: %v", err)
	}
	if got, _ := w.LastIndex(); got <= lastBefore {
		t.Errorf("LastIndex after the second run = %d, want > %d", got, lastBefore)
	}
}

// FuzzWALOpen: any bytes as the only segment open to an error or to a valid prefix
// of them, never a panic; what opens takes appends and reopens the same.
func FuzzWALOpen(f *testing.F) {
	var valid []byte
	for i := uint64(1); i <= 6; i++ {
		valid = walAppendRecord(valid, testRaftLog(i))
	}
	f.Add(valid)
	f.Add(valid[:len(valid)-3])
	f.Add(append(bytes.Clone(valid), 0, 0, 0, 9, 1))
	flipped := bytes.Clone(valid)
	flipped[20] ^= 4
	f.Add(flipped)
	f.Add([]byte{})
	f.Add([]byte{0, 0, 0, 7})
	f.Add(walAppendRecord(nil, &raft.Log{Index: 2}))
	f.Fuzz(func(t *testing.T, data []byte) {
		// The payload decoder alone: the CRC keeps most mutations away from it.
		var dec raft.Log
		if err := walDecodePayload(data, &dec); err == nil {
			var again raft.Log
			if err := walDecodeRecord(walAppendRecord(nil, &dec), &again); err != nil {
				t.Fatalf("re-encoded entry does not decode: %v", err)
			}
			checkRaftLogEqual(t, &again, &dec)
		} else if !errors.Is(err, walErrCorrupt) && !errors.Is(err, walErrVersion) {
			t.Fatalf("walDecodePayload error %v is neither walErrCorrupt nor walErrVersion", err)
		}

		dir := walFuzzTempDir(t)
		if err := walWriteMeta(dir, 0); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, walSegName(1))
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		// With evidence (index 3 committed): a cut never reaches index 3, and a
		// refusal changes nothing.
		if w, err := OpenRaftWAL(dir, 3); err == nil {
			if tr, ok := w.Truncation(); ok && tr.Index <= 3 {
				t.Fatalf("committed 3, but the open cut from index %d", tr.Index)
			}
			w.Close()
			if err := os.WriteFile(path, data, 0o600); err != nil { // undo the cut for the open below
				t.Fatal(err)
			}
		} else if errors.Is(err, ErrWALCommitted) {
			if kept, _ := os.ReadFile(path); !bytes.Equal(kept, data) {
				t.Fatalf("a refused open changed the segment")
			}
		}
		w, err := OpenRaftWAL(dir, 0)
		if err != nil {
			if !errors.Is(err, walErrCorrupt) && !errors.Is(err, walErrVersion) {
				t.Fatalf("OpenRaftWAL error %v is neither walErrCorrupt nor walErrVersion", err)
			}
			return
		}
		defer w.Close()
		first, _ := w.FirstIndex()
		last, _ := w.LastIndex()
		if (last == 0) != (first == 0) || (last != 0 && first != 1) {
			t.Fatalf("bounds %d..%d", first, last)
		}
		if last > 0 {
			kept, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !bytes.HasPrefix(data, kept) {
				t.Fatalf("the segment after recovery (%d bytes) is not a prefix of the input", len(kept))
			}
		}
		for i := first; i <= last && i != 0; i++ {
			var l raft.Log
			if err := w.GetLog(i, &l); err != nil {
				t.Fatalf("GetLog(%d): %v", i, err)
			}
		}
		if err := w.StoreLog(&raft.Log{Index: last + 1, Term: 1, Data: []byte("next")}); err != nil {
			t.Fatalf("StoreLog(%d) after recovery: %v", last+1, err)
		}
		w.Close()
		w2, err := OpenRaftWAL(dir, 0)
		if err != nil {
			t.Fatalf("reopen after recovery: %v", err)
		}
		defer w2.Close()
		if got, _ := w2.LastIndex(); got != last+1 {
			t.Fatalf("LastIndex after reopen = %d, want %d", got, last+1)
		}
	})
}

// walFuzzTempDir is a fresh directory on tmpfs if there is one. The fuzz target
// checks parsing and recovery, not durability, and an fsync on a disk costs more
// than the rest of an execution: the fuzzer's minimisation of a single input
// could take all of a 20 s run.
func walFuzzTempDir(t *testing.T) string {
	t.Helper()
	if fi, err := os.Stat("/dev/shm"); err == nil && fi.IsDir() {
		if dir, err := os.MkdirTemp("/dev/shm", "raftwal-fuzz-"); err == nil {
			t.Cleanup(func() { os.RemoveAll(dir) })
			return dir
		}
	}
	return t.TempDir()
}

func BenchmarkWALStoreLogs(b *testing.B) {
	data := bytes.Repeat([]byte("x"), 1024)
	for _, batch := range []int{1, 64} {
		b.Run(fmt.Sprintf("batch=%d", batch), func(b *testing.B) {
			w := walOpenTest(b, b.TempDir())
			logs := make([]*raft.Log, batch)
			for i := range logs {
				logs[i] = &raft.Log{Term: 1, Type: raft.LogCommand, Data: data, AppendedAt: time.Now()}
			}
			b.SetBytes(int64(batch * len(data)))
			b.ReportAllocs()
			next := uint64(1)
			for b.Loop() {
				for _, l := range logs {
					l.Index = next
					next++
				}
				if err := w.StoreLogs(logs); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(next-1), "ns/entry")
		})
	}
}

// The states a crash can leave between the steps of a DeleteRange: wal.meta
// raised but segments not yet removed, or one of several removals lost.
func TestRaftWAL_InterruptedDelete(t *testing.T) {
	// The log: 1..100 in ten segments of ten entries.
	setup := func(t *testing.T) string {
		dir := t.TempDir()
		w := walOpenTest(t, dir)
		w.segmentSize = 1
		walStoreTest(t, w, 1, 100, 10)
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
		return dir
	}
	t.Run("prefix: meta raised, segments still there", func(t *testing.T) {
		dir := setup(t)
		if err := walWriteMeta(dir, 36); err != nil {
			t.Fatal(err)
		}
		w := walOpenTest(t, dir)
		walCheckBounds(t, w, 36, 100)
		walCheckLogs(t, w, 36, 100, testRaftLog)
		walCheckAbsent(t, w, 1, 10, 31, 35)
		if got, want := walSegmentBases(t, dir), []uint64{31, 41, 51, 61, 71, 81, 91}; !slices.Equal(got, want) {
			t.Errorf("segments %v after recovery, want %v", got, want)
		}
	})
	t.Run("prefix: a segment below first damaged, never read", func(t *testing.T) {
		dir := setup(t)
		if err := walWriteMeta(dir, 36); err != nil {
			t.Fatal(err)
		}
		walEditFile(t, filepath.Join(dir, walSegName(11)), func(b []byte) []byte { return b[:7] })
		w := walOpenTest(t, dir)
		walCheckBounds(t, w, 36, 100)
	})
	t.Run("everything: meta masks all, segments still there", func(t *testing.T) {
		dir := setup(t)
		if err := walWriteMeta(dir, 101); err != nil {
			t.Fatal(err)
		}
		w := walOpenTest(t, dir)
		walCheckBounds(t, w, 0, 0)
		walCheckAbsent(t, w, 1, 100)
		if got := walSegmentBases(t, dir); len(got) != 0 {
			t.Errorf("segments %v left in an empty log", got)
		}
		// The next entry may be below the masked ones (a follower installing an
		// older snapshot): wal.meta comes down with it.
		walStoreTest(t, w, 40, 45, 3)
		w = walReopenTest(t, w)
		walCheckBounds(t, w, 40, 45)
		walCheckLogs(t, w, 40, 45, testRaftLog)
	})
	t.Run("empty log: stray segment from a failed removal is swept", func(t *testing.T) {
		dir := setup(t)
		w := walOpenTest(t, dir)
		stray, err := os.ReadFile(filepath.Join(dir, walSegName(31)))
		if err != nil {
			t.Fatal(err)
		}
		if err := w.DeleteRange(1, 100); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, walSegName(31)), stray, 0o600); err != nil {
			t.Fatal(err)
		}
		walStoreTest(t, w, 20, 22, 3)
		w = walReopenTest(t, w)
		walCheckBounds(t, w, 20, 22)
		walCheckLogs(t, w, 20, 22, testRaftLog)
		if got, want := walSegmentBases(t, dir), []uint64{20}; !slices.Equal(got, want) {
			t.Errorf("segments %v, want %v", got, want)
		}
	})
	t.Run("suffix: later segments gone, the cut not made", func(t *testing.T) {
		dir := setup(t)
		for _, b := range []uint64{91, 81, 71, 61, 51} { // DeleteRange(45, 100) stopped before the ftruncate
			if err := os.Remove(filepath.Join(dir, walSegName(b))); err != nil {
				t.Fatal(err)
			}
		}
		w := walOpenTest(t, dir)
		walCheckBounds(t, w, 1, 50)
		walCheckLogs(t, w, 1, 50, testRaftLog)
	})
}

// A record damaged under an open store is an error from GetLog, never a panic or
// a wrong entry.
func TestRaftWAL_GetLogCorrupt(t *testing.T) {
	dir := t.TempDir()
	w := walOpenTest(t, dir)
	w.recentEntries = 1 // only entry 3 is served from memory
	walStoreTest(t, w, 1, 3, 3)
	path := walLastSegment(t, dir)
	offs, lens := walRecordSpans(t, path)
	f, err := os.OpenFile(path, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	// Record 2 gets the bytes of a record for index 9 of the same size (valid
	// CRC, wrong index); record 1 gets a flipped byte.
	moved := walAppendRecord(nil, &raft.Log{Index: 9, Term: testRaftLog(2).Term, Type: testRaftLog(2).Type, Data: testRaftLog(2).Data, Extensions: testRaftLog(2).Extensions, AppendedAt: testRaftLog(2).AppendedAt})
	if int64(len(moved)) != lens[1] {
		t.Fatalf("replacement record is %d bytes, want %d", len(moved), lens[1])
	}
	if _, err := f.WriteAt(moved, offs[1]); err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte{0xee}, offs[0]+lens[0]-1); err != nil {
		t.Fatal(err)
	}
	f.Close()
	for _, idx := range []uint64{1, 2} {
		var l raft.Log
		if err := w.GetLog(idx, &l); !errors.Is(err, walErrCorrupt) {
			t.Errorf("GetLog(%d) of a damaged record = %v, want walErrCorrupt", idx, err)
		}
	}
	walCheckLogs(t, w, 3, 3, testRaftLog)
}

func TestWALDecodePayload_Corrupt(t *testing.T) {
	rec := walAppendRecord(nil, &raft.Log{Index: 7, Term: 3, Type: raft.LogCommand, Data: []byte("data"), Extensions: []byte("e"), AppendedAt: time.Unix(1, 2)})
	valid := rec[walHeaderSize:]
	tests := []struct {
		name    string
		payload []byte
		wantErr error
	}{
		{"empty", nil, walErrCorrupt},
		{"version 0", append([]byte{0}, valid[1:]...), walErrVersion},
		{"version 2", append([]byte{2}, valid[1:]...), walErrVersion},
		{"trailing byte", append(bytes.Clone(valid), 0), walErrCorrupt},
		{"unknown flag", []byte{1, 1, 1, 0, 2, 0, 0}, walErrCorrupt},
		{"nanos out of range", append([]byte{1, 1, 1, 0, 1, 0}, append(binary.AppendUvarint(nil, 1e9), 0, 0)...), walErrCorrupt},
		{"data length beyond the payload", []byte{1, 1, 1, 0, 0, 5, 'a', 0}, walErrCorrupt},
		{"data length overflows int", append([]byte{1, 1, 1, 0, 0}, binary.AppendUvarint(nil, 1<<63+5)...), walErrCorrupt},
		{"varint overflow", []byte{1, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 1, 0, 0, 0, 0}, walErrCorrupt},
		{"extensions missing", []byte{1, 1, 1, 0, 0, 0}, walErrCorrupt},
	}
	for n := 1; n < len(valid); n++ {
		tests = append(tests, struct {
			name    string
			payload []byte
			wantErr error
		}{fmt.Sprintf("truncated to %d bytes", n), valid[:n], walErrCorrupt})
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := raft.Log{Index: 123}
			if err := walDecodePayload(tt.payload, &l); !errors.Is(err, tt.wantErr) {
				t.Fatalf("walDecodePayload(%x) = %v, want %v", tt.payload, err, tt.wantErr)
			}
			if l.Index != 123 {
				t.Errorf("walDecodePayload wrote into the log on failure: %+v", l)
			}
		})
	}
	var l raft.Log
	if err := walDecodePayload([]byte{1, 1, 1, 0, 0, 0, 0}, &l); err != nil || l.Index != 1 || l.Term != 1 {
		t.Errorf("walDecodePayload(minimal) = %+v, %v; want index 1 term 1", l, err)
	}
	// Whole records: the length must match and the checksum cover the length.
	bad := bytes.Clone(rec)
	bad[3]++
	for _, r := range [][]byte{rec[:5], bad, append(bytes.Clone(rec), 0)} {
		if err := walDecodeRecord(r, &l); !errors.Is(err, walErrCorrupt) {
			t.Errorf("walDecodeRecord(%x) = %v, want walErrCorrupt", r, err)
		}
	}
}
