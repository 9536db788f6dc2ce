package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	"google.golang.org/grpc/reflection"

	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/rpc"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// serveConfig is everything `sessionstore serve` needs.
type serveConfig struct {
	Cluster         cluster.Config
	GRPCAddr        string
	HTTPAddr        string
	MaxMessageBytes int
	LogFormat       string
	LogLevel        string
	// AdvertiseHost is the host other nodes reach this node at; its Raft,
	// gossip and gRPC ports are those of the listen addresses.
	AdvertiseHost string
	// AdvertiseClient is the gRPC address clients reach this node at, handed
	// to them in every answer's hints (default: the advertised gRPC address).
	AdvertiseClient string
	Join            string
	Auth            authConfig
	TLS             transportConfig
	HTTP            httpConfig
	Streams         streamConfig
	Runtime         runtimeConfig
	// watchProgress replaces the interval of Watch's progress messages
	// (0: the default, 5 s); tests only.
	watchProgress time.Duration
}

func defaultServeConfig() serveConfig {
	return serveConfig{
		Cluster:         cluster.DefaultConfig(),
		GRPCAddr:        defaultGRPCAddr,
		HTTPAddr:        defaultHTTPAddr,
		MaxMessageBytes: 16 << 20,
		LogFormat:       "text",
		LogLevel:        "info",
		HTTP:            defaultHTTPConfig(),
		Streams:         defaultStreamConfig(),
		Runtime:         defaultRuntimeConfig(),
	}
}

func serveFlags(cfg *serveConfig, fs *flag.FlagSet) {
	c := &cfg.Cluster
	fs.StringVar(&c.NodeID, "node-id", c.NodeID, "this node's id (unique in the cluster)")
	fs.StringVar(&c.DataDir, "data-dir", c.DataDir, "directory for the state, the Raft log, snapshots and artifacts")
	fs.Var(artifactsFlag{&c.ArtifactsOff}, "artifacts", "on: keep every session as a zstd JSONL file under <data-dir>/artifacts, in the reference harness's layout; off: keep none (and remove those an earlier run wrote): raw reads, downloads and exports render from the state database, which saves the disk and the writes of a second copy")
	fs.StringVar(&cfg.GRPCAddr, "grpc-addr", cfg.GRPCAddr, "gRPC listen address (the persistence API)")
	fs.StringVar(&cfg.HTTPAddr, "http-addr", cfg.HTTPAddr, "HTTP listen address (/healthz, /readyz, /metrics, artifact download, the API with the Connect protocol)")
	fs.StringVar(&c.RaftAddr, "raft-addr", c.RaftAddr, "Raft transport listen address")
	fs.StringVar(&c.GossipAddr, "gossip-addr", c.GossipAddr, "gossip (memberlist) listen address, TCP and UDP")
	fs.StringVar(&cfg.AdvertiseHost, "advertise-addr", "", "host other nodes reach this node at (default: the host of the listen addresses; required when they bind all interfaces)")
	fs.StringVar(&cfg.AdvertiseClient, "advertise-client-addr", "", "host:port clients reach this node's gRPC API at, handed to them with the leader's and the other voters' in every answer (default: --advertise-addr's host with the --grpc-addr port)")
	fs.StringVar(&cfg.Join, "join", "", "comma-separated gossip seeds (host:port) of other nodes")
	fs.DurationVar(&c.ReapDeadAfter, "reap-dead-after", 0, "remove a server gossip has reported dead for this long (0: never); never below --bootstrap-expect voters, never a node that left gracefully")
	fs.IntVar(&c.BootstrapExpect, "bootstrap-expect", 0, "servers that must see each other before one cluster is bootstrapped (default: 1 for a lone node without --join; with --join give the cluster size, e.g. 3, or the node only joins)")
	fs.Uint64Var(&c.SnapshotThreshold, "snapshot-threshold", c.SnapshotThreshold, "Raft entries since the last snapshot that trigger a new one")
	fs.DurationVar(&c.SnapshotInterval, "snapshot-interval", c.SnapshotInterval, "how often to check the snapshot threshold")
	fs.Uint64Var(&c.TrailingLogs, "trailing-logs", c.TrailingLogs, "Raft entries kept after a snapshot")
	fs.IntVar(&c.MaxEventBytes, "max-event-bytes", c.MaxEventBytes, "largest accepted event")
	fs.IntVar(&c.MaxBatchBytes, "max-batch-bytes", c.MaxBatchBytes, "largest accepted append batch in bytes")
	fs.IntVar(&c.MaxBatchCount, "max-batch-events", c.MaxBatchCount, "most events in one append batch")
	fs.IntVar(&c.InFlight, "raft-inflight", c.InFlight, "grouped Raft entries in flight at once (more: lower latency at low load; fewer: larger groups)")
	fs.DurationVar(&c.MaxGroupWait, "raft-group-wait", c.MaxGroupWait, "longest a group of commands is held for more while other entries are in flight, when commands arrive fast enough to fill it (never for a lone writer; 0: never)")
	fs.IntVar(&cfg.MaxMessageBytes, "max-message-bytes", cfg.MaxMessageBytes, "largest gRPC message, both directions")
	fs.StringVar(&cfg.LogFormat, "log-format", cfg.LogFormat, "log format: text or json")
	fs.StringVar(&cfg.LogLevel, "log-level", cfg.LogLevel, "log level: debug, info, warn or error")
	authFlags(&cfg.Auth, fs)
	limitFlags(&cfg.Cluster, fs)
	transportFlags(&cfg.TLS, fs)
	httpFlags(&cfg.HTTP, fs)
	streamFlags(&cfg.Streams, fs)
	runtimeFlags(&cfg.Runtime, fs)
}

