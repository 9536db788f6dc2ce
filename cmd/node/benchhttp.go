package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"time"

	"connectrpc.com/connect"
	"google.golang.org/genproto/googleapis/rpc/errdetails"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/rpc"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/tlsconf"
)

// benchAPI is what the append levels, KeepAlive and the clean-up call: the
// gRPC client (*client.Client) or the HTTP/JSON one (connectClient).
type benchAPI interface {
	Create(context.Context, *pb.CreateRequest) (*pb.CreateResponse, error)
	Append(context.Context, *pb.AppendRequest) (*pb.AppendResponse, error)
	Prepare(context.Context, *pb.PrepareRequest) (*pb.SessionView, *pb.Lease, error)
	KeepAlive(context.Context, *pb.KeepAliveRequest) (*pb.Lease, error)
	Release(context.Context, *pb.ReleaseRequest) error
	Delete(context.Context, *pb.DeleteRequest) (string, error)
}

// connectClient calls a node's HTTP port with the Connect protocol and JSON
// (connect-go's client over HTTP/1.1, or HTTP/2 with TLS), as a browser or
// Node.js client would. It never retries: a failure is counted, as the gRPC
// client's are after its own retries.
type connectClient struct {
	hc        *http.Client
	create    *connect.Client[pb.CreateRequest, pb.CreateResponse]
	append    *connect.Client[pb.AppendRequest, pb.AppendResponse]
	prepare   *connect.Client[pb.PrepareRequest, pb.PrepareResponse]
	keepAlive *connect.Client[pb.KeepAliveRequest, pb.KeepAliveResponse]
	release   *connect.Client[pb.ReleaseRequest, pb.ReleaseResponse]
	del       *connect.Client[pb.DeleteRequest, pb.DeleteResponse]
}

// newConnectClient calls the node whose HTTP port is addr (host:port); with
// tlsConf it uses https. token, when set, is sent as a bearer token. conns
// is how many connections to keep open (one per concurrent call on
// HTTP/1.1).
func newConnectClient(addr string, tlsConf *tls.Config, token string, conns int) *connectClient {
	scheme := "http://"
	if tlsConf != nil {
		scheme = "https://"
	}
	tr := &http.Transport{
		TLSClientConfig:     tlsConf,
		ForceAttemptHTTP2:   tlsConf != nil,
		MaxIdleConns:        conns,
		MaxIdleConnsPerHost: conns,
		IdleConnTimeout:     time.Minute,
	}
	hc := &http.Client{Transport: tr}
	opts := []connect.ClientOption{connect.WithProtoJSON()}
	if token != "" {
		opts = append(opts, connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
			return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
				req.Header().Set("Authorization", "Bearer "+token)
				return next(ctx, req)
			}
		})))
	}
	base := scheme + addr + "/" + pb.SessionPersistence_ServiceDesc.ServiceName + "/"
	return &connectClient{
		hc:        hc,
		create:    connect.NewClient[pb.CreateRequest, pb.CreateResponse](hc, base+"Create", opts...),
		append:    connect.NewClient[pb.AppendRequest, pb.AppendResponse](hc, base+"Append", opts...),
		prepare:   connect.NewClient[pb.PrepareRequest, pb.PrepareResponse](hc, base+"Prepare", opts...),
		keepAlive: connect.NewClient[pb.KeepAliveRequest, pb.KeepAliveResponse](hc, base+"KeepAlive", opts...),
		release:   connect.NewClient[pb.ReleaseRequest, pb.ReleaseResponse](hc, base+"Release", opts...),
		del:       connect.NewClient[pb.DeleteRequest, pb.DeleteResponse](hc, base+"Delete", opts...),
	}
}

// call makes one unary call and turns a Connect error carrying the store's
// ErrorInfo into the store's error, as the gRPC client does with a status.
func call[Req, Res any](ctx context.Context, c *connect.Client[Req, Res], req *Req) (*Res, error) {
	resp, err := c.CallUnary(ctx, connect.NewRequest(req))
	if err != nil {
		return nil, fromConnect(err)
	}
	return resp.Msg, nil
}

func fromConnect(err error) error {
	var ce *connect.Error
	if !errors.As(err, &ce) {
		return err
	}
	for _, d := range ce.Details() {
		v, derr := d.Value()
		if info, ok := v.(*errdetails.ErrorInfo); derr == nil && ok && info.GetDomain() == rpc.ErrorDomain && info.GetReason() != "" {
			return &sessionstore.Error{Reason: sessionstore.Reason(info.GetReason()), Message: ce.Message()}
		}
	}
	return err
}

func (c *connectClient) Create(ctx context.Context, r *pb.CreateRequest) (*pb.CreateResponse, error) {
	return call(ctx, c.create, r)
}

func (c *connectClient) Append(ctx context.Context, r *pb.AppendRequest) (*pb.AppendResponse, error) {
	return call(ctx, c.append, r)
}

func (c *connectClient) Prepare(ctx context.Context, r *pb.PrepareRequest) (*pb.SessionView, *pb.Lease, error) {
	resp, err := call(ctx, c.prepare, r)
	if err != nil {
		return nil, nil, err
	}
	return resp.GetView(), resp.GetLease(), nil
}

func (c *connectClient) KeepAlive(ctx context.Context, r *pb.KeepAliveRequest) (*pb.Lease, error) {
	resp, err := call(ctx, c.keepAlive, r)
	if err != nil {
		return nil, err
	}
	return resp.GetLease(), nil
}

func (c *connectClient) Release(ctx context.Context, r *pb.ReleaseRequest) error {
	_, err := call(ctx, c.release, r)
	return err
}

func (c *connectClient) Delete(ctx context.Context, r *pb.DeleteRequest) (string, error) {
	resp, err := call(ctx, c.del, r)
	if err != nil {
		return "", err
	}
	return resp.GetRevision(), nil
}

// Close closes the idle connections.
func (c *connectClient) Close() error {
	c.hc.CloseIdleConnections()
	return nil
}

// httpTLS is the TLS configuration of the connection flags for an HTTP
// client (nil: plaintext).
func (f *clientFlags) httpTLS() (*tls.Config, error) {
	if !f.tls() {
		return nil, nil
	}
	cfg, err := tlsconf.Client(tlsconf.ClientFiles{CA: f.ca, Cert: f.cert, Key: f.key, ServerName: f.serverName})
	if err != nil {
		return nil, fmt.Errorf("TLS flags: %w", err)
	}
	return cfg, nil
}
