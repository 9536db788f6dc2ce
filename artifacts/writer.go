// Package artifacts keeps a node's JSONL artifacts: the zstd-compressed
// copy of every session, in the reference harness's layout, written after
// the state machine applies a batch (fed by its observer) and never in the
// way of Apply.
package artifacts

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/fsm"
	"github.com/sessionstore/sessionstore/sessionlog"
	"github.com/sessionstore/sessionstore/storage"
)

// Writer keeps this node's JSONL artifacts: after commits, in passes at
// least passPause apart, it appends to each changed session's file the lines
// of the commands applied since the last pass, in log order, in one zstd
// frame per MiB (storage.EncodeLines), without fsync, and records a
// per-session watermark in the node-local store: the last command (frame
// number) the file holds, its length and checksum.
// A session whose watermark lags, or whose file does not have the watermark's
// length, is brought up to date from the state database (appended to, or
// rebuilt whole: a whole rebuild is a function of the text). Where frames
// are cut depends on the passes, so nodes hold the same text, not always the
// same bytes. Write errors are counted, reported by Healthy, and retried;
// they never reach Apply.
//
// # Goroutines and what they share
//
// The writer goroutine (Run, and step, pass, sync, publish and flush under
// it) owns the files, the watermarks not yet persisted, the scratch buffers
// and the watermarks themselves: nothing else writes them, so it takes no
// lock to read them (and only a short one to publish them). A pass's catch-up from the state database (syncAll)
// runs on workers that share only the files (storage.ArtifactFiles locks
// itself), each writing its own sessions; the pass waits for them.
//
// Other goroutines share two things with it:
//
//   - the inbox (in, under its own mutex): what callers hand over. Observe,
//     called by the FSM's Apply once per applied batch, adds the changed
//     sessions and their frames and never waits for more than the mutex;
//     Verify adds a damaged session. A pass takes the whole inbox at its
//     start, and at its end closes in.idle, which WaitIdle waits on, if
//     nothing new arrived. wake and hurry are signals beside it.
//   - the published view: marks (the watermarks that Current and
//     RepairEvents read, under the watermarks' own read lock; the writer
//     changes those of a pass at once, after the files are written, never
//     copying the whole set), and, read without a lock, damaged (sessions not served: Verify adds one, the writer removes it
//     once a pass that began after has rewritten it) and lastErr (Healthy).
//     A snapshot restore withdraws marks at once (Observe stores nil, under
//     the inbox's mutex): nothing is served until a pass publishes them
//     again, reloaded from the node-local store (or those of a pass under way
//     at the restore), and the full pass the restore asks for checks each.
//
// The writer goroutine is started by Run and stops when its context ends.
type Writer struct {
	root    string
	state   sessionState
	local   *storage.RaftStore
	logger  *slog.Logger
	metrics *fsm.Metrics

	in    inbox
	wake  chan struct{}
	hurry chan struct{} // a WaitIdle caller: cut the pause between passes short

	// marks are the published watermarks; nil before the first pass has
	// loaded them, or after a restore until a pass has reloaded them.
	marks atomic.Pointer[watermarks]
	// damaged are sessions whose artifact failed Verify (id → struct{}): not
	// served (Current says it lags) until a pass has rewritten it whole.
	damaged sync.Map
	lastErr atomic.Pointer[error] // the last pass's error (Healthy)

	// unflushed watermarks; persisted at most every flushEvery so the writer
	// does not compete with the Raft log for its file's single writer lock. A
	// crash loses only some watermarks: those sessions are rebuilt at start-up.
	unflushed map[string]storage.Watermark
	lastFlush time.Time

	// files keeps the artifacts of active sessions open (the writer's own;
	// closed when Run returns).
	files *storage.ArtifactFiles
	// plain and frames are syncPending's scratch buffers.
	plain, frames []byte

	// off: the node keeps no artifacts (Off).
	off bool
}

