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
