// Package tlsconf loads the node's and the clients' TLS material from PEM files
// into *tls.Config values, tells node certificates from client certificates,
// and issues the certificates `sessionstore certs` writes.
//
// One private CA signs everything. A node certificate carries Subject
// OrganizationalUnit NodeOU, both the server and the client extended key
// usage, and the node's names as SANs: nodes present it to each other (Raft,
// forwarding) and to clients. A client certificate carries OrganizationalUnit
// ClientOU, the client extended key usage only, and the principal's name as
// its CommonName.
package tlsconf

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"slices"
)

const (
	// NodeOU is the Subject OrganizationalUnit of node certificates.
	NodeOU = "sessionstore-node"
	// ClientOU is the Subject OrganizationalUnit of client certificates.
	ClientOU = "sessionstore-client"
)

// MinVersion is the oldest TLS version any config of this package accepts.
const MinVersion = tls.VersionTLS12

// IsNodeCert reports whether cert is a node certificate: its Subject carries
// OrganizationalUnit NodeOU and not ClientOU (a certificate claiming both is
// neither). It looks at the certificate only; callers pass a certificate TLS
// has verified against the CA.
func IsNodeCert(cert *x509.Certificate) bool {
	return cert != nil && hasOU(cert, NodeOU) && !hasOU(cert, ClientOU)
}

// IsClientCert reports whether cert is a client certificate: OrganizationalUnit
// ClientOU and not NodeOU.
func IsClientCert(cert *x509.Certificate) bool {
	return cert != nil && hasOU(cert, ClientOU) && !hasOU(cert, NodeOU)
}

// PrincipalOf is the principal a client certificate stands for: its
// CommonName. It is "" for anything that is not a client certificate (a node
// certificate names a node, not a principal: a node called "admin" must not
// become the principal "admin").
func PrincipalOf(cert *x509.Certificate) string {
	if !IsClientCert(cert) {
		return ""
	}
	return cert.Subject.CommonName
}

func hasOU(cert *x509.Certificate, ou string) bool {
	return slices.Contains(cert.Subject.OrganizationalUnit, ou)
}

// LoadKeyPair reads a certificate (chain) and its private key from PEM files.
// The leaf is parsed into Leaf.
func LoadKeyPair(certFile, keyFile string) (tls.Certificate, error) {
	certPEM, err := os.ReadFile(certFile)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate: %w", err)
	}
	keyPEM, err := os.ReadFile(keyFile)
	if errors.Is(err, fs.ErrPermission) {
		return tls.Certificate{}, fmt.Errorf("private key: %w (this process runs as uid %d: the key file must be readable by it)", err, os.Getuid())
	}
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("private key: %w", err)
	}
	kp, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, fmt.Errorf("certificate %s with key %s: %w", certFile, keyFile, err)
	}
	if kp.Leaf == nil {
		if kp.Leaf, err = x509.ParseCertificate(kp.Certificate[0]); err != nil {
			return tls.Certificate{}, fmt.Errorf("certificate %s: %w", certFile, err)
		}
	}
	return kp, nil
}

// LoadCA reads the PEM certificates of caFile into a pool; a file without any
// certificate is an error.
func LoadCA(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("CA %s: no PEM certificate in it", caFile)
	}
	return pool, nil
}

// ClientAuth is how the client API treats client certificates.
type ClientAuth string

const (
	// ClientAuthOptional verifies a client certificate when one is presented
	// (tls.VerifyClientCertIfGiven): a caller may authenticate otherwise.
	ClientAuthOptional ClientAuth = "optional"
	// ClientAuthRequire refuses a connection without a client certificate
	// the CA verifies (tls.RequireAndVerifyClientCert).
	ClientAuthRequire ClientAuth = "require"
)

// ParseClientAuth reads "optional" or "require".
func ParseClientAuth(s string) (ClientAuth, error) {
	switch ClientAuth(s) {
	case ClientAuthOptional, ClientAuthRequire:
		return ClientAuth(s), nil
	}
	return "", fmt.Errorf("client auth %q: want optional or require", s)
}

func (a ClientAuth) tlsType() tls.ClientAuthType {
	if a == ClientAuthRequire {
		return tls.RequireAndVerifyClientCert
	}
	return tls.VerifyClientCertIfGiven
}

// Node is a node's TLS material: its own certificate (a node certificate the
// CA verifies) and the CA that every peer and client certificate must chain to.
type Node struct {
	Cert tls.Certificate
	CA   *x509.CertPool
}

// ErrIncomplete is returned by LoadNode when some but not all of the three
// files are given.
var ErrIncomplete = errors.New("TLS needs a certificate, its key and the CA together")

