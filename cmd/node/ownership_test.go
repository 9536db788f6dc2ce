package main

// End-to-end tests of docs/design.md "Ownership: leases, fencing, crash repair"
// and "Retries and outcomes", of the write path's refusals (bad input writes
// nothing), of revisions, List/ListSnapshots, Watch,
// the HTTP port and gRPC reflection/health. Each test boots one real node.

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	reflectionpb "google.golang.org/grpc/reflection/grpc_reflection_v1"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// TestOwOwnership runs every row of the ownership table of docs/design.md.
func TestOwOwnership(t *testing.T) {
	n := startTestNode(t, "")
	const long = 30 * time.Second
	const short = 300 * time.Millisecond

	t.Run("Prepare on a cold session commits closers, bumps the epoch and grants a lease", func(t *testing.T) {
		id := "own-prepare-cold"
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))
		owSession(t, n, id, stored...)
		before := owRevision(t, n, id)
		start := time.Now().UnixMilli()

		v, l := owPrepare(t, n, id, "host-a", long)

		want := slices.Concat(stored, owOpenTurnClosers(6, 2))
		if !v.GetRepaired() {
			t.Errorf("Prepare: got repaired=false, want true (the open turn was closed)")
		}
		ctEqualEvents(t, "Prepare view", v.GetEvents(), want)
		if got := v.GetNextSeq(); got != 10 {
			t.Errorf("Prepare next_seq: got %d, want 10", got)
		}
		if l.GetEpoch() != 1 || l.GetOwner() != "host-a" || l.GetSessionId() != id {
			t.Errorf("Prepare lease: got %v, want session %q owner host-a epoch 1", l, id)
		}
		if l.GetExpiresAtUnixMs() <= start {
			t.Errorf("Prepare lease expires at %d, want after the call started (%d)", l.GetExpiresAtUnixMs(), start)
		}
		if v.GetRevision() == before {
			t.Errorf("Prepare revision: got %q unchanged, want a new revision (repair committed)", v.GetRevision())
		}
		if got := owRevision(t, n, id); got != v.GetRevision() {
			t.Errorf("ListSnapshots revision after Prepare: got %q, want the view's %q", got, v.GetRevision())
		}
		ctEqualEvents(t, "ReadFrom after Prepare (closers are durable)", ctReadFrom(t, n, id, 0).GetEvents(), want)
		if got := ctTypes(t, v.GetEvents()); slices.Contains(got, "session/end-seed") {
			t.Errorf("Prepare view types %v: Prepare must not write session/end-seed", got)
		}
		// The owner continues the log with its epoch.
		r := owAppend(t, n, id, l.GetEpoch(), owTurnStart(10, 3), owTurnEnd(11, 3))
		if r.GetNextSeq() != 12 {
			t.Errorf("Append after Prepare: got next_seq %d, want 12", r.GetNextSeq())
		}
	})

	t.Run("Prepare on a cold balanced session repairs nothing and bumps the epoch each time", func(t *testing.T) {
		id := "own-prepare-balanced"
		owSession(t, n, id, ctOneTurnLog()...)
		v, l1 := owPrepare(t, n, id, "host-a", long)
		if v.GetRepaired() {
			t.Errorf("Prepare of a balanced log: got repaired=true, want false")
		}
		ctEqualEvents(t, "Prepare view", v.GetEvents(), ctOneTurnLog())
		if l1.GetEpoch() != 1 {
			t.Errorf("first Prepare: got epoch %d, want 1", l1.GetEpoch())
		}
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: l1.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		_, l2 := owPrepare(t, n, id, "host-b", long)
		if l2.GetEpoch() != 2 {
			t.Errorf("Prepare after Release: got epoch %d, want 2", l2.GetEpoch())
		}
	})

	t.Run("Prepare by the same owner while its lease is live returns the same lease", func(t *testing.T) {
		id := "own-prepare-same-owner"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l1 := owPrepare(t, n, id, "host-a", long)
		// The owner opens a turn; its own second Prepare must not repair it.
		owAppend(t, n, id, l1.GetEpoch(), owOpenTurn(6, 2)...)
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))

		v2, l2 := owPrepare(t, n, id, "host-a", long)
		if l2.GetEpoch() != l1.GetEpoch() || l2.GetOwner() != l1.GetOwner() ||
			l2.GetSessionId() != l1.GetSessionId() || l2.GetExpiresAtUnixMs() != l1.GetExpiresAtUnixMs() {
			t.Errorf("second Prepare by the owner: got lease %v, want the same lease %v", l2, l1)
		}
		if v2.GetRepaired() {
			t.Errorf("second Prepare by the owner: got repaired=true, want false")
		}
		ctEqualEvents(t, "second Prepare view (as stored, turn still open)", v2.GetEvents(), stored)
		ctEqualEvents(t, "ReadFrom after the second Prepare", ctReadFrom(t, n, id, 0).GetEvents(), stored)
		owAppend(t, n, id, l1.GetEpoch(), ctEv("step/end", 8, 9, `{"turn":2,"step":1}`), owTurnEnd(9, 2))
	})

	t.Run("Prepare by another owner while a lease is live is SESSION_LIVE", func(t *testing.T) {
		id := "own-prepare-other-owner"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l := owPrepare(t, n, id, "host-a", long)
		rev := owRevision(t, n, id)

		_, _, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "host-b", TtlMs: long.Milliseconds()})
		owWantErr(t, "Prepare by host-b", err, sessionstore.ReasonSessionLive,
			`cannot prepare session "own-prepare-other-owner" while it is live`)

		if got := owRevision(t, n, id); got != rev {
			t.Errorf("revision after the refused Prepare: got %q, want %q", got, rev)
		}
		// host-a still owns the session under the same epoch.
		owAppend(t, n, id, l.GetEpoch(), owTurnStart(6, 2), owTurnEnd(7, 2))
		_, again := owPrepare(t, n, id, "host-a", long)
		if again.GetEpoch() != l.GetEpoch() {
			t.Errorf("host-a's Prepare after the refusal: got epoch %d, want %d", again.GetEpoch(), l.GetEpoch())
		}
	})

	t.Run("Append to a session that has had an epoch must carry the current epoch", func(t *testing.T) {
		id := "own-append-fencing"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l1 := owPrepare(t, n, id, "host-a", long)
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: l1.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		_, l := owPrepare(t, n, id, "host-a", long) // epoch 2: epoch 1 is superseded
		cur := l.GetEpoch()
		if cur != l1.GetEpoch()+1 {
			t.Fatalf("second cold Prepare: got epoch %d, want %d", cur, l1.GetEpoch()+1)
		}
		for _, c := range []struct {
			name  string
			epoch uint64
		}{
			{"no epoch (0)", 0},
			{"superseded epoch", cur - 1},
			{"future epoch", cur + 1},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, LeaseEpoch: c.epoch,
					Events: []string{owTurnStart(6, 2)}})
				owWantErr(t, fmt.Sprintf("Append with epoch %d (current %d)", c.epoch, cur), err, sessionstore.ReasonLeaseFenced, "")
				ctEqualEvents(t, "ReadFrom after the fenced Append", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())
			})
		}
		r := owAppend(t, n, id, cur, owTurnStart(6, 2))
		if r.GetNextSeq() != 7 {
			t.Errorf("Append with the current epoch: got next_seq %d, want 7", r.GetNextSeq())
		}
	})

	t.Run("lease expiry does not change the epoch: the owner can KeepAlive afterwards", func(t *testing.T) {
		id := "own-expiry-keepalive"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l := owPrepare(t, n, id, "host-a", short)
		owWaitPast(t, l.GetExpiresAtUnixMs())

		// Reads and a Load that needs no repair change nothing.
		if _, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id}); err != nil {
			t.Fatalf("Inspect after expiry: %v", err)
		}
		v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Load after expiry: %v", err)
		}
		if v.GetRepaired() {
			t.Errorf("Load of a balanced log after expiry: got repaired=true, want false")
		}

		k, err := n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: &sessionpb.Lease{SessionId: id, Owner: "host-a", Epoch: l.GetEpoch()}})
		if err != nil {
			t.Fatalf("KeepAlive after expiry (nobody else prepared): got %v, want success", err)
		}
		if k.GetEpoch() != l.GetEpoch() || k.GetOwner() != "host-a" {
			t.Errorf("KeepAlive lease: got %v, want owner host-a epoch %d", k, l.GetEpoch())
		}
		if k.GetExpiresAtUnixMs() <= l.GetExpiresAtUnixMs() {
			t.Errorf("KeepAlive: got expiry %d, want later than the expired %d", k.GetExpiresAtUnixMs(), l.GetExpiresAtUnixMs())
		}
		owAppend(t, n, id, l.GetEpoch(), owTurnStart(6, 2), owTurnEnd(7, 2))
	})

	for _, op := range []string{"Load", "Prepare"} {
		t.Run(op+" of a session whose lease expired with an open turn commits the closers and fences the old owner", func(t *testing.T) {
			id := "own-expired-open-" + strings.ToLower(op)
			owSession(t, n, id, ctOneTurnLog()...)
			_, old := owPrepare(t, n, id, "host-a", short)
			owAppend(t, n, id, old.GetEpoch(), owOpenTurn(6, 2)...)
			want := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2), owOpenTurnClosers(6, 2))
			owWaitPast(t, old.GetExpiresAtUnixMs())

			var v *sessionpb.SessionView
			switch op {
			case "Load":
				var err error
				v, err = n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
				if err != nil {
					t.Fatalf("Load after expiry: %v", err)
				}
			case "Prepare":
				var l *sessionpb.Lease
				v, l = owPrepare(t, n, id, "host-b", long)
				if l.GetEpoch() <= old.GetEpoch() || l.GetOwner() != "host-b" {
					t.Errorf("Prepare by host-b: got lease %v, want owner host-b with an epoch above %d", l, old.GetEpoch())
				}
			}
			if !v.GetRepaired() {
				t.Errorf("%s: got repaired=false, want true", op)
			}
			ctEqualEvents(t, op+" view", v.GetEvents(), want)
			ctEqualEvents(t, "ReadFrom after "+op, ctReadFrom(t, n, id, 0).GetEvents(), want)

			_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, LeaseEpoch: old.GetEpoch(),
				Events: []string{owTurnStart(10, 3)}})
			owWantErr(t, "old owner's Append", err, sessionstore.ReasonLeaseFenced, "")
			_, err = n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: old})
			owWantErr(t, "old owner's KeepAlive", err, sessionstore.ReasonLeaseFenced, "")
			ctEqualEvents(t, "ReadFrom after the fenced writes", ctReadFrom(t, n, id, 0).GetEvents(), want)

			if op == "Load" {
				_, l := owPrepare(t, n, id, "host-c", long)
				if l.GetEpoch() <= old.GetEpoch()+1 {
					t.Errorf("Prepare after the repairing Load: got epoch %d, want above %d (Load bumped it to %d)",
						l.GetEpoch(), old.GetEpoch()+1, old.GetEpoch()+1)
				}
				owAppend(t, n, id, l.GetEpoch(), owTurnStart(10, 3))
			}
		})
	}

	t.Run("Load while a lease is live and the turn is open is LIVE_TURN_OPEN", func(t *testing.T) {
		id := "own-load-live-open"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l := owPrepare(t, n, id, "host-a", long)

		// A closed turn under a live lease loads fine.
		v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Load under a live lease with no open turn: %v", err)
		}
		ctEqualEvents(t, "Load view", v.GetEvents(), ctOneTurnLog())

		owAppend(t, n, id, l.GetEpoch(), owOpenTurn(6, 2)...)
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))
		rev := owRevision(t, n, id)
		_, err = n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		owWantErr(t, "Load", err, sessionstore.ReasonLiveTurnOpen,
			`cannot load session "own-load-live-open" while its live turn is open; use the live Session or wait for the turn to close`)
		ctEqualEvents(t, "ReadFrom after the refused Load", ctReadFrom(t, n, id, 0).GetEvents(), stored)
		if got := owRevision(t, n, id); got != rev {
			t.Errorf("revision after the refused Load: got %q, want %q", got, rev)
		}
		// The owner closes its turn; Load then succeeds with the owner's bytes.
		owAppend(t, n, id, l.GetEpoch(), ctEv("step/end", 8, 9, `{"turn":2,"step":1}`), owTurnEnd(9, 2))
		v, err = n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Load after the turn closed: %v", err)
		}
		if v.GetRepaired() {
			t.Errorf("Load after the turn closed: got repaired=true, want false")
		}
		if got := ctTypes(t, v.GetEvents()); len(got) != 10 || got[9] != "turn/end" {
			t.Errorf("Load after the turn closed: got types %v, want 10 events ending in turn/end", got)
		}
	})

	t.Run("Inspect returns an owned session as stored and an unowned one with closers in memory", func(t *testing.T) {
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))
		balanced := slices.Concat(stored, owOpenTurnClosers(6, 2))

		owned := "own-inspect-owned"
		owSession(t, n, owned, ctOneTurnLog()...)
		_, l := owPrepare(t, n, owned, "host-a", long)
		owAppend(t, n, owned, l.GetEpoch(), owOpenTurn(6, 2)...)

		never := "own-inspect-never-owned"
		owSession(t, n, never, stored...)

		released := "own-inspect-released"
		owSession(t, n, released, ctOneTurnLog()...)
		_, rl := owPrepare(t, n, released, "host-a", long)
		owAppend(t, n, released, rl.GetEpoch(), owOpenTurn(6, 2)...)
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: released, LeaseEpoch: rl.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}

		for _, c := range []struct {
			name, id string
			want     []string
		}{
			{"owned under a live lease", owned, stored},
			{"never owned (epoch 0)", never, balanced},
			{"released (cold)", released, balanced},
		} {
			t.Run(c.name, func(t *testing.T) {
				rev := owRevision(t, n, c.id)
				v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: c.id})
				if err != nil {
					t.Fatalf("Inspect: %v", err)
				}
				ctEqualEvents(t, "Inspect view", v.GetEvents(), c.want)
				if v.GetRevision() != rev {
					t.Errorf("Inspect revision: got %q, want the stored %q", v.GetRevision(), rev)
				}
				if v.GetRepaired() {
					t.Errorf("Inspect: got repaired=true, want false (Inspect commits nothing)")
				}
				ctEqualEvents(t, "ReadFrom after Inspect (nothing committed)", ctReadFrom(t, n, c.id, 0).GetEvents(), stored)
				if got := owRevision(t, n, c.id); got != rev {
					t.Errorf("revision after Inspect: got %q, want %q", got, rev)
				}
			})
		}
	})

	t.Run("sessions never prepared: any Load closes an open turn and appends need no epoch", func(t *testing.T) {
		id := "own-epoch-zero"
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))
		owSession(t, n, id, stored...)
		want := slices.Concat(stored, owOpenTurnClosers(6, 2))

		v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		if !v.GetRepaired() || v.GetNextSeq() != 10 {
			t.Errorf("Load: got repaired=%v next_seq=%d, want repaired=true next_seq=10", v.GetRepaired(), v.GetNextSeq())
		}
		ctEqualEvents(t, "Load view", v.GetEvents(), want)
		ctEqualEvents(t, "ReadFrom after Load", ctReadFrom(t, n, id, 0).GetEvents(), want)

		v2, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("second Load: %v", err)
		}
		if v2.GetRepaired() || v2.GetRevision() != v.GetRevision() {
			t.Errorf("second Load: got repaired=%v revision %q, want repaired=false revision %q", v2.GetRepaired(), v2.GetRevision(), v.GetRevision())
		}
		r := owAppend(t, n, id, 0, owTurnStart(10, 3), owTurnEnd(11, 3))
		if r.GetNextSeq() != 12 {
			t.Errorf("Append with no epoch: got next_seq %d, want 12", r.GetNextSeq())
		}
	})

	t.Run("Append never repairs: the seq continues after an open turn", func(t *testing.T) {
		id := "own-append-no-repair"
		stored := slices.Concat(ctOneTurnLog(), owOpenTurn(6, 2))
		owSession(t, n, id, stored...)

		// A writer that assumes closers were added is refused.
		_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: []string{owTurnStart(10, 3)}})
		owWantErr(t, "Append at seq 10", err, sessionstore.ReasonSeqMismatch,
			`append seq mismatch for "own-append-no-repair": expected 8 at index 0, got 10`)
		ctEqualEvents(t, "ReadFrom after the refused Append", ctReadFrom(t, n, id, 0).GetEvents(), stored)

		tail := []string{ctEv("step/end", 8, 9, `{"turn":2,"step":1}`), owTurnEnd(9, 2)}
		r := owAppend(t, n, id, 0, tail...)
		if r.GetNextSeq() != 10 {
			t.Errorf("Append continuing the open turn: got next_seq %d, want 10", r.GetNextSeq())
		}
		ctEqualEvents(t, "ReadFrom (the writer's own bytes, no closers)", ctReadFrom(t, n, id, 0).GetEvents(), slices.Concat(stored, tail))
	})
}

