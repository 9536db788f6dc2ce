package rpc

import (
	"context"
	"errors"
	"testing"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
)

// The error table of docs/api.md, row by row.
func TestToStatus(t *testing.T) {
	rows := []struct {
		reason sessionstore.Reason
		code   codes.Code
	}{
		{sessionstore.ReasonNotFound, codes.NotFound},
		{sessionstore.ReasonAlreadyExists, codes.AlreadyExists},
		{sessionstore.ReasonSeqMismatch, codes.FailedPrecondition},
		{sessionstore.ReasonRevisionMismatch, codes.FailedPrecondition},
		{sessionstore.ReasonLiveTurnOpen, codes.FailedPrecondition},
		{sessionstore.ReasonSessionLive, codes.FailedPrecondition},
		{sessionstore.ReasonLeaseFenced, codes.FailedPrecondition},
		{sessionstore.ReasonFormatUnsupported, codes.FailedPrecondition},
		{sessionstore.ReasonInvalidStored, codes.FailedPrecondition},
		{sessionstore.ReasonNotJSON, codes.InvalidArgument},
		{sessionstore.ReasonInvalidEvent, codes.InvalidArgument},
		{sessionstore.ReasonInvalidHeader, codes.InvalidArgument},
		{sessionstore.ReasonInvalidSessionID, codes.InvalidArgument},
		{sessionstore.ReasonInvalidArgument, codes.InvalidArgument},
		{sessionstore.ReasonCorruption, codes.DataLoss},
		{sessionstore.ReasonTooLarge, codes.ResourceExhausted},
		{sessionstore.ReasonQuotaExceeded, codes.ResourceExhausted},
		{sessionstore.ReasonNoLeader, codes.Unavailable},
		{sessionstore.ReasonShuttingDown, codes.Unavailable},
		{sessionstore.ReasonOutcomeUnknown, codes.Unavailable},
		{sessionstore.ReasonUnauthenticated, codes.Unauthenticated},
		{sessionstore.ReasonPermissionDenied, codes.PermissionDenied},
	}
	if len(rows) != len(codeOf) {
		t.Fatalf("table has %d reasons, test covers %d", len(codeOf), len(rows))
	}
	for _, r := range rows {
		t.Run(string(r.reason), func(t *testing.T) {
			err := toStatus(sessionstore.Errorf(r.reason, "session %q text", "x"))
			st := status.Convert(err)
			if st.Code() != r.code {
				t.Errorf("code = %v, want %v", st.Code(), r.code)
			}
			if st.Message() != `session "x" text` {
				t.Errorf("message = %q", st.Message())
			}
			var info *errdetails.ErrorInfo
			for _, d := range st.Details() {
				if i, ok := d.(*errdetails.ErrorInfo); ok {
					info = i
				}
			}
			if info == nil || info.Reason != string(r.reason) || info.Domain != ErrorDomain {
				t.Errorf("ErrorInfo = %v, want reason %s domain %s", info, r.reason, ErrorDomain)
			}
		})
	}
}

// Context errors and unexpected errors carry no ErrorInfo: a client must
// treat them as unknown outcomes.
func TestToStatusWithoutReason(t *testing.T) {
	for _, c := range []struct {
		err  error
		code codes.Code
	}{
		{context.DeadlineExceeded, codes.DeadlineExceeded},
		{context.Canceled, codes.Canceled},
		{errors.New("boom"), codes.Internal},
	} {
		st := status.Convert(toStatus(c.err))
		if st.Code() != c.code || len(st.Details()) != 0 {
			t.Errorf("%v: code %v details %v, want %v and none", c.err, st.Code(), st.Details(), c.code)
		}
	}
	if toStatus(nil) != nil {
		t.Error("nil error must stay nil")
	}
}
