package main

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/raft"
	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore/api/client"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// tlsCerts writes a CA, node certificates, client certificates and a gossip
// key into a fresh directory with `sessionstore certs`' own code.
func tlsCerts(t *testing.T, nodes, clients []string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "certs")
	var out bytes.Buffer
	if err := writeCerts(certsConfig{out: dir, nodes: nodes, clients: clients, days: 2, caDays: 3}, &out); err != nil {
		t.Fatalf("sessionstore certs: %v\n%s", err, out.String())
	}
	return dir
}

// tlsFiles points a node's TLS flags at dir's files for node id.
func tlsFiles(c *serveConfig, dir, id string) {
	c.TLS.CertFile = filepath.Join(dir, id+".pem")
	c.TLS.KeyFile = filepath.Join(dir, id+"-key.pem")
	c.TLS.CAFile = filepath.Join(dir, "ca.pem")
	c.TLS.GossipKeyFile = filepath.Join(dir, "gossip.key")
}

// tlsStartCluster boots n TLS nodes n1..n (certificates and gossip key from
// dir) that bootstrap one cluster; their clients use dial and their logs are
// kept.
func tlsStartCluster(t *testing.T, dir string, n int, dial []grpc.DialOption, extra ...func(*serveConfig)) []*clNode {
	t.Helper()
	return startClusterOpts(t, n, nodeOpts{dial: dial, keepLog: true, tune: func(c *serveConfig) {
		tlsFiles(c, dir, c.Cluster.NodeID)
		for _, f := range extra {
			f(c)
		}
	}})
}

// tlsDial returns client options from the CLI's own connection flags.
func tlsDial(t *testing.T, f clientFlags) []grpc.DialOption {
	t.Helper()
	opts, err := f.dialOptions()
	if err != nil {
		t.Fatal(err)
	}
	return opts
}

// tlsConfigServers is the leader's Raft configuration (ids), polled until a
// leader answers.
func tlsConfigServers(t *testing.T, nodes []*clNode) []string {
	t.Helper()
	var ids []string
	clustertest.Eventually(t, 30*time.Second, func() error {
		l := leaderOf(nodes)
		if l == nil {
			return errors.New("no leader answered")
		}
		f := l.srv.node.Raft().GetConfiguration()
		if err := f.Error(); err != nil {
			return fmt.Errorf("no leader answered: %v", err)
		}
		for _, s := range f.Configuration().Servers {
			ids = append(ids, string(s.ID))
		}
		return nil
	})
	slices.Sort(ids)
	return ids
}

