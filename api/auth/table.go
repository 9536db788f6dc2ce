// Package auth authenticates API callers: bearer tokens and client
// certificates mapped to principals by a token file, with permissions and
// allowed session-id prefixes.
package auth

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Perm is a set of permissions.
type Perm uint8

const (
	// Read: Inspect, ReadFrom, ReadRaw, List, Watch, Locate, PlanMode Get/Projection.
	Read Perm = 1 << iota
	// Write: Create, Append, Load (with repair), Prepare, KeepAlive, Release, plan-mode changes.
	Write
	// Admin: the Cluster service (status, membership, export's snapshot of the
	// cluster). Admin alone does not grant Read or Write.
	Admin
)

func (p Perm) String() string {
	var parts []string
	for _, x := range []struct {
		p    Perm
		name string
	}{{Read, "read"}, {Write, "write"}, {Admin, "admin"}} {
		if p&x.p != 0 {
			parts = append(parts, x.name)
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ",")
}

// Principal is an authenticated caller.
type Principal struct {
	Name  string
	Perms Perm
	// Prefixes are the session-id prefixes the principal may touch; nil means
	// every session.
	Prefixes []string
	// MaxSessions overrides the node's sessions-per-principal quota (0: the
	// node's default).
	MaxSessions int64
	// Rate overrides the node's per-principal request rate (requests/s on one
	// node; 0: the node's default), Burst its burst.
	Rate  float64
	Burst int
}

// Has reports whether p holds every permission of want.
func (p *Principal) Has(want Perm) bool { return p != nil && p.Perms&want == want }

// Covers reports whether p may touch session id.
func (p *Principal) Covers(id string) bool {
	if p == nil {
		return false
	}
	if p.Prefixes == nil {
		return true
	}
	for _, pre := range p.Prefixes {
		if strings.HasPrefix(id, pre) {
			return true
		}
	}
	return false
}

// Anonymous is the principal of every call when authentication is off.
var Anonymous = &Principal{Perms: Read | Write | Admin}

// Table is a parsed token file.
type Table struct {
	tokens map[[sha256.Size]byte]*Principal // by sha256 of the token
	certs  map[string]*Principal            // by client-certificate common name
	names  map[string]*Principal
	hash   string
}

// MinTokenLength is the shortest accepted literal token: shorter ones are
// guessable.
const MinTokenLength = 16

// ParseTable parses a token file. Each non-empty line that does not start
// with '#' is
//
//	<credential> <name> <permissions> [<prefixes>] [key=value ...]
//
// credential: a literal bearer token (≥ 16 characters), "sha256:<hex>" (the
// SHA-256 of the token, so the file need not hold it), or "cert:<common
// name>" (a client certificate verified against the node's CA).
// permissions: comma-separated read, write, admin. prefixes: comma-separated
// session-id prefixes, or "*" (the default) for every session. Options:
// max_sessions=N, rate=R (requests per second on one node), burst=N. Lines of
// one name must agree on everything but the credential (token rotation).
func ParseTable(data []byte) (*Table, error) {
	t := &Table{tokens: map[[sha256.Size]byte]*Principal{}, certs: map[string]*Principal{}, names: map[string]*Principal{}}
	if !utf8.Valid(data) {
		return nil, fmt.Errorf("token file is not valid UTF-8")
	}
	var canon []string
	sc := bufio.NewScanner(bytes.NewReader(data))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for ln := 1; sc.Scan(); ln++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		fail := func(format string, args ...any) error {
			return fmt.Errorf("token file line %d: %s", ln, fmt.Sprintf(format, args...))
		}
		f := strings.Fields(line)
		if len(f) < 3 {
			return nil, fail("want <credential> <name> <permissions> [<prefixes>] [key=value ...], got %d fields", len(f))
		}
		cred, name := f[0], f[1]
		if !validName(name) {
			return nil, fail("name %q: use letters, digits and . _ - @ : only", name)
		}
		p := &Principal{Name: name}
		for _, perm := range strings.Split(f[2], ",") {
			switch perm {
			case "read":
				p.Perms |= Read
			case "write":
				p.Perms |= Write
			case "admin":
				p.Perms |= Admin
			default:
				return nil, fail("permission %q: want read, write or admin", perm)
			}
		}
		rest := f[3:]
		if len(rest) > 0 && !strings.Contains(rest[0], "=") {
			if rest[0] != "*" {
				for _, pre := range strings.Split(rest[0], ",") {
					if pre == "" {
						return nil, fail("empty session-id prefix in %q", rest[0])
					}
					p.Prefixes = append(p.Prefixes, pre)
				}
				sort.Strings(p.Prefixes)
			}
			rest = rest[1:]
		}
		for _, opt := range rest {
			k, v, _ := strings.Cut(opt, "=")
			var err error
			switch k {
			case "max_sessions":
				p.MaxSessions, err = strconv.ParseInt(v, 10, 64)
				if err == nil && p.MaxSessions < 0 {
					err = fmt.Errorf("must be ≥ 0")
				}
			case "rate":
				p.Rate, err = strconv.ParseFloat(v, 64)
				if err == nil && (p.Rate < 0 || math.IsInf(p.Rate, 0) || math.IsNaN(p.Rate)) {
					err = fmt.Errorf("must be a finite number ≥ 0")
				}
			case "burst":
				p.Burst, err = strconv.Atoi(v)
				if err == nil && p.Burst < 0 {
					err = fmt.Errorf("must be ≥ 0")
				}
			default:
				return nil, fail("unknown option %q: want max_sessions, rate or burst", k)
			}
			if err != nil {
				return nil, fail("option %s=%q: %v", k, v, err)
			}
		}
		if prev, ok := t.names[name]; ok {
			if prev.describe() != p.describe() {
				return nil, fail("name %q appears again with other permissions, prefixes or options", name)
			}
			p = prev
		} else {
			t.names[name] = p
		}
		var key string
		switch {
		case strings.HasPrefix(cred, "cert:"):
			cn := strings.TrimPrefix(cred, "cert:")
			if cn == "" {
				return nil, fail("empty certificate name")
			}
			if _, dup := t.certs[cn]; dup {
				return nil, fail("certificate name %q listed twice", cn)
			}
			t.certs[cn] = p
			key = cred
		case strings.HasPrefix(cred, "sha256:"):
			raw, err := hex.DecodeString(strings.TrimPrefix(cred, "sha256:"))
			if err != nil || len(raw) != sha256.Size {
				return nil, fail("sha256: credential must be 64 hex digits")
			}
			var h [sha256.Size]byte
			copy(h[:], raw)
			if _, dup := t.tokens[h]; dup {
				return nil, fail("token listed twice")
			}
			t.tokens[h] = p
			key = "sha256:" + hex.EncodeToString(h[:])
		default:
			if len(cred) < MinTokenLength {
				return nil, fail("token is %d characters; use at least %d (e.g. openssl rand -hex 24)", len(cred), MinTokenLength)
			}
			h := sha256.Sum256([]byte(cred))
			if _, dup := t.tokens[h]; dup {
				return nil, fail("token listed twice")
			}
			t.tokens[h] = p
			key = "sha256:" + hex.EncodeToString(h[:])
		}
		canon = append(canon, key+" "+p.describe())
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("token file: %w", err)
	}
	sort.Strings(canon)
	sum := sha256.Sum256([]byte(strings.Join(canon, "\n")))
	t.hash = hex.EncodeToString(sum[:6])
	return t, nil
}

