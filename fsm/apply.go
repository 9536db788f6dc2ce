package fsm

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// applier applies the commands of one entry. now is the clamped leader time.
type applier struct {
	tx     *storage.Tx
	index  uint64
	now    int64
	frames *[]Frame // frames written in this batch, for the artifact writer
	// metrics are side effects only: never read back (determinism).
	metrics  *Metrics
	repairer Repairer // nil: a damaged event stops the node
	// converted counts the sessions a ConvertLayout moved, and titled those
	// it found a title for (for the log).
	converted, titled int
	// checks keeps sessions' read checks between batches (readchecks.go);
	// nil in tests that build an applier by hand.
	checks *readChecks
	// headers keeps the sizes of header lines for the byte quota; nil in
	// tests that build an applier by hand.
	headers headerSizes
	// records keeps the records appends decoded (records.go); nil in tests
	// that build an applier by hand.
	records recordCache
}

// events reads a session's events [from, to), verified. A damaged event is
// repaired from this node's artifact when the artifact holds the bytes its
// checksum names (the very bytes every replica stored: determinism holds);
// otherwise the error stops this node rather than let it apply on wrong bytes.
func (a *applier) events(id string, rec *fsmpb.SessionRecord, from, to int64) ([][]byte, error) {
	evs, err := a.tx.Events(id, rec.Incarnation, from, to)
	var ce *storage.ChecksumError
	if errors.As(err, &ce) && a.repairer != nil {
		if n, rerr := a.repairer.RepairEvents(a.tx, id, rec.Incarnation, rec.NextSeq); rerr == nil && n > 0 {
			return a.tx.Events(id, rec.Incarnation, from, to)
		}
	}
	return evs, err
}

// apply runs one command. It returns the command's result, the session it
// changed ("" if none), and an error only for a storage failure (which stops
// the node). Every check runs before any write, so a refused command writes
// nothing.
func (a *applier) apply(c *fsmpb.Command) (*fsmpb.Result, string, error) {
	switch cmd := c.Cmd.(type) {
	case *fsmpb.Command_SetClusterId:
		if a.tx.ClusterID() == "" && cmd.SetClusterId.ClusterId != "" {
			return &fsmpb.Result{}, "", a.tx.SetClusterID(cmd.SetClusterId.ClusterId)
		}
		return &fsmpb.Result{}, "", nil
	case *fsmpb.Command_Create:
		return a.deduped(request{bind: c.BindRequest, id: cmd.Create.GetHeader().GetId(), requestID: cmd.Create.RequestId, op: func() requestOp { return createOp(cmd.Create) }}, func() (*fsmpb.Result, bool, error) {
			return a.create(cmd.Create, c.Principal, c.Limits)
		})
	case *fsmpb.Command_Append:
		return a.append(cmd.Append, c.Limits)
	case *fsmpb.Command_Repair:
		return a.deduped(request{bind: c.BindRequest, id: cmd.Repair.SessionId, requestID: cmd.Repair.RequestId, op: func() requestOp { return repairOp(cmd.Repair) }}, func() (*fsmpb.Result, bool, error) {
			return a.repair(cmd.Repair)
		})
	case *fsmpb.Command_KeepAlive:
		return a.deduped(request{bind: c.BindRequest, id: cmd.KeepAlive.SessionId, requestID: cmd.KeepAlive.RequestId, op: func() requestOp { return keepAliveOp(cmd.KeepAlive) }}, func() (*fsmpb.Result, bool, error) {
			return a.keepAlive(cmd.KeepAlive)
		})
	case *fsmpb.Command_Release:
		return a.deduped(request{bind: c.BindRequest, id: cmd.Release.SessionId, requestID: cmd.Release.RequestId, op: func() requestOp { return releaseOp(cmd.Release) }}, func() (*fsmpb.Result, bool, error) {
			return a.release(cmd.Release)
		})
	case *fsmpb.Command_Delete:
		return a.delete(cmd.Delete, c.BindRequest)
	case *fsmpb.Command_Sweep:
		return a.sweep(cmd.Sweep)
	case *fsmpb.Command_ConvertLayout:
		return a.convertLayout(cmd.ConvertLayout)
	case *fsmpb.Command_PlanSet:
		return a.deduped(request{bind: c.BindRequest, id: cmd.PlanSet.SessionId, requestID: cmd.PlanSet.RequestId, planKind: "PlanSet", op: func() requestOp { return planSetOp(cmd.PlanSet) }}, func() (*fsmpb.Result, bool, error) {
			return a.planSet(cmd.PlanSet)
		})
	case *fsmpb.Command_PlanPreStep:
		return a.deduped(request{bind: c.BindRequest, id: cmd.PlanPreStep.SessionId, requestID: cmd.PlanPreStep.RequestId, planKind: "PlanPreStep", op: func() requestOp { return planPreStepOp(cmd.PlanPreStep) }}, func() (*fsmpb.Result, bool, error) {
			return a.planPreStep(cmd.PlanPreStep)
		})
	case *fsmpb.Command_PlanCommand:
		return a.deduped(request{bind: c.BindRequest, id: cmd.PlanCommand.SessionId, requestID: cmd.PlanCommand.RequestId, planKind: "PlanCommand", op: func() requestOp { return planCommandOp(cmd.PlanCommand) },
			lim: c.Limits, payload: int64(len(cmd.PlanCommand.RawInput))}, func() (*fsmpb.Result, bool, error) {
			return a.planCommand(cmd.PlanCommand)
		})
	case *fsmpb.Command_PlanExit:
		return a.deduped(request{bind: c.BindRequest, id: cmd.PlanExit.SessionId, requestID: cmd.PlanExit.RequestId, planKind: "PlanExit", op: func() requestOp { return planExitOp(cmd.PlanExit) },
			lim: c.Limits, payload: answerBytes(cmd.PlanExit.Answer)}, func() (*fsmpb.Result, bool, error) {
			return a.planExit(cmd.PlanExit)
		})
	default:
		panic(fmt.Sprintf("fsm: unknown command %T at index %d", c.Cmd, a.index))
	}
}