// A cluster whose nodes all run with certificates from `sessionstore certs` and an
// encrypted gossip forms (Raft over mutual TLS), forwards a write from a
// follower to the leader over mutual TLS, serves TLS clients that trust the
// CA (with or without a client certificate, through the CLI's flags too),
// and refuses plaintext clients and clients that trust another CA.
func TestTLS_ClusterOverMutualTLS(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	dir := tlsCerts(t, []string{"n1", "n2", "n3"}, []string{"admin"})
	other := tlsCerts(t, []string{"n1"}, nil)
	ca := filepath.Join(dir, "ca.pem")
	withCA := tlsDial(t, clientFlags{ca: ca})
	nodes := tlsStartCluster(t, dir, 3, withCA)
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()

	_, follower := followerOf(t, nodes)
	// The follower forwards Create and Append to the leader over mutual TLS.
	clWriteAndReadEverywhere(t, ctx, follower.Client, nodes, "via-follower")
	for _, nd := range nodes {
		if !nd.log.has("TLS on", "client_auth=optional") || !nd.log.has("gossip encrypted") {
			t.Errorf("%s did not log its transport security", nd.id)
		}
		for _, l := range []string{"gRPC API", "HTTP", "Raft", "gossip"} {
			if nd.log.has("WITHOUT encryption", "listener=\""+l) {
				t.Errorf("%s warned that %s is plaintext", nd.id, l)
			}
		}
	}

	addr := follower.srv.grpcAddr
	once := client.Options{MaxAttempts: 1}
	t.Run("plaintext client refused", func(t *testing.T) {
		c, err := client.Dial(ctx, addr)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		if st, err := c.WithOptions(once).Status(cctx); err == nil {
			t.Fatalf("a plaintext client got an answer: %+v", st)
		}
	})
	t.Run("client trusting another CA refused", func(t *testing.T) {
		c, err := client.Dial(ctx, addr, tlsDial(t, clientFlags{ca: filepath.Join(other, "ca.pem")})...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		cctx, ccancel := context.WithTimeout(ctx, 10*time.Second)
		defer ccancel()
		if _, err := c.WithOptions(once).Status(cctx); err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("status: %v, want a certificate error", err)
		}
	})
	t.Run("client certificate of another CA refused", func(t *testing.T) {
		// The node's CA is trusted, but the client presents a certificate
		// the node cannot verify (forced: Go's client offers only a
		// certificate of a CA the server names).
		cfg, err := tlsconf.Client(tlsconf.ClientFiles{CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		foreign, err := tlsconf.LoadKeyPair(filepath.Join(other, "n1.pem"), filepath.Join(other, "n1-key.pem"))
		if err != nil {
			t.Fatal(err)
		}
		cfg.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &foreign, nil }
		conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
		if err == nil {
			_ = conn.SetDeadline(time.Now().Add(10 * time.Second))
			_, err = conn.Read(make([]byte, 1)) // TLS 1.3: the refusal arrives after the handshake
			conn.Close()
		}
		if err == nil || !strings.Contains(err.Error(), "certificate") {
			t.Fatalf("handshake with a foreign client certificate: %v, want a certificate error", err)
		}
	})
	t.Run("TLS clients with the CA", func(t *testing.T) {
		for _, f := range []clientFlags{
			{ca: ca},
			{ca: ca, cert: filepath.Join(dir, "client-admin.pem"), key: filepath.Join(dir, "client-admin-key.pem")},
			{ca: ca, serverName: "n2"}, // every node's certificate names localhost and 127.0.0.1; n2 only n2's
		} {
			a := addr
			if f.serverName != "" {
				a = nodes[1].srv.grpcAddr
			}
			c, err := client.Dial(ctx, a, tlsDial(t, f)...)
			if err != nil {
				t.Fatal(err)
			}
			st, err := c.Status(ctx)
			c.Close()
			if err != nil || st.GetLeaderId() == "" {
				t.Fatalf("status with %+v: %+v, %v", f, st, err)
			}
		}
		c, err := client.Dial(ctx, nodes[0].srv.grpcAddr, tlsDial(t, clientFlags{ca: ca, serverName: "n2"})...)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if _, err := c.WithOptions(once).Status(ctx); err == nil {
			t.Fatal("n1 answered for the server name n2")
		}
	})
	t.Run("sessionstore status with TLS flags", func(t *testing.T) {
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"status", "--addr", addr, "--tls-ca", ca}, &out, &errb); code != 0 {
			t.Fatalf("sessionstore status --tls-ca: exit %d: %s", code, errb.String())
		}
		for _, want := range []string{"n1", "n2", "n3", "Voter"} {
			if !strings.Contains(out.String(), want) {
				t.Fatalf("sessionstore status output lacks %q:\n%s", want, out.String())
			}
		}
		t.Setenv("SESSIONSTORE_TLS_CA", ca) // the env fallback of every flag
		out.Reset()
		if code := run(ctx, []string{"status", "--addr", addr, "--json"}, &out, &errb); code != 0 || !strings.Contains(out.String(), `"leader_id"`) {
			t.Fatalf("sessionstore status with SESSIONSTORE_TLS_CA: exit %d: %s %s", code, out.String(), errb.String())
		}
		t.Setenv("SESSIONSTORE_TLS_CA", "")
		os.Unsetenv("SESSIONSTORE_TLS_CA")
		out.Reset()
		errb.Reset()
		if code := run(ctx, []string{"status", "--addr", addr, "--timeout", "3s"}, &out, &errb); code != 1 {
			t.Fatalf("sessionstore status without TLS against a TLS node: exit %d, want 1", code)
		}
	})
	t.Run("HTTPS", func(t *testing.T) {
		cfg, err := tlsconf.Client(tlsconf.ClientFiles{CA: ca})
		if err != nil {
			t.Fatal(err)
		}
		hc := &http.Client{Transport: &http.Transport{TLSClientConfig: cfg}, Timeout: 10 * time.Second}
		resp, err := hc.Get("https://" + follower.srv.httpAddr + "/readyz")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET https /readyz: %s", resp.Status)
		}
		plain := &http.Client{Timeout: 10 * time.Second}
		if resp, err := plain.Get("http://" + follower.srv.httpAddr + "/readyz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				t.Fatal("plain HTTP got /readyz")
			}
		}
		loc, err := follower.Client.Locate(ctx, &pb.LocateRequest{Header: &pb.SessionHeader{Id: "via-follower", CreatedAt: 1}})
		if err != nil || !strings.HasPrefix(loc.GetUrl(), "https://") {
			t.Fatalf("Locate: %q, %v; want an https URL", loc.GetUrl(), err)
		}
	})
	// Last: a follower that leaves asks the leader, over mutual TLS with its
	// node certificate, to remove it. (Only the removal is checked: that the
	// leader may add a leaving node back before gossip reports it gone is a
	// race of its own, with or without TLS.)
	t.Run("sessionstore leave over TLS", func(t *testing.T) {
		var leaving *clNode
		for _, nd := range nodes {
			if nd.srv.node.Raft().State() != raft.Leader {
				leaving = nd
				break
			}
		}
		var out, errb bytes.Buffer
		if code := run(ctx, []string{"leave", "--addr", leaving.srv.grpcAddr, "--tls-ca", ca}, &out, &errb); code != 0 {
			t.Fatalf("sessionstore leave: exit %d: %s", code, errb.String())
		}
		if !strings.Contains(out.String(), leaving.id+" left the cluster") {
			t.Fatalf("sessionstore leave printed %q", out.String())
		}
		removed := false
		for _, nd := range nodes {
			removed = removed || nd.log.has("removed a server from the configuration", "peer_id="+leaving.id)
		}
		if !removed {
			t.Fatalf("no node logged the removal of %s", leaving.id)
		}
	})
}

