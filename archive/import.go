package archive

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// Status is the outcome of importing one session.
type Status string

const (
	// StatusImported: the session did not exist; it was created and every
	// event appended.
	StatusImported Status = "imported"
	// StatusCompleted: a prefix of the session was already there (an
	// interrupted import); the rest was appended.
	StatusCompleted Status = "completed"
	// StatusPresent: the session was already there, identical.
	StatusPresent Status = "present"
	// StatusConflict: the session exists with a different header or
	// different events, or a longer log, or changed while it was being
	// imported; it was left untouched.
	StatusConflict Status = "conflict"
	// StatusUnreadable: the reference could not load the source session
	// (its reason is the reader's).
	StatusUnreadable Status = "unreadable"
	// StatusInvalid: the header or an event fails the API's own checks;
	// nothing was written for the session.
	StatusInvalid Status = "invalid"
	// StatusRefused: a read of the session would refuse it (an unknown event
	// type, another format version, a malformed message...), so the store's
	// strict validation refuses it and nothing was written;
	// ImportOptions.KeepUnreadable stores it anyway.
	StatusRefused Status = "refused"
	// StatusEmpty: the session has no events. The store lists a session
	// only after its first append, so nothing was written.
	StatusEmpty Status = "empty"
	// StatusValid: --dry-run; the session is importable.
	StatusValid Status = "valid"
	// StatusFailed: an API call failed (the session may be partly written:
	// re-running the import completes it).
	StatusFailed Status = "failed"
)

// Statuses lists every status in the order a summary shows them.
var Statuses = []Status{StatusImported, StatusCompleted, StatusPresent, StatusValid, StatusEmpty,
	StatusConflict, StatusUnreadable, StatusInvalid, StatusRefused, StatusFailed}

// OK reports whether the status leaves the session fully in the store (or,
// in a dry run, importable).
func (s Status) OK() bool {
	switch s {
	case StatusImported, StatusCompleted, StatusPresent, StatusValid, StatusEmpty:
		return true
	}
	return false
}

// Conflict policies.
const (
	OnConflictSkip = "skip"
	OnConflictFail = "fail"
)

// ErrConflict is returned (wrapped) by Import with OnConflict "fail".
var ErrConflict = errors.New("conflict")

// API limits an import batches by (docs/api.md "Limits").
const (
	DefaultBatchEvents   = 1000
	DefaultBatchBytes    = 4 << 20
	DefaultMaxEventBytes = 2 << 20
)

// ImportOptions shape an import.
type ImportOptions struct {
	// OnConflict is OnConflictSkip (default: report and go on) or
	// OnConflictFail (stop after the first conflict; sessions already being
	// imported by other workers finish).
	OnConflict string
	// DryRun reads and validates every session and writes nothing (the
	// store is not contacted).
	DryRun bool
	// KeepUnreadable imports sessions a read would refuse, with the
	// reference's write rules (VALIDATION_REFERENCE), instead of refusing
	// them (StatusRefused). Such a session stays readable raw only.
	KeepUnreadable bool
	// BatchEvents and BatchBytes bound one Append (defaults: the API's
	// 1,000 events and 4 MiB). MaxEventBytes is the largest event accepted
	// (default: the API's 2 MiB); a larger one makes the session invalid.
	BatchEvents, BatchBytes, MaxEventBytes int
	// Parallel is how many sessions are imported at once (default 4).
	Parallel int
	// Done is called once per session with its outcome (from the worker
	// goroutines, one call at a time).
	Done func(SessionResult)
	// Appended is called after each successful Append with the events and
	// bytes it added (zero for a duplicate), one call at a time.
	Appended func(id string, nextSeq int64, events int, bytes int64)
}

// SessionResult is one session's outcome.
type SessionResult struct {
	ID string
	// Where is the source file (a path, or ARCHIVE:ENTRY).
	Where  string
	Status Status
	// Reason explains every status but imported, present and completed.
	Reason string
	// Events is the number of events the source holds.
	Events int
	// Stored is the number of events that were already in the store.
	Stored int
	// Appended and Bytes are the events and event bytes this run appended.
	Appended int
	Bytes    int64
	// Torn: the source had a torn tail, dropped as the reference drops it.
	Torn bool
	// Notes from the reader (what was dropped or repaired, and why).
	Notes []string
}