// request is what deduped needs to know of a command carrying a request id.
type request struct {
	bind      bool   // version 5: the id is bound to its operation (requests.go)
	id        string // the session
	requestID string
	planKind  string // a plan-mode call, whose unbound ids are keyed by the call (planRequestKey)
	op        func() requestOp
	// lim and payload: the client bytes the answer will keep (ExitPlan
	// feedback, /plan input), checked against the session byte quota when
	// lim counts what a session stores (version 5).
	lim     *fsmpb.Limits
	payload int64
}

// deduped returns the stored result of a repeated request id, or runs fn and
// remembers its result, so a client's retry gets the first answer. A bound command
// keys every id alike, replays only a result of the same operation
// (requests.go) and stores its own with it.
func (a *applier) deduped(r request, fn func() (*fsmpb.Result, bool, error)) (*fsmpb.Result, string, error) {
	id, requestID, bind := r.id, r.requestID, r.bind
	key := requestID
	if r.planKind != "" && !bind {
		key = planRequestKey(r.planKind, requestID)
	}
	prev, err := a.storedResult(id, key)
	if err == nil && prev == nil && bind && r.planKind != "" {
		// Stored by this call before ids were bound.
		prev, err = a.storedResult(id, planRequestKey(r.planKind, requestID))
	}
	if err != nil {
		return nil, "", err
	}
	var o requestOp
	if bind && requestID != "" {
		o = r.op()
	}
	if prev != nil {
		if bind {
			if refused := o.reuse(id, requestID, prev); refused != nil {
				return errResult(refused), "", nil
			}
		}
		prev.RequestOp, prev.RequestDigest = "", nil
		return prev, "", nil
	}
	if max := r.lim.GetMaxSessionBytes(); max > 0 && r.lim.GetCountStored() && r.payload > 0 {
		rec, err := a.record(id)
		if err != nil {
			return nil, "", err
		}
		if rec != nil {
			if have := a.storedBytes(id, rec); have+r.payload > max {
				return errResult(sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
					"session %s stores %d bytes (events, header and kept answers); this call's %d bytes would exceed the quota of %d bytes per session",
					sessionstore.Quote(id), have, r.payload, max)), "", nil
			}
		}
	}
	res, changed, err := fn()
	if err != nil {
		return nil, "", err
	}
	touched := ""
	if changed {
		touched = id
	}
	// Only a session that exists can remember request ids; a stale repair is a
	// non-answer the proposer retries, so it is not remembered.
	if key != "" && !res.Stale && a.tx.HasSession(id) {
		stored := res
		if bind {
			stored = proto.Clone(res).(*fsmpb.Result)
			stored.RequestOp, stored.RequestDigest = o.kind, o.digest
		}
		b, err := proto.Marshal(stored)
		if err != nil {
			return nil, "", err
		}
		if err := a.tx.PutRequestResult(id, key, a.now, b, bind || r.lim.GetCountStored()); err != nil {
			return nil, "", err
		}
	}
	return res, touched, nil
}