// TestOwOwnershipRelease covers Release and KeepAlive with a superseded epoch.
func TestOwOwnershipRelease(t *testing.T) {
	n := startTestNode(t, "")
	const long = 30 * time.Second

	t.Run("Release makes the session cold and keeps the epoch", func(t *testing.T) {
		id := "rel-cold"
		owSession(t, n, id, ctOneTurnLog()...)
		_, a := owPrepare(t, n, id, "host-a", long)
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: a.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: []string{owTurnStart(6, 2)}})
		owWantErr(t, "Append with epoch 0 after Release", err, sessionstore.ReasonLeaseFenced, "")
		ctEqualEvents(t, "ReadFrom after the fenced Append", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())

		v, b := owPrepare(t, n, id, "host-b", long)
		if b.GetEpoch() <= a.GetEpoch() || b.GetOwner() != "host-b" {
			t.Errorf("Prepare by host-b after Release: got %v, want owner host-b with an epoch above %d", b, a.GetEpoch())
		}
		ctEqualEvents(t, "host-b's view", v.GetEvents(), ctOneTurnLog())

		_, err = n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: a})
		owWantErr(t, "host-a's KeepAlive", err, sessionstore.ReasonLeaseFenced, "")
		_, err = n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, LeaseEpoch: a.GetEpoch(), Events: []string{owTurnStart(6, 2)}})
		owWantErr(t, "host-a's Append", err, sessionstore.ReasonLeaseFenced, "")

		// A stale Release by host-a does not end host-b's lease.
		err = n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: a.GetEpoch()})
		t.Logf("Release with the superseded epoch: %v", err)
		_, _, err = n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "host-c", TtlMs: long.Milliseconds()})
		owWantErr(t, "Prepare by host-c while host-b holds the lease", err, sessionstore.ReasonSessionLive,
			`cannot prepare session "rel-cold" while it is live`)
		owAppend(t, n, id, b.GetEpoch(), owTurnStart(6, 2), owTurnEnd(7, 2))
	})

	t.Run("KeepAlive with a superseded epoch is LEASE_FENCED", func(t *testing.T) {
		id := "rel-keepalive-superseded"
		owSession(t, n, id, ctOneTurnLog()...)
		_, a := owPrepare(t, n, id, "host-a", 300*time.Millisecond)
		owWaitPast(t, a.GetExpiresAtUnixMs())
		_, b := owPrepare(t, n, id, "host-b", long)
		if b.GetEpoch() <= a.GetEpoch() {
			t.Fatalf("Prepare after expiry: got epoch %d, want above %d", b.GetEpoch(), a.GetEpoch())
		}
		_, err := n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: a})
		owWantErr(t, "KeepAlive with the superseded epoch", err, sessionstore.ReasonLeaseFenced, "")
		k, err := n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: b})
		if err != nil {
			t.Fatalf("KeepAlive with the current epoch: %v", err)
		}
		if k.GetEpoch() != b.GetEpoch() || k.GetOwner() != "host-b" {
			t.Errorf("KeepAlive: got %v, want owner host-b epoch %d", k, b.GetEpoch())
		}
	})
}

