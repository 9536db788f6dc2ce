package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"sync/atomic"

	"go.etcd.io/bbolt"
)

// Tx is a state-database transaction with typed accessors. Byte slices returned
// by getters are valid only inside the transaction (bbolt's rule); copy to keep.
type Tx struct {
	tx    *bbolt.Tx
	fails *atomic.Uint64 // the StateDB's checksum failure count (nil: not counted)
	// layout is the state format (1 to 5, schema.go) the transaction reads
	// and writes; ConvertLayout changes it.
	layout int
	// entryIndex and entryPos name the next frame (layout 2): the Raft
	// index being applied and the frames it has stored so far.
	entryIndex uint64
	entryPos   uint32
	staged
	// stage is set for the FSM's deferred batches (StateDB.UpdateDeferred):
	// they share staged until the commit, and fill colds and reqBytes.
	stage bool
}

// staged is what a transaction keeps of its sessions in memory (layout 2).
// hots are the hot records it changed, written once each before it commits
// (flushHot). For the FSM's deferred batches, shared by every batch until
// the commit: colds, the verified cold records they read or wrote
// (stageCold), and reqBytes, the size of each session's request results
// (RequestBytes); each entry is dropped where what it mirrors changes.
type staged struct {
	hots     map[string]hot
	colds    map[string][]byte
	reqBytes map[string]int64
	nums     map[string]uint64 // format 4: the numbers of the sessions read or written
}

func newTx(tx *bbolt.Tx, fails *atomic.Uint64) *Tx {
	t := &Tx{tx: tx, fails: fails, layout: 1}
	if m := tx.Bucket(bucketMeta); m != nil {
		// OpenState and Restore refuse formats this build does not read.
		if f := getU64(m.Get(keyFormat)); f >= 2 && f <= StateFormatVersion {
			t.layout = int(f)
		}
	}
	return t
}

// Layout is the state format this transaction works in (1 to 5; 3 is
// layout 2 with packed events, 4 is 3 with rows keyed by session number, 5
// is 4 with titles in the records).
func (t *Tx) Layout() int { return t.layout }

// BeginEntry names the Raft entry whose commands are applied next: frames
// appended until the next BeginEntry are keyed by it, in order.
func (t *Tx) BeginEntry(index uint64) { t.entryIndex, t.entryPos = index, 0 }

func (t *Tx) meta() *bbolt.Bucket     { return t.tx.Bucket(bucketMeta) }
func (t *Tx) sessions() *bbolt.Bucket { return t.tx.Bucket(bucketSessions) }

// Applied returns the last applied Raft index and term.
func (t *Tx) Applied() (index, term uint64) {
	m := t.meta()
	return getU64(m.Get(keyAppliedIndex)), getU64(m.Get(keyAppliedTerm))
}

// SetApplied records the last applied Raft index and term. Checksums stay
// current (SumsCurrent) when they were: this build writes them with every
// event and record. A build without checksums (2f2e872) advances the applied
// index alone, which is how the next open or restore knows to convert.
func (t *Tx) SetApplied(index, term uint64) error {
	m := t.meta()
	current := t.SumsCurrent()
	if err := m.Put(keyAppliedIndex, u64(index)); err != nil {
		return err
	}
	if current {
		if err := m.Put(keySums, u64(index)); err != nil {
			return err
		}
	}
	return m.Put(keyAppliedTerm, u64(term))
}

// SumsCurrent reports whether every record and event holds its checksum: the
// meta key sums equals the applied index (see schema.go).
func (t *Tx) SumsCurrent() bool {
	m := t.meta()
	v := m.Get(keySums)
	return len(v) == 8 && getU64(v) == getU64(m.Get(keyAppliedIndex))
}

// MarkSumsCurrent records that every record and event now holds its checksum.
func (t *Tx) MarkSumsCurrent() error {
	idx, _ := t.Applied()
	return t.meta().Put(keySums, u64(idx))
}

// ClusterID is the cluster identity minted by the first leader ("" before).
func (t *Tx) ClusterID() string { return string(t.meta().Get(keyClusterID)) }

