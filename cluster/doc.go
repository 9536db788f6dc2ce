// Package cluster runs consensus for one node: hashicorp/raft over TCP, the
// proposer that groups client commands into few Raft entries, linearizable and
// stale reads, and the session operations of the persistence contract
// expressed as proposals and reads. It satisfies the Backend that api/rpc
// declares.
package cluster
