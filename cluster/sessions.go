package cluster

import (
	"bytes"
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// stored is one consistent read of a session.
type stored struct {
	rec       *fsmpb.SessionRecord
	header    sessionstore.Header
	events    [][]byte
	revision  string
	clusterID string
}

// read returns a session's record and its events with seq >= from, in one
// read transaction. A session that does not exist gives rec == nil.
func (n *Node) read(id string, from int64, withEvents bool) (stored, error) {
	var s stored
	err := n.state.View(func(tx *storage.Tx) error {
		rec, err := fsm.ReadRecord(tx, id)
		if err != nil || rec == nil {
			return err
		}
		s.rec = rec
		s.header = fsm.HeaderFromPB(rec.Header)
		s.clusterID = tx.ClusterID()
		s.revision = fsm.Revision(s.clusterID, rec)
		if withEvents {
			s.events, err = tx.Events(id, rec.Incarnation, from, rec.NextSeq)
		}
		return err
	})
	return s, err
}

func (n *Node) readMaterialized(ctx context.Context, id string, c sessionstore.Consistency, from int64, withEvents bool) (stored, error) {
	if err := n.readBarrier(ctx, c); err != nil {
		return stored{}, err
	}
	s, err := n.read(id, from, withEvents)
	if err != nil {
		n.repairAfter(err)
		return s, storageErr(err)
	}
	if s.rec == nil || !s.rec.Materialized {
		return s, sessionstore.NotFound(id)
	}
	return s, nil
}

// repairAfter follows a read that found damage (a *storage.ChecksumError):
// it logs it and rewrites the session's damaged events from this node's
// artifact where the artifact holds their checksummed bytes. The read itself
// has answered CORRUPTION; a retry reads the repaired events.
func (n *Node) repairAfter(err error) {
	var ce *storage.ChecksumError
	if !errors.As(err, &ce) {
		return
	}
	n.logger.Error("state database damage found on read", "err", err)
	fixed := 0
	rerr := n.state.Update(func(tx *storage.Tx) error {
		rec, err := fsm.ReadRecord(tx, ce.Session)
		if err != nil || rec == nil {
			return err
		}
		fixed, err = n.artifacts.RepairEvents(tx, ce.Session, rec.Incarnation, rec.NextSeq)
		return err
	})
	if rerr != nil || fixed == 0 {
		n.logger.Error("damaged session not repaired from the artifact; rebuild this node's state database (README \"Failure modes\")",
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
func (n *Node) rawLogPath(h sessionstore.Header) string {
	p, err := storage.ArtifactPath(n.artifactRoot(), h)
	if err != nil {
		return ""
	}
	return p
}

func (n *Node) artifactRoot() string {
	root, err := filepath.Abs(artifactsDir(n.cfg.DataDir))
	if err != nil {
		return artifactsDir(n.cfg.DataDir)
	}
	return root
}

// Locate answers where this node's artifact for a header lives.
func (n *Node) Locate(ctx context.Context, h sessionstore.Header) (kind, path, link string, err error) {
	if err := sessionlog.ValidateSessionID(h.ID); err != nil {
		return "", "", "", err
	}
	if h.Cwd != nil && *h.Cwd == "" {
		return "", "", "", sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "session header cwd must not be empty")
	}
	p, err := storage.ArtifactPath(n.artifactRoot(), h)
	if err != nil {
		return "", "", "", sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "%v", err)
	}
	if n.cfg.HTTPBase != "" {
		link = strings.TrimRight(n.cfg.HTTPBase, "/") + "/v1/sessions/" + url.PathEscape(h.ID) + "/" + storage.ArtifactName
	}
	return "jsonl", p, link, nil
}

// Create registers a session for lazy materialisation.
func (n *Node) Create(ctx context.Context, h sessionstore.Header, requestID string) error {
	if err := sessionlog.CheckCreateHeader(h); err != nil {
		return err
	}
	_, err := n.propose(ctx, n.stamp(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Create{Create: &fsmpb.Create{
		Header: fsm.HeaderToPB(h), RequestId: requestID}}}))
	return err
}

// Append durably appends a contiguous batch (DESIGN.md §5 validation first;
// nothing is written when any event is refused).
func (n *Node) Append(ctx context.Context, id string, events [][]byte, epoch uint64, expectedRevision string) (sessionstore.AppendResult, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return sessionstore.AppendResult{}, err
	}
	if len(events) > n.cfg.MaxBatchCount {
		return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
			"append batch holds %d events; the limit is %d", len(events), n.cfg.MaxBatchCount)
	}
	total := 0
	var first int64
	for i, ev := range events {
		if len(ev) > n.cfg.MaxEventBytes {
			return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
				"event at index %d is %d bytes; the limit is %d", i, len(ev), n.cfg.MaxEventBytes)
		}
		total += len(ev)
		if total > n.cfg.MaxBatchBytes {
			return sessionstore.AppendResult{}, sessionstore.Errorf(sessionstore.ReasonTooLarge,
				"append batch exceeds %d bytes", n.cfg.MaxBatchBytes)
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
			if s, err := n.read(id, 0, false); err == nil && s.rec != nil {
				next = s.rec.NextSeq
			}
			if first != next {
				return sessionstore.AppendResult{}, fsm.SeqMismatch(id, next, 0, first)
			}
			return sessionstore.AppendResult{}, fsm.SeqMismatch(id, next, int64(i), info.Seq)
		}
	}
	if len(events) == 0 {
		// An empty batch is a no-op and keeps the session lazy (reference §9.3).
		s, err := n.read(id, 0, false)
		if err != nil || s.rec == nil {
			return sessionstore.AppendResult{}, err
		}
		return sessionstore.AppendResult{Revision: s.revision, NextSeq: s.rec.NextSeq}, nil
	}
	res, err := n.propose(ctx, n.stamp(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Append{Append: &fsmpb.Append{
		SessionId: id, Events: events, LeaseEpoch: epoch, ExpectedRevision: expectedRevision, FirstSeq: first}}}))
	if err != nil {
		return sessionstore.AppendResult{}, err
	}
	return sessionstore.AppendResult{Revision: res.Revision, NextSeq: res.NextSeq, Duplicate: res.Duplicate}, nil
}

