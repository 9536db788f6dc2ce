// Package cluster runs consensus for one node: hashicorp/raft over TCP, the
// proposer that groups client commands into few Raft entries, the membership
// (gossip, bootstrap, reconcile), linearizable and stale reads, and the
// session operations of the persistence contract expressed as proposals and
// reads. Node owns the parts and their goroutines; its Sessions satisfy the
// Backend and PlanBackend that api/rpc declares.
package cluster
