package main

import (
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"strconv"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// transportConfig is the transport-security part of `sessionstore serve`: TLS for the
// client API (gRPC and HTTP) and mutual TLS between nodes (Raft, forwarding),
// and the gossip encryption key.
type transportConfig struct {
	CertFile, KeyFile, CAFile string
	ClientAuth                string // optional | require
	GossipKey                 string // base64
	GossipKeyFile             string // a file holding the base64 key
	// Node-to-node authentication (README "Node-to-node authentication").
	ClusterKeyFile     string
	ClusterKeyOptional bool
	// GossipPlaintextIn/Out are --gossip-verify-incoming/outgoing=false.
	GossipPlaintextIn  bool
	GossipPlaintextOut bool
	InsecurePeers      bool
}

// notFlag is a boolean flag stored inverted: --gossip-verify-incoming
// (default true) sets GossipPlaintextIn (zero value false).
type notFlag struct{ p *bool }

func (f notFlag) String() string {
	if f.p == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.p)
}

func (f notFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err == nil {
		*f.p = !v
	}
	return err
}

func (f notFlag) IsBoolFlag() bool { return true }

func transportFlags(cfg *transportConfig, fs *flag.FlagSet) {
	fs.StringVar(&cfg.CertFile, "tls-cert", "", "this node's certificate (PEM, a node certificate from 'sessionstore certs'): TLS for gRPC and HTTP, mutual TLS for Raft and forwarding; needs --tls-key and --tls-ca")
	fs.StringVar(&cfg.KeyFile, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.StringVar(&cfg.CAFile, "tls-ca", "", "CA (PEM) that every peer node's certificate and every client certificate must chain to")
	fs.StringVar(&cfg.ClientAuth, "tls-client-auth", string(tlsconf.ClientAuthOptional), "client certificates on the API (gRPC and HTTP): optional (verified when presented) or require")
	fs.StringVar(&cfg.GossipKey, "gossip-key", "", "encrypt gossip with this key: base64 of 16, 24 or 32 random bytes, the same on every node (prefer --gossip-key-file or SESSIONSTORE_GOSSIP_KEY: flags show in the process list)")
	fs.StringVar(&cfg.GossipKeyFile, "gossip-key-file", "", "file holding the base64 gossip key (e.g. gossip.key from 'sessionstore certs')")
	fs.StringVar(&cfg.ClusterKeyFile, "cluster-key-file", "", "file holding the base64 cluster key (e.g. cluster.key from 'sessionstore certs --keys-only'), the same on every node: every Raft connection proves it in its handshake, a peer without it gets no Raft RPC through")
	fs.BoolVar(&cfg.ClusterKeyOptional, "cluster-key-optional", false, "while turning --cluster-key-file on in a running cluster: also admit peers that have no key yet (counts as unauthenticated)")
	fs.Var(notFlag{&cfg.GossipPlaintextIn}, "gossip-verify-incoming", "with a gossip key: refuse unencrypted gossip (false only while turning the key on in a running cluster; counts as unauthenticated)")
	fs.Var(notFlag{&cfg.GossipPlaintextOut}, "gossip-verify-outgoing", "with a gossip key: encrypt outgoing gossip (false only while turning the key on in a running cluster; counts as unauthenticated)")
	fs.BoolVar(&cfg.InsecurePeers, "insecure-peers", false, "run although node-to-node traffic is not authenticated where that is required (Raft or gossip beyond loopback, or --auth-token-file with peers): anyone who reaches the Raft or gossip port can then join and read every session. Logged loudly")
}

// transportSecurity is transportConfig loaded: nil node means plaintext.
type transportSecurity struct {
	node       *tlsconf.Node
	clientAuth tlsconf.ClientAuth
	gossipKey  []byte
	clusterKey []byte
	cfg        transportConfig
}

// loadTransportSecurity reads the files and checks the combination: TLS needs
// the certificate, its key and the CA together (the CA verifies the peers:
// node-to-node TLS is always mutual), and the certificate must be a node
// certificate the CA verifies.
func loadTransportSecurity(cfg transportConfig) (*transportSecurity, error) {
	sec := &transportSecurity{}
	if cfg.ClientAuth == "" {
		cfg.ClientAuth = string(tlsconf.ClientAuthOptional) // the flag's default
	}
	auth, err := tlsconf.ParseClientAuth(cfg.ClientAuth)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-auth: %w", err)
	}
	sec.clientAuth = auth
	sec.cfg = cfg
	if cfg.CertFile != "" || cfg.KeyFile != "" || cfg.CAFile != "" {
		if sec.node, err = tlsconf.LoadNode(cfg.CertFile, cfg.KeyFile, cfg.CAFile); err != nil {
			if errors.Is(err, tlsconf.ErrIncomplete) {
				return nil, fmt.Errorf("TLS needs --tls-cert, --tls-key and --tls-ca together (missing %s): the CA verifies the other nodes, so a certificate alone is not enough, nor is a CA alone",
					missingTLSFlags(cfg))
			}
			return nil, fmt.Errorf("TLS: %w", err)
		}
	} else if auth == tlsconf.ClientAuthRequire {
		return nil, errors.New("--tls-client-auth require needs TLS: set --tls-cert, --tls-key and --tls-ca")
	}
	switch {
	case cfg.GossipKey != "" && cfg.GossipKeyFile != "":
		return nil, errors.New("give --gossip-key or --gossip-key-file, not both")
	case cfg.GossipKey != "":
		if sec.gossipKey, err = tlsconf.ParseGossipKey(cfg.GossipKey); err != nil {
			return nil, fmt.Errorf("--gossip-key: %w", err)
		}
	case cfg.GossipKeyFile != "":
		b, err := os.ReadFile(cfg.GossipKeyFile)
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("--gossip-key-file: %w (this process runs as uid %d: the file must be readable by it)", err, os.Getuid())
		}
		if err != nil {
			return nil, fmt.Errorf("--gossip-key-file: %w", err)
		}
		if sec.gossipKey, err = tlsconf.ParseGossipKey(string(b)); err != nil {
			return nil, fmt.Errorf("--gossip-key-file %s: %w", cfg.GossipKeyFile, err)
		}
	}
	if cfg.ClusterKeyFile != "" {
		b, err := os.ReadFile(cfg.ClusterKeyFile)
		if errors.Is(err, fs.ErrPermission) {
			return nil, fmt.Errorf("--cluster-key-file: %w (this process runs as uid %d: the file must be readable by it)", err, os.Getuid())
		}
		if err != nil {
			return nil, fmt.Errorf("--cluster-key-file: %w", err)
		}
		if sec.clusterKey, err = tlsconf.ParseGossipKey(string(b)); err != nil {
			return nil, fmt.Errorf("--cluster-key-file %s: want base64 of 16, 24 or 32 random bytes, as 'sessionstore certs --keys-only' writes (%v)", cfg.ClusterKeyFile, err)
		}
	} else if cfg.ClusterKeyOptional {
		return nil, errors.New("--cluster-key-optional needs --cluster-key-file")
	}
	if (cfg.GossipPlaintextIn || cfg.GossipPlaintextOut) && sec.gossipKey == nil {
		return nil, errors.New("--gossip-verify-incoming/--gossip-verify-outgoing=false relax a gossip key: set --gossip-key-file")
	}
	return sec, nil
}

