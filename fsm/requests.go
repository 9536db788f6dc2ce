package fsm

import (
	"crypto/sha256"
	"encoding/binary"
	"hash"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

// A request id names one operation (issue: a Prepare under a Load's id got
// the Load's answer, without a lease). A bound command (Command.bind_request,
// version 5) stores its result with the operation that produced it; a later
// command under the same id replays it only when it is the same operation:
// the same kind and the same client arguments. What the proposer adds itself
// (a repair's expected revision, minted notice and command ids) is not an
// argument: a retry re-proposes it with new values.

// requestOp is one operation as a request id sees it.
type requestOp struct {
	kind   string // Create, Load, Prepare, KeepAlive, Release, Delete, PlanSet, ...
	digest []byte // SHA-256 of the client's arguments, in a fixed encoding
}

// opDigest hashes arguments in a fixed encoding of its own (not protobuf's,
// which a library upgrade could change): each value length- or
// width-prefixed, so no two argument lists encode alike.
type opDigest struct{ h hash.Hash }

func newOpDigest(kind string) *opDigest {
	d := &opDigest{h: sha256.New()}
	d.str(kind)
	return d
}

func (d *opDigest) str(s string) *opDigest {
	d.uint(uint64(len(s)))
	d.h.Write([]byte(s))
	return d
}

func (d *opDigest) optStr(s *string) *opDigest {
	if s == nil {
		return d.uint(0)
	}
	return d.uint(1).str(*s)
}

func (d *opDigest) optInt(v *int64) *opDigest {
	if v == nil {
		return d.uint(0)
	}
	return d.uint(1).int(*v)
}

func (d *opDigest) uint(v uint64) *opDigest {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], v)
	d.h.Write(b[:])
	return d
}

func (d *opDigest) int(v int64) *opDigest { return d.uint(uint64(v)) }

func (d *opDigest) bool(v bool) *opDigest {
	if v {
		return d.uint(1)
	}
	return d.uint(0)
}

func (d *opDigest) sum() []byte { return d.h.Sum(nil) }

func op(kind string, args func(*opDigest)) requestOp {
	d := newOpDigest(kind)
	args(d)
	return requestOp{kind: kind, digest: d.sum()}
}

func createOp(c *fsmpb.Create) requestOp {
	return op("Create", func(d *opDigest) {
		h := c.GetHeader()
		d.int(h.GetVersion()).str(h.GetId()).int(h.GetCreatedAt()).optStr(h.Cwd).optStr(h.ParentSession).
			optInt(h.SeedLength).optStr(h.Origin).optInt(h.DelegationDepth).optStr(h.AgentPreset)
	})
}

func repairOp(c *fsmpb.Repair) requestOp {
	if c.Mode == fsmpb.Repair_PREPARE {
		return op("Prepare", func(d *opDigest) { d.str(c.Owner).int(c.TtlMs) })
	}
	return op("Load", func(*opDigest) {})
}

func keepAliveOp(c *fsmpb.KeepAlive) requestOp {
	return op("KeepAlive", func(d *opDigest) { d.str(c.Owner).uint(c.Epoch) })
}

func releaseOp(c *fsmpb.Release) requestOp {
	return op("Release", func(d *opDigest) { d.uint(c.LeaseEpoch) })
}

func deleteOp(c *fsmpb.Delete) requestOp {
	return op("Delete", func(d *opDigest) { d.str(c.ExpectedRevision) })
}

func planSetOp(c *fsmpb.PlanSet) requestOp {
	return op("PlanSet", func(d *opDigest) { d.bool(c.Active).uint(c.LeaseEpoch).int(c.ExpectedNextSeq) })
}

func planPreStepOp(c *fsmpb.PlanPreStep) requestOp {
	return op("PlanPreStep", func(d *opDigest) { d.uint(c.LeaseEpoch).int(c.ExpectedNextSeq) })
}

func planCommandOp(c *fsmpb.PlanCommand) requestOp {
	return op("PlanCommand", func(d *opDigest) {
		d.str(c.RawInput).int(int64(c.ImageCount)).uint(c.LeaseEpoch).int(c.ExpectedNextSeq)
	})
}

func planExitOp(c *fsmpb.PlanExit) requestOp {
	return op("PlanExit", func(d *opDigest) {
		d.str(c.Plan).uint(c.LeaseEpoch)
		a := c.GetAnswer()
		d.bool(a.GetDismissed()).uint(uint64(len(a.GetAnswers())))
		for _, it := range a.GetAnswers() {
			d.str(it.Id).uint(uint64(len(it.Selected)))
			for _, s := range it.Selected {
				d.str(s)
			}
			d.optStr(it.Custom)
		}
	})
}

// reuse refuses a command whose request id holds another operation's
// result; nil when the stored result may be replayed. A result stored
// before operations were recorded (no request_op) is replayed as before.
func (o requestOp) reuse(id, requestID string, stored *fsmpb.Result) *sessionstore.Error {
	switch {
	case stored.RequestOp == "":
		return nil
	case stored.RequestOp != o.kind:
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"request id %s was already used for a %s of session %s; this %s needs a request id of its own",
			sessionstore.Quote(requestID), stored.RequestOp, sessionstore.Quote(id), o.kind)
	case string(stored.RequestDigest) != string(o.digest):
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"request id %s was already used for a %s of session %s with other arguments; a retry must resend the same request, a new request needs a new id",
			sessionstore.Quote(requestID), o.kind, sessionstore.Quote(id))
	}
	return nil
}
