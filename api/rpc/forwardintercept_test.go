package rpc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
)

// backupCluster adds Backup to fakeCluster: the leader streams a meta, a
// chunk and the trailer; a follower answers not-leader, after sending its
// meta when metaFirst is set.
type backupCluster struct {
	*fakeCluster
	metaFirst bool
}

func (b backupCluster) Backup(_ context.Context, meta func(sessionstore.BackupMeta) error, data io.Writer) (sessionstore.BackupTrailer, error) {
	if err := b.record("Backup"); err != nil {
		if b.metaFirst {
			_ = meta(sessionstore.BackupMeta{NodeID: "follower"})
		}
		return sessionstore.BackupTrailer{}, err
	}
	if err := meta(sessionstore.BackupMeta{NodeID: "leader"}); err != nil {
		return sessionstore.BackupTrailer{}, err
	}
	_, err := data.Write([]byte("state"))
	return sessionstore.BackupTrailer{DBBytes: 5}, err
}

// serveTCP serves b's Cluster service with the production interceptors,
// forwarding with fwd, on a loopback port; it returns the address.
func serveTCP(t *testing.T, b ClusterBackend, fwd *Forwarder) string {
	t.Helper()
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer(NewInterceptors(slog.New(slog.NewTextHandler(io.Discard, nil)), NewMetrics(nil), nil, fwd).ServerOptions()...)
	NewClusterService(b).Register(srv)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return lis.Addr().String()
}

func clusterClient(t *testing.T, addr string) pb.ClusterClient {
	t.Helper()
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return pb.NewClusterClient(conn)
}

// The interceptors forward what a follower's handler answers "not the
// leader": unary calls and streams that sent nothing run on the leader and
// its answer comes back; a stream that already sent is not forwarded; without
// a forwarder the answer is NO_LEADER.
func TestInterceptorsForwardToTheLeader(t *testing.T) {
	leader := &fakeCluster{}
	leaderAddr := serveTCP(t, backupCluster{fakeCluster: leader}, nil)
	notLeader := &sessionstore.NotLeaderError{LeaderID: "n1", LeaderAPI: leaderAddr}

	fwd := NewForwarder(1<<20, net.Dialer{}, nil)
	t.Cleanup(fwd.Close)
	follower := &fakeCluster{err: notLeader}
	viaFollower := clusterClient(t, serveTCP(t, backupCluster{fakeCluster: follower}, fwd))
	sentFirst := clusterClient(t, serveTCP(t, backupCluster{fakeCluster: &fakeCluster{err: notLeader}, metaFirst: true}, fwd))
	alone := clusterClient(t, serveTCP(t, backupCluster{fakeCluster: &fakeCluster{err: notLeader}}, nil))

	ctx := ctxFor(t)
	if _, err := viaFollower.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToNodeId: "n3"}); err != nil {
		t.Fatalf("unary through the follower: %v", err)
	}
	if _, err := viaFollower.Retention(ctx, &pb.RetentionRequest{DryRun: true}); err != nil {
		t.Fatalf("retention through the follower: %v", err)
	}
	stream, err := viaFollower.Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var parts []string
	for {
		m, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("backup through the follower: %v after %q", err, parts)
		}
		switch {
		case m.GetMeta() != nil:
			parts = append(parts, "meta "+m.GetMeta().NodeId)
		case m.GetData() != nil:
			parts = append(parts, "data "+string(m.GetData()))
		case m.GetTrailer() != nil:
			parts = append(parts, "trailer")
		}
	}
	if got := fmt.Sprint(parts); got != "[meta leader data state trailer]" {
		t.Errorf("backup through the follower: %s", got)
	}
	wantCalls(t, follower, "TransferLeadership n3", "Retention", "Backup")
	wantCalls(t, leader, "TransferLeadership n3", "Retention", "Backup")

	// A stream that has sent its first message stays on the follower.
	stream, err = sentFirst.Backup(ctx, &pb.BackupRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if m, err := stream.Recv(); err != nil || m.GetMeta().GetNodeId() != "follower" {
		t.Fatalf("first message: %v, %v", m, err)
	}
	if _, err := stream.Recv(); reasonOf(err) != string(sessionstore.ReasonNoLeader) {
		t.Errorf("after a sent message: %v, want NO_LEADER", err)
	}
	wantCalls(t, leader, "TransferLeadership n3", "Retention", "Backup")

	// No forwarder: NO_LEADER, which clients retry.
	if _, err := alone.TransferLeadership(ctx, &pb.TransferLeadershipRequest{ToNodeId: "n3"}); reasonOf(err) != string(sessionstore.ReasonNoLeader) {
		t.Errorf("unary without a forwarder: %v, want NO_LEADER", err)
	}
	stream, err = alone.Backup(ctx, &pb.BackupRequest{})
	if err == nil {
		_, err = stream.Recv()
	}
	if reasonOf(err) != string(sessionstore.ReasonNoLeader) {
		t.Errorf("stream without a forwarder: %v, want NO_LEADER", err)
	}
}