// A node that cannot prove it belongs cannot join: with a certificate of
// another CA (and the right gossip key) the leader learns of it through
// gossip but never adds it to the Raft configuration; with a certificate of
// the right CA but another gossip key it is not even in the gossip pool. The
// cluster keeps serving throughout.
func TestTLS_ForeignNodeCannotJoin(t *testing.T) {
	if testing.Short() {
		t.Skip("starts five nodes")
	}
	dir := tlsCerts(t, []string{"n1", "n2", "n3", "n5"}, nil)
	foreign := tlsCerts(t, []string{"n4"}, nil)
	withCA := tlsDial(t, clientFlags{ca: filepath.Join(dir, "ca.pem")})
	nodes := tlsStartCluster(t, dir, 3, withCA)
	ctx, cancel := context.WithTimeout(context.Background(), 180*time.Second)
	defer cancel()
	var seeds []string
	for _, nd := range nodes {
		seeds = append(seeds, nd.srv.node.GossipAddr())
	}
	want := []string{"n1", "n2", "n3"}
	check := func(when string) {
		t.Helper()
		if got := tlsConfigServers(t, nodes); !slices.Equal(got, want) {
			t.Fatalf("%s: the Raft configuration is %v, want %v", when, got, want)
		}
	}
	waitLog := func(what string, logs []*nodeLog, all ...string) {
		t.Helper()
		clustertest.Eventually(t, 60*time.Second, func() error {
			for _, l := range logs {
				if l.has(all...) {
					return nil
				}
			}
			return fmt.Errorf("no sign that %s", what)
		})
	}
	var clusterLogs []*nodeLog
	for _, nd := range nodes {
		clusterLogs = append(clusterLogs, nd.log)
	}

	t.Run("certificate of another CA", func(t *testing.T) {
		n4 := startNode(t, nodeOpts{id: "n4", freePorts: true, tune: func(c *serveConfig) {
			tlsFiles(c, foreign, "n4")
			c.TLS.GossipKeyFile = filepath.Join(dir, "gossip.key") // the right gossip key
			c.Join = strings.Join(seeds, ",")
		}})
		// The leader knew of n4 (gossip works) and refused it at the TLS check.
		waitLog("the leader checked n4's certificate", clusterLogs, "failed the TLS check", "peer_id=n4")
		check("after the leader refused n4")
		clWriteAndReadEverywhere(t, ctx, nodes[2].Client, nodes, "after-n4")
		check("after more writes")
		if err := n4.srv.node.Ready(); err == nil {
			t.Fatal("n4 reports ready")
		}
		n4.Close()
	})
	t.Run("another gossip key", func(t *testing.T) {
		wrong, err := tlsconf.NewGossipKey()
		if err != nil {
			t.Fatal(err)
		}
		n5 := startNode(t, nodeOpts{id: "n5", freePorts: true, keepLog: true, tune: func(c *serveConfig) {
			tlsFiles(c, dir, "n5") // a valid node certificate of the cluster's CA
			c.TLS.GossipKeyFile = ""
			c.TLS.GossipKey = tlsconf.EncodeGossipKey(wrong)
			c.Join = strings.Join(seeds, ",")
		}})
		// n5 tried the seeds and none would talk to it.
		waitLog("n5 tried to gossip", []*nodeLog{n5.log}, "no gossip seed answered yet")
		waitLog("a seed refused n5's gossip", clusterLogs, "memberlist", "decrypt")
		check("after n5 tried to join")
		clWriteAndReadEverywhere(t, ctx, nodes[0].Client, nodes, "after-n5")
		check("after more writes")
		if err := n5.srv.node.Ready(); err == nil {
			t.Fatal("n5 reports ready")
		}
	})
	ms, err := leaderOf(nodes).Client.Members(ctx)
	if err != nil || len(ms) != 3 {
		t.Fatalf("members: %v, %v", ms, err)
	}
	for _, m := range ms {
		if m.Suffrage != raft.Voter.String() {
			t.Errorf("member %+v is not a voter", m)
		}
	}
}

