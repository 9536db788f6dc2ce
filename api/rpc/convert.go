package rpc

import (
	"unsafe"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

func headerFromPB(h *pb.SessionHeader) sessionstore.Header { return h.Domain() }

func headerToPB(h sessionstore.Header) *pb.SessionHeader { return pb.HeaderFromDomain(h) }

func leaseToPB(l *sessionstore.Lease) *pb.Lease {
	if l == nil {
		return nil
	}
	return &pb.Lease{SessionId: l.SessionID, Owner: l.Owner, Epoch: l.Epoch, ExpiresAtUnixMs: l.ExpiresAtUnixMs}
}

// listQuery is the query of a List or ListSnapshots request (the two carry
// the same fields). An order this build does not know is passed on and
// refused by the backend.
func listQuery(c pb.Consistency, pageSize int32, pageToken, cwdPrefix, idPrefix string, order pb.ListOrder) sessionstore.ListQuery {
	return sessionstore.ListQuery{Consistency: consistency(c), PageSize: int(pageSize), PageToken: pageToken,
		CwdPrefix: cwdPrefix, IDPrefix: idPrefix, Order: sessionstore.ListOrder(order)}
}

func snapshotToPB(s sessionstore.Snapshot) *pb.SessionSnapshot {
	return &pb.SessionSnapshot{Header: headerToPB(s.Header), Revision: s.Revision, NextSeq: s.NextSeq,
		LastAppendUnixMs: s.LastAppendUnixMs, LeaseHeld: s.LeaseHeld, Title: s.Title}
}

func consistency(c pb.Consistency) sessionstore.Consistency {
	if c == pb.Consistency_STALE {
		return sessionstore.Stale
	}
	return sessionstore.Linearizable
}

// toBytes views each event string as bytes, without a copy: the request
// holds its strings for the whole call, and nothing under the rpc layer
// writes to an event's bytes (they are checked, then marshalled into the
// Raft entry), so the views never change a string. A copy of every event
// was a twentieth of what a leader allocated per Append.
func toBytes(events []string) [][]byte {
	out := make([][]byte, len(events))
	for i, e := range events {
		out[i] = unsafe.Slice(unsafe.StringData(e), len(e))
	}
	return out
}

func toStrings(events [][]byte) []string {
	out := make([]string, len(events))
	for i, e := range events {
		out[i] = string(e)
	}
	return out
}

// chunks splits events into runs of at most max bytes on the wire (each
// event's own framing, sessionstore.EventFraming, counted); an event larger
// than max travels alone.
func chunks(events [][]byte, max int) [][][]byte {
	var out [][][]byte
	start, size := 0, 0
	for i, e := range events {
		if i > start && size+len(e)+sessionstore.EventFraming > max {
			out = append(out, events[start:i])
			start, size = i, 0
		}
		size += len(e) + sessionstore.EventFraming
	}
	if start < len(events) {
		out = append(out, events[start:])
	}
	return out
}

// totalBytes is the size of events without their framing.
func totalBytes(events [][]byte) int64 {
	var n int64
	for _, e := range events {
		n += int64(len(e))
	}
	return n
}
