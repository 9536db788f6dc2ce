package rpc

import (
	"errors"
	"strings"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/forwardpb"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// Every string or repeated field a client can send (the request messages of
// the three services and the messages inside them) has an entry in
// fieldLimits, so a new field cannot arrive unbounded.
func TestEveryRequestFieldHasALimit(t *testing.T) {
	seen := map[protoreflect.FullName]bool{}
	var walk func(md protoreflect.MessageDescriptor)
	walk = func(md protoreflect.MessageDescriptor) {
		if seen[md.FullName()] {
			return
		}
		seen[md.FullName()] = true
		fs := md.Fields()
		for i := 0; i < fs.Len(); i++ {
			fd := fs.Get(i)
			key := string(md.Name()) + "." + string(fd.Name())
			if _, ok := fieldLimits[key]; !ok && (fd.Kind() == protoreflect.StringKind || fd.Kind() == protoreflect.BytesKind || fd.IsList()) {
				t.Errorf("%s has no limit in fieldLimits", key)
			}
			if fd.Message() != nil {
				walk(fd.Message())
			}
		}
	}
	for _, sd := range []grpc.ServiceDesc{pb.SessionPersistence_ServiceDesc, pb.PlanMode_ServiceDesc, pb.Cluster_ServiceDesc} {
		d, err := protoregistry.GlobalFiles.FindDescriptorByName(protoreflect.FullName(sd.ServiceName))
		if err != nil {
			t.Fatal(err)
		}
		ms := d.(protoreflect.ServiceDescriptor).Methods()
		for i := 0; i < ms.Len(); i++ {
			walk(ms.Get(i).Input())
		}
	}
	if len(seen) < 20 {
		t.Fatalf("walked only %d messages", len(seen))
	}
}

// Each limit accepts a field at the limit and refuses one byte (or entry)
// more with TOO_LARGE naming the field and the limit.
func TestCheckFieldsLimits(t *testing.T) {
	s := func(n int) string { return strings.Repeat("x", n) }
	list := func(n int) []string { return strings.Split(s(n-1), "x") } // n empty strings
	sp := func(n int) *string { v := s(n); return &v }
	cases := []struct {
		field string
		max   int
		req   func(n int) proto.Message
	}{
		{"header.cwd", MaxCwdBytes, func(n int) proto.Message { return &pb.CreateRequest{Header: &pb.SessionHeader{Id: "a", Cwd: sp(n)}} }},
		{"header.id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.CreateRequest{Header: &pb.SessionHeader{Id: s(n)}} }},
		{"header.parent_session", MaxHeaderTextBytes, func(n int) proto.Message {
			return &pb.CreateRequest{Header: &pb.SessionHeader{Id: "a", ParentSession: sp(n)}}
		}},
		{"header.origin", MaxHeaderTextBytes, func(n int) proto.Message { return &pb.CreateRequest{Header: &pb.SessionHeader{Id: "a", Origin: sp(n)}} }},
		{"header.agent_preset", MaxHeaderTextBytes, func(n int) proto.Message {
			return &pb.CreateRequest{Header: &pb.SessionHeader{Id: "a", AgentPreset: sp(n)}}
		}},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.CreateRequest{RequestId: s(n)} }},
		{"header.cwd", MaxCwdBytes, func(n int) proto.Message { return &pb.LocateRequest{Header: &pb.SessionHeader{Cwd: sp(n)}} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.AppendRequest{SessionId: s(n)} }},
		{"expected_revision", MaxRevisionBytes, func(n int) proto.Message { return &pb.AppendRequest{ExpectedRevision: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.LoadRequest{RequestId: s(n)} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.InspectRequest{SessionId: s(n)} }},
		{"owner", MaxOwnerBytes, func(n int) proto.Message { return &pb.PrepareRequest{Owner: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.PrepareRequest{RequestId: s(n)} }},
		{"lease.owner", MaxOwnerBytes, func(n int) proto.Message { return &pb.KeepAliveRequest{Lease: &pb.Lease{Owner: s(n)}} }},
		{"lease.session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.KeepAliveRequest{Lease: &pb.Lease{SessionId: s(n)}} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.KeepAliveRequest{RequestId: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.ReleaseRequest{RequestId: s(n)} }},
		{"expected_revision", MaxRevisionBytes, func(n int) proto.Message { return &pb.DeleteRequest{ExpectedRevision: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.DeleteRequest{RequestId: s(n)} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.ReadFromRequest{SessionId: s(n)} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.ReadRawRequest{SessionId: s(n)} }},
		{"page_token", MaxPageTokenBytes, func(n int) proto.Message { return &pb.ListRequest{PageToken: s(n)} }},
		{"cwd_prefix", MaxCwdBytes, func(n int) proto.Message { return &pb.ListRequest{CwdPrefix: s(n)} }},
		{"page_token", MaxPageTokenBytes, func(n int) proto.Message { return &pb.ListSnapshotsRequest{PageToken: s(n)} }},
		{"cwd_prefix", MaxCwdBytes, func(n int) proto.Message { return &pb.ListSnapshotsRequest{CwdPrefix: s(n)} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.WatchRequest{SessionId: s(n)} }},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.PlanGetRequest{SessionId: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.PlanSetRequest{RequestId: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.PlanPreStepRequest{RequestId: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.PlanCommandRequest{RequestId: s(n)} }},
		{"plan", MaxPlanBytes, func(n int) proto.Message { return &pb.PlanExitRequest{Plan: s(n)} }},
		{"request_id", MaxRequestIDBytes, func(n int) proto.Message { return &pb.PlanExitRequest{RequestId: s(n)} }},
		{"answer.answers", MaxAnswerItems, func(n int) proto.Message {
			a := &pb.ReviewAnswer{}
			for range n {
				a.Answers = append(a.Answers, &pb.AnswerItem{Id: "plan-review"})
			}
			return &pb.PlanExitRequest{Answer: a}
		}},
		{"answer.answers[0].id", MaxAnswerTextBytes, func(n int) proto.Message {
			return &pb.PlanExitRequest{Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{Id: s(n)}}}}
		}},
		{"answer.answers[0].selected", MaxAnswerItems, func(n int) proto.Message {
			return &pb.PlanExitRequest{Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{Selected: list(n)}}}}
		}},
		{"answer.answers[0].selected[0]", MaxAnswerTextBytes, func(n int) proto.Message {
			return &pb.PlanExitRequest{Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{Selected: []string{s(n)}}}}}
		}},
		{"answer.answers[1].custom", MaxFeedbackBytes, func(n int) proto.Message {
			return &pb.PlanExitRequest{Answer: &pb.ReviewAnswer{Answers: []*pb.AnswerItem{{}, {Custom: sp(n)}}}}
		}},
		{"session_id", MaxSessionIDBytes, func(n int) proto.Message { return &pb.PlanProjectionRequest{SessionId: s(n)} }},
		{"to_node_id", MaxNodeIDBytes, func(n int) proto.Message { return &pb.TransferLeadershipRequest{ToNodeId: s(n)} }},
		{"node_id", MaxNodeIDBytes, func(n int) proto.Message { return &pb.RemoveMemberRequest{NodeId: s(n)} }},
	}
	for _, c := range cases {
		t.Run(string(proto.MessageName(c.req(1)).Name())+"."+c.field, func(t *testing.T) {
			if err := CheckFields(c.req(c.max)); err != nil {
				t.Fatalf("at the limit %d: %v", c.max, err)
			}
			err := CheckFields(c.req(c.max + 1))
			var de *sessionstore.Error
			if !errors.As(err, &de) || de.Reason != sessionstore.ReasonTooLarge {
				t.Fatalf("one above the limit: got %v, want TOO_LARGE", err)
			}
			if !strings.Contains(de.Message, "field "+c.field+" ") || !strings.Contains(de.Message, "limit is ") {
				t.Fatalf("message %q does not name field %s and its limit", de.Message, c.field)
			}
		})
	}
}

