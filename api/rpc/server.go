package rpc

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/auth"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// ChunkBytes bounds the events of one streamed message (docs/api.md: ≤ 1 MiB).
const ChunkBytes = 1 << 20

// rawMessageBytes is the content of one ReadRaw message.
const rawMessageBytes = 256 << 10

// messageMargin is kept free in every message for the header and framing.
const messageMargin = sessionstore.ViewMessageMargin

// chunk is the event bytes of one streamed message: ChunkBytes, or less when
// the node's message limit is near it.
func (p *Persistence) chunk() int {
	if p.MaxMessageBytes > 0 && p.MaxMessageBytes-messageMargin < ChunkBytes {
		return max(p.MaxMessageBytes-messageMargin, 1)
	}
	return ChunkBytes
}

// Persistence serves sessionstore.v1.SessionPersistence.
type Persistence struct {
	pb.UnimplementedSessionPersistenceServer
	b Backend
	// MaxMessageBytes is the gRPC message limit; unary views above it answer
	// TOO_LARGE and name their stream form (they are served by the stream
	// forms of the backend under this limit, which refuse a larger view
	// before committing anything, and collected).
	MaxMessageBytes int
	// WatchProgress is the interval of empty progress messages on Watch.
	WatchProgress time.Duration
	// Stopping, once closed, ends every Watch with SHUTTING_DOWN, so a
	// stopping node's watchers learn to resume elsewhere instead of losing
	// their transport (nil: never).
	Stopping <-chan struct{}
}

// NewPersistence returns the service over b. Calls a follower cannot serve go
// to the leader through the interceptors (forwardUnary, serveStream), which
// also bound how long a stream waits for its reader.
func NewPersistence(b Backend, maxMessageBytes int) *Persistence {
	return &Persistence{b: b, MaxMessageBytes: maxMessageBytes, WatchProgress: 5 * time.Second}
}

// stopping reports whether Stopping is closed.
func (p *Persistence) stopping() bool {
	select {
	case <-p.Stopping:
		return true
	default:
		return false
	}
}

// Register adds the service to s.
func (p *Persistence) Register(s grpc.ServiceRegistrar) { pb.RegisterSessionPersistenceServer(s, p) }

func (p *Persistence) Locate(ctx context.Context, r *pb.LocateRequest) (*pb.LocateResponse, error) {
	kind, path, url, err := p.b.Locate(ctx, headerFromPB(r.GetHeader()))
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.LocateResponse{Kind: kind, Path: path, Url: url}, nil
}

func (p *Persistence) Create(ctx context.Context, r *pb.CreateRequest) (*pb.CreateResponse, error) {
	if r.Header == nil {
		return nil, toStatus(sessionstore.Errorf(sessionstore.ReasonInvalidHeader, "create needs a header"))
	}
	res, err := p.b.Create(ctx, headerFromPB(r.Header), r.RequestId, validationFromPB(r.Validation))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.CreateResponse{Readable: proto.Bool(res.Unreadable == nil)}
	if u := res.Unreadable; u != nil {
		out.UnreadableReason, out.UnreadableMessage = string(u.Reason), u.Message
	}
	return out, nil
}

func (p *Persistence) Append(ctx context.Context, r *pb.AppendRequest) (*pb.AppendResponse, error) {
	res, err := p.b.Append(ctx, r.SessionId, toBytes(r.Events), r.LeaseEpoch, r.ExpectedRevision, validationFromPB(r.Validation))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.AppendResponse{Revision: res.Revision, NextSeq: res.NextSeq, Duplicate: res.Duplicate, Readable: proto.Bool(res.Unreadable == nil)}
	if u := res.Unreadable; u != nil {
		out.UnreadableReason, out.UnreadableMessage = string(u.Reason), u.Message
	}
	return out, nil
}

// validationFromPB maps the wire enum; a value this build does not know is
// taken as strict, the safer reading.
func validationFromPB(v pb.Validation) sessionstore.Validation {
	if v == pb.Validation_VALIDATION_REFERENCE {
		return sessionstore.ValidateReference
	}
	return sessionstore.ValidateStrict
}

