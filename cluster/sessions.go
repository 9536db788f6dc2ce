package cluster

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/artifacts"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// Sessions serves the session operations of the persistence contract on
// one node (api/rpc's Backend and PlanBackend): writes become proposals,
// reads pass the read barrier and read the state database, downloads read
// the artifact files. The node builds it (Node.Sessions) and owns its
// goroutines (expiry, retention).
type Sessions struct {
	ctx       context.Context // ends when the node stops
	cfg       Config
	raft      *raft.Raft
	logs      raft.LogStore // which entries reach the FSM (lastStateIndex)
	state     *storage.StateDB
	fsm       *fsm.FSM
	artifacts *artifacts.Writer
	proposer  *proposer
	members   *membership  // notLeader, votersSupport, the voters' disks
	disk      *diskMonitor // free space of DataDir's filesystem (issue 8)
	metrics   *Metrics
	node      nodeState
	logger    *slog.Logger

	commandIDs *commandIDs // /plan command ids this node mints
	warnOnce   sync.Once   // quotas not enforced yet (a voter on an older build)
}

// nodeState is what Sessions asks of the node that owns it (each takes the
// node's mu).
type nodeState struct {
	closing     func() bool // Close has begun: proposals are refused
	leaderReady func() bool // this node leads a term whose barrier completed
}

// sessionParts are the node's parts Sessions works on.
type sessionParts struct {
	raft      *raft.Raft
	logs      raft.LogStore
	state     *storage.StateDB
	fsm       *fsm.FSM
	artifacts *artifacts.Writer
	proposer  *proposer
	members   *membership
	disk      *diskMonitor
	metrics   *Metrics
}

func newSessions(ctx context.Context, cfg Config, p sessionParts, node nodeState, logger *slog.Logger) *Sessions {
	return &Sessions{ctx: ctx, cfg: cfg, raft: p.raft, logs: p.logs, state: p.state, fsm: p.fsm, artifacts: p.artifacts,
		proposer: p.proposer, members: p.members, disk: p.disk, metrics: p.metrics, node: node, logger: logger,
		commandIDs: newCommandIDs()}
}

// stored is one consistent read of a session.
type stored struct {
	*fsm.Session // nil: no such session
	events       [][]byte
	now          int64 // fsm.Now when read: the time Apply would decide at
}

// read returns a session's record and its events with seq >= from, in one
// read transaction. A session that does not exist gives a nil Session.
func (ss *Sessions) read(id string, from int64, withEvents bool) (stored, error) {
	limit := 0
	if withEvents {
		limit = -1
	}
	return ss.readUpTo(id, from, limit)
}

// readUpTo is read with at most limit bytes of events (at least one event
// when there is one; 0: none, -1: all). Damage it finds is repaired where it
// can be (repairAfter) and returned.
func (ss *Sessions) readUpTo(id string, from int64, limit int) (stored, error) {
	var s stored
	err := ss.state.View(func(tx *storage.Tx) error {
		var err error
		if s.Session, err = fsm.ReadSession(tx, id); err != nil || s.Session == nil {
			return err
		}
		rec := s.Record
		s.now = fsm.Now(tx, time.Now().UnixMilli())
		if limit < 0 {
			s.events, err = tx.Events(id, rec.Incarnation, from, rec.NextSeq)
		} else if limit > 0 {
			total := 0
			err = tx.ForEachEvent(id, rec.Incarnation, from, rec.NextSeq, func(_ int64, ev []byte) error {
				if total > 0 && total+len(ev) > limit {
					return storage.ErrStop
				}
				total += len(ev)
				s.events = append(s.events, bytes.Clone(ev))
				return nil
			})
		}
		return err
	})
	ss.repairAfter(err)
	return s, err
}

func (ss *Sessions) readMaterialized(ctx context.Context, id string, c sessionstore.Consistency, from int64, withEvents bool) (stored, error) {
	if err := ss.readBarrier(ctx, c); err != nil {
		return stored{}, err
	}
	s, err := ss.read(id, from, withEvents)
	if err != nil {
		return s, storageErr(err)
	}
	if !s.Visible() {
		return s, sessionstore.NotFound(id)
	}
	return s, nil
}