func validName(s string) bool {
	if s == "" || len(s) > 128 {
		return false
	}
	for _, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@:", r)
		if !ok {
			return false
		}
	}
	return true
}

// describe is the canonical text of everything but the credential.
func (p *Principal) describe() string {
	pre := "*"
	if p.Prefixes != nil {
		pre = strconv.Quote(strings.Join(p.Prefixes, ","))
	}
	return fmt.Sprintf("%s %s %s max_sessions=%d rate=%g burst=%d", p.Name, p.Perms, pre, p.MaxSessions, p.Rate, p.Burst)
}

// Hash identifies the table's content (credentials hashed, order and layout
// ignored): nodes gossip it so that differing token files are noticed.
func (t *Table) Hash() string { return t.hash }

// Len is the number of principals.
func (t *Table) Len() int { return len(t.names) }

// Token returns the principal of a bearer token, or nil. Lookup is by the
// token's SHA-256, so timing reveals nothing about stored tokens.
func (t *Table) Token(token string) *Principal { return t.tokens[sha256.Sum256([]byte(token))] }

// Cert returns the principal of a client certificate's common name, or nil.
func (t *Table) Cert(commonName string) *Principal { return t.certs[commonName] }

// Name returns the principal of a name, or nil.
func (t *Table) Name(name string) *Principal { return t.names[name] }
