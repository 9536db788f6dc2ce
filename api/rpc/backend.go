// Package rpc implements the gRPC services of docs/api.md over a Backend. It knows
// the wire types and the error table, nothing about Raft or storage.
package rpc

import (
	"context"
	"io"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/planmode"
)

// Backend is what the services need from a node; cmd/node passes a
// *cluster.Sessions, which satisfies it as it is.
type Backend interface {
	Locate(ctx context.Context, h sessionstore.Header) (kind, path, url string, err error)
	Create(ctx context.Context, h sessionstore.Header, requestID string, v sessionstore.Validation) (sessionstore.CreateResult, error)
	Append(ctx context.Context, id string, events [][]byte, epoch uint64, expectedRevision string, v sessionstore.Validation) (sessionstore.AppendResult, error)
	// The views are sent in parts: the metadata with the first events, then
	// events only. The unary forms collect them under a limit: a view above
	// it fails TOO_LARGE before any repair or lease is committed (and before
	// its events are read where the session record tells their size).
	LoadStream(ctx context.Context, id, requestID string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error
	InspectStream(ctx context.Context, id string, c sessionstore.Consistency, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error
	PrepareStream(ctx context.Context, id, owner string, ttl time.Duration, requestID string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error
	KeepAlive(ctx context.Context, l sessionstore.Lease, requestID string) (sessionstore.Lease, error)
	Release(ctx context.Context, id string, epoch uint64, requestID string) error
	Delete(ctx context.Context, id, expectedRevision, requestID string) (revision string, err error)
	// ReadFrom sends the suffix in parts: header, revision and next seq in the
	// first, then events only.
	ReadFrom(ctx context.Context, id string, from int64, c sessionstore.Consistency, send func(sessionstore.Suffix) error) error
	// OpenRaw opens the artifact text for reading in bounded chunks.
	OpenRaw(ctx context.Context, id string, c sessionstore.Consistency) (h sessionstore.Header, revision string, text io.ReadSeeker, size int64, err error)
	// List returns a page of the sessions q selects and the next page's
	// token ("" after the last).
	List(ctx context.Context, q sessionstore.ListQuery) ([]sessionstore.Snapshot, string, error)
	Watch(ctx context.Context, id string, from int64, progress time.Duration, send func(sessionstore.WatchEvent) error) error
}

// PlanBackend is what the PlanMode service needs from a node.
type PlanBackend interface {
	PlanGet(ctx context.Context, id string) (sessionstore.PlanState, error)
	PlanSet(ctx context.Context, id string, active bool, c sessionstore.PlanCall) (sessionstore.PlanResult, error)
	PlanPreStep(ctx context.Context, id string, c sessionstore.PlanCall) (sessionstore.PlanResult, error)
	PlanCommand(ctx context.Context, id, rawInput string, images [][]byte, c sessionstore.PlanCall) (sessionstore.PlanResult, error)
	PlanExit(ctx context.Context, id, plan string, answer *planmode.ReviewAnswer, c sessionstore.PlanCall) (sessionstore.PlanResult, error)
	PlanProjection(ctx context.Context, id string) (planmode.ProjectionView, error)
}
