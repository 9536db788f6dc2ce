package main

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	pb "github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/storage"
)

// bkSession is one session of the test data: its id and the events written.
type bkSession struct {
	id     string
	events []string
}

// bkLoad writes a few dozen sessions of varied content through client c:
// plain ones, unicode and odd ids, one with an open turn, one owned by a
// lease, one larger than 1 MiB.
func bkLoad(t *testing.T, ctx context.Context, c interface {
	Create(context.Context, *pb.CreateRequest) (*pb.CreateResponse, error)
	Append(context.Context, *pb.AppendRequest) (*pb.AppendResponse, error)
	Prepare(context.Context, *pb.PrepareRequest) (*pb.SessionView, *pb.Lease, error)
}) []bkSession {
	t.Helper()
	var out []bkSession
	create := func(id, cwd string) {
		t.Helper()
		h := &pb.SessionHeader{Id: id, CreatedAt: 1755600000000}
		if cwd != "" {
			h.Cwd = &cwd
		}
		if _, err := c.Create(ctx, &pb.CreateRequest{Header: h}); err != nil {
			t.Fatalf("create %q: %v", id, err)
		}
	}
	appendAll := func(id string, evs []string, batch int) {
		t.Helper()
		for i := 0; i < len(evs); i += batch {
			if _, err := c.Append(ctx, &pb.AppendRequest{SessionId: id, Events: evs[i:min(i+batch, len(evs))]}); err != nil {
				t.Fatalf("append %q: %v", id, err)
			}
		}
	}
	ids := []string{"séance-ü", "日本語/セッション", "..", "a/b", "emoji-🚀", "tab\tid", "line\u2028sep"}
	for i := 0; i < 30; i++ {
		ids = append(ids, fmt.Sprintf("plain-%02d", i))
	}
	for i, id := range ids {
		cwd := fmt.Sprintf("/w/proj-%d", i%4)
		if i%5 == 0 {
			cwd = ""
		}
		create(id, cwd)
		var evs []string
		for k := 0; k < 1+i%9; k++ {
			evs = append(evs, clEvent(int64(k), fmt.Sprintf("%s #%d <&> \u2028 ü", id, k)))
		}
		appendAll(id, evs, 3)
		out = append(out, bkSession{id, evs})
	}
	// An open turn (never balanced: restore must keep it open).
	create("open-turn", "/w/open")
	open := []string{
		`{"type":"turn/start","seq":0,"time":1755600000100,"data":{"turn":1}}`,
		`{"type":"step/start","seq":1,"time":1755600000101,"data":{"turn":1,"step":1}}`,
	}
	appendAll("open-turn", open, 2)
	out = append(out, bkSession{"open-turn", open})
	// A session owned by a lease.
	create("leased", "/w/lease")
	leased := []string{clEvent(0, "leased")}
	appendAll("leased", leased, 1)
	out = append(out, bkSession{"leased", leased})
	if _, _, err := c.Prepare(ctx, &pb.PrepareRequest{SessionId: "leased", Owner: "host-a", TtlMs: 600_000, RequestId: "p1"}); err != nil {
		t.Fatalf("prepare: %v", err)
	}
	// > 1 MiB: six events of 250 KiB.
	create("big", "/w/big")
	var big []string
	rnd := rand.New(rand.NewPCG(1, 2))
	for k := 0; k < 6; k++ {
		raw := make([]byte, 125<<10)
		for j := range raw {
			raw[j] = byte(rnd.Uint32())
		}
		pad := hex.EncodeToString(raw) // 250 KiB of text that compresses to about half
		big = append(big, fmt.Sprintf(`{"type":"x-test/mark","seq":%d,"time":%d,"data":{"m":%q},"ignorable":true}`, k, 2000+k, pad))
	}
	appendAll("big", big, 2)
	out = append(out, bkSession{"big", big})
	return out
}

// bkArtifacts reads a node's artifact tree: relative path → text (where a
// node cut its zstd frames is its own; the text is what must agree).
func bkArtifacts(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	root := filepath.Join(dir, "artifacts")
	out := map[string][]byte{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, p)
		out[rel] = wholeArtifactText(t, rel, b)
		return nil
	})
	if err != nil {
		t.Fatalf("walk artifacts of %s: %v", dir, err)
	}
	return out
}