func viewToPB(v sessionstore.View) *pb.SessionView {
	return &pb.SessionView{Header: headerToPB(v.Header), Events: toStrings(v.Events), Revision: v.Revision,
		Repaired: v.Repaired, NextSeq: v.NextSeq}
}

// viewLimit is the bound of a unary view whose stream form is stream.
func (p *Persistence) viewLimit(stream string) sessionstore.ViewLimit {
	return sessionstore.ViewLimit{MessageBytes: p.MaxMessageBytes, Stream: stream}
}

// collectView gathers, for a unary answer, the view a stream form of the
// backend sends in parts under limit. The backend refuses a view above the
// limit before it commits or reads anything; should one come all the same,
// this drops its events but keeps counting them, and answers TOO_LARGE with
// the view's size: a view too large for one message holds no more than the
// limit here.
func (p *Persistence) collectView(id string, limit sessionstore.ViewLimit, stream func(sessionstore.ViewLimit, func(sessionstore.View) error) error) (sessionstore.View, error) {
	var v sessionstore.View
	var events [][]byte
	first := true
	var count, size int64
	err := stream(limit, func(part sessionstore.View) error {
		if first {
			v, first = part, false
		}
		count += int64(len(part.Events))
		size += totalBytes(part.Events)
		if !limit.Fits(sessionstore.ViewBytes(count, size)) {
			events = nil
			return nil
		}
		events = append(events, part.Events...)
		return nil
	})
	if err != nil {
		return sessionstore.View{}, err
	}
	if err := limit.Check(id, count, size); err != nil {
		return sessionstore.View{}, err
	}
	v.Events = events
	return v, nil
}

// readOnly reports whether the caller lacks write permission: its Load is an
// Inspect (a view without committing a repair).
func readOnly(ctx context.Context) bool { return !auth.FromContext(ctx).Has(auth.Write) }

