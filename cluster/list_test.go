package cluster

import (
	"testing"

	"github.com/sessionstore/sessionstore"
)

// A page token is read back as written, in its own order only; anything
// else, tokens of builds before versioned tokens included, is refused.
func TestPageTokens(t *testing.T) {
	byID, byLast := sessionstore.ListByID, sessionstore.ListByLastAppend
	for _, tok := range []pageToken{{order: byID, id: "a"}, {order: byLast, lastAppend: 1 << 40, id: "é/x"}, {order: byLast, lastAppend: -1, id: "z"}} {
		got, err := decodePageToken(tok.encode(), tok.order)
		if err != nil || got != tok {
			t.Errorf("%+v read back as %+v, %v", tok, got, err)
		}
		other := byID + byLast - tok.order
		if _, err := decodePageToken(tok.encode(), other); err == nil {
			t.Errorf("%+v accepted by a listing in order %d", tok, other)
		}
	}
	for _, bad := range []string{"a", "%2Fa", tokenPrefix, tokenPrefix + "AA", tokenPrefix + "AWE", tokenPrefix + "Ag", tokenPrefix + "!!", "%v2.AGE"} {
		if _, err := decodePageToken(bad, byID); err == nil {
			t.Errorf("page token %q accepted", bad)
		}
	}
}

// FuzzPageToken: whatever a client sends as a page token, reading it never
// panics, and a token read is written back to the same position.
func FuzzPageToken(f *testing.F) {
	f.Add(pageToken{order: sessionstore.ListByLastAppend, lastAppend: 5, id: "s"}.encode(), true)
	f.Add(pageToken{order: sessionstore.ListByID, id: "s"}.encode(), false)
	f.Add("garbage", false)
	f.Fuzz(func(t *testing.T, s string, last bool) {
		order := sessionstore.ListByID
		if last {
			order = sessionstore.ListByLastAppend
		}
		tok, err := decodePageToken(s, order)
		if err != nil || s == "" {
			return
		}
		if again, err := decodePageToken(tok.encode(), order); err != nil || again != tok {
			t.Fatalf("%q read as %+v, written back and read as %+v, %v", s, tok, again, err)
		}
	})
}
