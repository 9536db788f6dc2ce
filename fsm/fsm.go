package fsm

import (
	"fmt"
	"io"
	"log/slog"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
	"github.com/sessionstore/sessionstore/storage"
)

// GroupResult is the response of one applied entry: one result per command,
// in order. A skipped (already applied) entry has a nil response.
type GroupResult struct {
	Results []*fsmpb.Result
}

// Applied describes one committed ApplyBatch, for observers (artifact writer,
// watchers).
type Applied struct {
	Index    uint64
	Sessions []string // sessions whose log or record changed
	Restored bool     // the whole state was replaced by a snapshot
	// Converted: the state's layout changed (ConvertLayout); what readers
	// see did not, so watchers are not woken, but artifacts are checked.
	Converted bool
	Frames    []Frame // artifact frames written by this batch, in log order
}

// Frame is one artifact frame an applied command wrote: the events of one
// Append or repair. The artifact writer frames them without reading them back.
type Frame struct {
	SessionID string
	N         uint64 // frame number (1 = first event frame)
	Index     uint64 // Raft index of the command
	Header    *fsmpb.Header
	Events    [][]byte
	// Deleted marks the session's deletion: its artifact is removed (and a
	// later incarnation starts a new one).
	Deleted bool
}

// FSM applies committed entries to the state database.
type FSM struct {
	db      *storage.StateDB
	logger  *slog.Logger
	metrics *Metrics

	mu       sync.Mutex
	restores uint64
	applied  uint64
	changed  chan struct{} // closed and replaced after every commit
	// sessions holds the per-session signals of SessionWatch: a commit wakes
	// only the watchers of the sessions it touched.
	sessions map[string]*sessionSignal
	observer func(Applied)
	// maxVersion, when set, is the newest command version applied: tests
	// stand in for an older build with it.
	maxVersion uint32
	repair     Repairer
	// checks and headers are used by the apply goroutine only (Apply and
	// Restore).
	checks  *readChecks
	headers headerSizes
	records recordCache
}

// RepairFrom makes damaged events found while applying repairable from r
// (before Raft starts).
func (f *FSM) RepairFrom(r Repairer) { f.repair = r }

// LimitVersion makes the FSM refuse (panic on) entries above command version
// v, as a build that only knows v would; 0 keeps this build's CommandVersion.
func (f *FSM) LimitVersion(v uint32) { f.maxVersion = v }

// New returns an FSM over db. Observer, when set, runs after every committed
// batch in the apply goroutine: it must not block.
func New(db *storage.StateDB, logger *slog.Logger, metrics *Metrics, observer func(Applied)) (*FSM, error) {
	if n, err := EnsureChecksums(db); err != nil {
		return nil, fmt.Errorf("adding checksums to the state database: %w", err)
	} else if n > 0 {
		logger.Info("state database converted: checksums added (written by a build without them)", "sessions", n)
	}
	idx, _, err := db.AppliedIndex()
	if err != nil {
		return nil, err
	}
	if metrics == nil {
		metrics = NewMetrics(nil)
	}
	return &FSM{db: db, logger: logger.With("component", "fsm"), metrics: metrics, checks: newReadChecks(maxReadChecks),
		headers: headerSizes{}, records: recordCache{}, applied: idx, changed: make(chan struct{}), sessions: map[string]*sessionSignal{}, observer: observer}, nil
}

// AppliedIndex is the last Raft index whose effects are applied: every read
// of the state database that begins afterwards sees them (a deferred commit
// is completed first).
func (f *FSM) AppliedIndex() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.applied
}

// Restores counts the snapshots restored by this FSM.
func (f *FSM) Restores() uint64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.restores
}

// Changed returns a channel closed at the next commit (any session's: for
// waits on the applied index; a watcher of one session uses WatchSession).
func (f *FSM) Changed() <-chan struct{} {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed
}

type sessionSignal struct {
	ch   chan struct{} // closed and replaced at each commit touching the session
	refs int
}

func (s *sessionSignal) fire() {
	close(s.ch)
	s.ch = make(chan struct{})
}

// SessionWatch follows the commits that touch one session (its log, record
// or deletion) or replace the whole state. Close it when done.
type SessionWatch struct {
	f   *FSM
	id  string
	sig *sessionSignal
}