// `sessionstore serve`'s TLS and gossip-key flags: what is accepted and what is
// refused with which message.
func TestTLS_ServeFlags(t *testing.T) {
	dir := tlsCerts(t, []string{"n1"}, []string{"alice"})
	other := tlsCerts(t, []string{"n1"}, nil)
	p := func(name string) string { return filepath.Join(dir, name) }
	key32 := tlsconf.EncodeGossipKey(bytes.Repeat([]byte{7}, 32))
	badKeyFile := filepath.Join(t.TempDir(), "bad.key")
	if err := os.WriteFile(badKeyFile, []byte(tlsconf.EncodeGossipKey(make([]byte, 10))), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		cfg     transportConfig
		wantErr string // "" = accepted
		tls     bool
		key     int
	}{
		{"plaintext default", transportConfig{ClientAuth: "optional"}, "", false, 0},
		{"full TLS", transportConfig{CertFile: p("n1.pem"), KeyFile: p("n1-key.pem"), CAFile: p("ca.pem"), ClientAuth: "optional"}, "", true, 0},
		{"TLS, require, key file", transportConfig{CertFile: p("n1.pem"), KeyFile: p("n1-key.pem"), CAFile: p("ca.pem"), ClientAuth: "require", GossipKeyFile: p("gossip.key")}, "", true, 32},
		{"gossip key only", transportConfig{ClientAuth: "optional", GossipKey: key32}, "", false, 32},
		{"CA alone", transportConfig{CAFile: p("ca.pem"), ClientAuth: "optional"}, "missing --tls-cert, --tls-key", false, 0},
		{"certificate and key without CA", transportConfig{CertFile: p("n1.pem"), KeyFile: p("n1-key.pem"), ClientAuth: "optional"}, "missing --tls-ca", false, 0},
		{"certificate without key", transportConfig{CertFile: p("n1.pem"), CAFile: p("ca.pem"), ClientAuth: "optional"}, "missing --tls-key", false, 0},
		{"client certificate as node certificate", transportConfig{CertFile: p("client-alice.pem"), KeyFile: p("client-alice-key.pem"), CAFile: p("ca.pem"), ClientAuth: "optional"}, "not a node certificate", false, 0},
		{"certificate of another CA", transportConfig{CertFile: filepath.Join(other, "n1.pem"), KeyFile: filepath.Join(other, "n1-key.pem"), CAFile: p("ca.pem"), ClientAuth: "optional"}, "does not verify against the CA", false, 0},
		{"unknown client auth", transportConfig{ClientAuth: "sometimes"}, "--tls-client-auth", false, 0},
		{"require without TLS", transportConfig{ClientAuth: "require"}, "needs TLS", false, 0},
		{"short gossip key", transportConfig{ClientAuth: "optional", GossipKey: tlsconf.EncodeGossipKey(make([]byte, 8))}, "8 bytes, want 16, 24 or 32", false, 0},
		{"gossip key not base64", transportConfig{ClientAuth: "optional", GossipKey: "???"}, "not base64", false, 0},
		{"both gossip key flags", transportConfig{ClientAuth: "optional", GossipKey: key32, GossipKeyFile: p("gossip.key")}, "not both", false, 0},
		{"bad gossip key file", transportConfig{ClientAuth: "optional", GossipKeyFile: badKeyFile}, "10 bytes", false, 0},
		{"missing gossip key file", transportConfig{ClientAuth: "optional", GossipKeyFile: p("nope")}, "no such file", false, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sec, err := loadTransportSecurity(tt.cfg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if sec.tls() != tt.tls || len(sec.gossipKey) != tt.key {
				t.Fatalf("tls %v, gossip key %d bytes; want %v, %d", sec.tls(), len(sec.gossipKey), tt.tls, tt.key)
			}
			if tt.tls && sec.apiTLS().ClientAuth != map[string]tls.ClientAuthType{"optional": tls.VerifyClientCertIfGiven, "require": tls.RequireAndVerifyClientCert}[tt.cfg.ClientAuth] {
				t.Fatalf("API client auth %v for %q", sec.apiTLS().ClientAuth, tt.cfg.ClientAuth)
			}
		})
	}

	// The flags exist on `sessionstore serve` and read the environment.
	t.Setenv("SESSIONSTORE_GOSSIP_KEY", key32)
	cfg := defaultServeConfig()
	fs := newServeFlagSet(&cfg)
	if err := parseFlags(fs, []string{"--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-ca", "ca.pem", "--tls-client-auth", "require"}); err != nil {
		t.Fatal(err)
	}
	if got := cfg.TLS; got != (transportConfig{CertFile: "c.pem", KeyFile: "k.pem", CAFile: "ca.pem", ClientAuth: "require", GossipKey: key32}) {
		t.Fatalf("parsed %+v", got)
	}

	// A node refuses to start on an incomplete set.
	c := defaultServeConfig()
	c.Cluster.DataDir = t.TempDir()
	c.GRPCAddr, c.HTTPAddr, c.Cluster.RaftAddr, c.Cluster.GossipAddr = "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0"
	c.TLS = transportConfig{CAFile: p("ca.pem"), ClientAuth: "optional"}
	if s, err := startServer(c, slog.New(slog.NewTextHandler(io.Discard, nil)), io.Discard); err == nil {
		s.Close()
		t.Fatal("a node started with --tls-ca alone")
	}
}

