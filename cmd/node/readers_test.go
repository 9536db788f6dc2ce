package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/rpc"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/internal/benchload"
	"github.com/sessionstore/sessionstore/sessionlog"
)

// TestWatch_EndsWhenIncarnationEnds: a watcher that is behind while its
// session is deleted and re-created must not continue with the new log from
// its old cursor (the new log's seqs restart at 0); it ends NOT_FOUND saying
// what happened. The watcher is held inside its first send, so it reads the
// session again only after the delete, re-create and appends.
func TestWatch_EndsWhenIncarnationEnds(t *testing.T) {
	n := ctSharedNode(t)
	const id = "watch-incarnation"
	ctCreate(t, n, ctMeta(id, ""))
	ctAppend(t, n, id, ctOneTurnLog()[:3]...)

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	release := make(chan struct{})
	type sent struct{ seqs []int64 }
	got := make(chan sent, 16)
	done := make(chan error, 1)
	go func() {
		done <- n.srv.node.Sessions().Watch(ctx, id, 0, time.Hour, func(ev sessionstore.WatchEvent) error {
			var s sent
			for _, e := range ev.Events {
				s.seqs = append(s.seqs, ctSeqs(t, []string{string(e)})...)
			}
			got <- s
			if len(s.seqs) > 0 && s.seqs[0] == 0 {
				<-release // behind: the session changes under us now
			}
			return nil
		})
	}()
	first := <-got
	if len(first.seqs) != 3 {
		t.Fatalf("first watch message has seqs %v, want 0..2", first.seqs)
	}
	if _, err := n.Client.Delete(n.ctx(), &sessionpb.DeleteRequest{SessionId: id}); err != nil {
		t.Fatalf("Delete: %v", err)
	}
	ctCreate(t, n, ctMeta(id, ""))
	ctAppend(t, n, id, ctOneTurnLog()...) // new incarnation, seqs 0..5
	close(release)

	select {
	case err := <-done:
		var de *sessionstore.Error
		if !errors.As(err, &de) || de.Reason != sessionstore.ReasonNotFound || !strings.Contains(de.Message, "re-created") {
			t.Fatalf("watch ended with %v, want NOT_FOUND saying the session was deleted and re-created", err)
		}
	case s := <-got:
		t.Fatalf("watch went on into the new incarnation: sent seqs %v", s.seqs)
	case <-ctx.Done():
		t.Fatal("watch did not end")
	}
}

// TestWatch_WokenOnlyByItsSession: a commit wakes only the watchers of the
// sessions it touched. A watcher on A sees one wake-up for one append to A,
// none for twenty appends to B (counted by sessionstore_watch_wakeups_total,
// not by timing).
func TestWatch_WokenOnlyByItsSession(t *testing.T) {
	n := ctNode(t)
	ctCreate(t, n, ctMeta("wake-a", ""))
	ctCreate(t, n, ctMeta("wake-b", ""))
	ctAppend(t, n, "wake-a", clEvent(0, "a"))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	got := make(chan []byte, 16)
	go func() {
		_ = n.srv.node.Sessions().Watch(ctx, "wake-a", 0, time.Hour, func(ev sessionstore.WatchEvent) error {
			for _, e := range ev.Events {
				got <- e
			}
			return nil
		})
	}()
	recv := func() {
		t.Helper()
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("watch sent nothing")
		}
	}
	recv() // past its first read
	before := dfMetric(t, n.srv.httpAddr, "sessionstore_watch_wakeups_total")
	for i := range int64(20) {
		ctAppend(t, n, "wake-b", clEvent(i, "b"))
	}
	ctAppend(t, n, "wake-a", clEvent(1, "a"))
	recv()
	after := dfMetric(t, n.srv.httpAddr, "sessionstore_watch_wakeups_total")
	if d := after - before; d != 1 {
		t.Fatalf("watcher of wake-a woke %v times for 20 appends to wake-b and 1 to wake-a, want 1", d)
	}
}

// BenchmarkAppend_IdleWatchers measures one writer's sequential appends with
// 1,000 idle Watch streams on other sessions (each commit used to wake them
// all): go test ./cmd/node -run '^$' -bench Append_IdleWatchers -benchtime 2000x
func BenchmarkAppend_IdleWatchers(b *testing.B) {
	n := startTestNode(b, "")
	const watchers = 1000
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	sem := make(chan struct{}, 32)
	errc := make(chan error, watchers)
	for i := range watchers {
		sem <- struct{}{}
		go func() {
			defer func() { <-sem }()
			_, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(fmt.Sprintf("idle-%04d", i), "")})
			errc <- err
		}()
	}
	for range watchers {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	for i := range watchers {
		go func() {
			_ = n.srv.node.Sessions().Watch(ctx, fmt.Sprintf("idle-%04d", i), 0, time.Hour, func(sessionstore.WatchEvent) error { return nil })
		}()
	}
	if _, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("writer", "")}); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := range int64(b.N) {
		if _, err := n.Client.Append(ctx, &sessionpb.AppendRequest{SessionId: "writer", Events: []string{clEvent(i, "w")}}); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "appends/s")
}

