package main

// A flood of good and bad requests against one node process (issue 7): many
// concurrent clients, each on its own connection and without client retries,
// send valid appends to their own sessions mixed with every kind of request
// the node must refuse (oversized events, batches and messages, malformed
// events, wrong seqs, bad and unknown session ids). Every bad request must be
// refused with the code and ErrorInfo reason of docs/api.md, every valid one must
// succeed, and afterwards each session holds exactly its valid events, in
// order, no other session was materialised, and a session written
// beforehand with more events than one message holds is still read whole by
// the stream form. The node's peak RSS is logged and bounded (no unbounded
// growth). The request kinds are a table (flKinds), authentication and
// quota refusals among them (the node requires tokens). Every name starts with "fl"; the process handling is
// crash_helpers_test.go's crNode.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

const (
	flWorkers  = 48
	flDuration = 20 * time.Second
	// The node's limits (small, to keep the flood's memory modest).
	flMaxEvent   = 64 << 10
	flMaxBatch   = 256 << 10
	flMaxEvents  = 64
	flMaxMessage = 1 << 20
	// flCallTimeout bounds one call; flResolveTimeout the re-sending of a
	// valid append after transient failures.
	flCallTimeout    = 10 * time.Second
	flResolveTimeout = 30 * time.Second
	// flMaxHWM is the bound on the node's peak RSS: generous (a few hundred
	// MiB are expected), so only unbounded growth fails.
	flMaxHWM = 1536 << 20
	// flSessionBytes is where a worker moves on to a new session, so that
	// every flooded session stays below the message limit; flBigBytes is
	// the size of the one session above it.
	flSessionBytes = 512 << 10
	flBigBytes     = 3 << 19
	flTime0        = int64(1755600000000)
)

// The node runs with a token file: the workers' principal, one confined to
// another prefix, and one allowed a single session.
const (
	flToken       = "flood-token-00000000000000000"
	flOtherToken  = "other-token-00000000000000000"
	flCappedToken = "capped-token-0000000000000000"
	flTokens      = flToken + " flood read,write,admin *\n" +
		flOtherToken + " other read,write other/\n" +
		flCappedToken + " capped read,write fl-capped- max_sessions=1\n"
)

// flSession is one session of a worker and its acknowledged events.
type flSession struct {
	id    string
	acked []string
	bytes int
}

// flWorker is one client: its own connection, its own sessions (one at a
// time, the next once flSessionBytes are stored), and their events
// acknowledged so far.
type flWorker struct {
	id       int
	rng      *rand.Rand
	c        sessionpb.SessionPersistenceClient
	sessions []*flSession
	cur      *flSession
	// alt are clients with other credentials (shared by all workers): "none",
	// "wrong", "other" (another prefix), "capped" (its quota used up).
	alt map[string]sessionpb.SessionPersistenceClient
	n   int // requests made, for unique texts
	// retries counts transient failures of valid appends re-sent.
	retries int
}

func (w *flWorker) next() int64 { return int64(len(w.cur.acked)) }

// newSession creates the worker's next session and makes it current.
func (w *flWorker) newSession(ctx context.Context) error {
	s := &flSession{id: fmt.Sprintf("fl-session-%02d-%d", w.id, len(w.sessions))}
	cwd := "/w/flood"
	cctx, cancel := context.WithTimeout(ctx, flCallTimeout)
	defer cancel()
	if _, err := w.c.Create(cctx, &sessionpb.CreateRequest{
		Header: &sessionpb.SessionHeader{Id: s.id, CreatedAt: flTime0 - 1, Cwd: &cwd}, RequestId: "create-" + s.id}); err != nil {
		return fmt.Errorf("create %s: %w", s.id, err)
	}
	w.sessions = append(w.sessions, s)
	w.cur = s
	return nil
}

// flEvent is a valid event of w at seq with about pad bytes of padding.
func (w *flWorker) event(seq int64, pad int) string {
	return fmt.Sprintf(`{"type":"x-test/flood","seq":%d,"time":%d,"data":{"w":%d,"n":%d,"pad":"%s"},"ignorable":true}`,
		seq, flTime0+seq, w.id, w.n, strings.Repeat("p", pad))
}