// SetClusterID stores the cluster identity.
func (t *Tx) SetClusterID(id string) error { return t.meta().Put(keyClusterID, []byte(id)) }

// Clock is the largest leader-stamped time applied so far (ms).
func (t *Tx) Clock() int64 { return int64(getU64(t.meta().Get(keyClock))) }

// SetClock stores the clamped clock.
func (t *Tx) SetClock(ms int64) error { return t.meta().Put(keyClock, u64(uint64(ms))) }

func (t *Tx) session(id string) *bbolt.Bucket {
	b := t.sessions()
	if id == "" || b == nil { // format 4 has no sessions/
		return nil
	}
	return b.Bucket([]byte(id))
}

// Record returns a session's encoded record, or nil when the id is unknown. A
// record whose checksum does not match is a *ChecksumError (CORRUPTION), never
// its bytes. Use RecordUnchecked only to convert data without checksums.
func (t *Tx) Record(id string) ([]byte, error) {
	if t.layout >= 2 {
		return t.record2(id, nil)
	}
	b := t.session(id)
	if b == nil {
		return nil, nil
	}
	return t.checkRecord(id, b)
}

func (t *Tx) checkRecord(id string, b *bbolt.Bucket) ([]byte, error) {
	rec := b.Get(keyRecord)
	if rec == nil {
		return nil, nil
	}
	if sum := b.Get(keyRecordSum); len(sum) != 4 || binary.BigEndian.Uint32(sum) != recordSum(id, rec) {
		return nil, t.fail(&ChecksumError{Session: id, Seq: -1, What: "session record"})
	}
	return rec, nil
}

// RecordUnchecked returns a session's encoded record without verifying it
// (layout 1: what a build without checksums wrote).
func (t *Tx) RecordUnchecked(id string) []byte {
	if t.layout >= 2 {
		return nil
	}
	b := t.session(id)
	if b == nil {
		return nil
	}
	return b.Get(keyRecord)
}

// HasSession reports whether a session id has a bucket (a record).
func (t *Tx) HasSession(id string) bool {
	if t.numbered() {
		return id != "" && t.tx.Bucket(bucketRecords).Get([]byte(id)) != nil
	}
	return t.session(id) != nil
}

// PutRecord stores a session's record given as its cold part (what an
// append does not change) and its hot part; fsm encodes both so that cold
// followed by hot decodes as the whole record. Layout 1 stores them as one
// value; layout 2 rewrites the cold part only when it changed.
func (t *Tx) PutRecord(id string, cold, hot []byte) error {
	if t.layout >= 2 {
		return t.putRecord2(id, cold, hot)
	}
	rec := make([]byte, 0, len(cold)+len(hot))
	return t.putRecord1(id, append(append(rec, cold...), hot...))
}

func (t *Tx) putRecord1(id string, rec []byte) error {
	b, err := t.sessions().CreateBucketIfNotExists([]byte(id))
	if err != nil {
		return fmt.Errorf("session bucket: %w", err)
	}
	if err := b.Put(keyRecord, rec); err != nil {
		return err
	}
	return b.Put(keyRecordSum, binary.BigEndian.AppendUint32(nil, recordSum(id, rec)))
}

func (t *Tx) sub(id string, name []byte, create bool) (*bbolt.Bucket, error) {
	b := t.session(id)
	if b == nil {
		return nil, fmt.Errorf("session %q has no record", id)
	}
	if t.layout >= 2 && bytes.Equal(name, bucketReqs) {
		return t.reqs2(id, create)
	}
	if sb := b.Bucket(name); sb != nil || !create {
		return sb, nil
	}
	return b.CreateBucket(name)
}

// AppendFrame stores events at seqs first, first+1, ... of incarnation inc
// as the session's frame n (one Append or repair; n counts from 1), with
// their checksums.
func (t *Tx) AppendFrame(id string, inc, n uint64, first int64, events [][]byte) error {
	if len(events) == 0 {
		return errors.New("append frame: no events")
	}
	if t.layout >= 2 {
		return t.appendFrame2(id, inc, n, first, events)
	}
	if err := t.PutEvents(id, inc, first, events); err != nil {
		return err
	}
	return t.PutFrame(id, n, first+int64(len(events)))
}