// rdFill appends events of the given sizes to a new session id and returns
// the artifact text they make (header line included).
func rdFill(t *testing.T, n *testNode, id string, sizes ...int) []byte {
	t.Helper()
	ctCreate(t, n, ctMeta(id, ""))
	pad := benchload.Padding(slices.Max(sizes))
	var evs []string
	for i, sz := range sizes {
		evs = append(evs, benchload.Event(int64(i), int64(1000+i), sz, pad))
	}
	for len(evs) > 0 {
		k, total := 0, 0
		for k < len(evs) && total+len(evs[k]) <= 3<<20 {
			total += len(evs[k])
			k++
		}
		if k == 0 {
			k = 1
		}
		ctAppend(t, n, id, evs[:k]...)
		evs = evs[k:]
	}
	_, _, text, err := n.srv.node.Sessions().RawText(n.ctx(), id, sessionstore.Stale)
	if err != nil {
		t.Fatal(err)
	}
	return text
}

// TestReadRaw_StreamsFromStorageInChunks: the artifact text read in chunks
// from storage (events larger than a chunk, lines split across chunks) is
// byte for byte the text of the stored events, over gRPC and over HTTP,
// whole and in ranges; ReadFrom's chunked passes return the stored events.
func TestReadRaw_StreamsFromStorageInChunks(t *testing.T) {
	n := ctSharedNode(t)
	const id = "raw-chunks"
	sizes := []int{200, 300 << 10, 1 << 20, 5, 2<<20 - 100, 256<<10 - 1, 256 << 10, 700, 1<<20 + 3}
	text := rdFill(t, n, id, sizes...)
	pad := benchload.Padding(slices.Max(sizes))
	var want bytes.Buffer
	want.Write(sessionlog.HeaderLine(fsmHeader(t, n, id)))
	want.WriteByte('\n')
	for i, sz := range sizes {
		want.WriteString(benchload.Event(int64(i), int64(1000+i), sz, pad) + "\n")
	}
	if !bytes.Equal(text, want.Bytes()) {
		t.Fatalf("RawText: %d bytes, want %d (the stored events)", len(text), want.Len())
	}
	if got := ctReadRaw(t, n, id).GetContent(); !bytes.Equal(got, text) {
		t.Fatalf("ReadRaw: %d bytes differ from the stored text (%d bytes)", len(got), len(text))
	}
	for _, from := range []int64{0, 3, 8, 9, 100} {
		got := ctReadFrom(t, n, id, from).GetEvents()
		var wantEvs []string
		for i := from; i < int64(len(sizes)); i++ {
			wantEvs = append(wantEvs, benchload.Event(i, 1000+i, sizes[i], pad))
		}
		if !slices.Equal(got, wantEvs) {
			t.Fatalf("ReadFrom(%d): %d events, want %d", from, len(got), len(wantEvs))
		}
	}
	u := "http://" + n.srv.httpAddr + "/v1/sessions/" + id + "/session.jsonl"
	for _, tc := range []struct{ from, to int }{{0, len(text) - 1}, {10, 300 << 10}, {256<<10 - 7, 256<<10 + 9}, {len(text) - 5, len(text) - 1}, {1 << 20, 3 << 20}} {
		req, _ := http.NewRequest(http.MethodGet, u, nil)
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-%d", tc.from, tc.to))
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusPartialContent {
			t.Fatalf("GET %s range %d-%d: %d %v", u, tc.from, tc.to, resp.StatusCode, err)
		}
		if !bytes.Equal(body, text[tc.from:tc.to+1]) {
			t.Fatalf("GET %s range %d-%d: %d bytes, not the text's", u, tc.from, tc.to, len(body))
		}
	}
}