func (p *Persistence) Load(ctx context.Context, r *pb.LoadRequest) (*pb.SessionView, error) {
	if readOnly(ctx) {
		return p.Inspect(ctx, &pb.InspectRequest{SessionId: r.SessionId})
	}
	v, err := p.collectView(r.SessionId, p.viewLimit("LoadStream"), func(limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
		return p.b.LoadStream(ctx, r.SessionId, r.RequestId, limit, send)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return viewToPB(v), nil
}

func (p *Persistence) Inspect(ctx context.Context, r *pb.InspectRequest) (*pb.SessionView, error) {
	v, err := p.collectView(r.SessionId, p.viewLimit("InspectStream"), func(limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
		return p.b.InspectStream(ctx, r.SessionId, consistency(r.Consistency), limit, send)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return viewToPB(v), nil
}

func (p *Persistence) Prepare(ctx context.Context, r *pb.PrepareRequest) (*pb.PrepareResponse, error) {
	v, err := p.collectView(r.SessionId, p.viewLimit("PrepareStream"), func(limit sessionstore.ViewLimit, send func(sessionstore.View) error) error {
		return p.b.PrepareStream(ctx, r.SessionId, r.Owner, time.Duration(r.TtlMs)*time.Millisecond, r.RequestId, limit, send)
	})
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.PrepareResponse{View: viewToPB(v), Lease: leaseToPB(v.Lease)}, nil
}

// viewSender returns the send function of a view stream: the metadata (and
// the first events) in the first message, events in chunks of at most chunk
// bytes, as the backend hands over the view's parts.
func viewSender(chunk int, send func(*pb.SessionViewPart) error) func(sessionstore.View) error {
	first := true
	return func(v sessionstore.View) error {
		parts := chunks(v.Events, chunk)
		if first {
			m := &pb.SessionViewPart{ViewPart: &pb.SessionView{Header: headerToPB(v.Header), Revision: v.Revision,
				Repaired: v.Repaired, NextSeq: v.NextSeq}, Lease: leaseToPB(v.Lease)}
			if len(parts) > 0 {
				m.ViewPart.Events = toStrings(parts[0])
				parts = parts[1:]
			}
			first = false
			if err := send(m); err != nil {
				return err
			}
		}
		for _, c := range parts {
			if err := send(&pb.SessionViewPart{ViewPart: &pb.SessionView{Events: toStrings(c)}}); err != nil {
				return err
			}
		}
		return nil
	}
}

func (p *Persistence) LoadStream(r *pb.LoadRequest, s grpc.ServerStreamingServer[pb.SessionViewPart]) error {
	if readOnly(s.Context()) {
		return p.InspectStream(&pb.InspectRequest{SessionId: r.SessionId}, s)
	}
	view := viewSender(p.chunk(), s.Send)
	return toStatus(p.b.LoadStream(s.Context(), r.SessionId, r.RequestId, sessionstore.ViewLimit{}, view))
}

func (p *Persistence) InspectStream(r *pb.InspectRequest, s grpc.ServerStreamingServer[pb.SessionViewPart]) error {
	view := viewSender(p.chunk(), s.Send)
	return toStatus(p.b.InspectStream(s.Context(), r.SessionId, consistency(r.Consistency), sessionstore.ViewLimit{}, view))
}

func (p *Persistence) PrepareStream(r *pb.PrepareRequest, s grpc.ServerStreamingServer[pb.SessionViewPart]) error {
	view := viewSender(p.chunk(), s.Send)
	return toStatus(p.b.PrepareStream(s.Context(), r.SessionId, r.Owner, time.Duration(r.TtlMs)*time.Millisecond, r.RequestId, sessionstore.ViewLimit{}, view))
}

func (p *Persistence) KeepAlive(ctx context.Context, r *pb.KeepAliveRequest) (*pb.KeepAliveResponse, error) {
	l := r.GetLease()
	if l == nil {
		return nil, toStatus(sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "keep-alive needs a lease"))
	}
	out, err := p.b.KeepAlive(ctx, sessionstore.Lease{SessionID: l.SessionId, Owner: l.Owner, Epoch: l.Epoch}, r.RequestId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.KeepAliveResponse{Lease: leaseToPB(&out)}, nil
}

func (p *Persistence) Release(ctx context.Context, r *pb.ReleaseRequest) (*pb.ReleaseResponse, error) {
	if err := p.b.Release(ctx, r.SessionId, r.LeaseEpoch, r.RequestId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.ReleaseResponse{}, nil
}

func (p *Persistence) Delete(ctx context.Context, r *pb.DeleteRequest) (*pb.DeleteResponse, error) {
	rev, err := p.b.Delete(ctx, r.SessionId, r.ExpectedRevision, r.RequestId)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.DeleteResponse{Revision: rev}, nil
}

func (p *Persistence) ReadFrom(r *pb.ReadFromRequest, s grpc.ServerStreamingServer[pb.ReadFromResponse]) error {
	send := s.Send
	first := true
	err := p.b.ReadFrom(s.Context(), r.SessionId, r.FromSeq, consistency(r.Consistency), func(suf sessionstore.Suffix) error {
		for i, c := range chunks(suf.Events, p.chunk()) {
			m := &pb.ReadFromResponse{Events: toStrings(c)}
			if i == 0 && first {
				m.Header, m.Revision, m.NextSeq = headerToPB(suf.Header), suf.Revision, suf.NextSeq
			}
			if err := send(m); err != nil {
				return err
			}
		}
		if len(suf.Events) == 0 && first {
			if err := send(&pb.ReadFromResponse{Header: headerToPB(suf.Header), Revision: suf.Revision, NextSeq: suf.NextSeq}); err != nil {
				return err
			}
		}
		first = false
		return nil
	})
	return toStatus(err)
}

// ReadRaw streams the text chunk by chunk from storage: the revision in the
// first message is the one whose text follows (later writes are not mixed
// in; a deletion under the stream ends it with NOT_FOUND).
func (p *Persistence) ReadRaw(r *pb.ReadRawRequest, s grpc.ServerStreamingServer[pb.ReadRawResponse]) error {
	send := s.Send
	h, revision, text, _, err := p.b.OpenRaw(s.Context(), r.SessionId, sessionstore.Linearizable)
	if err != nil {
		return toStatus(err)
	}
	first := true
	for {
		// A fresh buffer per message: a Send given up on may still hold the
		// previous one. Messages of rawMessageBytes: what a stalled stream
		// pins is about two of them (the message and its encoding).
		buf := make([]byte, min(p.chunk(), rawMessageBytes))
		n, err := io.ReadFull(text, buf)
		if err != nil && err != io.ErrUnexpectedEOF && err != io.EOF {
			return toStatus(err)
		}
		if n == 0 && !first {
			return nil
		}
		m := &pb.ReadRawResponse{Content: buf[:n]}
		if first {
			m.Header, m.Filename, m.Revision = headerToPB(h), "session.jsonl", revision
			first = false
		}
		if err := send(m); err != nil {
			return toStatus(err)
		}
		if n < len(buf) {
			return nil
		}
	}
}

func (p *Persistence) List(ctx context.Context, r *pb.ListRequest) (*pb.ListResponse, error) {
	snaps, next, err := p.b.List(ctx, listQuery(r.Consistency, r.PageSize, r.PageToken, r.CwdPrefix, r.IdPrefix, r.Order))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListResponse{NextPageToken: next}
	for _, s := range visible(ctx, snaps) {
		out.Headers = append(out.Headers, headerToPB(s.Header))
	}
	return out, nil
}

// visible keeps the sessions the caller may see (a page can come back short,
// even empty, with a next-page token: callers page on until the token is
// empty).
func visible(ctx context.Context, snaps []sessionstore.Snapshot) []sessionstore.Snapshot {
	p := auth.FromContext(ctx)
	if p.Prefixes == nil {
		return snaps
	}
	out := snaps[:0:0]
	for _, s := range snaps {
		if p.Covers(s.Header.ID) {
			out = append(out, s)
		}
	}
	return out
}

func (p *Persistence) ListSnapshots(ctx context.Context, r *pb.ListSnapshotsRequest) (*pb.ListSnapshotsResponse, error) {
	snaps, next, err := p.b.List(ctx, listQuery(r.Consistency, r.PageSize, r.PageToken, r.CwdPrefix, r.IdPrefix, r.Order))
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.ListSnapshotsResponse{NextPageToken: next}
	for _, s := range visible(ctx, snaps) {
		out.Snapshots = append(out.Snapshots, snapshotToPB(s))
	}
	return out, nil
}

func (p *Persistence) Watch(r *pb.WatchRequest, s grpc.ServerStreamingServer[pb.WatchResponse]) error {
	ctx, cancel := context.WithCancel(s.Context())
	defer cancel()
	if p.Stopping != nil {
		go func() {
			select {
			case <-p.Stopping:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	err := p.b.Watch(ctx, r.SessionId, r.FromSeq, p.WatchProgress, func(ev sessionstore.WatchEvent) error {
		for _, c := range chunks(ev.Events, p.chunk()) {
			if err := s.Send(&pb.WatchResponse{Events: toStrings(c), Revision: ev.Revision, AppliedIndex: ev.AppliedIndex}); err != nil {
				return err
			}
		}
		if len(ev.Events) == 0 {
			return s.Send(&pb.WatchResponse{Revision: ev.Revision, AppliedIndex: ev.AppliedIndex})
		}
		return nil
	})
	if err != nil && ctx.Err() != nil && s.Context().Err() == nil && p.stopping() {
		return toStatus(sessionstore.Errorf(sessionstore.ReasonShuttingDown, "node is shutting down: watch again on another node from the last seq + 1"))
	}
	return toStatus(err)
}