// bkRawTexts reads ReadRaw through c for every session id, and each node's
// local (stale) text through its backend.
func bkRawText(t *testing.T, ctx context.Context, nd *clNode, id string) (api, local []byte, revision string) {
	t.Helper()
	r, err := nd.Client.ReadRaw(ctx, &pb.ReadRawRequest{SessionId: id})
	if err != nil {
		t.Fatalf("ReadRaw %q via %s: %v", id, nd.id, err)
	}
	_, _, loc, err := nd.srv.node.Sessions().RawText(ctx, id, sessionstore.Stale)
	if err != nil {
		t.Fatalf("RawText %q on %s: %v", id, nd.id, err)
	}
	return r.Content, loc, r.Revision
}

// bkList is every session id List gives through nd, in pages of 7.
func bkList(t *testing.T, ctx context.Context, nd *clNode) []string {
	t.Helper()
	var ids []string
	for _, h := range owPages(t, "List via "+nd.id, "headers", 7, func(tok string) ([]*pb.SessionHeader, string, error) {
		r, err := nd.Client.List(ctx, &pb.ListRequest{PageSize: 7, PageToken: tok})
		return r.GetHeaders(), r.GetNextPageToken(), err
	}) {
		ids = append(ids, h.Id)
	}
	return ids
}

// bkWaitCaughtUp waits until every node has applied the leader's commit
// index and written its artifacts.
func bkWaitCaughtUp(t *testing.T, nodes []*clNode) {
	t.Helper()
	clustertest.Eventually(t, 60*time.Second, func() error {
		l := leaderOf(nodes)
		if l == nil {
			return errors.New("nodes did not catch up: no leader")
		}
		target := l.srv.node.Raft().CommitIndex()
		for _, nd := range nodes {
			if a := nd.srv.node.Raft().AppliedIndex(); a < target {
				return fmt.Errorf("nodes did not catch up: %s applied %d < commit %d", nd.id, a, target)
			}
		}
		return nil
	})
	for _, nd := range nodes {
		nd.WaitArtifacts()
	}
}