// fsmHeader is the stored header of a session.
func fsmHeader(t *testing.T, n *testNode, id string) sessionstore.Header {
	t.Helper()
	h, _, _, _, err := n.srv.node.Sessions().OpenRaw(n.ctx(), id, sessionstore.Stale)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// TestReadRaw_DeletedWhileReadingEnds: a streamed read that spans a delete
// and re-create of its session ends NOT_FOUND; it never goes on with the
// new incarnation's bytes.
func TestReadRaw_DeletedWhileReadingEnds(t *testing.T) {
	n := ctSharedNode(t)
	const id = "raw-deleted"
	sizes := []int{600 << 10, 600 << 10, 600 << 10}
	rdFill(t, n, id, sizes...)
	_, _, r, size, err := n.srv.node.Sessions().OpenRaw(n.ctx(), id, sessionstore.Stale)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(r, make([]byte, 100<<10)); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Delete(n.ctx(), &sessionpb.DeleteRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
	rdFill(t, n, id, sizes...) // the same sizes: a mixed read would look whole
	rest, err := io.ReadAll(r)
	var de *sessionstore.Error
	if !errors.As(err, &de) || de.Reason != sessionstore.ReasonNotFound {
		t.Fatalf("read across delete and re-create: %d more bytes of %d, err %v; want NOT_FOUND", len(rest), size, err)
	}
}

// rdStalledReadRaw opens a ReadRaw stream of id that never reads, on a
// connection of its own whose flow-control windows are 64 KiB (no BDP
// growth), so the node's send blocks once they are full.
func rdStalledReadRaw(t *testing.T, addr, id string) {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithInitialWindowSize(64<<10), grpc.WithInitialConnWindowSize(64<<10))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	if _, err := sessionpb.NewSessionPersistenceClient(conn).ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id}); err != nil {
		t.Fatal(err)
	}
}

// rdStalledHTTP requests a download and never reads the response.
func rdStalledHTTP(t *testing.T, httpAddr, path string) {
	t.Helper()
	c, err := net.Dial("tcp", httpAddr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_ = c.(*net.TCPConn).SetReadBuffer(4 << 10)
	if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path); err != nil {
		t.Fatal(err)
	}
}

// rdWaitMetric polls /metrics until name{labels} equals want (no timing
// assertion: the deadline only bounds a hang).
func rdWaitMetric(t *testing.T, n *testNode, want float64, name string, labels ...string) {
	t.Helper()
	clustertest.Eventually(t, 30*time.Second, func() error {
		if v := dfMetric(t, n.srv.httpAddr, name, labels...); v != want {
			return fmt.Errorf("%s%v is %v, want %v", name, labels, v, want)
		}
		return nil
	})
}

// TestStreams_CappedAndEndedWhenClientStopsReading: read streams count
// against a per-principal (and per-node) cap: one above it is refused with
// RESOURCE_EXHAUSTED / QUOTA_EXCEEDED over gRPC and 429 over HTTP, and
// counted; streams whose clients stop reading are ended after the stream
// write timeout (gRPC) or the HTTP write timeout, which frees their slots.
func TestStreams_CappedAndEndedWhenClientStopsReading(t *testing.T) {
	t.Parallel()
	n := startTestNodeWith(t, "", func(c *serveConfig) {
		c.Streams.Read = rpc.StreamLimit{Node: 10, PerPrincipal: 2}
		c.Streams.WriteTimeout = time.Second // gRPC streams
		c.HTTP.WriteTimeout = time.Second    // downloads, like every HTTP response
	})
	n.waitReady(true)
	const id = "streams-capped"
	sizes := make([]int, 12)
	for i := range sizes {
		sizes[i] = 2<<20 - 1000
	}
	rdFill(t, n, id, sizes...) // 24 MiB: more than loopback socket buffers hold
	open := []string{"sessionstore_streams_open", "kind", "read"}

	rdStalledReadRaw(t, n.srv.grpcAddr, id)
	rdStalledHTTP(t, n.srv.httpAddr, "/v1/sessions/"+id+"/session.jsonl")
	rdWaitMetric(t, n, 2, open[0], open[1:]...)

	// A third stream of the (anonymous) principal is refused, over both.
	s, err := ctRaw(n).ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id})
	if err == nil {
		_, err = s.Recv()
	}
	if code, se := ctStatus(err); code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("third ReadRaw: %v, want RESOURCE_EXHAUSTED / QUOTA_EXCEEDED", err)
	}
	resp, err := http.Get("http://" + n.srv.httpAddr + "/v1/sessions/" + id + "/session.jsonl.zstd")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Fatalf("third download: %d, want 429", resp.StatusCode)
	}
	// A unary view counts too (it holds the view it answers).
	if _, err := ctRaw(n).Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id}); err == nil {
		t.Fatal("unary Inspect above the cap: answered")
	} else if code, se := ctStatus(err); code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("unary Inspect above the cap: %v, want RESOURCE_EXHAUSTED / QUOTA_EXCEEDED", err)
	}
	if v := dfMetric(t, n.srv.httpAddr, "sessionstore_streams_refused_total", "kind", "read", "scope", "principal"); v != 3 {
		t.Fatalf("refusals counted: %v, want 3", v)
	}

	// Neither client reads: both streams are ended and their slots freed.
	rdWaitMetric(t, n, 2, "sessionstore_streams_stalled_total", "kind", "read")
	rdWaitMetric(t, n, 0, open[0], open[1:]...)
	if got := ctReadRaw(t, n, id).GetContent(); int64(len(got)) < 24<<20-12*1000 {
		t.Fatalf("ReadRaw after the stalled streams ended: %d bytes", len(got))
	}
	// The 24 MiB view is above the 16 MiB message limit: a unary view says so
	// (with its size) and points to the stream form.
	for name, call := range map[string]func() error{
		"Inspect": func() error {
			_, err := ctRaw(n).Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
			return err
		},
		"Load": func() error {
			_, err := ctRaw(n).Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
			return err
		},
	} {
		err := call()
		if code, se := ctStatus(err); code != codes.ResourceExhausted || se == nil || se.Reason != sessionstore.ReasonTooLarge ||
			!strings.Contains(se.Message, "above the 16777216-byte message limit; use the stream form") {
			t.Fatalf("unary %s of a 24 MiB view: %v, want TOO_LARGE pointing to the stream form", name, err)
		}
	}
	rdWaitMetric(t, n, 0, open[0], open[1:]...)
}

