package storage

// Layout 2 (state format 2): events are stored in apply order, once.
//
// An applied Append (or repair) of one session is one frame: a value under
// log/<raft index:8 BE><position in the entry:4 BE>, so a group commit of many
// sessions appends to the right edge of one B+tree and fills its pages
// sequentially, instead of dirtying a tail page per session. A session's
// hot record (hot/<id>) holds the counters an append changes and the keys of
// its frames since its last index block; every indexBlock frames those keys
// move to an index block (ix/<len(id):4 BE><id><incarnation:8 BE><block:8 BE>),
// so a read finds any seq in O(log frames) lookups, and an append writes the
// frame, the hot record (whose page it shares with other sessions') and, once
// per indexBlock frames, a block. The cold record (header, lease, plan state)
// stays under sessions/<id>/r, which an append no longer rewrites.
//
// Frame value:
//
//	version:1 (=1) | first seq:uvarint | count:uvarint
//	| count × (len:uvarint | event checksum:4 BE) | header CRC-32C:4 BE | event bytes...
//
// The header CRC covers everything before it; each event keeps the checksum
// of layout 1 (checksum.go), so a damaged event is named by its seq and can be
// rewritten from an artifact (RepairEvent).
//
// State format 3 writes frames of version 2, whose events may be packed
// (eventcodec.go):
//
//	version:1 (=2) | first seq:uvarint | count:uvarint
//	| count × (stored len<<1 | packed:uvarint | [packed: size:uvarint] | event checksum:4 BE)
//	| header CRC-32C:4 BE | stored bytes...
//
// A packed event's stored bytes unpack to size bytes; its checksum is that
// of the unpacked event, as in version 1. Both versions are read in every
// format from 2 on: format 3 changes only what new appends write.
//
// Index block value:
//
//	first seq:8 BE | indexBlock × (frame key:12 | count:uvarint) | CRC-32C:4 BE (id, incarnation, block, all before)
//
// Hot record value:
//
//	version:1 (=1) | frames:8 BE | end seq:8 BE | last frame key:12
//	| tail count:uvarint | tail count × (index delta:uvarint | position:uvarint | events:uvarint)
//	| fsm part length:uvarint | fsm's hot part | CRC-32C:4 BE (id and all before)
//
// fsm's hot part is an encoded record holding only the fields an append
// changes; Record returns the cold record followed by it, which protobuf reads
// as one record (later fields win), so readers above storage see one record.

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"

	"go.etcd.io/bbolt"
)

// indexBlock is how many frames one index block lists: the hot record holds
// up to indexBlock-1 frame keys; an append writes a block (a page of its own
// session) once per indexBlock frames.
const indexBlock = 32

const (
	frameKeyLen  = 12
	frameVersion = 1
	// framePacked is the frame version whose events may be packed.
	framePacked = 2
	hotVersion  = 1
	hotFixed    = 1 + 8 + 8 + frameKeyLen + 1 + 1 + 4 // with an empty tail and fsm part
)

var (
	bucketLog   = []byte("log")
	bucketIndex = []byte("ix")
	bucketHot   = []byte("hot")
	bucketCwd   = []byte("cwd")
	// bucketReqsTop holds one bucket of request results per session.
	bucketReqsTop = []byte("reqs")
)

// frameKey is a frame's key: the Raft index that applied it and its position.
type frameKey [frameKeyLen]byte

func (k frameKey) zero() bool { return k == frameKey{} }

func makeFrameKey(index uint64, pos uint32) frameKey {
	var k frameKey
	binary.BigEndian.PutUint64(k[:8], index)
	binary.BigEndian.PutUint32(k[8:], pos)
	return k
}

// hot is the storage part of a session's hot record.
type hot struct {
	frames uint64   // frames stored (the artifact's frames after the header)
	end    int64    // seq after the last stored event
	last   frameKey // the last frame (zero: none)
	// tail lists the frames after the last index block (frames % indexBlock
	// of them) as the record stores them, so that an append adds one entry
	// without decoding the others (tailEntries decodes them).
	tail []byte
	fsm  []byte // fsm's part, opaque
	num  uint64 // format 4: the session's number, its key (not stored in the value)
}

// tailLen is the number of entries in the tail.
func (h hot) tailLen() int { return int(h.frames % indexBlock) }

// appendTail adds the frame at key holding count events to the tail, whose
// last entry (if any) is h.last: each key is stored as the delta of its Raft
// index from the previous entry's (a session's frames are a few entries
// apart) and its position, a few bytes each.
func (h hot) appendTail(key frameKey, count int64) []byte {
	prev := uint64(0)
	if h.tailLen() > 0 {
		prev = binary.BigEndian.Uint64(h.last[:8])
	}
	b := slices.Clip(h.tail) // may alias a page or a staged record: never write in place
	b = binary.AppendUvarint(b, binary.BigEndian.Uint64(key[:8])-prev)
	b = binary.AppendUvarint(b, uint64(binary.BigEndian.Uint32(key[8:])))
	return binary.AppendUvarint(b, uint64(count))
}

