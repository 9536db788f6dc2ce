package main

import (
	"flag"
	"fmt"
	"net"
	"strings"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// clientFlags are the connection flags of every subcommand that talks to a
// node: TLS (--tls-ca, --tls-cert, --tls-key, --tls-server-name) and a bearer
// token (--token). Like every flag they fall back to SESSIONSTORE_<FLAG>
// (e.g. SESSIONSTORE_TOKEN) through parseFlags.
type clientFlags struct {
	ca, cert, key, serverName string
	token                     string
}

// addClientFlags registers the connection flags on fs.
func addClientFlags(fs *flag.FlagSet) *clientFlags {
	f := &clientFlags{}
	fs.StringVar(&f.ca, "tls-ca", "", "connect with TLS, verifying the node's certificate against this CA (PEM)")
	fs.StringVar(&f.cert, "tls-cert", "", "connect with TLS, presenting this client certificate (PEM; with --tls-key)")
	fs.StringVar(&f.key, "tls-key", "", "private key of --tls-cert (PEM)")
	fs.StringVar(&f.serverName, "tls-server-name", "", "connect with TLS and expect this name in the node's certificate (default: the host of --addr)")
	fs.StringVar(&f.token, "token", "", "bearer token sent with every call (prefer the environment variable SESSIONSTORE_TOKEN: flags show in the process list)")
	return f
}

// tls reports whether any TLS flag is set: then the connection is TLS (with
// the system's roots when --tls-ca is not given).
func (f *clientFlags) tls() bool {
	return f.ca != "" || f.cert != "" || f.key != "" || f.serverName != ""
}

// dialOptions are the grpc.DialOptions for client.Dial (applied after its
// plaintext default, so TLS overrides it). Without any flag: none (plaintext,
// no token).
func (f *clientFlags) dialOptions() ([]grpc.DialOption, error) {
	var opts []grpc.DialOption
	if f.tls() {
		cfg, err := tlsconf.Client(tlsconf.ClientFiles{CA: f.ca, Cert: f.cert, Key: f.key, ServerName: f.serverName})
		if err != nil {
			return nil, fmt.Errorf("TLS flags: %w", err)
		}
		opts = append(opts, grpc.WithTransportCredentials(credentials.NewTLS(cfg)))
	}
	if f.token != "" {
		opts = append(opts, grpc.WithPerRPCCredentials(client.BearerToken(f.token)))
	}
	return opts, nil
}

// The addresses a node serves on by default (serve --grpc-addr and
// --http-addr), which the client commands' --addr defaults to.
const (
	defaultAPIPort  = "7400"
	defaultGRPCAddr = "127.0.0.1:" + defaultAPIPort
	defaultHTTPAddr = "127.0.0.1:7480"
)

// withDefaultPort gives each comma-separated address of an --addr value
// without a port the API's default port: gRPC would otherwise dial
// "localhost" at :443. Targets with a scheme (dns:///h:p, unix:/path) are
// left as they are.
func withDefaultPort(addrs string) string {
	parts := strings.Split(addrs, ",")
	for i, a := range parts {
		a = strings.TrimSpace(a)
		parts[i] = a
		if a == "" || strings.Contains(a, "/") {
			continue
		}
		if _, _, err := net.SplitHostPort(a); err == nil {
			continue
		}
		host := strings.TrimSuffix(strings.TrimPrefix(a, "["), "]")
		if strings.Count(a, ":") == 1 && !strings.HasPrefix(a, "[") {
			continue // "host:" and the like: let the dial say what is wrong
		}
		parts[i] = net.JoinHostPort(host, defaultAPIPort)
	}
	return strings.Join(parts, ",")
}

// defaultAddrPort applies withDefaultPort to fs's --addr, if it has one,
// after flags and environment are parsed: every client subcommand gets it
// without each one remembering to.
func defaultAddrPort(fs *flag.FlagSet) {
	if f := fs.Lookup("addr"); f != nil {
		if v := f.Value.String(); v != "" {
			_ = f.Value.Set(withDefaultPort(v))
		}
	}
}