// storedResult is the result stored under a request id key, or nil.
func (a *applier) storedResult(id, key string) (*fsmpb.Result, error) {
	if key == "" {
		return nil, nil
	}
	prev := a.tx.RequestResult(id, key)
	if prev == nil {
		return nil, nil
	}
	var r fsmpb.Result
	if err := proto.Unmarshal(prev, &r); err != nil {
		return nil, fmt.Errorf("stored result of request %q: %w", key, err)
	}
	return &r, nil
}

func (a *applier) record(id string) (*fsmpb.SessionRecord, error) {
	return ReadRecord(a.tx, id)
}

func (a *applier) putRecord(id string, r *fsmpb.SessionRecord) error {
	return PutRecord(a.tx, id, r)
}

func (a *applier) revision(r *fsmpb.SessionRecord) string {
	return Revision(a.tx.ClusterID(), r)
}

func (a *applier) create(c *fsmpb.Create, principal string, lim *fsmpb.Limits) (*fsmpb.Result, bool, error) {
	h := c.GetHeader()
	id := h.GetId()
	rec, err := a.record(id)
	if err != nil {
		return nil, false, err
	}
	if rec != nil {
		if rec.Materialized {
			return errResult(sessionstore.Errorf(sessionstore.ReasonAlreadyExists,
				"session %s already has a persisted log on disk; load/resume it instead of creating", sessionstore.Quote(id))), false, nil
		}
		if proto.Equal(rec.Header, h) {
			return &fsmpb.Result{Revision: a.revision(rec)}, false, nil
		}
		return errResult(sessionstore.Errorf(sessionstore.ReasonAlreadyExists,
			"session %s already exists in this backend", sessionstore.Quote(id))), false, nil
	}
	if max := lim.GetMaxSessionBytes(); max > 0 && lim.GetCountStored() {
		if n := headerBytes(h); n > max {
			return errResult(sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
				"session %s header is %d bytes; the quota is %d bytes per session", sessionstore.Quote(id), n, max)), false, nil
		}
	}
	if max := lim.GetMaxPrincipalSessions(); max > 0 {
		if n := a.tx.PrincipalSessions(principal); n >= max {
			return errResult(sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
				"principal %q has registered %d sessions, its quota; session %s was not created", principal, n, sessionstore.Quote(id))), false, nil
		}
	}
	zero := int64(0)
	rec = &fsmpb.SessionRecord{Header: h, Incarnation: a.index, CreatedUnixMs: a.now, PlanSummary: &fsmpb.PlanSummary{},
		EventBytes: &zero, Creator: principal}
	if err := a.putRecord(id, rec); err != nil {
		return nil, false, err
	}
	if h.Cwd != nil {
		if err := a.tx.IndexCwd(id, h.GetCwd(), false); err != nil {
			return nil, false, err
		}
	}
	// Counted whether or not a quota is set, so one set later sees every session.
	if err := a.tx.AddPrincipalSession(principal, 1); err != nil {
		return nil, false, err
	}
	return &fsmpb.Result{Revision: a.revision(rec)}, true, nil
}