// ImportSummary totals an import.
type ImportSummary struct {
	Source        string
	SourceKind    string
	Counts        map[Status]int
	Events        map[Status]int // source events per status
	Appended      int
	Bytes         int64
	Torn          int
	Elapsed       time.Duration
	Problems      []SessionResult // every session whose status is not OK, sorted by Where
	TornSessions  []string        // sessions with a torn tail (Where)
	StoppedEarly  bool            // OnConflict fail stopped the import
	ManifestFound bool
}

// Failures is the number of sessions that could not be imported for a
// reason other than a conflict (unreadable, invalid, refused, failed).
func (s *ImportSummary) Failures() int {
	return s.Counts[StatusUnreadable] + s.Counts[StatusInvalid] + s.Counts[StatusRefused] + s.Counts[StatusFailed]
}

// Import imports every session of src into st.
//
// Per session, in this order, and nothing is written until the first
// check passes:
//
//  1. The source must be loadable (the reader's verdict; else unreadable),
//     its header must pass the API's create checks and fit the API's
//     fields, and every event must pass the API's append checks and size
//     limit (else invalid).
//  2. A read of the session must accept it (sessionlog.ReadCheck, what the
//     store's strict writes decide), else refused, unless KeepUnreadable:
//     then it is written with the reference's rules (VALIDATION_REFERENCE).
//  3. The store's copy is read (ReadRaw). If it exists, its header line must
//     equal the source's (else conflict), its events must be a prefix of the
//     source's, byte for byte (else conflict), and it must not be longer
//     (else conflict). Equal: present, nothing is sent.
//  4. A missing session is created with a request id derived from its id and
//     header, so a re-run reuses it; ALREADY_EXISTS means a registration with
//     another header (conflict), unless the session has meanwhile appeared.
//  5. The missing events are appended in batches, each carrying the
//     revision the previous step saw as expected_revision, so a session
//     changed by anyone else meanwhile becomes a conflict instead of being
//     interleaved (SEQ_MISMATCH, REVISION_MISMATCH and LEASE_FENCED are
//     conflicts). The client's retries resend identical batches, which the
//     store acknowledges as duplicates.
//
// Import returns the summary and, when it stopped early, ctx's error or an
// error wrapping ErrConflict (OnConflict "fail").
func Import(ctx context.Context, st Store, src *Source, opts ImportOptions) (*ImportSummary, error) {
	if opts.OnConflict == "" {
		opts.OnConflict = OnConflictSkip
	}
	if opts.OnConflict != OnConflictSkip && opts.OnConflict != OnConflictFail {
		return nil, fmt.Errorf("on-conflict %q: want %q or %q", opts.OnConflict, OnConflictSkip, OnConflictFail)
	}
	if opts.BatchEvents <= 0 {
		opts.BatchEvents = DefaultBatchEvents
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	if opts.MaxEventBytes <= 0 {
		opts.MaxEventBytes = DefaultMaxEventBytes
	}
	opts.MaxEventBytes = min(opts.MaxEventBytes, opts.BatchBytes)
	if opts.Parallel <= 0 {
		opts.Parallel = 4
	}
	start := time.Now()
	sum := &ImportSummary{Source: src.Path(), SourceKind: src.Kind(), Counts: map[Status]int{}, Events: map[Status]int{},
		ManifestFound: src.Manifest() != nil}

	var (
		mu       sync.Mutex // guards sum and the callbacks
		stop     = make(chan struct{})
		stopOnce sync.Once
		stopErr  error
	)
	record := func(r SessionResult) {
		mu.Lock()
		defer mu.Unlock()
		sum.Counts[r.Status]++
		sum.Events[r.Status] += r.Events
		sum.Appended += r.Appended
		sum.Bytes += r.Bytes
		if r.Torn {
			sum.Torn++
			sum.TornSessions = append(sum.TornSessions, r.Where)
		}
		if !r.Status.OK() {
			sum.Problems = append(sum.Problems, r)
		}
		if opts.Done != nil {
			opts.Done(r)
		}
		if r.Status == StatusConflict && opts.OnConflict == OnConflictFail {
			stopOnce.Do(func() {
				sum.StoppedEarly = true
				stopErr = fmt.Errorf("%w: session %q (%s): %s", ErrConflict, r.ID, r.Where, r.Reason)
				close(stop)
			})
		}
	}
	im := &importer{st: st, opts: opts, appended: func(id string, next int64, n int, b int64) {
		if opts.Appended != nil {
			mu.Lock()
			opts.Appended(id, next, n, b)
			mu.Unlock()
		}
	}}

	items := make(chan Item)
	var wg sync.WaitGroup
	for range opts.Parallel {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for it := range items {
				record(im.one(ctx, it))
			}
		}()
	}
	walkErr := src.Walk(ctx, func(it Item) error {
		select {
		case items <- it:
			return nil
		case <-stop:
			return errStopped
		case <-ctx.Done():
			return ctx.Err()
		}
	})
	close(items)
	wg.Wait()
	sum.Elapsed = time.Since(start)
	slices.SortStableFunc(sum.Problems, func(a, b SessionResult) int { return strings.Compare(a.Where, b.Where) })
	slices.Sort(sum.TornSessions)
	switch {
	case stopErr != nil:
		return sum, stopErr
	case ctx.Err() != nil:
		return sum, ctx.Err()
	case walkErr != nil && !errors.Is(walkErr, errStopped):
		return sum, walkErr
	}
	return sum, nil
}

