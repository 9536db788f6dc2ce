package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
)

func TestStreams_Acquire(t *testing.T) {
	type open struct {
		kind      StreamKind
		principal string
		refused   bool
	}
	for _, tc := range []struct {
		name        string
		read, watch StreamLimit
		opens       []open
	}{
		{"unlimited", StreamLimit{}, StreamLimit{}, []open{{StreamRead, "a", false}, {StreamRead, "a", false}, {StreamWatch, "a", false}}},
		{"per principal", StreamLimit{Node: 10, PerPrincipal: 2}, StreamLimit{}, []open{
			{StreamRead, "a", false}, {StreamRead, "a", false}, {StreamRead, "a", true}, {StreamRead, "b", false}, {StreamWatch, "a", false}}},
		{"per node", StreamLimit{Node: 2, PerPrincipal: 2}, StreamLimit{Node: 1}, []open{
			{StreamRead, "a", false}, {StreamRead, "b", false}, {StreamRead, "c", true}, {StreamWatch, "c", false}, {StreamWatch, "d", true}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := NewStreams(tc.read, tc.watch, nil)
			var releases []func()
			for i, o := range tc.opens {
				rel, err := s.Acquire(o.kind, o.principal)
				if o.refused {
					var de *sessionstore.Error
					if !errors.As(err, &de) || de.Reason != sessionstore.ReasonQuotaExceeded {
						t.Fatalf("open %d (%s by %q): %v, want QUOTA_EXCEEDED", i, o.kind, o.principal, err)
					}
					continue
				}
				if err != nil {
					t.Fatalf("open %d (%s by %q): %v", i, o.kind, o.principal, err)
				}
				releases = append(releases, rel)
			}
			// Released slots are free again (a release twice counts once).
			for _, rel := range releases {
				rel()
				rel()
			}
			for i, o := range tc.opens {
				if _, err := s.Acquire(o.kind, o.principal); err != nil && !o.refused {
					t.Fatalf("reopen %d after release: %v", i, err)
				}
			}
		})
	}
}

// A send that does not complete within the timeout fails the stream (the
// handler returns); the stall is reported once.
func TestDeadlineSender_GivesUpOnBlockedSend(t *testing.T) {
	block := make(chan struct{})
	defer close(block)
	sent := 0
	stalls := 0
	d := newDeadlineSender(context.Background(), time.Second, func(any) error {
		if sent++; sent == 2 {
			<-block // the client stopped reading
		}
		return nil
	}, func() { stalls++ })
	defer d.Close()
	if err := d.Send(1); err != nil {
		t.Fatal(err)
	}
	var de *sessionstore.Error
	if err := d.Send(2); !errors.As(err, &de) || de.Reason != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("blocked send: %v, want the stream ended", err)
	}
	if err := d.Send(3); err == nil {
		t.Fatal("send after a stalled one succeeded")
	}
	if stalls != 1 {
		t.Fatalf("stalls reported: %d, want 1", stalls)
	}
}