// events are k valid events from seq on, each with pad bytes of padding.
func (w *flWorker) events(seq int64, k, pad int) []string {
	out := make([]string, k)
	for i := range out {
		out[i] = w.event(seq+int64(i), pad)
	}
	return out
}

// flKind is one kind of request of the flood: how often it is sent, what it
// sends, and the answer docs/api.md prescribes.
type flKind struct {
	name   string
	weight int
	// want is the expected code (codes.OK: the request is valid).
	want codes.Code
	// reasons are the accepted ErrorInfo reasons; "" accepts an error
	// without an ErrorInfo (gRPC's own refusals).
	reasons []string
	// send makes one request as w and returns its error. A valid kind
	// resolves transient failures itself and records what was stored.
	send func(ctx context.Context, w *flWorker) error
}

// flAppend sends one append as w.
func flAppend(ctx context.Context, w *flWorker, id string, events []string) error {
	_, err := w.c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: events})
	return err
}

// flKinds is the table of request kinds. To add one (e.g. a bad token →
// UNAUTHENTICATED, or a quota → RESOURCE_EXHAUSTED / QUOTA_EXCEEDED), add an
// entry whose send builds the request (metadata goes on ctx).
func flKinds() []flKind {
	return []flKind{
		{name: "valid append", weight: 40, want: codes.OK, send: flValidAppend},
		{name: "event above --max-event-bytes", weight: 4, want: codes.ResourceExhausted, reasons: []string{"TOO_LARGE"},
			send: func(ctx context.Context, w *flWorker) error {
				evs := []string{w.event(w.next(), flMaxEvent+w.rng.IntN(1024))}
				if w.rng.IntN(2) == 0 { // a valid event first: nothing of the batch may be written
					evs = []string{w.event(w.next(), 10), w.event(w.next()+1, flMaxEvent+1)}
				}
				return flAppend(ctx, w, w.cur.id, evs)
			}},
		{name: "batch above --max-batch-events", weight: 4, want: codes.ResourceExhausted, reasons: []string{"TOO_LARGE"},
			send: func(ctx context.Context, w *flWorker) error {
				return flAppend(ctx, w, w.cur.id, w.events(w.next(), flMaxEvents+1+w.rng.IntN(8), 4))
			}},
		{name: "batch above --max-batch-bytes", weight: 4, want: codes.ResourceExhausted, reasons: []string{"TOO_LARGE"},
			send: func(ctx context.Context, w *flWorker) error {
				// Each event within the event limit, together above the batch limit.
				return flAppend(ctx, w, w.cur.id, w.events(w.next(), 5, flMaxBatch/5+w.rng.IntN(1024)))
			}},
		{name: "message above --max-message-bytes", weight: 2, want: codes.ResourceExhausted, reasons: []string{"", "TOO_LARGE"},
			send: func(ctx context.Context, w *flWorker) error {
				return flAppend(ctx, w, w.cur.id, w.events(w.next(), 20, flMaxMessage/18))
			}},
		{name: "malformed JSON event", weight: 4, want: codes.InvalidArgument, reasons: []string{"NOT_JSON"},
			send: func(ctx context.Context, w *flWorker) error {
				bad := []string{
					`not json`, ``, `{"type":"x-test/flood","seq":` + strconv.FormatInt(w.next(), 10),
					`{"type":"x","seq":1,"time":1,"data":{"a":1,"a":2}}`, "{\"type\":\"x\",\n\"seq\":1}", `[1,2]`,
				}[w.rng.IntN(6)]
				return flAppend(ctx, w, w.cur.id, []string{w.event(w.next(), 10), bad})
			}},
		{name: "invalid event envelope", weight: 4, want: codes.InvalidArgument, reasons: []string{"INVALID_EVENT"},
			send: func(ctx context.Context, w *flWorker) error {
				s := w.next()
				bad := []string{
					fmt.Sprintf(`{"type":"x-test/flood","seq":%d,"time":1,"data":null,"extra":1}`, s),
					fmt.Sprintf(`{"type":"x-test/flood","seq":%d,"time":"now","data":null,"ignorable":true}`, s),
					fmt.Sprintf(`{"type":"plan/mode","seq":%d,"time":1,"data":{"active":"yes"}}`, s),
					fmt.Sprintf(`{"seq":%d,"time":1,"data":null}`, s),
				}[w.rng.IntN(4)]
				return flAppend(ctx, w, w.cur.id, []string{bad})
			}},
		{name: "wrong seq", weight: 4, want: codes.FailedPrecondition, reasons: []string{"SEQ_MISMATCH"},
			send: func(ctx context.Context, w *flWorker) error {
				next := w.next()
				switch {
				case next > 0 && w.rng.IntN(2) == 0: // a stored seq with other bytes
					return flAppend(ctx, w, w.cur.id, []string{w.event(w.rng.Int64N(next), 3)})
				case w.rng.IntN(2) == 0: // a gap inside the batch
					return flAppend(ctx, w, w.cur.id, []string{w.event(next, 3), w.event(next+2, 3)})
				default: // ahead of the log
					return flAppend(ctx, w, w.cur.id, w.events(next+1+w.rng.Int64N(1<<40), 2, 3))
				}
			}},
		{name: "bad session id", weight: 3, want: codes.InvalidArgument, reasons: []string{"INVALID_SESSION_ID"},
			send: func(ctx context.Context, w *flWorker) error {
				id := []string{"", strings.Repeat("x", 256), strings.Repeat("é", 60)}[w.rng.IntN(3)]
				return flAppend(ctx, w, id, []string{w.event(0, 3)})
			}},
		{name: "unknown session", weight: 3, want: codes.NotFound, reasons: []string{"NOT_FOUND"},
			send: func(ctx context.Context, w *flWorker) error {
				return flAppend(ctx, w, fmt.Sprintf("fl-unknown-%d-%d", w.id, w.n), []string{w.event(0, 3)})
			}},
		{name: "no token", weight: 2, want: codes.Unauthenticated, reasons: []string{"UNAUTHENTICATED"},
			send: func(ctx context.Context, w *flWorker) error {
				_, err := w.alt["none"].Append(ctx, &sessionpb.AppendRequest{SessionId: w.cur.id, Events: []string{w.event(w.next(), 3)}})
				return err
			}},
		{name: "wrong token", weight: 2, want: codes.Unauthenticated, reasons: []string{"UNAUTHENTICATED"},
			send: func(ctx context.Context, w *flWorker) error {
				_, err := w.alt["wrong"].Append(ctx, &sessionpb.AppendRequest{SessionId: w.cur.id, Events: []string{w.event(w.next(), 3)}})
				return err
			}},
		{name: "token for another prefix", weight: 2, want: codes.PermissionDenied, reasons: []string{"PERMISSION_DENIED"},
			send: func(ctx context.Context, w *flWorker) error {
				_, err := w.alt["other"].Append(ctx, &sessionpb.AppendRequest{SessionId: w.cur.id, Events: []string{w.event(w.next(), 3)}})
				return err
			}},
		{name: "create above the session quota", weight: 2, want: codes.ResourceExhausted, reasons: []string{"QUOTA_EXCEEDED"},
			send: func(ctx context.Context, w *flWorker) error {
				_, err := w.alt["capped"].Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{
					Id: fmt.Sprintf("fl-capped-%d-%d", w.id, w.n), CreatedAt: flTime0}})
				return err
			}},
	}
}

