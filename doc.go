// Package sessionstore holds the domain vocabulary of the session store: session
// headers, read consistency levels and the errors every layer returns. It imports
// only the standard library so that every other package may depend on it.
//
// A session is an append-only log of JSON events (docs/events.md#overview). The store
// keeps each event's bytes verbatim, replicates every change through Raft, and
// acknowledges a write only after a quorum has committed and applied it.
package sessionstore