// Fields bounded by the node's configured limits are left to the cluster.
func TestCheckFieldsLeavesConfiguredLimits(t *testing.T) {
	big := strings.Repeat("x", 8<<20)
	for _, req := range []proto.Message{
		&pb.AppendRequest{SessionId: "a", Events: []string{big}},
		&pb.PlanCommandRequest{SessionId: "a", RawInput: big, ImageBlocks: []string{big}},
	} {
		if err := CheckFields(req); err != nil {
			t.Errorf("%T: %v", req, err)
		}
	}
}

// Only messages with a limited field, in them or below, are walked: the
// cluster's forwarding messages carry requests as bytes, checked again when
// the leader serves them.
func TestCheckFieldsWalksOnlyLimitedMessages(t *testing.T) {
	for _, c := range []struct {
		msg  proto.Message
		want bool
	}{
		{&pb.AppendRequest{}, true},
		{&pb.KeepAliveRequest{}, true}, // through Lease
		{&pb.ReviewAnswer{}, true},     // its own count, and AnswerItem's
		{&pb.SessionHeader{}, true},
		{&forwardpb.CallBatch{}, false},
		{&forwardpb.ReplyBatch{}, false},
	} {
		if got := limited(c.msg.ProtoReflect().Descriptor()); got != c.want {
			t.Errorf("limited(%s) = %v, want %v", proto.MessageName(c.msg), got, c.want)
		}
	}
	big := strings.Repeat("x", MaxSessionIDBytes+1)
	batch := &forwardpb.CallBatch{Calls: []*forwardpb.Call{{Method: big, Principal: big, Request: []byte(big)}}}
	if err := CheckFields(batch); err != nil {
		t.Errorf("a forwarding batch: %v", err)
	}
}

func BenchmarkCheckFields(b *testing.B) {
	req := &pb.AppendRequest{SessionId: "bench-7f5bda3d-l256-w97-1", Events: []string{strings.Repeat("x", 1024)}, LeaseEpoch: 3}
	raw, _ := proto.Marshal(req)
	batch := &forwardpb.CallBatch{}
	for i := range 8 {
		batch.Calls = append(batch.Calls, &forwardpb.Call{Id: uint64(i), Method: "/sessionstore.v1.SessionPersistence/Append", Request: raw, RequestId: "0123456789abcdef"})
	}
	for _, c := range []struct {
		name string
		msg  proto.Message
	}{{"append", req}, {"forward-batch-of-8", batch}} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				if err := CheckFields(c.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
