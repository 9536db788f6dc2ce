package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/internal/serverproc"
)

// system is one store under test: a set of server processes on loopback and
// a way to write to them and to see how far each has applied.
type system interface {
	name() string
	pids() []int
	dataDirs() []string
	// writer returns writer i's write function (one 1-event write per call),
	// through the client of server i mod n (--clients). Set-up (e.g.
	// creating a session) happens here, outside the measured window.
	writer(ctx context.Context, i int, payload func(seq int64) string) (func(ctx context.Context, seq int64) error, error)
	// applied is every server's applied Raft index.
	applied(ctx context.Context) ([]uint64, error)
	stop()
}

const (
	stopTimeout  = 10 * time.Second       // a server is killed if still running this long after SIGTERM
	readyTimeout = 60 * time.Second       // for a fresh cluster to elect a leader and take a write
	readyPoll    = 200 * time.Millisecond // readiness polling while it starts
)

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func freeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		p, err := freePort()
		if err != nil {
			return nil, err
		}
		out[i] = fmt.Sprintf("127.0.0.1:%d", p)
	}
	return out, nil
}

// ours is a sessionstore cluster: n `sessionstore serve` processes with shipped
// defaults, formed with --join and --bootstrap-expect as the README shows.
type ours struct {
	procs   []*serverproc.Proc
	dirs    []string
	clients []*client.Client // of one node each (status; writers with --clients node)
	writers []*client.Client // writer i uses writers[i mod n]; nil: clients
	prefix  string
}

func startOurs(ctx context.Context, bin, work string, n int, clients string, extra []string) (_ *ours, err error) {
	s := &ours{prefix: filepath.Base(work)}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	type nodeAddrs struct{ grpc, http, raft, gossip string }
	nodes := make([]nodeAddrs, n)
	for i := range nodes {
		a, err := freeAddrs(4)
		if err != nil {
			return nil, err
		}
		nodes[i] = nodeAddrs{a[0], a[1], a[2], a[3]}
	}
	for i, nd := range nodes {
		dir := filepath.Join(work, fmt.Sprintf("n%d", i+1))
		args := []string{"serve", "--node-id", fmt.Sprintf("n%d", i+1), "--data-dir", dir,
			"--grpc-addr", nd.grpc, "--http-addr", nd.http, "--raft-addr", nd.raft, "--gossip-addr", nd.gossip}
		if n > 1 {
			var join []string
			for j, o := range nodes {
				if j != i {
					join = append(join, o.gossip)
				}
			}
			args = append(args, "--join", strings.Join(join, ","), "--bootstrap-expect", fmt.Sprint(n))
		}
		args = append(args, extra...)
		p, err := serverproc.Start(bin, filepath.Join(work, fmt.Sprintf("n%d.log", i+1)), args...)
		if err != nil {
			return nil, err
		}
		s.procs, s.dirs = append(s.procs, p), append(s.dirs, dir)
		c, err := client.Dial(ctx, nd.grpc)
		if err != nil {
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	// Ready: every node knows the leader and a write through the last one commits.
	err = serverproc.WaitFor(ctx, readyTimeout, readyPoll, func(ctx context.Context) error {
		for i, c := range s.clients {
			st, err := c.Status(ctx)
			if err != nil {
				return err
			}
			if st.GetLeaderId() == "" {
				return fmt.Errorf("n%d knows no leader", i+1)
			}
		}
		return s.create(ctx, s.clients[n-1], s.prefix+"-ready")
	})
	if err != nil {
		return nil, fmt.Errorf("sessionstore: %w\n%s", err, s.procs[0].Tail())
	}
	if clients == clientsCluster && n > 1 {
		for i := range nodes {
			eps := make([]string, n)
			for j := range eps {
				eps[j] = nodes[(i+j)%n].grpc
			}
			c, err := client.Open(ctx, client.Config{Endpoints: eps})
			if err != nil {
				return nil, fmt.Errorf("sessionstore: client of every node: %w", err)
			}
			s.writers = append(s.writers, c)
		}
	}
	return s, nil
}

func (s *ours) name() string       { return "sessionstore" }
func (s *ours) dataDirs() []string { return s.dirs }

func (s *ours) pids() []int {
	var out []int
	for _, p := range s.procs {
		out = append(out, p.Pid())
	}
	return out
}

func (s *ours) create(ctx context.Context, c *client.Client, id string) error {
	ctx, cancel := context.WithTimeout(ctx, callTimeout)
	defer cancel()
	cwd := "/vs-etcd"
	_, err := c.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: id, CreatedAt: time.Now().UnixMilli(), Cwd: &cwd}})
	return err
}

