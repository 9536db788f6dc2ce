package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"testing"

	"go.etcd.io/bbolt"
)

// openLayout2 returns a new state database converted to layout 2.
func openLayout2(t *testing.T) *StateDB { return openLayout(t, 2) }

// openLayout returns a new state database converted to state format 2, 3 or 4.
func openLayout(t *testing.T, format int) *StateDB {
	t.Helper()
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	err = s.Update(func(tx *Tx) error {
		if err := tx.PrepareLayout2(); err != nil {
			return err
		}
		if err := tx.FinishLayout2(); err != nil {
			return err
		}
		if format >= 3 {
			if err := tx.FinishLayout3(); err != nil {
				return err
			}
		}
		if format >= 4 {
			_, err := tx.ConvertLayout4()
			return err
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// hotRow is where a session's hot record is stored: its bucket and key.
func hotRow(t *testing.T, tx *Tx, id string) (*bbolt.Bucket, []byte) {
	t.Helper()
	if !tx.numbered() {
		return tx.hotBucket(), []byte(id)
	}
	num, found, err := tx.sessionNum(id)
	if err != nil || !found {
		t.Fatalf("session %q: no number (%v)", id, err)
	}
	return tx.tx.Bucket(bucketCounters), u64(num)
}

// testEvent is event seq as the event log has it, a little longer as seq
// grows, so that frames hold events of several sizes.
func testEvent(seq int64) []byte {
	return fmt.Appendf(nil, `{"type":"step/start","seq":%d,"time":%d,"data":{"turn":1,"step":%d,"note":"%s"}}`,
		seq, 1780000000000+seq, seq, bytes.Repeat([]byte{'x'}, int(seq%7)))
}

// appendFrames stores frames of the given sizes for session id, one Raft
// entry per transaction of perTx frames, and returns the events by seq.
func appendFrames(t *testing.T, s *StateDB, id string, inc uint64, sizes []int, index *uint64) [][]byte {
	t.Helper()
	var all [][]byte
	err := s.Update(func(tx *Tx) error {
		if !tx.HasSession(id) {
			if err := tx.PutRecord(id, []byte("cold"), []byte("hot")); err != nil {
				return err
			}
		}
		for _, n := range sizes {
			*index++
			tx.BeginEntry(*index)
			h, _, err := tx.hot2(id)
			if err != nil {
				return err
			}
			var evs [][]byte
			for i := range n {
				evs = append(evs, testEvent(h.end+int64(i)))
			}
			if err := tx.AppendFrame(id, inc, h.frames+1, h.end, evs); err != nil {
				return err
			}
			all = append(all, evs...)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return all
}

func TestLayout2ReadsEveryRange(t *testing.T) {
	for _, format := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { testLayout2ReadsEveryRange(t, format) })
	}
}

func testLayout2ReadsEveryRange(t *testing.T, format int) {
	s := openLayout(t, format)
	var index uint64
	rng := rand.New(rand.NewPCG(1, 2))
	var sizes []int
	for range 3*indexBlock + 5 { // three index blocks and a tail
		sizes = append(sizes, 1+rng.IntN(3))
	}
	// Another session of the same incarnation (created by the same Raft
	// entry) in between: keys interleave in the log, blocks must not mix.
	var want, wantB [][]byte
	for i := 0; i < len(sizes); i += 10 {
		want = append(want, appendFrames(t, s, "a", 7, sizes[i:min(i+10, len(sizes))], &index)...)
		wantB = append(wantB, appendFrames(t, s, "b", 7, []int{2, 1, 1, 1, 1, 1, 1, 1, 1, 1}, &index)...)
	}
	end := int64(len(want))
	err := s.View(func(tx *Tx) error {
		for from := int64(0); from <= end; from++ {
			for _, to := range []int64{from, from + 1, from + 5, end} {
				if to > end {
					continue
				}
				got, err := tx.Events("a", 7, from, to)
				if err != nil {
					return fmt.Errorf("[%d,%d): %w", from, to, err)
				}
				if len(got) != int(to-from) {
					return fmt.Errorf("[%d,%d): %d events", from, to, len(got))
				}
				for i, ev := range got {
					if !bytes.Equal(ev, want[from+int64(i)]) {
						return fmt.Errorf("[%d,%d): seq %d = %q, want %q", from, to, from+int64(i), ev, want[from+int64(i)])
					}
				}
			}
		}
		if got, err := tx.Events("b", 7, 0, int64(len(wantB))); err != nil || !bytes.Equal(got[len(got)-1], wantB[len(wantB)-1]) {
			return fmt.Errorf("the other session: %v", err)
		}
		// Frame ends: from the index, the tail, and the list.
		ends := tx.FrameEnds("a", 7)
		if len(ends) != len(sizes) {
			return fmt.Errorf("%d frame ends, want %d", len(ends), len(sizes))
		}
		e := int64(0)
		for n, size := range sizes {
			e += int64(size)
			if ends[n] != e || tx.FrameEnd("a", 7, uint64(n+1)) != e {
				return fmt.Errorf("frame %d ends at %d / %d, want %d", n+1, ends[n], tx.FrameEnd("a", 7, uint64(n+1)), e)
			}
		}
		// Past the end is missing, never silently short.
		var ce *ChecksumError
		if _, err := tx.Events("a", 7, 0, end+1); !errors.As(err, &ce) {
			return fmt.Errorf("read past the end: %v, want a missing event", err)
		}
		// The wrong incarnation fails every checksum.
		if _, err := tx.Events("a", 8, 0, 1); !errors.As(err, &ce) {
			return fmt.Errorf("read under another incarnation: %v", err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayout2RecordIsColdThenHot(t *testing.T) {
	for _, format := range []int{2, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { testRecordIsColdThenHot(t, format) })
	}
}

func testRecordIsColdThenHot(t *testing.T, format int) {
	s := openLayout(t, format)
	err := s.Update(func(tx *Tx) error {
		if err := tx.PutRecord("s", []byte("C1"), []byte("H1")); err != nil {
			return err
		}
		if err := tx.PutRecord("s", []byte("C1"), []byte("H2")); err != nil {
			return err
		}
		rec, err := tx.Record("s")
		if err != nil || string(rec) != "C1H2" {
			return fmt.Errorf("record %q, %v; want C1H2", rec, err)
		}
		var seen []string
		err = tx.ForEachSession("", false, func(id string, rec []byte) error {
			seen = append(seen, id+"="+string(rec))
			return nil
		})
		if err != nil || fmt.Sprint(seen) != "[s=C1H2]" {
			return fmt.Errorf("sessions %v, %v", seen, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayout2DeleteRemovesFramesAndIndex(t *testing.T) {
	for _, format := range []int{2, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { testDeleteRemovesFramesAndIndex(t, format) })
	}
}

func testDeleteRemovesFramesAndIndex(t *testing.T, format int) {
	s := openLayout(t, format)
	var index uint64
	sizes := make([]int, 2*indexBlock+3)
	for i := range sizes {
		sizes[i] = 2
	}
	appendFrames(t, s, "gone", 3, sizes, &index)
	keep := appendFrames(t, s, "kept", 4, []int{1, 2}, &index)
	err := s.Update(func(tx *Tx) error {
		if err := tx.PutRequestResult("gone", "req-1", 1, []byte("answer"), true); err != nil {
			return err
		}
		if err := tx.PutRequestResult("kept", "req-1", 1, []byte("answer"), true); err != nil {
			return err
		}
		if err := tx.IndexCwd("gone", "/w", false); err != nil {
			return err
		}
		// The cwd entry goes first, as fsm removes it: format 4 finds it by
		// the session's number.
		if err := tx.IndexCwd("gone", "/w", true); err != nil {
			return err
		}
		return tx.DeleteSession("gone", 3)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.View(func(tx *Tx) error {
		want := map[string]int{"log": 2, "ix": 0, "hot": 1, "cwd": 0}
		if format >= 4 {
			// The kept session's request result: k, o and n.
			want = map[string]int{"log": 2, "blocks": 0, "counters": 1, "cwds": 0, "records": 1, "requests": 3}
		}
		for name, want := range want {
			n := tx.tx.Bucket([]byte(name)).Stats().KeyN
			if n != want {
				return fmt.Errorf("bucket %s holds %d keys after the delete, want %d", name, n, want)
			}
		}
		if tx.HasSession("gone") {
			return errors.New("session still has a bucket")
		}
		got, err := tx.Events("kept", 4, 0, 3)
		if err != nil || len(got) != 3 || !bytes.Equal(got[2], keep[2]) {
			return fmt.Errorf("the other session: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// storedAt returns the offset in frame value v of event i's stored bytes.
func storedAt(t *testing.T, v []byte, i int) int {
	t.Helper()
	fp, err := parseFrame(v)
	if err != nil {
		t.Fatal(err)
	}
	off := len(v)
	for _, st := range fp.stored[i:] {
		off -= len(st)
	}
	return off
}

func TestLayout2DamageIsFoundAndRepaired(t *testing.T) {
	for _, format := range []int{2, 3, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { testLayout2DamageIsFoundAndRepaired(t, format) })
	}
}

func testLayout2DamageIsFoundAndRepaired(t *testing.T, format int) {
	s := openLayout(t, format)
	var index uint64
	want := appendFrames(t, s, "s", 5, []int{2, 3}, &index)
	// Flip a byte of events 3 and 4 in their frame (packed ones in format 3).
	err := s.Update(func(tx *Tx) error {
		h, _, _ := tx.hot2("s")
		lb := tx.tx.Bucket(bucketLog)
		v := bytes.Clone(lb.Get(h.last[:]))
		fp, err := parseFrame(v)
		if err != nil {
			return err
		}
		if packed := fp.version == framePacked && fp.sizes[1] > 0 && fp.sizes[2] > 0; packed != (format >= 3) {
			return fmt.Errorf("format %d wrote frame version %d, sizes %v", format, fp.version, fp.sizes)
		}
		v[storedAt(t, v, 1)+2] ^= 0x20
		v[storedAt(t, v, 2)+4] ^= 0x08
		return lb.Put(h.last[:], v)
	})
	if err != nil {
		t.Fatal(err)
	}
	err = s.Update(func(tx *Tx) error {
		var ce *ChecksumError
		if _, err := tx.Events("s", 5, 0, 5); !errors.As(err, &ce) || ce.Seq != 3 || ce.What != "event" {
			return fmt.Errorf("read of a flipped event: %v, want event 3 failing its checksum", err)
		}
		if _, err := tx.Events("s", 5, 0, 3); err != nil {
			return fmt.Errorf("events before the damage: %v", err)
		}
		if ok, err := tx.RepairEvent("s", 5, 3, []byte("other bytes")); ok || err != nil {
			return fmt.Errorf("repair with other bytes: %v, %v", ok, err)
		}
		for _, seq := range []int64{3, 4} {
			if ok, err := tx.RepairEvent("s", 5, seq, want[seq]); !ok || err != nil {
				return fmt.Errorf("repair of %d with the stored checksum's bytes: %v, %v", seq, ok, err)
			}
			if ok, err := tx.RepairEvent("s", 5, seq, want[seq]); ok || err != nil {
				return fmt.Errorf("repair of the repaired %d: %v, %v", seq, ok, err)
			}
		}
		got, err := tx.Events("s", 5, 0, 5)
		if err != nil || !bytes.Equal(got[3], want[3]) || !bytes.Equal(got[4], want[4]) {
			return fmt.Errorf("after the repairs: %q, %v", got, err)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// A lost hot record is damage, not an empty session.
	err = s.Update(func(tx *Tx) error {
		b, k := hotRow(t, tx, "s")
		v := bytes.Clone(b.Get(k))
		if err := b.Delete(k); err != nil {
			return err
		}
		var ce *ChecksumError
		if _, err := tx.Record("s"); !errors.As(err, &ce) {
			return fmt.Errorf("record without its hot part: %v, want a checksum error", err)
		}
		return b.Put(k, v)
	})
	if err != nil {
		t.Fatal(err)
	}
	// A damaged frame header, a damaged hot record: errors, not panics.
	hotName := bucketHot
	if format >= 4 {
		hotName = bucketCounters
	}
	for _, bucket := range [][]byte{bucketLog, hotName} {
		err = s.Update(func(tx *Tx) error {
			c := tx.tx.Bucket(bucket).Cursor()
			k, v := c.Last()
			v = bytes.Clone(v)
			v[5] ^= 0xff
			return tx.tx.Bucket(bucket).Put(bytes.Clone(k), v)
		})
		if err != nil {
			t.Fatal(err)
		}
		var ce *ChecksumError
		err = s.View(func(tx *Tx) error { _, err := tx.Events("s", 5, 0, 5); return err })
		if !errors.As(err, &ce) {
			t.Fatalf("damaged %s: %v, want a checksum error", bucket, err)
		}
	}
}

func TestSessionsUnderCwd(t *testing.T) {
	for _, format := range []int{2, 4} {
		t.Run(fmt.Sprintf("format %d", format), func(t *testing.T) { testSessionsUnderCwd(t, format) })
	}
}

func testSessionsUnderCwd(t *testing.T, format int) {
	s := openLayout(t, format)
	err := s.Update(func(tx *Tx) error {
		for _, e := range []struct{ id, cwd string }{
			{"z", "/w/a"}, {"y", "/w/a/b"}, {"x", "/w/ab"}, {"w", "/v"}, {"v\x00w", "/w/a"}, {"u", "/w"}, {"t\x00", "/w/a\x00"},
		} {
			if err := tx.PutRecord(e.id, []byte("cold"), []byte("hot")); err != nil {
				return err
			}
			if err := tx.IndexCwd(e.id, e.cwd, false); err != nil {
				return err
			}
		}
		for prefix, want := range map[string]string{
			"/w/a": "[t\x00 v\x00w x y z]", "/w/a/": "[y]", "/v": "[w]", "/none": "[]", "": "[t\x00 u v\x00w w x y z]",
			"/w/a\x00": "[t\x00]",
		} {
			if got := fmt.Sprint(tx.SessionsUnderCwd(prefix)); got != want {
				return fmt.Errorf("under %q: %q, want %q", prefix, got, want)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func TestLayout1HasNoCwdIndex(t *testing.T) {
	s, err := OpenState(filepath.Join(t.TempDir(), "state.db"), StateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	err = s.Update(func(tx *Tx) error {
		if tx.Layout() != 1 || tx.CwdIndexed() {
			return fmt.Errorf("a new file is layout %d (indexed %v), want 1 until converted", tx.Layout(), tx.CwdIndexed())
		}
		return tx.IndexCwd("s", "/w", false)
	})
	if err != nil {
		t.Fatal(err)
	}
	_ = s.View(func(tx *Tx) error {
		if tx.tx.Bucket(bucketCwd) != nil {
			t.Error("layout 1 wrote a cwd index")
		}
		return nil
	})
}

func FuzzFrameDecode(f *testing.F) {
	for _, packed := range []bool{false, true} {
		f.Add(encodeFrame(7, [][]byte{[]byte("a"), []byte(`{"x":1}`)}, []uint32{1, 2}, packed))
		f.Add(encodeFrame(0, [][]byte{nil}, []uint32{0}, packed))
		f.Add(encodeFrame(0, nil, nil, packed)) // no events: refused
		f.Add(encodeFrame(3, [][]byte{[]byte(`{"type":"step/start","seq":3,"time":1780000000000,"data":{"turn":1,"step":1}}`),
			[]byte(`{"type":"turn/end","seq":4,"time":1780000000001,"data":{"turn":1,"reason":{"kind":"completed"}}}`)}, []uint32{5, 6}, packed))
	}
	f.Add([]byte{1})
	f.Add([]byte{2})
	f.Fuzz(func(t *testing.T, v []byte) {
		fp, err := parseFrame(v)
		if err != nil {
			return
		}
		// What parses encodes back to the same bytes.
		if got := fp.encode(); !bytes.Equal(got, v) {
			t.Fatalf("re-encoded %x, was %x", got, v)
		}
		fr, err := decodeFrame(v)
		if err != nil {
			t.Fatalf("parses but does not decode: %v", err)
		}
		for i, ev := range fr.events {
			if ev == nil && fp.sizes[i] == 0 && len(fp.stored[i]) > 0 {
				t.Fatalf("event %d is stored as is and decodes to nil", i)
			}
			if ev != nil && fp.sizes[i] > 0 && uint64(len(ev)) != fp.sizes[i] {
				t.Fatalf("event %d unpacks to %d bytes, the header says %d", i, len(ev), fp.sizes[i])
			}
		}
	})
}

func FuzzIndexBlockDecode(f *testing.F) {
	es := make([]blockEntry, indexBlock)
	for i := range es {
		es[i] = blockEntry{key: makeFrameKey(uint64(10+i), 0), count: int64(i + 1)}
	}
	f.Add(encodeBlock("s", 1, 0, 0, es), "s")
	f.Add([]byte("short"), "")
	f.Fuzz(func(t *testing.T, v []byte, id string) {
		first, got, ok := decodeBlock(id, 1, 0, v)
		if !ok {
			return
		}
		if re := encodeBlock(id, 1, 0, first, got); !bytes.Equal(re, v) {
			t.Fatalf("re-encoded %x, was %x", re, v)
		}
	})
}

// hotOf builds a hot record by appending the frames es one after another.
func hotOf(es []blockEntry, fsm string) hot {
	h := hot{fsm: []byte(fsm)}
	for _, e := range es {
		h.tail = h.appendTail(e.key, e.count)
		h.frames, h.end, h.last = h.frames+1, h.end+e.count, e.key
	}
	return h
}

// An append adds one entry to the stored tail; what decodes is what was
// appended, and a tail whose last entry is not the last frame is damage.
func TestHotTailAppends(t *testing.T) {
	var es []blockEntry
	for i := range indexBlock - 1 {
		es = append(es, blockEntry{makeFrameKey(uint64(10+i*i*1000), uint32(i%3)), int64(1 + i%4)})
	}
	for n := 0; n < len(es); n++ {
		h := hotOf(es[:n], "fsm")
		got, ok := decodeHot("s", encodeHot("s", h))
		if !ok {
			t.Fatalf("%d entries: does not decode", n)
		}
		if e := got.tailEntries(); len(e) != n || n > 0 && !slices.Equal(e, es[:n]) {
			t.Fatalf("%d entries: decoded %v, want %v", n, e, es[:n])
		}
		if got.frames != uint64(n) || got.last != h.last || string(got.fsm) != "fsm" {
			t.Fatalf("%d entries: decoded %+v", n, got)
		}
	}
	h := hotOf(es[:3], "")
	h.last = makeFrameKey(99, 0)
	if _, ok := decodeHot("s", encodeHot("s", h)); ok {
		t.Error("a tail that does not end at the last frame decoded")
	}
}

func FuzzHotDecode(f *testing.F) {
	f.Add(encodeHot("s", hotOf([]blockEntry{{makeFrameKey(2, 0), 1}, {makeFrameKey(3, 7), 5}, {makeFrameKey(4, 2), 3}}, "x")), "s")
	f.Add(encodeHot("s", hot{}), "s")
	f.Add([]byte{1, 2, 3}, "s")
	f.Fuzz(func(t *testing.T, v []byte, id string) {
		h, ok := decodeHot(id, v)
		if !ok {
			return
		}
		if re := encodeHot(id, h); !bytes.Equal(re, v) {
			t.Fatalf("re-encoded %x, was %x", re, v)
		}
	})
}

// The layout's point: one-event appends of many sessions in one
// transaction dirty few pages (bbolt's own count of written pages).
func TestLayout2GroupCommitWritesFewPages(t *testing.T) {
	s := openLayout2(t)
	const sessions = 256
	var index uint64
	ev := bytes.Repeat([]byte("y"), 1024)
	write := func() int64 {
		var pages int64
		err := s.Update(func(tx *Tx) error {
			st := tx.tx.Stats()
			before := st.GetWrite()
			for i := range sessions {
				id := fmt.Sprintf("session-%04d", i)
				if !tx.HasSession(id) {
					if err := tx.PutRecord(id, []byte("cold"), []byte("hot")); err != nil {
						return err
					}
				}
				h, _, _ := tx.hot2(id)
				index++
				tx.BeginEntry(index)
				if err := tx.AppendFrame(id, 1, h.frames+1, h.end, [][]byte{ev}); err != nil {
					return err
				}
				if err := tx.PutRecord(id, []byte("cold"), fmt.Appendf(nil, "hot%d", h.end)); err != nil {
					return err
				}
			}
			tx.tx.OnCommit(func() { st := tx.tx.Stats(); pages = st.GetWrite() - before })
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		return pages
	}
	for range 5 {
		write() // past the first pages of every bucket
	}
	pages := write()
	// 256 KiB of events fill ~70 pages; the hot records of 256 sessions a
	// few more, plus branches and meta.
	t.Logf("%d pages written for %d one-event appends", pages, sessions)
	if per := float64(pages) / sessions; per > 0.6 {
		t.Fatalf("%d pages written for %d one-event appends (%.2f per event), want at most 0.6", pages, sessions, per)
	}
}

// uvarint takes only the shortest encoding of a value, so that what decodes
// encodes back to the same bytes (the fuzz targets' round trip).
func TestUvarintShortestOnly(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 300, 1 << 21, 1<<63 + 5} {
		b := binary.AppendUvarint(nil, v)
		if got, n := uvarint(b); n != len(b) || got != v {
			t.Errorf("uvarint(%x) = %d, %d; want %d, %d", b, got, n, v, len(b))
		}
		if len(b) == binary.MaxVarintLen64 {
			continue // no longer encoding exists
		}
		// The same value padded with a zero group: one byte longer.
		long := append(bytes.Clone(b), 0)
		long[len(b)-1] |= 0x80
		if v, n := binary.Uvarint(long); n != len(long) {
			t.Fatalf("padding %x: binary.Uvarint = %d, %d", long, v, n)
		}
		if _, n := uvarint(long); n > 0 {
			t.Errorf("uvarint(%x) accepted a longer encoding of %d", long, v)
		}
	}
	if _, n := uvarint([]byte{0x80}); n > 0 {
		t.Error("uvarint accepted a truncated encoding")
	}
}