// rdViewStream assembles a SessionViewPart stream.
func rdViewStream(t *testing.T, s grpc.ServerStreamingClient[sessionpb.SessionViewPart], err error) *sessionpb.SessionView {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	var v *sessionpb.SessionView
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return v
		}
		if err != nil {
			t.Fatal(err)
		}
		if v == nil {
			v = m.GetViewPart()
			continue
		}
		v.Events = append(v.Events, m.GetViewPart().GetEvents()...)
	}
}

// TestViewStreams_ReadFromStorageMatchUnary: the stream views, whose events
// are read again from storage in chunks after the whole log was validated,
// equal the unary views: an open turn's closers (Inspect), the committed
// repair (Load), the lease and no closers (Prepare), across chunk borders.
func TestViewStreams_ReadFromStorageMatchUnary(t *testing.T) {
	n := ctSharedNode(t)
	const id = "view-streams"
	ctCreate(t, n, ctMeta(id, ""))
	pad := benchload.Padding(700 << 10)
	evs := []string{ctEv("turn/start", 0, 1, `{"turn":1}`), ctEv("step/start", 1, 2, `{"turn":1,"step":1}`)}
	for seq := int64(2); seq < 8; seq++ {
		evs = append(evs, benchload.Event(seq, seq+1, int(100<<10*seq), pad))
	}
	for _, e := range evs {
		ctAppend(t, n, id, e)
	}
	rpc := ctRaw(n)
	same := func(what string, got, want *sessionpb.SessionView) {
		t.Helper()
		if got.GetRevision() != want.GetRevision() || got.GetNextSeq() != want.GetNextSeq() || got.GetHeader().GetId() != id {
			t.Fatalf("%s: revision %q next %d, want %q %d", what, got.GetRevision(), got.GetNextSeq(), want.GetRevision(), want.GetNextSeq())
		}
		if !slices.Equal(got.GetEvents(), want.GetEvents()) {
			t.Fatalf("%s: %d events, want %d (or different bytes)", what, len(got.GetEvents()), len(want.GetEvents()))
		}
	}
	insp := ctInspect(t, n, id)
	if len(insp.GetEvents()) != len(evs)+2 {
		t.Fatalf("Inspect: %d events, want %d with the step/end and turn/end closers", len(insp.GetEvents()), len(evs)+2)
	}
	s, err := rpc.InspectStream(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
	same("InspectStream", rdViewStream(t, s, err), insp)

	ls, err := rpc.LoadStream(n.ctx(), &sessionpb.LoadRequest{SessionId: id, RequestId: "load-1"})
	load := rdViewStream(t, ls, err)
	if !load.GetRepaired() {
		t.Fatal("LoadStream did not report the repair it committed")
	}
	same("LoadStream", load, ctLoad(t, n, id))

	ps, err := rpc.PrepareStream(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "o", TtlMs: 60000, RequestId: "prep-1"})
	prep := rdViewStream(t, ps, err)
	after := ctInspect(t, n, id)
	same("PrepareStream", prep, after)
	if len(prep.GetEvents()) != len(evs)+2 {
		t.Fatalf("PrepareStream: %d events, want the %d of the repaired log", len(prep.GetEvents()), len(evs)+2)
	}
}