// tailEntries decodes the tail (checked by decodeHot, or built by appendTail).
func (h hot) tailEntries() []blockEntry {
	es, _, _, _ := scanTail(h.tail, h.tailLen(), true)
	return es
}

// scanTail reads n tail entries at the start of b: their end and the last
// entry's key, and the entries when want is set; ok is false when they do
// not parse.
func scanTail(b []byte, n int, want bool) (es []blockEntry, end int, last frameKey, ok bool) {
	if want {
		es = make([]blockEntry, 0, n)
	}
	prev := uint64(0)
	for range n {
		d, k1 := uvarint(b[end:])
		if k1 <= 0 {
			return nil, 0, last, false
		}
		pos, k2 := uvarint(b[end+k1:])
		if k2 <= 0 || pos > 1<<32-1 {
			return nil, 0, last, false
		}
		c, k3 := uvarint(b[end+k1+k2:])
		if k3 <= 0 || c == 0 || c > 1<<40 {
			return nil, 0, last, false
		}
		end += k1 + k2 + k3
		prev += d
		last = makeFrameKey(prev, uint32(pos))
		if want {
			es = append(es, blockEntry{key: last, count: int64(c)})
		}
	}
	return es, end, last, true
}

func encodeHot(id string, h hot) []byte {
	b := make([]byte, 0, hotFixed+8+len(h.tail)+len(h.fsm))
	b = append(b, hotVersion)
	b = binary.BigEndian.AppendUint64(b, h.frames)
	b = binary.BigEndian.AppendUint64(b, uint64(h.end))
	b = append(b, h.last[:]...)
	b = binary.AppendUvarint(b, uint64(h.tailLen()))
	b = append(b, h.tail...)
	b = binary.AppendUvarint(b, uint64(len(h.fsm)))
	b = append(b, h.fsm...)
	return binary.BigEndian.AppendUint32(b, crc32Update(crc32Update(0, idPrefix(id)), b))
}

// uvarint is binary.Uvarint that also refuses a value not in its shortest
// encoding (n <= 0), so that what decodes encodes back to the same bytes.
func uvarint(b []byte) (uint64, int) {
	v, n := binary.Uvarint(b)
	if n > 1 && b[n-1] == 0 { // a longer encoding ends in a zero group
		return 0, -1
	}
	return v, n
}

func decodeHot(id string, v []byte) (hot, bool) {
	if len(v) < hotFixed || v[0] != hotVersion {
		return hot{}, false
	}
	body := v[:len(v)-4]
	if binary.BigEndian.Uint32(v[len(v)-4:]) != crc32Update(crc32Update(0, idPrefix(id)), body) {
		return hot{}, false
	}
	h := hot{frames: binary.BigEndian.Uint64(v[1:]), end: int64(binary.BigEndian.Uint64(v[9:]))}
	copy(h.last[:], v[17:17+frameKeyLen])
	p := 17 + frameKeyLen
	n, k := uvarint(body[p:])
	if k <= 0 || n >= indexBlock || n != h.frames%indexBlock {
		return hot{}, false
	}
	p += k
	// The tail's last entry is the last frame (appendTail counts on it).
	_, end, last, ok := scanTail(body[p:], int(n), false)
	if !ok || n > 0 && last != h.last {
		return hot{}, false
	}
	h.tail = body[p : p+end]
	p += end
	l, k := uvarint(body[p:])
	if k <= 0 || uint64(len(body)-p-k) != l {
		return hot{}, false
	}
	h.fsm = body[p+k:]
	return h, true
}

// frame is a decoded frame: events stored as they are alias the stored
// value, packed ones are unpacked into memory of their own.
type frame struct {
	first  int64
	events [][]byte // nil: a packed event that does not unpack (damage)
	sums   []uint32
}

// frameParts is a frame as stored: what decodeFrame unpacks and a repair
// rewrites one event of.
type frameParts struct {
	version byte // frameVersion or framePacked
	first   int64
	stored  [][]byte // each event's stored bytes, aliasing the value
	sizes   []uint64 // a packed event's unpacked size; 0: stored as is
	sums    []uint32 // checksums of the unpacked events
}

// encodeFrame encodes events first.. with their checksums; packed selects
// version 2 (state format 3), which packs each event that shrinks.
func encodeFrame(first int64, events [][]byte, sums []uint32, packed bool) []byte {
	fp := frameParts{version: frameVersion, first: first, stored: events, sums: sums}
	if packed {
		fp.version = framePacked
		fp.stored, fp.sizes = make([][]byte, len(events)), make([]uint64, len(events))
		for i, ev := range events {
			fp.setEvent(i, ev)
		}
	}
	return fp.encode()
}

