package cluster

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Every Raft connection starts with a handshake before raft's own bytes, in
// which both ends state their cluster id and node id and, with a cluster key,
// prove they hold it (HMAC-SHA256 over both ends' fresh nonces). A peer of
// another cluster, or one without the key, gets no RPC through: it is never
// added, never votes and never receives entries.
//
//	dialer → acceptor   hello: "SSRH" version nonce(32) cluster-id node-id
//	acceptor → dialer   reply: status, then refusal text, or nonce(32) cluster-id node-id mac
//	dialer → acceptor   proof: mac
//
// Strings are one length byte then the bytes; the refusal text has two
// length bytes. A MAC is one length byte (0: no key) then the bytes.

const (
	hsMagic    = "SSRH"
	hsVersion  = 1
	hsNonceLen = 32
	hsMaxText  = 1024
	// hsTimeout bounds an accepted connection's handshake (a dialled one has
	// raft's dial timeout).
	hsTimeout = 10 * time.Second
)

type hsHello struct {
	Nonce     [hsNonceLen]byte
	ClusterID string
	NodeID    string
}

type hsReply struct {
	Refusal   string // non-empty: the acceptor refused; nothing else follows
	Nonce     [hsNonceLen]byte
	ClusterID string
	NodeID    string
	MAC       []byte
}

// errHandshake marks a connection refused by the Raft handshake.
var errHandshake = errors.New("raft handshake")

func (h hsHello) encode() []byte {
	b := append([]byte(hsMagic), hsVersion)
	b = append(b, h.Nonce[:]...)
	b = appendStr8(b, h.ClusterID)
	return appendStr8(b, h.NodeID)
}

func readHello(r io.Reader) (hsHello, error) {
	var h hsHello
	head := make([]byte, len(hsMagic)+1)
	if _, err := io.ReadFull(r, head); err != nil {
		return h, err
	}
	if string(head[:len(hsMagic)]) != hsMagic {
		return h, fmt.Errorf("%w: the peer sent no handshake (a build without it, or not a node of this store)", errHandshake)
	}
	if head[len(hsMagic)] != hsVersion {
		return h, fmt.Errorf("%w: version %d, this build speaks %d", errHandshake, head[len(hsMagic)], hsVersion)
	}
	if _, err := io.ReadFull(r, h.Nonce[:]); err != nil {
		return h, err
	}
	var err error
	if h.ClusterID, err = readStr8(r); err != nil {
		return h, err
	}
	h.NodeID, err = readStr8(r)
	return h, err
}

func (p hsReply) encode() []byte {
	if p.Refusal != "" {
		t := p.Refusal
		if len(t) > hsMaxText {
			t = t[:hsMaxText]
		}
		return append(binary.BigEndian.AppendUint16([]byte{1}, uint16(len(t))), t...)
	}
	b := append([]byte{0}, p.Nonce[:]...)
	b = appendStr8(b, p.ClusterID)
	b = appendStr8(b, p.NodeID)
	return appendStr8(b, string(p.MAC))
}

func readReply(r io.Reader) (hsReply, error) {
	var p hsReply
	var st [1]byte
	if _, err := io.ReadFull(r, st[:]); err != nil {
		return p, err
	}
	switch st[0] {
	case 0:
	case 1:
		var n [2]byte
		if _, err := io.ReadFull(r, n[:]); err != nil {
			return p, err
		}
		l := binary.BigEndian.Uint16(n[:])
		if l == 0 || l > hsMaxText {
			return p, fmt.Errorf("%w: refusal of %d bytes", errHandshake, l)
		}
		t := make([]byte, l)
		if _, err := io.ReadFull(r, t); err != nil {
			return p, err
		}
		p.Refusal = string(t)
		return p, nil
	default:
		return p, fmt.Errorf("%w: reply status %d", errHandshake, st[0])
	}
	if _, err := io.ReadFull(r, p.Nonce[:]); err != nil {
		return p, err
	}
	var err error
	if p.ClusterID, err = readStr8(r); err != nil {
		return p, err
	}
	if p.NodeID, err = readStr8(r); err != nil {
		return p, err
	}
	mac, err := readStr8(r)
	if mac != "" {
		p.MAC = []byte(mac)
	}
	return p, err
}

func appendStr8(b []byte, s string) []byte {
	if len(s) > 255 {
		s = s[:255] // ids are short; never reached with valid ids
	}
	return append(append(b, byte(len(s))), s...)
}

