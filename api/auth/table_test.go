package auth

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"google.golang.org/grpc/metadata"

	"github.com/sessionstore/sessionstore"
)

const sample = `# token                               name   permissions       prefixes        options
alice-token-0123456789abcdef            alice  read,write        alice/,shared/
sha256:` + "%s" + `   bob    read
cert:ops.example                         ops    read,write,admin  *               rate=50 burst=10
carol-token-0123456789abcdef            carol  write             *               max_sessions=3
carol-rotated-0123456789abcdef          carol  write             *               max_sessions=3
`

func sampleTable(t *testing.T) *Table {
	t.Helper()
	h := sha256.Sum256([]byte("bob-token-0123456789abcdef"))
	tab, err := ParseTable([]byte(strings.Replace(sample, "%s", hex.EncodeToString(h[:]), 1)))
	if err != nil {
		t.Fatal(err)
	}
	return tab
}

func TestParseTable(t *testing.T) {
	tab := sampleTable(t)
	cases := []struct {
		cred     string
		name     string
		perms    Perm
		covers   []string
		excludes []string
	}{
		{"alice-token-0123456789abcdef", "alice", Read | Write, []string{"alice/1", "shared/x"}, []string{"bob/1", "alic"}},
		{"bob-token-0123456789abcdef", "bob", Read, []string{"anything"}, nil},
		{"carol-token-0123456789abcdef", "carol", Write, []string{"x"}, nil},
		{"carol-rotated-0123456789abcdef", "carol", Write, []string{"x"}, nil},
	}
	for _, c := range cases {
		p := tab.Token(c.cred)
		if p == nil || p.Name != c.name || p.Perms != c.perms {
			t.Fatalf("token %s: got %+v, want %s %s", c.cred, p, c.name, c.perms)
		}
		for _, id := range c.covers {
			if !p.Covers(id) {
				t.Errorf("%s should cover %q", c.name, id)
			}
		}
		for _, id := range c.excludes {
			if p.Covers(id) {
				t.Errorf("%s should not cover %q", c.name, id)
			}
		}
	}
	if tab.Token("unknown-token-0123456789abcdef") != nil || tab.Token("") != nil {
		t.Fatal("unknown token accepted")
	}
	ops := tab.Cert("ops.example")
	if ops == nil || !ops.Has(Read|Write|Admin) || ops.Rate != 50 || ops.Burst != 10 {
		t.Fatalf("cert principal: %+v", ops)
	}
	if tab.Name("carol").MaxSessions != 3 || tab.Len() != 4 {
		t.Fatalf("carol %+v, len %d", tab.Name("carol"), tab.Len())
	}
	if p := tab.Token("alice-token-0123456789abcdef"); p.Has(Admin) {
		t.Fatal("alice is not admin")
	}
}

func TestParseTableHashIgnoresLayout(t *testing.T) {
	a, err := ParseTable([]byte("token-aaaaaaaaaaaaaaaa x read\ntoken-bbbbbbbbbbbbbbbb y write p/\n"))
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.Sum256([]byte("token-aaaaaaaaaaaaaaaa"))
	b, err := ParseTable([]byte("# reordered, hashed\n  token-bbbbbbbbbbbbbbbb   y  write  p/ \n\nsha256:" + hex.EncodeToString(h[:]) + " x read *\n"))
	if err != nil {
		t.Fatal(err)
	}
	if a.Hash() != b.Hash() {
		t.Fatalf("same content, different hashes %s %s", a.Hash(), b.Hash())
	}
	c, _ := ParseTable([]byte("token-aaaaaaaaaaaaaaaa x read,write\ntoken-bbbbbbbbbbbbbbbb y write p/\n"))
	if c.Hash() == a.Hash() {
		t.Fatal("different permissions, same hash")
	}
}