// setEvent stores ev as event i of a packed frame: packed when it shrinks.
func (fp *frameParts) setEvent(i int, ev []byte) {
	fp.stored[i], fp.sizes[i] = ev, 0
	if p, ok := PackedEvent(ev); ok {
		fp.stored[i], fp.sizes[i] = p, uint64(len(ev))
	}
}

func (fp frameParts) encode() []byte {
	size := 1 + 20 + 4
	for _, st := range fp.stored {
		size += 14 + len(st)
	}
	b := make([]byte, 0, size)
	b = append(b, fp.version)
	b = binary.AppendUvarint(b, uint64(fp.first))
	b = binary.AppendUvarint(b, uint64(len(fp.stored)))
	for i, st := range fp.stored {
		switch {
		case fp.version == frameVersion:
			b = binary.AppendUvarint(b, uint64(len(st)))
		case fp.sizes[i] > 0:
			b = binary.AppendUvarint(b, uint64(len(st))<<1|1)
			b = binary.AppendUvarint(b, fp.sizes[i])
		default:
			b = binary.AppendUvarint(b, uint64(len(st))<<1)
		}
		b = binary.BigEndian.AppendUint32(b, fp.sums[i])
	}
	b = binary.BigEndian.AppendUint32(b, crc32Update(0, b))
	for _, st := range fp.stored {
		b = append(b, st...)
	}
	return b
}

var errFrame = errors.New("malformed frame")

// parseFrame parses a frame value of either version; a header that fails its
// CRC or does not parse is errFrame.
func parseFrame(v []byte) (frameParts, error) {
	var fp frameParts
	if len(v) < 1+2+4 || (v[0] != frameVersion && v[0] != framePacked) {
		return fp, errFrame
	}
	fp.version = v[0]
	p := 1
	first, n := uvarint(v[p:])
	if n <= 0 || first > 1<<62 {
		return fp, errFrame
	}
	p += n
	count, n := uvarint(v[p:])
	if n <= 0 || count == 0 || count > uint64(len(v)) {
		return fp, errFrame
	}
	p += n
	lens := make([]uint64, count)
	fp.sizes = make([]uint64, count)
	fp.sums = make([]uint32, count)
	total, unpacked := uint64(0), uint64(0)
	for i := range lens {
		l, n := uvarint(v[p:])
		if n <= 0 || len(v)-p-n < 4 {
			return fp, errFrame
		}
		p += n
		if fp.version == framePacked {
			if l&1 == 1 {
				size, n := uvarint(v[p:])
				if n <= 0 || len(v)-p-n < 4 || size == 0 || size > maxPackedEvent-unpacked {
					return fp, errFrame
				}
				p += n
				fp.sizes[i], unpacked = size, unpacked+size
			}
			l >>= 1
		}
		if l > uint64(len(v)) {
			return fp, errFrame
		}
		lens[i], total = l, total+l
		fp.sums[i] = binary.BigEndian.Uint32(v[p:])
		p += 4
	}
	if len(v)-p < 4 || binary.BigEndian.Uint32(v[p:]) != crc32Update(0, v[:p]) {
		return fp, errFrame
	}
	p += 4
	if uint64(len(v)-p) != total {
		return fp, errFrame
	}
	fp.first = int64(first)
	fp.stored = make([][]byte, count)
	for i, l := range lens {
		fp.stored[i] = v[p : p+int(l) : p+int(l)]
		p += int(l)
	}
	return fp, nil
}

// events unpacks the stored events (nil for one that does not unpack).
func (fp frameParts) events() [][]byte {
	total := uint64(0)
	for _, s := range fp.sizes {
		total += s
	}
	var buf []byte
	if total > 0 {
		buf = make([]byte, total)
	}
	evs := make([][]byte, len(fp.stored))
	for i, st := range fp.stored {
		size := int(fp.sizes[i])
		if size == 0 {
			evs[i] = st
			continue
		}
		evs[i], _ = unpackEvent(buf[:size:size], st, size)
		buf = buf[size:]
	}
	return evs
}

// decodeFrame parses and unpacks a frame value. Event bytes are not
// verified here (eventSum does).
func decodeFrame(v []byte) (frame, error) {
	fp, err := parseFrame(v)
	if err != nil {
		return frame{}, err
	}
	return frame{first: fp.first, events: fp.events(), sums: fp.sums}, nil
}

// blockEntry is one frame of an index block.
type blockEntry struct {
	key   frameKey
	count int64
}

// blockKey names index block b of a session incarnation. The id is part of
// it: sessions created by one Raft entry share their incarnation.
func blockKey(id string, inc uint64, block uint64) []byte {
	k := idPrefix(id)
	k = binary.BigEndian.AppendUint64(k, inc)
	return binary.BigEndian.AppendUint64(k, block)
}

