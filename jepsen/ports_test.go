package jepsen

import (
	"context"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore/jepsen/cluster"
)

// A host port picked free can be taken before Docker binds it (other suites
// start servers at the same time). Up must then come up on other ports
// rather than fail the run, with every node running.
func TestDockerUp_RetriesAPortTakenMeanwhile(t *testing.T) {
	if testing.Short() {
		t.Skip("starts the compose cluster in Docker")
	}
	requireDocker(t)
	root := repoRoot(t)
	image := os.Getenv("JEPSEN_IMAGE")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if b, err := cluster.BuildImage(ctx, root, image, ""); err != nil {
		t.Fatalf("building the image: %v\n%s", err, b)
	}
	const project = "jepsen-ports"
	b, err := cluster.NewDocker(cluster.DockerConfig{Repo: root, Project: project, DataDir: filepath.Join(t.TempDir(), "data"),
		Net: "10.211.12", Image: image})
	if err != nil {
		t.Fatal(err)
	}
	n := b.Nodes()[1]
	taken := b.ClientAddr(n)
	l, err := net.Listen("tcp", taken)
	if err != nil {
		t.Fatalf("taking %s: %v", taken, err)
	}
	defer l.Close()
	defer func() {
		dctx, dcancel := context.WithTimeout(context.Background(), time.Minute)
		defer dcancel()
		_ = b.Down(dctx)
	}()
	if err := b.Up(ctx); err != nil {
		t.Fatalf("Up with %s taken: %v", taken, err)
	}
	if got := b.ClientAddr(n); got == taken {
		t.Fatalf("%s still has the taken port %s", n, got)
	}
	out, err := exec.CommandContext(ctx, "docker", "ps", "-a", "--filter", "label=com.docker.compose.project="+project,
		"--format", "{{.Names}} {{.State}}").CombinedOutput()
	if err != nil {
		t.Fatalf("docker ps: %v: %s", err, out)
	}
	state := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			state[f[0]] = f[1]
		}
	}
	for _, m := range b.Nodes() {
		if c := project + "-" + string(m); state[c] != "running" {
			t.Fatalf("%s is not running:\n%s", c, out)
		}
	}
}
