package storage

// State format 4: a session's rows are keyed by its number.
//
// Formats 2 and 3 key a session's hot record, request results, cwd index
// entry and index blocks by its id. Ids are what clients choose, often
// random UUIDs: every new session then inserts into the middle of each of
// those trees, whose pages bbolt leaves about two-thirds full, and every row
// repeats the id. Format 4 gives each session a number when its record is
// first stored (meta/next_session, counted up in apply order, so every
// replica assigns the same numbers) and keys those rows by it: a new
// session's rows go to the right edge of each tree, whose pages are packed
// full, and its request results sit in one flat tree instead of a bucket
// of their own per session.
//
//	records/<id>                          <number:8 BE> | cold record | CRC-32C:4 BE (id and all before)
//	counters/<number:8 BE>                the hot record (framelog.go; its CRC still covers the id)
//	requests/<number:8 BE>k<request id>   <order:8 BE><time ms:8 BE><encoded result> (q/k's value)
//	requests/<number:8 BE>o<order:8 BE>   <request id>
//	requests/<number:8 BE>n               <next order:8 BE><bytes of the k entries:8 BE>
//	cwds/<cwd>\x00<number:8 BE>           <id>: the cwd index of List
//	blocks/<number:8 BE><block:8 BE>      index block (framelog.go; its CRC still covers id and incarnation)
//
// log/ (the frames) is format 3's, unchanged. A session deleted and created
// again gets a new number. ConvertLayout{layout: 4} (command version 10)
// rewrites a format-2 or -3 state's rows in one pass (ConvertLayout4); the
// frames stay where they are.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
)

var (
	bucketRecords  = []byte("records")
	bucketCounters = []byte("counters")
	bucketRequests = []byte("requests")
	bucketCwds     = []byte("cwds")
	bucketBlocks   = []byte("blocks")

	keyNextSession = []byte("next_session")
)

// numbered reports whether sessions' rows are keyed by number (format 4).
func (t *Tx) numbered() bool { return t.layout >= 4 }

// Fill of the trees keyed by number: new sessions append at their right
// edge, so a split leaves the left page full. Counters grow in place (a
// frame's tail entry per append): they keep a little room.
const (
	fillAppended = 1.0
	fillCounters = 0.9
)

func encodeRecord4(id string, num uint64, cold []byte) []byte {
	b := make([]byte, 0, 8+len(cold)+4)
	b = binary.BigEndian.AppendUint64(b, num)
	b = append(b, cold...)
	return binary.BigEndian.AppendUint32(b, recordSum(id, b))
}

// decodeRecord4 returns a records/ value's number and cold record; ok is
// false when it fails its checksum.
func decodeRecord4(id string, v []byte) (num uint64, cold []byte, ok bool) {
	if len(v) < 12 {
		return 0, nil, false
	}
	body := v[:len(v)-4]
	if binary.BigEndian.Uint32(v[len(v)-4:]) != recordSum(id, body) {
		return 0, nil, false
	}
	return binary.BigEndian.Uint64(body), body[8:], true
}

// record4 reads a session's number and verified cold record (found false:
// no record).
func (t *Tx) record4(id string) (num uint64, cold []byte, found bool, err error) {
	if id == "" {
		return 0, nil, false, nil
	}
	v := t.tx.Bucket(bucketRecords).Get([]byte(id))
	if v == nil {
		return 0, nil, false, nil
	}
	num, cold, ok := decodeRecord4(id, v)
	if !ok {
		return 0, nil, false, t.fail(&ChecksumError{Session: id, Seq: -1, What: "session record"})
	}
	return num, cold, true, nil
}

// sessionNum is a session's number (format 4; found false: no record).
func (t *Tx) sessionNum(id string) (num uint64, found bool, err error) {
	if n, ok := t.nums[id]; ok {
		return n, true, nil
	}
	if h, ok := t.hots[id]; ok && h.num != 0 {
		return h.num, true, nil
	}
	num, _, found, err = t.record4(id)
	return num, found, err
}

// mintNum hands out the next session number.
func (t *Tx) mintNum() (uint64, error) {
	n := getU64(t.meta().Get(keyNextSession))
	if n == 0 {
		n = 1 // 0 is "no number" in hot
	}
	return n, t.meta().Put(keyNextSession, u64(n+1))
}