func encodeBlock(id string, inc, block uint64, first int64, es []blockEntry) []byte {
	b := make([]byte, 0, 8+len(es)*(frameKeyLen+3)+4)
	b = binary.BigEndian.AppendUint64(b, uint64(first))
	for _, e := range es {
		b = append(b, e.key[:]...)
		b = binary.AppendUvarint(b, uint64(e.count))
	}
	return binary.BigEndian.AppendUint32(b, blockSum(id, inc, block, b))
}

func blockSum(id string, inc, block uint64, b []byte) uint32 {
	s := crc32Update(0, binary.BigEndian.AppendUint64(binary.BigEndian.AppendUint64(idPrefix(id), inc), block))
	return crc32Update(s, b)
}

func decodeBlock(id string, inc, block uint64, v []byte) (int64, []blockEntry, bool) {
	if len(v) < 12 || binary.BigEndian.Uint32(v[len(v)-4:]) != blockSum(id, inc, block, v[:len(v)-4]) {
		return 0, nil, false
	}
	first := int64(binary.BigEndian.Uint64(v))
	body := v[8 : len(v)-4]
	es := make([]blockEntry, 0, indexBlock)
	for len(body) > 0 {
		if len(body) < frameKeyLen+1 {
			return 0, nil, false
		}
		var e blockEntry
		copy(e.key[:], body)
		c, n := binary.Uvarint(body[frameKeyLen:])
		if n <= 0 || c == 0 || c > 1<<40 {
			return 0, nil, false
		}
		e.count = int64(c)
		es = append(es, e)
		body = body[frameKeyLen+n:]
	}
	if len(es) != indexBlock {
		return 0, nil, false
	}
	return first, es, true
}

// framePos is where one frame of a session is and the seqs it holds.
type framePos struct {
	n     uint64 // frame number, from 1
	key   frameKey
	first int64
	count int64 // events in the frame
}

func (t *Tx) hotBucket() *bbolt.Bucket { return t.tx.Bucket(bucketHot) }

// hot2 reads a session's hot record; a missing one is a zero hot with ok
// false; one that fails its checksum is a *ChecksumError.
func (t *Tx) hot2(id string) (hot, bool, error) {
	if h, ok := t.hots[id]; ok {
		return h, true, nil
	}
	if t.numbered() {
		num, found, err := t.sessionNum(id)
		if err != nil || !found {
			return hot{}, false, err
		}
		return t.hotNum(id, num)
	}
	b := t.hotBucket()
	if b == nil {
		return hot{}, false, nil
	}
	v := b.Get([]byte(id))
	if v == nil {
		return hot{}, false, nil
	}
	h, ok := decodeHot(id, v)
	if !ok {
		return hot{}, false, t.fail(&ChecksumError{Session: id, Seq: -1, What: "session counters"})
	}
	return h, true, nil
}

// hotNum is hot2 in format 4 for a session whose number is known; a missing
// record is a zero hot with that number.
func (t *Tx) hotNum(id string, num uint64) (hot, bool, error) {
	if h, ok := t.hots[id]; ok {
		return h, true, nil
	}
	v := t.tx.Bucket(bucketCounters).Get(u64(num))
	if v == nil {
		return hot{num: num}, false, nil
	}
	h, ok := decodeHot(id, v)
	if !ok {
		return hot{}, false, t.fail(&ChecksumError{Session: id, Seq: -1, What: "session counters"})
	}
	h.num = num
	return h, true, nil
}

// stageCold keeps a copy of a session's verified cold record for the
// deferred batches of one commit period (Tx.stage), so that the next append
// of the session finds it without a lookup and writes it only if it changed.
// Only the FSM's deferred transactions stage: a reader's transaction would
// pay the copy and never use it.
func (t *Tx) stageCold(id string, cold []byte) {
	if !t.stage {
		return
	}
	if t.colds == nil {
		t.colds = map[string][]byte{}
	}
	t.colds[id] = bytes.Clone(cold)
}

// putHot2 stages a session's hot record; flushHot writes it once per
// transaction (per commit of deferred batches), however many commands
// changed it (an append changes it twice: the frame, then the record).
func (t *Tx) putHot2(id string, h hot) error {
	if t.hots == nil {
		t.hots = map[string]hot{}
	}
	// They may alias a page of this transaction.
	h.fsm, h.tail = bytes.Clone(h.fsm), bytes.Clone(h.tail)
	t.hots[id] = h
	return nil
}

// flushHot writes the staged hot records (before a commit: StateDB.Update,
// or for deferred batches StateDB.commitLocked).
func (t *Tx) flushHot() error {
	if len(t.hots) == 0 {
		return nil
	}
	if t.numbered() {
		b := t.tx.Bucket(bucketCounters)
		b.FillPercent = fillCounters
		for id, h := range t.hots {
			if h.num == 0 {
				return fmt.Errorf("session %q: counters without a session number", id)
			}
			if err := b.Put(u64(h.num), encodeHot(id, h)); err != nil {
				return err
			}
		}
		t.hots = nil
		return nil
	}
	b := t.hotBucket()
	for id, h := range t.hots {
		if err := b.Put([]byte(id), encodeHot(id, h)); err != nil {
			return err
		}
	}
	t.hots = nil
	return nil
}

