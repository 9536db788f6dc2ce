package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

const day = 24 * time.Hour

// pki is one CA with a node and a client certificate, written to dir.
type pki struct {
	ca, node, client *Issued
	dir              string
}

func newPKI(t *testing.T, name string) *pki {
	t.Helper()
	ca, err := NewCA(name+" CA", 30*day)
	if err != nil {
		t.Fatal(err)
	}
	node, err := ca.IssueNode("node1", []string{"node1.example", "10.0.0.1"}, day)
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.IssueClient("alice", day)
	if err != nil {
		t.Fatal(err)
	}
	p := &pki{ca: ca, node: node, client: client, dir: t.TempDir()}
	p.write(t, "ca", ca)
	p.write(t, "node1", node)
	p.write(t, "client-alice", client)
	return p
}

func (p *pki) write(t *testing.T, name string, i *Issued) {
	t.Helper()
	key, err := i.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.path(name+".pem"), i.CertPEM(), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p.path(name+"-key.pem"), key, 0o600); err != nil {
		t.Fatal(err)
	}
}

func (p *pki) path(name string) string { return filepath.Join(p.dir, name) }

func certWithOUs(ous ...string) *x509.Certificate {
	return &x509.Certificate{Subject: pkix.Name{CommonName: "x", OrganizationalUnit: ous}}
}

func TestKinds(t *testing.T) {
	p := newPKI(t, "a")
	tests := []struct {
		name      string
		cert      *x509.Certificate
		node      bool
		client    bool
		principal string
	}{
		{"issued node", p.node.Cert, true, false, ""},
		{"issued client", p.client.Cert, false, true, "alice"},
		{"the CA", p.ca.Cert, false, false, ""},
		{"nil", nil, false, false, ""},
		{"node OU", certWithOUs(NodeOU), true, false, ""},
		{"client OU", certWithOUs(ClientOU), false, true, "x"},
		{"both OUs are neither", certWithOUs(NodeOU, ClientOU), false, false, ""},
		{"node OU among others", certWithOUs("ops", NodeOU), true, false, ""},
		{"OU differs in case", certWithOUs(strings.ToUpper(NodeOU)), false, false, ""},
		{"no OU", certWithOUs(), false, false, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsNodeCert(tt.cert); got != tt.node {
				t.Errorf("IsNodeCert = %v, want %v", got, tt.node)
			}
			if got := IsClientCert(tt.cert); got != tt.client {
				t.Errorf("IsClientCert = %v, want %v", got, tt.client)
			}
			if got := PrincipalOf(tt.cert); got != tt.principal {
				t.Errorf("PrincipalOf = %q, want %q", got, tt.principal)
			}
		})
	}
}