func (a *applier) append(c *fsmpb.Append, lim *fsmpb.Limits) (*fsmpb.Result, string, error) {
	id := c.SessionId
	rec, kept, err := a.appendRecord(id)
	if err != nil {
		return nil, "", err
	}
	if rec == nil {
		return errResult(sessionstore.NotFound(id)), "", nil
	}
	// Idempotence by content runs first: a re-sent batch whose every event is
	// byte-identical to the stored one succeeds as a duplicate.
	n := int64(len(c.Events))
	if n > 0 && c.FirstSeq >= 0 && c.FirstSeq+n <= rec.NextSeq {
		stored, err := a.events(id, rec, c.FirstSeq, c.FirstSeq+n)
		if err != nil {
			return nil, "", err
		}
		same := true
		for i, ev := range c.Events {
			if !bytes.Equal(stored[i], ev) {
				same = false
				break
			}
		}
		if same {
			res := &fsmpb.Result{Revision: a.revision(rec), NextSeq: rec.NextSeq, Duplicate: true}
			check, err := a.readCheck(id, rec)
			if err != nil {
				return nil, "", err
			}
			unreadable(res, check)
			return res, "", nil
		}
	}
	if rec.Epoch > 0 && c.LeaseEpoch != rec.Epoch && !skipFencing {
		a.metrics.FencedAppends.Inc()
		return errResult(fenced(id, rec.Epoch, c.LeaseEpoch)), "", nil
	}
	if c.ExpectedRevision != "" && c.ExpectedRevision != a.revision(rec) {
		return errResult(sessionstore.Errorf(sessionstore.ReasonRevisionMismatch,
			"session %s is at revision %s, not the expected %s", sessionstore.Quote(id), a.revision(rec), c.ExpectedRevision)), "", nil
	}
	if c.FirstSeq != rec.NextSeq {
		return errResult(SeqMismatch(id, rec.NextSeq, 0, c.FirstSeq)), "", nil
	}
	if n == 0 {
		return &fsmpb.Result{Revision: a.revision(rec), NextSeq: rec.NextSeq}, "", nil
	}
	if max := lim.GetMaxSessionEvents(); max > 0 && rec.NextSeq+n > max {
		return errResult(sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
			"session %s holds %d events; %d more would exceed the quota of %d events per session", sessionstore.Quote(id), rec.NextSeq, n, max)), "", nil
	}
	if max := lim.GetMaxSessionBytes(); max > 0 {
		have, what := a.eventBytes(id, rec), "bytes of events"
		if lim.GetCountStored() {
			have, what = a.storedBytes(id, rec), "bytes (events, header and kept answers)"
		}
		if add := batchBytes(c.Events); have+add > max {
			return errResult(sessionstore.Errorf(sessionstore.ReasonQuotaExceeded,
				"session %s holds %d %s; %d more would exceed the quota of %d bytes per session", sessionstore.Quote(id), have, what, add, max)), "", nil
		}
	}
	// Last, what a read of the log would say after the batch: a strict
	// append is refused (nothing written) when a read would refuse it; a
	// reference append is written and its answer says so.
	check, err := a.readCheck(id, rec)
	if err != nil {
		return nil, "", err
	}
	if check != nil {
		check.Add(c.Events)
		if refusal := check.WriteRefusal(); refusal != nil && c.Strict {
			a.checks.drop(id) // it holds the refused batch
			return errResult(refusal), "", nil
		}
	}
	if err := a.writeFrame(id, rec, kept, c.Events); err != nil {
		return nil, "", err
	}
	res := &fsmpb.Result{Revision: a.revision(rec), NextSeq: rec.NextSeq}
	unreadable(res, check)
	return res, id, nil
}