// repairAfter follows a read that found damage (a *storage.ChecksumError):
// it logs it and rewrites the session's damaged events from this node's
// artifact where the artifact holds their checksummed bytes. The read itself
// has answered CORRUPTION; a retry reads the repaired events.
func (ss *Sessions) repairAfter(err error) {
	var ce *storage.ChecksumError
	if !errors.As(err, &ce) {
		return
	}
	ss.logger.Error("state database damage found on read", "err", err)
	fixed := 0
	rerr := ss.state.Update(func(tx *storage.Tx) error {
		s, err := fsm.ReadSession(tx, ce.Session)
		if err != nil || s == nil {
			return err
		}
		fixed, err = ss.artifacts.RepairEvents(tx, ce.Session, s.Record.Incarnation, s.Record.NextSeq)
		return err
	})
	if rerr != nil || fixed == 0 {
		ss.logger.Error("damaged session not repaired from the artifact; rebuild this node's state database (README \"Failure modes\")",
			"session", ce.Session, "err", rerr)
	}
}

func storageErr(err error) error {
	var de *sessionstore.Error
	if errors.As(err, &de) {
		return err
	}
	return sessionstore.Errorf(sessionstore.ReasonCorruption, "storage failure: %v", err)
}

// rawLogPath is this node's artifact path, used in format-refusal texts.
func (ss *Sessions) rawLogPath(h sessionstore.Header) string {
	p, err := storage.ArtifactPath(ss.artifactRoot(), h)
	if err != nil {
		return ""
	}
	return p
}

func (ss *Sessions) artifactRoot() string {
	root, err := filepath.Abs(artifactsDir(ss.cfg.DataDir))
	if err != nil {
		return artifactsDir(ss.cfg.DataDir)
	}
	return root
}

// Locate answers where this node's artifact for a header lives.
func (ss *Sessions) Locate(ctx context.Context, h sessionstore.Header) (kind, path, link string, err error) {
	if err := sessionlog.ValidateSessionID(h.ID); err != nil {
		return "", "", "", err
	}
	if h.Cwd != nil && *h.Cwd == "" {
		return "", "", "", sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "session header cwd must not be empty")
	}
	p, err := storage.ArtifactPath(ss.artifactRoot(), h)
	if err != nil {
		return "", "", "", sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "%v", err)
	}
	if ss.cfg.HTTPBase != "" {
		link = strings.TrimRight(ss.cfg.HTTPBase, "/") + "/v1/sessions/" + url.PathEscape(h.ID) + "/" + storage.ArtifactName
	}
	return "jsonl", p, link, nil
}

// Create registers a session for lazy materialisation.
func (ss *Sessions) Create(ctx context.Context, h sessionstore.Header, requestID string, v sessionstore.Validation) (sessionstore.CreateResult, error) {
	if err := sessionlog.CheckCreateHeader(h); err != nil {
		return sessionstore.CreateResult{}, err
	}
	// What a read checks of a header depends on the header alone, so it is
	// decided here, before anything is proposed.
	check := sessionlog.NewReadCheck(h.ID, h, "")
	if refusal := check.WriteRefusal(); refusal != nil && v == sessionstore.ValidateStrict {
		return sessionstore.CreateResult{}, refusal
	}
	if _, err := ss.propose(ctx, ss.stamp(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
		Header: fsm.HeaderToPB(h), RequestId: requestID}}})); err != nil {
		return sessionstore.CreateResult{}, err
	}
	return sessionstore.CreateResult{Unreadable: asError(check.Err())}, nil
}

// asError is err as the *Error it is (nil for nil).
func asError(err error) *sessionstore.Error {
	if err == nil {
		return nil
	}
	var se *sessionstore.Error
	if errors.As(err, &se) {
		return se
	}
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%s", err.Error())
}