// checkedView reads a materialised session and builds its reference view:
// header checks, legacy normalisation, read validation and the closers an
// open turn would need. It writes nothing.
func (n *Node) checkedView(ctx context.Context, id string, c sessionstore.Consistency) (stored, [][]byte, [][]byte, error) {
	s, err := n.readMaterialized(ctx, id, c, 0, true)
	if err != nil {
		return s, nil, nil, err
	}
	path := n.rawLogPath(s.header)
	if err := sessionlog.CheckStoredHeader(id, s.header, path); err != nil {
		return s, nil, nil, err
	}
	norm, err := sessionlog.Normalize(id, s.events, path)
	if err != nil {
		return s, nil, nil, sessionlog.WrapCorruption(id, err)
	}
	closers, err := sessionlog.Closers(norm)
	if err != nil {
		return s, nil, nil, sessionlog.WrapCorruption(id, err)
	}
	full := norm
	if len(closers) > 0 {
		full = append(append(make([][]byte, 0, len(norm)+len(closers)), norm...), closers...)
	}
	if err := sessionlog.ValidateSession(id, full); err != nil {
		return s, nil, nil, err
	}
	return s, norm, closers, nil
}

func leaseFromPB(id string, l *fsmpb.Lease) *sessionstore.Lease {
	if l == nil {
		return nil
	}
	return &sessionstore.Lease{SessionID: id, Owner: l.Owner, Epoch: l.Epoch, ExpiresAtUnixMs: l.ExpiresAtUnixMs}
}