// PutEvents stores events at seqs first, first+1, ... of incarnation inc, and
// their checksums (one sums entry for the batch, see schema.go). Layout 1
// only: AppendFrame is the write path.
func (t *Tx) PutEvents(id string, inc uint64, first int64, events [][]byte) error {
	b, err := t.sub(id, bucketEvents, true)
	if err != nil {
		return err
	}
	b.FillPercent = 1.0 // append-only keys: pack pages full
	sums := make([]byte, 0, 4*len(events))
	base := sessionSum(id, inc)
	for i, ev := range events {
		seq := first + int64(i)
		if err := b.Put(u64(uint64(seq)), ev); err != nil {
			return err
		}
		sums = binary.BigEndian.AppendUint32(sums, eventSum(base, seq, ev))
	}
	if len(events) == 0 {
		return nil
	}
	return t.putSums(id, first, sums)
}

func (t *Tx) putSums(id string, first int64, sums []byte) error {
	c, err := t.sub(id, bucketSums, true)
	if err != nil {
		return err
	}
	c.FillPercent = 1.0
	return c.Put(u64(uint64(first)), sums)
}

// Event returns the stored event at seq of incarnation inc, verified; seq must
// be below the session's next seq (a missing one is damage).
func (t *Tx) Event(id string, inc uint64, seq int64) ([]byte, error) {
	var out []byte
	err := t.ForEachEvent(id, inc, seq, seq+1, func(_ int64, ev []byte) error {
		out = ev
		return nil
	})
	return out, err
}

// ErrStop ends a ForEachEvent walk early without an error.
var ErrStop = errors.New("stop")

// ForEachEvent calls fn for each stored event with from <= seq < to, in order,
// each verified against its checksum (id, incarnation inc, seq, bytes) before
// fn sees it. A mismatch, a missing checksum, or a seq missing below the last
// stored event (a key that moved) is a *ChecksumError: fn never sees bytes
// that fail. Every seq in [from, to) must be stored: pass at most the
// session's next seq as to.
func (t *Tx) ForEachEvent(id string, inc uint64, from, to int64, fn func(seq int64, ev []byte) error) error {
	if t.layout >= 2 {
		return t.forEachEvent2(id, inc, from, to, fn)
	}
	b, _ := t.sub(id, bucketEvents, false)
	if b == nil || from >= to {
		return nil
	}
	if from < 0 {
		from = 0
	}
	sums := t.sumsFrom(id, from)
	w := t.walkEvents(id, inc, from, fn)
	c := b.Cursor()
	for k, v := c.Seek(u64(uint64(from))); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return t.fail(&ChecksumError{Session: id, Seq: w.want, What: "missing event"})
		}
		seq := int64(binary.BigEndian.Uint64(k))
		if seq >= to && w.want >= to {
			break
		}
		if seq != w.want {
			return t.fail(&ChecksumError{Session: id, Seq: w.want, What: "missing event"})
		}
		sum, ok := sums.at(seq)
		if !ok {
			return t.fail(&ChecksumError{Session: id, Seq: seq, What: "event without checksum"})
		}
		if done, err := w.visit(seq, v, sum); done {
			return err
		}
	}
	return w.end(to)
}

// eventWalk hands a session's events to fn in seq order, each verified
// against its stored checksum: what both layouts' ForEachEvent share.
type eventWalk struct {
	t    *Tx
	id   string
	base uint32 // sessionSum of the session's incarnation
	want int64  // the next seq expected
	fn   func(seq int64, ev []byte) error
}

func (t *Tx) walkEvents(id string, inc uint64, from int64, fn func(seq int64, ev []byte) error) *eventWalk {
	return &eventWalk{t: t, id: id, base: sessionSum(id, inc), want: from, fn: fn}
}