// Append durably appends a contiguous batch (the checks of docs/design.md "Validation" first;
// nothing is written when any event is refused).
func (ss *Sessions) Append(ctx context.Context, id string, events [][]byte, epoch uint64, expectedRevision string, v sessionstore.Validation) (sessionstore.AppendResult, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return sessionstore.AppendResult{}, err
	}
	// A follower hands the call on as it came: the leader checks the batch
	// (once, not on both nodes) against its own state and limits.
	if ss.raft.State() != raft.Leader {
		return sessionstore.AppendResult{}, ss.members.notLeader()
	}
	if len(events) > ss.cfg.MaxBatchCount {
		return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
			"append batch holds %d events; the limit is %d", len(events), ss.cfg.MaxBatchCount)
	}
	total := 0
	var first int64
	for i, ev := range events {
		if len(ev) > ss.cfg.MaxEventBytes {
			return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
				"event at index %d is %d bytes; the limit is %d", i, len(ev), ss.cfg.MaxEventBytes)
		}
		total += len(ev)
		if total > ss.cfg.MaxBatchBytes {
			return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
				"append batch exceeds %d bytes", ss.cfg.MaxBatchBytes)
		}
		info, err := sessionlog.CheckEvent(id, ev)
		if err != nil {
			return sessionstore.AppendResult{}, err
		}
		if i == 0 {
			first = info.Seq
		} else if info.Seq != first+int64(i) {
			// The reference reports a gap against the stored cursor; that is
			// first+i whenever the first seq is the right one.
			next := first
			if s, err := ss.read(id, 0, false); err == nil && s.Session != nil {
				next = s.Record.NextSeq
			}
			if first != next {
				return sessionstore.AppendResult{}, fsm.SeqMismatch(id, next, 0, first)
			}
			return sessionstore.AppendResult{}, fsm.SeqMismatch(id, next, int64(i), info.Seq)
		}
	}
	if len(events) == 0 {
		// An empty batch is a no-op and keeps the session lazy (docs/events.md#write-checks).
		s, err := ss.read(id, 0, false)
		if err != nil || s.Session == nil {
			return sessionstore.AppendResult{}, err
		}
		return sessionstore.AppendResult{Revision: s.Revision, NextSeq: s.Record.NextSeq}, nil
	}
	// A strict append is decided in Apply against the log as stored
	// (fsm/readchecks.go), once every voter applies that rule; until then
	// (a cluster mid-upgrade) the leader checks it here, against its own
	// state, which a concurrent Delete and re-create of the session can race.
	strict := v == sessionstore.ValidateStrict
	if strict && !ss.members.votersSupport(fsm.StrictVersion) {
		if err := ss.precheckStrict(ctx, id, first, events); err != nil {
			return sessionstore.AppendResult{}, err
		}
		strict = false
	}
	res, err := ss.propose(ctx, ss.stamp(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: &fsmpb.Append{
		SessionId: id, Events: events, LeaseEpoch: epoch, ExpectedRevision: expectedRevision, FirstSeq: first, Strict: strict}}}))
	if err != nil {
		return sessionstore.AppendResult{}, err
	}
	out := sessionstore.AppendResult{Revision: res.Revision, NextSeq: res.NextSeq, Duplicate: res.Duplicate}
	if res.UnreadableReason != "" {
		out.Unreadable = &sessionstore.Error{Reason: sessionstore.Reason(res.UnreadableReason), Message: res.UnreadableMessage}
	}
	return out, nil
}

// precheckStrict refuses a batch after which a read of the session's log, as
// this node stores it, would refuse it. A batch that does not start at the
// stored next seq, or a session that is not there, is left to Apply.
func (ss *Sessions) precheckStrict(ctx context.Context, id string, first int64, events [][]byte) error {
	s, err := ss.read(id, 0, false)
	if err != nil || s.Session == nil || s.Record.NextSeq != first {
		return nil
	}
	check := sessionlog.NewReadCheck(id, s.Header, "")
	for seq := int64(0); seq < s.Record.NextSeq; {
		evs, err := ss.chunkAt(ctx, id, s.Record.Incarnation, seq, s.Record.NextSeq)
		if err != nil {
			return err
		}
		seq += int64(len(evs))
		check.Add(evs)
	}
	check.Add(events)
	if refusal := check.WriteRefusal(); refusal != nil {
		return refusal
	}
	return nil
}