// Inspect returns the balanced view without committing anything: closers are
// added in memory, except for a session under a live lease, which is
// returned as stored (its owner holds the open turn).
func (n *Node) Inspect(ctx context.Context, id string, c sessionstore.Consistency) (sessionstore.View, error) {
	s, norm, closers, err := n.checkedView(ctx, id, c)
	if err != nil {
		return sessionstore.View{}, err
	}
	v := sessionstore.View{Header: s.header, Events: norm, Revision: s.revision, NextSeq: s.rec.NextSeq,
		Lease: leaseFromPB(id, s.rec.Lease)}
	owned := s.rec.Lease != nil && s.rec.Lease.ExpiresAtUnixMs > time.Now().UnixMilli()
	if !owned && len(closers) > 0 {
		v.Events = append(append(make([][]byte, 0, len(norm)+len(closers)), norm...), closers...)
	}
	return v, nil
}

// Load returns the balanced view, committing the crash repair of a cold
// session through the replicated log first (persistence-spec §5.4).
func (n *Node) Load(ctx context.Context, id, requestID string) (sessionstore.View, error) {
	return n.repair(ctx, id, requestID, fsmpb.Repair_LOAD, "", 0)
}

// Prepare takes ownership: it commits the repair like Load, bumps the epoch and
// grants a lease (DESIGN.md "Ownership").
func (n *Node) Prepare(ctx context.Context, id, owner string, ttl time.Duration, requestID string) (sessionstore.View, error) {
	if owner == "" {
		return sessionstore.View{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "prepare needs a non-empty owner")
	}
	if ttl < 100*time.Millisecond || ttl > 24*time.Hour {
		return sessionstore.View{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"lease ttl must be between 100ms and 24h, got %v", ttl)
	}
	return n.repair(ctx, id, requestID, fsmpb.Repair_PREPARE, owner, ttl.Milliseconds())
}

func (n *Node) repair(ctx context.Context, id, requestID string, mode fsmpb.Repair_Mode, owner string, ttlMs int64) (sessionstore.View, error) {
	if err := sessionlog.ValidateSessionID(id); err != nil {
		return sessionstore.View{}, err
	}
	for attempt := 0; ; attempt++ {
		s, norm, closers, err := n.checkedView(ctx, id, sessionstore.Linearizable)
		if err != nil {
			return sessionstore.View{}, err
		}
		if mode == fsmpb.Repair_LOAD && len(closers) == 0 {
			return sessionstore.View{Header: s.header, Events: norm, Revision: s.revision,
				NextSeq: s.rec.NextSeq, Lease: leaseFromPB(id, s.rec.Lease)}, nil
		}
		res, err := n.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Repair{Repair: &fsmpb.Repair{
			SessionId: id, RequestId: requestID, Mode: mode, Owner: owner, TtlMs: ttlMs, ExpectedRevision: s.revision}}})
		if err != nil {
			return sessionstore.View{}, err
		}
		if res.Stale {
			// Another writer changed the log between our read and the commit:
			// read and validate again (reference §5.4 step 3).
			if attempt > 100 {
				return sessionstore.View{}, sessionstore.ErrOutcomeUnknown
			}
			continue
		}
		// The log below res.NextSeq never changes again, so reading that prefix
		// gives exactly the state at the returned revision.
		v, err := n.viewAt(id, res.NextSeq)
		if err != nil {
			return sessionstore.View{}, err
		}
		v.Revision, v.NextSeq, v.Repaired = res.Revision, res.NextSeq, res.Repaired
		v.Lease = leaseFromPB(id, res.Lease)
		return v, nil
	}
}

// viewAt reads the normalised prefix [0, end) of a session.
func (n *Node) viewAt(id string, end int64) (sessionstore.View, error) {
	var v sessionstore.View
	var raw [][]byte
	err := n.state.View(func(tx *storage.Tx) error {
		rec, err := fsm.ReadRecord(tx, id)
		if err != nil || rec == nil {
			return err
		}
		v.Header = fsm.HeaderFromPB(rec.Header)
		raw, err = tx.Events(id, rec.Incarnation, 0, end)
		return err
	})
	if err != nil {
		n.repairAfter(err)
		return v, storageErr(err)
	}
	norm, err := sessionlog.Normalize(id, raw, n.rawLogPath(v.Header))
	if err != nil {
		return v, sessionlog.WrapCorruption(id, err)
	}
	v.Events = norm
	return v, nil
}

