package fsm

import (
	"errors"
	"fmt"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

var marshalRecord = proto.MarshalOptions{Deterministic: true}

// EncodeRecord splits a record into its cold part (what an append leaves
// alone: header, lease, plan state) and its hot part (the fields an append
// changes). Each is an encoded SessionRecord; cold followed by hot decodes as
// the whole record (protobuf merges concatenated messages, and the cold part
// carries none of the hot fields), so the store can keep them apart
// (layout 2) or together (layout 1) and readers see one record either way.
func EncodeRecord(r *fsmpb.SessionRecord) (cold, hot []byte, err error) {
	if hot, err = encodeHot(r); err != nil {
		return nil, nil, err
	}
	// The cold part is r with the hot fields cleared for the moment.
	m, n, l, f, b, t := r.Materialized, r.NextSeq, r.LastChangeIndex, r.Frames, r.EventBytes, r.LastAppendUnixMs
	r.Materialized, r.NextSeq, r.LastChangeIndex, r.Frames, r.EventBytes, r.LastAppendUnixMs = false, 0, 0, 0, nil, 0
	cold, err = marshalRecord.Marshal(r)
	r.Materialized, r.NextSeq, r.LastChangeIndex, r.Frames, r.EventBytes, r.LastAppendUnixMs = m, n, l, f, b, t
	if err != nil {
		return nil, nil, err
	}
	return cold, hot, nil
}

// encodeHot is EncodeRecord's hot part alone.
func encodeHot(r *fsmpb.SessionRecord) ([]byte, error) {
	return marshalRecord.Marshal(&fsmpb.SessionRecord{Materialized: r.Materialized, NextSeq: r.NextSeq,
		LastChangeIndex: r.LastChangeIndex, Frames: r.Frames, EventBytes: r.EventBytes, LastAppendUnixMs: r.LastAppendUnixMs})
}

// PutRecord stores a session record through EncodeRecord.
func PutRecord(tx *storage.Tx, id string, r *fsmpb.SessionRecord) error {
	cold, hot, err := EncodeRecord(r)
	if err != nil {
		return err
	}
	return tx.PutRecord(id, cold, hot)
}

// ConvertLayout converts a layout-1 state to layout 2 inside tx, at Raft
// index index (the ConvertLayout command's, so every replica writes the same
// frame keys): each session's frames move to the apply-ordered log in their
// artifact frame boundaries, its record splits into cold and hot parts and
// its cwd is indexed. It returns how many sessions it converted; a layout-2
// state is left alone.
//
// A damaged event is rewritten from this node's artifact when repair is set
// and the artifact holds the bytes its checksum names (as apply does);
// otherwise the error stops the conversion, and the node, rather than carry
// the damage into the new layout.
func ConvertLayout(tx *storage.Tx, index uint64, repair Repairer) (int, error) {
	if tx.Layout() >= 2 {
		return 0, nil
	}
	type sess struct {
		id  string
		rec *fsmpb.SessionRecord
	}
	var all []sess
	err := tx.ForEachSession("", false, func(id string, raw []byte) error {
		rec, err := DecodeRecord(raw)
		if err != nil {
			return fmt.Errorf("session %q: %w", id, err)
		}
		if rec != nil {
			all = append(all, sess{id, rec})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if err := tx.PrepareLayout2(); err != nil {
		return 0, err
	}
	tx.BeginEntry(index)
	for _, s := range all {
		frames, err := layout1Frames(tx, s.id, s.rec, repair)
		if err != nil {
			return 0, err
		}
		s.rec.Frames = uint64(len(frames))
		cold, hot, err := EncodeRecord(s.rec)
		if err != nil {
			return 0, err
		}
		var cwd *string
		if s.rec.GetHeader().Cwd != nil {
			c := s.rec.GetHeader().GetCwd()
			cwd = &c
		}
		if err := tx.ConvertSession(s.id, s.rec.Incarnation, frames, cold, hot, cwd); err != nil {
			return 0, fmt.Errorf("session %q: %w", s.id, err)
		}
	}
	return len(all), tx.FinishLayout2()
}

// layout1Frames reads a layout-1 session's events split at its stored frame
// boundaries. Boundaries that do not describe the events exactly (none
// stored, or not ending at the next seq) keep their consistent prefix and
// the rest becomes one frame, so no event is lost and the artifact, rebuilt
// from the new boundaries, holds the same text.
func layout1Frames(tx *storage.Tx, id string, rec *fsmpb.SessionRecord, repair Repairer) ([][][]byte, error) {
	events, err := tx.Events(id, rec.Incarnation, 0, rec.NextSeq)
	var ce *storage.ChecksumError
	if errors.As(err, &ce) && repair != nil {
		if n, rerr := repair.RepairEvents(tx, id, rec.Incarnation, rec.NextSeq); rerr == nil && n > 0 {
			events, err = tx.Events(id, rec.Incarnation, 0, rec.NextSeq)
		}
	}
	if err != nil {
		return nil, err
	}
	var frames [][][]byte
	start := int64(0)
	for _, end := range tx.FrameEnds(id, rec.Incarnation) {
		if end <= start || end > rec.NextSeq {
			break
		}
		frames = append(frames, events[start:end])
		start = end
	}
	if start < rec.NextSeq {
		frames = append(frames, events[start:])
	}
	return frames, nil
}
