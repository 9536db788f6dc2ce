// Package dockertest holds what the tests that run containers share: the
// rule that such a test skips without a usable Docker except under CI=true,
// where it fails (CI must run it), the compose command, and host ports.
package dockertest

import (
	"bytes"
	"context"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// Require skips the test when Docker (or one of tools, e.g. nsenter) is not
// usable, or fails it under CI=true.
func Require(t testing.TB, tools ...string) {
	t.Helper()
	for _, tool := range append([]string{"docker"}, tools...) {
		if _, err := exec.LookPath(tool); err != nil {
			unusable(t, "%v", err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "info", "--format", "{{.ServerVersion}}").CombinedOutput(); err != nil {
		unusable(t, "docker info: %v: %s", err, bytes.TrimSpace(out))
	}
}

// Compose is Require, then the compose command: docker-compose, else the
// `docker compose` plugin.
func Compose(t testing.TB) []string {
	t.Helper()
	Require(t)
	if p, err := exec.LookPath("docker-compose"); err == nil {
		return []string{p}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := exec.CommandContext(ctx, "docker", "compose", "version").Run(); err == nil {
		return []string{"docker", "compose"}
	}
	unusable(t, "neither docker-compose nor the docker compose plugin is installed")
	return nil
}

func unusable(t testing.TB, format string, args ...any) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true and Docker is not usable: "+format, args...)
	}
	t.Skipf("Docker is not usable: "+format, args...)
}

// FreePorts returns n distinct loopback TCP ports that were free when
// picked. They are not reserved: another program may take one before Docker
// binds it (see PortTaken).
func FreePorts(t testing.TB, n int) []int {
	t.Helper()
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports
}

// PortTaken reports whether compose output says a host port was in use:
// start again on new ports.
func PortTaken(out string) bool {
	return strings.Contains(out, "port is already allocated") || strings.Contains(out, "address already in use")
}
