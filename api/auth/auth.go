package auth

import (
	"context"
	"crypto/x509"
	"fmt"
	"net/http"
	"os"
	"strings"
	"sync/atomic"

	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/sessionstore/sessionstore"
)

// PrincipalKey is the metadata key under which a node forwarding a call names
// the principal it authenticated. It is trusted only from a peer presenting a
// verified node certificate; from anyone else it is ignored.
const PrincipalKey = "sessionstore-principal"

// Authenticator maps a call's credentials to a principal using a token file
// that can be reloaded while the node runs.
type Authenticator struct {
	path   string
	isNode func(*x509.Certificate) bool
	table  atomic.Pointer[Table]
}

// New loads the token file at path. An empty path turns authentication off:
// every call is Anonymous. isNode tells a node certificate from a client's
// (nil: no certificate is a node's).
func New(path string, isNode func(*x509.Certificate) bool) (*Authenticator, error) {
	a := &Authenticator{path: path, isNode: isNode}
	if path == "" {
		return a, nil
	}
	if err := a.Reload(); err != nil {
		return nil, err
	}
	return a, nil
}

// Enabled reports whether calls must authenticate.
func (a *Authenticator) Enabled() bool { return a != nil && a.path != "" }

// Reload re-reads the token file; on error the previous table stays in force.
func (a *Authenticator) Reload() error {
	if !a.Enabled() {
		return nil
	}
	data, err := os.ReadFile(a.path)
	if err != nil {
		return fmt.Errorf("token file: %w", err)
	}
	t, err := ParseTable(data)
	if err != nil {
		return fmt.Errorf("%s: %w", a.path, err)
	}
	a.table.Store(t)
	return nil
}

// Hash identifies the token file in force ("" when authentication is off).
func (a *Authenticator) Hash() string {
	if !a.Enabled() {
		return ""
	}
	return a.table.Load().Hash()
}

// Principals is the number of principals in the token file in force.
func (a *Authenticator) Principals() int {
	if !a.Enabled() {
		return 0
	}
	return a.table.Load().Len()
}

func unauthenticated(format string, args ...any) error {
	return sessionstore.Errorf(sessionstore.ReasonUnauthenticated, format, args...)
}

// Authenticate returns the caller of ctx (an incoming gRPC call). A bearer
// token wins over a certificate; a node certificate stands for the principal
// the forwarding node names, or for the node itself.
func (a *Authenticator) Authenticate(ctx context.Context) (*Principal, error) {
	// Two keys' values only: FromIncomingContext would copy all of them.
	first := func(k string) string {
		if v := metadata.ValueFromIncomingContext(ctx, k); len(v) > 0 {
			return v[0]
		}
		return ""
	}
	return a.authenticate(first("authorization"), verifiedCert(ctx), first(PrincipalKey))
}

// AuthenticateHTTP returns the caller of an HTTP request (Authorization
// header or a verified client certificate; nodes do not forward over HTTP).
func (a *Authenticator) AuthenticateHTTP(r *http.Request) (*Principal, error) {
	var cert *x509.Certificate
	if r.TLS != nil && len(r.TLS.VerifiedChains) > 0 && len(r.TLS.VerifiedChains[0]) > 0 {
		cert = r.TLS.VerifiedChains[0][0]
	}
	return a.authenticate(r.Header.Get("Authorization"), cert, "")
}

func (a *Authenticator) authenticate(authz string, cert *x509.Certificate, forwarded string) (*Principal, error) {
	if !a.Enabled() {
		return Anonymous, nil
	}
	t := a.table.Load()
	if authz != "" {
		scheme, token, ok := strings.Cut(authz, " ")
		if !ok || !strings.EqualFold(scheme, "bearer") || token == "" {
			return nil, unauthenticated("authorization must be \"Bearer <token>\"")
		}
		if p := t.Token(token); p != nil {
			return p, nil
		}
		return nil, unauthenticated("unknown bearer token")
	}
	if cert != nil {
		if a.isNode != nil && a.isNode(cert) {
			if forwarded != "" {
				if p := t.Name(forwarded); p != nil {
					return p, nil
				}
				return nil, unauthenticated("principal %q forwarded by node %q is not in this node's token file (do the token files differ?)", forwarded, cert.Subject.CommonName)
			}
			return &Principal{Name: "node:" + cert.Subject.CommonName, Perms: Read | Write | Admin}, nil
		}
		if p := t.Cert(cert.Subject.CommonName); p != nil {
			return p, nil
		}
		return nil, unauthenticated("client certificate %q is not in the token file", cert.Subject.CommonName)
	}
	return nil, unauthenticated("no credentials: send \"authorization: Bearer <token>\" or a client certificate")
}

// verifiedCert is the peer's leaf certificate when TLS verified it against
// the node's CA.
func verifiedCert(ctx context.Context) *x509.Certificate {
	pr, ok := peer.FromContext(ctx)
	if !ok || pr.AuthInfo == nil {
		return nil
	}
	ti, ok := pr.AuthInfo.(credentials.TLSInfo)
	if !ok || len(ti.State.VerifiedChains) == 0 || len(ti.State.VerifiedChains[0]) == 0 {
		return nil
	}
	return ti.State.VerifiedChains[0][0]
}

type principalKey struct{}

// NewContext returns ctx carrying p.
func NewContext(ctx context.Context, p *Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// FromContext returns the principal ctx carries; without one (authentication
// off, or a call that did not pass the guard) it is Anonymous.
func FromContext(ctx context.Context) *Principal {
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		return p
	}
	return Anonymous
}

// Outgoing prepares ctx for a call this node makes on behalf of its caller
// (forwarding to the leader): the caller's bearer token goes along, and so
// does the principal's name for a leader that trusts this node's certificate.
func Outgoing(ctx context.Context) context.Context {
	authz, principal := Forwarded(ctx)
	var kv []string
	if authz != "" {
		kv = append(kv, "authorization", authz)
	}
	if principal != "" {
		kv = append(kv, PrincipalKey, principal)
	}
	if len(kv) == 0 {
		return ctx
	}
	return metadata.AppendToOutgoingContext(ctx, kv...)
}

// Forwarded returns what a call this node makes on behalf of its caller
// carries: the caller's authorization header and the name of the principal
// this node authenticated (either may be empty).
func Forwarded(ctx context.Context) (authorization, principal string) {
	if vals := metadata.ValueFromIncomingContext(ctx, "authorization"); len(vals) > 0 {
		authorization = vals[0]
	}
	if p, ok := ctx.Value(principalKey{}).(*Principal); ok {
		principal = p.Name
	}
	return authorization, principal
}