func TestIssuedCertificates(t *testing.T) {
	p := newPKI(t, "a")
	roots := x509.NewCertPool()
	roots.AddCert(p.ca.Cert)
	tests := []struct {
		name    string
		cert    *x509.Certificate
		usage   x509.ExtKeyUsage
		dnsName string
		ok      bool
	}{
		{"node as server by name", p.node.Cert, x509.ExtKeyUsageServerAuth, "node1", true},
		{"node as server by localhost", p.node.Cert, x509.ExtKeyUsageServerAuth, "localhost", true},
		{"node as server by 127.0.0.1", p.node.Cert, x509.ExtKeyUsageServerAuth, "127.0.0.1", true},
		{"node as server by ::1", p.node.Cert, x509.ExtKeyUsageServerAuth, "::1", true},
		{"node as server by extra host", p.node.Cert, x509.ExtKeyUsageServerAuth, "node1.example", true},
		{"node as server by extra IP", p.node.Cert, x509.ExtKeyUsageServerAuth, "10.0.0.1", true},
		{"node as server by another name", p.node.Cert, x509.ExtKeyUsageServerAuth, "node2", false},
		{"node as client", p.node.Cert, x509.ExtKeyUsageClientAuth, "", true},
		{"client as client", p.client.Cert, x509.ExtKeyUsageClientAuth, "", true},
		{"client as server", p.client.Cert, x509.ExtKeyUsageServerAuth, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := tt.cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: tt.dnsName, KeyUsages: []x509.ExtKeyUsage{tt.usage}})
			if (err == nil) != tt.ok {
				t.Fatalf("verify: %v, want ok=%v", err, tt.ok)
			}
		})
	}
	if !p.ca.Cert.IsCA || !p.ca.Cert.MaxPathLenZero || p.ca.Cert.Subject.CommonName != "a CA" {
		t.Errorf("CA: IsCA %v MaxPathLenZero %v CN %q", p.ca.Cert.IsCA, p.ca.Cert.MaxPathLenZero, p.ca.Cert.Subject.CommonName)
	}
	if p.node.Cert.Subject.CommonName != "node1" || p.client.Cert.Subject.CommonName != "alice" {
		t.Errorf("common names %q, %q", p.node.Cert.Subject.CommonName, p.client.Cert.Subject.CommonName)
	}
	if got := p.node.Cert.NotAfter.Sub(time.Now()); got > day || got < day-time.Minute {
		t.Errorf("node certificate valid for %v more, want about a day", got)
	}
	if p.node.Cert.PublicKeyAlgorithm != x509.ECDSA {
		t.Errorf("key algorithm %v, want ECDSA", p.node.Cert.PublicKeyAlgorithm)
	}
	if p.node.Cert.SerialNumber.Cmp(p.client.Cert.SerialNumber) == 0 {
		t.Error("two certificates share a serial number")
	}
}

func TestNodeSANs(t *testing.T) {
	tests := []struct {
		name  string
		node  string
		hosts []string
		dns   []string
		ips   []string
	}{
		{"defaults", "n1", nil, []string{"n1", "localhost"}, []string{"127.0.0.1", "::1"}},
		{"extra hosts and IPs", "n1", []string{"n1.lan", "10.1.2.3", "fe80::1"},
			[]string{"n1", "localhost", "n1.lan"}, []string{"127.0.0.1", "::1", "10.1.2.3", "fe80::1"}},
		{"duplicates and blanks dropped", "n1", []string{"N1", " localhost ", "", "127.0.0.1", "0:0:0:0:0:0:0:1"},
			[]string{"n1", "localhost"}, []string{"127.0.0.1", "::1"}},
		{"a node named like an IP", "10.0.0.5", nil, []string{"localhost"}, []string{"10.0.0.5", "127.0.0.1", "::1"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dns, ips := NodeSANs(tt.node, tt.hosts)
			var ipStr []string
			for _, ip := range ips {
				ipStr = append(ipStr, ip.String())
			}
			if !slices.Equal(dns, tt.dns) || !slices.Equal(ipStr, tt.ips) {
				t.Fatalf("NodeSANs = %v %v, want %v %v", dns, ipStr, tt.dns, tt.ips)
			}
		})
	}
}

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		ok   bool
	}{
		{"node1", true}, {"a.b-c_d@e", true}, {"N", true}, {strings.Repeat("x", 64), true},
		{"", false}, {strings.Repeat("x", 65), false}, {".hidden", false}, {"-flag", false},
		{"a/b", false}, {"..", false}, {"a b", false}, {"é", false}, {"a\x00", false},
	}
	for _, tt := range tests {
		if err := ValidName(tt.name); (err == nil) != tt.ok {
			t.Errorf("ValidName(%q) = %v, want ok=%v", tt.name, err, tt.ok)
		}
	}
}