// TestOwRetry covers docs/design.md "Retries and outcomes".
func TestOwRetry(t *testing.T) {
	n := startTestNode(t, "")
	const long = 30 * time.Second

	t.Run("an identical re-sent Append is a duplicate with the current revision and next seq", func(t *testing.T) {
		id := "retry-dup"
		ctCreate(t, n, ctMeta(id, ""))
		req := &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()}
		first, err := n.Client.Append(n.ctx(), req)
		if err != nil {
			t.Fatalf("Append: %v", err)
		}
		if first.GetDuplicate() {
			t.Errorf("first Append: got duplicate=true, want false")
		}
		again, err := n.Client.Append(n.ctx(), req)
		if err != nil {
			t.Fatalf("re-sent Append: got %v, want success", err)
		}
		if !again.GetDuplicate() || again.GetRevision() != first.GetRevision() || again.GetNextSeq() != 6 {
			t.Errorf("re-sent Append: got %v, want duplicate=true revision %q next_seq 6", again, first.GetRevision())
		}
		ctEqualEvents(t, "ReadFrom after the re-send", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())

		// A later state: the duplicate answers with the current revision and next seq.
		later := owAppend(t, n, id, 0, owTurnStart(6, 2))
		third, err := n.Client.Append(n.ctx(), req)
		if err != nil {
			t.Fatalf("re-sent Append after a later append: %v", err)
		}
		if !third.GetDuplicate() || third.GetRevision() != later.GetRevision() || third.GetNextSeq() != 7 {
			t.Errorf("re-sent Append after a later append: got %v, want duplicate=true revision %q next_seq 7", third, later.GetRevision())
		}
		// An identical re-send of a stored middle run is a duplicate too.
		mid, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[2:4]})
		if err != nil || !mid.GetDuplicate() {
			t.Errorf("re-sent events 2..3: got %v, %v, want duplicate=true", mid, err)
		}
		if got := ctReadFrom(t, n, id, 0).GetEvents(); len(got) != 7 {
			t.Errorf("ReadFrom: got %d events, want 7 (nothing stored twice)", len(got))
		}
	})

	t.Run("the duplicate check runs before the lease and revision checks", func(t *testing.T) {
		id := "retry-dup-before-fence"
		a := owSession(t, n, id, ctOneTurnLog()[:3]...)
		owAppend(t, n, id, 0, ctOneTurnLog()[3:]...)
		_, l := owPrepare(t, n, id, "host-a", long)
		cur := owRevision(t, n, id)
		r, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[3:],
			LeaseEpoch: 0, ExpectedRevision: a.GetRevision()})
		if err != nil {
			t.Fatalf("re-send with epoch 0 and a stale expected revision: got %v, want a duplicate", err)
		}
		if !r.GetDuplicate() || r.GetRevision() != cur || r.GetNextSeq() != 6 {
			t.Errorf("re-send: got %v, want duplicate=true revision %q next_seq 6", r, cur)
		}
		owAppend(t, n, id, l.GetEpoch(), owTurnStart(6, 2))
	})

	t.Run("a partial overlap or different bytes at a stored seq is SEQ_MISMATCH", func(t *testing.T) {
		id := "retry-overlap"
		owSession(t, n, id, ctOneTurnLog()...)
		rev := owRevision(t, n, id)
		log := ctOneTurnLog()
		for _, c := range []struct {
			name   string
			events []string
			msg    string
		}{
			{"partial overlap", []string{log[5], owTurnStart(6, 2)},
				`append seq mismatch for "retry-overlap": expected 6 at index 0, got 5`},
			{"different bytes at a stored seq", []string{ctEv("turn/end", 5, 99, `{"turn":1,"reason":{"kind":"completed"}}`)},
				`append seq mismatch for "retry-overlap": expected 6 at index 0, got 5`},
			{"whole log re-sent with one event changed", append(slices.Clone(log[:5]), ctEv("turn/end", 5, 7, `{"turn":1,"reason":{"kind":"completed"}}`)),
				`append seq mismatch for "retry-overlap": expected 6 at index 0, got 0`},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: c.events})
				owWantErr(t, "Append", err, sessionstore.ReasonSeqMismatch, c.msg)
				ctEqualEvents(t, "ReadFrom", ctReadFrom(t, n, id, 0).GetEvents(), log)
				if got := owRevision(t, n, id); got != rev {
					t.Errorf("revision: got %q, want %q", got, rev)
				}
			})
		}
	})

	t.Run("a repeated Create returns the first response", func(t *testing.T) {
		id := "retry-create"
		req := &sessionpb.CreateRequest{Header: ctMeta(id, ""), RequestId: "create-1"}
		if _, err := n.Client.Create(n.ctx(), req); err != nil {
			t.Fatalf("Create: %v", err)
		}
		// The same header while unmaterialised succeeds, whatever the id.
		if _, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, ""), RequestId: "create-2"}); err != nil {
			t.Errorf("Create of an equal unmaterialised registration: got %v, want success", err)
		}
		other := ctMeta(id, "")
		other.CreatedAt = 2000
		_, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: other, RequestId: "create-3"})
		owWantErr(t, "Create with a different header", err, sessionstore.ReasonAlreadyExists,
			`session "retry-create" already exists in this backend`)

		owAppend(t, n, id, 0, ctOneTurnLog()...)
		if _, err := n.Client.Create(n.ctx(), req); err != nil {
			t.Errorf("repeated Create (request id create-1) after materialisation: got %v, want the first response (success)", err)
		}
		_, err = n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(id, ""), RequestId: "create-4"})
		owWantErr(t, "new Create after materialisation", err, sessionstore.ReasonAlreadyExists,
			`session "retry-create" already has a persisted log on disk; load/resume it instead of creating`)
		ctEqualEvents(t, "ReadFrom", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())
	})

	t.Run("a repeated Prepare returns the stored lease, not a bumped one", func(t *testing.T) {
		id := "retry-prepare"
		owSession(t, n, id, ctOneTurnLog()...)
		req := &sessionpb.PrepareRequest{SessionId: id, Owner: "host-a", TtlMs: long.Milliseconds(), RequestId: "prepare-1"}
		_, l1, err := n.Client.Prepare(n.ctx(), req)
		if err != nil {
			t.Fatalf("Prepare: %v", err)
		}
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: l1.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		v, l2, err := n.Client.Prepare(n.ctx(), req)
		if err != nil {
			t.Fatalf("repeated Prepare: %v", err)
		}
		if l2.GetEpoch() != l1.GetEpoch() || l2.GetExpiresAtUnixMs() != l1.GetExpiresAtUnixMs() || l2.GetOwner() != l1.GetOwner() {
			t.Errorf("repeated Prepare (request id prepare-1): got lease %v, want the first response's %v", l2, l1)
		}
		ctEqualEvents(t, "repeated Prepare view", v.GetEvents(), ctOneTurnLog())
		_, l3 := owPrepare(t, n, id, "host-a", long)
		if l3.GetEpoch() != l1.GetEpoch()+1 {
			t.Errorf("Prepare with a new request id: got epoch %d, want %d", l3.GetEpoch(), l1.GetEpoch()+1)
		}
	})

	t.Run("a repeated KeepAlive returns the first response", func(t *testing.T) {
		id := "retry-keepalive"
		owSession(t, n, id, ctOneTurnLog()...)
		_, l := owPrepare(t, n, id, "host-a", long)
		req := &sessionpb.KeepAliveRequest{Lease: l, RequestId: "keepalive-1"}
		k1, err := n.Client.KeepAlive(n.ctx(), req)
		if err != nil {
			t.Fatalf("KeepAlive: %v", err)
		}
		owWaitPast(t, k1.GetExpiresAtUnixMs()-long.Milliseconds()) // time moves on
		k2, err := n.Client.KeepAlive(n.ctx(), req)
		if err != nil {
			t.Fatalf("repeated KeepAlive: %v", err)
		}
		if k2.GetExpiresAtUnixMs() != k1.GetExpiresAtUnixMs() || k2.GetEpoch() != k1.GetEpoch() {
			t.Errorf("repeated KeepAlive: got %v, want the first response %v", k2, k1)
		}
		k3, err := n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: l, RequestId: "keepalive-2"})
		if err != nil {
			t.Fatalf("KeepAlive with a new request id: %v", err)
		}
		if k3.GetExpiresAtUnixMs() <= k1.GetExpiresAtUnixMs() {
			t.Errorf("KeepAlive with a new request id: got expiry %d, want after %d", k3.GetExpiresAtUnixMs(), k1.GetExpiresAtUnixMs())
		}
		if err := n.Client.Release(n.ctx(), &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: l.GetEpoch()}); err != nil {
			t.Fatalf("Release: %v", err)
		}
		k4, err := n.Client.KeepAlive(n.ctx(), req)
		if err != nil || k4.GetExpiresAtUnixMs() != k1.GetExpiresAtUnixMs() {
			t.Errorf("repeated KeepAlive after Release: got %v, %v, want the first response %v", k4, err, k1)
		}
		_, err = n.Client.KeepAlive(n.ctx(), &sessionpb.KeepAliveRequest{Lease: l, RequestId: "keepalive-3"})
		owWantErr(t, "new KeepAlive after Release", err, sessionstore.ReasonLeaseFenced, "")
	})

	t.Run("a repeated Release returns the first response and ends no later lease", func(t *testing.T) {
		id := "retry-release"
		owSession(t, n, id, ctOneTurnLog()...)
		_, a := owPrepare(t, n, id, "host-a", long)
		req := &sessionpb.ReleaseRequest{SessionId: id, LeaseEpoch: a.GetEpoch(), RequestId: "release-1"}
		if err := n.Client.Release(n.ctx(), req); err != nil {
			t.Fatalf("Release: %v", err)
		}
		_, b := owPrepare(t, n, id, "host-b", long)
		if err := n.Client.Release(n.ctx(), req); err != nil {
			t.Errorf("repeated Release (request id release-1): got %v, want the first response (success)", err)
		}
		_, _, err := n.Client.Prepare(n.ctx(), &sessionpb.PrepareRequest{SessionId: id, Owner: "host-c", TtlMs: long.Milliseconds()})
		owWantErr(t, "Prepare by host-c after the repeated Release", err, sessionstore.ReasonSessionLive, "")
		owAppend(t, n, id, b.GetEpoch(), owTurnStart(6, 2))
	})

	t.Run("expected_revision", func(t *testing.T) {
		id := "retry-expected-revision"
		r1 := owSession(t, n, id, ctOneTurnLog()[:3]...)
		r2 := owAppend(t, n, id, 0, ctOneTurnLog()[3:]...)
		for _, c := range []struct{ name, rev string }{
			{"stale revision", r1.GetRevision()},
			{"unknown revision", "no-such-revision"},
		} {
			t.Run(c.name, func(t *testing.T) {
				_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: []string{owTurnStart(6, 2)},
					ExpectedRevision: c.rev})
				owWantErr(t, "Append", err, sessionstore.ReasonRevisionMismatch, "")
				ctEqualEvents(t, "ReadFrom", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())
				if got := owRevision(t, n, id); got != r2.GetRevision() {
					t.Errorf("revision: got %q, want %q", got, r2.GetRevision())
				}
			})
		}
		r3, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: id, Events: []string{owTurnStart(6, 2)},
			ExpectedRevision: r2.GetRevision()})
		if err != nil {
			t.Fatalf("Append with the current expected_revision: %v", err)
		}
		if r3.GetNextSeq() != 7 || r3.GetRevision() == r2.GetRevision() {
			t.Errorf("Append with the current expected_revision: got %v, want next_seq 7 and a new revision", r3)
		}
	})
}

