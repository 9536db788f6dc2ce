package client

import (
	"context"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// The Cluster service (docs/api.md "service Cluster") over the same connection.
//
// Status and Members change nothing and are retried like the other reads (on
// NO_LEADER, SHUTTING_DOWN and UNAVAILABLE without an ErrorInfo).
// TransferLeadership, RemoveMember and Leave change the cluster and carry no
// request id, so they are sent exactly once: after an error (OUTCOME_UNKNOWN,
// a transport failure, a deadline) the caller checks Status or Members before
// deciding to call again. Errors with an ErrorInfo come back as
// *sessionstore.Error (FromStatus).

// Status returns the serving node's view of the cluster: its id and Raft
// state, the leader it knows, the term, the commit and applied indexes and the
// cluster id.
func (c *Client) Status(ctx context.Context) (*sessionpb.StatusResponse, error) {
	var resp *sessionpb.StatusResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.cluster.Status(ctx, &sessionpb.StatusRequest{})
		return err
	})
	return resp, err
}

// Members returns the Raft configuration joined with gossip health, as the
// serving node sees it.
func (c *Client) Members(ctx context.Context) ([]*sessionpb.Member, error) {
	var resp *sessionpb.MembersResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.cluster.Members(ctx, &sessionpb.MembersRequest{})
		return err
	})
	return resp.GetMembers(), err
}

// TransferLeadership hands leadership over to the node with id to (empty: any
// suitable node). Never retried automatically.
func (c *Client) TransferLeadership(ctx context.Context, to string) error {
	_, err := c.pool.current().cluster.TransferLeadership(ctx, &sessionpb.TransferLeadershipRequest{ToNodeId: to})
	return FromStatus(err)
}

// RemoveMember removes the server with id from the Raft configuration. Never
// retried automatically.
func (c *Client) RemoveMember(ctx context.Context, id string) error {
	_, err := c.pool.current().cluster.RemoveMember(ctx, &sessionpb.RemoveMemberRequest{NodeId: id})
	return FromStatus(err)
}

// Leave makes the serving node leave the cluster. Never retried
// automatically.
func (c *Client) Leave(ctx context.Context) error {
	_, err := c.pool.current().cluster.Leave(ctx, &sessionpb.LeaveRequest{})
	return FromStatus(err)
}

// Retention applies the cluster's retention policies now (dryRun: lists what
// they would delete) and returns the session ids. Sent once: a sweep whose
// outcome is unknown is simply run again (it deletes only what has expired).
func (c *Client) Retention(ctx context.Context, dryRun bool) ([]string, error) {
	resp, err := c.pool.current().cluster.Retention(ctx, &sessionpb.RetentionRequest{DryRun: dryRun})
	return resp.GetSessionIds(), FromStatus(err)
}