var errStopped = errors.New("stopped")

type importer struct {
	st       Store
	opts     ImportOptions
	appended func(id string, next int64, n int, bytes int64)
}

// one imports one session.
func (im *importer) one(ctx context.Context, it Item) SessionResult {
	r := SessionResult{ID: it.Header.ID, Where: it.Display, Events: len(it.Events), Torn: it.Torn, Notes: it.Notes}
	if it.Err != nil {
		r.Status, r.Reason, r.Torn = StatusUnreadable, it.Err.Error(), false
		return r
	}
	if err := im.validate(it); err != nil {
		r.Status, r.Reason = StatusInvalid, err.Error()
		return r
	}
	// What a read of the session would say, as the store's strict writes
	// decide it: refused whole here rather than half-written by the store.
	check := sessionlog.NewReadCheck(it.Header.ID, it.Header, "")
	check.Add(it.Events)
	if err := check.Err(); err != nil {
		if !im.opts.KeepUnreadable {
			r.Status, r.Reason = StatusRefused, "a read would refuse it: "+err.Error()+" (--keep-unreadable stores it anyway)"
			return r
		}
		r.Notes = append(r.Notes, "stored although a read refuses it (--keep-unreadable): "+err.Error())
	}
	if len(it.Events) == 0 {
		r.Status, r.Reason = StatusEmpty, "no events: the store lists a session only after its first append, so nothing was written"
		return r
	}
	if im.opts.DryRun {
		r.Status = StatusValid
		return r
	}
	if err := ctx.Err(); err != nil {
		r.Status, r.Reason = StatusFailed, "interrupted: "+err.Error()
		return r
	}
	im.write(ctx, it, &r)
	return r
}

// validate applies the API's create and append checks to the whole session.
func (im *importer) validate(it Item) error {
	h := it.Header
	if err := sessionlog.CheckCreateHeader(h); err != nil {
		return fmt.Errorf("header: %w", err)
	}
	if h.Version < math.MinInt32 || h.Version > math.MaxInt32 {
		return fmt.Errorf("header: version %d does not fit the API's int32 field", h.Version)
	}
	if h.DelegationDepth != nil && (*h.DelegationDepth < math.MinInt32 || *h.DelegationDepth > math.MaxInt32) {
		return fmt.Errorf("header: delegationDepth %d does not fit the API's int32 field", *h.DelegationDepth)
	}
	for i, ev := range it.Events {
		if len(ev) > im.opts.MaxEventBytes {
			return fmt.Errorf("event at seq %d is %d bytes; the limit is %d", i, len(ev), im.opts.MaxEventBytes)
		}
		info, err := sessionlog.CheckEvent(h.ID, ev)
		if err != nil {
			return fmt.Errorf("event at seq %d: %w", i, err)
		}
		if info.Seq != int64(i) {
			return fmt.Errorf("event at position %d has seq %d", i, info.Seq)
		}
	}
	return nil
}

// validation is how the store is asked to check the import's writes.
func (im *importer) validation() sessionpb.Validation {
	if im.opts.KeepUnreadable {
		return sessionpb.Validation_VALIDATION_REFERENCE
	}
	return sessionpb.Validation_VALIDATION_STRICT
}

// createRequestID is the Create's request id: a function of the session id
// and the header line, so a re-run sends the same one.
func createRequestID(h sessionstore.Header) string {
	d := sha256.New()
	d.Write([]byte(h.ID))
	d.Write([]byte{0})
	d.Write(sessionlog.HeaderLine(h))
	return "import-" + hex.EncodeToString(d.Sum(nil)[:16])
}

// stored is what the store holds of a session.
type stored struct {
	exists   bool
	header   []byte   // the header line
	events   [][]byte // the event lines (aliasing the text)
	revision string
}