// appendFrame2 stores events first.. of incarnation inc as frame n of id
// under the current entry's next frame key, links it, and indexes every
// indexBlock frames.
func (t *Tx) appendFrame2(id string, inc, n uint64, first int64, events [][]byte) error {
	if t.entryIndex == 0 {
		return errors.New("append frame: no Raft entry begun (Tx.BeginEntry)")
	}
	h, _, err := t.hot2(id)
	if err != nil {
		return err
	}
	if h.frames+1 != n || h.end != first {
		return fmt.Errorf("append frame %d at seq %d to session %q: stored frames %d end at seq %d", n, first, id, h.frames, h.end)
	}
	key := makeFrameKey(t.entryIndex, t.entryPos)
	t.entryPos++
	base := sessionSum(id, inc)
	sums := make([]uint32, len(events))
	for i, ev := range events {
		sums[i] = eventSum(base, first+int64(i), ev)
	}
	lb := t.tx.Bucket(bucketLog)
	lb.FillPercent = 1.0 // keys only grow: pack pages full
	if err := lb.Put(key[:], encodeFrame(first, events, sums, t.layout >= 3)); err != nil {
		return err
	}
	h.tail = h.appendTail(key, int64(len(events)))
	h.frames, h.end, h.last = n, first+int64(len(events)), key
	if h.tailLen() == 0 { // the tail holds indexBlock frames: they become a block
		if err := t.writeBlock(id, inc, h); err != nil {
			return err
		}
		h.tail = nil
	}
	return t.putHot2(id, h)
}

// writeBlock writes h's tail, a full indexBlock of frames ending with h's
// last frame, as the session's next index block.
func (t *Tx) writeBlock(id string, inc uint64, h hot) error {
	es, _, _, _ := scanTail(h.tail, indexBlock, true)
	first := h.end
	for _, e := range es {
		first -= e.count
	}
	block := h.frames/indexBlock - 1
	b, k := t.indexBlockAt(id, inc, h.num, block)
	return b.Put(k, encodeBlock(id, inc, block, first, es))
}

// frameAt reads and parses the frame at key of session id.
func (t *Tx) frameAt(id string, key frameKey) (frame, error) {
	v := t.tx.Bucket(bucketLog).Get(key[:])
	if v == nil {
		return frame{}, t.fail(&ChecksumError{Session: id, Seq: -1, What: "missing frame"})
	}
	f, err := decodeFrame(v)
	if err != nil {
		return frame{}, t.fail(&ChecksumError{Session: id, Seq: -1, What: "frame"})
	}
	return f, nil
}

// block reads index block b of a session.
func (t *Tx) block(id string, inc uint64, h hot, b uint64) (int64, []blockEntry, error) {
	ib, k := t.indexBlockAt(id, inc, h.num, b)
	v := ib.Get(k)
	first, es, ok := decodeBlock(id, inc, b, v)
	if !ok {
		return 0, nil, t.fail(&ChecksumError{Session: id, Seq: -1, What: "frame index"})
	}
	return first, es, nil
}

// framesFrom lists the frames of a session that hold seqs >= from (all when
// from <= 0), in order, up to the frame holding seq to-1.
func (t *Tx) framesFrom(id string, inc uint64, h hot, from, to int64) ([]framePos, error) {
	blocks := h.frames / indexBlock
	indexed := blocks * indexBlock
	// The tail: the frames after the last block, listed in the hot record.
	es := h.tailEntries()
	tail := make([]framePos, len(es))
	tailFirst := h.end
	for _, e := range es {
		tailFirst -= e.count
	}
	first := tailFirst
	for i, e := range es {
		tail[i] = framePos{n: indexed + uint64(i) + 1, key: e.key, first: first, count: e.count}
		first += e.count
	}
	if from >= tailFirst || blocks == 0 {
		return trimFrames(tail, from, to), nil
	}
	// The last block whose first seq is <= from.
	lo, hi := uint64(0), blocks-1
	for lo < hi {
		mid := (lo + hi + 1) / 2
		first, _, err := t.block(id, inc, h, mid)
		if err != nil {
			return nil, err
		}
		if first <= from {
			lo = mid
		} else {
			hi = mid - 1
		}
	}
	var out []framePos
	for b := lo; b < blocks; b++ {
		first, es, err := t.block(id, inc, h, b)
		if err != nil {
			return nil, err
		}
		if first >= to {
			break
		}
		for i, e := range es {
			out = append(out, framePos{n: b*indexBlock + uint64(i) + 1, key: e.key, first: first, count: e.count})
			first += e.count
		}
	}
	return trimFrames(append(out, tail...), from, to), nil
}

// trimFrames keeps the frames that hold a seq in [from, to).
func trimFrames(fs []framePos, from, to int64) []framePos {
	i := 0
	for i < len(fs) && fs[i].first+fs[i].count <= from {
		i++
	}
	j := i
	for j < len(fs) && fs[j].first < to {
		j++
	}
	return fs[i:j]
}

