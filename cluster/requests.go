package cluster

import (
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// bindRequest marks a command that carries a request id as bound to its
// operation, once every voter has advertised version 5; an older replica
// would replay another operation's answer where this one refuses, and the
// replicas' answers and stored results would differ.
func (ss *Sessions) bindRequest(cmd *fsmpb.Command) {
	if requestIDOf(cmd) != "" && ss.members.votersSupport(fsm.RequestsVersion) {
		cmd.BindRequest = true
	}
}

// requestIDOf is the request id a command carries ("" if none).
func requestIDOf(cmd *fsmpb.Command) string {
	switch c := cmd.Cmd.(type) {
	case *fsmpb.Command_Create:
		return c.Create.RequestId
	case *fsmpb.Command_Repair:
		return c.Repair.RequestId
	case *fsmpb.Command_KeepAlive:
		return c.KeepAlive.RequestId
	case *fsmpb.Command_Release:
		return c.Release.RequestId
	case *fsmpb.Command_Delete:
		return c.Delete.RequestId
	case *fsmpb.Command_PlanSet:
		return c.PlanSet.RequestId
	case *fsmpb.Command_PlanPreStep:
		return c.PlanPreStep.RequestId
	case *fsmpb.Command_PlanCommand:
		return c.PlanCommand.RequestId
	case *fsmpb.Command_PlanExit:
		return c.PlanExit.RequestId
	}
	return ""
}