// artifactsFlag is --artifacts: on or off.
type artifactsFlag struct{ off *bool }

func (f artifactsFlag) String() string {
	if f.off != nil && *f.off {
		return "off"
	}
	return "on"
}

func (f artifactsFlag) Set(s string) error {
	switch s {
	case "on":
		*f.off = false
	case "off":
		*f.off = true
	default:
		return fmt.Errorf("want on or off")
	}
	return nil
}

func newLogger(w io.Writer, format, level string) (*slog.Logger, error) {
	var lv slog.Level
	if err := lv.UnmarshalText([]byte(level)); err != nil {
		return nil, fmt.Errorf("log level %q: %w", level, err)
	}
	opts := &slog.HandlerOptions{Level: lv}
	switch format {
	case "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("log format %q: want text or json", format)
	}
}

const serveHelp = `Usage: sessionstore serve [flags]

Runs one node of the session store. Every flag can also be set as
SESSIONSTORE_<FLAG> (e.g. SESSIONSTORE_DATA_DIR); flags win. While it runs,
the node keeps its PID in <data-dir>/` + pidFileName + ` ('sessionstore reload'
uses it to send SIGHUP).

Flags:
`

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cfg := defaultServeConfig()
	fs := flag.NewFlagSet("sessionstore serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	serveFlags(&cfg, fs)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), serveHelp)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	logger, err := newLogger(stderr, cfg.LogFormat, cfg.LogLevel)
	if err != nil {
		return err
	}
	warnUnknownEnv(logger, fs, os.Environ())
	if err := cfg.Runtime.apply(logger, givenFlags(fs)); err != nil {
		return err
	}
	if cfg.Cluster.DataDir == "" {
		return errors.New("--data-dir must not be empty")
	}
	if err := os.MkdirAll(cfg.Cluster.DataDir, 0o700); err != nil {
		return fmt.Errorf("data dir: %w", err)
	}
	// Before any store is opened: a second node on the directory is told
	// who holds it instead of timing out on a store's lock.
	hup := catchHangup()
	defer signal.Stop(hup)
	pid, err := lockPIDFile(cfg.Cluster.DataDir)
	if err != nil {
		return err
	}
	defer pid.release()
	s, err := startServer(cfg, logger, stderr)
	if err != nil {
		return err
	}
	s.reloadOnHangup(ctx, hup)
	logger.Info("serving", "grpc_addr", s.grpcAddr, "http_addr", s.httpAddr, "data_dir", cfg.Cluster.DataDir,
		"node_id", cfg.Cluster.NodeID, "pid", os.Getpid())
	<-ctx.Done()
	logger.Info("shutting down")
	return s.Close()
}

// streamWorkers is how many calls the gRPC server runs on reused goroutines.
const streamWorkers = 256

// server is one running node with its listeners; tests start it in-process.
type server struct {
	logger   *slog.Logger
	node     *cluster.Node
	grpc     *grpc.Server
	auth     *auth.Authenticator
	fwd      *rpc.Forwarder
	fwdIn    *rpc.ForwardServer // calls followers forward here
	health   *health.Server
	http     *http.Server
	grpcAddr string
	httpAddr string
	stop     context.CancelFunc
	done     chan struct{}
	// stopping is closed when Close begins: watches end with SHUTTING_DOWN.
	stopping chan struct{}
}