// owBadCase is one refused Append.
type owBadCase struct {
	name string
	// events builds the refused batch when the stored next seq is seq.
	events func(seq int64) []string
	// reasons are the acceptable reasons, the first the expected one.
	reasons []sessionstore.Reason
	// msg is the exact status message (nil: not checked).
	msg func(id string, seq int64) string
	// contains must be part of the message ("" : not checked).
	contains string
}

// owCodeOf is the reason → gRPC code table of docs/api.md.
func owCodeOf(r sessionstore.Reason) codes.Code {
	switch r {
	case sessionstore.ReasonSeqMismatch, sessionstore.ReasonRevisionMismatch, sessionstore.ReasonLeaseFenced:
		return codes.FailedPrecondition
	case sessionstore.ReasonTooLarge:
		return codes.ResourceExhausted
	default:
		return codes.InvalidArgument
	}
}

func owBadCases() []owBadCase {
	valid := func(seq int64) string { return owTurnStart(seq, 1) }
	one := func(f func(seq int64) string) func(int64) []string {
		return func(seq int64) []string { return []string{f(seq)} }
	}
	notJSON := []sessionstore.Reason{sessionstore.ReasonNotJSON}
	envelope := []sessionstore.Reason{sessionstore.ReasonInvalidEvent}
	invalidArg := []sessionstore.Reason{sessionstore.ReasonInvalidEvent, sessionstore.ReasonInvalidArgument}
	big := func(size int) string { return strings.Repeat("x", size) }
	legacy := func(what string) func(string, int64) string {
		return func(id string, seq int64) string {
			return fmt.Sprintf(`session %q contains unsupported legacy %s at seq %d`, id, what, seq)
		}
	}
	planMode := func(shown string) func(string, int64) string {
		return func(string, int64) string {
			return "plan/mode carries invalid active state " + shown + "; expected a boolean"
		}
	}
	return []owBadCase{
		// Not one single-line JSON object (docs/design.md "Events are bytes": NOT_JSON).
		{name: "not JSON", events: one(func(int64) string { return `hello` }), reasons: notJSON},
		{name: "empty text", events: one(func(int64) string { return `` }), reasons: notJSON},
		{name: "JSON array", events: one(func(s int64) string { return "[" + valid(s) + "]" }), reasons: notJSON},
		{name: "JSON string", events: one(func(int64) string { return `"turn/start"` }), reasons: notJSON},
		{name: "two objects in one event", events: one(func(s int64) string { return valid(s) + valid(s) }), reasons: notJSON},
		{name: "line break inside the object", events: one(func(s int64) string {
			return fmt.Sprintf("{\"type\":\"turn/start\",\n\"seq\":%d,\"time\":1,\"data\":{\"turn\":1}}", s)
		}), reasons: notJSON},
		{name: "trailing line break", events: one(func(s int64) string { return valid(s) + "\n" }), reasons: notJSON},
		{name: "truncated object", events: one(func(s int64) string { v := valid(s); return v[:len(v)-1] }), reasons: notJSON},
		{name: "duplicate top-level key", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"time":1,"data":{"turn":1}}`, s)
		}), reasons: notJSON},
		{name: "duplicate nested key", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1,"turn":1}}`, s)
		}), reasons: notJSON},

		// Envelope members and types (docs/events.md#envelope).
		{name: "no type", events: one(func(s int64) string { return fmt.Sprintf(`{"seq":%d,"time":1,"data":{"turn":1}}`, s) }), reasons: envelope},
		{name: "type not a string", events: one(func(s int64) string { return fmt.Sprintf(`{"type":7,"seq":%d,"time":1,"data":{}}`, s) }), reasons: envelope},
		{name: "no seq", events: one(func(int64) string { return `{"type":"turn/start","time":1,"data":{"turn":1}}` }), reasons: envelope},
		{name: "seq as string", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":"%d","time":1,"data":{"turn":1}}`, s)
		}), reasons: envelope},
		{name: "seq -1", events: one(func(int64) string { return `{"type":"turn/start","seq":-1,"time":1,"data":{"turn":1}}` }), reasons: envelope},
		{name: "seq 0.5", events: one(func(int64) string { return `{"type":"turn/start","seq":0.5,"time":1,"data":{"turn":1}}` }), reasons: envelope},
		{name: "no time", events: one(func(s int64) string { return fmt.Sprintf(`{"type":"turn/start","seq":%d,"data":{"turn":1}}`, s) }), reasons: envelope},
		{name: "time 1.5", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1.5,"data":{"turn":1}}`, s)
		}), reasons: envelope},
		{name: "time as string", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":"1","data":{"turn":1}}`, s)
		}), reasons: envelope},
		{name: "data missing", events: one(func(s int64) string { return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1}`, s) }), reasons: envelope},
		{name: "extra top-level key", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"turn/start","seq":%d,"time":1,"data":{"turn":1},"extra":1}`, s)
		}), reasons: envelope},
		{name: "ignorable false", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"future/event","seq":%d,"time":1,"data":null,"ignorable":false}`, s)
		}), reasons: envelope},

		// The lossless-JSON domain (docs/events.md#lossless-json).
		{name: "negative zero in data", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"todo/write","seq":%d,"time":1,"data":{"n":-0}}`, s)
		}), reasons: []sessionstore.Reason{sessionstore.ReasonInvalidEvent, sessionstore.ReasonNotJSON}, contains: "losslessly JSON-serializable"},
		{name: "non-finite number in data", events: one(func(s int64) string {
			return fmt.Sprintf(`{"type":"todo/write","seq":%d,"time":1,"data":{"n":1e400}}`, s)
		}), reasons: []sessionstore.Reason{sessionstore.ReasonInvalidEvent, sessionstore.ReasonNotJSON}, contains: "losslessly JSON-serializable"},

		// Contiguity (docs/events.md#write-checks).
		{name: "gap inside the batch", events: func(s int64) []string {
			return []string{valid(s), ctEv("step/start", s+2, 2, `{"turn":1,"step":1}`)}
		}, reasons: []sessionstore.Reason{sessionstore.ReasonSeqMismatch}, msg: func(id string, s int64) string {
			return fmt.Sprintf(`append seq mismatch for %q: expected %d at index 1, got %d`, id, s+1, s+2)
		}},
		{name: "first seq ahead of the stored next seq", events: one(func(s int64) string { return valid(s + 1) }),
			reasons: []sessionstore.Reason{sessionstore.ReasonSeqMismatch}, msg: func(id string, s int64) string {
				return fmt.Sprintf(`append seq mismatch for %q: expected %d at index 0, got %d`, id, s, s+1)
			}},

		// Size limits (docs/api.md "Limits": event 2 MiB, batch 4 MiB and 1,000 events).
		{name: "event above 2 MiB", events: one(func(s int64) string {
			return ctEv("todo/write", s, 1, `{"text":"`+big(2<<20)+`"}`)
		}), reasons: []sessionstore.Reason{sessionstore.ReasonTooLarge}},
		{name: "batch above 1,000 events", events: func(s int64) []string {
			out := make([]string, 1001)
			for i := range out {
				out[i] = ctEv("todo/write", s+int64(i), 1, `{"todos":[]}`)
			}
			return out
		}, reasons: []sessionstore.Reason{sessionstore.ReasonTooLarge}},
		{name: "batch above 4 MiB", events: func(s int64) []string {
			out := make([]string, 3)
			for i := range out {
				out[i] = ctEv("todo/write", s+int64(i), 1, `{"text":"`+big(3<<19)+`"}`) // 1.5 MiB each
			}
			return out
		}, reasons: []sessionstore.Reason{sessionstore.ReasonTooLarge}},

		// The three legacy types refused on append (docs/events.md#legacy-shapes).
		{name: "legacy request/header-delta", events: one(func(s int64) string { return ctEv("request/header-delta", s, 1, `{}`) }),
			reasons: invalidArg, msg: legacy("request/header-delta event")},
		{name: "legacy mode/set", events: one(func(s int64) string { return ctEv("mode/set", s, 1, `{"mode":"plan"}`) }),
			reasons: invalidArg, msg: legacy("mode/set event")},
		{name: "legacy request/header reason fallback", events: one(func(s int64) string {
			return ctEv("request/header", s, 1, `{"header":{"config":{"provider":"mock","model":"mock"}},"reason":"fallback"}`)
		}), reasons: invalidArg, msg: legacy(`request/header reason "fallback"`)},

		// The plan/mode boolean invariant (docs/api.md, docs/planmode.md#invariant).
		{name: "plan/mode active 1", events: one(func(s int64) string { return ctEv("plan/mode", s, 1, `{"active":1}`) }),
			reasons: invalidArg, msg: planMode("1")},
		{name: `plan/mode active "x"`, events: one(func(s int64) string { return ctEv("plan/mode", s, 1, `{"active":"x"}`) }),
			reasons: invalidArg, msg: planMode(`"x"`)},
		{name: "plan/mode active missing", events: one(func(s int64) string { return ctEv("plan/mode", s, 1, `{}`) }),
			reasons: invalidArg, msg: planMode("undefined")},
	}
}

