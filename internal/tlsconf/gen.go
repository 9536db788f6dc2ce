package tlsconf

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"strings"
	"time"
)

// Organization is the Subject Organization of every certificate issued here.
const Organization = "sessionstore"

// clockSkew back-dates NotBefore so a peer whose clock is a little behind
// accepts a fresh certificate.
const clockSkew = time.Hour

// Issued is a certificate with its ECDSA P-256 private key.
type Issued struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// CertPEM is the certificate as one PEM block.
func (i *Issued) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: i.Cert.Raw})
}

// KeyPEM is the private key as a PKCS #8 PEM block.
func (i *Issued) KeyPEM() ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(i.Key)
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

// NewCA creates a self-signed CA valid for validFor from now, which may sign
// leaf certificates only (MaxPathLen 0).
func NewCA(commonName string, validFor time.Duration) (*Issued, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("validity %v must be > 0", validFor)
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl, err := template(pkix.Name{Organization: []string{Organization}, CommonName: commonName}, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.IsCA = true
	tmpl.BasicConstraintsValid = true
	tmpl.MaxPathLen, tmpl.MaxPathLenZero = 0, true
	tmpl.KeyUsage = x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature
	return sign(tmpl, tmpl, &key.PublicKey, key, key)
}

// ParseCA reads a CA certificate and its private key (PEM) to issue more
// certificates with it.
func ParseCA(certPEM, keyPEM []byte) (*Issued, error) {
	cb, _ := pem.Decode(certPEM)
	if cb == nil || cb.Type != "CERTIFICATE" {
		return nil, errors.New("CA certificate: no PEM CERTIFICATE block")
	}
	cert, err := x509.ParseCertificate(cb.Bytes)
	if err != nil {
		return nil, fmt.Errorf("CA certificate: %w", err)
	}
	if !cert.IsCA {
		return nil, errors.New("CA certificate: not a CA (basic constraints)")
	}
	kb, _ := pem.Decode(keyPEM)
	if kb == nil {
		return nil, errors.New("CA key: no PEM block")
	}
	var key any
	switch kb.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(kb.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(kb.Bytes)
	default:
		return nil, fmt.Errorf("CA key: unsupported PEM block %q", kb.Type)
	}
	if err != nil {
		return nil, fmt.Errorf("CA key: %w", err)
	}
	ek, ok := key.(*ecdsa.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("CA key: %T, want an ECDSA key", key)
	}
	if !ek.PublicKey.Equal(cert.PublicKey) {
		return nil, errors.New("CA key does not belong to the CA certificate")
	}
	return &Issued{Cert: cert, Key: ek}, nil
}

// IssueNode issues a node certificate for name: OrganizationalUnit NodeOU,
// server and client extended key usage, and SANs NodeSANs(name, hosts).
func (ca *Issued) IssueNode(name string, hosts []string, validFor time.Duration) (*Issued, error) {
	if err := ValidName(name); err != nil {
		return nil, fmt.Errorf("node name: %w", err)
	}
	tmpl, err := template(pkix.Name{Organization: []string{Organization}, OrganizationalUnit: []string{NodeOU}, CommonName: name}, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth}
	tmpl.DNSNames, tmpl.IPAddresses = NodeSANs(name, hosts)
	return ca.issue(tmpl)
}

// IssueClient issues a client certificate for principal: OrganizationalUnit
// ClientOU, CommonName principal, client extended key usage only.
func (ca *Issued) IssueClient(principal string, validFor time.Duration) (*Issued, error) {
	if err := ValidName(principal); err != nil {
		return nil, fmt.Errorf("client name: %w", err)
	}
	tmpl, err := template(pkix.Name{Organization: []string{Organization}, OrganizationalUnit: []string{ClientOU}, CommonName: principal}, validFor)
	if err != nil {
		return nil, err
	}
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature
	tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	return ca.issue(tmpl)
}

func (ca *Issued) issue(tmpl *x509.Certificate) (*Issued, error) {
	if ca == nil || ca.Cert == nil || ca.Key == nil {
		return nil, errors.New("no CA")
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	return sign(tmpl, ca.Cert, &key.PublicKey, ca.Key, key)
}

// NodeSANs are a node certificate's subject alternative names: the node's
// name, localhost, 127.0.0.1, ::1 and hosts (IP addresses go to the IP SANs,
// everything else to the DNS SANs), without duplicates, in that order.
func NodeSANs(name string, hosts []string) (dns []string, ips []net.IP) {
	seen := map[string]bool{}
	for _, h := range append([]string{name, "localhost", "127.0.0.1", "::1"}, hosts...) {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if ip := net.ParseIP(h); ip != nil {
			if k := "ip:" + ip.String(); !seen[k] {
				seen[k] = true
				ips = append(ips, ip)
			}
			continue
		}
		if k := "dns:" + strings.ToLower(h); !seen[k] {
			seen[k] = true
			dns = append(dns, h)
		}
	}
	return dns, ips
}

// ValidName checks a node or client name: it becomes a file name
// (<name>.pem, client-<name>.pem) and a certificate name, so 1 to 64 of
// A-Z a-z 0-9 . _ - @, not starting with a dot or a dash.
func ValidName(name string) error {
	if name == "" || len(name) > 64 {
		return fmt.Errorf("%q: want 1 to 64 characters", name)
	}
	if name[0] == '.' || name[0] == '-' {
		return fmt.Errorf("%q must not start with %q", name, name[:1])
	}
	for _, r := range name {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("._-@", r)
		if !ok {
			return fmt.Errorf("%q: %q is not allowed (A-Z a-z 0-9 . _ - @)", name, r)
		}
	}
	return nil
}

func template(subject pkix.Name, validFor time.Duration) (*x509.Certificate, error) {
	if validFor <= 0 {
		return nil, fmt.Errorf("validity %v must be > 0", validFor)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, err
	}
	now := time.Now()
	return &x509.Certificate{
		SerialNumber: serial.Add(serial, big.NewInt(1)), // > 0
		Subject:      subject,
		NotBefore:    now.Add(-clockSkew),
		NotAfter:     now.Add(validFor),
	}, nil
}

func sign(tmpl, parent *x509.Certificate, pub *ecdsa.PublicKey, signer, key *ecdsa.PrivateKey) (*Issued, error) {
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, pub, signer)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Issued{Cert: cert, Key: key}, nil
}

// NewGossipKey returns a random 32-byte gossip key (AES-256).
func NewGossipKey() ([]byte, error) {
	k := make([]byte, 32)
	if _, err := rand.Read(k); err != nil {
		return nil, err
	}
	return k, nil
}

// EncodeGossipKey is the base64 text of a gossip key (--gossip-key).
func EncodeGossipKey(k []byte) string { return base64.StdEncoding.EncodeToString(k) }

// ParseGossipKey reads a base64 gossip key (standard or URL alphabet, padded
// or not, surrounding white space ignored) of 16, 24 or 32 bytes.
func ParseGossipKey(s string) ([]byte, error) {
	s = strings.TrimSpace(s)
	var k []byte
	var err error
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if k, err = enc.DecodeString(s); err == nil {
			break
		}
	}
	if err != nil {
		return nil, errors.New("gossip key: not base64")
	}
	if err := ValidateGossipKey(k); err != nil {
		return nil, err
	}
	return k, nil
}

// ValidateGossipKey checks a decoded gossip key's length.
func ValidateGossipKey(k []byte) error {
	switch len(k) {
	case 16, 24, 32:
		return nil
	}
	return fmt.Errorf("gossip key: %d bytes, want 16, 24 or 32 (base64 of that many bytes)", len(k))
}
