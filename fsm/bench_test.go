package fsm

import (
	"fmt"
	"strings"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// BenchmarkApplyBatch applies batches in which each of w sessions appends one
// ~1 KiB event: the FSM's share of the append path (one bbolt commit each).
func BenchmarkApplyBatch(b *testing.B) {
	for _, w := range []int{1, 16, 64} {
		b.Run(fmt.Sprintf("sessions=%d", w), func(b *testing.B) {
			f, _ := newTestFSM(&testing.T{})
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
		})
	}
}