func TestParseTableErrors(t *testing.T) {
	cases := []struct{ file, want string }{
		{"short x read", "line 1: token is 5 characters"},
		{"token-aaaaaaaaaaaaaaaa x", "line 1: want <credential>"},
		{"token-aaaaaaaaaaaaaaaa x fly", `permission "fly"`},
		{"token-aaaaaaaaaaaaaaaa x/y read", `name "x/y"`},
		{"token-aaaaaaaaaaaaaaaa x read a,,b", "empty session-id prefix"},
		{"token-aaaaaaaaaaaaaaaa x read * color=red", `unknown option "color"`},
		{"token-aaaaaaaaaaaaaaaa x read * rate=-1", "rate="},
		{"token-aaaaaaaaaaaaaaaa x read * rate=NaN", "rate="},
		{"token-aaaaaaaaaaaaaaaa x read * max_sessions=x", "max_sessions="},
		{"sha256:abcd x read", "64 hex digits"},
		{"cert: x read", "empty certificate name"},
		{"token-aaaaaaaaaaaaaaaa x read\ntoken-aaaaaaaaaaaaaaaa y read", "line 2: token listed twice"},
		{"cert:a x read\ncert:a y read", "line 2: certificate name"},
		{"token-aaaaaaaaaaaaaaaa x read\ntoken-bbbbbbbbbbbbbbbb x write", `line 2: name "x" appears again`},
		{"\xff", "not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := ParseTable([]byte(c.file))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: got %v, want an error containing %q", c.file, err, c.want)
		}
	}
}

func TestAuthenticate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte("alice-token-0123456789abcdef alice read\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := New(path, nil)
	if err != nil {
		t.Fatal(err)
	}
	in := func(kv ...string) context.Context {
		return metadata.NewIncomingContext(context.Background(), metadata.Pairs(kv...))
	}
	if p, err := a.Authenticate(in("authorization", "Bearer alice-token-0123456789abcdef")); err != nil || p.Name != "alice" {
		t.Fatalf("good token: %v %v", p, err)
	}
	for _, ctx := range []context.Context{
		context.Background(),
		in("authorization", "Bearer wrong-token-0123456789abcdef"),
		in("authorization", "Basic YWxpY2U6eA=="),
		in("authorization", "alice-token-0123456789abcdef"),
		// A principal name without a node certificate is not a credential.
		in(PrincipalKey, "alice"),
	} {
		_, err := a.Authenticate(ctx)
		if !errors.Is(err, sessionstore.ErrUnauthenticated) {
			t.Fatalf("want UNAUTHENTICATED, got %v", err)
		}
		if strings.Contains(err.Error(), "alice-token") {
			t.Fatalf("error reveals the token: %v", err)
		}
	}
	// Reload: a broken file keeps the old table; a new one replaces it.
	old := a.Hash()
	os.WriteFile(path, []byte("broken"), 0o600)
	if err := a.Reload(); err == nil || a.Hash() != old {
		t.Fatalf("broken reload: %v, hash %s→%s", err, old, a.Hash())
	}
	os.WriteFile(path, []byte("bob-token-0123456789abcdefgh bob read\n"), 0o600)
	if err := a.Reload(); err != nil || a.Hash() == old {
		t.Fatalf("reload: %v", err)
	}
	if _, err := a.Authenticate(in("authorization", "Bearer alice-token-0123456789abcdef")); err == nil {
		t.Fatal("revoked token still accepted")
	}
	off, _ := New("", nil)
	if p, err := off.Authenticate(context.Background()); err != nil || p != Anonymous {
		t.Fatalf("auth off: %v %v", p, err)
	}
}

func TestOutgoingCarriesCredentials(t *testing.T) {
	ctx := metadata.NewIncomingContext(context.Background(), metadata.Pairs("authorization", "Bearer t", "other", "x"))
	ctx = NewContext(ctx, &Principal{Name: "alice"})
	md, _ := metadata.FromOutgoingContext(Outgoing(ctx))
	if md.Get("authorization")[0] != "Bearer t" || md.Get(PrincipalKey)[0] != "alice" || len(md.Get("other")) != 0 {
		t.Fatalf("outgoing metadata %v", md)
	}
}

// FuzzParseTable: the token-file decoder never panics, and whatever it
// accepts round-trips through its canonical form to the same hash.
func FuzzParseTable(f *testing.F) {
	f.Add([]byte(strings.Replace(sample, "%s", strings.Repeat("ab", 32), 1)))
	f.Add([]byte("token-aaaaaaaaaaaaaaaa x read,write,admin a/,b/ max_sessions=1 rate=0.5 burst=2\n# c\n"))
	f.Add([]byte("cert:CN x read *\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		tab, err := ParseTable(data)
		if err != nil {
			return
		}
		for name, p := range tab.names {
			if p.Name != name || !validName(name) {
				t.Fatalf("principal %q under %q", p.Name, name)
			}
			for _, pre := range p.Prefixes {
				if pre == "" {
					t.Fatal("empty prefix accepted")
				}
			}
		}
		if len(tab.Hash()) != 12 {
			t.Fatalf("hash %q", tab.Hash())
		}
	})
}