func newServeFlagSet(cfg *serveConfig) *flag.FlagSet {
	fs := flag.NewFlagSet("sessionstore serve", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	serveFlags(cfg, fs)
	return fs
}

// warnIfExposed names exactly the plaintext listeners on non-loopback addresses.
func TestTLS_WarnIfExposed(t *testing.T) {
	dir := tlsCerts(t, []string{"n1"}, nil)
	full, err := loadTransportSecurity(transportConfig{CertFile: filepath.Join(dir, "n1.pem"), KeyFile: filepath.Join(dir, "n1-key.pem"),
		CAFile: filepath.Join(dir, "ca.pem"), ClientAuth: "optional", GossipKeyFile: filepath.Join(dir, "gossip.key")})
	if err != nil {
		t.Fatal(err)
	}
	tlsOnly := *full
	tlsOnly.gossipKey = nil
	plain := &transportSecurity{}
	keyOnly := &transportSecurity{gossipKey: full.gossipKey}
	tcp := func(s string) net.Addr { a, _ := net.ResolveTCPAddr("tcp", s); return a }
	exposed := cluster0("0.0.0.0:7401", "0.0.0.0:7402")
	local := cluster0("127.0.0.1:7401", "localhost:7402")
	tests := []struct {
		name   string
		ls     []exposedListener
		warned []string
	}{
		{"plaintext on all interfaces", plain.listeners(tcp("0.0.0.0:7400"), tcp("0.0.0.0:7480"), exposed), []string{"gRPC API", "HTTP", "Raft", "gossip"}},
		{"plaintext on loopback", plain.listeners(tcp("127.0.0.1:7400"), tcp("[::1]:7480"), local), nil},
		{"TLS and gossip key", full.listeners(tcp("0.0.0.0:7400"), tcp("0.0.0.0:7480"), exposed), nil},
		{"TLS without gossip key", tlsOnly.listeners(tcp("0.0.0.0:7400"), tcp("0.0.0.0:7480"), exposed), []string{"gossip"}},
		{"gossip key without TLS", keyOnly.listeners(tcp("0.0.0.0:7400"), tcp("0.0.0.0:7480"), exposed), []string{"gRPC API", "HTTP", "Raft"}},
		{"API exposed, cluster on loopback", plain.listeners(tcp("10.0.0.1:7400"), tcp("127.0.0.1:7480"), local), []string{"gRPC API"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lg := &nodeLog{}
			warnIfExposed(slog.New(slog.NewTextHandler(lg, nil)), tt.ls...)
			var got []string
			for _, l := range []string{"gRPC API", "HTTP", "Raft", "gossip"} {
				if lg.has("WITHOUT encryption", `listener="`+l+`"`) || lg.has("WITHOUT encryption", "listener="+l+" ") {
					got = append(got, l)
				}
			}
			if !slices.Equal(got, tt.warned) {
				t.Fatalf("warned about %v, want %v\n%s", got, tt.warned, lg.String())
			}
		})
	}
}

func cluster0(raftAddr, gossipAddr string) (c cluster.Config) {
	c.RaftAddr, c.GossipAddr = raftAddr, gossipAddr
	return c
}

// `sessionstore certs`: the files, their modes and contents, no overwriting without
// --force, and a second run that reuses the CA to add a node.
func TestTLS_CertsCommand(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	var out, errb bytes.Buffer
	args := []string{"certs", "--out", dir, "--nodes", "node1,node2", "--hosts", "db.example,10.1.2.3", "--clients", "admin", "--days", "30"}
	if code := run(context.Background(), args, &out, &errb); code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	files := map[string]os.FileMode{"ca.pem": 0o644, "ca-key.pem": 0o600, "node1.pem": 0o644, "node1-key.pem": 0o600,
		"node2.pem": 0o644, "node2-key.pem": 0o600, "client-admin.pem": 0o644, "client-admin-key.pem": 0o600, "gossip.key": 0o600, "cluster.key": 0o600}
	for name, mode := range files {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != mode {
			t.Errorf("%s: mode %04o, want %04o", name, fi.Mode().Perm(), mode)
		}
		if !strings.Contains(out.String(), filepath.Join(dir, name)) {
			t.Errorf("the output does not name %s:\n%s", name, out.String())
		}
	}
	if entries, _ := os.ReadDir(dir); len(entries) != len(files) {
		t.Errorf("%d files in %s, want %d", len(entries), dir, len(files))
	}
	n1, err := tlsconf.LoadNode(filepath.Join(dir, "node1.pem"), filepath.Join(dir, "node1-key.pem"), filepath.Join(dir, "ca.pem"))
	if err != nil {
		t.Fatal(err)
	}
	leaf := n1.Cert.Leaf
	if !slices.Equal(leaf.DNSNames, []string{"node1", "localhost", "db.example"}) || len(leaf.IPAddresses) != 3 || !leaf.IPAddresses[2].Equal(net.ParseIP("10.1.2.3")) {
		t.Errorf("node1 SANs: %v %v", leaf.DNSNames, leaf.IPAddresses)
	}
	if d := time.Until(leaf.NotAfter); d > 30*24*time.Hour || d < 29*24*time.Hour {
		t.Errorf("node1 valid for %v more, want 30 days", d)
	}
	admin, err := tlsconf.LoadKeyPair(filepath.Join(dir, "client-admin.pem"), filepath.Join(dir, "client-admin-key.pem"))
	if err != nil || tlsconf.PrincipalOf(admin.Leaf) != "admin" || tlsconf.IsNodeCert(admin.Leaf) {
		t.Fatalf("client-admin: %v", err)
	}
	key, err := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if err != nil {
		t.Fatal(err)
	}
	if k, err := tlsconf.ParseGossipKey(string(key)); err != nil || len(k) != 32 {
		t.Fatalf("gossip.key: %d bytes, %v", len(k), err)
	}

	// Existing files are not overwritten, and nothing is written then.
	caBefore, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"certs", "--out", dir, "--nodes", "node3,node1"}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "node1.pem") || !strings.Contains(errb.String(), "--force") {
		t.Fatalf("exit %d, want 1 naming node1.pem and --force: %s", code, errb.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "node3.pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("node3.pem written by a refused run: %v", err)
	}

	// Adding a node reuses the CA and the gossip key; --force replaces files.
	out.Reset()
	if code := run(context.Background(), []string{"certs", "--out", dir, "--nodes", "node3,node1", "--force"}, &out, &errb); code != 0 {
		t.Fatalf("--force: exit %d: %s", code, errb.String())
	}
	caAfter, _ := os.ReadFile(filepath.Join(dir, "ca.pem"))
	keyAfter, _ := os.ReadFile(filepath.Join(dir, "gossip.key"))
	if !bytes.Equal(caBefore, caAfter) || !bytes.Equal(key, keyAfter) {
		t.Fatal("a second run replaced the CA or the gossip key")
	}
	if !strings.Contains(out.String(), "kept") {
		t.Errorf("the second run does not say it kept the CA:\n%s", out.String())
	}
	if _, err := tlsconf.LoadNode(filepath.Join(dir, "node3.pem"), filepath.Join(dir, "node3-key.pem"), filepath.Join(dir, "ca.pem")); err != nil {
		t.Fatalf("node3 from the reused CA: %v", err)
	}

	// Usage errors.
	for _, bad := range [][]string{
		{"certs", "--nodes", "n1"},                  // no --out
		{"certs", "--out", dir},                     // nothing to issue
		{"certs", "--out", dir, "--nodes", "a/b"},   // not a file-safe name
		{"certs", "--out", dir, "--nodes", "n1,n1"}, // twice
		{"certs", "--out", dir, "--nodes", "n1", "--days", "0"},
	} {
		errb.Reset()
		if code := run(context.Background(), bad, io.Discard, &errb); code != 2 {
			t.Errorf("%v: exit %d, want 2 (%s)", bad, code, errb.String())
		}
	}
	errb.Reset()
	if code := run(context.Background(), []string{"certs", "--help"}, io.Discard, &errb); code != 0 || !strings.Contains(errb.String(), "Usage: sessionstore certs") {
		t.Errorf("--help: exit %d: %s", code, errb.String())
	}
	// Only one half of a CA: refused.
	half := filepath.Join(t.TempDir(), "half")
	if err := os.MkdirAll(half, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(half, "ca.pem"), caBefore, 0o644); err != nil {
		t.Fatal(err)
	}
	if code := run(context.Background(), []string{"certs", "--out", half, "--nodes", "n1"}, io.Discard, &errb); code != 1 {
		t.Errorf("a directory with ca.pem only: exit %d, want 1", code)
	}
}