// inbox is what callers hand the writer goroutine, and whether it has all
// been written (idle).
type inbox struct {
	mu    sync.Mutex
	dirty map[string]struct{}
	all   bool // check every session (start-up, restore)
	// idle is closed while nothing is pending or being written, and replaced
	// by an open one when work arrives (idleClosed says which): WaitIdle
	// waits on it alone.
	idle       chan struct{}
	idleClosed bool
	running    bool // a pass is under way (its work no longer in dirty)

	// pending holds the frames applied batches handed over, per session, so
	// the writer can frame them without reading them back from the state
	// database; bounded by maxPendingBytes (past it, sessions fall back to
	// reading the state database).
	pending      map[string][]fsm.Frame
	pendingBytes int
	// deleted are sessions deleted since the last pass: their artifacts go
	// first.
	deleted map[string]struct{}
}

// working notes that work arrived (under mu): WaitIdle callers wait for it.
func (in *inbox) working() {
	if in.idleClosed {
		in.idle, in.idleClosed = make(chan struct{}), false
	}
}

// watermarks are the watermarks of this node's artifacts, by session, as
// the writer goroutine published them. Only that goroutine changes them, all
// of a pass's at once under mu (update); readers take mu shared for one
// lookup. A plain map under a lock, not a sync.Map: every pass changes the
// watermark of every session it wrote, and a sync.Map allocates on each
// such store (BenchmarkArtifactWriter: 10-15 % more CPU per frame).
type watermarks struct {
	mu sync.RWMutex
	m  map[string]storage.Watermark
	// bytes is the sum of their Bytes (writer goroutine only): the artifact
	// bytes on disk as the watermarks record them
	// (sessionstore_artifact_bytes), kept as a running sum so a scrape never
	// walks the directory.
	bytes int64
}

func newWatermarks(loaded map[string]storage.Watermark) *watermarks {
	ws := &watermarks{m: loaded}
	if ws.m == nil {
		ws.m = map[string]storage.Watermark{}
	}
	for _, w := range loaded {
		ws.bytes += w.Bytes
	}
	return ws
}

func (ws *watermarks) get(id string) (storage.Watermark, bool) {
	ws.mu.RLock()
	w, ok := ws.m[id]
	ws.mu.RUnlock()
	return w, ok
}

// ids calls fn with each session that has a watermark (writer goroutine:
// nothing else changes the map, so it needs no lock).
func (ws *watermarks) ids(fn func(id string)) {
	for id := range ws.m {
		fn(id)
	}
}

// update publishes a pass's new watermarks (writer goroutine); one without a
// path (its artifact removed) is dropped.
func (ws *watermarks) update(updates map[string]storage.Watermark) {
	ws.mu.Lock()
	defer ws.mu.Unlock()
	for id, w := range updates {
		ws.bytes -= ws.m[id].Bytes
		if w.Path == "" {
			delete(ws.m, id)
			continue
		}
		ws.m[id] = w
		ws.bytes += w.Bytes
	}
}

// flushEvery bounds how often watermarks are persisted.
const flushEvery = 500 * time.Millisecond

// passPause is the least time between two passes that wrote something, so
// that an active session's appends meanwhile reach its file in one write:
// the write, not its bytes, is what costs (with a pass per applied batch,
// one pwrite per active session per pass was 9-12 % of a node's CPU at 256
// writers; 250 ms apart, 5-9 %; a second apart, 2-5 %). Reads never wait
// for it: a lagging artifact is served from the state database (Current),
// and WaitIdle cuts the pause short.
const passPause = time.Second

// maxPendingBytes bounds the frames held for the writer in memory.
const maxPendingBytes = 32 << 20

// New returns a writer for artifacts under root.
func New(root string, db *storage.StateDB, local *storage.RaftStore, logger *slog.Logger, metrics *fsm.Metrics) *Writer {
	return newWriter(root, stateDB{db}, local, logger, metrics)
}

// newWriter returns a writer that reads the sessions from state.
func newWriter(root string, state sessionState, local *storage.RaftStore, logger *slog.Logger, metrics *fsm.Metrics) *Writer {
	if metrics == nil {
		metrics = fsm.NewMetrics(nil)
	}
	return &Writer{root: root, state: state, local: local, logger: logger.With("component", "artifacts"), metrics: metrics,
		in:   inbox{dirty: map[string]struct{}{}, all: true, idle: make(chan struct{})},
		wake: make(chan struct{}, 1), hurry: make(chan struct{}, 1), files: storage.NewArtifactFiles(storage.MaxOpenArtifacts)}
}

