// Package fsm is the deterministic state machine every replica runs over the
// committed Raft log, and the encoding of that log's entries.
//
// Determinism rules: Apply never reads the clock, randomness, the network or
// map order. Time arrives in the entry, stamped by the proposing leader, and is
// clamped to the largest time applied so far. Crash closers are computed here
// from the stored log, so every replica appends the same bytes.
//
// Durability: each ApplyBatch is one bbolt transaction that also records the
// last applied index. The Raft log is the durable record (an entry is fsynced
// there before it commits); the state database commits without fsync and is
// flushed every 100 ms by the node, so after a crash it is at some applied
// index and raft replays the rest. raft runs with NoSnapshotRestoreOnStart, so
// on restart the entries at or below the stored index are skipped here; the
// node's start-up guard (cluster) restores the latest snapshot first whenever
// the state file is missing, unreadable, damaged by an operating-system crash,
// or older than that snapshot.
//
// Artifacts are written after the commit by the artifacts package, fed by the
// observer New is given, and never fail Apply. A bbolt failure inside Apply
// panics: a replica that cannot apply an entry must not go on and diverge.
package fsm