// startServer wires storage → fsm → cluster → api, in that order.
func startServer(cfg serveConfig, logger *slog.Logger, raftLog io.Writer) (*server, error) {
	if cfg.Cluster.DataDir == "" {
		return nil, errors.New("--data-dir must not be empty")
	}
	dir, err := filepath.Abs(cfg.Cluster.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.Cluster.DataDir = dir
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("data dir: %w", err)
	}
	if err := cfg.Streams.validate(); err != nil {
		return nil, err
	}
	if err := checkMessageLimit(cfg); err != nil {
		return nil, err
	}
	authn, err := auth.New(cfg.Auth.TokenFile, tlsconf.IsNodeCert)
	if err != nil {
		return nil, err
	}
	sec, err := loadTransportSecurity(cfg.TLS)
	if err != nil {
		return nil, err
	}
	sec.apply(&cfg.Cluster)
	if err := sec.checkPeers(&cfg.Cluster, cfg.Join, authn.Enabled(), logger); err != nil {
		return nil, err
	}
	gl, err := net.Listen("tcp", cfg.GRPCAddr)
	if err != nil {
		return nil, fmt.Errorf("grpc listen: %w", err)
	}
	hl, err := net.Listen("tcp", cfg.HTTPAddr)
	if err != nil {
		gl.Close()
		return nil, fmt.Errorf("http listen: %w", err)
	}
	sec.log(logger)
	warnIfExposed(logger, sec.listeners(gl.Addr(), hl.Addr(), cfg.Cluster)...)
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if err := advertise(&cfg, gl.Addr().String()); err != nil {
		gl.Close()
		hl.Close()
		return nil, err
	}
	cfg.Cluster.HTTPBase = sec.httpScheme() + "://" + hl.Addr().String()
	cfg.Cluster.AuthHash = authn.Hash()
	cfg.Cluster.RaftLogOutput = raftLog
	cfg.Cluster.RaftLogJSON = cfg.LogFormat == "json"
	remover := func(ctx context.Context, leaderAPI, nodeID string) error {
		c, err := client.Dial(ctx, leaderAPI, sec.peerDialOptions()...)
		if err != nil {
			return err
		}
		defer c.Close()
		// On behalf of the operator who called Leave: their credentials go along.
		return c.RemoveMember(auth.Outgoing(ctx), nodeID)
	}
	node, err := cluster.Open(cfg.Cluster, remover, logger, reg)
	if err != nil {
		gl.Close()
		hl.Close()
		return nil, err
	}
	s := &server{logger: logger, node: node, auth: authn, grpcAddr: gl.Addr().String(), httpAddr: hl.Addr().String(), done: make(chan struct{})}
	warnIfOpen(logger, authn, gl.Addr())
	rpcMetrics := rpc.NewMetrics(reg)
	streams := rpc.NewStreams(cfg.Streams.Read, cfg.Streams.Watch, reg)
	streams.WriteTimeout = cfg.Streams.WriteTimeout
	guard := rpc.NewGuard(authn, rpc.GuardConfig{Rate: cfg.Auth.Rate, Burst: cfg.Auth.Burst, Streams: streams}, rpcMetrics, logger)
	s.fwd = rpc.NewForwarder(cfg.MaxMessageBytes, cluster.LocalDialer(cfg.GRPCAddr), sec.peerCreds())
	s.fwd.Metrics = rpcMetrics
	intercept := rpc.NewInterceptors(logger, rpcMetrics, guard, s.fwd)
	intercept.SetHints(node)
	opts := append(intercept.ServerOptions(),
		grpc.MaxRecvMsgSize(cfg.MaxMessageBytes), grpc.MaxSendMsgSize(cfg.MaxMessageBytes))
	opts = append(opts, sec.serverOptions()...)
	// Long-lived goroutines run the calls: a goroutine per call grew its
	// stack on each (newstack/copystack were ~3 % of a node at 256 writers).
	// Past this many calls at once, gRPC starts a goroutine per call again.
	opts = append(opts, grpc.NumStreamWorkers(streamWorkers))
	s.grpc = grpc.NewServer(opts...)
	// Calls followers forward arrive on the Forward stream and run through
	// the same interceptors and handlers as direct ones.
	s.fwdIn = rpc.NewForwardServer(cfg.MaxMessageBytes, intercept.Unary())
	s.fwdIn.Register(s.grpc)
	services := s.fwdIn.Registrar(s.grpc)
	persistence := rpc.NewPersistence(node.Sessions(), cfg.MaxMessageBytes)
	s.stopping = make(chan struct{})
	persistence.Stopping = s.stopping
	if cfg.watchProgress > 0 {
		persistence.WatchProgress = cfg.watchProgress
	}
	persistence.Register(services)
	rpc.NewClusterService(node).Register(services)
	rpc.NewPlanMode(node.Sessions()).Register(services)
	s.health = health.NewServer()
	healthpb.RegisterHealthServer(s.grpc, s.health)
	reflection.Register(s.grpc)
	registerNodeMetrics(reg)
	rpcs, err := newConnectHandler(s.grpc, cfg.MaxMessageBytes)
	if err != nil {
		gl.Close()
		hl.Close()
		node.Close()
		return nil, err
	}
	s.http = newHTTPServer(cfg.HTTP, newHTTPHandler(node, reg, authn, logger, streams, rpcs), sec.apiTLS(),
		slog.NewLogLogger(logger.With("component", "http").Handler(), slog.LevelWarn)) // e.g. TLS handshake errors
	hl = limitConns(hl, cfg.HTTP.MaxConns)

	var ctx context.Context
	ctx, s.stop = context.WithCancel(context.Background())
	go func() { _ = s.grpc.Serve(gl) }()
	go func() {
		if s.http.TLSConfig != nil {
			_ = s.http.ServeTLS(hl, "", "")
		} else {
			_ = s.http.Serve(hl)
		}
	}()
	go func() { defer close(s.done); s.watchHealth(ctx) }()
	return s, nil
}

