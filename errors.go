package sessionstore

import "fmt"

// Reason is the stable classification of an error. It travels to clients as the
// reason of a google.rpc.ErrorInfo (docs/api.md "Errors") so that no client has to parse
// the human text, which is the reference harness's own wording.
type Reason string

// The reasons of docs/api.md. Each is mapped to a gRPC code in exactly one table
// (api/rpc/errors.go).
const (
	ReasonNotFound          Reason = "NOT_FOUND"
	ReasonAlreadyExists     Reason = "ALREADY_EXISTS"
	ReasonSeqMismatch       Reason = "SEQ_MISMATCH"
	ReasonRevisionMismatch  Reason = "REVISION_MISMATCH"
	ReasonLiveTurnOpen      Reason = "LIVE_TURN_OPEN"
	ReasonSessionLive       Reason = "SESSION_LIVE"
	ReasonLeaseFenced       Reason = "LEASE_FENCED"
	ReasonFormatUnsupported Reason = "FORMAT_UNSUPPORTED"
	ReasonInvalidStored     Reason = "INVALID_STORED_EVENT"
	ReasonNotJSON           Reason = "NOT_JSON"
	ReasonInvalidEvent      Reason = "INVALID_EVENT"
	ReasonInvalidHeader     Reason = "INVALID_HEADER"
	ReasonInvalidSessionID  Reason = "INVALID_SESSION_ID"
	ReasonInvalidArgument   Reason = "INVALID_ARGUMENT"
	ReasonCorruption        Reason = "CORRUPTION"
	ReasonTooLarge          Reason = "TOO_LARGE"
	ReasonQuotaExceeded     Reason = "QUOTA_EXCEEDED"
	ReasonNoLeader          Reason = "NO_LEADER"
	ReasonShuttingDown      Reason = "SHUTTING_DOWN"
	ReasonOutcomeUnknown    Reason = "OUTCOME_UNKNOWN"
	ReasonUnauthenticated   Reason = "UNAUTHENTICATED"
	ReasonPermissionDenied  Reason = "PERMISSION_DENIED"
)

// Error is a domain error: a reason and the message a client sees. Messages are the
// reference harness's texts byte for byte wherever the reference has one.
type Error struct {
	Reason  Reason
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is makes errors.Is(err, ErrNotFound) true for every *Error with the same reason,
// whatever its message.
func (e *Error) Is(target error) bool {
	t, ok := target.(*Error)
	return ok && t.Reason == e.Reason
}

// Errorf builds an *Error with a formatted message.
func Errorf(reason Reason, format string, args ...any) *Error {
	return &Error{Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Sentinels for errors.Is; each matches any *Error of its reason.
var (
	ErrNotFound          = &Error{Reason: ReasonNotFound}
	ErrAlreadyExists     = &Error{Reason: ReasonAlreadyExists}
	ErrSeqMismatch       = &Error{Reason: ReasonSeqMismatch}
	ErrRevisionMismatch  = &Error{Reason: ReasonRevisionMismatch}
	ErrLiveTurnOpen      = &Error{Reason: ReasonLiveTurnOpen}
	ErrSessionLive       = &Error{Reason: ReasonSessionLive}
	ErrLeaseFenced       = &Error{Reason: ReasonLeaseFenced}
	ErrFormatUnsupported = &Error{Reason: ReasonFormatUnsupported}
	ErrInvalidStored     = &Error{Reason: ReasonInvalidStored}
	ErrNotJSON           = &Error{Reason: ReasonNotJSON}
	ErrInvalidEvent      = &Error{Reason: ReasonInvalidEvent}
	ErrInvalidHeader     = &Error{Reason: ReasonInvalidHeader}
	ErrInvalidSessionID  = &Error{Reason: ReasonInvalidSessionID}
	ErrInvalidArgument   = &Error{Reason: ReasonInvalidArgument}
	ErrCorruption        = &Error{Reason: ReasonCorruption}
	ErrTooLarge          = &Error{Reason: ReasonTooLarge}
	ErrQuotaExceeded     = &Error{Reason: ReasonQuotaExceeded}
	ErrUnauthenticated   = &Error{Reason: ReasonUnauthenticated}
	ErrPermissionDenied  = &Error{Reason: ReasonPermissionDenied}
	ErrNoLeader          = &Error{Reason: ReasonNoLeader, Message: "no leader"}
	ErrShuttingDown      = &Error{Reason: ReasonShuttingDown, Message: "node is shutting down"}
	ErrOutcomeUnknown    = &Error{Reason: ReasonOutcomeUnknown, Message: "outcome unknown: the command may or may not have been applied; retry with the same bytes or request id"}
)

// NotFound is the reference text for an unknown session.
func NotFound(id string) *Error {
	return Errorf(ReasonNotFound, "session %s not found", Quote(id))
}

// Quote renders a string the way the reference's template literals do: inside
// plain double quotes, with no escaping (`session "<id>" not found`).
func Quote(s string) string { return `"` + s + `"` }

// NotLeaderError says this node is not the leader and names the leader, so the
// API layer can forward the call there. It never reaches a client: a call that
// cannot be forwarded fails with NO_LEADER (before it was sent) or
// OUTCOME_UNKNOWN (after).
type NotLeaderError struct {
	LeaderID  string
	LeaderAPI string // the leader's gRPC address
}

func (e *NotLeaderError) Error() string {
	return fmt.Sprintf("not the leader; the leader is %s at %s", e.LeaderID, e.LeaderAPI)
}
