package fsm

import (
	"fmt"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// Every test of the package checks the record cache against fresh decodes
// and full encodings (records.go): a kept record that differs from the
// stored one, or a hot-only write that differs from a full one, fails the
// apply.
func init() { checkRecordCache = true }

// TestRecordCacheDecidesAsDecoding applies the same entries to an FSM that
// keeps records and to one that decodes every record, with commands that
// change a session's cold part between appends (a lease, plan mode, a
// delete and a new incarnation), refused appends, and commits in between:
// the answers and the stored state must be the same.
func TestRecordCacheDecidesAsDecoding(t *testing.T) {
	// Steps of turn 1: step/start and step/end of step n at seq and seq+1.
	stepStart := func(seq, n int64) string {
		return fmt.Sprintf(`{"type":"step/start","seq":%d,"time":%d,"data":{"turn":1,"step":%d}}`, seq, seq+1, n)
	}
	stepEnd := func(seq, n int64) string {
		return fmt.Sprintf(`{"type":"step/end","seq":%d,"time":%d,"data":{"turn":1,"step":%d}}`, seq, seq+1, n)
	}
	epoch := func(c *fsmpb.Command, e uint64) *fsmpb.Command { c.GetAppend().LeaseEpoch = e; return c }
	strict := func(c *fsmpb.Command) *fsmpb.Command { c.GetAppend().Strict = true; return c }
	del := &fsmpb.Command{Cmd: &fsmpb.Command_Delete{Delete: &fsmpb.Delete{SessionId: "s"}}}
	steps := [][]*fsmpb.Command{
		{createCmd("s"), createCmd("t")},
		{appendCmd("s", 0, openTurn...), appendCmd("t", 0, openTurn...)},
		{appendCmd("s", 2, stepEnd(2, 1))},
		{appendCmd("s", 3, stepStart(3, 2)), appendCmd("s", 4, stepEnd(4, 2))},
		{appendCmd("s", 9, stepStart(9, 3))},        // seq mismatch: refused
		{repairCmd("s", fsmpb.Repair_PREPARE, "o")}, // a lease: epoch 1
		{appendCmd("s", 6, stepStart(6, 3))},        // fenced
		{epoch(appendCmd("s", 6, stepStart(6, 3)), 1)},
		{planSetCmd("s", true, 1, 7, "p1")}, // plan mode: a cold change, and an event at 7
		{epoch(appendCmd("s", 8, stepEnd(8, 3)), 1)},
		{strict(epoch(appendCmd("s", 9, `{"type":"future/event","seq":9,"time":3,"data":{}}`), 1))}, // refused
		{epoch(appendCmd("s", 9, stepStart(9, 4)), 1), appendCmd("t", 2, stepEnd(2, 1))},
		{del},
		{createCmd("s")},
		{appendCmd("s", 0, openTurn...)}, // the new incarnation's first
		{appendCmd("s", 2, stepEnd(2, 1))},
	}
	kept, keptDB := newTestFSM(t)
	plain, plainDB := newTestFSM(t)
	plain.records = nil
	idx := uint64(0)
	for i, cmds := range steps {
		idx++
		var got [2][]*fsmpb.Result
		for j, f := range []*FSM{kept, plain} {
			got[j] = results(t, f.ApplyBatch([]*raft.Log{entry(t, idx, int64(100+i), cmds...)}))
		}
		if a, b := fmt.Sprint(got[0]), fmt.Sprint(got[1]); a != b {
			t.Fatalf("step %d: answers differ\nkept:    %s\ndecoded: %s", i, a, b)
		}
		if i%3 == 2 { // a commit between batches: parts are read from the file again
			if err := keptDB.Sync(); err != nil {
				t.Fatal(err)
			}
		}
	}
	if a, b := logicalDump(t, keptDB), logicalDump(t, plainDB); a != b {
		t.Errorf("stored state differs:\n%s\n---\n%s", a, b)
	}
	k := kept.records["s"]
	if k == nil || !k.canonical {
		t.Fatalf("the cache kept no canonical record of s (%+v): the test did not exercise it", k)
	}
}
