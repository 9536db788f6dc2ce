package sessionstore

import "context"

// Caller is who a request acts for, as the receiving node authenticated it.
// The cluster stamps it into commands so that per-caller quotas are decided
// by the state machine, identically on every replica.
type Caller struct {
	// Name is the principal's name ("" when authentication is off).
	Name string
	// MaxSessions overrides the node's sessions-per-principal quota when > 0.
	MaxSessions int64
}

type callerKey struct{}

// WithCaller returns ctx carrying c.
func WithCaller(ctx context.Context, c Caller) context.Context {
	return context.WithValue(ctx, callerKey{}, c)
}

// CallerFrom returns the caller ctx carries (the zero Caller if none).
func CallerFrom(ctx context.Context) Caller {
	c, _ := ctx.Value(callerKey{}).(Caller)
	return c
}
