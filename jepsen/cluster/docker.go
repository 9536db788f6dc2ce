package cluster

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"
)

// DockerConfig configures the Docker backend.
type DockerConfig struct {
	// Repo is the repository root: its docker-compose.yml is the cluster,
	// jepsen/compose.jepsen.yml the test-only override.
	Repo string
	// Project is the compose project name (containers <Project>-nodeN).
	Project string
	// DataDir holds the nodes' bind-mounted data directories (DataDir/nodeN).
	DataDir string
	// Net is the first three octets of the project network (default 10.211.7).
	Net string
	// Compose is the compose command (default: docker-compose, else `docker compose`).
	Compose []string
	// Image is the node image (default sessionstore:dev).
	Image string
	// ForeignNet is the first three octets of the network of a second,
	// short-lived deployment that makes foreign data directories (default:
	// Net's third octet plus 100).
	ForeignNet string
}

// Docker runs the repository's docker-compose.yml (three nodes) with the
// jepsen override, and injects faults from the host: nft rules in a node's
// network namespace (entered with nsenter through the container's PID),
// docker pause/unpause, docker kill -s KILL and docker start.
type Docker struct {
	cfg   DockerConfig
	ports map[Node][2]int // gRPC, HTTP on the host's loopback

	mu      sync.Mutex
	ruled   map[Node]bool // nodes whose namespace holds the jepsen table
	imageID string        // the image the nodes run, by id (Up)
}

// nodeUID is the user and group the image runs the node as.
const nodeUID = 65532

// nodes of the compose file, in order.
var dockerNodes = []Node{"node1", "node2", "node3"}

// NewDocker checks the tools and picks free host ports.
func NewDocker(cfg DockerConfig) (*Docker, error) {
	if cfg.Net == "" {
		cfg.Net = "10.211.7"
	}
	if cfg.Project == "" {
		cfg.Project = "jepsen"
	}
	if cfg.Image == "" {
		cfg.Image = "sessionstore:dev"
	}
	if cfg.ForeignNet == "" {
		o := strings.Split(cfg.Net, ".")
		third, err := strconv.Atoi(o[len(o)-1])
		if len(o) != 3 || err != nil || third+100 > 254 {
			return nil, fmt.Errorf("net %q: want three octets with a third below 155, or set ForeignNet", cfg.Net)
		}
		cfg.ForeignNet = fmt.Sprintf("%s.%s.%d", o[0], o[1], third+100)
	}
	for _, tool := range []string{"docker", "nsenter", "nft"} {
		if _, err := exec.LookPath(tool); err != nil {
			return nil, fmt.Errorf("docker backend needs %s: %w", tool, err)
		}
	}
	if len(cfg.Compose) == 0 {
		if p, err := exec.LookPath("docker-compose"); err == nil {
			cfg.Compose = []string{p}
		} else {
			cfg.Compose = []string{"docker", "compose"}
		}
	}
	abs, err := filepath.Abs(cfg.DataDir)
	if err != nil {
		return nil, err
	}
	cfg.DataDir = abs
	ports, err := hostPorts()
	if err != nil {
		return nil, err
	}
	return &Docker{cfg: cfg, ports: ports, ruled: map[Node]bool{}}, nil
}

