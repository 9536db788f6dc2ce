package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/internal/benchload"
	"github.com/sessionstore/sessionstore/storage"
)

// BenchmarkApplyBatch applies batches in which each of w sessions appends one
// event of about 180 bytes (prose in an event's framing, as the load
// generators write): the FSM's share of the append path (one bbolt commit
// each), in each state format (3 packs every event, 4 keys rows by session
// number).
func BenchmarkApplyBatch(b *testing.B) {
	defer func(v bool) { checkRecordCache = v }(checkRecordCache)
	checkRecordCache = false // the tests' extra decode is not the FSM's cost
	var cases []struct{ layout, w int }
	for _, w := range []int{1, 16, 256} {
		for layout := 1; layout <= storage.StateFormatVersion; layout++ {
			cases = append(cases, struct{ layout, w int }{layout, w})
		}
	}
	for _, bc := range cases {
		w := bc.w
		b.Run(fmt.Sprintf("layout=%d/sessions=%d", bc.layout, w), func(b *testing.B) {
			f, db := newTestFSMLayout(b, bc.layout)
			idx := uint64(0)
			var setup []*raft.Log
			for s := 0; s < w; s++ {
				idx++
				setup = append(setup, entry(b, idx, 1, createCmd(fmt.Sprintf("s%d", s))))
			}
			f.ApplyBatch(setup)
			pad := benchload.Padding(180)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cmds := make([]*fsmpb.Command, w)
				for s := range cmds {
					cmds[s] = appendCmd(fmt.Sprintf("s%d", s), int64(i), benchload.Event(int64(i), 1780000000000+int64(i), 180, pad))
				}
				idx++
				f.ApplyBatch([]*raft.Log{entry(b, idx, 1, cmds...)})
			}
			b.ReportMetric(float64(b.N*w)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(db.Size())/float64(b.N*w), "db-bytes/event")
		})
	}
}

// BenchmarkListUnderCwd lists the 1 % of 100,000 sessions under one cwd
// prefix the way List does: a scan of every record (layout 1) or the cwd
// index and the matching records (layout 2; format 4 keys the index by
// session number).
func BenchmarkListUnderCwd(b *testing.B) {
	const sessions = 100_000
	for _, layout := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("layout=%d", layout), func(b *testing.B) {
			_, db := newTestFSMLayout(b, layout)
			err := db.Update(func(tx *storage.Tx) error {
				for i := range sessions {
					id := fmt.Sprintf("session-%06d", i)
					cwd := fmt.Sprintf("/w/p%d/repo", i%100)
					rec := &fsmpb.SessionRecord{Header: &fsmpb.Header{Id: id, Cwd: &cwd}, Materialized: true, NextSeq: 5, Incarnation: uint64(i + 1)}
					if err := PutRecord(tx, id, rec); err != nil {
						return err
					}
					if err := tx.IndexCwd(id, cwd, false); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				b.Fatal(err)
			}
			prefix := "/w/p7/"
			b.ResetTimer()
			for range b.N {
				found := 0
				err := db.View(func(tx *storage.Tx) error {
					match := func(raw []byte) error {
						rec, err := DecodeRecord(raw)
						if err != nil {
							return err
						}
						if strings.HasPrefix(rec.GetHeader().GetCwd(), prefix) {
							found++
						}
						return nil
					}
					if !tx.CwdIndexed() {
						return tx.ForEachSession("", false, func(_ string, raw []byte) error { return match(raw) })
					}
					for _, id := range tx.SessionsUnderCwd(prefix) {
						raw, err := tx.Record(id)
						if err != nil {
							return err
						}
						if err := match(raw); err != nil {
							return err
						}
					}
					return nil
				})
				if err != nil || found != sessions/100 {
					b.Fatalf("found %d sessions under %s (%v), want %d", found, prefix, err, sessions/100)
				}
			}
		})
	}
}
