package main

import (
	"context"
	"errors"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"
	"google.golang.org/protobuf/reflect/protoregistry"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

const (
	auAdmin  = "admin-token-000000000000000000"
	auAlice  = "alice-token-000000000000000000"
	auReader = "reader-token-00000000000000000"
	auBob    = "bob-token-0000000000000000000"
	auSlow   = "slow-token-000000000000000000"
	auTokens = auAdmin + "  admin   read,write,admin\n" +
		auAlice + "  alice   read,write        alice/   max_sessions=3\n" +
		auReader + " reader  read              alice/\n" +
		auBob + "  bob     read,write        bob/\n" +
		auSlow + "   slow    read              *        rate=0.001 burst=2\n"
)

// auCertTokens names alice's client certificate (cert:alice) and the admin
// token.
const auCertTokens = "cert:alice alice read,write alice/\n" + auAdmin + " admin read,write,admin\n"

// auTokenFile writes a token file with text and returns its path.
func auTokenFile(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// auNode starts a lone node that requires the tokens above.
func auNode(t *testing.T, tune func(*serveConfig)) (*testNode, string) {
	t.Helper()
	t.Parallel()
	path := auTokenFile(t, auTokens)
	n := startTestNodeWith(t, "", func(c *serveConfig) {
		c.Auth.TokenFile = path
		if tune != nil {
			tune(c)
		}
	})
	n.waitReady(true)
	return n, path
}

// auAs returns a client whose calls carry token ("" for none).
func auAs(t *testing.T, n *testNode, token string) *client.Client {
	t.Helper()
	var opts []grpc.DialOption
	if token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(client.BearerToken(token)))
	}
	c, err := client.Dial(context.Background(), n.srv.grpcAddr, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c.WithOptions(client.Options{MaxAttempts: 1})
}

// auMethod is one rpc of the three services, with a request naming a session.
type auMethod struct {
	full     string
	stream   bool
	cluster  bool
	request  proto.Message
	response func() proto.Message
}

// auMethods lists every rpc of the services from the proto's descriptor, so
// a new rpc is covered without editing the test.
func auMethods(t *testing.T, session string) []auMethod {
	t.Helper()
	var out []auMethod
	svcs := sessionpb.File_api_sessionpb_session_proto.Services()
	for i := 0; i < svcs.Len(); i++ {
		sd := svcs.Get(i)
		for j := 0; j < sd.Methods().Len(); j++ {
			md := sd.Methods().Get(j)
			in, err := protoregistry.GlobalTypes.FindMessageByName(md.Input().FullName())
			if err != nil {
				t.Fatal(err)
			}
			outT, err := protoregistry.GlobalTypes.FindMessageByName(md.Output().FullName())
			if err != nil {
				t.Fatal(err)
			}
			req := in.New()
			auNameSession(req, session)
			out = append(out, auMethod{
				full:     "/" + string(sd.FullName()) + "/" + string(md.Name()),
				stream:   md.IsStreamingServer(),
				cluster:  sd.Name() == "Cluster",
				request:  req.Interface(),
				response: func() proto.Message { return outT.New().Interface() },
			})
		}
	}
	if len(out) < 25 {
		t.Fatalf("only %d methods found", len(out))
	}
	return out
}

// auNameSession sets every session-id field of a request (session_id,
// header.id, lease.session_id) and gives plan-mode exits an answer.
func auNameSession(m protoreflect.Message, id string) {
	fields := m.Descriptor().Fields()
	for i := 0; i < fields.Len(); i++ {
		f := fields.Get(i)
		switch {
		case f.Name() == "session_id" && f.Kind() == protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString(id))
		case f.Name() == "node_id" && f.Kind() == protoreflect.StringKind:
			m.Set(f, protoreflect.ValueOfString("no-such-node"))
		case f.Name() == "header" || f.Name() == "lease":
			sub := m.Mutable(f).Message()
			if f.Name() == "header" {
				sub.Set(sub.Descriptor().Fields().ByName("id"), protoreflect.ValueOfString(id))
				sub.Set(sub.Descriptor().Fields().ByName("created_at"), protoreflect.ValueOfInt64(1))
			} else {
				auNameSession(sub, id)
			}
		}
	}
}