// putRecord4 stores a session's cold record (minting its number when it has
// none) and stages its hot record.
func (t *Tx) putRecord4(id string, cold, hotPart []byte) error {
	num, found, err := t.sessionNum(id)
	if err != nil {
		return err
	}
	if !found {
		if num, err = t.mintNum(); err != nil {
			return err
		}
	}
	prev, staged := t.colds[id]
	if found && !staged {
		if _, prev, _, err = t.record4(id); err != nil {
			return err
		}
	}
	if !found || !bytes.Equal(prev, cold) {
		if err := t.tx.Bucket(bucketRecords).Put([]byte(id), encodeRecord4(id, num, cold)); err != nil {
			return err
		}
	}
	if !staged || !bytes.Equal(prev, cold) {
		t.stageCold(id, cold)
	}
	t.stageNum(id, num)
	h, _, err := t.hotNum(id, num)
	if err != nil {
		return err
	}
	h.fsm = hotPart
	return t.putHot2(id, h)
}

// stageNum remembers a session's number for the rest of the transaction (for
// the deferred batches, of the commit period).
func (t *Tx) stageNum(id string, num uint64) {
	if t.nums == nil {
		t.nums = map[string]uint64{}
	}
	t.nums[id] = num
}

func cwdKey4(cwd string, num uint64) []byte {
	k := make([]byte, 0, len(cwd)+9)
	return binary.BigEndian.AppendUint64(append(append(k, cwd...), 0), num)
}

// indexCwd4 is IndexCwd in format 4. Removing needs the session's number:
// it comes before DeleteSession.
func (t *Tx) indexCwd4(id, cwd string, remove bool) error {
	num, found, err := t.sessionNum(id)
	if err != nil || !found {
		return err
	}
	b := t.tx.Bucket(bucketCwds)
	if remove {
		return b.Delete(cwdKey4(cwd, num))
	}
	b.FillPercent = fillAppended
	return b.Put(cwdKey4(cwd, num), []byte(id))
}

// sessionsUnderCwd4 is SessionsUnderCwd in format 4 (unsorted).
func (t *Tx) sessionsUnderCwd4(prefix string) []string {
	var ids []string
	c := t.tx.Bucket(bucketCwds).Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		if n := len(k) - 9; n >= len(prefix) && k[n] == 0 {
			ids = append(ids, string(v))
		}
	}
	return ids
}

func blockKey4(num, block uint64) []byte {
	return binary.BigEndian.AppendUint64(u64(num), block)
}

// indexBlockAt is where index block b of a session is: its bucket and key.
func (t *Tx) indexBlockAt(id string, inc, num, block uint64) (*bbolt.Bucket, []byte) {
	if t.numbered() {
		return t.tx.Bucket(bucketBlocks), blockKey4(num, block)
	}
	return t.tx.Bucket(bucketIndex), blockKey(id, inc, block)
}

// reqTable is one session's request results: the keys of a bucket of its
// own (formats 1 to 3: q/k…, q/o…, q/n, q/b), or in format 4 the keys of
// requests/ under its number, where n also holds what b held.
type reqTable struct {
	b      *bbolt.Bucket
	prefix []byte // format 4: the session's number
}

func (r reqTable) key(sub []byte) []byte {
	if r.prefix == nil {
		return sub
	}
	return append(slices.Clip(r.prefix), sub...)
}

func (r reqTable) get(sub []byte) []byte              { return r.b.Get(r.key(sub)) }
func (r reqTable) put(sub, v []byte) error            { return r.b.Put(r.key(sub), v) }
func (r reqTable) del(sub []byte) error               { return r.b.Delete(r.key(sub)) }
func (r reqTable) merged() bool                       { return r.prefix != nil }
func (r reqTable) cursor() *reqCursor                 { return &reqCursor{r: r, c: r.b.Cursor()} }
func (r reqTable) within(k []byte) []byte             { return k[len(r.prefix):] }
func (r reqTable) owns(k []byte) bool                 { return k != nil && bytes.HasPrefix(k, r.prefix) }
func (c *reqCursor) seek(sub []byte) ([]byte, []byte) { return c.out(c.c.Seek(c.r.key(sub))) }
func (c *reqCursor) next() ([]byte, []byte)           { return c.out(c.c.Next()) }

// reqCursor walks a reqTable's keys, without its prefix (nil past its last).
type reqCursor struct {
	r reqTable
	c *bbolt.Cursor
}

