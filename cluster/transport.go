package cluster

import (
	"context"
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"time"

	"github.com/hashicorp/go-hclog"
	"github.com/hashicorp/raft"
)

// hostAddr is an advertised address that may name a host ("node1:7401"):
// raft keeps it in the configuration as is, so a server whose IP changes
// (a container recreated) stays reachable under its name.
type hostAddr string

func (a hostAddr) Network() string { return "tcp" }
func (a hostAddr) String() string  { return string(a) }

// streamLayer is raft's TCP stream layer with a name-based advertised address,
// optionally mutual TLS (the listener then wraps accepted connections in TLS),
// and the handshake of handshake.go on every connection both ways.
type streamLayer struct {
	net.Listener
	advertise hostAddr
	dialer    net.Dialer
	tls       *tls.Config     // client side; nil: plaintext
	ctx       context.Context // cancelled at shutdown: no dial outlives the node
	hs        *Handshaker
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Accept() (net.Conn, error) {
	c, err := s.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &hsConn{Conn: c, h: s.hs}, nil
}

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	deadline := time.Now().Add(timeout)
	c, err := s.dialTLS(address, timeout)
	if err != nil {
		return nil, err
	}
	return s.hs.dialled(c, deadline, string(address))
}

func (s *streamLayer) dialTLS(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	if s.tls == nil {
		return d.DialContext(s.ctx, "tcp", string(address))
	}
	// The peer's certificate must name the host we dial (its advertised
	// Raft host: a name such as node1, or an IP); the timeout covers the
	// handshake too.
	cfg := s.tls.Clone()
	if cfg.ServerName == "" {
		host, _, err := net.SplitHostPort(string(address))
		if err != nil {
			return nil, fmt.Errorf("raft address %q: %w", address, err)
		}
		cfg.ServerName = host
	}
	td := tls.Dialer{NetDialer: &d, Config: cfg}
	return td.DialContext(s.ctx, "tcp", string(address))
}

// LocalDialer dials from the IP of bind when bind names a specific address:
// a node bound to one interface talks to its peers from that interface.
func LocalDialer(bind string) net.Dialer {
	host, _, err := net.SplitHostPort(bind)
	if err != nil {
		return net.Dialer{}
	}
	ip := net.ParseIP(host)
	if ip == nil || ip.IsUnspecified() || ip.Equal(net.IPv4(127, 0, 0, 1)) || ip.Equal(net.IPv6loopback) {
		return net.Dialer{}
	}
	return net.Dialer{LocalAddr: &net.TCPAddr{IP: ip}}
}

// Transport carries Raft's messages between nodes and vets a server before the
// leader adds it to the configuration.
type Transport interface {
	raft.Transport
	// Admit reports whether server id at addr may be added (or get a new
	// address): it answers on its Raft address as a member of this cluster.
	Admit(ctx context.Context, id string, addr raft.ServerAddress) bool
	Close() error
}

// A TransportMaker starts a node's transport when the node is built (New):
// ctx ends when the node stops (no dial outlives it) and hs is the node's side
// of the handshake.
type TransportMaker func(ctx context.Context, hs *Handshaker, hl hclog.Logger) (Transport, error)

// TCPTransport is the product's transport: Raft over TCP on cfg.RaftAddr,
// advertised as cfg.RaftAdvertise, mutual TLS with cfg.RaftTLS, and the
// handshake on every connection both ways.
func TCPTransport(cfg Config) TransportMaker {
	return func(ctx context.Context, hs *Handshaker, hl hclog.Logger) (Transport, error) {
		nt, stream, err := newTransport(ctx, cfg.RaftAddr, cfg.RaftAdvertise, cfg.RaftTLS, hs, hl)
		if err != nil {
			return nil, fmt.Errorf("raft transport on %s: %w", cfg.RaftAddr, err)
		}
		return &tcpTransport{NetworkTransport: nt, check: newRaftPeerCheck(stream, hs.logger)}, nil
	}
}

type tcpTransport struct {
	*raft.NetworkTransport
	check *raftPeerCheck
}

func (t *tcpTransport) Admit(ctx context.Context, id string, addr raft.ServerAddress) bool {
	return t.check.admit(ctx, id, addr)
}

// newTransport listens on bind and advertises advertise (default: the
// listener's own address, which must then not be a wildcard). With pair set,
// connections both ways are mutual TLS. Every connection runs hs's handshake.
func newTransport(ctx context.Context, bind, advertise string, pair *TLSPair, hs *Handshaker, hl hclog.Logger) (*raft.NetworkTransport, *streamLayer, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, nil, err
	}
	var clientTLS *tls.Config
	var stream net.Listener = l
	if pair != nil {
		stream, clientTLS = tls.NewListener(l, pair.Server), pair.Client
	}
	if advertise == "" {
		ta := l.Addr().(*net.TCPAddr)
		if ta.IP.IsUnspecified() {
			l.Close()
			return nil, nil, fmt.Errorf("raft address %s listens on all interfaces: an advertised address is required", bind)
		}
		advertise = ta.String()
	}
	if _, _, err := net.SplitHostPort(advertise); err != nil {
		l.Close()
		return nil, nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	sl := &streamLayer{Listener: stream, advertise: hostAddr(advertise), dialer: LocalDialer(bind), tls: clientTLS, ctx: ctx, hs: hs}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  sl,
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
		// No pipelined AppendEntries: after a follower answers
		// Success=false, hashicorp/raft 1.8's pipeline can park its sender on
		// a full in-progress channel while the decoder waits for a consumer
		// that has gone; the leader then never replicates to that follower
		// again and Shutdown waits forever (seen in a partition test). One
		// request at a time costs little: our proposer groups commands into
		// large entries, and HashiCorp measured the pipeline as no gain with
		// batching.
		MaxRPCsInFlight: 1,
	}), sl, nil
}

// raftPeerCheck guards the leader's reconcile: a server learnt of through
// gossip is added to the configuration (or gets a new address) only once a
// connection to its advertised Raft address completes the handshake (the
// same cluster, the cluster key) and, with Raft TLS, a TLS handshake with a
// node certificate of this cluster's CA valid for that host. Gossip is only
// advisory: holding the gossip key does not get a server into the
// configuration, where an unreachable voter would cost fault tolerance.
type raftPeerCheck struct {
	stream  *streamLayer
	timeout time.Duration
	logger  *slog.Logger
	failed  map[string]string // peer id → the failure last logged; reconcile goroutine only
}

func newRaftPeerCheck(stream *streamLayer, logger *slog.Logger) *raftPeerCheck {
	return &raftPeerCheck{stream: stream, timeout: 3 * time.Second, logger: logger, failed: map[string]string{}}
}

// admit reports whether server id at addr passed the check; a failure is
// logged once per peer and reason.
func (c *raftPeerCheck) admit(ctx context.Context, id string, addr raft.ServerAddress) bool {
	conn, err := c.stream.Dial(addr, c.timeout)
	if err == nil {
		conn.Close()
		if _, ok := c.failed[id]; ok {
			delete(c.failed, id)
			c.logger.Info("a server's Raft transport now passes the check", "peer_id", id, "raft_addr", addr)
		}
		return true
	}
	if msg := err.Error(); c.failed[id] != msg {
		c.failed[id] = msg
		c.logger.Warn("not adding a server to the Raft configuration: its Raft transport failed the TLS check or the handshake (with TLS: a certificate of another CA, not a node certificate, or not valid for its advertised host; the handshake: another cluster, no or another cluster key)",
			"peer_id", id, "raft_addr", addr, "err", err)
	}
	return false
}
