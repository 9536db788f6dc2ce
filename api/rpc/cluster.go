package rpc

import (
	"context"

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
}

// ClusterService serves sessionstore.v1.Cluster.
type ClusterService struct {
	pb.UnimplementedClusterServer
	b   ClusterBackend
	fwd *Forwarder
}

// NewClusterService returns the service over b.
//
// Membership changes a follower cannot make go to the leader through fwd
// (nil: answer NO_LEADER instead).
func NewClusterService(b ClusterBackend, fwd *Forwarder) *ClusterService {
	return &ClusterService{b: b, fwd: fwd}
}

// Register adds the service to g.
func (s *ClusterService) Register(g *grpc.Server) { pb.RegisterClusterServer(g, s) }

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
			NodeId:      m.NodeID,
			RaftAddress: m.RaftAddress,
			ApiAddress:  m.APIAddress,
			Suffrage:    m.Suffrage,
			Health:      m.Health,
		})
	}
	return out, nil
}

func (s *ClusterService) TransferLeadership(ctx context.Context, r *pb.TransferLeadershipRequest) (*pb.TransferLeadershipResponse, error) {
	if err := s.b.TransferLeadership(ctx, r.ToNodeId); err != nil {
		if nl := leaderOf(err); nl != nil {
			out := new(pb.TransferLeadershipResponse)
			return out, s.fwd.unary(ctx, nl, pb.Cluster_TransferLeadership_FullMethodName, r, out, true)
		}
		return nil, toStatus(err)
	}
	return &pb.TransferLeadershipResponse{}, nil
}

func (s *ClusterService) RemoveMember(ctx context.Context, r *pb.RemoveMemberRequest) (*pb.RemoveMemberResponse, error) {
	if r.NodeId == "" {
		return nil, toStatus(sessionstore.Errorf(sessionstore.ReasonInvalidArgument, "remove member needs a node_id"))
	}
	if err := s.b.RemoveMember(ctx, r.NodeId); err != nil {
		if nl := leaderOf(err); nl != nil {
			out := new(pb.RemoveMemberResponse)
			return out, s.fwd.unary(ctx, nl, pb.Cluster_RemoveMember_FullMethodName, r, out, true)
		}
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
