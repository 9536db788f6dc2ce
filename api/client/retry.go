package client

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"github.com/sessionstore/sessionstore"
)

// ErrorDomain is the google.rpc.ErrorInfo domain of the store's errors.
const ErrorDomain = "sessionstore"

// FromStatus converts a gRPC status error carrying a google.rpc.ErrorInfo of
// domain "sessionstore" into a *sessionstore.Error with that reason and the
// status message. Any other error (nil included) is returned as is.
func FromStatus(err error) error {
	if reason, msg, ok := errorInfo(err); ok {
		return &sessionstore.Error{Reason: reason, Message: msg}
	}
	return err
}

// errorInfo extracts the store's reason from a status error.
func errorInfo(err error) (reason sessionstore.Reason, msg string, ok bool) {
	if err == nil {
		return "", "", false
	}
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return se.Reason, se.Message, true
	}
	st, isStatus := status.FromError(err)
	if !isStatus {
		return "", "", false
	}
	for _, d := range st.Details() {
		if ei, isInfo := d.(*errdetails.ErrorInfo); isInfo && ei.GetDomain() == ErrorDomain && ei.GetReason() != "" {
			return sessionstore.Reason(ei.GetReason()), st.Message(), true
		}
	}
	return "", "", false
}

// policy says which failures of an rpc may be retried.
type policy int

const (
	// mutating: Append and the request-id-carrying rpcs; a retry resends the
	// same message, which the server deduplicates.
	mutating policy = iota
	// read: rpcs that change nothing; retried only where the server
	// certainly did not serve the call.
	read
)

// retryable reports whether err may be retried under p while ctx is alive.
func retryable(ctx context.Context, p policy, err error) bool {
	if ctx.Err() != nil {
		return false
	}
	if reason, _, ok := errorInfo(err); ok {
		switch reason {
		case sessionstore.ReasonNoLeader, sessionstore.ReasonShuttingDown:
			return true
		case sessionstore.ReasonOutcomeUnknown:
			return p == mutating
		default:
			return false // definite
		}
	}
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	switch st.Code() {
	case codes.Unavailable:
		return true
	case codes.DeadlineExceeded:
		return p == mutating
	default:
		return false
	}
}

// viewTooLarge reports whether a unary view (Load, Inspect, Prepare) failed
// because it does not fit in one message, so that its stream form serves it:
// the server's TOO_LARGE, which it answers before committing a repair or
// granting a lease, or gRPC's own RESOURCE_EXHAUSTED without an ErrorInfo,
// a message above this client's receive limit (the server's other
// RESOURCE_EXHAUSTED answers carry QUOTA_EXCEEDED). A TOO_LARGE request
// field fails the stream form the same way, one call later.
func viewTooLarge(err error) bool {
	if reason, _, ok := errorInfo(err); ok {
		return reason == sessionstore.ReasonTooLarge
	}
	return status.Code(err) == codes.ResourceExhausted
}

// do runs call until it succeeds, fails definitely, or the attempts or ctx
// run out; it returns the last attempt's error converted by FromStatus. Each
// attempt goes to the endpoint the pool picks: writes (p == mutating) to the
// leader when it is known; a node that failed the attempt is passed over by
// the next.
func (c *Client) do(ctx context.Context, p policy, call func(ctx context.Context, e *endpoint) error) error {
	var err error
	for attempt := 0; ; attempt++ {
		e := c.pool.pick(p == mutating)
		err = call(ctx, e)
		if err == nil {
			return nil
		}
		c.pool.failed(e, err)
		if attempt+1 >= c.opts.MaxAttempts || !retryable(ctx, p, err) {
			return FromStatus(err)
		}
		t := time.NewTimer(c.backoff(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return FromStatus(err)
		case <-t.C:
		}
	}
}

// backoff is the wait after attempt (0-based): InitialBackoff·2^attempt capped
// at MaxBackoff, drawn uniformly from its upper half ("equal jitter"), so that
// waits still grow while clients that failed together spread out.
func (c *Client) backoff(attempt int) time.Duration {
	d := c.opts.InitialBackoff
	for i := 0; i < attempt && d < c.opts.MaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.opts.MaxBackoff)
	if d <= 1 {
		return d
	}
	half := d / 2
	return half + rand.N(d-half+1)
}

// newRequestID mints a random 128-bit request id as 32 hex digits.
func newRequestID() string {
	var b [16]byte
	_, _ = crand.Read(b[:]) // never fails (crypto/rand, Go ≥ 1.24)
	return hex.EncodeToString(b[:])
}

// withRequestID returns req if its request_id is set, else a copy of req (a
// new message for nil) with a fresh request id. The caller's message is never
// modified: a caller who reuses one message for several operations (a
// KeepAlive loop, say) must not have them deduplicated into one. Every retry
// of one call sends the returned message, hence the same bytes and id.
func withRequestID[M proto.Message](req M) M {
	m := req.ProtoReflect()
	fd := m.Descriptor().Fields().ByName("request_id")
	if fd == nil || fd.Kind() != protoreflect.StringKind {
		panic(fmt.Sprintf("client: %s has no string request_id", m.Descriptor().FullName()))
	}
	if m.IsValid() && m.Get(fd).String() != "" {
		return req
	}
	var c protoreflect.Message
	if m.IsValid() {
		c = proto.Clone(req).ProtoReflect()
	} else {
		c = m.Type().New()
	}
	c.Set(fd, protoreflect.ValueOfString(newRequestID()))
	return c.Interface().(M)
}