// advertise derives the addresses other nodes use from --advertise-addr (a
// host) and the listen ports, and splits --join.
func advertise(cfg *serveConfig, grpcAddr string) error {
	c := &cfg.Cluster
	for _, s := range strings.Split(cfg.Join, ",") {
		if s = strings.TrimSpace(s); s != "" {
			c.Join = append(c.Join, s)
		}
	}
	host := cfg.AdvertiseHost
	withHost := func(listen string) (string, error) {
		h, p, err := net.SplitHostPort(listen)
		if err != nil {
			return "", fmt.Errorf("address %q: %w", listen, err)
		}
		if host != "" {
			h = host
		} else if ip := net.ParseIP(h); h == "" || (ip != nil && ip.IsUnspecified()) {
			return "", fmt.Errorf("%q listens on all interfaces: set --advertise-addr to the host other nodes reach this node at", listen)
		}
		return net.JoinHostPort(h, p), nil
	}
	var err error
	if c.APIAdvertise, err = withHost(grpcAddr); err != nil {
		return err
	}
	c.ClientAdvertise = c.APIAdvertise
	if a := strings.TrimSpace(cfg.AdvertiseClient); a != "" {
		h, p, err := net.SplitHostPort(a)
		if err != nil || h == "" || p == "" {
			return fmt.Errorf("--advertise-client-addr %q: want host:port", a)
		}
		if ip := net.ParseIP(h); ip != nil && ip.IsUnspecified() {
			return fmt.Errorf("--advertise-client-addr %q: a client cannot reach an unspecified address", a)
		}
		c.ClientAdvertise = a
	}
	if host != "" {
		if c.RaftAdvertise, err = withHost(c.RaftAddr); err != nil {
			return err
		}
		if c.GossipAdvertise, err = withHost(c.GossipAddr); err != nil {
			return err
		}
	} else {
		// Fail early with the same clear message when binding all interfaces.
		if _, err := withHost(c.RaftAddr); err != nil {
			return err
		}
	}
	return nil
}

// watchHealth keeps the standard gRPC health service in step with readiness.
func (s *server) watchHealth(ctx context.Context) {
	t := time.NewTicker(250 * time.Millisecond)
	defer t.Stop()
	last := healthpb.HealthCheckResponse_UNKNOWN
	for {
		st := healthpb.HealthCheckResponse_SERVING
		if err := s.node.Ready(); err != nil {
			st = healthpb.HealthCheckResponse_NOT_SERVING
		}
		if st != last {
			s.health.SetServingStatus("", st)
			s.health.SetServingStatus("sessionstore.v1.SessionPersistence", st)
			last = st
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Close shuts down outside-in: listeners first, then Raft and storage.
func (s *server) Close() error {
	s.stop()
	<-s.done
	s.health.Shutdown()
	select { // watches end with SHUTTING_DOWN, on both ports
	case <-s.stopping: // closed by an earlier Close
	default:
		close(s.stopping)
	}
	// HTTP first: its Connect calls run inside the gRPC server, and
	// GracefulStop would cut them before their end-of-stream is written.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	_ = s.http.Shutdown(ctx)
	cancel()
	s.fwdIn.Drain() // followers end their forwarding streams, so GracefulStop need not wait for them
	stopped := make(chan struct{})
	go func() { s.grpc.GracefulStop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(5 * time.Second):
		s.grpc.Stop()
	}
	s.fwd.Close()
	return s.node.Close()
}

// warnIfExposed warns about each plaintext listener reachable from other
// hosts (gRPC or HTTP without TLS, Raft without TLS, gossip without a key).
func warnIfExposed(logger *slog.Logger, ls ...exposedListener) {
	for _, l := range ls {
		if !l.secure && !isLoopback(l.addr) {
			logger.Warn("listening WITHOUT encryption on a non-loopback address: anyone on the network can read and alter its traffic; "+l.fix,
				"listener", l.name, "addr", l.addr)
		}
	}
}