// WatchSession returns a SessionWatch for session id.
func (f *FSM) WatchSession(id string) *SessionWatch {
	f.mu.Lock()
	defer f.mu.Unlock()
	sig := f.sessions[id]
	if sig == nil {
		sig = &sessionSignal{ch: make(chan struct{})}
		f.sessions[id] = sig
	}
	sig.refs++
	return &SessionWatch{f: f, id: id, sig: sig}
}

// Changed returns a channel closed at the next commit that touches the
// session. Take it before reading the state, as with FSM.Changed.
func (w *SessionWatch) Changed() <-chan struct{} {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	return w.sig.ch
}

// Close releases the watch.
func (w *SessionWatch) Close() {
	w.f.mu.Lock()
	defer w.f.mu.Unlock()
	if w.sig == nil {
		return
	}
	if w.sig.refs--; w.sig.refs == 0 {
		delete(w.f.sessions, w.id)
	}
	w.sig = nil
}

func (f *FSM) published(a Applied) {
	f.mu.Lock()
	if a.Index > f.applied || a.Restored {
		f.applied = a.Index
	}
	close(f.changed)
	f.changed = make(chan struct{})
	if a.Restored {
		for _, sig := range f.sessions {
			sig.fire()
		}
	} else {
		for _, id := range a.Sessions {
			if sig := f.sessions[id]; sig != nil {
				sig.fire()
			}
		}
	}
	f.mu.Unlock()
	if f.observer != nil {
		f.observer(a)
	}
}

// Apply applies one entry (raft calls ApplyBatch; this is for completeness).
func (f *FSM) Apply(l *raft.Log) interface{} {
	return f.ApplyBatch([]*raft.Log{l})[0]
}

// ApplyBatch applies entries in one bbolt transaction that also records the
// last applied index (a transaction that later batches join until it is
// committed); entries at or below the stored index are skipped.
func (f *FSM) ApplyBatch(logs []*raft.Log) []interface{} {
	start := time.Now()
	out := make([]interface{}, len(logs))
	changed := map[string]struct{}{}
	var order []string
	var frames []Frame
	var lastIndex uint64
	converted := false // the layout changed: artifacts are checked whole
	// Deferred: the batch is committed with the next ones, by the node's
	// periodic Sync or the first read (storage.StateDB.UpdateDeferred).
	err := f.db.UpdateDeferred(func(tx *storage.Tx) error {
		applied, _ := tx.Applied()
		var last *raft.Log
		for i, l := range logs {
			if l.Index <= applied {
				continue
			}
			last = l
			if l.Type != raft.LogCommand {
				continue
			}
			e, err := Decode(l.Data)
			if err == nil && f.maxVersion != 0 && e.Version > f.maxVersion {
				err = fmt.Errorf("command version %d not supported (this node applies up to %d)", e.Version, f.maxVersion)
			}
			if err != nil {
				// Replicas must not diverge: stop this node rather than skip.
				panic(fmt.Sprintf("fsm: undecodable entry at index %d: %v", l.Index, err))
			}
			a := &applier{tx: tx, index: l.Index, now: clamp(tx, e.NowUnixMs), frames: &frames, metrics: f.metrics, repairer: f.repair, checks: f.checks, headers: f.headers, records: f.records}
			tx.BeginEntry(l.Index)
			res := make([]*fsmpb.Result, len(e.Commands))
			for j, c := range e.Commands {
				layout := tx.Layout()
				r, touched, err := a.apply(c)
				if err != nil {
					return fmt.Errorf("apply index %d command %d: %w", l.Index, j, err)
				}
				if tx.Layout() != layout {
					if layout < 2 {
						f.logger.Info("state database converted to layout 2 (events stored once, in apply order)",
							"raft_index", l.Index, "sessions", a.converted, "dur", time.Since(start))
					}
					if layout < 3 && tx.Layout() >= 3 {
						f.logger.Info("state database in format 3: new events are stored packed", "raft_index", l.Index)
					}
					if layout < 4 && tx.Layout() >= 4 {
						f.logger.Info("state database in format 4: session rows keyed by session number",
							"raft_index", l.Index, "sessions", a.converted, "dur", time.Since(start))
					}
					if tx.Layout() == 5 {
						f.logger.Info("state database in format 5: session records keep their title",
							"raft_index", l.Index, "titled_sessions", a.titled, "dur", time.Since(start))
					}
					converted = true
				}
				res[j] = r
				ids := r.GetDeleted() // a sweep touches every session it deleted
				if touched != "" {
					ids = append([]string{touched}, ids...)
				}
				for _, id := range ids {
					if _, ok := changed[id]; !ok {
						changed[id] = struct{}{}
						order = append(order, id)
					}
				}
			}
			if err := tx.SetClock(a.now); err != nil {
				return err
			}
			out[i] = &GroupResult{Results: res}
		}
		if last == nil {
			return nil
		}
		lastIndex = last.Index
		return tx.SetApplied(last.Index, last.Term)
	})
	if err != nil {
		panic(fmt.Sprintf("fsm: state database failed while applying up to index %d: %v", logs[len(logs)-1].Index, err))
	}
	f.metrics.observeBatch(len(logs), time.Since(start))
	if lastIndex > 0 {
		f.published(Applied{Index: lastIndex, Sessions: order, Frames: frames, Converted: converted})
	}
	return out
}

