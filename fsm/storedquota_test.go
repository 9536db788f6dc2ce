package fsm

import (
	"strings"
	"testing"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

func exitFeedbackCmd(rid, feedback string, lim *fsmpb.Limits) *fsmpb.Command {
	return &fsmpb.Command{Limits: lim, Cmd: &fsmpb.Command_PlanExit{PlanExit: &fsmpb.PlanExit{SessionId: "s", Plan: "# P\n\n1. x", RequestId: rid,
		Answer: &fsmpb.ReviewAnswer{Answers: []*fsmpb.AnswerItem{{Id: "plan-review", Selected: []string{"Keep planning"}, Custom: &feedback}}}}}}
}

func limited(c *fsmpb.Command, lim *fsmpb.Limits) *fsmpb.Command { c.Limits = lim; return c }

// With version 5's limits (count_stored) the session byte quota counts the
// header and the answers kept under request ids, so ExitPlan feedback and a
// large header cannot grow a session past --max-session-bytes (twenty 8 MiB
// feedbacks grew state.db to 233 MB under a 1 MiB quota); version 4's
// limits count events only, as before.
func TestSessionByteQuotaCountsWhatIsStored(t *testing.T) {
	const max = 8000
	v5 := &fsmpb.Limits{MaxSessionBytes: max, CountStored: true}
	v4 := &fsmpb.Limits{MaxSessionBytes: max}
	fb := strings.Repeat("f", 1500)
	cases := []struct {
		name     string
		lim      *fsmpb.Limits
		cmds     func() []*fsmpb.Command // after create and plan mode on
		accepted int                     // of cmds, in order, before the first refusal
		refused  string                  // reason of the first refusal ("" : none)
	}{
		{"feedback counted", v5, func() []*fsmpb.Command {
			var cs []*fsmpb.Command
			for i := range 10 {
				cs = append(cs, exitFeedbackCmd(string(rune('a'+i)), fb, v5))
			}
			return cs
		}, 4, "QUOTA_EXCEEDED"},
		{"feedback not counted before version 5", v4, func() []*fsmpb.Command {
			var cs []*fsmpb.Command
			for i := range 10 {
				cs = append(cs, exitFeedbackCmd(string(rune('a'+i)), fb, nil))
			}
			return cs
		}, 10, ""},
		{"a retry over the quota replays", v5, func() []*fsmpb.Command {
			return []*fsmpb.Command{exitFeedbackCmd("a", fb, v5), exitFeedbackCmd("b", fb, v5), exitFeedbackCmd("c", fb, v5),
				exitFeedbackCmd("d", fb, v5), exitFeedbackCmd("d", fb, v5), exitFeedbackCmd("e", fb, v5)}
		}, 5, "QUOTA_EXCEEDED"},
		{"appends count kept answers", v5, func() []*fsmpb.Command {
			return []*fsmpb.Command{exitFeedbackCmd("a", fb, v5), exitFeedbackCmd("b", fb, v5), exitFeedbackCmd("c", fb, v5),
				limited(appendCmd("s", 1, `{"type":"note","seq":1,"time":1,"data":{"x":"`+strings.Repeat("y", 3000)+`"}}`), v5)}
		}, 3, "QUOTA_EXCEEDED"},
		{"appends count events only before version 5", v4, func() []*fsmpb.Command {
			return []*fsmpb.Command{exitFeedbackCmd("a", fb, nil), exitFeedbackCmd("b", fb, nil), exitFeedbackCmd("c", fb, nil),
				limited(appendCmd("s", 1, `{"type":"note","seq":1,"time":1,"data":{"x":"`+strings.Repeat("y", 3000)+`"}}`), v4)}
		}, 4, ""},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f, db := newTestFSM(t)
			cmds := append([]*fsmpb.Command{limited(createCmd("s"), c.lim), planSetCmd("s", true, 0, 0, "on")}, c.cmds()...)
			rs := applyAll(t, f, 100, cmds...)
			if rs[0].Reason != "" || rs[1].Reason != "" {
				t.Fatalf("setup: %v %v", rs[0], rs[1])
			}
			got, first := 0, ""
			for _, r := range rs[2:] {
				if r.Reason != "" {
					first = r.Reason
					if !strings.Contains(r.Message, "quota of 8000 bytes per session") {
						t.Errorf("refusal %q does not name the quota", r.Message)
					}
					break
				}
				got++
			}
			if got != c.accepted || first != c.refused {
				t.Fatalf("accepted %d then %q, want %d then %q", got, first, c.accepted, c.refused)
			}
			if c.lim.GetCountStored() {
				var stored int64
				_ = db.View(func(tx *storage.Tx) error {
					rec, _ := ReadRecord(tx, "s")
					a := &applier{tx: tx}
					stored = a.storedBytes("s", rec)
					return nil
				})
				if stored > max {
					t.Fatalf("session stores %d bytes, above the quota %d", stored, max)
				}
			}
		})
	}
}

// A header larger than the session byte quota is refused at Create under
// version 5's limits.
func TestSessionByteQuotaCountsTheHeader(t *testing.T) {
	big := strings.Repeat("c", 3000)
	for _, c := range []struct {
		lim  *fsmpb.Limits
		want string
	}{
		{&fsmpb.Limits{MaxSessionBytes: 2000, CountStored: true}, "QUOTA_EXCEEDED"},
		{&fsmpb.Limits{MaxSessionBytes: 2000}, ""},
		{&fsmpb.Limits{MaxSessionBytes: 4000, CountStored: true}, ""},
	} {
		f, _ := newTestFSM(t)
		cmd := &fsmpb.Command{Limits: c.lim, Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{Header: &fsmpb.Header{Id: "s", CreatedAt: 1, Cwd: &big}}}}
		rs := applyAll(t, f, 100, cmd)
		if rs[0].Reason != c.want {
			t.Errorf("limits %v: %v, want %q", c.lim, rs[0], c.want)
		}
	}
}
