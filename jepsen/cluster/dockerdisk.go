package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// What the disk faults (jepsen/diskfaults.go) need beyond Backend: a node's
// log since a moment, whether it stopped by itself, the operator's offline
// commands on a stopped node's data directory, and data directories of
// another cluster.

// Logs returns what n wrote (stdout and stderr) since the given time.
func (d *Docker) Logs(ctx context.Context, n Node, since time.Time) (string, error) {
	return run(ctx, nil, nil, "docker", "logs", "--since", since.UTC().Format(time.RFC3339Nano), d.container(n))
}

// Exited reports whether n's container stopped by itself (the node exited)
// and with which code.
func (d *Docker) Exited(ctx context.Context, n Node) (bool, int, error) {
	out, err := run(ctx, nil, nil, "docker", "inspect", "-f", "{{.State.Status}} {{.State.ExitCode}}", d.container(n))
	if err != nil {
		return false, 0, err
	}
	f := strings.Fields(out)
	if len(f) != 2 {
		return false, 0, fmt.Errorf("docker inspect %s: %q", d.container(n), out)
	}
	code, _ := strconv.Atoi(f[1])
	return f[0] == "exited", code, nil
}

// Offline runs a node command (the image's entrypoint with args) on n's data
// directory while n is stopped, as an operator runs `sessionstore repair` against a
// compose deployment's volume: a one-off container of the same image, no
// network, the directory at /data.
func (d *Docker) Offline(ctx context.Context, n Node, args ...string) (string, error) {
	argv := append([]string{"run", "--rm", "--network", "none", "--name", d.container(n) + "-offline",
		"-v", d.DataDir(n) + ":/data", d.image()}, args...)
	return run(ctx, nil, nil, "docker", argv...)
}

// ForeignDeployment runs a second deployment of the same compose files —
// project <Project>-foreign, its own network, credentials and data
// directories under root (root/nodeN) — until its three nodes have formed a
// cluster of their own and each recorded that cluster's id in its
// identity.json, then stops it (SIGTERM) and removes its containers. What is
// left under root are data directories of another cluster with the same node
// ids and Raft addresses as this one's: what a volume from another
// deployment (staging, a restored old host) attached to this cluster's node
// looks like. It returns the foreign cluster id.
func (d *Docker) ForeignDeployment(ctx context.Context, root string) (string, error) {
	project := d.cfg.Project + "-foreign"
	ports, err := hostPorts()
	if err != nil {
		return "", err
	}
	image := []string{"JEPSEN_IMAGE=" + d.image()}
	env := append(d.deployment(project, root, d.cfg.ForeignNet, ports), image...)
	_, _ = d.composeAs(ctx, project, env, "down", "-v", "--remove-orphans", "-t", "1")
	if err := makeDataDirs(root); err != nil {
		return "", err
	}
	defer func() {
		dctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_, _ = d.composeAs(dctx, project, env, "down", "-v", "--remove-orphans", "-t", "5")
	}()
	if ports, err = d.composeUp(ctx, project, root, d.cfg.ForeignNet, ports, image); err != nil {
		return "", err
	}
	env = append(d.deployment(project, root, d.cfg.ForeignNet, ports), image...)
	deadline := time.Now().Add(90 * time.Second)
	for {
		ids := map[string]bool{}
		for _, n := range dockerNodes {
			if id := ClusterIDOf(filepath.Join(root, string(n))); id != "" {
				ids[id] = true
			}
		}
		if len(ids) > 1 {
			return "", fmt.Errorf("foreign deployment: its nodes recorded different cluster ids %v", ids)
		}
		complete := len(ids) == 1
		for _, n := range dockerNodes {
			complete = complete && ClusterIDOf(filepath.Join(root, string(n))) != ""
		}
		if complete {
			for id := range ids {
				// Stop it the way a deployment is stopped (down: SIGTERM,
				// then the containers are removed), so the directories
				// are what a stopped node leaves.
				if _, err := d.composeAs(ctx, project, env, "stop", "-t", "5"); err != nil {
					return "", err
				}
				return id, nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("foreign deployment: no common cluster id in the identity files after 90 s")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// ClusterIDOf is the cluster id a data directory's identity.json records
// ("" when it has none yet).
func ClusterIDOf(dir string) string {
	b, err := os.ReadFile(filepath.Join(dir, "identity.json"))
	if err != nil {
		return ""
	}
	var id struct {
		ClusterID string `json:"cluster_id"`
	}
	if json.Unmarshal(b, &id) != nil {
		return ""
	}
	return id.ClusterID
}

// ReplaceDataDir moves stopped n's data directory to aside and puts the
// directory with in its place ("" = a new empty one the node can write). The
// container's bind mount names the path, so n's next start uses the new
// directory.
func (d *Docker) ReplaceDataDir(n Node, aside, with string) error {
	if err := os.Rename(d.DataDir(n), aside); err != nil {
		return err
	}
	if with != "" {
		return os.Rename(with, d.DataDir(n))
	}
	if err := os.Mkdir(d.DataDir(n), 0o755); err != nil {
		return err
	}
	return os.Chown(d.DataDir(n), nodeUID, nodeUID)
}