// checkedView reads a materialised session's record and checks its
// reference view: header checks, legacy normalisation, read validation and
// the closers an open turn would need. It reads the log a chunk at a time,
// each in its own read transaction, and keeps none of it: the events below
// the record's next seq never change within its incarnation, so a caller
// reads them again (normalised, with viewEvents or sendView) as checked. It
// writes nothing.
//
// A view above limit (one answered in one message) is refused with
// TOO_LARGE: from the record's size of the events before any is read, and
// from the normalised events and closers once checked, so a caller that
// commits something afterwards (a repair, a lease) never does for a view it
// cannot answer.
func (ss *Sessions) checkedView(ctx context.Context, id string, c sessionstore.Consistency, limit sessionstore.ViewLimit) (stored, [][]byte, error) {
	s, err := ss.readMaterialized(ctx, id, c, 0, false)
	if err != nil {
		return s, nil, err
	}
	check := sessionlog.NewReadCheck(id, s.Header, ss.rawLogPath(s.Header))
	if err := check.Err(); err != nil { // the header's, before any event is read
		return s, nil, err
	}
	if size := s.Record.EventBytes; size != nil { // absent on old records: the check below counts
		if err := limit.Check(id, s.Record.NextSeq, *size); err != nil {
			return s, nil, err
		}
	}
	var count, size int64 // of the normalised events
	for seq := int64(0); seq < s.Record.NextSeq; {
		evs, err := ss.chunkAt(ctx, id, s.Record.Incarnation, seq, s.Record.NextSeq)
		if err != nil {
			return s, nil, err
		}
		seq += int64(len(evs))
		out := check.Add(evs)
		count, size = count+int64(len(out)), size+totalBytes(out)
	}
	closers, err := check.Finish()
	if err != nil {
		return s, nil, err
	}
	// Closers count even where a live lease leaves them out: a few hundred
	// bytes within the message's margin.
	if err := limit.Check(id, count+int64(len(closers)), size+totalBytes(closers)); err != nil {
		return s, nil, err
	}
	return s, closers, nil
}

func totalBytes(evs [][]byte) int64 {
	var n int64
	for _, e := range evs {
		n += int64(len(e))
	}
	return n
}

func leaseFromPB(id string, l *fsmpb.Lease) *sessionstore.Lease {
	if l == nil {
		return nil
	}
	return &sessionstore.Lease{SessionID: id, Owner: l.Owner, Epoch: l.Epoch, ExpiresAtUnixMs: l.ExpiresAtUnixMs}
}

// inspect validates the balanced view and returns its metadata with the
// closers to add (none for a session under a live lease, whose owner holds
// the open turn) and the incarnation read.
func (ss *Sessions) inspect(ctx context.Context, id string, c sessionstore.Consistency, limit sessionstore.ViewLimit) (sessionstore.View, uint64, [][]byte, error) {
	s, closers, err := ss.checkedView(ctx, id, c, limit)
	if err != nil {
		return sessionstore.View{}, 0, nil, err
	}
	v := sessionstore.View{Header: s.Header, Revision: s.Revision, NextSeq: s.Record.NextSeq,
		Lease: leaseFromPB(id, s.Record.Lease)}
	if fsm.LeaseLive(s.Record, s.now) {
		closers = nil
	}
	return v, s.Record.Incarnation, closers, nil
}

// InspectStream sends the balanced view without committing anything: closers
// are added in memory, except for a session under a live lease, which is
// sent as stored. It validates the whole log a chunk at a time
// (checkedView), then sends the view with its metadata first and the events
// read again from storage a chunk at a time, so neither the check nor a
// client that reads slowly holds more than a chunk. (The unary Inspect
// collects these parts, under limit: a larger view is refused before its
// events are read where the record tells their size; see checkedView.)
func (ss *Sessions) InspectStream(ctx context.Context, id string, c sessionstore.Consistency, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	v, inc, closers, err := ss.inspect(ctx, id, c, limit)
	if err != nil {
		return err
	}
	return ss.sendView(ctx, id, inc, v, closers, send)
}