// hostPorts picks a free gRPC and HTTP port on the host's loopback for each
// node. They are free when picked, not reserved: see composeUp.
func hostPorts() (map[Node][2]int, error) {
	ports := map[Node][2]int{}
	for _, n := range dockerNodes {
		g, err := freePort()
		if err != nil {
			return nil, err
		}
		h, err := freePort()
		if err != nil {
			return nil, err
		}
		ports[n] = [2]int{g, h}
	}
	return ports, nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func (d *Docker) Name() string  { return "docker" }
func (d *Docker) Nodes() []Node { return append([]Node(nil), dockerNodes...) }

func (d *Docker) ClientAddr(n Node) string { return fmt.Sprintf("127.0.0.1:%d", d.ports[n][0]) }
func (d *Docker) HTTPAddr(n Node) string   { return fmt.Sprintf("127.0.0.1:%d", d.ports[n][1]) }
func (d *Docker) DataDir(n Node) string    { return filepath.Join(d.cfg.DataDir, string(n)) }

// IP is n's address on the project network.
func (d *Docker) IP(n Node) string {
	i := 0
	for k, m := range dockerNodes {
		if m == n {
			i = k
		}
	}
	return fmt.Sprintf("%s.%d", d.cfg.Net, 11+i)
}

func (d *Docker) container(n Node) string { return d.cfg.Project + "-" + string(n) }

func (d *Docker) env() []string {
	return d.deployment(d.cfg.Project, d.cfg.DataDir, d.cfg.Net, d.ports)
}

// deployment is the compose environment of one deployment of the compose
// files: its project, data directories, network and host ports.
func (d *Docker) deployment(project, data, net string, ports map[Node][2]int) []string {
	env := append(os.Environ(),
		"JEPSEN_PROJECT="+project,
		"JEPSEN_IMAGE="+d.cfg.Image,
		"JEPSEN_DATA="+data,
		"JEPSEN_NET="+net,
		"JEPSEN_SUBNET="+net+".0/24",
	)
	for i, n := range dockerNodes {
		env = append(env,
			fmt.Sprintf("SESSIONSTORE_NODE%d_GRPC_PORT=%d", i+1, ports[n][0]),
			fmt.Sprintf("SESSIONSTORE_NODE%d_HTTP_PORT=%d", i+1, ports[n][1]))
	}
	return env
}

func run(ctx context.Context, env []string, stdin []byte, name string, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	cmd.Env = env
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("%s %s: %w: %s", name, strings.Join(args, " "), err, bytes.TrimSpace(out))
	}
	return string(out), nil
}

// composeUp starts a deployment on the given host ports. A port picked free
// can be taken by another program before Docker binds it (other suites start
// containers and servers at the same time); such an `up` fails with "port is
// already allocated" and leaves the containers it created, so it is taken
// down and retried on new ports, a few times. It returns the ports in use.
// extra is appended to the deployment's environment.
func (d *Docker) composeUp(ctx context.Context, project, data, net string, ports map[Node][2]int, extra []string) (map[Node][2]int, error) {
	const attempts = 4
	for i := 1; ; i++ {
		env := append(d.deployment(project, data, net, ports), extra...)
		_, err := d.composeAs(ctx, project, env, "up", "-d", "--force-recreate")
		if err == nil {
			return ports, nil
		}
		_, _ = d.composeAs(ctx, project, env, "down", "-v", "--remove-orphans", "-t", "1")
		if i == attempts || !portTaken(err) || ctx.Err() != nil {
			return nil, err
		}
		if ports, err = hostPorts(); err != nil {
			return nil, err
		}
	}
}

// portTaken reports a compose error caused by a host port in use.
func portTaken(err error) bool {
	s := err.Error()
	return strings.Contains(s, "port is already allocated") || strings.Contains(s, "address already in use")
}

func (d *Docker) compose(ctx context.Context, args ...string) (string, error) {
	return d.composeAs(ctx, d.cfg.Project, d.env(), args...)
}

func (d *Docker) composeAs(ctx context.Context, project string, env []string, args ...string) (string, error) {
	argv := append(append([]string(nil), d.cfg.Compose[1:]...), "-p", project,
		"-f", filepath.Join(d.cfg.Repo, "docker-compose.yml"),
		"-f", filepath.Join(d.cfg.Repo, "jepsen", "compose.jepsen.yml"))
	return run(ctx, env, nil, d.cfg.Compose[0], append(argv, args...)...)
}

