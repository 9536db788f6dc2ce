package client

import (
	"context"
	"errors"
	"io"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// Locate returns where the serving node keeps (or will keep) the session's
// JSONL artifact: kind "jsonl", its path on that node and its download URL.
func (c *Client) Locate(ctx context.Context, req *sessionpb.LocateRequest) (*sessionpb.LocateResponse, error) {
	var resp *sessionpb.LocateResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Locate(ctx, req)
		return err
	})
	return resp, err
}

// Create registers a session (listed after its first non-empty append). With
// an empty req.RequestId the call uses a fresh id (req is not modified).
// Validation is strict unless req asks for VALIDATION_REFERENCE; the answer's
// Readable is false when a reference-mode header is one a read refuses.
func (c *Client) Create(ctx context.Context, req *sessionpb.CreateRequest) (*sessionpb.CreateResponse, error) {
	req = withRequestID(req)
	var resp *sessionpb.CreateResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Create(ctx, req)
		return err
	})
	return resp, err
}

// Append durably appends a batch of events (each one single-line JSON object).
// Retries resend the identical batch, which the server acknowledges with
// Duplicate = true if an earlier attempt was applied.
func (c *Client) Append(ctx context.Context, req *sessionpb.AppendRequest) (*sessionpb.AppendResponse, error) {
	var resp *sessionpb.AppendResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Append(ctx, req)
		return err
	})
	return resp, err
}

// Load returns the balanced view, committing the crash repair of a cold
// session. A view too large for one message is read with LoadStream (same
// request id), so Load serves a session of any size.
// With an empty req.RequestId the call uses a fresh id (req is not modified).
func (c *Client) Load(ctx context.Context, req *sessionpb.LoadRequest) (*sessionpb.SessionView, error) {
	req = withRequestID(req)
	var resp *sessionpb.SessionView
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Load(ctx, req)
		return err
	})
	if viewTooLarge(err) {
		return c.LoadStream(ctx, req)
	}
	return resp, err
}

// Inspect returns the view without committing anything. A view too large
// for one message is read with InspectStream.
func (c *Client) Inspect(ctx context.Context, req *sessionpb.InspectRequest) (*sessionpb.SessionView, error) {
	var resp *sessionpb.SessionView
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Inspect(ctx, req)
		return err
	})
	if viewTooLarge(err) {
		return c.InspectStream(ctx, req)
	}
	return resp, err
}

// Prepare takes ownership of a session: it commits the repair, bumps the epoch
// and grants a lease. A view too large for one message is read with
// PrepareStream (same request id).
// With an empty req.RequestId the call uses a fresh id (req is not modified).
func (c *Client) Prepare(ctx context.Context, req *sessionpb.PrepareRequest) (*sessionpb.SessionView, *sessionpb.Lease, error) {
	req = withRequestID(req)
	var resp *sessionpb.PrepareResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.Prepare(ctx, req)
		return err
	})
	if viewTooLarge(err) {
		return c.PrepareStream(ctx, req)
	}
	if err != nil {
		return nil, nil, err
	}
	return resp.GetView(), resp.GetLease(), nil
}

// KeepAlive extends a lease and returns it renewed. Leave req.RequestId
// empty (a fresh id per call) unless you resend an earlier renewal yourself.
func (c *Client) KeepAlive(ctx context.Context, req *sessionpb.KeepAliveRequest) (*sessionpb.Lease, error) {
	req = withRequestID(req)
	var resp *sessionpb.KeepAliveResponse
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.KeepAlive(ctx, req)
		return err
	})
	return resp.GetLease(), err
}

// Release ends a lease.
// With an empty req.RequestId the call uses a fresh id (req is not modified).
// Delete removes a session (retried with the same request id, so a retry
// after an unknown outcome gets the first answer, not NOT_FOUND). It returns
// the revision the session had.
func (c *Client) Delete(ctx context.Context, req *sessionpb.DeleteRequest) (string, error) {
	req = withRequestID(req)
	var rev string
	err := c.do(ctx, mutating, func(ctx context.Context, e *endpoint) error {
		resp, err := e.rpc.Delete(ctx, req)
		rev = resp.GetRevision()
		return err
	})
	return rev, err
}

func (c *Client) Release(ctx context.Context, req *sessionpb.ReleaseRequest) error {
	req = withRequestID(req)
	return c.do(ctx, mutating, func(ctx context.Context, e *endpoint) error {
		_, err := e.rpc.Release(ctx, req)
		return err
	})
}

// List returns one page of materialised sessions' headers.
func (c *Client) List(ctx context.Context, req *sessionpb.ListRequest) (*sessionpb.ListResponse, error) {
	var resp *sessionpb.ListResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.List(ctx, req)
		return err
	})
	return resp, err
}

// ListSnapshots returns one page of materialised sessions' headers with their
// revisions.
func (c *Client) ListSnapshots(ctx context.Context, req *sessionpb.ListSnapshotsRequest) (*sessionpb.ListSnapshotsResponse, error) {
	var resp *sessionpb.ListSnapshotsResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) (err error) {
		resp, err = e.rpc.ListSnapshots(ctx, req)
		return err
	})
	return resp, err
}

// LoadStream is Load for a view of any size, assembled from the stream's
// parts.
// With an empty req.RequestId the call uses a fresh id (req is not modified).
func (c *Client) LoadStream(ctx context.Context, req *sessionpb.LoadRequest) (*sessionpb.SessionView, error) {
	req = withRequestID(req)
	view, _, err := c.viewStream(ctx, mutating, "LoadStream", func(ctx context.Context, e *endpoint) (grpc.ServerStreamingClient[sessionpb.SessionViewPart], error) {
		return e.rpc.LoadStream(ctx, req)
	})
	return view, err
}