func TestParseGossipKey(t *testing.T) {
	k32 := bytes.Repeat([]byte{0xfb}, 32)
	tests := []struct {
		name string
		in   string
		want []byte
	}{
		{"standard 32", EncodeGossipKey(k32), k32},
		{"standard 16 with newline", EncodeGossipKey(make([]byte, 16)) + "\n", make([]byte, 16)},
		{"24", EncodeGossipKey(make([]byte, 24)), make([]byte, 24)},
		{"url alphabet unpadded", "-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_-_8", nil}, // 32 bytes, checked below
		{"15 bytes", EncodeGossipKey(make([]byte, 15)), nil},
		{"33 bytes", EncodeGossipKey(make([]byte, 33)), nil},
		{"not base64", "not a key!", nil},
		{"empty", "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := ParseGossipKey(tt.in)
			if tt.name == "url alphabet unpadded" {
				if err != nil || len(got) != 32 {
					t.Fatalf("got %d bytes, %v; want 32", len(got), err)
				}
				return
			}
			if tt.want == nil {
				if err == nil {
					t.Fatalf("accepted %q (%d bytes)", tt.in, len(got))
				}
				return
			}
			if err != nil || !bytes.Equal(got, tt.want) {
				t.Fatalf("got %x, %v; want %x", got, err, tt.want)
			}
		})
	}
	k, err := NewGossipKey()
	if err != nil || len(k) != 32 {
		t.Fatalf("NewGossipKey: %d bytes, %v", len(k), err)
	}
	if back, err := ParseGossipKey(EncodeGossipKey(k)); err != nil || !bytes.Equal(back, k) {
		t.Fatalf("round trip: %v", err)
	}
}

func TestParseClientAuth(t *testing.T) {
	tests := []struct {
		in   string
		want tls.ClientAuthType
		ok   bool
	}{
		{"optional", tls.VerifyClientCertIfGiven, true},
		{"require", tls.RequireAndVerifyClientCert, true},
		{"", 0, false}, {"Require", 0, false}, {"none", 0, false},
	}
	for _, tt := range tests {
		a, err := ParseClientAuth(tt.in)
		if (err == nil) != tt.ok {
			t.Errorf("ParseClientAuth(%q) = %v, want ok=%v", tt.in, err, tt.ok)
			continue
		}
		if tt.ok && a.tlsType() != tt.want {
			t.Errorf("ParseClientAuth(%q) → %v, want %v", tt.in, a.tlsType(), tt.want)
		}
	}
}

func TestLoadNode(t *testing.T) {
	a, b := newPKI(t, "a"), newPKI(t, "b")
	tests := []struct {
		name           string
		cert, key, ca  string
		wantIncomplete bool
		wantErr        string
	}{
		{"complete", a.path("node1.pem"), a.path("node1-key.pem"), a.path("ca.pem"), false, ""},
		{"CA alone", "", "", a.path("ca.pem"), true, "certificate key"},
		{"certificate and key without CA", a.path("node1.pem"), a.path("node1-key.pem"), "", true, "CA"},
		{"certificate without key", a.path("node1.pem"), "", a.path("ca.pem"), true, "key"},
		{"nothing", "", "", "", true, ""},
		{"key of another certificate", a.path("node1.pem"), b.path("node1-key.pem"), a.path("ca.pem"), false, "private key does not match"},
		{"client certificate", a.path("client-alice.pem"), a.path("client-alice-key.pem"), a.path("ca.pem"), false, "not a node certificate"},
		{"certificate of another CA", b.path("node1.pem"), b.path("node1-key.pem"), a.path("ca.pem"), false, "does not verify against the CA"},
		{"CA file without certificates", a.path("node1.pem"), a.path("node1-key.pem"), a.path("node1-key.pem"), false, "no PEM certificate"},
		{"missing file", a.path("nope.pem"), a.path("node1-key.pem"), a.path("ca.pem"), false, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, err := LoadNode(tt.cert, tt.key, tt.ca)
			if tt.wantErr == "" && !tt.wantIncomplete {
				if err != nil || n.Cert.Leaf == nil || n.CA == nil {
					t.Fatalf("LoadNode: %v", err)
				}
				return
			}
			if err == nil {
				t.Fatal("LoadNode succeeded")
			}
			if errors.Is(err, ErrIncomplete) != tt.wantIncomplete || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("LoadNode: %v; want incomplete=%v and %q", err, tt.wantIncomplete, tt.wantErr)
			}
		})
	}
}