// makeDataDirs creates each node's data directory under root, writable by
// the image's user.
func makeDataDirs(root string) error {
	for _, n := range dockerNodes {
		dir := filepath.Join(root, string(n))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
		// The image runs the node as uid/gid 65532 (see Dockerfile).
		if err := os.Chown(dir, nodeUID, nodeUID); err != nil {
			return fmt.Errorf("data directory of %s: %w", n, err)
		}
	}
	return nil
}

// Up removes what an earlier run of the project left, then starts the
// three nodes on empty data directories.
func (d *Docker) Up(ctx context.Context) error {
	_, _ = d.compose(ctx, "down", "-v", "--remove-orphans", "-t", "1")
	if err := makeDataDirs(d.cfg.DataDir); err != nil {
		return err
	}
	ports, err := d.composeUp(ctx, d.cfg.Project, d.cfg.DataDir, d.cfg.Net, d.ports, nil)
	if err != nil {
		return err
	}
	d.ports = ports // before any client reads them: Up is the first call
	// Offline commands and the foreign deployment run the very image the
	// nodes run, even if the tag moves meanwhile.
	out, err := run(ctx, nil, nil, "docker", "inspect", "-f", "{{.Image}}", d.container(dockerNodes[0]))
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.imageID = strings.TrimSpace(out)
	d.mu.Unlock()
	return nil
}

// image is the nodes' image by id once Up has run, else the configured name.
func (d *Docker) image() string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.imageID != "" {
		return d.imageID
	}
	return d.cfg.Image
}

// Down removes the containers and the network; the data directories stay.
func (d *Docker) Down(ctx context.Context) error {
	_, err := d.compose(ctx, "down", "-v", "--remove-orphans", "-t", "1")
	d.mu.Lock()
	d.ruled = map[Node]bool{}
	d.mu.Unlock()
	return err
}

func (d *Docker) Kill(ctx context.Context, n Node) error {
	_, err := run(ctx, nil, nil, "docker", "kill", "-s", "KILL", d.container(n))
	d.mu.Lock()
	delete(d.ruled, n) // a new start gets a new namespace
	d.mu.Unlock()
	return err
}

func (d *Docker) Start(ctx context.Context, n Node) error {
	_, err := run(ctx, nil, nil, "docker", "start", d.container(n))
	return err
}

func (d *Docker) Pause(ctx context.Context, n Node) error {
	_, err := run(ctx, nil, nil, "docker", "pause", d.container(n))
	return err
}

func (d *Docker) Resume(ctx context.Context, n Node) error {
	_, err := run(ctx, nil, nil, "docker", "unpause", d.container(n))
	return err
}

// Running reports whether n's container is running (and not paused).
func (d *Docker) Running(ctx context.Context, n Node) (bool, error) {
	out, err := run(ctx, nil, nil, "docker", "inspect", "-f", "{{.State.Running}} {{.State.Paused}}", d.container(n))
	if err != nil {
		return false, err
	}
	return strings.TrimSpace(out) == "true false", nil
}

func (d *Docker) pid(ctx context.Context, n Node) (int, error) {
	out, err := run(ctx, nil, nil, "docker", "inspect", "-f", "{{.State.Pid}}", d.container(n))
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s is not running (pid %q)", d.container(n), strings.TrimSpace(out))
	}
	return pid, nil
}

// nft runs an nft script in n's network namespace.
func (d *Docker) nft(ctx context.Context, n Node, script string) error {
	pid, err := d.pid(ctx, n)
	if err != nil {
		return err
	}
	_, err = run(ctx, nil, []byte(script), "nsenter", "-t", strconv.Itoa(pid), "-n", "nft", "-f", "-")
	return err
}