func (c *reqCursor) out(k, v []byte) ([]byte, []byte) {
	if !c.r.owns(k) {
		return nil, nil
	}
	return c.r.within(k), v
}

// reqs returns a session's request table; ok is false when it has none
// (and create is false). The session must have a record.
func (t *Tx) reqs(id string, create bool) (reqTable, bool, error) {
	if !t.numbered() {
		b, err := t.sub(id, bucketReqs, create)
		if err != nil || b == nil {
			return reqTable{}, false, err
		}
		return reqTable{b: b}, true, nil
	}
	num, found, err := t.sessionNum(id)
	if err != nil {
		return reqTable{}, false, err
	}
	if !found {
		return reqTable{}, false, fmt.Errorf("session %q has no record", id)
	}
	r := reqTable{b: t.tx.Bucket(bucketRequests), prefix: u64(num)}
	if !create && r.get(keyReqNext) == nil {
		return reqTable{}, false, nil
	}
	r.b.FillPercent = fillAppended
	return r, true, nil
}

// deleteRows4 removes a session's counters and request results (format 4).
func (t *Tx) deleteRows4(id string, num uint64) error {
	delete(t.nums, id)
	if err := t.tx.Bucket(bucketCounters).Delete(u64(num)); err != nil {
		return err
	}
	b := t.tx.Bucket(bucketRequests)
	c := b.Cursor()
	for k, _ := c.Seek(u64(num)); k != nil && bytes.HasPrefix(k, u64(num)); k, _ = c.Seek(u64(num)) {
		if err := b.Delete(bytes.Clone(k)); err != nil {
			return err
		}
	}
	return t.tx.Bucket(bucketRecords).Delete([]byte(id))
}

// ConvertLayout4 rewrites a layout-2 state (format 2 or 3) in format 4, in
// one pass: sessions are numbered in id order; the hot records, request
// results and index blocks move under the numbers with their stored bytes
// (their checksums cover the id, not the key); the cold records are
// verified and stored with their number; the cwd index is keyed anew. The
// frames stay where they are. Damage met on the way (a record or a request
// table that does not read) stops the conversion, and the node, rather
// than carry it into the new format.
//
// It returns how many sessions it numbered.
func (t *Tx) ConvertLayout4() (int, error) {
	n, err := t.convertLayout4()
	if err != nil {
		return 0, err
	}
	if err := t.meta().Put(keyFormat, u64(4)); err != nil {
		return 0, err
	}
	t.layout = 4
	return n, nil
}

// FinishFormat5 marks a format-4 state as state format 5: format 4 whose
// session records keep their title (fsm). Nothing stored here changes; the
// number is what makes an older build refuse the state and its snapshots,
// since it would leave the titles behind.
func (t *Tx) FinishFormat5() error {
	if !t.numbered() {
		return fmt.Errorf("state format 5 needs format 4 first (this state is in format %d)", t.layout)
	}
	if err := t.meta().Put(keyFormat, u64(5)); err != nil {
		return err
	}
	t.layout = 5
	return nil
}