// flValidAppend appends 1-8 valid events of up to 4 KiB to w's session and
// resolves transient failures by re-sending the same bytes (appends are
// idempotent by content): the answer must be success, next_seq just past the
// batch.
func flValidAppend(ctx context.Context, w *flWorker) error {
	if w.cur.bytes >= flSessionBytes {
		if err := w.newSession(ctx); err != nil {
			return err
		}
	}
	next := w.next()
	k := 1 + w.rng.IntN(8)
	evs := make([]string, k)
	for i := range evs {
		evs[i] = w.event(next+int64(i), w.rng.IntN(4096))
	}
	req := &sessionpb.AppendRequest{SessionId: w.cur.id, Events: evs}
	deadline := time.Now().Add(flResolveTimeout)
	for {
		cctx, cancel := context.WithTimeout(ctx, flCallTimeout)
		resp, err := w.c.Append(cctx, req)
		cancel()
		if err == nil {
			if got, want := resp.GetNextSeq(), next+int64(k); got != want {
				return fmt.Errorf("append of seqs %d..%d answered next_seq %d, want %d", next, next+int64(k)-1, got, want)
			}
			w.cur.acked = append(w.cur.acked, evs...)
			for _, e := range evs {
				w.cur.bytes += len(e)
			}
			return nil
		}
		if c := status.Code(err); (c != codes.Unavailable && c != codes.DeadlineExceeded) || time.Now().After(deadline) {
			return err
		}
		w.retries++
		time.Sleep(50 * time.Millisecond)
	}
}