// TestOwBadInput: every refused Append writes nothing, and the node keeps
// serving. Each case runs against a never-materialised session (it must stay
// unlisted) and against a materialised one (no new events, same revision),
// and each refusal is followed by a valid Append that succeeds.
func TestOwBadInput(t *testing.T) {
	n := startTestNode(t, "")
	raw := ctRaw(n)
	check := func(t *testing.T, c owBadCase, id string, seq int64) {
		t.Helper()
		_, err := raw.Append(owCtx(t, 30*time.Second), &sessionpb.AppendRequest{SessionId: id, Events: c.events(seq)})
		if err == nil {
			t.Errorf("Append at seq %d: got success, want %s", seq, c.reasons[0])
			return
		}
		code, reason, msg := owStatus(err)
		if !slices.Contains(c.reasons, reason) {
			t.Errorf("Append at seq %d: got reason %q (code %v, %q), want %s", seq, reason, code, msg, c.reasons[0])
		}
		if want := owCodeOf(c.reasons[0]); code != want {
			t.Errorf("Append at seq %d: got code %v, want %v", seq, code, want)
		}
		if c.msg != nil {
			if want := c.msg(id, seq); msg != want {
				t.Errorf("Append at seq %d: got message\n\t%q\nwant\n\t%q", seq, msg, want)
			}
		}
		if c.contains != "" && !strings.Contains(msg, c.contains) {
			t.Errorf("Append at seq %d: got message %q, want it to contain %q", seq, msg, c.contains)
		}
	}
	for i, c := range owBadCases() {
		t.Run(c.name, func(t *testing.T) {
			id := fmt.Sprintf("bad-%02d", i)
			ctCreate(t, n, ctMeta(id, ""))

			// Never materialised: the refusal must not materialise it.
			check(t, c, id, 0)
			if owListed(t, n, id) {
				t.Errorf("List shows %q after a refused first Append, want it absent (never materialised)", id)
			}
			_, err := n.Client.ReadFrom(n.ctx(), &sessionpb.ReadFromRequest{SessionId: id})
			owWantErr(t, "ReadFrom of the never-materialised session", err, sessionstore.ReasonNotFound, fmt.Sprintf(`session %q not found`, id))

			// The node keeps serving: a valid append succeeds.
			r := owAppend(t, n, id, 0, ctOneTurnLog()...)

			// Materialised: nothing new is stored, the revision stays.
			check(t, c, id, 6)
			ctEqualEvents(t, "ReadFrom after the refusal", ctReadFrom(t, n, id, 0).GetEvents(), ctOneTurnLog())
			if got := owRevision(t, n, id); got != r.GetRevision() {
				t.Errorf("revision after the refusal: got %q, want %q", got, r.GetRevision())
			}
			if got := owAppend(t, n, id, 0, owTurnStart(6, 2)).GetNextSeq(); got != 7 {
				t.Errorf("valid Append after the refusal: got next_seq %d, want 7", got)
			}
		})
	}
}

