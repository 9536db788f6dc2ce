package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
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
		done <- n.srv.node.Watch(ctx, id, 0, time.Hour, func(ev sessionstore.WatchEvent) error {
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
		_ = n.srv.node.Watch(ctx, "wake-a", 0, time.Hour, func(ev sessionstore.WatchEvent) error {
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
			errc <- n.Client.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(fmt.Sprintf("idle-%04d", i), "")})
		}()
	}
	for range watchers {
		if err := <-errc; err != nil {
			b.Fatal(err)
		}
	}
	for i := range watchers {
		go func() {
			_ = n.srv.node.Watch(ctx, fmt.Sprintf("idle-%04d", i), 0, time.Hour, func(sessionstore.WatchEvent) error { return nil })
		}()
	}
	if err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("writer", "")}); err != nil {
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