// auCall invokes m on conn and returns its error (streams: the first error).
func auCall(ctx context.Context, conn grpc.ClientConnInterface, m auMethod) error {
	if !m.stream {
		return conn.Invoke(ctx, m.full, m.request, m.response())
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	cs, err := conn.NewStream(ctx, &grpc.StreamDesc{ServerStreams: true}, m.full)
	if err != nil {
		return err
	}
	if err := cs.SendMsg(m.request); err != nil {
		return err
	}
	if err := cs.CloseSend(); err != nil {
		return err
	}
	for {
		if err := cs.RecvMsg(m.response()); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if strings.HasSuffix(m.full, "/Watch") {
			return nil // a Watch that was let in streams forever
		}
	}
}

func auReason(err error) sessionstore.Reason {
	var de *sessionstore.Error
	if errors.As(client.FromStatus(err), &de) {
		return de.Reason
	}
	return ""
}

// A client without a token, with a wrong token, or with a token for another
// prefix is refused on every rpc, and nothing is written.
func TestAuth_EveryRPCRefusesStrangers(t *testing.T) {
	n, _ := auNode(t, nil)
	ctx := n.ctx()
	admin := auAs(t, n, auAdmin)
	const id = "alice/s1"
	if _, err := admin.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")}); err != nil {
		t.Fatal(err)
	}
	open := ctOneTurnLog()[:2] // an open turn: a committed Load would append closers
	if _, err := admin.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: open}); err != nil {
		t.Fatal(err)
	}
	before, err := admin.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name  string
		token string
		// want returns the code each method must get.
		want func(m auMethod) codes.Code
	}{
		{"no token", "", func(auMethod) codes.Code { return codes.Unauthenticated }},
		{"wrong token", "wrong-token-00000000000000000", func(auMethod) codes.Code { return codes.Unauthenticated }},
		{"token for another prefix", auBob, func(m auMethod) codes.Code {
			if strings.HasSuffix(m.full, "/List") || strings.HasSuffix(m.full, "/ListSnapshots") {
				return codes.OK // answered, filtered to bob/ (checked below)
			}
			return codes.PermissionDenied
		}},
	}
	for _, c := range cases {
		conn := auAs(t, n, c.token).Conn()
		for _, m := range auMethods(t, id) {
			cctx, cancel := context.WithTimeout(ctx, 10e9)
			err := auCall(cctx, conn, m)
			cancel()
			if got, want := status.Code(err), c.want(m); got != want {
				t.Errorf("%s: %s: got %v (%v), want %v", c.name, m.full, got, err, want)
			}
			if err != nil {
				r := auReason(err)
				if (status.Code(err) == codes.Unauthenticated && r != sessionstore.ReasonUnauthenticated) ||
					(status.Code(err) == codes.PermissionDenied && r != sessionstore.ReasonPermissionDenied) {
					t.Errorf("%s: %s: reason %q", c.name, m.full, r)
				}
				if strings.Contains(err.Error(), "token-0") {
					t.Errorf("%s: %s: the error repeats the token: %v", c.name, m.full, err)
				}
			}
		}
	}
	// Bob's list shows none of alice's sessions.
	bobList, err := auAs(t, n, auBob).List(ctx, &sessionpb.ListRequest{})
	if err != nil || len(bobList.Headers) != 0 {
		t.Fatalf("bob's list: %v %v", bobList, err)
	}
	// Nothing was written: same revision and text, no other session.
	after, err := admin.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	if after.Revision != before.Revision || string(after.Content) != string(before.Content) {
		t.Fatalf("session changed: %s → %s", before.Revision, after.Revision)
	}
	all, err := admin.List(ctx, &sessionpb.ListRequest{})
	if err != nil || len(all.Headers) != 1 {
		t.Fatalf("sessions after the refused calls: %v %v", all, err)
	}
	// HTTP: downloads need read on the session, profiles need admin; health
	// and metrics stay open.
	for _, c := range []struct {
		path, token string
		want        int
	}{
		{"/v1/sessions/alice%2Fs1/session.jsonl", "", 401},
		{"/v1/sessions/alice%2Fs1/session.jsonl", "wrong-token-00000000000000000", 401},
		{"/v1/sessions/alice%2Fs1/session.jsonl.zstd", auBob, 403},
		{"/v1/sessions/alice%2Fs1/session.jsonl", auReader, 200},
		{"/v1/sessions/alice%2Fs1/session.jsonl.zstd", auAdmin, 200},
		{"/debug/pprof/", auAlice, 403},
		{"/debug/pprof/", "", 401},
		{"/metrics", "", 200},
		{"/readyz", "", 200},
	} {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+n.srv.httpAddr+c.path, nil)
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != c.want {
			t.Errorf("GET %s with %q: %d, want %d", c.path, c.token, resp.StatusCode, c.want)
		}
	}
	// The health service stays open (load balancers probe it).
	if _, err := healthpb.NewHealthClient(auAs(t, n, "").Conn()).Check(ctx, &healthpb.HealthCheckRequest{}); err != nil {
		t.Fatalf("health check without a token: %v", err)
	}
}