func readStr8(r io.Reader) (string, error) {
	var n [1]byte
	if _, err := io.ReadFull(r, n[:]); err != nil {
		return "", err
	}
	b := make([]byte, n[0])
	if _, err := io.ReadFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

// admitCluster decides whether a peer claiming cluster id peer may talk to a
// node of cluster local. A node without an id (new, or in a cluster whose
// first leader has not minted it yet) takes any peer: it has no data of its
// own and adopts the cluster that replicates to it. A node with an id takes
// only its own cluster, except that it may dial a peer without one (a new
// node it replicates to); a peer without an id never sends it RPCs.
func admitCluster(local, peer string, peerDialled bool) error {
	switch {
	case local == "" || peer == local:
		return nil
	case peer == "" && !peerDialled:
		return nil
	case peer == "":
		return fmt.Errorf("%w: the peer has no cluster id yet, this node belongs to cluster %s", errHandshake, local)
	default:
		return fmt.Errorf("%w: the peer belongs to cluster %s, this node to cluster %s", errHandshake, peer, local)
	}
}

// Handshaker runs the handshake for one node: who it is, which cluster it
// belongs to, the cluster key. The node makes it and hands it to its
// transport (TransportMaker); a transport that needs no handshake (the
// in-memory one of cluster/clustertest) ignores it.
type Handshaker struct {
	nodeID    string
	key       []byte        // cluster key; nil: none
	optional  bool          // a peer without a key is admitted (turning the key on)
	clusterID func() string // the id this node states and checks now
	logger    *slog.Logger
	// During a rolling upgrade from a build without the handshake (2f2e872),
	// legacyPeer reports a peer address whose node advertises no handshake
	// in gossip (dialled without one), and legacyAccept whether a connection
	// without one is taken: only without a cluster key (which no such build
	// has), and only while a member of this cluster runs such a build. Nil:
	// never.
	legacyPeer   func(addr string) bool
	legacyAccept func() bool
	refusals     *prometheus.CounterVec // by direction; nil: not counted

	mu     sync.Mutex
	logged map[string]time.Time // refusal → when last logged
}

func newHandshaker(nodeID string, key []byte, clusterID func() string, logger *slog.Logger) *Handshaker {
	return &Handshaker{nodeID: nodeID, key: key, clusterID: clusterID, logger: logger, logged: map[string]time.Time{}}
}

func (h *Handshaker) mac(label string, first, second [hsNonceLen]byte, clusterID, nodeID string) []byte {
	if h.key == nil {
		return nil
	}
	m := hmac.New(sha256.New, h.key)
	m.Write([]byte(label))
	m.Write(first[:])
	m.Write(second[:])
	m.Write(appendStr8(appendStr8(nil, clusterID), nodeID))
	return m.Sum(nil)
}

// checkMAC verifies a peer's proof. A node without a key authenticates no
// one and ignores a proof (a peer that already has the key while the cluster
// turns it on); a node with one requires it unless optional.
func (h *Handshaker) checkMAC(got, want []byte) error {
	switch {
	case h.key == nil:
		return nil
	case len(got) == 0 && h.optional:
		return nil
	case len(got) == 0:
		return fmt.Errorf("%w: the peer has no cluster key (--cluster-key-file)", errHandshake)
	case !hmac.Equal(got, want):
		return fmt.Errorf("%w: the peer's cluster key is not this node's", errHandshake)
	}
	return nil
}

// dial runs the dialling side on conn, dialled at addr.
func (h *Handshaker) dial(conn net.Conn, addr string) error {
	if h.key == nil && h.legacyPeer != nil && h.legacyPeer(addr) {
		return nil
	}
	local := h.clusterID()
	hello := hsHello{ClusterID: local, NodeID: h.nodeID}
	if _, err := rand.Read(hello.Nonce[:]); err != nil {
		return err
	}
	if _, err := conn.Write(hello.encode()); err != nil {
		return err
	}
	rep, err := readReply(conn)
	if err != nil {
		return fmt.Errorf("%w: reading the reply: %v", errHandshake, err)
	}
	if rep.Refusal != "" {
		return fmt.Errorf("%w: refused by the peer: %s", errHandshake, rep.Refusal)
	}
	if err := admitCluster(local, rep.ClusterID, false); err != nil {
		return fmt.Errorf("%w (peer node %q)", err, rep.NodeID)
	}
	if err := h.checkMAC(rep.MAC, h.mac("sessionstore raft accept", hello.Nonce, rep.Nonce, rep.ClusterID, rep.NodeID)); err != nil {
		return fmt.Errorf("%w (peer node %q)", err, rep.NodeID)
	}
	proof := h.mac("sessionstore raft dial", rep.Nonce, hello.Nonce, hello.ClusterID, hello.NodeID)
	_, err = conn.Write(appendStr8(nil, string(proof)))
	return err
}

// accept runs the accepting side on conn; legacy is set when the connection
// carries raft's bytes without a handshake and is taken (its first byte is
// then in first).
func (h *Handshaker) accept(conn net.Conn) (legacy bool, first byte, err error) {
	var b [1]byte
	if _, err := io.ReadFull(conn, b[:]); err != nil {
		return false, 0, err
	}
	if b[0] != hsMagic[0] {
		if h.key == nil && h.legacyAccept != nil && h.legacyAccept() {
			return true, b[0], nil // raft's rpc type byte (0..4), from an older build
		}
		return false, 0, fmt.Errorf("%w: the peer sent no handshake (a build without it, or not a node of this store)", errHandshake)
	}
	return false, 0, h.acceptHello(io.MultiReader(bytes.NewReader(b[:]), conn), conn)
}

func (h *Handshaker) acceptHello(r io.Reader, conn net.Conn) error {
	hello, err := readHello(r)
	if err != nil {
		return err
	}
	local := h.clusterID()
	if err := admitCluster(local, hello.ClusterID, true); err != nil {
		_, _ = conn.Write(hsReply{Refusal: fmt.Sprintf("node %q: %v", h.nodeID, err)}.encode())
		return fmt.Errorf("%w (peer node %q)", err, hello.NodeID)
	}
	rep := hsReply{ClusterID: local, NodeID: h.nodeID}
	if _, err := rand.Read(rep.Nonce[:]); err != nil {
		return err
	}
	rep.MAC = h.mac("sessionstore raft accept", hello.Nonce, rep.Nonce, rep.ClusterID, rep.NodeID)
	if _, err := conn.Write(rep.encode()); err != nil {
		return err
	}
	proof, err := readStr8(conn)
	if err != nil {
		return fmt.Errorf("%w: reading the proof of node %q: %v", errHandshake, hello.NodeID, err)
	}
	want := h.mac("sessionstore raft dial", rep.Nonce, hello.Nonce, hello.ClusterID, hello.NodeID)
	if err := h.checkMAC([]byte(proof), want); err != nil {
		return fmt.Errorf("%w (peer node %q)", err, hello.NodeID)
	}
	return nil
}

// refused logs a refused connection, once a minute per reason (which names
// the peer node and clusters; its port changes with every connection).
func (h *Handshaker) refused(dir, peer string, err error) {
	if h.refusals != nil {
		h.refusals.WithLabelValues(dir).Inc()
	}
	h.mu.Lock()
	key := dir + " " + err.Error()
	last, ok := h.logged[key]
	now := time.Now()
	if ok && now.Sub(last) < time.Minute {
		h.mu.Unlock()
		return
	}
	if len(h.logged) > 1024 {
		clear(h.logged)
	}
	h.logged[key] = now
	h.mu.Unlock()
	h.logger.Warn("Raft connection refused by the handshake: a node of another cluster, or without this cluster's key",
		"direction", dir, "peer_addr", peer, "err", err)
}

// hsConn is an accepted connection whose handshake runs on first use, in
// raft's per-connection goroutine (not in the accept loop, which a slow peer
// would otherwise hold up).
type hsConn struct {
	net.Conn
	h      *Handshaker
	once   sync.Once
	err    error
	legacy []byte // the first byte of a connection without handshake, not yet read
}

func (c *hsConn) handshake() error {
	c.once.Do(func() {
		_ = c.Conn.SetDeadline(time.Now().Add(hsTimeout))
		legacy, first, err := c.h.accept(c.Conn)
		if c.err = err; legacy {
			c.legacy = []byte{first}
		}
		if c.err == nil {
			c.err = c.Conn.SetDeadline(time.Time{})
		} else if errors.Is(c.err, errHandshake) {
			c.h.refused("incoming", c.Conn.RemoteAddr().String(), c.err)
		}
	})
	return c.err
}

func (c *hsConn) Read(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	if len(c.legacy) > 0 && len(p) > 0 {
		p[0], c.legacy = c.legacy[0], nil
		return 1, nil
	}
	return c.Conn.Read(p)
}

func (c *hsConn) Write(p []byte) (int, error) {
	if err := c.handshake(); err != nil {
		return 0, err
	}
	return c.Conn.Write(p)
}

// dialled runs the dialling side with deadline, clearing it after.
func (h *Handshaker) dialled(conn net.Conn, deadline time.Time, addr string) (net.Conn, error) {
	_ = conn.SetDeadline(deadline)
	err := h.dial(conn, addr)
	if err == nil {
		err = conn.SetDeadline(time.Time{})
	}
	if err != nil {
		conn.Close()
		if errors.Is(err, errHandshake) {
			h.refused("outgoing", addr, err)
		}
		return nil, err
	}
	return conn, nil
}

// legacyView is the handshake's view of gossip, for the legacy checks: the
// handshaker is built before gossip starts (Raft's transport needs it), and
// until gossip runs every peer gets a handshake.
type legacyView struct {
	self      string
	clusterID func() string          // raftClusterID
	gossip    atomic.Pointer[gossip] // set once gossip runs
}

// legacyPeer reports whether the node at Raft address addr advertises no
// handshake in gossip (a build before it); unknown addresses get one.
func (v *legacyView) legacyPeer(addr string) bool {
	g := v.gossip.Load()
	if g == nil {
		return false
	}
	for _, p := range g.peers() {
		if p.meta.Raft == addr && p.meta.ID != v.self {
			return p.meta.Handshake == 0
		}
	}
	return false
}

// legacyAccept reports whether a live gossip member of this cluster (or of
// none yet) advertises no handshake: only then are connections without one
// taken, so the window closes once every node runs a build with it.
func (v *legacyView) legacyAccept() bool {
	g := v.gossip.Load()
	if g == nil {
		return false
	}
	cid := v.clusterID()
	for _, p := range g.peers() {
		if p.alive() && p.meta.Handshake == 0 && (p.meta.ClusterID == "" || p.meta.ClusterID == cid) {
			return true
		}
	}
	return false
}