// visit checks event seq (the next expected, bytes matching sum) and hands
// it to fn; done ends the walk, with fn's error (nil for ErrStop) or the
// damage found.
func (w *eventWalk) visit(seq int64, ev []byte, sum uint32) (done bool, err error) {
	if seq != w.want {
		return true, w.t.fail(&ChecksumError{Session: w.id, Seq: w.want, What: "missing event"})
	}
	if eventSum(w.base, seq, ev) != sum {
		return true, w.t.fail(&ChecksumError{Session: w.id, Seq: seq, What: "event"})
	}
	w.want++
	if err := w.fn(seq, ev); err != nil {
		if errors.Is(err, ErrStop) {
			return true, nil
		}
		return true, err
	}
	return false, nil
}

// end is the walk's result once the stored events ran out: a seq below to
// never met is missing.
func (w *eventWalk) end(to int64) error {
	if w.want < to {
		return w.t.fail(&ChecksumError{Session: w.id, Seq: w.want, What: "missing event"})
	}
	return nil
}

// Events copies the stored events with from <= seq < to, verified.
func (t *Tx) Events(id string, inc uint64, from, to int64) ([][]byte, error) {
	var out [][]byte
	err := t.ForEachEvent(id, inc, from, to, func(_ int64, ev []byte) error {
		out = append(out, bytes.Clone(ev))
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// PutFrame records that artifact frame n (n >= 1) ends before seq end.
// Layout 1 only.
func (t *Tx) PutFrame(id string, n uint64, end int64) error {
	b, err := t.sub(id, bucketFrames, true)
	if err != nil {
		return err
	}
	b.FillPercent = 1.0
	return b.Put(u64(n), u64(uint64(end)))
}

// FrameEnds returns the end seqs of frames 1..n of incarnation inc in order.
func (t *Tx) FrameEnds(id string, inc uint64) []int64 {
	if t.layout >= 2 {
		return t.frameEnds2(id, inc)
	}
	b, _ := t.sub(id, bucketFrames, false)
	if b == nil {
		return nil
	}
	var out []int64
	_ = b.ForEach(func(_, v []byte) error {
		out = append(out, int64(getU64(v)))
		return nil
	})
	return out
}

// RequestResult returns the stored result of a request id, or nil.
func (t *Tx) RequestResult(id, requestID string) []byte {
	if requestID == "" {
		return nil
	}
	r, ok, _ := t.reqs(id, false)
	if !ok {
		return nil
	}
	v := r.get(append([]byte("k"), requestID...))
	if len(v) < 16 {
		return nil
	}
	return v[16:]
}

// RequestBytes is the size of the results a session keeps under request
// ids (what a client made it store besides its events): request ids and
// results of the q/k entries.
func (t *Tx) RequestBytes(id string) int64 {
	if n, ok := t.reqBytes[id]; ok {
		return n
	}
	var n int64
	if r, ok, _ := t.reqs(id, false); ok {
		n = int64(requestBytes(r))
	}
	if t.stage && t.layout >= 2 {
		if t.reqBytes == nil {
			t.reqBytes = map[string]int64{}
		}
		t.reqBytes[id] = n
	}
	return n
}

// requestBytes is q/b's sum when it was kept up to date (it names the q/n it
// was summed at: a build that stored results without keeping it left n
// ahead), else the sum of the k entries. Format 4 keeps it in n, always.
func requestBytes(r reqTable) uint64 {
	if r.merged() {
		if v := r.get(keyReqNext); len(v) == 16 {
			return getU64(v[8:])
		}
		return 0
	}
	if v := r.get(keyReqBytes); len(v) == 16 && bytes.Equal(v[8:], r.get(keyReqNext)) {
		return getU64(v[:8])
	}
	var n uint64
	c := r.cursor()
	for k, v := c.seek([]byte("k")); k != nil && k[0] == 'k'; k, v = c.next() {
		n += requestEntryBytes(k, v)
	}
	return n
}

// nextOrder is the order number the next result is stored under.
func nextOrder(r reqTable) uint64 {
	if v := r.get(keyReqNext); len(v) == 8 || r.merged() && len(v) == 16 {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// requestEntryBytes is what one q/k entry counts: its request id and result.
func requestEntryBytes(k, v []byte) uint64 {
	return uint64(len(k)-1) + uint64(max(len(v)-16, 0))
}

// PutRequestResult remembers a request id's result, keeping at most
// MaxRequestIDs per session and none older than RequestIDLifetime (by the
// leader-stamped clock, so every replica prunes the same entries). With
// keepSum (version-5 commands) it also keeps q/b, the running size of the
// results; without, q/b falls behind q/n and is summed again when read.
// Format 4 keeps the size always (with the next order, in n).
func (t *Tx) PutRequestResult(id, requestID string, nowMs int64, result []byte, keepSum bool) error {
	if requestID == "" {
		return nil
	}
	delete(t.reqBytes, id)
	b, _, err := t.reqs(id, true)
	if err != nil {
		return err
	}
	keepSum = keepSum || b.merged()
	var total uint64
	if keepSum {
		total = requestBytes(b)
	}
	order := nextOrder(b)
	if !b.merged() {
		if err := b.put(keyReqNext, u64(order+1)); err != nil {
			return err
		}
	}
	val := make([]byte, 16+len(result))
	binary.BigEndian.PutUint64(val, order)
	binary.BigEndian.PutUint64(val[8:], uint64(nowMs))
	copy(val[16:], result)
	key := append([]byte("k"), requestID...)
	if old := b.get(key); len(old) >= 8 {
		total -= requestEntryBytes(key, old)
		if err := b.del(append([]byte("o"), old[:8]...)); err != nil {
			return err
		}
	}
	if err := b.put(key, val); err != nil {
		return err
	}
	total += requestEntryBytes(key, val)
	if err := b.put(append([]byte("o"), u64(order)...), []byte(requestID)); err != nil {
		return err
	}
	// Prune the oldest entries: past the count bound or the lifetime.
	c := b.cursor()
	count := 0
	for k, _ := c.seek([]byte("o")); k != nil && k[0] == 'o'; k, _ = c.next() {
		count++
	}
	for k, v := c.seek([]byte("o")); k != nil && k[0] == 'o'; k, v = c.seek([]byte("o")) {
		rk := append([]byte("k"), v...)
		rv := b.get(rk)
		expired := len(rv) >= 16 && nowMs-int64(getU64(rv[8:16])) > RequestIDLifetime
		if count <= MaxRequestIDs && !expired {
			break
		}
		if rv != nil {
			total -= requestEntryBytes(rk, rv)
		}
		if err := b.del(rk); err != nil {
			return err
		}
		if err := b.del(bytes.Clone(k)); err != nil {
			return err
		}
		count--
	}
	switch {
	case b.merged():
		return b.put(keyReqNext, append(u64(order+1), u64(total)...))
	case !keepSum:
		return nil
	}
	return b.put(keyReqBytes, append(u64(total), u64(order+1)...))
}

// ForEachSession calls fn for every session id >= after (exclusive when
// exclusive is set), in byte order, with its encoded record, verified (a
// mismatch ends the walk with a *ChecksumError).
func (t *Tx) ForEachSession(after string, exclusive bool, fn func(id string, rec []byte) error) error {
	return t.forEachSession(after, exclusive, true, fn)
}

// ForEachSessionUnchecked is ForEachSession without verifying records: for
// converting data written without checksums (layout 1), and for listing ids
// whatever a record holds. From layout 2 on, rec is the stored cold record
// alone, unverified.
func (t *Tx) ForEachSessionUnchecked(fn func(id string, rec []byte) error) error {
	return t.forEachSession("", false, false, fn)
}

func (t *Tx) forEachSession(after string, exclusive, check bool, fn func(id string, rec []byte) error) error {
	if t.numbered() {
		return t.forEachSession4(after, exclusive, check, fn)
	}
	c := t.sessions().Cursor()
	var k []byte
	if after == "" {
		k, _ = c.First()
	} else {
		k, _ = c.Seek([]byte(after))
		if exclusive && k != nil && string(k) == after {
			k, _ = c.Next()
		}
	}
	for ; k != nil; k, _ = c.Next() {
		b := t.sessions().Bucket(k)
		if b == nil {
			continue
		}
		rec := b.Get(keyRecord)
		switch {
		case t.layout >= 2 && check:
			var err error
			if rec, err = t.record2(string(k), b); err != nil {
				return err
			}
		case check:
			var err error
			if rec, err = t.checkRecord(string(k), b); err != nil {
				return err
			}
		}
		if err := fn(string(k), rec); err != nil {
			if errors.Is(err, ErrStop) {
				return nil
			}
			return err
		}
	}
	return nil
}

// AddEventSums stores checksums for the events of a session from seq first on
// that have none (written by a build without checksums): one sums entry.
func (t *Tx) AddEventSums(id string, inc uint64, first int64) (int, error) {
	b, _ := t.sub(id, bucketEvents, false)
	if b == nil {
		return 0, nil
	}
	var sums []byte
	c := b.Cursor()
	for k, v := c.Seek(u64(uint64(first))); k != nil; k, v = c.Next() {
		sums = binary.BigEndian.AppendUint32(sums, EventSum(id, inc, int64(getU64(k)), v))
	}
	if len(sums) == 0 {
		return 0, nil
	}
	return len(sums) / 4, t.putSums(id, first, sums)
}

// SumsEnd is the seq after the last event that has a checksum (0: none).
func (t *Tx) SumsEnd(id string) int64 {
	b, _ := t.sub(id, bucketSums, false)
	if b == nil {
		return 0
	}
	k, v := b.Cursor().Last()
	if len(k) != 8 {
		return 0
	}
	return int64(getU64(k)) + int64(len(v)/4)
}

// FrameEnd returns the end seq of frame n (0 for the header frame n = 0) of
// incarnation inc.
func (t *Tx) FrameEnd(id string, inc, n uint64) int64 {
	if n == 0 {
		return 0
	}
	if t.layout >= 2 {
		return t.frameEnd2(id, inc, n)
	}
	b, _ := t.sub(id, bucketFrames, false)
	if b == nil {
		return 0
	}
	return int64(getU64(b.Get(u64(n))))
}

// PrincipalSessions is how many sessions principal name has registered.
func (t *Tx) PrincipalSessions(name string) int64 {
	b := t.tx.Bucket(bucketPrincipals)
	if b == nil {
		return 0
	}
	return int64(getU64(b.Get(principalKey(name))))
}

// AddPrincipalSession counts one more (delta 1) or one fewer (-1) session
// registered by name; the count never goes below zero.
func (t *Tx) AddPrincipalSession(name string, delta int64) error {
	b, err := t.tx.CreateBucketIfNotExists(bucketPrincipals)
	if err != nil {
		return err
	}
	k := principalKey(name)
	n := max(int64(getU64(b.Get(k)))+delta, 0)
	return b.Put(k, u64(uint64(n)))
}

// DeleteSession removes everything stored under a session (incarnation
// inc): record, events, frame ends and request results. Freed pages are
// reused by later writes; the file shrinks only by compaction.
func (t *Tx) DeleteSession(id string, inc uint64) error {
	if !t.HasSession(id) {
		return nil
	}
	if t.layout >= 2 {
		return t.deleteSession2(id, inc)
	}
	return t.sessions().DeleteBucket([]byte(id))
}

// Tombstone returns the encoded tombstone of a deleted id, or nil.
func (t *Tx) Tombstone(id string) []byte {
	b := t.tx.Bucket(bucketTombstones)
	if b == nil || id == "" {
		return nil
	}
	return b.Get([]byte(id))
}

// PutTombstone stores the tombstone of a deleted id (replacing an older one).
func (t *Tx) PutTombstone(id string, v []byte) error {
	b, err := t.tx.CreateBucketIfNotExists(bucketTombstones)
	if err != nil {
		return err
	}
	return b.Put([]byte(id), v)
}

// principalKey keeps the anonymous principal ("" when authentication is off)
// a valid bbolt key.
func principalKey(name string) []byte { return append([]byte{'p'}, name...) }