func (im *importer) probe(ctx context.Context, id string) (stored, error) {
	raw, err := im.st.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if errors.Is(err, sessionstore.ErrNotFound) {
		return stored{}, nil
	}
	if err != nil {
		return stored{}, err
	}
	text := raw.GetContent()
	if len(text) == 0 || text[len(text)-1] != '\n' {
		return stored{}, errors.New("the store's text of the session does not end with a newline")
	}
	lines := bytes.Split(text[:len(text)-1], []byte{'\n'})
	return stored{exists: true, header: lines[0], events: lines[1:], revision: raw.GetRevision()}, nil
}

// compare checks the store's copy against the source: "" when the store
// holds a prefix of the source (or all of it), else the conflict.
func compare(s stored, headerLine []byte, events [][]byte) string {
	if !bytes.Equal(s.header, headerLine) {
		return fmt.Sprintf("the session exists with a different header: stored %s, source %s", s.header, headerLine)
	}
	for i := range min(len(s.events), len(events)) {
		if !bytes.Equal(s.events[i], events[i]) {
			return fmt.Sprintf("the stored event at seq %d differs from the source's", i)
		}
	}
	if len(s.events) > len(events) {
		return fmt.Sprintf("the stored log is longer than the source's (%d events, the source has %d)", len(s.events), len(events))
	}
	return ""
}

func (im *importer) write(ctx context.Context, it Item, r *SessionResult) {
	h := it.Header
	headerLine := sessionlog.HeaderLine(h)
	fail := func(status Status, format string, args ...any) {
		r.Status, r.Reason = status, fmt.Sprintf(format, args...)
		if r.Appended > 0 {
			r.Reason += fmt.Sprintf(" (after this run appended %d events)", r.Appended)
		}
	}
	s, err := im.probe(ctx, h.ID)
	if err != nil {
		fail(StatusFailed, "read the store's copy: %v", err)
		return
	}
	if !s.exists {
		_, err := im.st.Create(ctx, &sessionpb.CreateRequest{Header: sessionpb.HeaderFromDomain(h), RequestId: createRequestID(h), Validation: im.validation()})
		if errors.Is(err, sessionstore.ErrAlreadyExists) {
			// Materialised meanwhile, or registered with another header.
			if s, err = im.probe(ctx, h.ID); err != nil {
				fail(StatusFailed, "read the store's copy: %v", err)
				return
			}
			if !s.exists {
				fail(StatusConflict, "the id is registered (never appended to) with a different header")
				return
			}
		} else if err != nil {
			fail(StatusFailed, "create: %v", err)
			return
		}
	}
	from := 0
	expected := ""
	if s.exists {
		if why := compare(s, headerLine, it.Events); why != "" {
			fail(StatusConflict, "%s", why)
			return
		}
		from, expected = len(s.events), s.revision
		r.Stored = from
		if from == len(it.Events) {
			r.Status = StatusPresent
			return
		}
	}
	for i := from; i < len(it.Events); {
		j, size := i, 0
		for j < len(it.Events) && j-i < im.opts.BatchEvents && size+len(it.Events[j]) <= im.opts.BatchBytes {
			size += len(it.Events[j])
			j++
		}
		batch := make([]string, j-i)
		for k := range batch {
			batch[k] = string(it.Events[i+k])
		}
		resp, err := im.st.Append(ctx, &sessionpb.AppendRequest{SessionId: h.ID, Events: batch, ExpectedRevision: expected, Validation: im.validation()})
		switch {
		case errors.Is(err, sessionstore.ErrSeqMismatch), errors.Is(err, sessionstore.ErrRevisionMismatch):
			fail(StatusConflict, "the session changed while it was being imported (append at seq %d: %v)", i, err)
			return
		case errors.Is(err, sessionstore.ErrLeaseFenced):
			fail(StatusConflict, "the session is owned by a lease holder (append at seq %d: %v)", i, err)
			return
		case err != nil:
			if ctx.Err() != nil {
				fail(StatusFailed, "interrupted at seq %d: %v", i, err)
			} else {
				fail(StatusFailed, "append at seq %d: %v", i, err)
			}
			return
		}
		n, b := 0, int64(0)
		if !resp.GetDuplicate() {
			n, b = j-i, int64(size)
			r.Appended += n
			r.Bytes += b
		}
		expected = resp.GetRevision()
		im.appended(h.ID, resp.GetNextSeq(), n, b)
		i = j
	}
	if from > 0 {
		r.Status = StatusCompleted
	} else {
		r.Status = StatusImported
	}
}
