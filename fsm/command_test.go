package fsm

import (
	"fmt"
	"math"
	"testing"

	"github.com/sessionstore/sessionstore/fsm/fsmpb"
)

func TestRevision(t *testing.T) {
	for _, tc := range []struct {
		cluster   string
		inc, last uint64
		want      string
	}{
		{"c2b35e42c8e74eb2", 6, 9, "c2b35e42c8e74eb2:6:9"},
		{"", 0, 0, ":0:0"},
		{"x", math.MaxUint64, 1, "x:18446744073709551615:1"},
	} {
		got := Revision(tc.cluster, &fsmpb.SessionRecord{Incarnation: tc.inc, LastChangeIndex: tc.last})
		if got != tc.want {
			t.Errorf("Revision(%q, %d, %d) = %q, want %q", tc.cluster, tc.inc, tc.last, got, tc.want)
		}
		// The text clients have always seen.
		if old := fmt.Sprintf("%s:%d:%d", tc.cluster, tc.inc, tc.last); got != old {
			t.Errorf("%q differs from the %%s:%%d:%%d form %q", got, old)
		}
	}
}

func TestHeaderSizes(t *testing.T) {
	cwd := "/home/u/pro\"j"
	rec := func(inc uint64, id string) *fsmpb.SessionRecord {
		return &fsmpb.SessionRecord{Incarnation: inc, Header: &fsmpb.Header{Id: id, CreatedAt: 1, Cwd: &cwd}}
	}
	h := headerSizes{}
	a := rec(5, "a")
	if got, want := h.size("a", a), headerBytes(a.Header); got != want || want == 0 {
		t.Fatalf("size %d, want headerBytes %d", got, want)
	}
	// Another incarnation of the same id has its own header.
	b := rec(9, "a-longer-id")
	if got, want := h.size("a", b), headerBytes(b.Header); got != want {
		t.Fatalf("new incarnation: size %d, want %d", got, want)
	}
	if len(h) != 2 {
		t.Fatalf("%d entries, want 2", len(h))
	}
	for i := 0; i < maxHeaderSizes+10; i++ {
		h.size(fmt.Sprint("s", i), rec(uint64(i), "x"))
	}
	if len(h) > maxHeaderSizes {
		t.Fatalf("%d entries, bound %d", len(h), maxHeaderSizes)
	}
	var none headerSizes
	if got, want := none.size("a", a), headerBytes(a.Header); got != want {
		t.Fatalf("nil cache: %d, want %d", got, want)
	}
}
