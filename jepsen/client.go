package jepsen

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/jepsen/cluster"
	"github.com/sessionstore/sessionstore/jepsen/history"
)

// Classify turns a call's error into a history outcome, exactly by the rule
// of docs/design.md "Retries and outcomes": a call failed definitely only when
// it returned an ErrorInfo reason other than OUTCOME_UNKNOWN; everything
// else (transport errors, deadlines, cancellations, broken streams,
// OUTCOME_UNKNOWN) may or may not have taken effect.
func Classify(err error) (t history.Type, reason, msg string) {
	if err == nil {
		return history.OK, "", ""
	}
	var se *sessionstore.Error
	if errors.As(client.FromStatus(err), &se) && se.Reason != "" && se.Reason != sessionstore.ReasonOutcomeUnknown {
		return history.Fail, string(se.Reason), se.Message
	}
	if se != nil {
		return history.Info, string(se.Reason), se.Message
	}
	return history.Info, "", err.Error()
}

// conns holds one client per node. The clients never retry: every attempt is
// one operation in the history, so an outcome is never hidden by a retry.
type conns struct {
	byNode map[cluster.Node]*client.Client
}

func dialAll(ctx context.Context, b cluster.Backend) (*conns, error) {
	c := &conns{byNode: map[cluster.Node]*client.Client{}}
	for _, n := range b.Nodes() {
		cl, err := client.Dial(ctx, b.ClientAddr(n))
		if err != nil {
			c.close()
			return nil, fmt.Errorf("dial %s: %w", n, err)
		}
		c.byNode[n] = cl.WithOptions(client.Options{MaxAttempts: 1})
	}
	return c, nil
}

func (c *conns) get(n cluster.Node) *client.Client { return c.byNode[n] }

// patient is n's client with the default retries, for set-up and final
// reads, which are not part of the checked history.
func (c *conns) patient(n cluster.Node) *client.Client {
	return c.byNode[n].WithOptions(client.Options{MaxAttempts: 20, InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second})
}

func (c *conns) close() {
	for _, cl := range c.byNode {
		_ = cl.Close()
	}
}
