package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// BenchmarkApplyBatch applies batches in which each of w sessions appends one
// ~1 KiB event: the FSM's share of the append path (one bbolt commit each),
// in both state layouts.
func BenchmarkApplyBatch(b *testing.B) {
	for _, bc := range []struct{ layout, w int }{{1, 1}, {2, 1}, {1, 16}, {2, 16}, {1, 256}, {2, 256}} {
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
			pad := strings.Repeat("x", 950)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				cmds := make([]*fsmpb.Command, w)
				for s := range cmds {
					cmds[s] = appendCmd(fmt.Sprintf("s%d", s), int64(i),
						fmt.Sprintf(`{"type":"x/e","seq":%d,"time":1,"data":"%s"}`, i, pad))
				}
				idx++
				f.ApplyBatch([]*raft.Log{entry(b, idx, 1, cmds...)})
			}
			b.ReportMetric(float64(b.N*w)/b.Elapsed().Seconds(), "events/s")
			b.ReportMetric(float64(db.Size())/float64(b.N*w), "db-bytes/event")
		})
	}
}