// forEachEvent2 is ForEachEvent for layout 2.
func (t *Tx) forEachEvent2(id string, inc uint64, from, to int64, fn func(seq int64, ev []byte) error) error {
	h, _, err := t.hot2(id)
	if err != nil {
		return err
	}
	if from < 0 {
		from = 0
	}
	if from >= to {
		return nil
	}
	if to > h.end {
		return t.fail(&ChecksumError{Session: id, Seq: h.end, What: "missing event"})
	}
	fs, err := t.framesFrom(id, inc, h, from, to)
	if err != nil {
		return err
	}
	w := t.walkEvents(id, inc, from, fn)
	for _, p := range fs {
		f, err := t.frameAt(id, p.key)
		if err != nil {
			return err
		}
		if f.first != p.first || int64(len(f.events)) != p.count || len(f.events) == 0 {
			return t.fail(&ChecksumError{Session: id, Seq: p.first, What: "frame"})
		}
		for i, ev := range f.events {
			seq := f.first + int64(i)
			if seq < w.want {
				continue
			}
			if seq >= to {
				return nil
			}
			if done, err := w.visit(seq, ev, f.sums[i]); done {
				return err
			}
		}
	}
	return w.end(to)
}

// frameEnd2 is FrameEnd for layout 2.
func (t *Tx) frameEnd2(id string, inc uint64, n uint64) int64 {
	h, _, err := t.hot2(id)
	if err != nil || n == 0 || n > h.frames {
		return 0
	}
	blocks := h.frames / indexBlock
	if b := (n - 1) / indexBlock; b < blocks {
		first, es, err := t.block(id, inc, h, b)
		if err != nil {
			return 0
		}
		for i := uint64(0); i <= (n-1)%indexBlock; i++ {
			first += es[i].count
		}
		return first
	}
	// A tail frame: count back from the end.
	end := h.end
	es := h.tailEntries()
	for i := len(es) - 1; uint64(i) > n-1-blocks*indexBlock; i-- {
		end -= es[i].count
	}
	return end
}

// frameEnds2 is FrameEnds for layout 2.
func (t *Tx) frameEnds2(id string, inc uint64) []int64 {
	h, _, err := t.hot2(id)
	if err != nil || h.frames == 0 {
		return nil
	}
	fs, err := t.framesFrom(id, inc, h, 0, h.end)
	if err != nil {
		return nil
	}
	out := make([]int64, len(fs))
	for i, p := range fs {
		out[i] = p.first + p.count
	}
	return out
}

// allFrameKeys lists every frame key of a session (for delete).
func (t *Tx) allFrameKeys(id string, inc uint64, h hot) ([]frameKey, error) {
	var keys []frameKey
	for b := uint64(0); b < h.frames/indexBlock; b++ {
		_, es, err := t.block(id, inc, h, b)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			keys = append(keys, e.key)
		}
	}
	for _, e := range h.tailEntries() {
		keys = append(keys, e.key)
	}
	return keys, nil
}

// deleteSession2 removes a session's frames, index blocks, hot record, cwd
// index entry and bucket.
func (t *Tx) deleteSession2(id string, inc uint64) error {
	h, ok, err := t.hot2(id)
	if err == nil && ok {
		keys, err := t.allFrameKeys(id, inc, h)
		if err != nil {
			return err
		}
		lb := t.tx.Bucket(bucketLog)
		for _, k := range keys {
			if err := lb.Delete(k[:]); err != nil {
				return err
			}
		}
		for b := uint64(0); b < h.frames/indexBlock; b++ {
			ib, k := t.indexBlockAt(id, inc, h.num, b)
			if err := ib.Delete(k); err != nil {
				return err
			}
		}
	}
	delete(t.hots, id)
	delete(t.colds, id)
	delete(t.reqBytes, id)
	if t.numbered() {
		num, found, err := t.sessionNum(id)
		if err != nil || !found {
			return err
		}
		return t.deleteRows4(id, num)
	}
	if err := t.hotBucket().Delete([]byte(id)); err != nil {
		return err
	}
	if rb := t.tx.Bucket(bucketReqsTop); rb.Bucket([]byte(id)) != nil {
		if err := rb.DeleteBucket([]byte(id)); err != nil {
			return err
		}
	}
	return t.sessions().DeleteBucket([]byte(id))
}

