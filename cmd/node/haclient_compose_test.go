package main

// The scenario of haclient_test.go against the repository's docker-compose.yml
// from the host: the nodes advertise node1:7400 … to clients, which the host
// cannot resolve; the clients list the published 127.0.0.1 ports, which win.
// The compose project and the image have names of their own
// (sessionstore-haclient-<pid>), so the test never meets another compose run.

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
	"github.com/sessionstore/sessionstore/internal/dockertest"
)

// haOverride gives every service the test's image and every node the token
// file (mounted from dir).
const haOverride = `services:
  credentials:
    image: %[1]s
  node1: &node
    image: %[1]s
    environment:
      SESSIONSTORE_AUTH_TOKEN_FILE: /tokens/tokens
    volumes:
      - %[2]s:/tokens:ro
  node2: *node
  node3: *node
`

func TestCompose_ClientSurvivesNodeLoss(t *testing.T) {
	if testing.Short() {
		t.Skip("builds an image and runs three containers")
	}
	composeCmd := dockertest.Compose(t)
	start := time.Now()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	name := fmt.Sprintf("sessionstore-haclient-%d", os.Getpid())
	image := "sessionstore:haclient-" + fmt.Sprint(os.Getpid())
	{
		ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
		cmd := exec.CommandContext(ctx, filepath.Join(root, "scripts", "docker-build.sh"))
		cmd.Env = append(os.Environ(), "IMAGE="+image)
		out, err := cmd.CombinedOutput()
		cancel()
		if err != nil {
			t.Fatalf("scripts/docker-build.sh: %v\n%s", err, out)
		}
		t.Cleanup(func() { _ = exec.Command("docker", "rmi", "-f", image).Run() })
	}
	t.Logf("image %s built in %v", image, time.Since(start).Round(time.Millisecond))

	// The token file, readable by the nodes' uid.
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "tokens"), []byte(haTokens), 0o644); err != nil {
		t.Fatal(err)
	}
	override := filepath.Join(dir, "override.yml")
	if err := os.WriteFile(override, []byte(fmt.Sprintf(haOverride, image, dir)), 0o644); err != nil {
		t.Fatal(err)
	}

	// Free host ports, so that the cluster never meets one on the defaults.
	var env []string
	var ports []int
	pickPorts := func() {
		env, ports = os.Environ(), dockertest.FreePorts(t, 6)
		for i := 1; i <= 3; i++ {
			env = append(env, fmt.Sprintf("SESSIONSTORE_NODE%d_GRPC_PORT=%d", i, ports[2*i-2]),
				fmt.Sprintf("SESSIONSTORE_NODE%d_HTTP_PORT=%d", i, ports[2*i-1]))
		}
	}
	pickPorts()
	dcErr := func(timeout time.Duration, args ...string) (string, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		all := append(append([]string{}, composeCmd[1:]...), "-p", name, "-f", filepath.Join(root, "docker-compose.yml"), "-f", override)
		cmd := exec.CommandContext(ctx, composeCmd[0], append(all, args...)...)
		cmd.Env = env
		out, err := cmd.CombinedOutput()
		if err != nil {
			return string(out), fmt.Errorf("%s %s: %v\n%s", strings.Join(composeCmd, " "), strings.Join(args, " "), err, out)
		}
		return string(out), nil
	}
	dc := func(timeout time.Duration, args ...string) string {
		t.Helper()
		out, err := dcErr(timeout, args...)
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	t.Logf("project %s; if this test is killed, clean up with: %s -p %s -f docker-compose.yml down -v", name, strings.Join(composeCmd, " "), name)
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("logs:\n%s", dc(time.Minute, "logs", "--no-color", "--tail=200"))
		}
		dc(2*time.Minute, "down", "-v", "--remove-orphans")
	})
	// The ports were free when picked; another program starting at the same
	// time can take one before Docker binds it: then start again on new ones.
	for attempt := 1; ; attempt++ {
		out, err := dcErr(3*time.Minute, "up", "-d")
		if err == nil {
			break
		}
		if attempt == 4 || !dockertest.PortTaken(out) {
			t.Fatal(err)
		}
		t.Logf("up lost a host port to another program, starting on new ones: %v", err)
		dc(2*time.Minute, "down", "-v", "--remove-orphans")
		pickPorts()
	}
	hc := haCluster{admin: map[string]*client.Client{}}
	var nodes []*pcNode
	for i := 1; i <= 3; i++ {
		id, addr := fmt.Sprintf("node%d", i), fmt.Sprintf("127.0.0.1:%d", ports[2*i-2])
		hc.addrs, hc.ids = append(hc.addrs, addr), append(hc.ids, id)
		hc.admin[id] = crDial(t, addr, grpc.WithPerRPCCredentials(client.BearerToken(haAdminToken)))
		nodes = append(nodes, &pcNode{crNode: &crNode{ID: id}, C: hc.admin[id]})
	}
	all := []int{0, 1, 2}
	haWaitUp := func(what string) {
		t.Helper()
		pcWaitLeader(t, nodes, all, what)
		for _, nd := range nodes {
			clustertest.Eventually(t, 60*time.Second, func() error {
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				if _, err := nd.C.List(ctx, &sessionpb.ListRequest{PageSize: 1}); err != nil {
					return fmt.Errorf("%s: a linearizable List through %s fails: %v", what, nd.ID, err)
				}
				return nil
			})
		}
	}
	haWaitUp("formation")
	t.Logf("cluster up in %v", time.Since(start).Round(time.Millisecond))
	hc.kill = func(id string) {
		ctr := strings.TrimSpace(dc(30*time.Second, "ps", "-q", id))
		if ctr == "" || strings.Contains(ctr, "\n") {
			t.Fatalf("container of %s: %q", id, ctr)
		}
		if out, err := exec.Command("docker", "kill", ctr).CombinedOutput(); err != nil {
			t.Fatalf("docker kill %s: %v\n%s", id, err, out)
		}
	}
	hc.restart = func(id string) {
		dc(time.Minute, "start", id)
		haWaitUp("after restarting " + id)
	}
	hc.leaderHint = func(id string) string { return id + "=" + id + ":7400" }
	haRun(t, hc)
}