// The client subcommands' connection flags.
func TestTLS_ClientFlags(t *testing.T) {
	dir := tlsCerts(t, []string{"n1"}, []string{"alice"})
	p := func(name string) string { return filepath.Join(dir, name) }
	tests := []struct {
		name    string
		args    []string
		env     map[string]string
		opts    int
		wantErr string
	}{
		{"none: plaintext", nil, nil, 0, ""},
		{"token", []string{"--token", "t"}, nil, 1, ""},
		{"token from the environment", nil, map[string]string{"SESSIONSTORE_TOKEN": "t"}, 1, ""},
		{"CA", []string{"--tls-ca", p("ca.pem")}, nil, 1, ""},
		{"CA, client certificate and token", []string{"--tls-ca", p("ca.pem"), "--tls-cert", p("client-alice.pem"), "--tls-key", p("client-alice-key.pem"), "--token", "t"}, nil, 2, ""},
		{"server name alone: TLS with the system's roots", []string{"--tls-server-name", "n1"}, nil, 1, ""},
		{"certificate without key", []string{"--tls-ca", p("ca.pem"), "--tls-cert", p("client-alice.pem")}, nil, 0, "both"},
		{"missing CA file", []string{"--tls-ca", p("nope.pem")}, nil, 0, "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			fs := flag.NewFlagSet("x", flag.ContinueOnError)
			fs.SetOutput(io.Discard)
			cf := addClientFlags(fs)
			if err := parseFlags(fs, tt.args); err != nil {
				t.Fatal(err)
			}
			opts, err := cf.dialOptions()
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil || len(opts) != tt.opts {
				t.Fatalf("%d options, %v; want %d", len(opts), err, tt.opts)
			}
		})
	}
	// Every client subcommand has the flags.
	for _, cmd := range []string{"status", "leave", "export", "import", "bench"} {
		var errb bytes.Buffer
		run(context.Background(), []string{cmd, "--help"}, io.Discard, &errb)
		for _, f := range []string{"-tls-ca", "-tls-cert", "-tls-key", "-tls-server-name", "-token"} {
			if !strings.Contains(errb.String(), f+" ") && !strings.Contains(errb.String(), f+"\n") {
				t.Errorf("sessionstore %s --help lacks %s", cmd, f)
			}
		}
	}
	var errb bytes.Buffer
	if code := run(context.Background(), []string{"status", "--tls-cert", p("client-alice.pem"), "--tls-ca", p("ca.pem")}, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), "both") {
		t.Errorf("status with a certificate but no key: exit %d: %s", code, errb.String())
	}
}
