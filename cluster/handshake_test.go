package cluster

import (
	"bytes"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"testing"
)

func TestAdmitCluster(t *testing.T) {
	tests := []struct {
		local, peer string
		peerDialled bool
		ok          bool
	}{
		{"", "", true, true},     // a new cluster's bootstrap: nobody has an id yet
		{"", "a", true, true},    // a new node adopts the cluster that replicates to it
		{"", "a", false, true},   // a node without id dials one with (a vote request)
		{"a", "a", true, true},   // same cluster
		{"a", "a", false, true},  // same cluster
		{"a", "", false, true},   // a leader dials a new node: it adopts the cluster
		{"a", "", true, false},   // a node without id sends RPCs to a cluster member
		{"a", "b", true, false},  // another cluster dials
		{"a", "b", false, false}, // we dial another cluster's node
	}
	for _, tc := range tests {
		err := admitCluster(tc.local, tc.peer, tc.peerDialled)
		if (err == nil) != tc.ok {
			t.Errorf("admitCluster(%q, %q, dialled=%v) = %v, want ok=%v", tc.local, tc.peer, tc.peerDialled, err, tc.ok)
		}
		if err != nil && (!errors.Is(err, errHandshake) || !strings.Contains(err.Error(), tc.local)) {
			t.Errorf("admitCluster(%q, %q): error %q does not name this node's cluster", tc.local, tc.peer, err)
		}
	}
}

// TestHandshake runs both sides over an in-memory connection and checks that
// bytes after a successful handshake arrive untouched (raft's own stream).
func TestHandshake(t *testing.T) {
	key := []byte("0123456789abcdef0123456789abcdef")
	other := []byte("fedcba9876543210fedcba9876543210")
	tests := []struct {
		name                 string
		dialCID, acceptCID   string
		dialKey, acceptKey   []byte
		wantDial, wantAccept string // substring of the error; "" means success
		dialOpt, acceptOpt   bool   // the cluster key is optional (turning it on)
	}{
		{"same cluster, no key", "c1", "c1", nil, nil, "", "", false, false},
		{"same cluster, same key", "c1", "c1", key, key, "", "", false, false},
		{"bootstrap: no ids yet", "", "", key, key, "", "", false, false},
		{"new node accepts a leader", "c1", "", key, key, "", "", false, false},
		{"other cluster", "c2", "c1", key, key, "refused by the peer: node \"acc\"", "belongs to cluster c2, this node to cluster c1", false, false},
		{"idless dialler", "", "c1", nil, nil, "refused by the peer", "no cluster id yet", false, false},
		{"other key", "c1", "c1", other, key, "cluster key is not this node's", "reading the proof", false, false},
		{"dialler without key", "c1", "c1", nil, key, "", "the peer has no cluster key", false, false},
		{"acceptor without key", "c1", "c1", key, nil, "the peer has no cluster key", "reading the proof", false, false},
		{"optional key, dialler without", "c1", "c1", nil, key, "", "", false, true},
		{"optional key, acceptor without", "c1", "c1", key, nil, "", "", true, false},
		{"optional keys, both have it", "c1", "c1", key, key, "", "", true, true},
		{"optional keys, another key", "c1", "c1", other, key, "cluster key is not this node's", "reading the proof", true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			log := slog.New(slog.NewTextHandler(io.Discard, nil))
			dh := newHandshaker("dia", tc.dialKey, func() string { return tc.dialCID }, log)
			ah := newHandshaker("acc", tc.acceptKey, func() string { return tc.acceptCID }, log)
			dh.optional, ah.optional = tc.dialOpt, tc.acceptOpt
			dc, ac := net.Pipe()
			defer dc.Close()
			defer ac.Close()
			acceptErr := make(chan error, 1)
			got := make(chan []byte, 1)
			go func() {
				c := &hsConn{Conn: ac, h: ah}
				buf := make([]byte, 5)
				_, err := io.ReadFull(c, buf)
				acceptErr <- err
				got <- buf
				ac.Close()
			}()
			err := dh.dial(dc, "acc:1")
			checkErr(t, "dial", err, tc.wantDial)
			if err == nil {
				_, _ = dc.Write([]byte("raft!")) // fails when the acceptor refused
			}
			dc.Close()
			aerr := <-acceptErr
			checkErr(t, "accept", aerr, tc.wantAccept)
			if b := <-got; aerr == nil && !bytes.Equal(b, []byte("raft!")) {
				t.Errorf("raft bytes after the handshake = %q", b)
			}
		})
	}
}

