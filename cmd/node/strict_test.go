package main

import (
	"path/filepath"
	"testing"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// The recorded sessions, legacy shapes included, append in strict mode (the
// default), batch by batch as an agent host's write-behind buffer sends them
// (open turns in between), and every answer says the log reads.
func TestStrict_RecordedSessionsAppend(t *testing.T) {
	n := ctSharedNode(t)
	ss, err := loadReplay(filepath.Join("..", "..", "testdata", "recorded"))
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range ss {
		h := sessionpb.HeaderFromDomain(s.header)
		h.Id = "strict-" + s.header.ID
		c, err := n.Client.Create(n.ctx(), &sessionpb.CreateRequest{Header: h})
		if err != nil || c.Readable == nil || !*c.Readable {
			t.Fatalf("%s: strict Create: %v %v", s.name, c, err)
		}
		for _, b := range s.batches {
			r, err := n.Client.Append(n.ctx(), &sessionpb.AppendRequest{SessionId: h.Id, Events: s.events[b.start:b.end]})
			if err != nil || r.Readable == nil || !*r.Readable {
				t.Fatalf("%s: strict Append of events [%d, %d): %v %v", s.name, b.start, b.end, r, err)
			}
		}
		if v := ctInspect(t, n, h.Id); int(v.GetNextSeq()) != len(s.events) {
			t.Errorf("%s: next seq %d, want %d", s.name, v.GetNextSeq(), len(s.events))
		}
	}
}
