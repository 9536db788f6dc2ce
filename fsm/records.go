package fsm

import (
	"bytes"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// An append reads its session's record and writes it back with new
// counters. Decoding the record and encoding its cold part (header, lease,
// plan state) were a fifth of the append's apply, for a cold part an append
// leaves alone. So the FSM keeps, per session, the record it last decoded or
// wrote together with copies of the two stored parts it stands for (layout
// 2, storage.Tx.RecordParts), and an append:
//
//   - uses the kept record while both parts stored are byte-equal to the
//     copies: the record is a function of those bytes, so whether it was kept
//     or decoded never changes a decision (replicas stay deterministic);
//   - writes only the hot part when the cold part stored is the one it
//     wrote itself and the append left every cold field alone (it replaces
//     the plan summary, but with equal values unless the summary changed).
//
// A kept record is handed out to be changed: only the append path uses the
// cache, and it changes the record only when it goes on to write it
// (writeFrame), after which the copies are those of the new parts. Other
// commands decode their own. Only the apply goroutine uses it.

// maxRecords bounds the kept records; past it the cache starts over (the
// sessions appended to since fill it again at one decode each).
const maxRecords = 4096

// checkRecordCache, set by the package's tests, compares every kept record
// used with a fresh decode and every hot-only write with a full encoding; a
// difference fails the apply as a storage error does.
var checkRecordCache = false

type keptRecord struct {
	cold, hot []byte // copies of the parts rec was decoded from or written as
	rec       *fsmpb.SessionRecord
	// canonical: cold is EncodeRecord's cold part of rec, so a write that
	// changed no cold field may leave it as it is.
	canonical bool
}

type recordCache map[string]*keptRecord

// appendRecord returns session id's record for an append (nil: none) and
// its cache entry (nil: not kept, e.g. layout 1).
func (a *applier) appendRecord(id string) (*fsmpb.SessionRecord, *keptRecord, error) {
	if a.records == nil || a.tx.Layout() < 2 {
		rec, err := a.record(id)
		return rec, nil, err
	}
	cold, hot, err := a.tx.RecordParts(id)
	if err != nil || cold == nil {
		return nil, nil, err
	}
	if k := a.records[id]; k != nil && bytes.Equal(k.cold, cold) && bytes.Equal(k.hot, hot) {
		if checkRecordCache {
			fresh, err := decodeParts(cold, hot)
			if err != nil || !proto.Equal(fresh, k.rec) {
				return nil, nil, fmt.Errorf("record cache: kept record of %q differs from the stored one (%v)", id, err)
			}
		}
		return k.rec, k, nil
	}
	rec, err := decodeParts(cold, hot)
	if err != nil || rec == nil {
		return rec, nil, err
	}
	if rec.EventBytes == nil {
		// eventBytes fills it in on the record without writing it: not a
		// record to keep (older records only).
		return rec, nil, nil
	}
	if len(a.records) >= maxRecords {
		clear(a.records)
	}
	k := &keptRecord{cold: bytes.Clone(cold), hot: bytes.Clone(hot), rec: rec}
	a.records[id] = k
	return rec, k, nil
}

func decodeParts(cold, hot []byte) (*fsmpb.SessionRecord, error) {
	b := make([]byte, 0, len(cold)+len(hot))
	return DecodeRecord(append(append(b, cold...), hot...))
}

// putAppendRecord writes the record an append changed; coldChanged says
// whether it changed a cold field. k is the record's cache entry or nil.
func (a *applier) putAppendRecord(id string, rec *fsmpb.SessionRecord, k *keptRecord, coldChanged bool) error {
	if k == nil || k.rec != rec {
		return a.putRecord(id, rec)
	}
	if k.canonical && !coldChanged {
		hot, err := encodeHot(rec)
		if err != nil {
			return err
		}
		if checkRecordCache {
			if cold, full, err := EncodeRecord(rec); err != nil || !bytes.Equal(cold, k.cold) || !bytes.Equal(full, hot) {
				return fmt.Errorf("record cache: hot-only write of %q differs from the full encoding (%v)", id, err)
			}
		}
		if err := a.tx.PutRecord(id, k.cold, hot); err != nil {
			return err
		}
		k.hot = hot
		return nil
	}
	cold, hot, err := EncodeRecord(rec)
	if err != nil {
		return err
	}
	if err := a.tx.PutRecord(id, cold, hot); err != nil {
		return err
	}
	// The storage keeps what it was given; neither side changes it.
	k.cold, k.hot, k.canonical = cold, hot, true
	return nil
}