// Permissions: read-only Load is an Inspect (no repair committed), write
// without admin cannot reach the Cluster service, prefixes bound everything.
func TestAuth_PermissionsAndPrefixes(t *testing.T) {
	n, path := auNode(t, nil)
	ctx := n.ctx()
	alice, reader := auAs(t, n, auAlice), auAs(t, n, auReader)
	const id = "alice/open"
	if _, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")}); err != nil {
		t.Fatal(err)
	}
	if _, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[:2]}); err != nil {
		t.Fatal(err)
	}
	rev := func() string {
		r, err := alice.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		return r.Revision
	}
	r0 := rev()
	v, err := reader.Load(ctx, &sessionpb.LoadRequest{SessionId: id})
	if err != nil {
		t.Fatalf("reader's load: %v", err)
	}
	if len(v.Events) <= 2 || rev() != r0 {
		t.Fatalf("reader's load: %d events (want the closers in memory), revision %s → %s (want unchanged)", len(v.Events), r0, rev())
	}
	if _, err := reader.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: ctOneTurnLog()[2:3]}); auReason(err) != sessionstore.ReasonPermissionDenied {
		t.Fatalf("reader's append: %v", err)
	}
	// Alice's Load repairs (she may write).
	if _, err := alice.Load(ctx, &sessionpb.LoadRequest{SessionId: id}); err != nil || rev() == r0 {
		t.Fatalf("alice's load: %v (revision %s)", err, rev())
	}
	if _, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("bob/x", "/w")}); auReason(err) != sessionstore.ReasonPermissionDenied {
		t.Fatalf("alice creating bob/x: %v", err)
	}
	if _, err := sessionpb.NewClusterClient(alice.Conn()).Status(ctx, &sessionpb.StatusRequest{}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice's cluster status: %v", err)
	}
	if _, err := sessionpb.NewClusterClient(auAs(t, n, auAdmin).Conn()).Status(ctx, &sessionpb.StatusRequest{}); err != nil {
		t.Fatalf("admin's cluster status: %v", err)
	}
	// Every answer carries a request id: the caller's, or one the node minted.
	var hdr metadata.MD
	raw := sessionpb.NewSessionPersistenceClient(alice.Conn())
	if _, err := raw.Inspect(metadata.AppendToOutgoingContext(ctx, "x-request-id", "req-42"), &sessionpb.InspectRequest{SessionId: id}, grpc.Header(&hdr)); err != nil || hdr.Get("x-request-id")[0] != "req-42" {
		t.Fatalf("request id echoed: %v %v", hdr, err)
	}
	if _, err := raw.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "bob/x"}, grpc.Header(&hdr)); status.Code(err) != codes.PermissionDenied || len(hdr.Get("x-request-id")) != 1 || len(hdr.Get("x-request-id")[0]) != 16 {
		t.Fatalf("minted request id on a refusal: %v %v", hdr, err)
	}
	// Reload: a revoked token is refused at once; the new file's hash is gossiped.
	if err := os.WriteFile(path, []byte(auAdmin+" admin read,write,admin\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := n.srv.auth.Hash()
	n.srv.reloadAuth()
	if n.srv.auth.Hash() == old {
		t.Fatal("reload did not change the table")
	}
	if _, err := alice.Inspect(ctx, &sessionpb.InspectRequest{SessionId: id}); auReason(err) != sessionstore.ReasonUnauthenticated {
		t.Fatalf("revoked token: %v", err)
	}
}

// Quotas: sessions per principal (from the token file), events and bytes per
// session, request rate; every refusal is RESOURCE_EXHAUSTED / QUOTA_EXCEEDED
// and writes nothing.
func TestAuth_QuotasAndRate(t *testing.T) {
	n, _ := auNode(t, func(c *serveConfig) {
		c.Cluster.MaxSessionEvents = 4
		c.Cluster.MaxSessionBytes = 4096
	})
	ctx := n.ctx()
	alice := auAs(t, n, auAlice)
	for i, id := range []string{"alice/1", "alice/2", "alice/3", "alice/4"} {
		_, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")})
		if i < 3 && err != nil {
			t.Fatalf("create %s: %v", id, err)
		}
		if i == 3 {
			if auReason(err) != sessionstore.ReasonQuotaExceeded {
				t.Fatalf("alice's 4th session: %v", err)
			}
		}
	}
	log := ctOneTurnLog()
	if _, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/1", Events: log[:3]}); err != nil {
		t.Fatal(err)
	}
	_, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/1", Events: log[3:5]})
	if auReason(err) != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("append past the event quota: %v", err)
	}
	big := `{"type":"x","seq":0,"time":1,"data":{"p":"` + strings.Repeat("b", 5000) + `"}}`
	if _, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/2", Events: []string{big}}); auReason(err) != sessionstore.ReasonQuotaExceeded {
		t.Fatalf("append past the byte quota: %v", err)
	}
	v, err := alice.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/1"})
	if err != nil || len(v.Events) < 3 {
		t.Fatalf("alice/1 after the refusal: %v", err)
	}
	if r, _ := alice.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: "alice/1"}); strings.Count(string(r.Content), "\n") != 4 {
		t.Fatalf("alice/1 holds %q", r.Content)
	}
	if _, err := alice.ReadRaw(ctx, &sessionpb.ReadRawRequest{SessionId: "alice/2"}); auReason(err) != sessionstore.ReasonNotFound {
		t.Fatalf("alice/2 should still be unmaterialised: %v", err)
	}
	// slow: burst 2, then one request per 1000 s.
	slow := auAs(t, n, auSlow)
	for i := range 3 {
		_, err := slow.List(ctx, &sessionpb.ListRequest{})
		if i < 2 && err != nil {
			t.Fatalf("slow's call %d: %v", i, err)
		}
		if i == 2 && auReason(err) != sessionstore.ReasonQuotaExceeded {
			t.Fatalf("slow's 3rd call: %v", err)
		}
	}
	// Other principals are not slowed.
	if _, err := alice.List(ctx, &sessionpb.ListRequest{}); err != nil {
		t.Fatal(err)
	}
}

