package fsm

import (
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

func withRID(c *fsmpb.Command, rid string, bind bool) *fsmpb.Command {
	switch x := c.Cmd.(type) {
	case *fsmpb.Command_Create:
		x.Create.RequestId = rid
	case *fsmpb.Command_Repair:
		x.Repair.RequestId = rid
	case *fsmpb.Command_KeepAlive:
		x.KeepAlive.RequestId = rid
	case *fsmpb.Command_Release:
		x.Release.RequestId = rid
	case *fsmpb.Command_Delete:
		x.Delete.RequestId = rid
	case *fsmpb.Command_PlanSet:
		x.PlanSet.RequestId = rid
	case *fsmpb.Command_PlanExit:
		x.PlanExit.RequestId = rid
	}
	c.BindRequest = bind
	return c
}

func keepAliveCmd(id, owner string, epoch uint64) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_KeepAlive{KeepAlive: &fsmpb.KeepAlive{SessionId: id, Owner: owner, Epoch: epoch}}}
}

func prepareCmd(owner string, ttl int64) *fsmpb.Command {
	return &fsmpb.Command{Cmd: &fsmpb.Command_Repair{Repair: &fsmpb.Repair{SessionId: "s", Mode: fsmpb.Repair_PREPARE, Owner: owner, TtlMs: ttl}}}
}

// A request id replays only the operation that used it (version 5, bound
// commands); unbound commands and results stored before keep the version-4
// behaviour. Each case applies, on a session with an open turn, a first and
// a second command under the same request id and checks the second answer.
func TestRequestIDsBoundToTheirOperation(t *testing.T) {
	load := func() *fsmpb.Command { return repairCmd("s", fsmpb.Repair_LOAD, "") }
	planSet := func(active bool) *fsmpb.Command {
		return &fsmpb.Command{Cmd: &fsmpb.Command_PlanSet{PlanSet: &fsmpb.PlanSet{SessionId: "s", Active: active}}}
	}
	type want struct {
		reason string // "" : success
		msg    string // in the refusal
		lease  bool   // the answer holds a lease
		replay bool   // the answer is the first one's
	}
	cases := []struct {
		name          string
		first, second *fsmpb.Command
		bind1, bind2  bool
		want          want
	}{
		{"prepare under a load's id", load(), prepareCmd("o", 1000), true, true,
			want{reason: "INVALID_ARGUMENT", msg: `request id "r" was already used for a Load of session "s"; this Prepare needs a request id of its own`}},
		{"keepalive under a prepare's id", prepareCmd("o", 1000), keepAliveCmd("s", "o", 1), true, true,
			want{reason: "INVALID_ARGUMENT", msg: "already used for a Prepare"}},
		{"prepare retried", prepareCmd("o", 1000), prepareCmd("o", 1000), true, true, want{lease: true, replay: true}},
		{"prepare with another owner", prepareCmd("o", 1000), prepareCmd("p", 1000), true, true,
			want{reason: "INVALID_ARGUMENT", msg: "with other arguments"}},
		{"prepare with another ttl", prepareCmd("o", 1000), prepareCmd("o", 2000), true, true,
			want{reason: "INVALID_ARGUMENT", msg: "with other arguments"}},
		{"plan set under a load's id", load(), planSet(true), true, true,
			want{reason: "INVALID_ARGUMENT", msg: "already used for a Load"}},
		{"plan set retried across the switch", planSet(true), planSet(true), false, true, want{replay: true}},
		{"delete under a load's id", load(), &fsmpb.Command{Cmd: &fsmpb.Command_Delete{Delete: &fsmpb.Delete{SessionId: "s"}}}, true, true,
			want{reason: "INVALID_ARGUMENT", msg: "already used for a Load"}},
		{"create under a load's id", load(), createCmd("s"), true, true,
			want{reason: "INVALID_ARGUMENT", msg: "already used for a Load"}},
		// Version 4 (unbound) and results stored before version 5: replayed.
		{"unbound prepare under a load's id", load(), prepareCmd("o", 1000), false, false, want{replay: true}},
		{"old load result, bound prepare", load(), prepareCmd("o", 1000), false, true, want{replay: true}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, _ := newTestFSM(t)
			rs := applyAll(t, f, 100,
				&fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}},
				createCmd("s"), appendCmd("s", 0, openTurn...),
				withRID(c.first, "r", c.bind1), withRID(c.second, "r", c.bind2))
			first, second := rs[3], rs[4]
			if first.Reason != "" {
				t.Fatalf("first command refused: %v", first)
			}
			if first.RequestOp != "" || second.RequestOp != "" || len(second.RequestDigest) > 0 {
				t.Fatalf("the operation leaked into an answer: %v / %v", first, second)
			}
			if second.Reason != c.want.reason || !strings.Contains(second.Message, c.want.msg) {
				t.Fatalf("second: %s %q, want %s containing %q", second.Reason, second.Message, c.want.reason, c.want.msg)
			}
			if (second.Lease != nil) != c.want.lease && c.want.reason == "" {
				t.Fatalf("second: lease %v, want lease %v", second.Lease, c.want.lease)
			}
			if c.want.replay && (second.Revision != first.Revision || second.NextSeq != first.NextSeq ||
				second.GetLease().GetExpiresAtUnixMs() != first.GetLease().GetExpiresAtUnixMs() ||
				second.GetLease().GetEpoch() != first.GetLease().GetEpoch()) {
				t.Fatalf("second is not the first's answer: %v vs %v", second, first)
			}
		})
	}
}

// A refused operation writes nothing: the session keeps its state and the
// id keeps the first answer for a retry of the first operation.
func TestRequestIDRefusalWritesNothing(t *testing.T) {
	f, db := newTestFSM(t)
	rs := applyAll(t, f, 100,
		&fsmpb.Command{Cmd: &fsmpb.Command_SetClusterId{SetClusterId: &fsmpb.SetClusterID{ClusterId: "c1"}}},
		createCmd("s"), appendCmd("s", 0, openTurn...),
		withRID(repairCmd("s", fsmpb.Repair_LOAD, ""), "r", true),
		withRID(prepareCmd("o", 1000), "r", true),
		withRID(repairCmd("s", fsmpb.Repair_LOAD, ""), "r", true),
	)
	if rs[4].Reason != "INVALID_ARGUMENT" {
		t.Fatalf("prepare under the load's id: %v", rs[4])
	}
	rec, _ := storedRecord(t, db, "s")
	if rec.Lease != nil || rec.Epoch != 0 {
		t.Fatalf("refused prepare left a lease: %v", rec)
	}
	if rs[5].Reason != "" || !rs[5].Repaired || rs[5].Revision != rs[3].Revision {
		t.Fatalf("load retried after the refusal: %v, want the first answer %v", rs[5], rs[3])
	}
}

// Bound commands need version 5: an entry holding one is stamped so, and a
// replica that applies only version 4 refuses it rather than replaying.
func TestBoundRequestEntryVersion(t *testing.T) {
	for _, c := range []struct {
		bind bool
		want uint32
	}{{false, 1}, {true, 5}} {
		data, err := Encode(&fsmpb.Entry{Commands: []*fsmpb.Command{withRID(keepAliveCmd("s", "o", 1), "r", c.bind)}})
		if err != nil {
			t.Fatal(err)
		}
		e, err := Decode(data)
		if err != nil || e.Version != c.want {
			t.Fatalf("bind %v: version %v (%v), want %d", c.bind, e.GetVersion(), err, c.want)
		}
	}
}
