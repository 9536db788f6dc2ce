package cluster

import (
	"context"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// Delete removes a session through Raft: every replica drops its record,
// events and request results in the same apply and removes its artifact
// afterwards. It returns the revision the session had.
func (ss *Sessions) Delete(ctx context.Context, id, expectedRevision, requestID string) (string, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return "", err
	}
	if ss.raft.State() == raft.Leader && !ss.members.votersSupport(fsm.DeleteVersion) {
		// An older voter could not apply the entry: refuse before proposing
		// (FORMAT_UNSUPPORTED: the versions of the cluster do not allow it).
		return "", sessionstore.Errorf(sessionstore.ReasonFormatUnsupported,
			"delete needs every voter at command version %d or later, and at least one has not advertised it (an older build?): upgrade every node first", fsm.DeleteVersion)
	}
	res, err := ss.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Delete{Delete: &fsmpb.Delete{
		SessionId: id, ExpectedRevision: expectedRevision, RequestId: requestID}}})
	if err != nil {
		return "", err
	}
	return res.Revision, nil
}
