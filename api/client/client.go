package client

import (
	"context"
	"fmt"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
)

// MaxMessageSize is the default gRPC message limit in both directions (docs/api.md:
// gRPC messages ≤ 16 MiB).
const MaxMessageSize = 16 << 20

// Options configures the client's retries.
type Options struct {
	// MaxAttempts bounds the number of attempts of one call, the first
	// included (1 = never retry). Zero means the default, 8.
	MaxAttempts int
	// InitialBackoff is the wait before the second attempt; each later wait
	// doubles, up to MaxBackoff. Zero means the default, 20 ms.
	InitialBackoff time.Duration
	// MaxBackoff caps the wait between attempts. Zero means the default, 1 s.
	MaxBackoff time.Duration
}

// DefaultOptions returns the defaults: 8 attempts, backoff 20 ms to 1 s.
func DefaultOptions() Options {
	return Options{MaxAttempts: 8, InitialBackoff: 20 * time.Millisecond, MaxBackoff: time.Second}
}

// Validate reports options that cannot work. Zero fields are valid (defaults).
func (o Options) Validate() error {
	switch {
	case o.MaxAttempts < 0:
		return fmt.Errorf("client options: MaxAttempts %d must be ≥ 0", o.MaxAttempts)
	case o.InitialBackoff < 0:
		return fmt.Errorf("client options: InitialBackoff %v must be ≥ 0", o.InitialBackoff)
	case o.MaxBackoff < 0:
		return fmt.Errorf("client options: MaxBackoff %v must be ≥ 0", o.MaxBackoff)
	}
	return nil
}

func (o Options) withDefaults() Options {
	d := DefaultOptions()
	if o.MaxAttempts == 0 {
		o.MaxAttempts = d.MaxAttempts
	}
	if o.InitialBackoff == 0 {
		o.InitialBackoff = d.InitialBackoff
	}
	if o.MaxBackoff == 0 {
		o.MaxBackoff = d.MaxBackoff
	}
	if o.MaxBackoff < o.InitialBackoff {
		o.MaxBackoff = o.InitialBackoff
	}
	return o
}

// Client talks to the store: to one node (New, Dial; any node serves any
// call, a follower forwards writes to the leader) or to several (Open),
// moving between them as they fail. It is safe for concurrent use.
type Client struct {
	pool *pool
	opts Options
}

// Dial creates a client for addr ("host:port", or any gRPC target). By default
// it uses insecure transport credentials and allows 16 MiB messages both ways;
// opts are applied after these defaults, so they override them. The connection
// is established lazily (grpc.NewClient): an unreachable node shows up as
// retried UNAVAILABLE errors of the first calls, not as an error of Dial. ctx
// only guards Dial itself. The client talks to addr only, whatever it is
// told of the other nodes; Open makes a client that moves between nodes.
func Dial(ctx context.Context, addr string, opts ...grpc.DialOption) (*Client, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all := append([]grpc.DialOption{
		grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(
			grpc.MaxCallRecvMsgSize(MaxMessageSize),
			grpc.MaxCallSendMsgSize(MaxMessageSize),
		),
	}, opts...)
	conn, err := grpc.NewClient(addr, all...)
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", addr, err)
	}
	return &Client{pool: single(conn, conn), opts: DefaultOptions().withDefaults()}, nil
}

// New wraps an existing connection; Close will not close it.
func New(conn grpc.ClientConnInterface, opts Options) *Client {
	return &Client{pool: single(conn, nil), opts: opts.withDefaults()}
}

// WithOptions returns a client sharing c's connections with other retry
// options. Closing either closes the shared connections if Dial or Open made
// them.
func (c *Client) WithOptions(opts Options) *Client {
	cp := *c
	cp.opts = opts.withDefaults()
	return &cp
}

// Conn is the connection of the current node, for the other services of the
// node.
func (c *Client) Conn() grpc.ClientConnInterface { return c.pool.current().conn }

// Close closes the connections made by Dial or Open (a no-op for New).
func (c *Client) Close() error { return c.pool.close() }