// LoadStream sends the balanced view, committing the crash repair of a cold
// session through the replicated log first (the reference's load repair); see
// InspectStream. A view above limit is refused before the repair.
func (ss *Sessions) LoadStream(ctx context.Context, id, requestID string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	v, inc, err := ss.repairView(ctx, id, requestID, fsmpb.Repair_LOAD, "", 0, limit)
	if err != nil {
		return err
	}
	return ss.sendView(ctx, id, inc, v, nil, send)
}

// PrepareStream takes ownership: it commits the repair like LoadStream, bumps
// the epoch and grants a lease; see InspectStream. A view above limit is
// refused before the lease is granted.
func (ss *Sessions) PrepareStream(ctx context.Context, id, owner string, ttl time.Duration, requestID string, limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
	if err := checkPrepare(owner, ttl); err != nil {
		return err
	}
	v, inc, err := ss.repairView(ctx, id, requestID, fsmpb.Repair_PREPARE, owner, ttl.Milliseconds(), limit)
	if err != nil {
		return err
	}
	return ss.sendView(ctx, id, inc, v, nil, send)
}

// sendView sends v's metadata with the first events, then the normalised
// events [0, v.NextSeq) of incarnation inc read from storage a chunk at a
// time, then closers. The log was validated up to there and a log only grows
// within an incarnation, so these are the events of v's revision.
func (ss *Sessions) sendView(ctx context.Context, id string, inc uint64, v sessionstore.View, closers [][]byte, send func(sessionstore.View) error) error {
	v.Events = nil
	first := &v
	norm := sessionlog.NewNormalizer(id, ss.rawLogPath(v.Header))
	emit := func(evs [][]byte) error {
		m := sessionstore.View{Events: evs}
		if first != nil {
			m = *first
			m.Events = evs
			first = nil
		}
		return send(m)
	}
	for seq := int64(0); seq < v.NextSeq; {
		evs, err := ss.chunkAt(ctx, id, inc, seq, v.NextSeq)
		if err != nil {
			return err
		}
		out, err := norm.Next(evs)
		if err != nil {
			return sessionlog.WrapCorruption(id, err)
		}
		seq += int64(len(evs))
		if err := emit(out); err != nil {
			return err
		}
	}
	if len(closers) > 0 || first != nil {
		return emit(closers)
	}
	return nil
}

func checkPrepare(owner string, ttl time.Duration) error {
	if owner == "" {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "prepare needs a non-empty owner")
	}
	if ttl < 100*time.Millisecond || ttl > 24*time.Hour {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"lease ttl must be between 100ms and 24h, got %v", ttl)
	}
	return nil
}

// repairView commits the repair (and for Prepare the lease) a view needs and
// returns its metadata and the incarnation it belongs to; the stream forms
// read the events afterwards. A view above limit is refused before anything
// is proposed; the repair is proposed against the revision checked, so a log
// that grew since is read and checked again.
func (ss *Sessions) repairView(ctx context.Context, id, requestID string, mode fsmpb.Repair_Mode, owner string, ttlMs int64, limit sessionstore.ViewLimit) (sessionstore.View, uint64, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return sessionstore.View{}, 0, err
	}
	for attempt := 0; ; attempt++ {
		s, closers, err := ss.checkedView(ctx, id, sessionstore.Linearizable, limit)
		if err != nil {
			return sessionstore.View{}, 0, err
		}
		inc := s.Record.Incarnation
		if mode == fsmpb.Repair_LOAD && len(closers) == 0 {
			return sessionstore.View{Header: s.Header, Revision: s.Revision,
				NextSeq: s.Record.NextSeq, Lease: leaseFromPB(id, s.Record.Lease)}, inc, nil
		}
		res, err := ss.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Repair{Repair: &fsmpb.Repair{
			SessionId: id, RequestId: requestID, Mode: mode, Owner: owner, TtlMs: ttlMs, ExpectedRevision: s.Revision}}})
		if err != nil {
			return sessionstore.View{}, 0, err
		}
		if res.Stale {
			// Another writer changed the log between our read and the commit:
			// read and validate again, as the reference does (docs/events.md#crash-repair).
			if attempt > 100 {
				return sessionstore.View{}, 0, sessionstore.ErrOutcomeUnknown
			}
			continue
		}
		// The log below res.NextSeq never changes again, so reading that prefix
		// gives exactly the state at the returned revision.
		return sessionstore.View{Header: s.Header, Revision: res.Revision, NextSeq: res.NextSeq,
			Repaired: res.Repaired, Lease: leaseFromPB(id, res.Lease)}, inc, nil
	}
}

