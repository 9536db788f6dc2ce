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
	for _, bad := range []string{tokenPrefix, tokenPrefix + "AA", tokenPrefix + "AWE", tokenPrefix + "Ag", tokenPrefix + "!!", "%v2.AGE", "%zz"} {
		if _, err := decodePageToken(bad, byID); err == nil {
			t.Errorf("page token %q accepted", bad)
		}
	}
	// An older build's token (the last id, escaped) still pages in id order.
	for tok, id := range map[string]string{"a": "a", "%2Fa": "/a"} {
		if got, err := decodePageToken(tok, byID); err != nil || got != (pageToken{order: byID, id: id}) {
			t.Errorf("older token %q read as %+v, %v", tok, got, err)
		}
		if _, err := decodePageToken(tok, byLast); err == nil {
			t.Errorf("older token %q accepted in last-append order", tok)
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
