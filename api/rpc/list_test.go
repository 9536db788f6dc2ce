package rpc_test

import (
	"bytes"
	"context"
	"encoding/json"
	"strings"
	"testing"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/rpc"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// lsBackend answers List with one session and records the query.
type lsBackend struct {
	rpc.Backend
	q sessionstore.ListQuery
}

func (b *lsBackend) List(_ context.Context, q sessionstore.ListQuery) ([]sessionstore.Snapshot, string, error) {
	b.q = q
	return []sessionstore.Snapshot{{Header: sessionstore.Header{ID: "s1", CreatedAt: 1}, Revision: "r",
		NextSeq: 12, LastAppendUnixMs: 1700000000123, LeaseHeld: true, Title: "Fix the <b>tests</b>"}}, "next", nil
}

// List and ListSnapshots hand the backend the same query, and a snapshot
// carries its activity under the JSON names the web console reads.
func TestListQueryAndSnapshot(t *testing.T) {
	b := &lsBackend{}
	p := rpc.NewPersistence(b, 0)
	want := sessionstore.ListQuery{Consistency: sessionstore.Stale, PageSize: 7, PageToken: "t", CwdPrefix: "/w", IDPrefix: "s", Order: sessionstore.ListByLastAppend}
	if _, err := p.List(context.Background(), &pb.ListRequest{Consistency: pb.Consistency_STALE, PageSize: 7, PageToken: "t",
		CwdPrefix: "/w", IdPrefix: "s", Order: pb.ListOrder_LIST_ORDER_LAST_APPEND}); err != nil || b.q != want {
		t.Fatalf("List passed %+v (%v), want %+v", b.q, err, want)
	}
	got, err := p.ListSnapshots(context.Background(), &pb.ListSnapshotsRequest{Consistency: pb.Consistency_STALE, PageSize: 7,
		PageToken: "t", CwdPrefix: "/w", IdPrefix: "s", Order: pb.ListOrder_LIST_ORDER_LAST_APPEND})
	if err != nil || b.q != want {
		t.Fatalf("ListSnapshots passed %+v (%v), want %+v", b.q, err, want)
	}
	wantPB := &pb.ListSnapshotsResponse{NextPageToken: "next", Snapshots: []*pb.SessionSnapshot{{Header: &pb.SessionHeader{Id: "s1", CreatedAt: 1},
		Revision: "r", NextSeq: 12, LastAppendUnixMs: 1700000000123, LeaseHeld: true, Title: "Fix the <b>tests</b>"}}}
	if !proto.Equal(got, wantPB) {
		t.Fatalf("ListSnapshots = %v, want %v", got, wantPB)
	}
	if j, w := lsJSON(t, got), `"revision":"r","nextSeq":"12","lastAppendUnixMs":"1700000000123","leaseHeld":true,"title":"Fix the <b>tests</b>"}`; !strings.Contains(j, w) {
		t.Fatalf("ListSnapshots as JSON = %s, want a snapshot ending %s", j, w)
	}
	if j, w := lsJSON(t, &pb.ListSnapshotsRequest{IdPrefix: "s", Order: pb.ListOrder_LIST_ORDER_LAST_APPEND}), `"idPrefix":"s","order":"LIST_ORDER_LAST_APPEND"}`; !strings.HasSuffix(j, w) {
		t.Fatalf("request as JSON = %s, want it ending %s", j, w)
	}
}

// lsJSON is m as the Connect JSON writes it (every field), compacted.
func lsJSON(t *testing.T, m proto.Message) string {
	var j bytes.Buffer
	if b, err := (protojson.MarshalOptions{EmitUnpopulated: true}).Marshal(m); err != nil || json.Compact(&j, b) != nil {
		t.Fatal(err)
	}
	return j.String()
}