// KeepAlive extends a lease.
func (ss *Sessions) KeepAlive(ctx context.Context, l sessionstore.Lease, requestID string) (sessionstore.Lease, error) {
	res, err := ss.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_KeepAlive{KeepAlive: &fsmpb.KeepAlive{
		SessionId: l.SessionID, Owner: l.Owner, Epoch: l.Epoch, RequestId: requestID}}})
	if err != nil {
		return sessionstore.Lease{}, err
	}
	return *leaseFromPB(l.SessionID, res.Lease), nil
}

// Release ends a lease; the session becomes cold (its epoch stays).
func (ss *Sessions) Release(ctx context.Context, id string, epoch uint64, requestID string) error {
	_, err := ss.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Release{Release: &fsmpb.Release{
		SessionId: id, LeaseEpoch: epoch, RequestId: requestID}}})
	return err
}

// ReadFrom streams the stored events with seq >= from: legacy-normalised and
// validated (the whole log, as the reference's sequential backends do), with
// no closers and nothing written. send gets the header, revision and next seq
// with the first events, then the rest a chunk at a time.
//
// The log is read in chunks, each in its own read transaction, twice: once to
// validate all of it (an error anywhere fails the read before anything is
// sent), once to send it. Both passes read the prefix below the next seq read
// first, which never changes within an incarnation; a deletion or re-creation
// in between ends the read with NOT_FOUND.
func (ss *Sessions) ReadFrom(ctx context.Context, id string, from int64, c sessionstore.Consistency, send func(sessionstore.Suffix) error) error {
	if from < 0 || from > sessionstore.MaxSafeInteger {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"readFrom fromSeq must be a non-negative safe integer, got %d", from)
	}
	s, err := ss.readMaterialized(ctx, id, c, 0, false)
	if err != nil {
		return err
	}
	path := ss.rawLogPath(s.Header)
	if err := sessionlog.CheckReadFromHeader(id, s.Header, path); err != nil {
		return err
	}
	end, inc := s.Record.NextSeq, s.Record.Incarnation
	norm := sessionlog.NewNormalizer(id, path)
	for seq := int64(0); seq < end; {
		evs, err := ss.chunkAt(ctx, id, inc, seq, end)
		if err != nil {
			return err
		}
		norm.Check(evs)
		seq += int64(len(evs))
	}
	if err := norm.Err(); err != nil {
		return err
	}
	first := &sessionstore.Suffix{Header: s.Header, Revision: s.Revision, NextSeq: end}
	for seq := int64(0); seq < end; {
		evs, err := ss.chunkAt(ctx, id, inc, seq, end)
		if err != nil {
			return err
		}
		out, err := norm.Next(evs)
		if err != nil {
			return err
		}
		if skip := from - seq; skip > 0 {
			out = out[min(skip, int64(len(out))):]
		}
		seq += int64(len(evs))
		if len(out) == 0 {
			continue
		}
		m := sessionstore.Suffix{Events: out}
		if first != nil {
			m.Header, m.Revision, m.NextSeq = first.Header, first.Revision, first.NextSeq
			first = nil
		}
		if err := send(m); err != nil {
			return err
		}
	}
	if first != nil {
		return send(*first)
	}
	return nil
}

