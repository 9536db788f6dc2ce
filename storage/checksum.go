package storage

// Checksums of stored events and session records (schema.go): a CRC-32C
// (Castagnoli, hardware-accelerated) over what identifies the value as well
// as its bytes, so a flipped bit in a value, in its key or in the sums
// themselves is found on read instead of served, and an event cannot move to
// another seq, session or incarnation unnoticed.
//
//	event:  CRC-32C(len(id):4 BE | id | incarnation:8 BE | seq:8 BE | event bytes)
//	record: CRC-32C(len(id):4 BE | id | record bytes)   (the record holds its incarnation)

import (
	"bytes"
	"encoding/binary"
	"fmt"

	"go.etcd.io/bbolt"

	"github.com/sessionstore/sessionstore"
)

// ChecksumError is stored data that failed its checksum: a damaged state
// database. It is a CORRUPTION error (errors.Is(err, sessionstore.ErrCorruption)).
type ChecksumError struct {
	Session string
	Seq     int64  // the event's seq, -1 for the record
	What    string // "event", "missing event", "event without checksum", "session record"
}

func (e *ChecksumError) Error() string {
	switch {
	case e.Seq < 0:
		return fmt.Sprintf("state database damaged: the %s of session %s fails its checksum", e.What, sessionstore.Quote(e.Session))
	case e.What == "event":
		return fmt.Sprintf("state database damaged: event %d of session %s fails its checksum", e.Seq, sessionstore.Quote(e.Session))
	}
	return fmt.Sprintf("state database damaged: %s %d of session %s", e.What, e.Seq, sessionstore.Quote(e.Session))
}

// Unwrap makes a ChecksumError a CORRUPTION error for clients (DATA_LOSS over gRPC).
func (e *ChecksumError) Unwrap() error {
	return &sessionstore.Error{Reason: sessionstore.ReasonCorruption, Message: e.Error()}
}

func (t *Tx) fail(e *ChecksumError) error {
	if t.fails != nil {
		t.fails.Add(1)
	}
	return e
}

func idPrefix(id string) []byte {
	b := binary.BigEndian.AppendUint32(make([]byte, 0, 4+len(id)+16), uint32(len(id)))
	return append(b, id...)
}

// EventSum is the checksum stored for an event.
func EventSum(id string, inc uint64, seq int64, ev []byte) uint32 {
	return eventSum(sessionSum(id, inc), seq, ev)
}

// sessionSum is the CRC-32C of the part every event of a session incarnation
// shares; eventSum continues it (CRC-32C is a running sum).
func sessionSum(id string, inc uint64) uint32 {
	return crc32Update(0, binary.BigEndian.AppendUint64(idPrefix(id), inc))
}

func eventSum(base uint32, seq int64, ev []byte) uint32 {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(seq))
	return crc32Update(crc32Update(base, b[:]), ev)
}

func recordSum(id string, rec []byte) uint32 { return crc32Update(crc32Update(0, idPrefix(id)), rec) }

func crc32Update(sum uint32, b []byte) uint32 { return ArtifactSum(sum, b) }

// sumCursor walks a session's sums entries (c/<first seq> → 4 bytes per event).
type sumCursor struct {
	c     *bbolt.Cursor
	start int64
	v     []byte
}

func (t *Tx) sumsFrom(id string, from int64) *sumCursor {
	sc := &sumCursor{}
	b, _ := t.sub(id, bucketSums, false)
	if b == nil {
		return sc
	}
	sc.c = b.Cursor()
	k, v := sc.c.Seek(u64(uint64(from)))
	if k == nil {
		k, v = sc.c.Last()
	} else if int64(getU64(k)) > from {
		if pk, pv := sc.c.Prev(); pk != nil {
			k, v = pk, pv
		} else {
			k, v = sc.c.Seek(u64(uint64(from))) // nothing before: from is uncovered
		}
	}
	sc.set(k, v)
	return sc
}

func (sc *sumCursor) set(k, v []byte) {
	sc.v = nil
	if len(k) == 8 && len(v)%4 == 0 {
		sc.start, sc.v = int64(getU64(k)), v
	}
}

// at returns the stored checksum of seq; seqs are asked for in increasing order.
func (sc *sumCursor) at(seq int64) (uint32, bool) {
	for sc.v != nil && seq >= sc.start+int64(len(sc.v)/4) {
		sc.set(sc.c.Next())
	}
	if sc.v == nil || seq < sc.start {
		return 0, false
	}
	i := (seq - sc.start) * 4
	return binary.BigEndian.Uint32(sc.v[i:]), true
}

// RepairEvent stores ev at seq when ev has the event's stored checksum and the
// stored value does not (damaged or missing); ok reports whether it wrote.
func (t *Tx) RepairEvent(id string, inc uint64, seq int64, ev []byte) (ok bool, err error) {
	if t.layout >= 2 {
		return t.repairEvent2(id, inc, seq, ev)
	}
	sum, found := t.sumsFrom(id, seq).at(seq)
	if !found || EventSum(id, inc, seq, ev) != sum {
		return false, nil
	}
	b, err := t.sub(id, bucketEvents, true)
	if err != nil {
		return false, err
	}
	if cur := b.Get(u64(uint64(seq))); cur != nil && EventSum(id, inc, seq, cur) == sum {
		return false, nil
	}
	return true, b.Put(u64(uint64(seq)), bytes.Clone(ev))
}