// rules writes n's jepsen table: traffic with cut peers is dropped, and
// with lossy peers dropped at random with pct percent.
func (d *Docker) rules(ctx context.Context, n Node, cut []Node, lossy []Node, pct int) error {
	var b strings.Builder
	b.WriteString("add table inet jepsen\nflush table inet jepsen\n")
	b.WriteString("table inet jepsen {\n chain input { type filter hook input priority -10; policy accept;\n")
	ips := func(ns []Node) string {
		var s []string
		for _, m := range ns {
			s = append(s, d.IP(m))
		}
		sort.Strings(s)
		return "{ " + strings.Join(s, ", ") + " }"
	}
	if len(cut) > 0 {
		fmt.Fprintf(&b, "  ip saddr %s drop\n", ips(cut))
	}
	if len(lossy) > 0 {
		fmt.Fprintf(&b, "  ip saddr %s numgen random mod 100 < %d drop\n", ips(lossy), pct)
	}
	b.WriteString(" }\n chain output { type filter hook output priority -10; policy accept;\n")
	if len(cut) > 0 {
		fmt.Fprintf(&b, "  ip daddr %s drop\n", ips(cut))
	}
	if len(lossy) > 0 {
		fmt.Fprintf(&b, "  ip daddr %s numgen random mod 100 < %d drop\n", ips(lossy), pct)
	}
	b.WriteString(" }\n}\n")
	if err := d.nft(ctx, n, b.String()); err != nil {
		return err
	}
	d.mu.Lock()
	d.ruled[n] = true
	d.mu.Unlock()
	return nil
}

func (d *Docker) Partition(ctx context.Context, grudge map[Node][]Node) error {
	sym := map[Node]map[Node]bool{}
	add := func(a, b Node) {
		if sym[a] == nil {
			sym[a] = map[Node]bool{}
		}
		sym[a][b] = true
	}
	for a, bs := range grudge {
		for _, b := range bs {
			add(a, b)
			add(b, a)
		}
	}
	for _, n := range dockerNodes {
		var cut []Node
		for m := range sym[n] {
			cut = append(cut, m)
		}
		if len(cut) == 0 {
			continue
		}
		if err := d.rules(ctx, n, cut, nil, 0); err != nil {
			return err
		}
	}
	return nil
}

func (d *Docker) Loss(ctx context.Context, n Node, pct int) error {
	if pct <= 0 || pct > 100 {
		return fmt.Errorf("loss percentage %d out of range", pct)
	}
	var peers []Node
	for _, m := range dockerNodes {
		if m != n {
			peers = append(peers, m)
		}
	}
	return d.rules(ctx, n, nil, peers, pct)
}

// Heal deletes the jepsen table in every running node's namespace.
func (d *Docker) Heal(ctx context.Context) error {
	var errs []string
	for _, n := range dockerNodes {
		d.mu.Lock()
		ruled := d.ruled[n]
		d.mu.Unlock()
		if !ruled {
			continue
		}
		if err := d.nft(ctx, n, "delete table inet jepsen\n"); err != nil {
			errs = append(errs, err.Error())
			continue
		}
		d.mu.Lock()
		delete(d.ruled, n)
		d.mu.Unlock()
	}
	if len(errs) > 0 {
		return fmt.Errorf("heal: %s", strings.Join(errs, "; "))
	}
	return nil
}

func (d *Docker) CollectLogs(ctx context.Context, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, n := range dockerNodes {
		ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		out, err := run(ctx, nil, nil, "docker", "logs", "-t", d.container(n))
		cancel()
		if err != nil {
			out += "\n(docker logs failed: " + err.Error() + ")\n"
		}
		if err := os.WriteFile(filepath.Join(dir, string(n)+".log"), []byte(out), 0o644); err != nil {
			return err
		}
	}
	return nil
}

// BuildImage builds the node image (scripts/docker-build.sh) named image
// ("" = sessionstore:dev) with Go build tags (none for a real build).
func BuildImage(ctx context.Context, repo, image, tags string) (string, error) {
	env := os.Environ()
	if image != "" {
		env = append(env, "IMAGE="+image)
	}
	env = append(env, "TAGS="+tags)
	return run(ctx, env, nil, "sh", filepath.Join(repo, "scripts", "docker-build.sh"))
}

var _ Backend = (*Docker)(nil)