// KeepAlive extends a lease.
func (n *Node) KeepAlive(ctx context.Context, l sessionstore.Lease, requestID string) (sessionstore.Lease, error) {
	res, err := n.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_KeepAlive{KeepAlive: &fsmpb.KeepAlive{
		SessionId: l.SessionID, Owner: l.Owner, Epoch: l.Epoch, RequestId: requestID}}})
	if err != nil {
		return sessionstore.Lease{}, err
	}
	return *leaseFromPB(l.SessionID, res.Lease), nil
}

// Release ends a lease; the session becomes cold (its epoch stays).
func (n *Node) Release(ctx context.Context, id string, epoch uint64, requestID string) error {
	_, err := n.propose(ctx, &fsmpb.Command{Cmd: &fsmpb.Command_Release{Release: &fsmpb.Release{
		SessionId: id, LeaseEpoch: epoch, RequestId: requestID}}})
	return err
}

// ReadFrom returns the stored events with seq >= from: legacy-normalised and
// validated (the whole log, as the reference's sequential backends do), with
// no closers and nothing written.
func (n *Node) ReadFrom(ctx context.Context, id string, from int64, c sessionstore.Consistency) (sessionstore.Suffix, error) {
	if from < 0 || from > sessionstore.MaxSafeInteger {
		return sessionstore.Suffix{}, sessionstore.Errorf(sessionstore.ReasonInvalidArgument,
			"readFrom fromSeq must be a non-negative safe integer, got %d", from)
	}
	s, err := n.readMaterialized(ctx, id, c, 0, true)
	if err != nil {
		return sessionstore.Suffix{}, err
	}
	path := n.rawLogPath(s.header)
	if err := sessionlog.CheckReadFromHeader(id, s.header, path); err != nil {
		return sessionstore.Suffix{}, err
	}
	norm, err := sessionlog.Normalize(id, s.events, path)
	if err != nil {
		return sessionstore.Suffix{}, err
	}
	out := sessionstore.Suffix{Header: s.header, Revision: s.revision, NextSeq: s.rec.NextSeq}
	if from < int64(len(norm)) {
		out.Events = norm[from:]
	}
	return out, nil
}

// RawText is the decoded text of a session's artifact: the header line and one
// line per stored event, each ending in "\n". It is rendered from the state
// database, which the artifact mirrors byte for byte once written.
//
// ReadRaw reads linearizably (a follower forwards it); the HTTP download passes
// Stale and serves this node's own applied state (its revision is the ETag).
func (n *Node) RawText(ctx context.Context, id string, c sessionstore.Consistency) (sessionstore.Header, string, []byte, error) {
	s, err := n.readMaterialized(ctx, id, c, 0, true)
	if err != nil {
		return sessionstore.Header{}, "", nil, err
	}
	var b bytes.Buffer
	b.Write(sessionlog.HeaderLine(s.header))
	b.WriteByte('\n')
	for _, ev := range s.events {
		b.Write(ev)
		b.WriteByte('\n')
	}
	return s.header, s.revision, b.Bytes(), nil
}

// Artifact returns what the HTTP download serves for a session: the path of
// its artifact and the length of the prefix that holds the current revision
// when that file is current, else the artifact's bytes encoded from the state
// database (identical, frame for frame).
//
// It serves this node's own applied state, as the artifact on its disk does.
// An artifact that fails verification (fsm.Artifacts.Verify) is not served:
// the state database's encoding is, while the artifact is rebuilt.
func (n *Node) Artifact(ctx context.Context, id string) (revision, path string, size int64, data []byte, err error) {
	var w storage.Watermark
	revision, w, data, err = n.artifact(id, true)
	if err == nil && w.Path != "" && n.artifacts.Verify(id, w) != nil {
		revision, w, data, err = n.artifact(id, false)
	}
	n.repairAfter(err)
	return revision, w.Path, w.Bytes, data, err
}

