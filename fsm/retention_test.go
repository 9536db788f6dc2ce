package fsm

import (
	"slices"
	"testing"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func createAt(id string, cwd *string) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
		Header: &fsmpb.Header{Id: id, CreatedAt: 1000, Cwd: cwd}}}}
}

// Retention decides with the entry's time (a fake clock here): the policy
// with the longest matching cwd prefix sets the max age since the last
// append; the dry run (Expired) lists exactly what the sweep deletes.
func TestApplySweep(t *testing.T) {
	f, db := newTestFSM(t)
	tmp, work := "/tmp/x", "/w/y"
	tmpLate := "/tmp/z"
	idx := uint64(0)
	at := func(now int64, cmds ...*fsmpb.Command) []*fsmpb.Result {
		var logs []*raft.Log
		for _, c := range cmds {
			idx++
			logs = append(logs, entry(t, idx, now, c))
		}
		return results(t, f.ApplyBatch(logs))
	}
	at(1_000, createAt("a", &tmp), createAt("b", &work), createAt("c", &tmpLate), createAt("d", nil), createAt("unmaterialised", &tmp),
		appendCmd("a", 0, openTurn[0]), appendCmd("b", 0, openTurn[0]), appendCmd("c", 0, openTurn[0]), appendCmd("d", 0, openTurn[0]))
	at(50_000, appendCmd("c", 1, openTurn[1]))
	policies := []*fsmpb.RetentionPolicy{{CwdPrefix: "", MaxAgeMs: 100_000}, {CwdPrefix: "/tmp/", MaxAgeMs: 10_000}}
	sweep := &fsmpb.Command{Cmd: &fsmpb.Command_Sweep{Sweep: &fsmpb.Sweep{Policies: policies}}}

	for _, step := range []struct {
		now  int64
		want []string
	}{
		{59_000, []string{"a"}},            // /tmp/ keeps 10 s: a's last append was at 1 s, c's at 50 s
		{60_000, nil},                      // c's last append exactly 10 s ago: kept
		{200_000, []string{"b", "c", "d"}}, // everything else keeps 100 s
	} {
		var dry []string
		_ = db.View(func(tx *storage.Tx) error {
			var err error
			dry, err = Expired(tx, policies, step.now)
			return err
		})
		r := at(step.now, sweep)[0]
		if r.Reason != "" || !slices.Equal(r.Deleted, dry) || !slices.Equal(r.Deleted, step.want) {
			t.Fatalf("at %d: sweep deleted %v (%s), dry run listed %v, want %v", step.now, r.Deleted, r.Reason, dry, step.want)
		}
	}
	_ = db.View(func(tx *storage.Tx) error {
		for _, id := range []string{"a", "b", "c", "d"} {
			if tx.HasSession(id) || tx.Tombstone(id) == nil {
				t.Errorf("%s: still stored, or no tombstone", id)
			}
		}
		if !tx.HasSession("unmaterialised") {
			t.Error("retention removed a registration (that is --registration-ttl's job)")
		}
		return nil
	})
}
