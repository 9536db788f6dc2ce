package fsm

import (
	"errors"
	"fmt"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// A session's title (the last session/title event's, sessionlog.Title) is
// kept in its record for listings, from state format 5 on: a replica of an
// older build neither keeps it nor reads a format-5 state, so no replica
// ever holds a title that later frames left behind. ConvertLayout{layout: 5}
// (command version 11) reads every stored log once to fill the titles in;
// after it, every frame keeps them current. Before it, every title is "".

// observeTitle sets rec's title from the last title event of a frame's
// events and reports whether it changed (a cold field).
func observeTitle(rec *fsmpb.SessionRecord, events [][]byte) bool {
	changed := false
	for _, ev := range events {
		if t, ok := sessionlog.Title(ev); ok && t != rec.Title {
			rec.Title, changed = t, true
		}
	}
	return changed
}

// convertTitles fills in the title of every session whose log holds one,
// reading each log once; it returns how many sessions have a title. A
// damaged event is repaired from the artifact as apply does, or stops the
// conversion, and the node.
func convertTitles(tx *storage.Tx, repair Repairer) (int, error) {
	type titled struct {
		id  string
		rec *fsmpb.SessionRecord
	}
	var found []titled
	err := tx.ForEachSession("", false, func(id string, raw []byte) error {
		rec, err := DecodeRecord(raw)
		if err != nil || rec == nil {
			return err
		}
		title, err := foldTitle(tx, id, rec, repair)
		if err != nil {
			return fmt.Errorf("session %q: %w", id, err)
		}
		if title != rec.Title {
			rec.Title = title
			found = append(found, titled{id, rec})
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	// Written after the walk: bbolt does not allow writes under a cursor.
	for _, s := range found {
		if err := PutRecord(tx, s.id, s.rec); err != nil {
			return 0, err
		}
	}
	return len(found), nil
}

// foldTitle is the title of a session's stored log ("" if it has none).
func foldTitle(tx *storage.Tx, id string, rec *fsmpb.SessionRecord, repair Repairer) (string, error) {
	fold := func() (string, error) {
		title := ""
		err := tx.ForEachEvent(id, rec.Incarnation, 0, rec.NextSeq, func(_ int64, ev []byte) error {
			if t, ok := sessionlog.Title(ev); ok {
				title = t
			}
			return nil
		})
		return title, err
	}
	title, err := fold()
	var ce *storage.ChecksumError
	if errors.As(err, &ce) && repair != nil {
		if n, rerr := repair.RepairEvents(tx, id, rec.Incarnation, rec.NextSeq); rerr == nil && n > 0 {
			return fold()
		}
	}
	return title, err
}