// A loaded 3-node cluster is backed up through a follower, restored into a
// fresh data directory and seeds a new 3-node cluster (the restored node
// bootstraps alone, two empty nodes join it and receive everything by
// snapshot): every session's raw text is identical on every new node and to
// the old cluster's, List lists the same sessions, revisions carry the new
// cluster id, leases are gone and appends work.
func TestBackup_RestoreSeedsANewCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts six nodes")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	old := startCluster(t, 3)
	lead, follower := followerOf(t, old)
	sessions := bkLoad(t, ctx, follower.Client)
	oldCID := lead.srv.node.ClusterID()
	bkWaitCaughtUp(t, old)
	oldText := map[string][]byte{}
	for _, s := range sessions {
		api, _, _ := bkRawText(t, ctx, lead, s.id)
		oldText[s.id] = api
	}
	oldList := bkList(t, ctx, lead)
	oldArtifacts := bkArtifacts(t, lead.dir)

	// Back up through a follower (forwarded to the leader) while writes go on.
	file := filepath.Join(t.TempDir(), "cluster.ssbak")
	stop := make(chan struct{})
	writerDone := make(chan error, 1)
	go func() {
		cwd := "/w/during"
		if _, err := lead.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "during", CreatedAt: 1, Cwd: &cwd}}); err != nil {
			writerDone <- err
			return
		}
		for k := int64(0); ; k++ {
			select {
			case <-stop:
				writerDone <- nil
				return
			default:
			}
			if _, err := lead.Client.Append(ctx, &pb.AppendRequest{SessionId: "during", Events: []string{clEvent(k, "during")}}); err != nil {
				writerDone <- err
				return
			}
		}
	}()
	var stderr bytes.Buffer
	start := time.Now()
	res, err := runBackup(ctx, backupConfig{addr: follower.srv.grpcAddr, out: file}, &stderr)
	elapsed := time.Since(start)
	close(stop)
	if werr := <-writerDone; werr != nil {
		t.Fatalf("writer during backup: %v", werr)
	}
	if err != nil {
		t.Fatalf("backup via follower %s: %v\n%s", follower.id, err, stderr.String())
	}
	// Served by the leader: the one before the backup or, when an election
	// moved it meanwhile (a loaded machine), the one after.
	leaders := []string{lead.id}
	if l := leaderOf(old); l != nil && l != lead {
		leaders = append(leaders, l.id)
	}
	if res.Meta.ClusterID != oldCID || !slices.Contains(leaders, res.Meta.NodeID) || res.Meta.AppliedIndex == 0 {
		t.Fatalf("backup meta %+v: want cluster %s served by a leader (%v)", res.Meta, oldCID, leaders)
	}
	t.Logf("backup: %d sessions, database %d bytes, file %d bytes, %s (stderr: %q)",
		len(sessions), res.Trailer.DBBytes, res.FileBytes, elapsed.Round(time.Millisecond), strings.TrimSpace(stderr.String()))
	for _, nd := range old {
		nd.Close()
	}

	// Restore and seed a new cluster.
	dir := filepath.Join(t.TempDir(), "restored")
	rr, err := cluster.RestoreBackup(file, dir)
	if err != nil {
		t.Fatalf("restore: %v", err)
	}
	if rr.Leases != 1 {
		t.Errorf("restore dropped %d leases, want 1", rr.Leases)
	}
	g1 := clFreeAddr(t)
	n1 := &clNode{id: "r1", testNode: startTestNodeWith(t, dir, func(c *serveConfig) {
		c.Cluster.NodeID = "r1"
		c.Cluster.RaftAddr, c.Cluster.GossipAddr = clFreeAddr(t), g1
		c.Cluster.BootstrapExpect = 1
	})}
	n1.waitReady(true)
	newCID := n1.srv.node.ClusterID()
	if newCID == "" || newCID == oldCID {
		t.Fatalf("new cluster id %q (old %q)", newCID, oldCID)
	}
	nodes := []*clNode{n1}
	for i := 2; i <= 3; i++ {
		id := fmt.Sprintf("r%d", i)
		nodes = append(nodes, &clNode{id: id, testNode: startTestNodeWith(t, "", func(c *serveConfig) {
			c.Cluster.NodeID = id
			c.Cluster.RaftAddr, c.Cluster.GossipAddr = clFreeAddr(t), clFreeAddr(t)
			c.Join = g1
		})})
	}
	waitVoters(t, nodes, 3)
	for _, nd := range nodes {
		nd.waitReady(false)
	}
	bkWaitCaughtUp(t, nodes)
	for _, nd := range nodes[1:] {
		if nd.srv.node.SnapshotRestores() == 0 {
			t.Errorf("%s joined without restoring a snapshot", nd.id)
		}
	}

	// Identical text for every session on every node (API and local state),
	// equal to the old cluster's.
	for _, s := range sessions {
		for _, nd := range nodes {
			api, local, rev := bkRawText(t, ctx, nd, s.id)
			if !bytes.Equal(api, oldText[s.id]) || !bytes.Equal(local, oldText[s.id]) {
				t.Errorf("session %q on %s: text differs from the old cluster's (api %d, local %d, old %d bytes)",
					s.id, nd.id, len(api), len(local), len(oldText[s.id]))
			}
			if !strings.HasPrefix(rev, newCID+":") {
				t.Errorf("session %q on %s: revision %q lacks the new cluster id %s", s.id, nd.id, rev, newCID)
			}
		}
	}
	// Artifacts: the same text on every new node as on the old leader
	// (rebuilt from bbolt on r1, by snapshot restore on r2 and r3).
	want := oldArtifacts
	for _, nd := range nodes {
		got := bkArtifacts(t, nd.dir)
		for p, b := range want {
			if !bytes.Equal(got[p], b) {
				t.Errorf("artifact %s on %s: %d bytes of text, old cluster %d", p, nd.id, len(got[p]), len(b))
			}
		}
		if len(got) < len(want) {
			t.Errorf("%s has %d artifacts, want ≥ %d", nd.id, len(got), len(want))
		}
	}
	for _, nd := range nodes {
		got := bkList(t, ctx, nd)
		var gotOld []string
		for _, id := range got {
			if id != "during" {
				gotOld = append(gotOld, id)
			}
		}
		if strings.Join(gotOld, "\x00") != strings.Join(oldList, "\x00") {
			t.Errorf("list via %s: %q, want %q", nd.id, gotOld, oldList)
		}
	}

	// The open turn is still open, the lease is gone (another owner may
	// prepare at once, which repairs the turn), appends work everywhere.
	v, _, err := nodes[2].Client.Prepare(ctx, &pb.PrepareRequest{SessionId: "leased", Owner: "host-b", TtlMs: 60_000, RequestId: "p2"})
	if err != nil {
		t.Fatalf("prepare of the formerly leased session by another owner: %v", err)
	}
	if !strings.HasPrefix(v.Revision, newCID+":") {
		t.Errorf("prepare revision %q", v.Revision)
	}
	for i, nd := range nodes {
		s := sessions[10+i]
		r, err := nd.Client.Append(ctx, &pb.AppendRequest{SessionId: s.id, Events: []string{clEvent(int64(len(s.events)), "after restore")}})
		if err != nil {
			t.Fatalf("append via %s: %v", nd.id, err)
		}
		if !strings.HasPrefix(r.Revision, newCID+":") {
			t.Errorf("append revision %q lacks the new cluster id", r.Revision)
		}
	}
	ov, err := nodes[1].Client.Inspect(ctx, &pb.InspectRequest{SessionId: "open-turn"})
	if err != nil || ov.NextSeq != 2 {
		t.Fatalf("inspect open-turn: the stored turn must still be open (next seq 2): %v, %v", ov, err)
	}
	bkWaitCaughtUp(t, nodes)
	a1 := bkArtifacts(t, nodes[0].dir)
	for _, nd := range nodes[1:] {
		a := bkArtifacts(t, nd.dir)
		for p, b := range a1 {
			if !bytes.Equal(a[p], b) {
				t.Errorf("after appends: artifact %s differs on %s", p, nd.id)
			}
		}
	}
}