func (t *Tx) convertLayout4() (int, error) {
	if t.layout < 2 {
		return 0, fmt.Errorf("state format 4 needs layout 2 first (this state is in layout %d)", t.layout)
	}
	if t.numbered() {
		return 0, nil
	}
	// Hot records staged by earlier commands go where this pass reads them.
	if err := t.flushHot(); err != nil {
		return 0, err
	}
	nb := map[string]*bbolt.Bucket{}
	for _, name := range [][]byte{bucketRecords, bucketCounters, bucketRequests, bucketCwds, bucketBlocks} {
		b, err := t.tx.CreateBucket(name)
		if err != nil {
			return 0, fmt.Errorf("bucket %s: %w", name, err)
		}
		b.FillPercent = fillAppended
		nb[string(name)] = b
	}
	nb[string(bucketCounters)].FillPercent = fillCounters
	nums := map[string]uint64{}
	next := uint64(1)
	hotB, reqsB := t.tx.Bucket(bucketHot), t.tx.Bucket(bucketReqsTop)
	c := t.sessions().Cursor()
	for k, v := c.First(); k != nil; k, v = c.Next() {
		id := string(k)
		b := t.sessions().Bucket(k)
		if v != nil || b == nil {
			return 0, fmt.Errorf("session %q: a value where layout 2 keeps a bucket", id)
		}
		cold, err := t.checkRecord(id, b)
		if err != nil {
			return 0, fmt.Errorf("session %q: %w", id, err)
		}
		if cold == nil {
			continue
		}
		num := next
		next++
		nums[id] = num
		if err := nb[string(bucketRecords)].Put(k, encodeRecord4(id, num, cold)); err != nil {
			return 0, err
		}
		if hv := hotB.Get(k); hv != nil {
			if err := nb[string(bucketCounters)].Put(u64(num), hv); err != nil {
				return 0, err
			}
		}
		if rb := reqsB.Bucket(k); rb != nil {
			if err := convertReqs4(rb, reqTable{b: nb[string(bucketRequests)], prefix: u64(num)}); err != nil {
				return 0, fmt.Errorf("session %q: %w", id, err)
			}
		}
	}
	err := t.tx.Bucket(bucketCwd).ForEach(func(k, v []byte) error {
		n := len(k) - len(v) - 1
		num, ok := nums[string(v)]
		if n < 0 || k[n] != 0 || !bytes.Equal(k[n+1:], v) || !ok {
			return nil // not an entry of a stored session: List never returned it
		}
		return nb[string(bucketCwds)].Put(cwdKey4(string(k[:n]), num), v)
	})
	if err != nil {
		return 0, err
	}
	err = t.tx.Bucket(bucketIndex).ForEach(func(k, v []byte) error {
		if len(k) < 4 {
			return nil
		}
		l := int(binary.BigEndian.Uint32(k))
		if len(k) != 4+l+16 {
			return nil
		}
		num, ok := nums[string(k[4:4+l])]
		if !ok {
			return nil
		}
		return nb[string(bucketBlocks)].Put(blockKey4(num, binary.BigEndian.Uint64(k[4+l+8:])), v)
	})
	if err != nil {
		return 0, err
	}
	for _, name := range [][]byte{bucketSessions, bucketHot, bucketReqsTop, bucketCwd, bucketIndex} {
		if err := t.tx.DeleteBucket(name); err != nil {
			return 0, fmt.Errorf("bucket %s: %w", name, err)
		}
	}
	return int(next - 1), t.meta().Put(keyNextSession, u64(next))
}

// convertReqs4 copies a session's request table into format 4's: the k and
// o entries as they are, n with the size of the k entries.
func convertReqs4(from *bbolt.Bucket, to reqTable) error {
	total := requestBytes(reqTable{b: from})
	err := from.ForEach(func(k, v []byte) error {
		if len(k) == 0 || (k[0] != 'k' && k[0] != 'o') {
			return nil
		}
		return to.put(k, v)
	})
	if err != nil {
		return err
	}
	next := from.Get(keyReqNext)
	if len(next) != 8 {
		if len(next) != 0 {
			return errors.New("request table: next order is not 8 bytes")
		}
		next = u64(0)
	}
	return to.put(keyReqNext, append(bytes.Clone(next), u64(total)...))
}

// forEachSession4 is forEachSession in format 4: records/ in id order, each
// record and its counters verified when check is set (else the cold record
// alone, as stored).
func (t *Tx) forEachSession4(after string, exclusive, check bool, fn func(id string, rec []byte) error) error {
	c := t.tx.Bucket(bucketRecords).Cursor()
	k, v := c.First()
	if after != "" {
		k, v = c.Seek([]byte(after))
		if exclusive && k != nil && string(k) == after {
			k, v = c.Next()
		}
	}
	for ; k != nil; k, v = c.Next() {
		id := string(k)
		if !check {
			cold := v
			if len(v) >= 12 {
				cold = v[8 : len(v)-4]
			}
			if err := fn(id, cold); err != nil {
				if errors.Is(err, ErrStop) {
					return nil
				}
				return err
			}
			continue
		}
		num, cold, ok := decodeRecord4(id, v)
		if !ok {
			return t.fail(&ChecksumError{Session: id, Seq: -1, What: "session record"})
		}
		h, found, err := t.hotNum(id, num)
		if err != nil {
			return err
		}
		if !found {
			return t.fail(&ChecksumError{Session: id, Seq: -1, What: "session counters (missing)"})
		}
		rec := make([]byte, 0, len(cold)+len(h.fsm))
		if err := fn(id, append(append(rec, cold...), h.fsm...)); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}
