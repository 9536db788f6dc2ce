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
// optionally mutual TLS (the listener then wraps accepted connections in TLS).
type streamLayer struct {
	net.Listener
	advertise hostAddr
	dialer    net.Dialer
	tls       *tls.Config     // client side; nil: plaintext
	ctx       context.Context // cancelled at shutdown: no dial outlives the node
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
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

// newTransport listens on bind and advertises advertise (default: the
// listener's own address, which must then not be a wildcard). With pair set,
// connections both ways are mutual TLS.
func newTransport(ctx context.Context, bind, advertise string, pair *TLSPair, hl hclog.Logger) (*raft.NetworkTransport, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
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
			return nil, fmt.Errorf("raft address %s listens on all interfaces: an advertised address is required", bind)
		}
		advertise = ta.String()
	}
	if _, _, err := net.SplitHostPort(advertise); err != nil {
		l.Close()
		return nil, fmt.Errorf("raft advertise address %q: %w", advertise, err)
	}
	return raft.NewNetworkTransportWithConfig(&raft.NetworkTransportConfig{
		Stream:  &streamLayer{Listener: stream, advertise: hostAddr(advertise), dialer: LocalDialer(bind), tls: clientTLS, ctx: ctx},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
	}), nil
}

// raftPeerCheck guards the leader's reconcile when the Raft transport is TLS:
// a server learnt of through gossip is added to the configuration (or gets a
// new address) only once its advertised Raft address completes a TLS
// handshake with a node certificate of this cluster's CA, valid for that host.
// Gossip is only advisory: holding the gossip key does not get a server into
// the configuration, where an unreachable voter would cost fault tolerance.
type raftPeerCheck struct {
	tls     *tls.Config
	dialer  net.Dialer
	timeout time.Duration
	logger  *slog.Logger
	failed  map[string]string // peer id → the failure last logged; reconcile goroutine only
}

// newRaftPeerCheck returns nil (admit everything) without Raft TLS.
func newRaftPeerCheck(pair *TLSPair, bind string, logger *slog.Logger) *raftPeerCheck {
	if pair == nil {
		return nil
	}
	return &raftPeerCheck{tls: pair.Client, dialer: LocalDialer(bind), timeout: 3 * time.Second, logger: logger, failed: map[string]string{}}
}

// admit reports whether server id at addr passed the check; a failure is
// logged once per peer and reason.
func (c *raftPeerCheck) admit(ctx context.Context, id string, addr raft.ServerAddress) bool {
	if c == nil {
		return true
	}
	err := c.probe(ctx, string(addr))
	if err == nil {
		if _, ok := c.failed[id]; ok {
			delete(c.failed, id)
			c.logger.Info("a server's Raft transport now passes the TLS check", "peer_id", id, "raft_addr", addr)
		}
		return true
	}
	if msg := err.Error(); c.failed[id] != msg {
		c.failed[id] = msg
		c.logger.Warn("not adding a server to the Raft configuration: its Raft transport failed the TLS check (a certificate of another CA, not a node certificate, or not valid for its advertised host)",
			"peer_id", id, "raft_addr", addr, "err", err)
	}
	return false
}

func (c *raftPeerCheck) probe(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return err
	}
	cfg := c.tls.Clone()
	cfg.ServerName = host
	d := c.dialer
	d.Timeout = c.timeout
	td := tls.Dialer{NetDialer: &d, Config: cfg}
	conn, err := td.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	return conn.Close()
}