// bkBackupFile writes a backup of a small lone node and returns its path.
func bkBackupFile(t *testing.T) string {
	t.Helper()
	n := startTestNode(t, "")
	ctx := n.ctx()
	cwd := "/w/x"
	if _, err := n.Client.Create(ctx, &pb.CreateRequest{Header: &pb.SessionHeader{Id: "s", CreatedAt: 1, Cwd: &cwd}}); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Client.Append(ctx, &pb.AppendRequest{SessionId: "s", Events: []string{clEvent(0, "a")}}); err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "b.ssbak")
	if _, err := runBackup(ctx, backupConfig{addr: n.srv.grpcAddr, out: file}, io.Discard); err != nil {
		t.Fatalf("backup: %v", err)
	}
	return file
}

func TestRestore_RefusesNonEmptyDirAndDamagedFiles(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a node")
	}
	file := bkBackupFile(t)
	good, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}

	// A good file restores into an absent directory, once.
	dir := filepath.Join(t.TempDir(), "d")
	if _, err := cluster.RestoreBackup(file, dir); err != nil {
		t.Fatalf("restore: %v", err)
	}
	if _, err := cluster.RestoreBackup(file, dir); !errors.Is(err, cluster.ErrDataDirNotEmpty) {
		t.Fatalf("second restore into the same dir: %v, want ErrDataDirNotEmpty", err)
	}
	other := t.TempDir()
	os.WriteFile(filepath.Join(other, "x"), nil, 0o600)
	if _, err := cluster.RestoreBackup(file, other); !errors.Is(err, cluster.ErrDataDirNotEmpty) {
		t.Fatalf("restore into a dir holding a file: %v", err)
	}
	// Also through the command line (exit status 1, nothing written).
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"restore", file, "--data-dir", other}, &out, &errb); code != 1 || !strings.Contains(errb.String(), "not empty") {
		t.Fatalf("sessionstore restore into a non-empty dir: exit %d, stderr %q", code, errb.String())
	}

	head := bytes.IndexByte(good, '\n') + 1
	damaged := map[string][]byte{
		"truncated in the stream":   good[:head+(len(good)-head)/2],
		"truncated in the trailer":  good[:len(good)-5],
		"no trailer newline":        good[:len(good)-1],
		"header only":               good[:head],
		"empty":                     nil,
		"a byte flipped in stream":  flip(good, head+len("sessionstore-snapshot\n")+20),
		"a byte flipped at the end": flip(good, len(good)-len(good)/8-40),
		"checksum changed":          bkChangeSum(good),
	}
	for name, b := range damaged {
		p := filepath.Join(t.TempDir(), "bad.ssbak")
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
		d := filepath.Join(t.TempDir(), "d")
		_, err := cluster.RestoreBackup(p, d)
		if err == nil {
			t.Errorf("%s: restore succeeded", name)
			continue
		}
		if name != "empty" && !errors.Is(err, storage.ErrBackupInvalid) {
			t.Errorf("%s: %v, want ErrBackupInvalid", name, err)
		}
		if _, serr := os.Stat(filepath.Join(d, "state.db")); serr == nil {
			t.Errorf("%s: state.db written despite %v", name, err)
		}
		ents, _ := os.ReadDir(d)
		for _, e := range ents {
			if strings.Contains(e.Name(), ".tmp") {
				t.Errorf("%s: left %s behind", name, e.Name())
			}
		}
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

// bkChangeSum changes one hex digit of the trailer's checksum.
func bkChangeSum(b []byte) []byte {
	c := bytes.Clone(b)
	i := bytes.LastIndex(c, []byte(`"db_sha256":"`)) + len(`"db_sha256":"`)
	if c[i] == '0' {
		c[i] = '1'
	} else {
		c[i] = '0'
	}
	return c
}
