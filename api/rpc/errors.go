package rpc

import (
	"context"
	"errors"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore"
)

// ErrorDomain is the ErrorInfo domain of every error this server returns.
const ErrorDomain = "sessionstore"

// codeOf is the one table from domain reasons to gRPC codes (docs/api.md "Errors").
var codeOf = map[sessionstore.Reason]codes.Code{
	sessionstore.ReasonNotFound:          codes.NotFound,
	sessionstore.ReasonAlreadyExists:     codes.AlreadyExists,
	sessionstore.ReasonSeqMismatch:       codes.FailedPrecondition,
	sessionstore.ReasonRevisionMismatch:  codes.FailedPrecondition,
	sessionstore.ReasonLiveTurnOpen:      codes.FailedPrecondition,
	sessionstore.ReasonSessionLive:       codes.FailedPrecondition,
	sessionstore.ReasonLeaseFenced:       codes.FailedPrecondition,
	sessionstore.ReasonFormatUnsupported: codes.FailedPrecondition,
	sessionstore.ReasonInvalidStored:     codes.FailedPrecondition,
	sessionstore.ReasonNotJSON:           codes.InvalidArgument,
	sessionstore.ReasonInvalidEvent:      codes.InvalidArgument,
	sessionstore.ReasonInvalidHeader:     codes.InvalidArgument,
	sessionstore.ReasonInvalidSessionID:  codes.InvalidArgument,
	sessionstore.ReasonInvalidArgument:   codes.InvalidArgument,
	sessionstore.ReasonCorruption:        codes.DataLoss,
	sessionstore.ReasonTooLarge:          codes.ResourceExhausted,
	sessionstore.ReasonQuotaExceeded:     codes.ResourceExhausted,
	sessionstore.ReasonNoLeader:          codes.Unavailable,
	sessionstore.ReasonShuttingDown:      codes.Unavailable,
	sessionstore.ReasonOutcomeUnknown:    codes.Unavailable,
	sessionstore.ReasonUnauthenticated:   codes.Unauthenticated,
	sessionstore.ReasonPermissionDenied:  codes.PermissionDenied,
}

// toStatus translates a domain error to a gRPC status carrying an ErrorInfo.
// Context errors keep their own codes (no ErrorInfo: the client treats them
// as unknown outcomes); anything unexpected is INTERNAL.
func toStatus(err error) error {
	if err == nil {
		return nil
	}
	if _, ok := status.FromError(err); ok && !isDomain(err) {
		return err
	}
	var de *sessionstore.Error
	var nl *sessionstore.NotLeaderError
	switch {
	case errors.As(err, &nl) && nl.LeaderAPI != "":
		return notLeaderStatus{nl}
	case errors.As(err, &de):
		code, ok := codeOf[de.Reason]
		if !ok {
			code = codes.Unknown
		}
		st := status.New(code, de.Message)
		if withInfo, e := st.WithDetails(&errdetails.ErrorInfo{Reason: string(de.Reason), Domain: ErrorDomain}); e == nil {
			st = withInfo
		}
		return st.Err()
	case errors.Is(err, context.DeadlineExceeded):
		return status.Error(codes.DeadlineExceeded, err.Error())
	case errors.Is(err, context.Canceled):
		return status.Error(codes.Canceled, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

// notLeaderStatus is a handler's "not the leader" answer on its way to the
// forwarding interceptor (forwardUnary), which finds the leader in it
// (leaderOf). Should it reach gRPC instead (a stream, a server without a
// forwarder), it is NO_LEADER, which a client retries.
type notLeaderStatus struct{ nl *sessionstore.NotLeaderError }

func (e notLeaderStatus) Error() string { return e.nl.Error() }
func (e notLeaderStatus) Unwrap() error { return e.nl }
func (e notLeaderStatus) GRPCStatus() *status.Status {
	return status.Convert(toStatus(sessionstore.ErrNoLeader))
}

func isDomain(err error) bool {
	var de *sessionstore.Error
	return errors.As(err, &de)
}