// flCheck compares a call's error with the kind's expectation ("" if it
// matches).
func flCheck(k *flKind, err error) string {
	if k.want == codes.OK {
		if err != nil {
			return fmt.Sprintf("valid request failed: %v", err)
		}
		return ""
	}
	if err == nil {
		return "accepted, want " + k.want.String()
	}
	st, ok := status.FromError(err)
	if !ok {
		return fmt.Sprintf("not a gRPC status: %v", err)
	}
	reason := ""
	for _, d := range st.Details() {
		if ei, ok := d.(*errdetails.ErrorInfo); ok {
			if ei.GetDomain() != "sessionstore" {
				return fmt.Sprintf("ErrorInfo domain %q: %v", ei.GetDomain(), err)
			}
			reason = ei.GetReason()
		}
	}
	if st.Code() != k.want || !slices.Contains(k.reasons, reason) {
		return fmt.Sprintf("code %v reason %q, want %v with reason in %q: %.300s", st.Code(), reason, k.want, k.reasons, st.Message())
	}
	return ""
}

// flStats counts one kind's requests.
type flStats struct {
	sent, ok, refused, wrong atomic.Int64
}

// flDial is a raw client on its own connection: no client retries, sends up
// to 4 MiB (above the node's limit, so the node is the one refusing), with
// token ("" for none).
func flDial(t *testing.T, addr, token string) (*grpc.ClientConn, sessionpb.SessionPersistenceClient) {
	t.Helper()
	opts := []grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallSendMsgSize(4<<20), grpc.MaxCallRecvMsgSize(16<<20))}
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(client.BearerToken(token)))
	}
	conn, err := grpc.NewClient(addr, opts...)
	if err != nil {
		t.Fatalf("dial %s: %v", addr, err)
	}
	t.Cleanup(func() { conn.Close() })
	return conn, sessionpb.NewSessionPersistenceClient(conn)
}

// flReadAll reads a session's stored events with ReadFrom (every chunk).
func flReadAll(c sessionpb.SessionPersistenceClient, id string) ([]string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	s, err := c.ReadFrom(ctx, &sessionpb.ReadFromRequest{SessionId: id})
	if err != nil {
		return nil, err
	}
	var out []string
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		out = append(out, m.GetEvents()...)
	}
}