// writer appends one event per call to writer i's own session. After a
// failed Append it continues on a fresh session: the outcome is unknown, so
// it never re-sends.
func (s *ours) writer(ctx context.Context, i int, payload func(int64) string) (func(context.Context, int64) error, error) {
	c := s.clients[i%len(s.clients)]
	if s.writers != nil {
		c = s.writers[i%len(s.writers)]
	}
	gen := 0
	id := ""
	fresh := func(ctx context.Context) error {
		gen++
		id = fmt.Sprintf("%s-w%d-%d", s.prefix, i, gen)
		return s.create(ctx, c, id)
	}
	if err := fresh(ctx); err != nil {
		return nil, err
	}
	broken := false
	return func(ctx context.Context, seq int64) error {
		if broken {
			if err := fresh(ctx); err != nil {
				return err
			}
			broken = false
		}
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := c.Append(ctx, &sessionpb.AppendRequest{SessionId: id, Events: []string{payload(seq)}})
		broken = err != nil
		return err
	}, nil
}

func (s *ours) applied(ctx context.Context) ([]uint64, error) {
	out := make([]uint64, len(s.clients))
	for i, c := range s.clients {
		st, err := c.Status(ctx)
		if err != nil {
			return nil, err
		}
		out[i] = st.GetAppliedIndex()
	}
	return out, nil
}

func (s *ours) stop() {
	for _, c := range append(s.clients, s.writers...) {
		c.Close()
	}
	for _, p := range s.procs {
		p.Stop(stopTimeout)
	}
}

// etcd is an etcd cluster of n members with default durability.
type etcd struct {
	procs     []*serverproc.Proc
	dirs      []string
	endpoints []string
	clients   []*clientv3.Client
}

func startEtcd(ctx context.Context, bin, work string, n int) (_ *etcd, err error) {
	s := &etcd{}
	defer func() {
		if err != nil {
			s.stop()
		}
	}()
	peers := make([]string, n)
	var initial []string
	for i := range peers {
		a, err := freeAddrs(2)
		if err != nil {
			return nil, err
		}
		s.endpoints = append(s.endpoints, "http://"+a[0])
		peers[i] = "http://" + a[1]
		initial = append(initial, fmt.Sprintf("m%d=%s", i+1, peers[i]))
	}
	for i := range peers {
		dir := filepath.Join(work, fmt.Sprintf("m%d", i+1))
		p, err := serverproc.Start(bin, filepath.Join(work, fmt.Sprintf("m%d.log", i+1)),
			"--name", fmt.Sprintf("m%d", i+1), "--data-dir", dir,
			"--listen-client-urls", s.endpoints[i], "--advertise-client-urls", s.endpoints[i],
			"--listen-peer-urls", peers[i], "--initial-advertise-peer-urls", peers[i],
			"--initial-cluster", strings.Join(initial, ","), "--initial-cluster-state", "new",
			"--initial-cluster-token", filepath.Base(work), "--log-level", "warn")
		if err != nil {
			return nil, err
		}
		s.procs, s.dirs = append(s.procs, p), append(s.dirs, dir)
		c, err := clientv3.New(clientv3.Config{Endpoints: []string{s.endpoints[i]}, DialTimeout: 5 * time.Second})
		if err != nil {
			return nil, err
		}
		s.clients = append(s.clients, c)
	}
	err = serverproc.WaitFor(ctx, readyTimeout, readyPoll, func(ctx context.Context) error {
		for i, c := range s.clients {
			st, err := c.Status(ctx, s.endpoints[i])
			if err != nil {
				return err
			}
			if st.Leader == 0 {
				return fmt.Errorf("m%d knows no leader", i+1)
			}
		}
		_, err := s.clients[n-1].Put(ctx, "vs-etcd-ready", "1")
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("etcd: %w\n%s", err, s.procs[0].Tail())
	}
	return s, nil
}

func (s *etcd) name() string       { return "etcd" }
func (s *etcd) dataDirs() []string { return s.dirs }

func (s *etcd) pids() []int {
	var out []int
	for _, p := range s.procs {
		out = append(out, p.Pid())
	}
	return out
}

// writer puts a new key per call: writer i's key space, one key per seq,
// through member i mod n whatever --clients says: clientv3 has no leader
// routing, and its balancer given every member would spread the writes the
// same way (two in three to followers, which forward the proposals).
func (s *etcd) writer(_ context.Context, i int, payload func(int64) string) (func(context.Context, int64) error, error) {
	c := s.clients[i%len(s.clients)]
	return func(ctx context.Context, seq int64) error {
		ctx, cancel := context.WithTimeout(ctx, callTimeout)
		defer cancel()
		_, err := c.Put(ctx, fmt.Sprintf("vs-etcd/w%05d/%012d", i, seq), payload(seq))
		return err
	}, nil
}

func (s *etcd) applied(ctx context.Context) ([]uint64, error) {
	out := make([]uint64, len(s.clients))
	for i, c := range s.clients {
		st, err := c.Status(ctx, s.endpoints[i])
		if err != nil {
			return nil, err
		}
		out[i] = st.RaftAppliedIndex
	}
	return out, nil
}

func (s *etcd) stop() {
	for _, c := range s.clients {
		_ = c.Close()
	}
	for _, p := range s.procs {
		p.Stop(stopTimeout)
	}
}