// TestOwBadInputSessionIDs covers docs/design.md "Session ids": any non-empty valid UTF-8 id
// whose encodeSegment is ≤ 255 bytes is valid and always stays one path
// segment under <data-dir>/artifacts; others are INVALID_SESSION_ID.
func TestOwBadInputSessionIDs(t *testing.T) {
	n := startTestNode(t, "")

	// 200 characters, some non-ASCII (one outside the BMP, two UTF-16 units):
	// 190 kept units + 11 escaped units = 245 bytes once encoded.
	unicode200 := "é日本語ü€ñ✓Ω" + strings.Repeat("u", 190) + "😀"
	if utf8.RuneCountInString(unicode200) != 200 || len(owEncodeSegment(unicode200)) > 255 {
		t.Fatalf("fixture: %d characters, encoded %d bytes", utf8.RuneCountInString(unicode200), len(owEncodeSegment(unicode200)))
	}

	for _, c := range []struct{ name, id string }{
		{"empty", ""},
		{"256 ASCII letters (256 bytes encoded)", strings.Repeat("a", 256)},
		{"52 slashes (260 bytes encoded)", strings.Repeat("/", 52)},
		{"200 accented letters (1000 bytes encoded)", strings.Repeat("é", 200)},
	} {
		t.Run("invalid/"+c.name, func(t *testing.T) {
			_, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: ctMeta(c.id, "")})
			owWantErr(t, "Create", err, sessionstore.ReasonInvalidSessionID, "")
			_, err = n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: c.id, Events: ctOneTurnLog()})
			owWantErr(t, "Append", err, sessionstore.ReasonInvalidSessionID, "")
			_, err = n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: c.id})
			owWantErr(t, "Load", err, sessionstore.ReasonInvalidSessionID, "")
			if owListed(t, n, c.id) {
				t.Errorf("List shows the invalid id %q", c.id)
			}
		})
	}

	valid := []struct{ name, id string }{
		{"dot dot", ".."},
		{"dot", "."},
		{"slash", "a/b"},
		{"parent escape", "../../escape"},
		{"NUL", "\x00x"},
		{"tilde", "a~b"},
		{"200-character unicode", unicode200},
		{"255 ASCII letters (boundary)", strings.Repeat("a", 255)},
		{"51 slashes (255 bytes encoded, boundary)", strings.Repeat("/", 51)},
	}
	root := filepath.Join(n.dir, "artifacts")
	wantFiles := map[string]string{} // artifact path → id
	for _, c := range valid {
		t.Run("valid/"+c.name, func(t *testing.T) {
			owSession(t, n, c.id, ctOneTurnLog()...)
			v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: c.id})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if v.GetHeader().GetId() != c.id {
				t.Errorf("Load header id: got %q, want %q", v.GetHeader().GetId(), c.id)
			}
			ctEqualEvents(t, "Load view", v.GetEvents(), ctOneTurnLog())
			if !owListed(t, n, c.id) {
				t.Errorf("List does not show %q", c.id)
			}
			want := filepath.Join(root, "_no-cwd", owEncodeSegment(c.id), "session.jsonl.zstd")
			wantFiles[want] = c.id
			loc, err := n.Client.Locate(n.ctx(), &sessionpb.LocateRequest{Header: ctMeta(c.id, "")})
			if err != nil {
				t.Fatalf("Locate: %v", err)
			}
			if loc.GetKind() != "jsonl" || loc.GetPath() != want {
				t.Errorf("Locate: got kind %q path %q, want jsonl %q", loc.GetKind(), loc.GetPath(), want)
			}
		})
	}

	t.Run("invalid/unknown id", func(t *testing.T) {
		_, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: "never-created", Events: ctOneTurnLog()})
		owWantErr(t, "Append to a never-created id", err, sessionstore.ReasonNotFound, `session "never-created" not found`)
		if owListed(t, n, "never-created") {
			t.Errorf("List shows never-created")
		}
	})

	t.Run("artifacts stay inside <data-dir>/artifacts", func(t *testing.T) {
		n.WaitArtifacts()
		found := map[string]bool{}
		err := filepath.WalkDir(n.dir, func(p string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() || !strings.HasPrefix(d.Name(), "session.jsonl") {
				return nil
			}
			if rel, err := filepath.Rel(root, p); err != nil || strings.HasPrefix(rel, "..") {
				t.Errorf("artifact %q lies outside %q", p, root)
			}
			found[p] = true
			return nil
		})
		if err != nil {
			t.Fatalf("walk %s: %v", n.dir, err)
		}
		for p, id := range wantFiles {
			if !found[p] {
				t.Errorf("artifact of %q: %q is missing", id, p)
				continue
			}
			text := owDecodeZstdFile(t, p)
			first, _, _ := bytes.Cut(text, []byte("\n"))
			var h struct {
				Type string `json:"type"`
				ID   string `json:"id"`
			}
			if err := json.Unmarshal(first, &h); err != nil || h.Type != "session" || h.ID != id {
				t.Errorf("artifact %q header line %q: got id %q (%v), want %q", p, first, h.ID, err, id)
			}
		}
		for p := range found {
			if _, ok := wantFiles[p]; !ok {
				t.Errorf("unexpected artifact %q", p)
			}
		}
		// Nothing was created next to the data directory.
		if _, err := os.Stat(filepath.Join(filepath.Dir(n.dir), "escape")); err == nil {
			t.Errorf("a file named escape exists next to the data directory")
		}
	})
}

// owDecodeZstdFile decodes every frame of a zstd file.
func owDecodeZstdFile(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v", path, err)
	}
	return owDecodeZstd(t, b)
}

func owDecodeZstd(t *testing.T, b []byte) []byte {
	t.Helper()
	d, err := zstd.NewReader(nil)
	if err != nil {
		t.Fatalf("zstd reader: %v", err)
	}
	defer d.Close()
	out, err := d.DecodeAll(b, nil)
	if err != nil {
		t.Fatalf("zstd decode: %v", err)
	}
	return out
}

// TestOwRevision covers revisions (docs/design.md "Revisions").
func TestOwRevision(t *testing.T) {
	n := startTestNode(t, "")
	id := "rev-a"
	cid := n.srv.node.ClusterID()
	form := regexp.MustCompile(`^(.+):([0-9]+):([0-9]+)$`)

	r1 := owSession(t, n, id, ctOneTurnLog()...).GetRevision()
	m := form.FindStringSubmatch(r1)
	if m == nil {
		t.Fatalf("revision %q: want the form <cluster-id>:<n>:<n>", r1)
	}
	if m[1] != cid {
		t.Errorf("revision %q: got cluster id %q, want %q", r1, m[1], cid)
	}
	if got := owRevision(t, n, id); got != r1 {
		t.Fatalf("ListSnapshots revision: got %q, want the Append's %q", got, r1)
	}

	unchanged := []struct {
		name string
		op   func() string // returns the revision the call reported, if any
	}{
		{"Inspect", func() string {
			v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
			if err != nil {
				t.Fatalf("Inspect: %v", err)
			}
			return v.GetRevision()
		}},
		{"ReadFrom", func() string { ctReadFrom(t, n, id, 0).GetEvents(); return "" }},
		{"List", func() string { owListAll(t, n, "", 0); return "" }},
		{"ReadRaw", func() string {
			if _, err := n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id}); err != nil {
				t.Fatalf("ReadRaw: %v", err)
			}
			return ""
		}},
		{"Load that needs no repair", func() string {
			v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if v.GetRepaired() {
				t.Errorf("Load of a balanced log: got repaired=true")
			}
			return v.GetRevision()
		}},
	}
	for _, c := range unchanged {
		t.Run("unchanged by "+c.name, func(t *testing.T) {
			if got := c.op(); got != "" && got != r1 {
				t.Errorf("%s reported revision %q, want %q", c.name, got, r1)
			}
			if got := owRevision(t, n, id); got != r1 {
				t.Errorf("revision after %s: got %q, want %q", c.name, got, r1)
			}
		})
	}

	var r2, r3 string
	t.Run("changed by every Append", func(t *testing.T) {
		a := owAppend(t, n, id, 0, owOpenTurn(6, 2)[0])
		b := owAppend(t, n, id, 0, owOpenTurn(6, 2)[1])
		r2 = b.GetRevision()
		if a.GetRevision() == r1 || r2 == a.GetRevision() || r2 == r1 {
			t.Errorf("revisions %q → %q → %q: want each Append to change it", r1, a.GetRevision(), r2)
		}
		if got := owRevision(t, n, id); got != r2 {
			t.Errorf("ListSnapshots revision: got %q, want %q", got, r2)
		}
		if !form.MatchString(r2) {
			t.Errorf("revision %q: want the form <cluster-id>:<n>:<n>", r2)
		}
	})
	t.Run("unchanged by an Inspect that adds closers in memory", func(t *testing.T) {
		v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Inspect: %v", err)
		}
		if v.GetRevision() != r2 || owRevision(t, n, id) != r2 {
			t.Errorf("Inspect with closers: got revision %q (listed %q), want %q", v.GetRevision(), owRevision(t, n, id), r2)
		}
	})
	t.Run("changed by a committed repair", func(t *testing.T) {
		v, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Load: %v", err)
		}
		r3 = v.GetRevision()
		if !v.GetRepaired() || r3 == r2 {
			t.Errorf("repairing Load: got repaired=%v revision %q, want repaired=true and a revision other than %q", v.GetRepaired(), r3, r2)
		}
		if got := owRevision(t, n, id); got != r3 {
			t.Errorf("ListSnapshots revision after the repair: got %q, want the Load's %q", got, r3)
		}
	})
	t.Run("a second session has its own revision of the same cluster", func(t *testing.T) {
		r := owSession(t, n, "rev-b", ctOneTurnLog()...).GetRevision()
		m := form.FindStringSubmatch(r)
		if m == nil || m[1] != cid {
			t.Errorf("revision %q: want cluster id %q", r, cid)
		}
		if got := owRevision(t, n, id); got != r3 {
			t.Errorf("rev-a's revision after rev-b's append: got %q, want %q", got, r3)
		}
	})

	t.Run("equal across a restart", func(t *testing.T) {
		events := ctReadFrom(t, n, id, 0).GetEvents()
		n2 := n.Restart()
		// The restarted node is ready (startTestNode waited for it) and no
		// write has happened since: a linearizable read must still answer.
		stale, err := n2.Client.ListSnapshots(owCtx(t, 5*time.Second), &sessionpb.ListSnapshotsRequest{Consistency: sessionpb.Consistency_STALE})
		if err != nil || len(stale.GetSnapshots()) != 2 {
			t.Fatalf("STALE ListSnapshots after restart: got %v, %v, want 2 sessions", stale, err)
		}
		if _, err := n2.Client.ListSnapshots(owCtx(t, 5*time.Second), &sessionpb.ListSnapshotsRequest{}); err != nil {
			t.Fatalf("LINEARIZABLE ListSnapshots after a restart with no write since: got %v, want an answer within 5s", err)
		}
		if got := owRevision(t, n2, id); got != r3 {
			t.Errorf("revision after restart: got %q, want %q", got, r3)
		}
		v, err := n2.Client.Inspect(n2.ctx(), &sessionpb.InspectRequest{SessionId: id})
		if err != nil {
			t.Fatalf("Inspect after restart: %v", err)
		}
		if v.GetRevision() != r3 {
			t.Errorf("Inspect revision after restart: got %q, want %q", v.GetRevision(), r3)
		}
		ctEqualEvents(t, "ReadFrom after restart", ctReadFrom(t, n2, id, 0).GetEvents(), events)
		r4 := owAppend(t, n2, id, 0, owTurnStart(10, 3)).GetRevision()
		if r4 == r3 {
			t.Errorf("Append after restart: revision %q unchanged", r4)
		}
	})

	t.Run("another cluster never produces an equal revision", func(t *testing.T) {
		other := startTestNode(t, "")
		r := owSession(t, other, id, ctOneTurnLog()...).GetRevision()
		if r == r1 {
			t.Errorf("two clusters, same operations: both revisions are %q, want them to differ", r)
		}
		if other.srv.node.ClusterID() == cid {
			t.Errorf("two clusters share the cluster id %q", cid)
		}
	})
}