// Off returns a writer for a node that keeps no artifacts (serve
// --artifacts off): Run removes the artifacts and watermarks an earlier run
// left, which would otherwise go stale, and then writes nothing. Current
// never finds a file, so raw reads and downloads render from the state
// database, and a damaged event cannot be repaired from an artifact.
func Off(root string, local *storage.RaftStore, logger *slog.Logger, metrics *fsm.Metrics) *Writer {
	a := New(root, nil, local, logger, metrics)
	a.off, a.in.all = true, false
	return a
}

// Root is the artifact directory.
func (a *Writer) Root() string { return a.root }

// Observe is the FSM observer: it marks changed sessions for writing.
func (a *Writer) Observe(ap fsm.Applied) {
	if a.off {
		return
	}
	in := &a.in
	in.mu.Lock()
	if ap.Restored || ap.Converted || len(ap.Sessions) > 0 || len(ap.Frames) > 0 {
		in.working()
	}
	if ap.Restored {
		in.all = true
		a.marks.Store(nil) // reloaded (after the clear) by the writer
	}
	if ap.Converted {
		in.all = true // frame boundaries may have been mended (fsm.ConvertLayout)
	}
	for _, id := range ap.Sessions {
		in.dirty[id] = struct{}{}
	}
	if in.pending == nil {
		in.pending = map[string][]fsm.Frame{}
	}
	for _, f := range ap.Frames {
		if f.Deleted {
			// Earlier frames of the deleted incarnation are void; the pass
			// removes the file before it writes anything of a new one.
			in.pendingBytes -= pendingSize(in.pending[f.SessionID])
			delete(in.pending, f.SessionID)
			if in.deleted == nil {
				in.deleted = map[string]struct{}{}
			}
			in.deleted[f.SessionID] = struct{}{}
			continue
		}
		size := 0
		for _, e := range f.Events {
			size += len(e)
		}
		if in.pendingBytes+size > maxPendingBytes {
			in.pendingBytes -= pendingSize(in.pending[f.SessionID])
			delete(in.pending, f.SessionID) // this session reads the state database instead
			continue
		}
		in.pending[f.SessionID] = append(in.pending[f.SessionID], f)
		in.pendingBytes += size
	}
	in.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

// Healthy reports the last write error, nil when artifacts are current or catching up.
func (a *Writer) Healthy() error {
	if err := a.lastErr.Load(); err != nil {
		return *err
	}
	return nil
}

// Current returns the watermark of a session's artifact: its path, and the
// length (Bytes) and checksum (Sum) of its prefix that holds exactly the state
// at lastChange; ok is false while the artifact lags or awaits a rewrite. (The
// file may already be longer: serve only that prefix, after Verify.)
func (a *Writer) Current(id string, lastChange uint64) (storage.Watermark, bool) {
	ws := a.marks.Load()
	if ws == nil {
		return storage.Watermark{}, false
	}
	w, ok := ws.get(id)
	if _, bad := a.damaged.Load(id); bad || !ok || !w.HasSum || w.LastIndex != lastChange {
		return storage.Watermark{}, false
	}
	return w, true
}

// Verify checks the artifact prefix Current returned before it is served: its
// CRC-32C must be the watermark's. The start-up pass only compares each
// file's size with its watermark (a stat, no read); damage of the same size,
// or anything done to the file while the node runs, is caught here. A failure
// is counted (sessionstore_artifact_verify_failures_total), logged, and the
// session's artifact is rewritten whole from the state database; the caller
// serves the state database's encoding meanwhile, never the bad bytes.
func (a *Writer) Verify(id string, w storage.Watermark) error {
	f, err := os.Open(w.Path)
	if err == nil {
		err = storage.VerifyArtifact(f, w.Bytes, w.Sum)
		f.Close()
	}
	if err == nil {
		return nil
	}
	if !os.IsNotExist(err) { // a missing file may just be a concurrent delete
		a.metrics.ArtifactCorrupt.Inc()
		a.logger.Error("artifact failed verification; serving from the state database and rebuilding it", "session", id, "path", w.Path, "err", err)
	}
	a.in.mu.Lock()
	a.damaged.Store(id, struct{}{})
	a.in.dirty[id] = struct{}{}
	a.in.working()
	a.in.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
	return err
}

// WaitIdle blocks until every known change is written or ctx ends.
func (a *Writer) WaitIdle(ctx context.Context) error {
	if a.off {
		return nil
	}
	select {
	case a.hurry <- struct{}{}:
	default:
	}
	a.in.mu.Lock()
	idle := a.in.idle
	a.in.mu.Unlock()
	select {
	case <-idle:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Run writes artifacts until ctx ends.
func (a *Writer) Run(ctx context.Context) {
	defer a.files.Close()
	if a.off {
		a.removeAll(ctx)
		return
	}
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	pause := time.NewTimer(time.Hour)
	pause.Stop()
	for {
		worked, err := a.step()
		if err != nil {
			retry.Reset(time.Second)
			select {
			case <-ctx.Done():
				return
			case <-retry.C:
			}
			continue
		}
		if worked {
			pause.Reset(passPause)
			select {
			case <-ctx.Done(): // the select below persists the watermarks
			case <-a.hurry:
				pause.Stop()
			case <-pause.C:
			}
		}
		var flush <-chan time.Time
		if len(a.unflushed) > 0 {
			flush = time.After(flushEvery)
		}
		select {
		case <-ctx.Done():
			if err := a.flushWatermarks(true); err != nil {
				a.logger.Warn("persisting artifact watermarks at stop failed; those artifacts are rebuilt at start-up", "err", err)
			}
			return
		case <-a.wake:
		case <-flush:
			if err := a.flushWatermarks(true); err != nil {
				a.logger.Warn("persisting artifact watermarks failed; will retry", "err", err)
			}
		}
	}
}

// step runs one pass over what is pending, if anything, and says whether it
// did; an error (counted and logged here) means the pass is to be retried.
func (a *Writer) step() (bool, error) {
	in := &a.in
	in.mu.Lock()
	all := in.all
	dirty := in.dirty
	pending := in.pending
	deleted := in.deleted
	damaged := map[string]struct{}{}
	a.damaged.Range(func(id, _ any) bool {
		damaged[id.(string)] = struct{}{}
		return true
	})
	work := all || len(dirty) > 0 || len(deleted) > 0
	in.running = work
	in.all = false
	in.dirty = map[string]struct{}{}
	in.pending, in.pendingBytes, in.deleted = nil, 0, nil
	marks := a.marks.Load()
	in.mu.Unlock()
	if !work {
		return false, nil
	}
	err := a.pass(all, dirty, deleted, damaged, marks, pending)
	a.lastErr.Store(&err)
	if err == nil {
		for id := range damaged {
			a.damaged.Delete(id)
		}
	}
	in.mu.Lock()
	in.running = false
	if err != nil {
		// Retry the whole pass later; keep what was pending.
		in.all = in.all || all
		for id := range dirty {
			in.dirty[id] = struct{}{}
		}
		for id := range deleted {
			in.dirty[id] = struct{}{} // sync removes what has no record
		}
	}
	if !in.all && len(in.dirty) == 0 && len(in.deleted) == 0 && !in.idleClosed {
		close(in.idle)
		in.idleClosed = true
	}
	in.mu.Unlock()
	if err != nil {
		a.metrics.ArtifactErrors.Inc()
		a.logger.Error("artifact write failed; will retry", "err", err)
	}
	return true, err
}

// pass brings the given sessions (or all) up to date: the artifacts of
// deleted sessions go first, then each session's file is synced from the
// frames handed over (syncPending) or else from the state database
// (syncAll), and the new watermarks are published (publish).
func (a *Writer) pass(all bool, dirty, deleted, damaged map[string]struct{}, marks *watermarks, pending map[string][]fsm.Frame) error {
	if marks == nil {
		// First pass, or after a restore: start from the persisted watermarks;
		// sync checks each against the state and the file.
		loaded, err := a.local.Watermarks(a.root)
		if err != nil {
			return err
		}
		marks = newWatermarks(loaded)
		// Open files were written against the watermarks dropped: check
		// each file's size again when it is next opened.
		a.files.Close()
	}
	if all {
		ids, err := a.allSessions(dirty, marks)
		if err != nil {
			return err
		}
		dirty = ids
	}
	r := passResult{updates: map[string]storage.Watermark{}, marks: marks}
	cleared := map[string]bool{}
	for id := range deleted {
		w, _ := marks.get(id)
		if err := a.removeArtifact(w.Path); err != nil {
			r.fail(fmt.Errorf("removing the artifact of deleted session %q: %w", id, err))
			continue
		}
		cleared[id] = true
		dirty[id] = struct{}{} // a new incarnation may already exist
	}
	for id := range damaged {
		dirty[id] = struct{}{}
	}
	var jobs []syncJob // sessions that need the state database
	for id := range dirty {
		old, _ := marks.get(id)
		if cleared[id] {
			old = storage.Watermark{}
		}
		if _, bad := damaged[id]; bad {
			old.HasSum = false // rewrite whole (or remove): no byte of the damaged file is kept
		}
		w, ok, err := a.syncPending(old, pending[id])
		if err == nil && !ok {
			jobs = append(jobs, syncJob{id: id, old: old})
			continue
		}
		r.note(id, w, err)
	}
	for i, res := range a.syncAll(jobs) {
		r.note(jobs[i].id, res.w, res.err)
	}
	return a.publish(r)
}

// allSessions is every session a full pass checks: those with a record,
// those changed meanwhile, and those with a watermark but no record (deleted
// while this node was down or behind: a snapshot install).
func (a *Writer) allSessions(dirty map[string]struct{}, marks *watermarks) (map[string]struct{}, error) {
	ids := map[string]struct{}{}
	err := a.state.view(func(st stateView) error {
		return st.sessionIDs(func(id string) { ids[id] = struct{}{} })
	})
	for id := range dirty {
		ids[id] = struct{}{}
	}
	marks.ids(func(id string) { ids[id] = struct{}{} })
	return ids, err
}

// passResult collects a pass's new watermarks and its failures.
type passResult struct {
	marks    *watermarks // as the pass began (a pass changes them only in publish)
	updates  map[string]storage.Watermark
	lagging  int
	firstErr error
}

func (r *passResult) fail(err error) {
	r.lagging++
	if r.firstErr == nil {
		r.firstErr = err
	}
}

func (r *passResult) note(id string, w storage.Watermark, err error) {
	if err != nil {
		r.fail(fmt.Errorf("artifact of session %q: %w", id, err))
		return
	}
	if old, _ := r.marks.get(id); w != old {
		r.updates[id] = w
	}
}

// publish queues a pass's watermarks for persisting, makes them what
// Current serves, and updates the gauges; it returns the pass's first error.
func (a *Writer) publish(r passResult) error {
	if a.unflushed == nil {
		a.unflushed = map[string]storage.Watermark{}
	}
	for id, w := range r.updates {
		a.unflushed[id] = w
	}
	if err := a.flushWatermarks(false); err != nil && r.firstErr == nil {
		r.firstErr = err
	}
	r.marks.update(r.updates)
	// Also after a restore withdrew them meanwhile: the next pass, which
	// checks every session, starts from them.
	a.marks.Store(r.marks)
	a.metrics.ArtifactStored.Set(float64(r.marks.bytes))
	a.metrics.ArtifactLagging.Set(float64(r.lagging))
	return r.firstErr
}

// flushWatermarks persists pending watermarks (always when force is set).
func (a *Writer) flushWatermarks(force bool) error {
	if len(a.unflushed) == 0 || (!force && time.Since(a.lastFlush) < flushEvery) {
		return nil
	}
	if err := a.local.PutWatermarks(a.root, a.unflushed); err != nil {
		return err
	}
	a.unflushed = nil
	a.lastFlush = time.Now()
	return nil
}

func pendingSize(fs []fsm.Frame) int {
	n := 0
	for _, f := range fs {
		for _, e := range f.Events {
			n += len(e)
		}
	}
	return n
}

// syncPending appends the frames an applied batch handed over when they
// continue the artifact exactly where its watermark ends; ok is false when
// they do not (the caller then reads the state database).
func (a *Writer) syncPending(w storage.Watermark, fs []fsm.Frame) (storage.Watermark, bool, error) {
	if len(fs) == 0 || fs[0].N != w.Frames+1 || (w.Frames > 0 && !w.HasSum) {
		return w, false, nil
	}
	for i := 1; i < len(fs); i++ {
		if fs[i].N != fs[i-1].N+1 {
			return w, false, nil
		}
	}
	path := w.Path
	data := a.frames[:0]
	if w.Frames == 0 {
		// A new artifact: the header frame first.
		h := fsm.HeaderFromPB(fs[0].Header)
		p, err := storage.ArtifactPath(a.root, h)
		if err != nil {
			return w, false, err
		}
		path, w.Bytes, w.Sum = p, 0, 0
		data = storage.EncodeFrame(data, append(sessionlog.HeaderLine(h), '\n'))
	} else if path == "" {
		return w, false, nil
	}
	// The pass's frames of the session coalesced: one zstd frame (per MiB)
	// compresses what a frame per command would store raw.
	plain := a.plain[:0]
	for _, f := range fs {
		for _, e := range f.Events {
			plain = append(append(plain, e...), '\n')
		}
	}
	data = storage.EncodeLines(data, plain, storage.MaxFramePlain)
	// Kept for the next session, unless one huge batch would pin its size.
	if cap(plain) <= maxScratch {
		a.plain = plain
	}
	if cap(data) <= maxScratch {
		a.frames = data
	}
	last := fs[len(fs)-1]
	if len(data) == 0 {
		// Only empty commands: the file already holds their (no) lines.
		return storage.Watermark{LastIndex: last.Index, Bytes: w.Bytes, Frames: last.N, Path: path,
			Sum: w.Sum, HasSum: true}, true, nil
	}
	// All of this pass's lines of the session in one write.
	size, err := a.files.Append(path, w.Bytes, data)
	if err != nil {
		// The file and the watermark disagree: rebuild from the state database.
		return w, false, nil
	}
	a.metrics.ArtifactBytes.Add(float64(len(data)))
	return storage.Watermark{LastIndex: last.Index, Bytes: size, Frames: last.N, Path: path,
		Sum: storage.ArtifactSum(w.Sum, data), HasSum: true}, true, nil
}

// syncJob is a session whose artifact is brought up to date from the state
// database, from its watermark old.
type syncJob struct {
	id  string
	old storage.Watermark
}

// syncResult is a syncJob's new watermark, or the error that left it behind.
type syncResult struct {
	w   storage.Watermark
	err error
}

// syncPlan is what a session's artifact needs, as read from the state
// database; it is carried out (write) after the read transaction.
type syncPlan struct {
	op     syncOp
	full   bool // rewrite the whole file (else append to the watermark's end)
	path   string
	data   []byte
	last   uint64 // the record's LastChangeIndex
	frames uint64 // the record's Frames
	err    error
}

type syncOp int

const (
	syncKeep   syncOp = iota // nothing to write
	syncRemove               // no record: no artifact may remain
	syncWrite
)

// syncBatch is how many sessions share one read transaction of the state
// database (a chunk of work); syncHeldBytes bounds the encoded artifacts a
// worker holds before it writes them out. Short transactions, because a long
// reader holds up bbolt's remapping when the database grows.
const (
	syncBatch     = 64
	syncHeldBytes = 4 << 20
)

// maxScratch bounds the scratch buffers the writer keeps between sessions.
const maxScratch = 1 << 20

// syncAll brings the artifacts of jobs up to date from the state database
// and returns their results, in the order of jobs. A catch-up (a wiped or
// restored follower) rebuilds every artifact here, so the work is spread
// over GOMAXPROCS workers, each reading many sessions per transaction: most
// of the time is file system calls, which run in parallel.
func (a *Writer) syncAll(jobs []syncJob) []syncResult {
	out := make([]syncResult, len(jobs))
	if len(jobs) == 0 {
		return out
	}
	// Neighbours in the state database's key order share its pages.
	order := make([]int, len(jobs))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return strings.Compare(jobs[x].id, jobs[y].id) })
	chunks := (len(jobs) + syncBatch - 1) / syncBatch
	var next atomic.Int64
	work := func() {
		var buf []byte
		for {
			c := int(next.Add(1)) - 1
			if c >= chunks {
				return
			}
			buf = a.syncChunk(jobs, order[c*syncBatch:min((c+1)*syncBatch, len(jobs))], out, buf)
		}
	}
	workers := min(runtime.GOMAXPROCS(0), chunks)
	var wg sync.WaitGroup
	for range workers - 1 {
		wg.Go(work)
	}
	work()
	wg.Wait()
	return out
}

// syncChunk syncs jobs[i] for every i in idx, into out[i]: their records and
// frames read in as few transactions as syncHeldBytes allows, the files
// written after each. buf is scratch space, returned for reuse.
func (a *Writer) syncChunk(jobs []syncJob, idx []int, out []syncResult, buf []byte) []byte {
	type span struct{ start, end int }
	var lines []byte // plan's scratch
	plans := make([]syncPlan, 0, len(idx))
	spans := make([]span, 0, len(idx))
	for len(idx) > 0 {
		plans, spans, buf = plans[:0], spans[:0], buf[:0]
		err := a.state.view(func(st stateView) error {
			for _, i := range idx {
				start := len(buf)
				var p syncPlan
				p, buf, lines = a.plan(st, jobs[i].id, jobs[i].old, buf, lines)
				plans = append(plans, p)
				spans = append(spans, span{start, len(buf)})
				if len(buf) >= syncHeldBytes {
					break
				}
			}
			return nil
		})
		if err != nil {
			for _, i := range idx {
				out[i] = syncResult{jobs[i].old, err}
			}
			return buf
		}
		for k, p := range plans {
			i := idx[k]
			p.data = buf[spans[k].start:spans[k].end]
			w, err := a.write(jobs[i].old, p)
			out[i] = syncResult{w, err}
		}
		idx = idx[len(plans):]
	}
	if cap(buf) > syncHeldBytes*2 {
		buf = nil // one huge session: do not keep its size
	}
	return buf
}

// plan reads what session id's artifact needs to catch up from watermark w;
// the frames to write are appended to buf (returned extended); lines is
// scratch space for their plaintext (returned for reuse).
func (a *Writer) plan(st stateView, id string, w storage.Watermark, buf, lines []byte) (syncPlan, []byte, []byte) {
	s, err := st.session(id)
	if err != nil {
		return syncPlan{err: err}, buf, lines
	}
	var path string
	if s.Visible() {
		if path, err = storage.ArtifactPath(a.root, s.Header); err != nil {
			return syncPlan{err: err}, buf, lines
		}
	}
	p, from := decideSync(w, s, path, sizeIs)
	if p.op != syncWrite {
		return p, buf, lines
	}
	start := len(buf)
	if p.full {
		buf = storage.EncodeFrame(buf, append(sessionlog.HeaderLine(s.Header), '\n'))
	}
	// The lines of every missing command, coalesced as syncPending does.
	lines, err = st.appendLines(lines[:0], id, s.Record.Incarnation, from, s.Record.Frames)
	if err == nil {
		buf = storage.EncodeLines(buf, lines, storage.MaxFramePlain)
	}
	if cap(lines) > maxScratch {
		lines = nil // one huge session: do not keep its size
	}
	if err != nil {
		return syncPlan{err: err}, buf[:start], lines
	}
	return p, buf, lines
}

// decideSync is what an artifact at watermark w needs in order to hold
// session s (nil: there is none) at path; sized tells whether a file on disk
// has a length (asked only when the watermark could still hold). The
// artifact is kept, removed, or written from frame from on (whole when full:
// the header frame first).
func decideSync(w storage.Watermark, s *fsm.Session, path string, sized func(path string, n int64) bool) (p syncPlan, from uint64) {
	switch {
	case s == nil:
		return syncPlan{op: syncRemove}, 0
	case !s.Visible():
		return syncPlan{op: syncKeep}, 0
	}
	rec := s.Record
	ok := w.HasSum && w.Path == path && sized(path, w.Bytes)
	if ok && w.LastIndex == rec.LastChangeIndex && w.Frames == rec.Frames {
		return syncPlan{op: syncKeep}, 0
	}
	// A watermark older than the session's incarnation belongs to a deleted
	// predecessor under the same path: start over. So does one without a
	// checksum (converted from 2f2e872), and a file torn or grown behind the
	// watermark's back.
	p = syncPlan{op: syncWrite, path: path, last: rec.LastChangeIndex, frames: rec.Frames,
		full: !(ok && w.Frames <= rec.Frames && w.Bytes > 0 && w.LastIndex >= rec.Incarnation)}
	if p.full {
		return p, 1
	}
	return p, w.Frames + 1
}

// write carries out a plan made from watermark w and returns the new watermark.
func (a *Writer) write(w storage.Watermark, p syncPlan) (storage.Watermark, error) {
	switch {
	case p.err != nil:
		return w, p.err
	case p.op == syncKeep:
		return w, nil
	case p.op == syncRemove:
		if err := a.removeArtifact(w.Path); err != nil {
			return w, err
		}
		return storage.Watermark{}, nil
	}
	if len(p.data) == 0 {
		// No new line (commands without events): the file is current as it is.
		return storage.Watermark{LastIndex: p.last, Bytes: w.Bytes, Frames: p.frames, Path: p.path, Sum: w.Sum, HasSum: true}, nil
	}
	size, sum := int64(len(p.data)), storage.ArtifactSum(0, p.data)
	if p.full {
		if err := a.files.Write(p.path, p.data); err != nil {
			return w, err
		}
	} else {
		var err error
		if size, err = a.files.Append(p.path, w.Bytes, p.data); err != nil {
			return w, err
		}
		sum = storage.ArtifactSum(w.Sum, p.data)
	}
	a.metrics.ArtifactBytes.Add(float64(len(p.data)))
	return storage.Watermark{LastIndex: p.last, Bytes: size, Frames: p.frames, Path: p.path, Sum: sum, HasSum: true}, nil
}

// removeAll removes every artifact and watermark (Off), retrying
// each second until it succeeds or ctx ends; meanwhile Healthy reports the
// failure.
func (a *Writer) removeAll(ctx context.Context) {
	for {
		err := a.local.ClearWatermarks()
		if err == nil {
			_, statErr := os.Stat(a.root)
			if err = os.RemoveAll(a.root); err == nil && statErr == nil {
				a.logger.Info("artifacts are off: removed the artifacts an earlier run wrote; raw reads and downloads render from the state database", "dir", a.root)
			}
		}
		a.lastErr.Store(&err)
		if err == nil {
			a.metrics.ArtifactStored.Set(0)
			return
		}
		a.metrics.ArtifactErrors.Inc()
		a.logger.Error("removing the artifacts of an earlier run failed; will retry", "dir", a.root, "err", err)
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
}

// removeArtifact removes a session's artifact file and its directory when
// that is left empty (a missing file is fine). A path outside the artifact
// root is refused: nothing outside the node's own directory is ever removed.
func (a *Writer) removeArtifact(path string) error {
	if path == "" {
		return nil
	}
	if _, err := storage.ArtifactRel(a.root, path); err != nil {
		return err
	}
	return a.files.Remove(path)
}

func sizeIs(path string, n int64) bool {
	st, err := os.Stat(path)
	return err == nil && st.Size() == n
}

// EncodeHeaderFrame is the first frame of every artifact (frame 0): exactly
// the header line.
func EncodeHeaderFrame(h sessionstore.Header) []byte {
	return storage.EncodeFrame(nil, append(sessionlog.HeaderLine(h), '\n'))
}