// repairEvent2 is RepairEvent for layout 2: the frame holding seq is
// rewritten with ev in place when ev has the stored checksum.
func (t *Tx) repairEvent2(id string, inc uint64, seq int64, ev []byte) (bool, error) {
	h, _, err := t.hot2(id)
	if err != nil || seq >= h.end {
		return false, err
	}
	fs, err := t.framesFrom(id, inc, h, seq, seq+1)
	if err != nil || len(fs) != 1 {
		return false, err
	}
	lb := t.tx.Bucket(bucketLog)
	fp, err := parseFrame(lb.Get(fs[0].key[:]))
	if err != nil {
		return false, nil // the header is damaged: not repairable from one event
	}
	i := seq - fp.first
	if i < 0 || i >= int64(len(fp.stored)) {
		return false, nil
	}
	cur := fp.events()[i] // nil: a packed event that does not unpack
	// A flipped bit keeps a stored event's length; a packed event that does
	// not unpack has none to compare.
	if cur != nil && len(ev) != len(cur) {
		return false, nil
	}
	if EventSum(id, inc, seq, ev) != fp.sums[i] || EventSum(id, inc, seq, cur) == fp.sums[i] {
		return false, nil
	}
	// The other events keep their stored bytes, damaged or not.
	fp.stored = slices.Clone(fp.stored)
	if fp.version == framePacked {
		fp.sizes = slices.Clone(fp.sizes)
		fp.setEvent(int(i), ev)
	} else {
		fp.stored[i] = ev
	}
	return true, lb.Put(fs[0].key[:], fp.encode())
}

// record2 returns the cold record followed by the fsm's hot part. b is the
// session's bucket; nil (one session's read, Record) looks it up unless the
// cold record is staged, and stages it.
func (t *Tx) record2(id string, b *bbolt.Bucket) ([]byte, error) {
	cold, hotPart, err := t.recordParts2(id, b)
	if err != nil || cold == nil {
		return nil, err
	}
	out := make([]byte, 0, len(cold)+len(hotPart))
	return append(append(out, cold...), hotPart...), nil
}

// RecordParts returns a session's record in layout 2 as its two stored
// parts, cold and the fsm's hot part (nil, nil: no record), so that a caller
// holding the record decoded can tell it is still current without decoding
// it again. The slices belong to the transaction: valid while it lasts and
// not to be modified. Layout 1 stores one record: it has no parts to give.
func (t *Tx) RecordParts(id string) (cold, hotPart []byte, err error) {
	if t.layout < 2 {
		return nil, nil, errors.New("record parts: layout 1 stores a record whole")
	}
	return t.recordParts2(id, nil)
}

func (t *Tx) recordParts2(id string, b *bbolt.Bucket) (cold, hotPart []byte, err error) {
	cold, staged := t.colds[id]
	if !staged && t.numbered() {
		num, c, found, err := t.record4(id)
		if err != nil || !found {
			return nil, nil, err
		}
		cold = c
		t.stageCold(id, cold)
		t.stageNum(id, num)
	} else if !staged {
		one := b == nil
		if one {
			if b = t.session(id); b == nil {
				return nil, nil, nil
			}
		}
		var err error
		if cold, err = t.checkRecord(id, b); err != nil || cold == nil {
			return nil, nil, err
		}
		if one {
			t.stageCold(id, cold)
		}
	}
	h, ok, err := t.hot2(id)
	if err != nil {
		return nil, nil, err
	}
	if !ok { // every session gets one with its record: a lost key
		return nil, nil, t.fail(&ChecksumError{Session: id, Seq: -1, What: "session counters (missing)"})
	}
	return cold, h.fsm, nil
}

// putRecord2 stores the cold record when it changed and the hot part.
func (t *Tx) putRecord2(id string, cold, hotPart []byte) error {
	if t.numbered() {
		return t.putRecord4(id, cold, hotPart)
	}
	if staged, ok := t.colds[id]; !ok || !bytes.Equal(staged, cold) {
		b, err := t.sessions().CreateBucketIfNotExists([]byte(id))
		if err != nil {
			return fmt.Errorf("session bucket: %w", err)
		}
		if !bytes.Equal(b.Get(keyRecord), cold) {
			if err := b.Put(keyRecord, cold); err != nil {
				return err
			}
			if err := b.Put(keyRecordSum, binary.BigEndian.AppendUint32(nil, recordSum(id, cold))); err != nil {
				return err
			}
		}
		t.stageCold(id, cold)
	}
	h, _, err := t.hot2(id)
	if err != nil {
		return err
	}
	h.fsm = hotPart
	return t.putHot2(id, h)
}

// reqs2 is a session's request results in layout 2: reqs/<id>, beside the
// session's bucket rather than inside it, so that bucket holds no bucket and
// bbolt stores it inline in the sessions/ leaf instead of on a page of its
// own (4 KiB per session otherwise).
func (t *Tx) reqs2(id string, create bool) (*bbolt.Bucket, error) {
	rb := t.tx.Bucket(bucketReqsTop)
	if sb := rb.Bucket([]byte(id)); sb != nil || !create {
		return sb, nil
	}
	return rb.CreateBucket([]byte(id))
}

// cwdKey is a session's key in the cwd index: the cwd, a zero byte, the id
// (the value is the id again: either may hold a zero byte).
func cwdKey(cwd, id string) []byte {
	k := make([]byte, 0, len(cwd)+1+len(id))
	return append(append(append(k, cwd...), 0), id...)
}