// TestFlood runs flWorkers clients against one node for flDuration.
func TestFlood(t *testing.T) {
	if testing.Short() {
		t.Skip("flood test: builds and runs a node process and loads it for 20 s")
	}
	bin := crBinary(t)
	tokens := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tokens, []byte(flTokens), 0o600); err != nil {
		t.Fatal(err)
	}
	nd := crNewNode(t, bin, t.TempDir(), "--auth-token-file", tokens,
		"--max-event-bytes", strconv.Itoa(flMaxEvent), "--max-batch-bytes", strconv.Itoa(flMaxBatch),
		"--max-batch-events", strconv.Itoa(flMaxEvents), "--max-message-bytes", strconv.Itoa(flMaxMessage))
	nd.ID = "flood-node"
	nd.Start()
	nd.WaitReady(crDial(t, nd.GRPCAddr, grpc.WithPerRPCCredentials(client.BearerToken(flToken))))
	pid := nd.cur.cmd.Process.Pid

	kinds := flKinds()
	stats := make([]flStats, len(kinds))
	total := 0
	for _, k := range kinds {
		total += k.weight
	}
	workers := make([]*flWorker, flWorkers)
	seed := crSeed(t)
	alt := map[string]sessionpb.SessionPersistenceClient{}
	for name, token := range map[string]string{"none": "", "wrong": "wrong-token-00000000000000000", "other": flOtherToken, "capped": flCappedToken} {
		_, alt[name] = flDial(t, nd.GRPCAddr, token)
	}
	if _, err := alt["capped"].Create(crCtx(t, 30*time.Second), &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{
		Id: "fl-capped-first", CreatedAt: flTime0}}); err != nil {
		t.Fatalf("the capped principal's one session: %v", err)
	}
	for i := range workers {
		_, c := flDial(t, nd.GRPCAddr, flToken)
		w := &flWorker{id: i, rng: rand.New(rand.NewPCG(seed, uint64(i))), c: c, alt: alt}
		if err := w.newSession(context.Background()); err != nil {
			t.Fatal(err)
		}
		workers[i] = w
	}
	// One session above the message limit, written before the flood: the
	// stream forms must still read it.
	big := &flWorker{id: flWorkers, rng: rand.New(rand.NewPCG(seed, flWorkers)), c: workers[0].c}
	if err := big.newSession(context.Background()); err != nil {
		t.Fatal(err)
	}
	for big.cur.bytes < flBigBytes {
		// Small events: 1 MiB of them plus their framing (2 bytes each) is
		// above 1 MiB.
		evs := big.events(big.next(), flMaxEvents, 100)
		if err := flAppend(crCtx(t, 30*time.Second), big, big.cur.id, evs); err != nil {
			t.Fatalf("fill %s: %v", big.cur.id, err)
		}
		for _, e := range evs {
			big.cur.acked = append(big.cur.acked, e)
			big.cur.bytes += len(e)
		}
	}
	hwm0, rss0 := crProcMem(t, pid, "VmHWM"), crProcMem(t, pid, "VmRSS")
	t.Logf("node pid %d ready, %d sessions created, %s holds %d bytes of events: VmHWM %.1f MiB, VmRSS %.1f MiB", pid, len(workers), big.cur.id, big.cur.bytes, float64(hwm0)/(1<<20), float64(rss0)/(1<<20))

	// The flood. A worker stops at its first valid append that fails (its
	// session's expected content is then unknown).
	var (
		mu      sync.Mutex
		wrongs  []string
		nWrongs int
	)
	report := func(s string) {
		mu.Lock()
		defer mu.Unlock()
		nWrongs++
		if len(wrongs) < 30 {
			wrongs = append(wrongs, s)
		}
	}
	stopAt := time.Now().Add(flDuration)
	var wg sync.WaitGroup
	for _, w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stopAt) {
				w.n++
				r := w.rng.IntN(total)
				ki := 0
				for r >= kinds[ki].weight {
					r -= kinds[ki].weight
					ki++
				}
				k := &kinds[ki]
				stats[ki].sent.Add(1)
				ctx, cancel := context.WithTimeout(context.Background(), flResolveTimeout+flCallTimeout)
				err := k.send(ctx, w)
				cancel()
				switch bad := flCheck(k, err); {
				case bad != "":
					stats[ki].wrong.Add(1)
					report(fmt.Sprintf("worker %d, request %d, %s: %s", w.id, w.n, k.name, bad))
					if k.want == codes.OK {
						return
					}
				case err == nil:
					stats[ki].ok.Add(1)
				default:
					stats[ki].refused.Add(1)
				}
			}
		}()
	}
	wg.Wait()
	hwm1, rss1 := crProcMem(t, pid, "VmHWM"), crProcMem(t, pid, "VmRSS")
	if nd.Exited() {
		t.Fatalf("the node exited during the flood")
	}

	var sent, retries int64
	var lines []string
	for i, k := range kinds {
		s := &stats[i]
		sent += s.sent.Load()
		want := "OK"
		if k.want != codes.OK {
			var rs []string
			for _, r := range k.reasons {
				if r == "" {
					r = "(no ErrorInfo)"
				}
				rs = append(rs, r)
			}
			want = k.want.String() + " " + strings.Join(rs, "|")
		}
		lines = append(lines, fmt.Sprintf("  %-36s sent %6d  succeeded %6d  refused as expected %6d  wrong %4d  (want %s)",
			k.name, s.sent.Load(), s.ok.Load(), s.refused.Load(), s.wrong.Load(), want))
	}
	events := 0
	nSessions := 0
	for _, w := range workers {
		retries += int64(w.retries)
		nSessions += len(w.sessions)
		for _, s := range w.sessions {
			events += len(s.acked)
		}
	}
	t.Logf("%d requests from %d clients in %v (%.0f/s); %d valid events stored in %d sessions; %d transient failures of valid appends re-sent:\n%s",
		sent, len(workers), flDuration, float64(sent)/flDuration.Seconds(), events, nSessions, retries, strings.Join(lines, "\n"))
	t.Logf("node peak RSS (VmHWM) %.1f MiB before the flood, %.1f MiB after (VmRSS %.1f → %.1f MiB); bound %.0f MiB",
		float64(hwm0)/(1<<20), float64(hwm1)/(1<<20), float64(rss0)/(1<<20), float64(rss1)/(1<<20), float64(flMaxHWM)/(1<<20))
	for _, s := range wrongs {
		t.Errorf("%s", s)
	}
	if nWrongs > len(wrongs) {
		t.Errorf("… and %d more wrong answers", nWrongs-len(wrongs))
	}
	if hwm1 > flMaxHWM {
		t.Errorf("node peak RSS %.1f MiB is above %.0f MiB", float64(hwm1)/(1<<20), float64(flMaxHWM)/(1<<20))
	}
	for i, k := range kinds {
		if stats[i].sent.Load() == 0 {
			t.Errorf("no request of kind %q was sent", k.name)
		}
	}

	// Every session holds exactly its valid events, in order; nothing of the
	// refused requests was written, and no other session was materialised.
	_, c := flDial(t, nd.GRPCAddr, flToken)
	var want []string
	for _, w := range workers {
		for _, s := range w.sessions {
			if len(s.acked) > 0 {
				want = append(want, s.id)
			}
			got, err := flReadAll(c, s.id)
			if err != nil {
				t.Errorf("ReadFrom(%s): %v", s.id, err)
				continue
			}
			if i := crFirstDiff(got, s.acked); i >= 0 || len(got) != len(s.acked) {
				t.Errorf("session %s: %d events stored, %d acknowledged; first difference at %d:\n stored: %s\n acked:  %s",
					s.id, len(got), len(s.acked), i, crAt(got, max(i, 0)), crAt(s.acked, max(i, 0)))
			}
		}
	}
	want = append(want, big.cur.id)
	t.Run("stream above the message limit", func(t *testing.T) {
		got, err := flReadAll(c, big.cur.id)
		if err != nil {
			t.Fatalf("ReadFrom of %s, %d bytes of events, above --max-message-bytes %d: %v",
				big.cur.id, big.cur.bytes, flMaxMessage, err)
		}
		if i := crFirstDiff(got, big.cur.acked); i >= 0 || len(got) != len(big.cur.acked) {
			t.Errorf("session %s: %d events stored, %d acknowledged; first difference at %d", big.cur.id, len(got), len(big.cur.acked), i)
		}
	})
	var listed []string
	for token := ""; ; {
		resp, err := c.List(crCtx(t, 30*time.Second), &sessionpb.ListRequest{PageSize: 1000, PageToken: token})
		if err != nil {
			t.Fatalf("List: %v", err)
		}
		for _, h := range resp.GetHeaders() {
			listed = append(listed, h.GetId())
		}
		if token = resp.GetNextPageToken(); token == "" {
			break
		}
	}
	slices.Sort(listed)
	slices.Sort(want)
	if !slices.Equal(listed, want) {
		t.Errorf("List has %d sessions, want the %d flooded ones with events: %.20q", len(listed), len(want), listed)
	}
	if _, err := c.Inspect(crCtx(t, 30*time.Second), &sessionpb.InspectRequest{SessionId: "fl-unknown-0-1"}); status.Code(err) != codes.NotFound {
		t.Errorf("Inspect of a session only ever appended to while unknown: %v, want NOT_FOUND", err)
	}
}
