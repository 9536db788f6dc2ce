package rpc

import (
	"context"
	"io"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// ClusterBackend is what the Cluster service needs from a node. Errors are
// domain errors (*sessionstore.Error) where the caller can act on them, e.g.
// NO_LEADER when a membership change finds no leader.
type ClusterBackend interface {
	// Status is this node's view of the cluster.
	Status(ctx context.Context) (sessionstore.NodeStatus, error)
	// Members is the Raft configuration joined with gossip health.
	Members(ctx context.Context) ([]sessionstore.Member, error)
	// TransferLeadership hands leadership to toNodeID (empty: any suitable
	// node).
	TransferLeadership(ctx context.Context, toNodeID string) error
	// RemoveMember removes nodeID from the Raft configuration.
	RemoveMember(ctx context.Context, nodeID string) error
	// Leave makes this node leave the cluster.
	Leave(ctx context.Context) error
	// Retention applies the retention policies (dryRun: only lists what
	// they would delete) and returns the session ids.
	Retention(ctx context.Context, dryRun bool) ([]string, error)
}

// BackupBackend is the optional part of a ClusterBackend that serves Backup
// (a backend without it answers UNIMPLEMENTED).
type BackupBackend interface {
	// Backup calls meta once, then writes the snapshot stream to data, and
	// returns the trailer; a follower returns a *sessionstore.NotLeaderError
	// (the call is forwarded to the leader).
	Backup(ctx context.Context, meta func(sessionstore.BackupMeta) error, data io.Writer) (sessionstore.BackupTrailer, error)
}

// BackupChunkSize bounds the data of one BackupChunk.
const BackupChunkSize = 1 << 20

// ClusterService serves sessionstore.v1.Cluster.
type ClusterService struct {
	pb.UnimplementedClusterServer
	b ClusterBackend
}

// NewClusterService returns the service over b. Membership changes a follower
// cannot make go to the leader through the interceptors (forwardUnary).
func NewClusterService(b ClusterBackend) *ClusterService {
	return &ClusterService{b: b}
}

// Register adds the service to g.
func (s *ClusterService) Register(g grpc.ServiceRegistrar) { pb.RegisterClusterServer(g, s) }

func (s *ClusterService) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	st, err := s.b.Status(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.StatusResponse{
		NodeId:        st.NodeID,
		State:         st.State,
		LeaderId:      st.LeaderID,
		LeaderAddress: st.LeaderAddress,
		Term:          st.Term,
		CommitIndex:   st.CommitIndex,
		AppliedIndex:  st.AppliedIndex,
		ClusterId:     st.ClusterID,
	}, nil
}

func (s *ClusterService) Members(ctx context.Context, _ *pb.MembersRequest) (*pb.MembersResponse, error) {
	ms, err := s.b.Members(ctx)
	if err != nil {
		return nil, toStatus(err)
	}
	out := &pb.MembersResponse{Members: make([]*pb.Member, 0, len(ms))}
	for _, m := range ms {
		out.Members = append(out.Members, &pb.Member{
			NodeId:         m.NodeID,
			RaftAddress:    m.RaftAddress,
			ApiAddress:     m.APIAddress,
			Suffrage:       m.Suffrage,
			Health:         m.Health,
			AppliedIndex:   m.AppliedIndex,
			LastContactMs:  m.LastContactMs,
			DiskFreeBytes:  m.DiskFreeBytes,
			DiskLow:        m.DiskLow,
			CommandVersion: m.CommandVersion,
		})
	}
	return out, nil
}

func (s *ClusterService) TransferLeadership(ctx context.Context, r *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	if err := s.b.TransferLeadership(ctx, r.ToNodeId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.TransferLeadershipResponse{}, nil
}

func (s *ClusterService) RemoveMember(ctx context.Context, r *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if r.NodeId == "" {
		return nil, toStatus(sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "remove member needs a node_id"))
	}
	if err := s.b.RemoveMember(ctx, r.NodeId); err != nil {
		return nil, toStatus(err)
	}
	return &pb.RemoveMemberResponse{}, nil
}

func (s *ClusterService) Leave(ctx context.Context, _ *pb.LeaveRequest) (*pb.LeaveResponse, error) {
	if err := s.b.Leave(ctx); err != nil {
		return nil, toStatus(err)
	}
	return &pb.LeaveResponse{}, nil
}

func (s *ClusterService) Retention(ctx context.Context, r *pb.RetentionRequest) (*pb.RetentionResponse, error) {
	ids, err := s.b.Retention(ctx, r.DryRun)
	if err != nil {
		return nil, toStatus(err)
	}
	return &pb.RetentionResponse{SessionIds: ids}, nil
}

func (s *ClusterService) Backup(r *pb.BackupRequest, stream grpc.ServerStreamingServer[pb.BackupChunk]) error {
	b, ok := s.b.(BackupBackend)
	if !ok {
		return pb.UnimplementedClusterServer{}.Backup(r, stream)
	}
	ctx := stream.Context()
	w := &chunkWriter{send: func(p []byte) error {
		return stream.Send(&pb.BackupChunk{Part: &pb.BackupChunk_Data{Data: p}})
	}, buf: make([]byte, 0, BackupChunkSize)}
	t, err := b.Backup(ctx, func(m sessionstore.BackupMeta) error {
		return stream.Send(&pb.BackupChunk{Part: &pb.BackupChunk_Meta{Meta: &pb.BackupMeta{
			ClusterId: m.ClusterID, AppliedIndex: m.AppliedIndex, Term: m.Term, TimeUnixMs: m.Time.UnixMilli(),
			DbBytes: m.DBBytes, NodeId: m.NodeID, StateFormat: m.StateFormat}}})
	}, w)
	if err == nil {
		err = w.flush()
	}
	if err != nil {
		return toStatus(err)
	}
	return stream.Send(&pb.BackupChunk{Part: &pb.BackupChunk_Trailer{Trailer: &pb.BackupTrailer{
		DbBytes: t.DBBytes, StreamBytes: t.StreamBytes, DbSha256: t.SHA256}}})
}

// chunkWriter cuts a stream into messages of at most cap(buf) bytes.
type chunkWriter struct {
	send func([]byte) error
	buf  []byte
}

func (c *chunkWriter) Write(p []byte) (int, error) {
	n := len(p)
	for len(p) > 0 {
		k := min(len(p), cap(c.buf)-len(c.buf))
		c.buf = append(c.buf, p[:k]...)
		p = p[k:]
		if len(c.buf) == cap(c.buf) {
			if err := c.flush(); err != nil {
				return 0, err
			}
		}
	}
	return n, nil
}

func (c *chunkWriter) flush() error {
	if len(c.buf) == 0 {
		return nil
	}
	err := c.send(c.buf)
	// A sent message must not be modified (stats handlers may read it late).
	c.buf = make([]byte, 0, cap(c.buf))
	return err
}

// BackupMetaFromPB converts the first message of a Backup stream.
func BackupMetaFromPB(m *pb.BackupMeta) sessionstore.BackupMeta {
	return sessionstore.BackupMeta{ClusterID: m.GetClusterId(), AppliedIndex: m.GetAppliedIndex(), Term: m.GetTerm(),
		Time: time.UnixMilli(m.GetTimeUnixMs()), DBBytes: m.GetDbBytes(), NodeID: m.GetNodeId(), StateFormat: m.GetStateFormat()}
}