// handshake runs a TLS handshake between server and client configs over a
// pipe and returns the error each side saw.
func handshake(t *testing.T, server, client *tls.Config) (serverErr, clientErr error) {
	t.Helper()
	sc, cc := net.Pipe()
	defer sc.Close()
	defer cc.Close()
	_ = sc.SetDeadline(time.Now().Add(10 * time.Second))
	_ = cc.SetDeadline(time.Now().Add(10 * time.Second))
	done := make(chan error, 1)
	go func() {
		s := tls.Server(sc, server)
		err := s.Handshake()
		if err == nil {
			// TLS 1.3: the client learns of a refused certificate only
			// when it reads; make both sides exchange a byte.
			_, err = s.Write([]byte{1})
		}
		sc.Close()
		done <- err
	}()
	c := tls.Client(cc, client)
	clientErr = c.Handshake()
	if clientErr == nil {
		_, clientErr = c.Read(make([]byte, 1))
	}
	cc.Close()
	return <-done, clientErr
}

func TestHandshakes(t *testing.T) {
	a, b := newPKI(t, "a"), newPKI(t, "b")
	node := func(p *pki) *Node {
		n, err := LoadNode(p.path("node1.pem"), p.path("node1-key.pem"), p.path("ca.pem"))
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	na, nb := node(a), node(b)
	withName := func(c *tls.Config, name string) *tls.Config { c = c.Clone(); c.ServerName = name; return c }
	clientOf := func(p *pki, cert string) *tls.Config {
		f := ClientFiles{CA: p.path("ca.pem"), ServerName: "node1"}
		if cert != "" {
			f.Cert, f.Key = p.path(cert+".pem"), p.path(cert+"-key.pem")
		}
		c, err := Client(f)
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	// A client presenting a client certificate to a peer port: a node
	// refusing it must also be the one to say so.
	clientCertAsPeer := withName(na.PeerClient(), "node1")
	alice := mustPair(t, a, "client-alice")
	clientCertAsPeer.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &alice, nil }
	foreignNode := withName(nb.PeerClient(), "node1")
	foreignNode.RootCAs = na.CA // trusts the server; presents its own CA's node certificate
	foreignNode.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &nb.Cert, nil }

	tests := []struct {
		name           string
		server, client *tls.Config
		ok             bool
	}{
		{"peer: node to node, same CA", na.PeerServer(), withName(na.PeerClient(), "node1"), true},
		{"peer: by IP SAN", na.PeerServer(), withName(na.PeerClient(), "127.0.0.1"), true},
		{"peer: wrong server name", na.PeerServer(), withName(na.PeerClient(), "node9"), false},
		{"peer: dialler of another CA", na.PeerServer(), withName(nb.PeerClient(), "node1"), false},
		{"peer: dialler with a node certificate of another CA", na.PeerServer(), foreignNode, false},
		{"peer: server of another CA", nb.PeerServer(), withName(na.PeerClient(), "node1"), false},
		{"peer: client certificate refused", na.PeerServer(), clientCertAsPeer, false},
		{"peer: no certificate refused", na.PeerServer(), clientOf(a, ""), false},
		{"api optional: no certificate", na.API(ClientAuthOptional), clientOf(a, ""), true},
		{"api optional: client certificate", na.API(ClientAuthOptional), clientOf(a, "client-alice"), true},
		{"api optional: node certificate (forwarding)", na.API(ClientAuthOptional), withName(na.PeerClient(), "node1"), true},
		{"api optional: certificate of another CA refused", na.API(ClientAuthOptional), func() *tls.Config {
			// Forced: Go's client itself only offers a certificate
			// that chains to one of the CAs the server names.
			c := clientOf(a, "")
			foreign := mustPair(t, b, "client-alice")
			c.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }
			return c
		}(), false},
		{"api require: no certificate refused", na.API(ClientAuthRequire), clientOf(a, ""), false},
		{"api require: client certificate", na.API(ClientAuthRequire), clientOf(a, "client-alice"), true},
		{"api: client trusting another CA", na.API(ClientAuthOptional), clientOf(b, ""), false},
		{"api: TLS 1.1 refused", na.API(ClientAuthOptional), func() *tls.Config {
			c := clientOf(a, "")
			c.MinVersion, c.MaxVersion = tls.VersionTLS10, tls.VersionTLS11
			return c
		}(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			serr, cerr := handshake(t, tt.server, tt.client)
			t.Logf("server: %v; client: %v", serr, cerr)
			if ok := serr == nil && cerr == nil; ok != tt.ok {
				t.Fatalf("server: %v; client: %v; want ok=%v", serr, cerr, tt.ok)
			}
		})
	}
}