// TestOwList covers List / ListSnapshots: materialised sessions only, paging
// and cwd_prefix.
func TestOwList(t *testing.T) {
	n := startTestNode(t, "")
	sessions := []struct {
		id  string
		cwd string
	}{
		{"list-1", "/w/alpha"},
		{"list-2", "/w/alpha/sub"},
		{"list-3", "/w/beta"},
		{"list-4", ""},
		{"list-5", "/other"},
	}
	revs := map[string]string{}
	for _, s := range sessions {
		ctCreate(t, n, ctMeta(s.id, s.cwd))
		revs[s.id] = owAppend(t, n, s.id, 0, ctOneTurnLog()...).GetRevision()
	}
	ctCreate(t, n, ctMeta("list-lazy", ""))
	ctCreate(t, n, ctMeta("list-empty-batch", ""))
	if _, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: "list-empty-batch"}); err != nil {
		t.Fatalf("empty Append: %v", err)
	}

	ids := func(hs []*sessionpb.SessionHeader) []string {
		out := make([]string, len(hs))
		for i, h := range hs {
			out[i] = h.GetId()
		}
		slices.Sort(out)
		return out
	}
	for _, c := range []struct {
		prefix string
		want   []string
	}{
		{"", []string{"list-1", "list-2", "list-3", "list-4", "list-5"}},
		{"/w/", []string{"list-1", "list-2", "list-3"}},
		{"/w/alpha", []string{"list-1", "list-2"}},
		{"/nope", []string{}},
	} {
		for _, size := range []int32{0, 2} {
			t.Run(fmt.Sprintf("cwd_prefix %q page_size %d", c.prefix, size), func(t *testing.T) {
				hs := owListAll(t, n, c.prefix, size)
				if got := ids(hs); !slices.Equal(got, c.want) {
					t.Errorf("List: got %v, want each of %v exactly once", got, c.want)
				}
				for _, h := range hs {
					if h.GetVersion() != 0 || h.GetCreatedAt() != 1000 {
						t.Errorf("List header %v: want version 0 createdAt 1000", h)
					}
				}
				snaps := owListAllSnapshots(t, n, c.prefix, size)
				var shs []*sessionpb.SessionHeader
				for _, s := range snaps {
					shs = append(shs, s.GetHeader())
					if want := revs[s.GetHeader().GetId()]; s.GetRevision() != want {
						t.Errorf("ListSnapshots %q: got revision %q, want %q", s.GetHeader().GetId(), s.GetRevision(), want)
					}
				}
				if got := ids(shs); !slices.Equal(got, c.want) {
					t.Errorf("ListSnapshots: got %v, want each of %v exactly once", got, c.want)
				}
			})
		}
	}
	t.Run("by last append with an id prefix", func(t *testing.T) {
		byLast := &sessionpb.ListSnapshotsRequest{IdPrefix: "list-", Order: sessionpb.ListOrder_LIST_ORDER_LAST_APPEND, PageSize: 2}
		snaps := owPages(t, "ListSnapshots", "snapshots", 2, func(token string) ([]*sessionpb.SessionSnapshot, string, error) {
			byLast.PageToken = token
			r, err := n.Client.ListSnapshots(n.ctx(), byLast)
			return r.GetSnapshots(), r.GetNextPageToken(), err
		})
		if len(snaps) != len(sessions) || !slices.IsSortedFunc(snaps, func(a, b *sessionpb.SessionSnapshot) int {
			return cmp.Or(cmp.Compare(b.GetLastAppendUnixMs(), a.GetLastAppendUnixMs()), strings.Compare(a.GetHeader().GetId(), b.GetHeader().GetId()))
		}) {
			t.Errorf("ListSnapshots by last append: got %v, want the %d sessions newest first", snaps, len(sessions))
		}
		for _, s := range snaps {
			if s.GetNextSeq() != int64(len(ctOneTurnLog())) || s.GetLastAppendUnixMs() <= 0 || s.GetLeaseHeld() {
				t.Errorf("ListSnapshots by last append: %v, want %d events, a last append and no lease", s, len(ctOneTurnLog()))
			}
		}
		first, err := n.Client.ListSnapshots(n.ctx(), &sessionpb.ListSnapshotsRequest{PageSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		byLast.PageToken = first.GetNextPageToken()
		_, err = n.Client.ListSnapshots(n.ctx(), byLast)
		ctWantErrContains(t, "ListSnapshots by last append with an id-order token", err, sessionstore.ReasonInvalidArgument, "page token belongs to a listing in id order")
	})
	t.Run("headers carry the cwd", func(t *testing.T) {
		for _, h := range owListAll(t, n, "/w/beta", 0) {
			if h.GetId() != "list-3" || h.Cwd == nil || h.GetCwd() != "/w/beta" {
				t.Errorf("List /w/beta: got header %v, want list-3 with cwd /w/beta", h)
			}
		}
	})
}

// TestOwWatch: Watch streams the stored events, then each new batch, in
// order with no gap or duplicate, and ends when cancelled.
func TestOwWatch(t *testing.T) {
	n := startTestNode(t, "")
	id := "watch-a"
	log := ctOneTurnLog()
	owSession(t, n, id, log[:3]...)

	ctx, cancel := context.WithCancel(n.ctx())
	defer cancel()
	recv, err := n.Client.Watch(ctx, &sessionpb.WatchRequest{SessionId: id, FromSeq: 0})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	type msg struct {
		m   *sessionpb.WatchResponse
		err error
	}
	msgs := make(chan msg, 64)
	go func() {
		for {
			m, err := recv()
			msgs <- msg{m, err}
			if err != nil {
				return
			}
		}
	}()
	var got []string
	collect := func(want int) {
		t.Helper()
		timeout := time.After(20 * time.Second)
		for len(got) < want {
			select {
			case r := <-msgs:
				if r.err != nil {
					t.Fatalf("Watch recv after %d events: %v", len(got), r.err)
				}
				if len(r.m.GetEvents()) > 0 && r.m.GetRevision() == "" {
					t.Errorf("Watch message with events has no revision")
				}
				got = append(got, r.m.GetEvents()...)
			case <-timeout:
				t.Fatalf("Watch: got %d events within 20s, want %d", len(got), want)
			}
		}
	}
	collect(3)
	ctEqualEvents(t, "Watch stored events", got, log[:3])

	owAppend(t, n, id, 0, log[3:5]...)
	owAppend(t, n, id, 0, log[5])
	collect(6)
	ctEqualEvents(t, "Watch events after two appends", got, log)
	for i, ev := range got {
		if s := owSeq(t, ev); s != int64(i) {
			t.Errorf("Watch event %d: got seq %d, want %d", i, s, i)
		}
	}

	cancel()
	timeout := time.After(10 * time.Second)
	for {
		select {
		case r := <-msgs:
			if r.err == nil {
				if len(r.m.GetEvents()) > 0 {
					t.Errorf("Watch after cancel: got more events %v", r.m.GetEvents())
				}
				continue
			}
			if errors.Is(r.err, io.EOF) {
				t.Logf("Watch ended with EOF after cancel")
			}
			return
		case <-timeout:
			t.Fatalf("Watch did not end within 10s of cancel")
		}
	}
}

// TestOwWatchFromSeq: from_seq skips the earlier events.
func TestOwWatchFromSeq(t *testing.T) {
	n := startTestNode(t, "")
	id := "watch-from"
	owSession(t, n, id, ctOneTurnLog()...)
	ctx, cancel := context.WithCancel(n.ctx())
	defer cancel()
	recv, err := n.Client.Watch(ctx, &sessionpb.WatchRequest{SessionId: id, FromSeq: 4})
	if err != nil {
		t.Fatalf("Watch: %v", err)
	}
	var got []string
	for len(got) < 2 {
		m, err := recv()
		if err != nil {
			t.Fatalf("Watch recv: %v", err)
		}
		got = append(got, m.GetEvents()...)
	}
	ctEqualEvents(t, "Watch from seq 4", got, ctOneTurnLog()[4:])
}

// TestOwHTTP covers the HTTP port: health, readiness, metrics and the
// artifact downloads.
func TestOwHTTP(t *testing.T) {
	n := startTestNode(t, "")
	base := "http://" + n.srv.httpAddr
	id := "http/a b%é"
	owSession(t, n, id, ctOneTurnLog()...)
	rev := owRevision(t, n, id)

	for _, p := range []string{"/healthz", "/readyz"} {
		t.Run("GET "+p, func(t *testing.T) {
			if resp, body := owGet(t, n, base+p); resp.StatusCode != http.StatusOK {
				t.Errorf("GET %s: got %d %q, want 200", p, resp.StatusCode, body)
			}
		})
	}
	t.Run("GET /metrics", func(t *testing.T) {
		resp, body := owGet(t, n, base+"/metrics")
		if resp.StatusCode != http.StatusOK || !bytes.Contains(body, []byte("sessionstore_rpc_requests_total")) {
			t.Errorf("GET /metrics: got %d, want 200 with sessionstore_rpc_requests_total in:\n%.2000s", resp.StatusCode, body)
		}
	})

	rr, err := n.Client.ReadRaw(n.ctx(), &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadRaw: %v", err)
	}
	t.Run("ReadRaw is the header line and the stored events", func(t *testing.T) {
		want := fmt.Sprintf(`{"type":"session","version":0,"id":"%s","createdAt":1000,"delegationDepth":0}`, id) + "\n" +
			strings.Join(ctOneTurnLog(), "\n") + "\n"
		if string(rr.GetContent()) != want || rr.GetFilename() != "session.jsonl" {
			t.Errorf("ReadRaw: got filename %q content\n%s\nwant session.jsonl\n%s", rr.GetFilename(), rr.GetContent(), want)
		}
	})

	path := base + "/v1/sessions/" + url.PathEscape(id)
	checkDownload := func(t *testing.T, suffix string, decode func([]byte) []byte) {
		t.Helper()
		resp, body := owGet(t, n, path+suffix)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got %d %q, want 200", suffix, resp.StatusCode, body)
		}
		if got := resp.Header.Get("ETag"); got != strconv.Quote(rev) {
			t.Errorf("GET %s: got ETag %q, want %q", suffix, got, strconv.Quote(rev))
		}
		if resp.ContentLength != int64(len(body)) {
			t.Errorf("GET %s: got Content-Length %d, want %d (the body's length)", suffix, resp.ContentLength, len(body))
		}
		if got := decode(body); !bytes.Equal(got, rr.GetContent()) {
			t.Errorf("GET %s: got\n%s\nwant ReadRaw's\n%s", suffix, got, rr.GetContent())
		}
	}
	plain := func(b []byte) []byte { return b }
	unzstd := func(b []byte) []byte { return owDecodeZstd(t, b) }
	t.Run("GET session.jsonl", func(t *testing.T) { checkDownload(t, "/session.jsonl", plain) })
	t.Run("GET session.jsonl.zstd", func(t *testing.T) { checkDownload(t, "/session.jsonl.zstd", unzstd) })
	t.Run("GET session.jsonl.zstd once the artifact is written", func(t *testing.T) {
		n.WaitArtifacts()
		checkDownload(t, "/session.jsonl.zstd", unzstd)
		checkDownload(t, "/session.jsonl", plain)
	})
	t.Run("Locate's url downloads the artifact", func(t *testing.T) {
		loc, err := n.Client.Locate(n.ctx(), &sessionpb.LocateRequest{Header: ctMeta(id, "")})
		if err != nil {
			t.Fatalf("Locate: %v", err)
		}
		resp, body := owGet(t, n, loc.GetUrl())
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: got %d %q, want 200", loc.GetUrl(), resp.StatusCode, body)
		}
		if got := owDecodeZstd(t, body); !bytes.Equal(got, rr.GetContent()) {
			t.Errorf("GET %s: decoded content differs from ReadRaw's", loc.GetUrl())
		}
	})
	for _, suffix := range []string{"/session.jsonl", "/session.jsonl.zstd"} {
		t.Run("unknown id "+suffix, func(t *testing.T) {
			for _, unknown := range []string{"no-such-session", "no/such session"} {
				u := base + "/v1/sessions/" + url.PathEscape(unknown) + suffix
				if resp, body := owGet(t, n, u); resp.StatusCode != http.StatusNotFound {
					t.Errorf("GET %s: got %d %q, want 404", u, resp.StatusCode, body)
				}
			}
		})
	}
	t.Run("a created but never materialised session is 404", func(t *testing.T) {
		ctCreate(t, n, ctMeta("http-lazy", ""))
		if resp, body := owGet(t, n, base+"/v1/sessions/http-lazy/session.jsonl"); resp.StatusCode != http.StatusNotFound {
			t.Errorf("GET unmaterialised: got %d %q, want 404", resp.StatusCode, body)
		}
	})
}

