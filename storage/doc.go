// Package storage holds everything that touches disk: the state database (bbolt,
// the FSM's source of truth), the node-local Raft log (RaftWAL) and Raft stable
// store (RaftStore, which also holds node-local buckets), the zstd JSONL
// artifacts and their codec. It knows nothing about Raft replication or gRPC.
//
// Crash-safety contract: the state database is only changed inside Update
// transactions, each of which also records the last applied Raft index, so a
// replayed entry can be recognised and skipped. Artifacts are a derived view:
// they are written after the state commit without fsync and rebuilt from the
// state database whenever they are found lagging.
package storage