// writeFrame appends events as one artifact frame and advances the record
// (kept: its cache entry, or nil).
func (a *applier) writeFrame(id string, rec *fsmpb.SessionRecord, kept *keptRecord, events [][]byte) error {
	if err := a.tx.AppendFrame(id, rec.Incarnation, rec.Frames+1, rec.NextSeq, events); err != nil {
		return err
	}
	if a.checks != nil {
		a.checks.advance(id, rec.Incarnation, rec.NextSeq, events)
	}
	size := a.eventBytes(id, rec) + batchBytes(events)
	rec.EventBytes = &size
	rec.NextSeq += int64(len(events))
	coldChanged := observeFrame(rec, events)
	if a.tx.Layout() >= 5 && observeTitle(rec, events) {
		coldChanged = true
	}
	rec.Materialized = true
	rec.LastAppendUnixMs = a.now
	rec.Frames++
	rec.LastChangeIndex = a.index
	if a.frames != nil {
		*a.frames = append(*a.frames, Frame{SessionID: id, N: rec.Frames, Index: a.index, Header: rec.Header, Events: events})
	}
	return a.putAppendRecord(id, rec, kept, coldChanged)
}

// delete removes a session and leaves a tombstone holding this command's
// answer, so a retried delete (same request id) gets it again. A bound
// delete (version 5) under a request id another operation of the session
// used is refused.
func (a *applier) delete(c *fsmpb.Delete, bind bool) (*fsmpb.Result, string, error) {
	id := c.SessionId
	if bind && c.RequestId != "" {
		prev, err := a.storedResult(id, c.RequestId)
		if err != nil {
			return nil, "", err
		}
		if prev != nil {
			if refused := deleteOp(c).reuse(id, c.RequestId, prev); refused != nil {
				return errResult(refused), "", nil
			}
		}
	}
	if c.RequestId != "" {
		if b := a.tx.Tombstone(id); b != nil {
			var ts fsmpb.Tombstone
			if err := proto.Unmarshal(b, &ts); err != nil {
				return nil, "", fmt.Errorf("tombstone of %q: %w", id, err)
			}
			if ts.RequestId == c.RequestId && ts.Result != nil {
				return ts.Result, "", nil
			}
		}
	}
	rec, err := a.record(id)
	if err != nil {
		return nil, "", err
	}
	if rec == nil {
		return errResult(sessionstore.NotFound(id)), "", nil
	}
	rev := a.revision(rec)
	if c.ExpectedRevision != "" && c.ExpectedRevision != rev {
		return errResult(sessionstore.Errorf(sessionstore.ReasonRevisionMismatch,
			"session %s is at revision %s, not the expected %s", sessionstore.Quote(id), rev, c.ExpectedRevision)), "", nil
	}
	res := &fsmpb.Result{Revision: rev}
	if err := a.remove(id, rec, c.RequestId, res); err != nil {
		return nil, "", err
	}
	return res, id, nil
}

// remove deletes a session's data, counts it off its creator, leaves the
// tombstone (with the deleting request's answer) and tells the artifact
// writer.
func (a *applier) remove(id string, rec *fsmpb.SessionRecord, requestID string, res *fsmpb.Result) error {
	// The cwd entry first: format 4 finds it by the session's number, which
	// goes with the record.
	if h := rec.GetHeader(); h.Cwd != nil {
		if err := a.tx.IndexCwd(id, h.GetCwd(), true); err != nil {
			return err
		}
	}
	if err := a.tx.DeleteSession(id, rec.Incarnation); err != nil {
		return err
	}
	if a.checks != nil {
		a.checks.drop(id)
	}
	if err := a.tx.AddPrincipalSession(rec.Creator, -1); err != nil {
		return err
	}
	ts, err := proto.Marshal(&fsmpb.Tombstone{Incarnation: rec.Incarnation, DeletedIndex: a.index, DeletedUnixMs: a.now,
		RequestId: requestID, Result: res})
	if err != nil {
		return err
	}
	if err := a.tx.PutTombstone(id, ts); err != nil {
		return err
	}
	if a.frames != nil {
		// Frames of this session earlier in the batch are void; the marker
		// tells the artifact writer to remove the file.
		kept := (*a.frames)[:0]
		for _, f := range *a.frames {
			if f.SessionID != id {
				kept = append(kept, f)
			}
		}
		*a.frames = append(kept, Frame{SessionID: id, Index: a.index, Deleted: true})
	}
	return nil
}

