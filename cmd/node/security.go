package main

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"

	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/cluster"
)

// authConfig is the authentication and per-principal rate part of `sessionstore serve`.
type authConfig struct {
	TokenFile string
	Rate      float64
	Burst     int
}

func authFlags(cfg *authConfig, fs *flag.FlagSet) {
	fs.StringVar(&cfg.TokenFile, "auth-token-file", "", "token file (token → name, permissions, session-id prefixes; see README \"Authentication\"); every call must then authenticate with a bearer token or a client certificate listed in it. Reloaded on SIGHUP")
	fs.Float64Var(&cfg.Rate, "rate-limit", 0, "requests per second each principal may send to THIS node (0: unlimited; a token-file entry's rate= overrides it); excess calls get RESOURCE_EXHAUSTED / QUOTA_EXCEEDED")
	fs.IntVar(&cfg.Burst, "rate-burst", 0, "requests above --rate-limit a principal may send at once (0: the rate rounded up)")
}

// reloadOnHangup re-reads the token file on every SIGHUP until ctx ends; a
// file that fails to parse leaves the previous one in force. SIGHUP is
// caught even without a token file: its default action would stop the node
// that `sessionstore reload` only meant to reload. hup is from
// catchHangup, called before the PID is published.
func (s *server) reloadOnHangup(ctx context.Context, hup <-chan os.Signal) {
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-hup:
				if !s.auth.Enabled() {
					s.logger.Info("SIGHUP: nothing to reload (no --auth-token-file)")
					continue
				}
				s.reloadAuth()
			}
		}
	}()
}

// catchHangup starts catching SIGHUP; reloadOnHangup handles what arrives.
func catchHangup() chan os.Signal {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	return ch
}

func (s *server) reloadAuth() {
	if err := s.auth.Reload(); err != nil {
		s.logger.Error("token file reload failed; the previous one stays in force", "err", err)
		return
	}
	s.node.SetAuthHash(s.auth.Hash())
	s.logger.Info("token file reloaded", "principals", s.auth.Principals(), "auth_hash", s.auth.Hash())
}

// warnIfOpen warns when a node reachable from other hosts lets anyone in.
func warnIfOpen(logger *slog.Logger, a *auth.Authenticator, grpcAddr net.Addr) {
	if ta, ok := grpcAddr.(*net.TCPAddr); ok && !ta.IP.IsLoopback() && !a.Enabled() {
		logger.Warn("authentication is OFF on a non-loopback address: anyone who reaches it can read and write every session; set --auth-token-file",
			"addr", grpcAddr.String())
	}
}

func limitFlags(c *cluster.Config, fs *flag.FlagSet) {
	fs.Int64Var(&c.MaxSessionEvents, "max-session-events", c.MaxSessionEvents, "most events one session may hold (0: unlimited); crash-repair closers are exempt")
	fs.Int64Var(&c.MaxSessionBytes, "max-session-bytes", c.MaxSessionBytes, "most bytes of events one session may hold (0: unlimited); crash-repair closers are exempt")
	fs.Int64Var(&c.MaxSessionsPerPrincipal, "max-sessions-per-principal", c.MaxSessionsPerPrincipal, "most sessions one principal may create (0: unlimited; a token-file entry's max_sessions= overrides it; without authentication every caller is the same principal)")
	fs.Int64Var(&c.MinFreeBytes, "min-free-bytes", c.MinFreeBytes, "refuse writes (RESOURCE_EXHAUSTED / QUOTA_EXCEEDED) and fail /readyz while the data directory's filesystem has fewer bytes available (0: never refuse); reads keep working")
	fs.DurationVar(&c.RegistrationTTL, "registration-ttl", c.RegistrationTTL, "delete a Create registration that got no event within this time (0: keep forever); swept by the leader every 5 minutes")
	fs.Func("retention", "retention policies: comma-separated <cwd-prefix>=<max age since the last append>, * for every session (e.g. '*=2160h,/tmp/=24h'); the longest matching prefix decides; swept by the leader every --retention-sweep, listed by 'sessionstore retention'", func(v string) error {
		p, err := cluster.ParseRetention(v)
		c.Retention = p
		return err
	})
	fs.DurationVar(&c.RetentionSweep, "retention-sweep", c.RetentionSweep, "how often the leader applies --retention")
	fs.Int64Var(&c.MaxPendingBytes, "max-pending-bytes", c.MaxPendingBytes, "bytes of commands that may wait for Raft on this node; beyond it callers wait, then get RESOURCE_EXHAUSTED / QUOTA_EXCEEDED")
}

// checkMessageLimit refuses a gRPC message limit too small for the largest
// append batch (plus room for the request around it): such a batch could be
// accepted by the limits and yet never arrive, or never be read back.
func checkMessageLimit(cfg serveConfig) error {
	const margin = 64 << 10
	if cfg.MaxMessageBytes < cfg.Cluster.MaxBatchBytes+margin {
		return fmt.Errorf("--max-message-bytes %d must exceed --max-batch-bytes %d by at least %d", cfg.MaxMessageBytes, cfg.Cluster.MaxBatchBytes, margin)
	}
	return nil
}
