package main

import (
	"crypto/tls"
	"flag"
	"log"
	"net"
	"net/http"
	"time"

	"golang.org/x/net/netutil"
)

// httpConfig bounds what one HTTP client can hold on the node: a connection
// that sends no request, sits idle, or stops reading is closed, and beyond
// MaxConns new connections wait in the kernel's accept queue instead of
// taking file descriptors the gRPC and Raft listeners need.
type httpConfig struct {
	ReadHeaderTimeout time.Duration // until a request's headers are read
	IdleTimeout       time.Duration // keep-alive connection without a request
	WriteTimeout      time.Duration // per write of a response, not per response (downloads may be long)
	MaxConns          int           // open HTTP connections; 0: unlimited
}

func defaultHTTPConfig() httpConfig {
	return httpConfig{ReadHeaderTimeout: 10 * time.Second, IdleTimeout: 2 * time.Minute, WriteTimeout: 30 * time.Second, MaxConns: 512}
}

func httpFlags(c *httpConfig, fs *flag.FlagSet) {
	fs.DurationVar(&c.ReadHeaderTimeout, "http-read-header-timeout", c.ReadHeaderTimeout, "close an HTTP connection whose request headers (and TLS handshake) take longer")
	fs.DurationVar(&c.IdleTimeout, "http-idle-timeout", c.IdleTimeout, "close a keep-alive HTTP connection idle this long")
	fs.DurationVar(&c.WriteTimeout, "http-write-timeout", c.WriteTimeout, "close an HTTP connection when one write of a response (at most 32 KiB) does not complete within this time; a long download that keeps moving is never cut")
	fs.IntVar(&c.MaxConns, "http-max-conns", c.MaxConns, "most open HTTP connections; more wait to be accepted (0: unlimited)")
}

// newHTTPServer builds the HTTP server with cfg's bounds; tlsConf nil is
// plaintext. There is no global WriteTimeout: it would cut long downloads;
// every write gets its own deadline instead (writeDeadlines).
func newHTTPServer(cfg httpConfig, h http.Handler, tlsConf *tls.Config, errorLog *log.Logger) *http.Server {
	return &http.Server{
		Handler:           writeDeadlines(h, cfg.WriteTimeout),
		ReadHeaderTimeout: cfg.ReadHeaderTimeout,
		IdleTimeout:       cfg.IdleTimeout,
		TLSConfig:         tlsConf,
		ErrorLog:          errorLog,
	}
}

// limitConns caps the connections ln hands out at once (0: no cap).
func limitConns(ln net.Listener, max int) net.Listener {
	if max <= 0 {
		return ln
	}
	return netutil.LimitListener(ln, max)
}
