package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/pprof"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
	"github.com/sessionstore/sessionstore/api/rpc"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/console"
)

// newHTTPHandler serves the node's HTTP port (docs/api.md "HTTP").
// With authentication on, downloads need read permission on the session and
// profiles need admin; health and metrics stay open (probes and scrapers).
//
// Downloads stream from the state database or the artifact file in bounded
// chunks and count against the read-stream caps of streams; like every HTTP
// response they end when the client has not taken a write for
// --http-write-timeout.
//
// The console (package console) is served under /ui/ without
// authentication: it is static files, and holds nothing a token protects.
//
// rpcs (nil: none) serves the Connect protocol under /<service>/ for each of
// connectServices; it authenticates each call itself, as the gRPC port does.
func newHTTPHandler(node *cluster.Node, reg *prometheus.Registry, authn *auth.Authenticator, logger *slog.Logger,
	streams *rpc.Streams, rpcs http.Handler) http.Handler {
	mux := http.NewServeMux()
	if rpcs != nil {
		for _, name := range connectServices {
			mux.Handle("/"+name+"/", rpcs)
		}
	}
	guard := func(need auth.Perm, h http.HandlerFunc) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			p, err := authn.AuthenticateHTTP(r)
			switch {
			case err != nil:
				logger.Warn("http request refused", "path", r.URL.Path, "err", err)
				http.Error(w, err.Error(), http.StatusUnauthorized)
				return
			case !p.Has(need):
				logger.Warn("http request refused", "path", r.URL.Path, "principal", p.Name, "need", need.String())
				http.Error(w, fmt.Sprintf("principal %q needs %s permission", p.Name, need), http.StatusForbidden)
				return
			}
			if id := r.PathValue("id"); id != "" && !p.Covers(id) {
				logger.Warn("http request refused", "path", r.URL.Path, "principal", p.Name, "session", id)
				http.Error(w, fmt.Sprintf("principal %q may not access session %s", p.Name, sessionstore.Quote(id)), http.StatusForbidden)
				return
			}
			h(w, r.WithContext(auth.NewContext(r.Context(), p)))
		}
	}
	download := func(h http.HandlerFunc) http.HandlerFunc {
		return guard(auth.Read, func(w http.ResponseWriter, r *http.Request) {
			p := auth.FromContext(r.Context())
			release, err := streams.Acquire(rpc.StreamRead, p.Name)
			if err != nil {
				logger.Warn("http download refused", "path", r.URL.Path, "principal", p.Name, "err", err)
				httpError(w, err)
				return
			}
			defer release()
			// The server gives every write its deadline (httpwrite.go); a
			// download that misses one is counted as a stalled stream.
			if dw, ok := w.(*deadlineWriter); ok {
				dw.stalled = func() { streams.Stalled(rpc.StreamRead) }
			}
			h(w, r)
		})
	}
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, r *http.Request) {
		// The node id and leader hints (docs/api.md "Failover"), so that an
		// HTTP client learns which node an endpoint reaches before it
		// sends writes (the gRPC health check carries them too).
		h := node.ClientHints()
		w.Header().Set(sessionstore.HintNodeKey, h.NodeID)
		if h.Leader != "" {
			w.Header().Set(sessionstore.HintLeaderKey, h.Leader)
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("GET /readyz", func(w http.ResponseWriter, r *http.Request) {
		if err := node.Ready(); err != nil {
			http.Error(w, "not ready: "+err.Error(), http.StatusServiceUnavailable)
			return
		}
		fmt.Fprintln(w, "ready")
	})
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	// The web console: static files only, open like /healthz. Every call it
	// makes goes through the Connect routes above with the operator's token.
	mux.Handle(console.Prefix, console.Handler())
	mux.Handle("GET /{$}", http.RedirectHandler(console.Prefix, http.StatusFound))
	// Profiles for operators (e.g. go tool pprof http://127.0.0.1:7480/debug/pprof/profile).
	mux.HandleFunc("/debug/pprof/", guard(auth.Admin, pprof.Index))
	mux.HandleFunc("/debug/pprof/profile", guard(auth.Admin, pprof.Profile))
	mux.HandleFunc("/debug/pprof/trace", guard(auth.Admin, pprof.Trace))
	mux.HandleFunc("/debug/pprof/symbol", guard(auth.Admin, pprof.Symbol))
	mux.HandleFunc("GET /v1/sessions/{id}/session.jsonl", download(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		_, rev, text, _, err := node.Sessions().OpenRaw(ctx, r.PathValue("id"), sessionstore.Stale)
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/x-ndjson; charset=utf-8")
		w.Header().Set("ETag", `"`+rev+`"`)
		// A read error mid-body (the session deleted under it) leaves the body
		// short of its Content-Length: the client sees a failed download.
		http.ServeContent(w, r, "session.jsonl", time.Time{}, text)
	}))
	mux.HandleFunc("GET /v1/sessions/{id}/session.jsonl.zstd", download(func(w http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), time.Minute)
		defer cancel()
		rev, path, size, rendered, err := node.Sessions().Artifact(ctx, r.PathValue("id"))
		if err != nil {
			httpError(w, err)
			return
		}
		w.Header().Set("Content-Type", "application/zstd")
		w.Header().Set("ETag", `"`+rev+`"`)
		if path != "" {
			f, err := os.Open(path)
			if err == nil {
				defer f.Close()
				// The writer may be appending newer frames: serve exactly the
				// frames of this revision.
				http.ServeContent(w, r, "session.jsonl.zstd", time.Time{}, io.NewSectionReader(f, 0, size))
				return
			}
			logger.Warn("artifact vanished while serving; rendering from state", "err", err)
			rev, rendered, err = node.Sessions().RenderedArtifact(ctx, r.PathValue("id"))
			if err != nil {
				httpError(w, err)
				return
			}
			w.Header().Set("ETag", `"`+rev+`"`)
		}
		// Encoded frame by frame from the state database: the length is
		// unknown until the end (chunked encoding).
		if inm := r.Header.Get("If-None-Match"); inm != "" && inm == w.Header().Get("ETag") {
			w.WriteHeader(http.StatusNotModified)
			return
		}
		if _, err := io.Copy(w, rendered); err != nil {
			logger.Warn("artifact download ended early", "session", r.PathValue("id"), "err", err)
			panic(http.ErrAbortHandler) // a chunked body must not end cleanly
		}
	}))
	return mux
}

func httpError(w http.ResponseWriter, err error) {
	code := http.StatusInternalServerError
	var de *sessionstore.Error
	if errors.As(err, &de) {
		switch de.Reason {
		case sessionstore.ReasonNotFound:
			code = http.StatusNotFound
		case sessionstore.ReasonQuotaExceeded:
			code = http.StatusTooManyRequests
		case sessionstore.ReasonNoLeader, sessionstore.ReasonShuttingDown, sessionstore.ReasonOutcomeUnknown:
			code = http.StatusServiceUnavailable
		}
	}
	http.Error(w, err.Error(), code)
}

// registerNodeMetrics exports a chosen few of hashicorp/raft's and
// memberlist's own go-metrics (see bridgedFamilies); the node's own gauges
// are registered by cluster.New on the same registry.
func registerNodeMetrics(reg *prometheus.Registry) {
	if b := raftGoMetrics(); b != nil {
		_ = reg.Register(b) // AlreadyRegistered cannot happen: one bridge per registry
	}
}