// convertLayout converts the state to layout 2 (version 6; see
// ConvertLayout), state format 3 (version 9: layout 2, then new frames
// pack their events), state format 4 (version 10: format 3, then every
// session's rows keyed by its number) or state format 5 (version 11:
// format 4, then records keep their title, title.go). A state already
// there, or a request for another layout, changes nothing.
func (a *applier) convertLayout(c *fsmpb.ConvertLayout) (*fsmpb.Result, string, error) {
	if c.Layout < 2 || c.Layout > 5 || a.tx.Layout() >= int(c.Layout) {
		return &fsmpb.Result{}, "", nil
	}
	if a.tx.Layout() < 2 {
		n, err := ConvertLayout(a.tx, a.index, a.repairer)
		if err != nil {
			return nil, "", fmt.Errorf("converting the state to layout 2: %w", err)
		}
		a.converted = n
	}
	if c.Layout >= 3 && a.tx.Layout() < 3 {
		if err := a.tx.FinishLayout3(); err != nil {
			return nil, "", err
		}
	}
	if c.Layout >= 4 && a.tx.Layout() < 4 {
		n, err := a.tx.ConvertLayout4()
		if err != nil {
			return nil, "", fmt.Errorf("converting the state to format 4: %w", err)
		}
		a.converted = n
	}
	if c.Layout == 5 {
		n, err := convertTitles(a.tx, a.repairer)
		if err != nil {
			return nil, "", fmt.Errorf("converting the state to format 5: %w", err)
		}
		if err := a.tx.FinishFormat5(); err != nil {
			return nil, "", err
		}
		a.titled = n
	}
	return &fsmpb.Result{}, "", nil
}

// sweep deletes what the retention policies say has expired at the entry's
// time.
func (a *applier) sweep(c *fsmpb.Sweep) (*fsmpb.Result, string, error) {
	due, err := Expired(a.tx, c.Policies, a.now)
	if err != nil {
		return nil, "", err
	}
	res := &fsmpb.Result{}
	for _, e := range due {
		rec, err := a.record(e)
		if err != nil {
			return nil, "", err
		}
		if err := a.remove(e, rec, "", &fsmpb.Result{Revision: a.revision(rec)}); err != nil {
			return nil, "", err
		}
		res.Deleted = append(res.Deleted, e)
	}
	return res, "", nil
}

// Expired lists, in id order, the materialised sessions the policies expire
// at time nowMs: those whose last append (or, on records written before that
// was kept, creation) is more than the max age of the policy with the
// longest cwd prefix matching the session's cwd ago. The sweep command and
// its dry run both use it.
func Expired(tx *storage.Tx, policies []*fsmpb.RetentionPolicy, nowMs int64) ([]string, error) {
	if len(policies) == 0 {
		return nil, nil
	}
	var due []string
	err := tx.ForEachSession("", false, func(id string, b []byte) error {
		rec, err := DecodeRecord(b)
		if err != nil {
			return err
		}
		if rec == nil || !rec.Materialized {
			return nil
		}
		var best *fsmpb.RetentionPolicy
		cwd, hasCwd := rec.GetHeader().GetCwd(), rec.GetHeader().Cwd != nil
		for _, p := range policies {
			if p.CwdPrefix != "" && (!hasCwd || !strings.HasPrefix(cwd, p.CwdPrefix)) {
				continue
			}
			if best == nil || len(p.CwdPrefix) > len(best.CwdPrefix) {
				best = p
			}
		}
		if best == nil || best.MaxAgeMs <= 0 {
			return nil
		}
		if nowMs-LastAppend(rec) > best.MaxAgeMs {
			due = append(due, id)
		}
		return nil
	})
	return due, err
}

