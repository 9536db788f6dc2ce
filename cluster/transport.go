package cluster

import (
	"context"
	"fmt"
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

// streamLayer is raft's TCP stream layer with a name-based advertised address.
type streamLayer struct {
	net.Listener
	advertise hostAddr
	dialer    net.Dialer
	ctx       context.Context // cancelled at shutdown: no dial outlives the node
}

func (s *streamLayer) Addr() net.Addr { return s.advertise }

func (s *streamLayer) Dial(address raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	d := s.dialer
	d.Timeout = timeout
	return d.DialContext(s.ctx, "tcp", string(address))
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
// listener's own address, which must then not be a wildcard).
func newTransport(ctx context.Context, bind, advertise string, hl hclog.Logger) (*raft.NetworkTransport, error) {
	l, err := net.Listen("tcp", bind)
	if err != nil {
		return nil, err
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
		Stream:  &streamLayer{Listener: l, advertise: hostAddr(advertise), dialer: LocalDialer(bind), ctx: ctx},
		MaxPool: 3,
		Timeout: 10 * time.Second,
		Logger:  hl,
	}), nil
}
