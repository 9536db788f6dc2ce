package main

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// riOpenSession creates id with an open turn, so a Load commits a repair
// (and so stores its answer under its request id).
func riOpenSession(t *testing.T, ctx context.Context, c *client.Client, id string) {
	t.Helper()
	if _, err := c.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w/ri")}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[:3]}); err != nil {
		t.Fatal(err)
	}
}

// Issue 13 item 7 end to end: a Prepare under a Load's request id and a
// KeepAlive under the Prepare's are refused with INVALID_ARGUMENT (they
// were answered with the earlier call's result: no lease, an expiry not
// extended); a retry of the same call still gets its first answer.
func TestRequestIDReusedByAnotherOperation(t *testing.T) {
	n := startTestNode(t, "")
	ctx := n.ctx()
	c := n.Client.WithOptions(client.Options{MaxAttempts: 1})
	riOpenSession(t, ctx, c, "ri")
	if v, err := c.Load(ctx, &sessionpb.LoadRequest{SessionId: "ri", RequestId: "load-1"}); err != nil || !v.Repaired {
		t.Fatalf("load: %v %v", v, err)
	}
	_, lease, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "ri", Owner: "o", TtlMs: 60_000, RequestId: "load-1"})
	if auReason(err) != sessionstore.ReasonInvalidArgument || !strings.Contains(err.Error(), "already used for a Load") {
		t.Fatalf("prepare under the load's request id: lease %v, %v; want INVALID_ARGUMENT", lease, err)
	}
	_, lease, err = c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "ri", Owner: "o", TtlMs: 60_000, RequestId: "prep-1"})
	if err != nil || lease == nil {
		t.Fatalf("prepare: %v %v", lease, err)
	}
	_, again, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "ri", Owner: "o", TtlMs: 60_000, RequestId: "prep-1"})
	if err != nil || again.GetEpoch() != lease.Epoch || again.GetExpiresAtUnixMs() != lease.ExpiresAtUnixMs {
		t.Fatalf("prepare retried: %v %v, want the first answer %v", again, err, lease)
	}
	time.Sleep(5 * time.Millisecond) // a renewal must land on a later expiry
	renewed, err := c.KeepAlive(ctx, &sessionpb.KeepAliveRequest{Lease: lease, RequestId: "prep-1"})
	if auReason(err) != sessionstore.ReasonInvalidArgument {
		t.Fatalf("keepalive under the prepare's request id: %v %v; want INVALID_ARGUMENT", renewed, err)
	}
	renewed, err = c.KeepAlive(ctx, &sessionpb.KeepAliveRequest{Lease: lease, RequestId: "ka-1"})
	if err != nil || renewed.ExpiresAtUnixMs <= lease.ExpiresAtUnixMs {
		t.Fatalf("keepalive: %v %v, want an expiry after %d", renewed, err, lease.ExpiresAtUnixMs)
	}
}

// The refusal waits for every voter: while one runs command version 4 the
// old answer (the Load's, no lease) is given by every replica alike; once
// it runs this build's version, the refusal starts.
func TestRequestIDBindingWaitsForEveryVoter(t *testing.T) {
	nodes := startMixedCluster(t, 4)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	c := nodes[0].Client.WithOptions(client.Options{MaxAttempts: 1})
	riOpenSession(t, ctx, c, "ri-old")
	if _, err := c.Load(ctx, &sessionpb.LoadRequest{SessionId: "ri-old", RequestId: "load-old"}); err != nil {
		t.Fatal(err)
	}
	_, lease, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: "ri-old", Owner: "o", TtlMs: 60_000, RequestId: "load-old"})
	if err != nil || lease != nil {
		t.Fatalf("prepare under a load's id while n3 runs version 4: lease %v, %v; want version 4's replay (no lease)", lease, err)
	}

	upgradeNode(nodes[2])
	// An id used before binding starts keeps replaying (its stored answer
	// has no operation), so each try uses a fresh session and id.
	try := 0
	dlEventually(t, "prepare under a load's id refused once n3 advertises version 5", func() bool {
		try++
		id, rid := fmt.Sprintf("ri-new-%d", try), fmt.Sprintf("load-new-%d", try)
		riOpenSession(t, ctx, c, id)
		if _, err := c.Load(ctx, &sessionpb.LoadRequest{SessionId: id, RequestId: rid}); err != nil {
			t.Fatal(err)
		}
		_, _, err := c.Prepare(ctx, &sessionpb.PrepareRequest{SessionId: id, Owner: "o", TtlMs: 60_000, RequestId: rid})
		return auReason(err) == sessionstore.ReasonInvalidArgument
	})
}