// Now is the time, in Unix ms, a command stamped with the leader's clock now
// would be applied at: wallMs, never earlier than any time applied before
// (Apply's clamp). A read that decides what Apply decides (is a lease live,
// is a session past a retention policy) decides at this time.
func Now(tx *storage.Tx, wallMs int64) int64 { return clamp(tx, wallMs) }

// LeaseLive reports whether rec's lease is live at now (Unix ms): the one
// rule Apply (fencing, closers) and reads (which closers a view shows) use.
func LeaseLive(rec *fsmpb.SessionRecord, now int64) bool {
	return rec.GetLease() != nil && rec.Lease.ExpiresAtUnixMs > now
}

// clamp returns the entry's stamped time, never earlier than any applied before.
func clamp(tx *storage.Tx, stamped int64) int64 {
	if c := tx.Clock(); c > stamped {
		return c
	}
	return stamped
}

// Snapshot captures a point-in-time read transaction; Persist streams it.
func (f *FSM) Snapshot() (raft.FSMSnapshot, error) {
	sn, err := f.db.BeginSnapshot()
	if err != nil {
		return nil, err
	}
	return &fsmSnapshot{sn: sn, metrics: f.metrics, logger: f.logger}, nil
}

// Restore replaces the whole state with a snapshot.
func (f *FSM) Restore(rc io.ReadCloser) error {
	defer rc.Close()
	start := time.Now()
	// A snapshot whose checksums fail is refused before it replaces the state
	// (damage must not spread); one without checksums (2f2e872) is converted.
	if err := f.db.Restore(rc, VerifyAll); err != nil {
		return err
	}
	if _, err := EnsureChecksums(f.db); err != nil {
		return err
	}
	f.checks = newReadChecks(maxReadChecks) // kept checks stay valid (readchecks.go); this frees them
	clear(f.headers)
	clear(f.records)
	idx, _, err := f.db.AppliedIndex()
	if err != nil {
		return err
	}
	f.metrics.Restores.Inc()
	f.metrics.RestoreSeconds.Observe(time.Since(start).Seconds())
	f.mu.Lock()
	f.restores++
	f.mu.Unlock()
	f.logger.Info("restored state from snapshot", "raft_index", idx, "dur", time.Since(start))
	f.published(Applied{Index: idx, Restored: true})
	return nil
}

type fsmSnapshot struct {
	sn      *storage.Snapshot
	metrics *Metrics
	logger  *slog.Logger
}

func (s *fsmSnapshot) Persist(sink raft.SnapshotSink) error {
	start := time.Now()
	// Never ship damage: every record and event is verified first (one more
	// read of the state; the snapshot reads it all anyway).
	if err := VerifyAll(s.sn.Tx()); err != nil {
		s.metrics.SnapshotErrors.Inc()
		s.logger.Error("snapshot refused: the state database is damaged", "err", err)
		_ = sink.Cancel()
		return err
	}
	n, err := s.sn.WriteTo(sink)
	if err != nil {
		s.metrics.SnapshotErrors.Inc()
		_ = sink.Cancel()
		return err
	}
	if err := sink.Close(); err != nil {
		s.metrics.SnapshotErrors.Inc()
		return err
	}
	s.metrics.Snapshots.Inc()
	s.metrics.SnapshotBytes.Set(float64(n))
	s.metrics.SnapshotSeconds.Observe(time.Since(start).Seconds())
	s.logger.Info("snapshot persisted", "bytes", n, "dur", time.Since(start))
	return nil
}

func (s *fsmSnapshot) Release() { s.sn.Release() }

var _ raft.BatchingFSM = (*FSM)(nil)