// IndexCwd adds (or with remove, drops) a session's entry in the cwd index
// (layout 2; a no-op in layout 1, where List scans).
func (t *Tx) IndexCwd(id, cwd string, remove bool) error {
	if t.layout < 2 {
		return nil
	}
	if t.numbered() {
		return t.indexCwd4(id, cwd, remove)
	}
	b := t.tx.Bucket(bucketCwd)
	if remove {
		return b.Delete(cwdKey(cwd, id))
	}
	return b.Put(cwdKey(cwd, id), []byte(id))
}

// CwdIndexed reports whether List can use SessionsUnderCwd (layout 2).
func (t *Tx) CwdIndexed() bool { return t.layout >= 2 }

// SessionsUnderCwd returns the ids of the sessions whose cwd starts with
// prefix, from the cwd index, sorted by id.
func (t *Tx) SessionsUnderCwd(prefix string) []string {
	var ids []string
	if t.numbered() {
		ids = t.sessionsUnderCwd4(prefix)
		slices.Sort(ids)
		return ids // one entry per session
	}
	c := t.tx.Bucket(bucketCwd).Cursor()
	for k, v := c.Seek([]byte(prefix)); k != nil && bytes.HasPrefix(k, []byte(prefix)); k, v = c.Next() {
		if n := len(k) - len(v) - 1; n >= len(prefix) && k[n] == 0 && bytes.Equal(k[n+1:], v) {
			ids = append(ids, string(v))
		}
	}
	slices.Sort(ids)
	return slices.Compact(ids)
}

// PrepareLayout2 creates layout 2's buckets before ConvertSession moves
// sessions into them; the transaction keeps reading layout 1 until
// FinishLayout2.
func (t *Tx) PrepareLayout2() error {
	for _, name := range [][]byte{bucketLog, bucketIndex, bucketHot, bucketCwd, bucketReqsTop} {
		if _, err := t.tx.CreateBucketIfNotExists(name); err != nil {
			return err
		}
	}
	return nil
}

// ConvertSession rewrites one layout-1 session in layout 2: its events as
// the given frames (keyed by the current entry, BeginEntry), its record as
// cold and hot parts, its cwd (nil: none) in the cwd index, its request
// results under reqs/; the layout-1 events, checksums and frame table are
// dropped.
func (t *Tx) ConvertSession(id string, inc uint64, frames [][][]byte, cold, hotPart []byte, cwd *string) error {
	b := t.session(id)
	if b == nil {
		return fmt.Errorf("session %q has no bucket", id)
	}
	if q := b.Bucket(bucketReqs); q != nil {
		type kv struct{ k, v []byte }
		var all []kv
		err := q.ForEach(func(k, v []byte) error {
			all = append(all, kv{bytes.Clone(k), bytes.Clone(v)})
			return nil
		})
		if err != nil {
			return err
		}
		nb, err := t.tx.Bucket(bucketReqsTop).CreateBucketIfNotExists([]byte(id))
		if err != nil {
			return err
		}
		for _, e := range all {
			if err := nb.Put(e.k, e.v); err != nil {
				return err
			}
		}
	}
	for _, name := range [][]byte{bucketEvents, bucketSums, bucketFrames, bucketReqs} {
		if b.Bucket(name) != nil {
			if err := b.DeleteBucket(name); err != nil {
				return err
			}
		}
	}
	if err := b.Delete(keyRecord); err != nil { // rewritten (cold) below
		return err
	}
	t.layout = 2
	defer func() { t.layout = 1 }()
	if err := t.putHot2(id, hot{}); err != nil {
		return err
	}
	first := int64(0)
	for i, evs := range frames {
		if err := t.appendFrame2(id, inc, uint64(i)+1, first, evs); err != nil {
			return err
		}
		first += int64(len(evs))
	}
	if err := t.putRecord2(id, cold, hotPart); err != nil {
		return err
	}
	if cwd != nil {
		return t.IndexCwd(id, *cwd, false)
	}
	return nil
}

// FinishLayout2 marks the state as layout 2 (state format 2): from here on
// the transaction, and every later one, works in it.
func (t *Tx) FinishLayout2() error {
	if err := t.meta().Put(keyFormat, u64(2)); err != nil {
		return err
	}
	t.layout = 2
	return nil
}

// FinishLayout3 marks a layout-2 state as state format 3: frames appended
// from here on pack their events (eventcodec.go). Nothing stored changes:
// format 3 reads the frames of format 2 as they are.
func (t *Tx) FinishLayout3() error {
	if t.layout < 2 {
		return fmt.Errorf("state format 3 needs layout 2 first (this state is in layout %d)", t.layout)
	}
	if err := t.meta().Put(keyFormat, u64(3)); err != nil {
		return err
	}
	t.layout = 3
	return nil
}