// Through a follower: the follower authorises, forwards the caller's token,
// the leader authorises again and stamps the principal, so the principal's
// session quota holds whichever node a call enters by.
func TestAuthCluster_ForwardedCallsKeepTheCaller(t *testing.T) {
	if testing.Short() {
		t.Skip("3-node cluster")
	}
	path := auTokenFile(t, auTokens)
	key := peClusterKey(t) // client authentication needs authenticated peers
	nodes := startClusterWith(t, 3, func(c *serveConfig) { c.Auth.TokenFile = path; c.TLS.ClusterKeyFile = key })
	_, follower := followerOf(t, nodes)
	ctx := follower.ctx()
	alice := auAs(t, follower.testNode, auAlice).WithOptions(client.Options{MaxAttempts: 8})
	for i := range 4 {
		id := "alice/f" + string(rune('0'+i))
		_, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta(id, "/w")})
		if i < 3 && err != nil {
			t.Fatalf("create %s through a follower: %v", id, err)
		}
		if i == 3 && auReason(err) != sessionstore.ReasonQuotaExceeded {
			t.Fatalf("alice's 4th session through a follower: %v", err)
		}
	}
	if _, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/f0", Events: ctOneTurnLog()}); err != nil {
		t.Fatal(err)
	}
	if _, err := auAs(t, follower.testNode, auBob).Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/f0", Events: ctOneTurnLog()[:1]}); auReason(err) != sessionstore.ReasonPermissionDenied {
		t.Fatalf("bob through a follower: %v", err)
	}
	if _, err := auAs(t, follower.testNode, "").Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/f0"}); auReason(err) != sessionstore.ReasonUnauthenticated {
		t.Fatalf("no token through a follower: %v", err)
	}
	// Every node serves alice's log to her.
	for _, nd := range nodes {
		v, err := auAs(t, nd.testNode, auAlice).WithOptions(client.Options{}).Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/f0"})
		if err != nil || len(v.Events) != len(ctOneTurnLog()) {
			t.Fatalf("%s: %v", nd.id, err)
		}
	}
}