// peerAuth reports which node-to-node channels authenticate their peers:
// Raft by TLS or a required cluster key, gossip by a key it verifies both ways.
func (s *transportSecurity) peerAuth() (raft, gossip bool) {
	raft = s.tls() || (s.clusterKey != nil && !s.cfg.ClusterKeyOptional)
	gossip = s.gossipKey != nil && !s.cfg.GossipPlaintextIn && !s.cfg.GossipPlaintextOut
	return raft, gossip
}

// checkPeers enforces node-to-node authentication: beyond loopback, Raft and
// gossip must authenticate their peers; a node with client authentication
// must not join or form a cluster with unauthenticated peers, and a lone one
// admits none (ClosedMembership). --insecure-peers overrides, loudly.
func (s *transportSecurity) checkPeers(c *cluster.Config, join string, clientAuth bool, logger *slog.Logger) error {
	raftOK, gossipOK := s.peerAuth()
	var missing []string
	if !isLoopback(c.RaftAddr) && !raftOK {
		missing = append(missing, fmt.Sprintf("Raft on %s needs --cluster-key-file or TLS (--tls-cert, --tls-key, --tls-ca)", c.RaftAddr))
	}
	if !isLoopback(c.GossipAddr) && !gossipOK {
		missing = append(missing, fmt.Sprintf("gossip on %s needs --gossip-key-file with verification both ways", c.GossipAddr))
	}
	joins := strings.Trim(join, ", ") != "" || c.BootstrapExpect > 1
	if clientAuth && !raftOK && joins {
		missing = append(missing, "--auth-token-file is set, so the Raft peers must be authenticated too (--cluster-key-file or TLS): a node with client authentication never hands data to an unauthenticated peer")
	}
	if len(missing) == 0 && !(clientAuth && !raftOK) {
		return nil
	}
	if !s.cfg.InsecurePeers {
		if len(missing) == 0 { // a lone node with client authentication
			c.ClosedMembership = true
			logger.Warn("client authentication is on and node-to-node authentication is off: this node adds no other server to its cluster (set --cluster-key-file or TLS on every node to grow it)")
			return nil
		}
		return fmt.Errorf("node-to-node traffic must be authenticated: %s; or give --insecure-peers to run without (anyone who reaches the Raft or gossip port can then join as a voter and read every session)",
			strings.Join(missing, "; "))
	}
	logger.Error("--insecure-peers: node-to-node traffic is NOT authenticated: anyone who reaches the Raft or gossip port can join this cluster as a voter, receive every session and serve it to anyone",
		"raft_addr", c.RaftAddr, "gossip_addr", c.GossipAddr, "raft_authenticated", raftOK, "gossip_authenticated", gossipOK)
	return nil
}

