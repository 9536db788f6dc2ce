package cluster

import (
	"strings"
	"testing"
)

// A node without state expecting other servers needs someone to find.
func TestCheckPeersConfigured(t *testing.T) {
	for _, tc := range []struct {
		name     string
		expect   int
		join     []string
		hasState bool
		errHas   string
	}{
		{name: "lone node, default", expect: 0},
		{name: "lone node, expect 1", expect: 1},
		{name: "expect 3 with seeds", expect: 3, join: []string{"h2:7402", "h3:7402"}},
		{name: "expect 3 with state, no seeds (restart)", expect: 3, hasState: true},
		{name: "expect 3, no seeds", expect: 3, errHas: "--bootstrap-expect 3 but no peers are configured (no --join): this node would wait forever for 2 other servers"},
		{name: "expect 2, no seeds", expect: 2, errHas: "--join"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := Config{BootstrapExpect: tc.expect, Join: tc.join}.checkPeersConfigured(tc.hasState)
			if tc.errHas == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.errHas) {
				t.Fatalf("err = %v, want it to contain %q", err, tc.errHas)
			}
		})
	}
}