// eventBytes is the size of a session's stored events; records written
// before the size was kept are summed from the log once.
func (a *applier) eventBytes(id string, rec *fsmpb.SessionRecord) int64 {
	if rec.EventBytes != nil {
		return *rec.EventBytes
	}
	var n int64
	_ = a.tx.ForEachEvent(id, rec.Incarnation, 0, rec.NextSeq, func(_ int64, ev []byte) error { n += int64(len(ev)); return nil })
	rec.EventBytes = &n
	return n
}

// storedBytes is what a session stores from its clients: its events, its
// header line and the answers kept under its request ids (version 5's
// session byte quota).
func (a *applier) storedBytes(id string, rec *fsmpb.SessionRecord) int64 {
	return a.eventBytes(id, rec) + a.headers.size(id, rec) + a.tx.RequestBytes(id)
}

// headerBytes is the size of a session's header line.
func headerBytes(h *fsmpb.Header) int64 { return int64(len(sessionlog.HeaderLine(HeaderFromPB(h)))) }

// headerSizes remembers the size of sessions' header lines, which the byte
// quota counts on every append: a header is fixed for an incarnation (the
// Create that registered it), so the line need not be rendered again. Only
// the apply goroutine uses it; it starts over past maxHeaderSizes entries.
type headerSizes map[headerKey]int64

type headerKey struct {
	id          string
	incarnation uint64
}

const maxHeaderSizes = 4096

// size is headerBytes(rec.Header), remembered (h may be nil: not).
func (h headerSizes) size(id string, rec *fsmpb.SessionRecord) int64 {
	if h == nil {
		return headerBytes(rec.Header)
	}
	k := headerKey{id, rec.Incarnation}
	if n, ok := h[k]; ok {
		return n
	}
	if len(h) >= maxHeaderSizes {
		clear(h)
	}
	n := headerBytes(rec.Header)
	h[k] = n
	return n
}

// answerBytes is the client text of an ExitPlan answer (the feedback its
// stored answer repeats).
func answerBytes(a *fsmpb.ReviewAnswer) int64 {
	var n int64
	for _, it := range a.GetAnswers() {
		n += int64(len(it.Id) + len(it.GetCustom()))
		for _, s := range it.Selected {
			n += int64(len(s))
		}
	}
	return n
}

func batchBytes(events [][]byte) int64 {
	var n int64
	for _, ev := range events {
		n += int64(len(ev))
	}
	return n
}

// SeqMismatch is the reference text for a non-contiguous append (docs/events.md#write-checks).
func SeqMismatch(id string, expected, index, got int64) *sessionstore.Error {
	return sessionstore.Errorf(sessionstore.ReasonSeqMismatch,
		"append seq mismatch for %s: expected %d at index %d, got %d", sessionstore.Quote(id), expected+index, index, got)
}

func fenced(id string, current, got uint64) *sessionstore.Error {
	return sessionstore.Errorf(sessionstore.ReasonLeaseFenced,
		"session %s is owned under lease epoch %d; a write with epoch %d is fenced", sessionstore.Quote(id), current, got)
}

func (a *applier) leaseLive(rec *fsmpb.SessionRecord) bool {
	return LeaseLive(rec, a.now)
}

