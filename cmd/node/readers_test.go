package main

import (
	"context"
	"errors"
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
