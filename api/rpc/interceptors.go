package rpc

import (
	"context"
	"fmt"
	"log/slog"
	"runtime/debug"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Metrics holds the per-rpc instruments.
type Metrics struct {
	Requests *prometheus.CounterVec
	Latency  *prometheus.HistogramVec
	Panics   prometheus.Counter
}

// NewMetrics registers the rpc instruments on reg (nil: unregistered).
func NewMetrics(reg prometheus.Registerer) *Metrics {
	m := &Metrics{
		Requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "sessionstore_rpc_requests_total", Help: "RPCs served, by method and gRPC code."}, []string{"method", "code"}),
		Latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "sessionstore_rpc_duration_seconds", Help: "RPC latency by method (streams: until the stream ends).",
			Buckets: prometheus.ExponentialBuckets(0.0001, 2, 18)}, []string{"method"}),
		Panics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "sessionstore_rpc_panics_total", Help: "Handler panics recovered (each one is a bug)."}),
	}
	if reg != nil {
		reg.MustRegister(m.Requests, m.Latency, m.Panics)
	}
	return m
}

// Interceptors returns the server options that recover panics, log failures
// and record metrics for every rpc.
func Interceptors(logger *slog.Logger, m *Metrics) []grpc.ServerOption {
	logger = logger.With("component", "rpc")
	done := func(method string, start time.Time, err error) {
		code := status.Code(err)
		m.Requests.WithLabelValues(method, code.String()).Inc()
		m.Latency.WithLabelValues(method).Observe(time.Since(start).Seconds())
		switch code {
		case codes.OK, codes.NotFound, codes.AlreadyExists, codes.FailedPrecondition, codes.InvalidArgument, codes.Canceled:
			logger.Debug("rpc", "method", method, "code", code.String(), "dur", time.Since(start))
		default:
			logger.Warn("rpc failed", "method", method, "code", code.String(), "err", err, "dur", time.Since(start))
		}
	}
	recovered := func(method string, r any) error {
		m.Panics.Inc()
		logger.Error("panic in handler", "method", method, "panic", fmt.Sprint(r), "stack", string(debug.Stack()))
		return status.Error(codes.Internal, "internal error")
	}
	unary := func(ctx context.Context, req any, info *grpc.UnaryServerInfo, h grpc.UnaryHandler) (resp any, err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				err = recovered(info.FullMethod, r)
			}
			done(info.FullMethod, start, err)
		}()
		return h(ctx, req)
	}
	stream := func(srv any, ss grpc.ServerStream, info *grpc.StreamServerInfo, h grpc.StreamHandler) (err error) {
		start := time.Now()
		defer func() {
			if r := recover(); r != nil {
				err = recovered(info.FullMethod, r)
			}
			done(info.FullMethod, start, err)
		}()
		return h(srv, ss)
	}
	return []grpc.ServerOption{grpc.ChainUnaryInterceptor(unary), grpc.ChainStreamInterceptor(stream)}
}