// TestOwReflection: server reflection lists the persistence and health
// services (what `grpcurl -plaintext 127.0.0.1:7400 list` shows), and the
// health service answers SERVING.
func TestOwReflection(t *testing.T) {
	n := startTestNode(t, "")
	conn := n.Client.Conn()
	ctx := n.ctx()

	stream, err := reflectionpb.NewServerReflectionClient(conn).ServerReflectionInfo(ctx)
	if err != nil {
		t.Fatalf("ServerReflectionInfo: %v", err)
	}
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_ListServices{ListServices: ""}}); err != nil {
		t.Fatalf("send list_services: %v", err)
	}
	resp, err := stream.Recv()
	if err != nil {
		t.Fatalf("recv list_services: %v", err)
	}
	var names []string
	for _, s := range resp.GetListServicesResponse().GetService() {
		names = append(names, s.GetName())
	}
	for _, want := range []string{"sessionstore.v1.SessionPersistence", "grpc.health.v1.Health"} {
		if !slices.Contains(names, want) {
			t.Errorf("reflection list: got %v, want it to contain %s", names, want)
		}
	}
	// grpcurl describe: the file holding the service resolves.
	if err := stream.Send(&reflectionpb.ServerReflectionRequest{
		MessageRequest: &reflectionpb.ServerReflectionRequest_FileContainingSymbol{FileContainingSymbol: "sessionstore.v1.SessionPersistence"}}); err != nil {
		t.Fatalf("send file_containing_symbol: %v", err)
	}
	resp, err = stream.Recv()
	if err != nil {
		t.Fatalf("recv file_containing_symbol: %v", err)
	}
	if len(resp.GetFileDescriptorResponse().GetFileDescriptorProto()) == 0 {
		t.Errorf("file_containing_symbol sessionstore.v1.SessionPersistence: got %v, want a file descriptor", resp)
	}
	if err := stream.CloseSend(); err != nil {
		t.Errorf("CloseSend: %v", err)
	}

	hc := healthpb.NewHealthClient(conn)
	for _, svc := range []string{"", "sessionstore.v1.SessionPersistence"} {
		clustertest.Eventually(t, 10*time.Second, func() error {
			r, err := hc.Check(ctx, &healthpb.HealthCheckRequest{Service: svc})
			if err != nil || r.GetStatus() != healthpb.HealthCheckResponse_SERVING {
				return fmt.Errorf("health check of %q: got %v, %v, want SERVING", svc, r.GetStatus(), err)
			}
			return nil
		})
	}
}