// LoadNode loads a node's material. All three files are required: the CA
// verifies peers (mutual TLS between nodes), so a certificate without a CA is
// as incomplete as a CA without a certificate. The certificate must be a node
// certificate (NodeOU) that the CA verifies for both server and client use,
// so a mistake is reported here rather than as refused connections later.
func LoadNode(certFile, keyFile, caFile string) (*Node, error) {
	if certFile == "" || keyFile == "" || caFile == "" {
		var missing []string
		for _, f := range []struct{ name, v string }{{"certificate", certFile}, {"key", keyFile}, {"CA", caFile}} {
			if f.v == "" {
				missing = append(missing, f.name)
			}
		}
		return nil, fmt.Errorf("%w (missing: %v)", ErrIncomplete, missing)
	}
	kp, err := LoadKeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pool, err := LoadCA(caFile)
	if err != nil {
		return nil, err
	}
	if !IsNodeCert(kp.Leaf) {
		return nil, fmt.Errorf("certificate %s (subject %q) is not a node certificate: its Subject OrganizationalUnit must be %q (write one with `sessionstore certs`)",
			certFile, kp.Leaf.Subject.String(), NodeOU)
	}
	inter := x509.NewCertPool()
	for _, der := range kp.Certificate[1:] {
		if c, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(c)
		}
	}
	// KeyUsages means "any of": check server and client use one at a time.
	for _, u := range []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth} {
		if _, err := kp.Leaf.Verify(x509.VerifyOptions{Roots: pool, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{u}}); err != nil {
			return nil, fmt.Errorf("certificate %s does not verify against the CA %s for node use (server and client): %w", certFile, caFile, err)
		}
	}
	return &Node{Cert: kp, CA: pool}, nil
}

// API is the server config of the client API (gRPC and HTTP): the node's
// certificate, and client certificates verified against the CA when given
// (optional) or always (require).
func (n *Node) API(auth ClientAuth) *tls.Config {
	return &tls.Config{
		MinVersion:   MinVersion,
		Certificates: []tls.Certificate{n.Cert},
		ClientCAs:    n.CA,
		ClientAuth:   auth.tlsType(),
	}
}

// PeerServer is the server config of node-to-node connections: the peer must
// present a certificate the CA verifies, and it must be a node certificate.
func (n *Node) PeerServer() *tls.Config {
	return &tls.Config{
		MinVersion:       MinVersion,
		Certificates:     []tls.Certificate{n.Cert},
		ClientCAs:        n.CA,
		ClientAuth:       tls.RequireAndVerifyClientCert,
		VerifyConnection: requireNodePeer("client"),
	}
}

// PeerClient is the client config of node-to-node connections: it presents
// the node's certificate and verifies the server against the CA, for the host
// it dials (leave ServerName empty: tls.Dialer and gRPC set it from the dialled
// address; set it when dialling by another name), and requires a node
// certificate.
func (n *Node) PeerClient() *tls.Config {
	return &tls.Config{
		MinVersion:       MinVersion,
		Certificates:     []tls.Certificate{n.Cert},
		RootCAs:          n.CA,
		VerifyConnection: requireNodePeer("server"),
	}
}

// requireNodePeer refuses a verified peer whose leaf is not a node certificate.
func requireNodePeer(role string) func(tls.ConnectionState) error {
	return func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("tlsconf: the %s presented no certificate", role)
		}
		if leaf := cs.PeerCertificates[0]; !IsNodeCert(leaf) {
			return fmt.Errorf("tlsconf: the %s's certificate %q is not a node certificate (OrganizationalUnit %q)",
				role, leaf.Subject.String(), NodeOU)
		}
		return nil
	}
}

// ClientFiles are a client's TLS flags.
type ClientFiles struct {
	CA         string // verifies the server; empty: the system's roots
	Cert, Key  string // a client certificate, optional (both or neither)
	ServerName string // the name the server's certificate must carry; empty: the dialled host
}

// Client builds a client config from f: TLS 1.2 or later, the server verified
// against f.CA (or the system's roots), a client certificate when given.
func Client(f ClientFiles) (*tls.Config, error) {
	cfg := &tls.Config{MinVersion: MinVersion, ServerName: f.ServerName}
	if f.CA != "" {
		pool, err := LoadCA(f.CA)
		if err != nil {
			return nil, err
		}
		cfg.RootCAs = pool
	}
	switch {
	case f.Cert != "" && f.Key != "":
		kp, err := LoadKeyPair(f.Cert, f.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{kp}
	case f.Cert != "" || f.Key != "":
		return nil, errors.New("a client certificate needs both the certificate and its key")
	}
	return cfg, nil
}

// HostOf is the host part of a dialled address ("node1:7401" → "node1"),
// the name a server's certificate is checked against; addr itself when it
// has no port.
func HostOf(addr string) string {
	h, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return h
}