// Client certificates as credentials: a certificate of the cluster's CA
// listed in the token file as cert:<CN> is that principal, through a follower
// too (the follower names the principal; the leader trusts the name because
// the follower presents a node certificate); a certificate of the same CA not
// in the file, or none, is UNAUTHENTICATED.
func TestAuthTLS_ClientCertificatePrincipal(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	dir := tlsCerts(t, []string{"n1", "n2", "n3"}, []string{"alice", "mallory"})
	tokens := auTokenFile(t, auCertTokens)
	ca := filepath.Join(dir, "ca.pem")
	nodes := tlsStartCluster(t, dir, 3, tlsDial(t, clientFlags{ca: ca, token: auAdmin}),
		func(c *serveConfig) { c.Auth.TokenFile = tokens })
	_, follower := followerOf(t, nodes)
	as := func(f clientFlags) *client.Client {
		c, err := client.Dial(context.Background(), follower.srv.grpcAddr, tlsDial(t, f)...)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return c
	}
	cert := func(name string) clientFlags {
		return clientFlags{ca: ca, cert: filepath.Join(dir, "client-"+name+".pem"), key: filepath.Join(dir, "client-"+name+"-key.pem")}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	alice := as(cert("alice"))
	if _, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("alice/c1", "/w")}); err != nil {
		t.Fatalf("alice's create through a follower: %v", err)
	}
	if _, err := alice.Append(ctx, &sessionpb.AppendRequest{SessionId: "alice/c1", Events: ctOneTurnLog()}); err != nil {
		t.Fatalf("alice's append through a follower: %v", err)
	}
	if _, err := alice.Create(ctx, &sessionpb.CreateRequest{Header: ctMeta("bob/c1", "/w")}); auReason(err) != sessionstore.ReasonPermissionDenied {
		t.Fatalf("alice outside her prefix: %v", err)
	}
	once := client.Options{MaxAttempts: 1}
	if _, err := as(cert("mallory")).WithOptions(once).Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/c1"}); auReason(err) != sessionstore.ReasonUnauthenticated {
		t.Fatalf("a CA-signed certificate not in the token file: %v", err)
	}
	if _, err := as(clientFlags{ca: ca}).WithOptions(once).Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/c1"}); auReason(err) != sessionstore.ReasonUnauthenticated {
		t.Fatalf("TLS without a certificate or token: %v", err)
	}
	// The admin token works over TLS on every node, and sees alice's log.
	for _, nd := range nodes {
		v, err := nd.Client.Inspect(ctx, &sessionpb.InspectRequest{SessionId: "alice/c1"})
		if err != nil || len(v.Events) != len(ctOneTurnLog()) {
			t.Fatalf("%s: %v", nd.id, err)
		}
	}
}

// Nodes gossip the hash of their token file and warn when a peer's differs.
func TestAuthCluster_DifferingTokenFilesWarn(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	dir := tlsCerts(t, []string{"n1", "n2", "n3"}, nil)
	same, odd := auTokenFile(t, auTokens), auTokenFile(t, auAdmin+" admin read,write,admin\n")
	nodes := tlsStartCluster(t, dir, 3, tlsDial(t, clientFlags{ca: filepath.Join(dir, "ca.pem"), token: auAdmin}),
		func(c *serveConfig) {
			c.Auth.TokenFile = same
			if c.Cluster.NodeID == "n3" {
				c.Auth.TokenFile = odd
			}
		})
	clustertest.Eventually(t, 30*time.Second, func() error {
		if !nodes[0].log.has("token file differs", "peer=n3") || !nodes[2].log.has("token file differs", "peer=n1") {
			return errors.New("no warning about n3's different token file")
		}
		return nil
	})
	if nodes[0].log.has("token file differs", "peer=n2") {
		t.Fatal("n1 warned about n2, whose file is the same")
	}
}