func (a *applier) repair(c *fsmpb.Repair) (*fsmpb.Result, bool, error) {
	id := c.SessionId
	rec, err := a.record(id)
	if err != nil {
		return nil, false, err
	}
	if rec == nil || !rec.Materialized {
		return errResult(sessionstore.NotFound(id)), false, nil
	}
	if c.ExpectedRevision != "" && c.ExpectedRevision != a.revision(rec) {
		return &fsmpb.Result{Stale: true, Revision: a.revision(rec)}, false, nil
	}
	live := a.leaseLive(rec)
	if c.Mode == fsmpb.Repair_PREPARE && live {
		if rec.Lease.Owner == c.Owner {
			return a.viewResult(rec, false), false, nil
		}
		return errResult(sessionstore.Errorf(sessionstore.ReasonSessionLive,
			"cannot prepare session %s while it is live", sessionstore.Quote(id))), false, nil
	}
	events, err := a.events(id, rec, 0, rec.NextSeq)
	if err != nil {
		return nil, false, err
	}
	norm, err := sessionlog.Normalize(id, events, "")
	if err != nil {
		return errResult(asDomain(sessionlog.WrapCorruption(id, err))), false, nil
	}
	closers, err := sessionlog.Closers(norm)
	if err != nil {
		return errResult(asDomain(sessionlog.WrapCorruption(id, err))), false, nil
	}
	if c.Mode == fsmpb.Repair_LOAD {
		if len(closers) == 0 {
			return a.viewResult(rec, false), false, nil
		}
		if live {
			return errResult(sessionstore.Errorf(sessionstore.ReasonLiveTurnOpen,
				"cannot load session %s while its live turn is open; use the live Session or wait for the turn to close", sessionstore.Quote(id))), false, nil
		}
		if rec.Epoch > 0 {
			// The old owner's lease has expired with a turn open: fence it.
			rec.Epoch++
			rec.Lease = nil
		}
		if err := a.writeFrame(id, rec, nil, closers); err != nil {
			return nil, false, err
		}
		return a.viewResult(rec, true), true, nil
	}
	// Prepare on a cold session: repair, bump the epoch, grant the lease.
	repaired := len(closers) > 0
	if repaired {
		if err := a.writeFrame(id, rec, nil, closers); err != nil {
			return nil, false, err
		}
	}
	rec.Epoch++
	rec.Lease = &fsmpb.Lease{Owner: c.Owner, Epoch: rec.Epoch, ExpiresAtUnixMs: a.now + c.TtlMs}
	rec.LeaseTtlMs = c.TtlMs
	if err := a.putRecord(id, rec); err != nil {
		return nil, false, err
	}
	a.metrics.LeasesGranted.Inc()
	return a.viewResult(rec, repaired), true, nil
}

func (a *applier) viewResult(rec *fsmpb.SessionRecord, repaired bool) *fsmpb.Result {
	r := &fsmpb.Result{Revision: a.revision(rec), NextSeq: rec.NextSeq, Repaired: repaired}
	if rec.Lease != nil {
		r.Lease = proto.Clone(rec.Lease).(*fsmpb.Lease)
	}
	return r
}

func (a *applier) keepAlive(c *fsmpb.KeepAlive) (*fsmpb.Result, bool, error) {
	id := c.SessionId
	rec, err := a.record(id)
	if err != nil {
		return nil, false, err
	}
	if rec == nil {
		return errResult(sessionstore.NotFound(id)), false, nil
	}
	if rec.Lease == nil || rec.Epoch != c.Epoch || rec.Lease.Owner != c.Owner {
		return errResult(fenced(id, rec.Epoch, c.Epoch)), false, nil
	}
	rec.Lease.ExpiresAtUnixMs = a.now + rec.LeaseTtlMs
	if err := a.putRecord(id, rec); err != nil {
		return nil, false, err
	}
	a.metrics.LeasesRenewed.Inc()
	return a.viewResult(rec, false), true, nil
}

func (a *applier) release(c *fsmpb.Release) (*fsmpb.Result, bool, error) {
	id := c.SessionId
	rec, err := a.record(id)
	if err != nil {
		return nil, false, err
	}
	if rec == nil {
		return errResult(sessionstore.NotFound(id)), false, nil
	}
	if rec.Epoch != c.LeaseEpoch {
		return errResult(fenced(id, rec.Epoch, c.LeaseEpoch)), false, nil
	}
	if rec.Lease == nil {
		return a.viewResult(rec, false), false, nil // already released
	}
	rec.Lease = nil
	if err := a.putRecord(id, rec); err != nil {
		return nil, false, err
	}
	a.metrics.LeasesReleased.Inc()
	return a.viewResult(rec, false), true, nil
}

func asDomain(err error) *sessionstore.Error {
	if e, ok := err.(*sessionstore.Error); ok {
		return e
	}
	return sessionstore.Errorf(sessionstore.ReasonInvalidStored, "%v", err)
}