func (n *Node) artifact(id string, useFile bool) (revision string, w storage.Watermark, data []byte, err error) {
	err = n.state.View(func(tx *storage.Tx) error {
		rec, err := fsm.ReadRecord(tx, id)
		if err != nil {
			return err
		}
		if rec == nil || !rec.Materialized {
			return sessionstore.NotFound(id)
		}
		revision = fsm.Revision(tx.ClusterID(), rec)
		if cur, ok := n.artifacts.Current(id, rec.LastChangeIndex); ok && useFile {
			w = cur
			return nil
		}
		data = fsm.EncodeHeaderFrame(fsm.HeaderFromPB(rec.Header))
		frames, err := fsm.EncodeFrames(tx, id, rec.Incarnation, 1, rec.Frames)
		for _, f := range frames {
			data = append(data, f...)
		}
		return err
	})
	return revision, w, data, err
}

// List returns materialised sessions in id order, a page at a time.
func (n *Node) List(ctx context.Context, c sessionstore.Consistency, pageSize int, pageToken, cwdPrefix string) ([]sessionstore.Snapshot, string, error) {
	if err := n.readBarrier(ctx, c); err != nil {
		return nil, "", err
	}
	if pageSize <= 0 {
		pageSize = 1000
	}
	if pageSize > 10000 {
		pageSize = 10000
	}
	after := ""
	if pageToken != "" {
		b, err := url.QueryUnescape(pageToken)
		if err != nil {
			return nil, "", sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "invalid page token")
		}
		after = b
	}
	var out []sessionstore.Snapshot
	next := ""
	err := n.state.View(func(tx *storage.Tx) error {
		cid := tx.ClusterID()
		return tx.ForEachSession(after, true, func(id string, raw []byte) error {
			rec, err := fsm.DecodeRecord(raw)
			if err != nil || rec == nil || !rec.Materialized {
				return err
			}
			h := fsm.HeaderFromPB(rec.Header)
			if cwdPrefix != "" && (h.Cwd == nil || !strings.HasPrefix(*h.Cwd, cwdPrefix)) {
				return nil
			}
			if len(out) == pageSize {
				next = url.QueryEscape(out[len(out)-1].Header.ID)
				return storage.ErrStop
			}
			out = append(out, sessionstore.Snapshot{Header: h, Revision: fsm.Revision(cid, rec)})
			return nil
		})
	})
	if err != nil {
		return nil, "", storageErr(err)
	}
	return out, next, nil
}

// Watch streams a session's events from from on, then each newly committed
// batch, in order, from this node's applied state; with no news it sends a
// progress message every progress interval. It ends with UNAVAILABLE when the
// node has had no leader for two election timeouts.
func (n *Node) Watch(ctx context.Context, id string, from int64, progress time.Duration, send func(sessionstore.WatchEvent) error) error {
	if from < 0 {
		return sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "from_seq must be non-negative, got %d", from)
	}
	// Watch serves this node's applied state (DESIGN.md "Cluster"): any node can
	// serve it, followers included; the stream catches up as the node applies.
	if progress <= 0 {
		progress = 5 * time.Second
	}
	cursor := from
	tick := time.NewTicker(progress)
	defer tick.Stop()
	var leaderless time.Time
	for {
		changed := n.fsm.Changed()
		applied := n.fsm.AppliedIndex()
		s, err := n.read(id, cursor, true)
		if err != nil {
			n.repairAfter(err)
			return storageErr(err)
		}
		if s.rec == nil {
			return sessionstore.NotFound(id)
		}
		if len(s.events) > 0 {
			if err := send(sessionstore.WatchEvent{Events: s.events, Revision: s.revision, AppliedIndex: applied}); err != nil {
				return err
			}
			cursor += int64(len(s.events))
			continue
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.ctx.Done():
			return sessionstore.ErrShuttingDown
		case <-changed:
		case <-tick.C:
			if addr, _ := n.raft.LeaderWithID(); addr == "" {
				if leaderless.IsZero() {
					leaderless = time.Now()
				} else if time.Since(leaderless) > 2*time.Second {
					return sessionstore.ErrNoLeader
				}
			} else {
				leaderless = time.Time{}
			}
			if err := send(sessionstore.WatchEvent{Revision: s.revision, AppliedIndex: applied}); err != nil {
				return err
			}
		}
	}
}