// InspectStream is Inspect for a view of any size, assembled from the stream's
// parts.
func (c *Client) InspectStream(ctx context.Context, req *sessionpb.InspectRequest) (*sessionpb.SessionView, error) {
	view, _, err := c.viewStream(ctx, read, "InspectStream", func(ctx context.Context, e *endpoint) (grpc.ServerStreamingClient[sessionpb.SessionViewPart], error) {
		return e.rpc.InspectStream(ctx, req)
	})
	return view, err
}

// PrepareStream is Prepare for a view of any size, assembled from the stream's
// parts.
// With an empty req.RequestId the call uses a fresh id (req is not modified).
func (c *Client) PrepareStream(ctx context.Context, req *sessionpb.PrepareRequest) (*sessionpb.SessionView, *sessionpb.Lease, error) {
	req = withRequestID(req)
	return c.viewStream(ctx, mutating, "PrepareStream", func(ctx context.Context, e *endpoint) (grpc.ServerStreamingClient[sessionpb.SessionViewPart], error) {
		return e.rpc.PrepareStream(ctx, req)
	})
}

// ReadFrom collects the stored events with seq ≥ req.FromSeq, the header, and
// the revision and next seq of the log read.
func (c *Client) ReadFrom(ctx context.Context, req *sessionpb.ReadFromRequest) (*sessionpb.ReadFromResponse, error) {
	var out *sessionpb.ReadFromResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) error {
		out = &sessionpb.ReadFromResponse{}
		return recvAll(ctx, func(ctx context.Context) (grpc.ServerStreamingClient[sessionpb.ReadFromResponse], error) {
			return e.rpc.ReadFrom(ctx, req)
		}, func(m *sessionpb.ReadFromResponse) {
			if out.Header == nil {
				out.Header, out.Revision, out.NextSeq = m.GetHeader(), m.GetRevision(), m.GetNextSeq()
			}
			out.Events = append(out.Events, m.GetEvents()...)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// ReadRaw collects the artifact's text: the header, the filename and the
// content of every chunk concatenated.
func (c *Client) ReadRaw(ctx context.Context, req *sessionpb.ReadRawRequest) (*sessionpb.ReadRawResponse, error) {
	var out *sessionpb.ReadRawResponse
	err := c.do(ctx, read, func(ctx context.Context, e *endpoint) error {
		out = &sessionpb.ReadRawResponse{}
		return recvAll(ctx, func(ctx context.Context) (grpc.ServerStreamingClient[sessionpb.ReadRawResponse], error) {
			return e.rpc.ReadRaw(ctx, req)
		}, func(m *sessionpb.ReadRawResponse) {
			if out.Header == nil {
				out.Header = m.GetHeader()
			}
			if out.Filename == "" {
				out.Filename, out.Revision = m.GetFilename(), m.GetRevision()
			}
			out.Content = append(out.Content, m.GetContent()...)
		})
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Watch follows a session from req.FromSeq on. Each call of recv returns the
// next message (one with no events is a progress message); it returns io.EOF
// when the server ends the stream and otherwise the stream's error, converted
// by FromStatus (UNAVAILABLE when the node lost its leader: resume elsewhere
// from the last seen seq + 1). Watch is never retried. Cancel ctx to stop
// watching and release the stream.
func (c *Client) Watch(ctx context.Context, req *sessionpb.WatchRequest) (recv func() (*sessionpb.WatchResponse, error), err error) {
	s, err := c.pool.current().rpc.Watch(ctx, req)
	if err != nil {
		return nil, FromStatus(err)
	}
	return func() (*sessionpb.WatchResponse, error) {
		m, err := s.Recv()
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil, io.EOF
			}
			return nil, FromStatus(err)
		}
		return m, nil
	}, nil
}

// viewStream runs one of the SessionViewPart streams and assembles the view:
// header, revision, repaired, next_seq (and the lease) from the first message,
// the events of every message concatenated.
func (c *Client) viewStream(ctx context.Context, p policy, rpc string,
	open func(context.Context, *endpoint) (grpc.ServerStreamingClient[sessionpb.SessionViewPart], error),
) (*sessionpb.SessionView, *sessionpb.Lease, error) {
	var (
		view  *sessionpb.SessionView
		lease *sessionpb.Lease
	)
	err := c.do(ctx, p, func(ctx context.Context, e *endpoint) error {
		view, lease = nil, nil
		err := recvAll(ctx, func(ctx context.Context) (grpc.ServerStreamingClient[sessionpb.SessionViewPart], error) {
			return open(ctx, e)
		}, func(m *sessionpb.SessionViewPart) {
			part := m.GetViewPart()
			if view == nil {
				view = &sessionpb.SessionView{
					Header:   part.GetHeader(),
					Revision: part.GetRevision(),
					Repaired: part.GetRepaired(),
					NextSeq:  part.GetNextSeq(),
				}
			}
			if lease == nil {
				lease = m.GetLease()
			}
			view.Events = append(view.Events, part.GetEvents()...)
		})
		if err == nil && view == nil {
			return status.Errorf(codes.Internal, "%s: the stream ended without a message", rpc)
		}
		return err
	})
	if err != nil {
		return nil, nil, err
	}
	return view, lease, nil
}

// recvAll opens a server stream and hands every message to each until the
// stream ends; the stream is released when recvAll returns.
func recvAll[T any](ctx context.Context, open func(context.Context) (grpc.ServerStreamingClient[T], error), each func(*T)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	s, err := open(ctx)
	if err != nil {
		return err
	}
	for {
		m, err := s.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		each(m)
	}
}