func checkErr(t *testing.T, side string, err error, want string) {
	t.Helper()
	switch {
	case want == "" && err != nil:
		t.Errorf("%s: %v, want success", side, err)
	case want != "" && (err == nil || !strings.Contains(err.Error(), want)):
		t.Errorf("%s: %v, want an error containing %q", side, err, want)
	}
}

// TestHandshakeRefusesRawRaft: a peer that starts with raft's own bytes (a
// build without the handshake, or a stranger) gets nothing through.
func TestHandshakeRefusesRawRaft(t *testing.T) {
	ah := newHandshaker("acc", nil, func() string { return "c1" }, slog.New(slog.NewTextHandler(io.Discard, nil)))
	dc, ac := net.Pipe()
	defer ac.Close()
	go func() { _, _ = dc.Write([]byte{0, 1, 2, 3, 4, 5, 6, 7}); dc.Close() }()
	c := &hsConn{Conn: ac, h: ah}
	if _, err := c.Read(make([]byte, 8)); !errors.Is(err, errHandshake) {
		t.Fatalf("raw raft bytes: %v, want a handshake refusal", err)
	}
}

// TestHandshakeLegacy: during a rolling upgrade a connection without the
// handshake passes untouched while legacyAccept allows it, never with a
// cluster key; a peer that advertises no handshake is dialled without one.
func TestHandshakeLegacy(t *testing.T) {
	raw := []byte{1, 9, 9, 9}
	for _, tc := range []struct {
		name  string
		key   []byte
		allow bool
		ok    bool
	}{
		{"an old member is live", nil, true, true},
		{"every member has the handshake", nil, false, false},
		{"with a cluster key", []byte("0123456789abcdef"), true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ah := newHandshaker("acc", tc.key, func() string { return "c1" }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			ah.legacyAccept = func() bool { return tc.allow }
			dh := newHandshaker("dia", nil, func() string { return "c1" }, slog.New(slog.NewTextHandler(io.Discard, nil)))
			dh.legacyPeer = func(addr string) bool { return addr == "old:1" }
			dc, ac := net.Pipe()
			defer ac.Close()
			go func() {
				if err := dh.dial(dc, "old:1"); err != nil {
					t.Errorf("dial of an old peer: %v", err)
				}
				_, _ = dc.Write(raw)
				dc.Close()
			}()
			got, err := io.ReadAll(&hsConn{Conn: ac, h: ah})
			if tc.ok && (err != nil || !bytes.Equal(got, raw)) {
				t.Fatalf("legacy connection: %q, %v; want %q", got, err, raw)
			}
			if !tc.ok && !errors.Is(err, errHandshake) {
				t.Fatalf("legacy connection: %q, %v; want a handshake refusal", got, err)
			}
		})
	}
}

// FuzzHandshakeDecode: the decoders never panic and what they accept
// re-encodes to the bytes they read.
func FuzzHandshakeDecode(f *testing.F) {
	var n [hsNonceLen]byte
	f.Add(hsHello{Nonce: n, ClusterID: "abc", NodeID: "n1"}.encode())
	f.Add(hsReply{Nonce: n, ClusterID: "abc", NodeID: "n1", MAC: bytes.Repeat([]byte{7}, 32)}.encode())
	f.Add(hsReply{Refusal: "no"}.encode())
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, b []byte) {
		r := bytes.NewReader(b)
		if h, err := readHello(r); err == nil {
			if enc := h.encode(); !bytes.Equal(enc, b[:len(enc)]) {
				t.Fatalf("hello %q re-encodes to %q", b, enc)
			}
		}
		r = bytes.NewReader(b)
		if p, err := readReply(r); err == nil {
			if enc := p.encode(); !bytes.Equal(enc, b[:len(enc)]) {
				t.Fatalf("reply %q re-encodes to %q", b, enc)
			}
		}
	})
}
