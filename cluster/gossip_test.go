package cluster

import (
	"encoding/json"
	"reflect"
	"testing"

	"github.com/sessionstore/sessionstore"
)

// The gossiped free space and last contact are optional keys: a build before
// them (or a node that does not know them) leaves them out, and a 0 is still
// said. Members turns them into the member's values, unknown when absent.
func TestGossipedMemberValues(t *testing.T) {
	for _, tc := range []struct {
		meta string
		want sessionstore.Member
	}{
		{`{"id":"a","raft":"r","api":"x","applied":7}`, // an older build
			sessionstore.Member{AppliedIndex: new(uint64(7)), DiskLow: new(false)}},
		{`{"id":"a","raft":"r","api":"x","cmd":10,"disk_low":true,"free":3,"lc":0}`,
			sessionstore.Member{AppliedIndex: new(uint64(0)), DiskLow: new(true), CommandVersion: new(uint32(10)),
				DiskFreeBytes: new(int64(3 << 20)), LastContactMs: new(int64(0))}},
		{`{"id":"a","raft":"r","api":"x","lc":4,"free":null}`,
			sessionstore.Member{AppliedIndex: new(uint64(0)), DiskLow: new(false), LastContactMs: new(int64(4000))}},
	} {
		var meta memberMeta
		if err := json.Unmarshal([]byte(tc.meta), &meta); err != nil {
			t.Fatalf("%s: %v", tc.meta, err)
		}
		var got sessionstore.Member
		gossipedValues(&got, meta)
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: member values %+v, want %+v", tc.meta, got, tc.want)
		}
	}
	for meta, want := range map[memberMeta]string{
		{ID: "a"}: `{"id":"a","raft":"","api":""}`,
		{ID: "a", FreeMiB: knownInt(0), ContactS: knownInt(0)}: `{"id":"a","raft":"","api":"","free":0,"lc":0}`,
	} {
		if b, err := json.Marshal(meta); err != nil || string(b) != want {
			t.Errorf("%+v gossips %s (%v), want %s", meta, b, err, want)
		}
	}
}

// Metadata over memberlist's limit drops the values only Members shows
// before the node would publish none at all.
func TestNodeMetaDropsAdvisoryValuesFirst(t *testing.T) {
	g := &gossip{meta: memberMeta{ID: "a", FreeMiB: knownInt(1 << 40), ContactS: knownInt(1)}}
	full := len(g.NodeMeta(512))
	if got := string(g.NodeMeta(full - 1)); got != `{"id":"a","raft":"","api":""}` {
		t.Errorf("metadata one byte over the limit: %s", got)
	}
	if got := g.NodeMeta(10); got != nil {
		t.Errorf("metadata over the limit without them: %s", got)
	}
}