func mustPair(t *testing.T, p *pki, name string) tls.Certificate {
	t.Helper()
	kp, err := LoadKeyPair(p.path(name+".pem"), p.path(name+"-key.pem"))
	if err != nil {
		t.Fatal(err)
	}
	return kp
}

func TestClientConfig(t *testing.T) {
	a := newPKI(t, "a")
	tests := []struct {
		name    string
		f       ClientFiles
		certs   int
		roots   bool
		wantErr string
	}{
		{"CA only", ClientFiles{CA: a.path("ca.pem")}, 0, true, ""},
		{"system roots", ClientFiles{}, 0, false, ""},
		{"with a client certificate", ClientFiles{CA: a.path("ca.pem"), Cert: a.path("client-alice.pem"), Key: a.path("client-alice-key.pem")}, 1, true, ""},
		{"certificate without key", ClientFiles{Cert: a.path("client-alice.pem")}, 0, false, "both"},
		{"key without certificate", ClientFiles{Key: a.path("client-alice-key.pem")}, 0, false, "both"},
		{"missing CA", ClientFiles{CA: a.path("nope.pem")}, 0, false, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Client(tt.f)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Client: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(c.Certificates) != tt.certs || (c.RootCAs != nil) != tt.roots || c.MinVersion != tls.VersionTLS12 {
				t.Fatalf("config: %d certificates, roots %v, min version %x", len(c.Certificates), c.RootCAs != nil, c.MinVersion)
			}
		})
	}
}

func TestParseCA(t *testing.T) {
	a, b := newPKI(t, "a"), newPKI(t, "b")
	read := func(p *pki, name string) []byte {
		d, err := os.ReadFile(p.path(name))
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name      string
		cert, key []byte
		wantErr   string
	}{
		{"round trip", read(a, "ca.pem"), read(a, "ca-key.pem"), ""},
		{"key of another CA", read(a, "ca.pem"), read(b, "ca-key.pem"), "does not belong"},
		{"leaf as CA", read(a, "node1.pem"), read(a, "node1-key.pem"), "not a CA"},
		{"garbage", []byte("x"), read(a, "ca-key.pem"), "no PEM"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ca, err := ParseCA(tt.cert, tt.key)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("ParseCA: %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			// A certificate the parsed CA issues verifies against the original.
			n, err := ca.IssueNode("node2", nil, day)
			if err != nil {
				t.Fatal(err)
			}
			roots := x509.NewCertPool()
			roots.AddCert(a.ca.Cert)
			if _, err := n.Cert.Verify(x509.VerifyOptions{Roots: roots, DNSName: "node2"}); err != nil {
				t.Fatalf("issued by the parsed CA: %v", err)
			}
		})
	}
}

func TestIssueRefusesBadInput(t *testing.T) {
	ca, err := NewCA("c", day)
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		fn   func() error
	}{
		{"node name with a slash", func() error { _, err := ca.IssueNode("a/b", nil, day); return err }},
		{"empty client name", func() error { _, err := ca.IssueClient("", day); return err }},
		{"zero validity", func() error { _, err := ca.IssueClient("alice", 0); return err }},
		{"negative CA validity", func() error { _, err := NewCA("c", -day); return err }},
		{"no CA", func() error { _, err := (&Issued{}).IssueClient("alice", day); return err }},
	}
	for _, tt := range tests {
		if err := tt.fn(); err == nil {
			t.Errorf("%s: accepted", tt.name)
		}
	}
}

func TestHostOf(t *testing.T) {
	for in, want := range map[string]string{"node1:7401": "node1", "127.0.0.1:1": "127.0.0.1", "[::1]:7401": "::1", "node1": "node1"} {
		if got := HostOf(in); got != want {
			t.Errorf("HostOf(%q) = %q, want %q", in, got, want)
		}
	}
}