// chunkAt reads the events from seq on, below end, up to readChunkBytes (at
// least one), in one read transaction, checking that the session is still
// incarnation inc.
func (ss *Sessions) chunkAt(ctx context.Context, id string, inc uint64, seq, end int64) ([][]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	s, err := ss.readUpTo(id, seq, readChunkBytes)
	if err != nil {
		return nil, storageErr(err)
	}
	if s.Session == nil || s.Record.Incarnation != inc {
		return nil, fsm.DeletedWhileRead(id, "")
	}
	if len(s.events) == 0 {
		return nil, sessionstore.Errorf(sessionstore.ReasonCorruption,
			"session %s: event %d is missing from the state database", sessionstore.Quote(id), seq)
	}
	if over := seq + int64(len(s.events)) - end; over > 0 {
		s.events = s.events[:int64(len(s.events))-over]
	}
	return s.events, nil
}

// RawText is the decoded text of a session's artifact: the header line and one
// line per stored event, each ending in "\n". It is rendered from the state
// database, which the artifact mirrors byte for byte once written. It holds the
// whole text in memory: the API streams it with OpenRaw instead.
func (ss *Sessions) RawText(ctx context.Context, id string, c sessionstore.Consistency) (sessionstore.Header, string, []byte, error) {
	h, rev, r, _, err := ss.OpenRaw(ctx, id, c)
	if err != nil {
		return sessionstore.Header{}, "", nil, err
	}
	text, err := io.ReadAll(r)
	if err != nil {
		return sessionstore.Header{}, "", nil, err
	}
	return h, rev, text, nil
}

// Artifact returns what the HTTP download serves for a session: the path of
// its artifact and the length of the prefix that holds the current revision
// when that file is current, else a reader that encodes the artifact from the
// state database (identical, frame for frame), one frame per read
// transaction.
//
// It serves this node's own applied state, as the artifact on its disk does.
// An artifact that fails verification (artifacts.Writer.Verify) is not served:
// the state database's encoding is, while the artifact is rebuilt.
func (ss *Sessions) Artifact(ctx context.Context, id string) (revision, path string, size int64, rendered io.Reader, err error) {
	var w storage.Watermark
	revision, w, rendered, err = ss.artifact(id, true)
	if err == nil && w.Path != "" && ss.artifacts.Verify(id, w) != nil {
		revision, w, rendered, err = ss.artifact(id, false)
	}
	ss.repairAfter(err)
	return revision, w.Path, w.Bytes, rendered, err
}

// RenderedArtifact is Artifact encoded from the state database, whether or
// not the file is current (for a file that vanished while being opened).
func (ss *Sessions) RenderedArtifact(ctx context.Context, id string) (revision string, rendered io.Reader, err error) {
	revision, _, rendered, err = ss.artifact(id, false)
	ss.repairAfter(err)
	return revision, rendered, err
}

func (ss *Sessions) artifact(id string, fromFile bool) (revision string, w storage.Watermark, rendered io.Reader, err error) {
	var fr *frameReader
	err = ss.state.View(func(tx *storage.Tx) error {
		s, err := fsm.ReadSession(tx, id)
		if err != nil {
			return err
		}
		if !s.Visible() {
			return sessionstore.NotFound(id)
		}
		revision = s.Revision
		if cur, ok := ss.artifacts.Current(id, s.Record.LastChangeIndex); ok && fromFile {
			w = cur
			return nil
		}
		fr = &frameReader{ss: ss, id: id, revision: revision, incarnation: s.Record.Incarnation, frames: s.Record.Frames,
			buf: artifacts.EncodeHeaderFrame(s.Header)}
		return nil
	})
	if fr != nil {
		rendered = fr
	}
	return revision, w, rendered, err
}

