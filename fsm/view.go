package fsm

import (
	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// Session is a session as every read sees it: its record decoded once, with
// the header and the revision that record gives. Reads (cluster's sessions,
// raw text, artifacts, plan mode, listing, expiry) take it from here rather
// than decoding records and rendering revisions themselves, so a read and
// Apply never disagree on what a record means.
type Session struct {
	Record   *fsmpb.SessionRecord
	Header   sessionstore.Header
	Revision string
}

// ReadSession reads id's session in tx; nil when there is none.
func ReadSession(tx *storage.Tx, id string) (*Session, error) {
	rec, err := ReadRecord(tx, id)
	if err != nil || rec == nil {
		return nil, err
	}
	return sessionOf(tx.ClusterID(), rec), nil
}

// DecodeSession is ReadSession for a record already read (as
// storage.Tx.ForEachSession lists them) in a state of cluster cid.
func DecodeSession(cid string, raw []byte) (*Session, error) {
	rec, err := DecodeRecord(raw)
	if err != nil || rec == nil {
		return nil, err
	}
	return sessionOf(cid, rec), nil
}

func sessionOf(cid string, rec *fsmpb.SessionRecord) *Session {
	return &Session{Record: rec, Header: HeaderFromPB(rec.Header), Revision: Revision(cid, rec)}
}

// Visible reports whether reads show the session: a registration without
// an event is not materialised yet (lazy materialisation).
func (s *Session) Visible() bool { return s != nil && s.Record.Materialized }

// Snapshot is the session's entry in a listing read at now (fsm.Now: the
// time the lease is judged at).
func (s *Session) Snapshot(now int64) sessionstore.Snapshot {
	return sessionstore.Snapshot{Header: s.Header, Revision: s.Revision, NextSeq: s.Record.NextSeq,
		LastAppendUnixMs: LastAppend(s.Record), LeaseHeld: LeaseLive(s.Record, now), Title: s.Record.Title}
}

// LastAppend is the leader time (Unix ms) of a session's last append or
// repair: records from before that time was kept count from their creation.
// Retention and the listing by last append both go by it.
func LastAppend(rec *fsmpb.SessionRecord) int64 {
	if rec.LastAppendUnixMs == 0 {
		return rec.CreatedUnixMs
	}
	return rec.LastAppendUnixMs
}

// ReadIncarnation reads id's session for a read that spans several
// transactions: it fails with NOT_FOUND, naming the revision first read,
// when the session was deleted (or deleted and created again) since.
func ReadIncarnation(tx *storage.Tx, id string, inc uint64, firstRevision string) (*Session, error) {
	s, err := ReadSession(tx, id)
	if err != nil {
		return nil, err
	}
	if s == nil || s.Record.Incarnation != inc {
		return nil, DeletedWhileRead(id, firstRevision)
	}
	return s, nil
}

// DeletedWhileRead is the NOT_FOUND of a read that found its session gone
// (or created again) between two of its transactions.
func DeletedWhileRead(id, firstRevision string) error {
	if firstRevision == "" {
		return sessionstore.Errorf(sessionstore.ReasonNotFound,
			"session %s was deleted while being read", sessionstore.Quote(id))
	}
	return sessionstore.Errorf(sessionstore.ReasonNotFound,
		"session %s was deleted while being read; what was read so far belongs to revision %s", sessionstore.Quote(id), firstRevision)
}