func missingTLSFlags(cfg transportConfig) string {
	var m []string
	for _, f := range []struct{ flag, v string }{{"--tls-cert", cfg.CertFile}, {"--tls-key", cfg.KeyFile}, {"--tls-ca", cfg.CAFile}} {
		if f.v == "" {
			m = append(m, f.flag)
		}
	}
	return strings.Join(m, ", ")
}

// tls reports whether the node serves TLS.
func (s *transportSecurity) tls() bool { return s != nil && s.node != nil }

// apply sets the cluster's Raft TLS and gossip key.
func (s *transportSecurity) apply(c *cluster.Config) {
	if s.tls() {
		c.RaftTLS = &cluster.TLSPair{Server: s.node.PeerServer(), Client: s.node.PeerClient()}
	}
	c.GossipKey = s.gossipKey
	c.ClusterKey, c.ClusterKeyOptional = s.clusterKey, s.cfg.ClusterKeyOptional
	if s.gossipKey != nil {
		c.GossipPlaintextIn, c.GossipPlaintextOut = s.cfg.GossipPlaintextIn, s.cfg.GossipPlaintextOut
	}
}

// apiTLS is the server config of gRPC and HTTP (nil: plaintext).
func (s *transportSecurity) apiTLS() *tls.Config {
	if !s.tls() {
		return nil
	}
	return s.node.API(s.clientAuth)
}

// serverOptions are the gRPC server's credentials.
func (s *transportSecurity) serverOptions() []grpc.ServerOption {
	if !s.tls() {
		return nil
	}
	return []grpc.ServerOption{grpc.Creds(credentials.NewTLS(s.apiTLS()))}
}

// peerCreds are the credentials of calls to another node's API (forwarding,
// the removal of a node that leaves): the node's own certificate as client
// certificate, the other node's verified against the CA for the host dialled
// and required to be a node certificate. Nil: plaintext.
func (s *transportSecurity) peerCreds() credentials.TransportCredentials {
	if !s.tls() {
		return nil
	}
	return credentials.NewTLS(s.node.PeerClient())
}

// peerDialOptions are peerCreds as client.Dial options.
func (s *transportSecurity) peerDialOptions() []grpc.DialOption {
	if c := s.peerCreds(); c != nil {
		return []grpc.DialOption{grpc.WithTransportCredentials(c)}
	}
	return nil
}

// httpScheme is the scheme of the node's HTTP URLs (Locate).
func (s *transportSecurity) httpScheme() string {
	if s.tls() {
		return "https"
	}
	return "http"
}

// exposedListener is one listener for warnIfExposed.
type exposedListener struct {
	name   string // gRPC, HTTP, Raft, gossip
	addr   string // its bind address
	secure bool   // TLS, or an encrypted gossip
	fix    string // what makes it secure
}

// listeners names the node's listeners and whether each is encrypted.
func (s *transportSecurity) listeners(grpcAddr, httpAddr net.Addr, c cluster.Config) []exposedListener {
	const tlsFix = "set --tls-cert, --tls-key and --tls-ca"
	return []exposedListener{
		{"gRPC API", grpcAddr.String(), s.tls(), tlsFix},
		{"HTTP", httpAddr.String(), s.tls(), tlsFix},
		{"Raft", c.RaftAddr, s.tls(), tlsFix},
		{"gossip", c.GossipAddr, s.gossipKey != nil, "set --gossip-key or --gossip-key-file"},
	}
}

// isLoopback reports whether a listen address binds loopback only.
func isLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// log says at start-up what is encrypted.
func (s *transportSecurity) log(logger *slog.Logger) {
	if s.tls() {
		leaf := s.node.Cert.Leaf
		logger.Info("TLS on: gRPC and HTTP serve TLS, Raft and forwarding use mutual TLS with node certificates",
			"certificate", leaf.Subject.CommonName, "not_after", leaf.NotAfter, "client_auth", string(s.clientAuth))
	}
	if s.gossipKey != nil {
		logger.Info("gossip encrypted", "key_bytes", len(s.gossipKey), "verify_incoming", !s.cfg.GossipPlaintextIn, "verify_outgoing", !s.cfg.GossipPlaintextOut)
	}
	if s.clusterKey != nil {
		logger.Info("Raft connections prove the cluster key", "optional", s.cfg.ClusterKeyOptional)
	}
}