// frameReader encodes an artifact's frames one at a time, each in its own
// read transaction (verified like every read of stored events).
type frameReader struct {
	ss          *Sessions
	id          string
	revision    string
	incarnation uint64
	frames      uint64 // the last frame of the revision
	next        uint64 // the next frame to encode (0: the header frame is in buf)
	buf         []byte
}

func (f *frameReader) Read(p []byte) (int, error) {
	for len(f.buf) == 0 {
		if f.next >= f.frames {
			return 0, io.EOF
		}
		f.next++
		err := f.ss.state.View(func(tx *storage.Tx) error {
			if _, err := fsm.ReadIncarnation(tx, f.id, f.incarnation, f.revision); err != nil {
				return err
			}
			frames, err := artifacts.EncodeFrames(tx, f.id, f.incarnation, f.next, f.next)
			if len(frames) == 1 {
				f.buf = frames[0]
			}
			return err
		})
		if err != nil {
			f.ss.repairAfter(err)
			return 0, storageErr(err)
		}
	}
	n := copy(p, f.buf)
	f.buf = f.buf[n:]
	return n, nil
}

// Watch streams a session's events from from on, then each newly committed
// batch, in order, from this node's applied state; with no news it sends a
// progress message every progress interval. It ends with UNAVAILABLE when the
// node has had no leader for two election timeouts.
func (ss *Sessions) Watch(ctx context.Context, id string, from int64, progress time.Duration, send func(sessionstore.WatchEvent) error) error {
	if from < 0 {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "from_seq must be non-negative, got %d", from)
	}
	// Watch serves this node's applied state (docs/design.md "Cluster"): any node can
	// serve it, followers included; the stream catches up as the node applies.
	if progress <= 0 {
		progress = 5 * time.Second
	}
	cursor := from
	tick := time.NewTicker(progress)
	defer tick.Stop()
	var leaderless time.Time
	var incarnation uint64 // of the first read; Create's Raft index, never 0
	// Only commits that touch this session wake the stream: a node with many
	// idle watchers must not re-read every watched session on every write.
	w := ss.fsm.WatchSession(id)
	defer w.Close()
	for {
		changed := w.Changed()
		applied := ss.fsm.AppliedIndex()
		// A chunk per read: a watcher far behind holds one chunk, not the log.
		s, err := ss.readUpTo(id, cursor, readChunkBytes)
		if err != nil {
			ss.repairAfter(err)
			return storageErr(err)
		}
		if s.Session == nil {
			if incarnation != 0 {
				return incarnationEnded(id, false)
			}
			return sessionstore.NotFound(id)
		}
		// The stream follows one incarnation: events of a re-created session
		// are a different log, and its seqs restart at 0.
		if incarnation == 0 {
			incarnation = s.Record.Incarnation
		} else if s.Record.Incarnation != incarnation {
			return incarnationEnded(id, true)
		}
		if len(s.events) > 0 {
			if err := send(sessionstore.WatchEvent{Events: s.events, Revision: s.Revision, AppliedIndex: applied}); err != nil {
				return err
			}
			cursor += int64(len(s.events))
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ss.ctx.Done():
			return sessionstore.ErrShuttingDown
		case <-changed:
			ss.metrics.WatchWakeups.Inc()
		case <-tick.C:
			if addr, _ := ss.raft.LeaderWithID(); addr == "" {
				if leaderless.IsZero() {
					leaderless = time.Now()
				} else if time.Since(leaderless) > 2*time.Second {
					return sessionstore.ErrNoLeader
				}
			} else {
				leaderless = time.Time{}
			}
			if err := send(sessionstore.WatchEvent{Revision: s.Revision, AppliedIndex: applied}); err != nil {
				return err
			}
		}
	}
}

// incarnationEnded is how a Watch ends when the session it follows is deleted
// (or deleted and re-created) under it.
func incarnationEnded(id string, recreated bool) error {
	what := "was deleted"
	if recreated {
		what = "was deleted and re-created"
	}
	return sessionstore.Errorf(sessionstore.ReasonNotFound,
		"session %s %s while being watched; the watched log has ended (watch again from seq 0 to follow the new one)", sessionstore.Quote(id), what)
}
