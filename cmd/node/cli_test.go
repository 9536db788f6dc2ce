package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"strings"
	"syscall"
	"testing"

	"github.com/sessionstore/sessionstore/fsm"
)

// --help, -h and help list every subcommand, one line each, then serve's flags.
func TestHelpListsSubcommandsAndServeFlags(t *testing.T) {
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		text := out.String()
		for _, c := range commands {
			if !strings.Contains(text, "\n  sessionstore "+c.name+" ") {
				t.Errorf("%v: no line for %s in\n%s", args, c.name, text)
			}
		}
		for _, want := range []string{"\n  sessionstore version ", "\n  sessionstore help ", "Flags of 'sessionstore serve'", "-data-dir", "-bootstrap-expect"} {
			if !strings.Contains(text, want) {
				t.Errorf("%v: output lacks %q", args, want)
			}
		}
		if i, j := strings.Index(text, "sessionstore retention"), strings.Index(text, "-data-dir"); i < 0 || j < i {
			t.Errorf("%v: the serve flags do not follow the subcommands", args)
		}
	}
	// help SUBCOMMAND is that subcommand's --help.
	var out, errb bytes.Buffer
	if code := run(context.Background(), []string{"help", "reload"}, &out, &errb); code != 0 || !strings.Contains(errb.String(), "Usage: sessionstore reload") {
		t.Errorf("help reload: exit %d, stderr %q", code, errb.String())
	}
	// An unknown subcommand: exit 2, the list on stderr.
	out.Reset()
	errb.Reset()
	if code := run(context.Background(), []string{"nope"}, &out, &errb); code != 2 || !strings.Contains(errb.String(), `unknown subcommand "nope"`) || !strings.Contains(errb.String(), "sessionstore status") {
		t.Errorf("nope: exit %d, stderr %q", code, errb.String())
	}
}

func TestVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}} {
		var out, errb bytes.Buffer
		if code := run(context.Background(), args, &out, &errb); code != 0 {
			t.Fatalf("%v: exit %d, stderr %q", args, code, errb.String())
		}
		for _, want := range []string{"sessionstore ", "commit:", runtime.Version(), fmt.Sprintf("command version: %d\n", fsm.CommandVersion)} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("%v: output lacks %q:\n%s", args, want, out.String())
			}
		}
	}
	vcs := func(kv ...string) []debug.BuildSetting {
		var s []debug.BuildSetting
		for i := 0; i < len(kv); i += 2 {
			s = append(s, debug.BuildSetting{Key: kv[i], Value: kv[i+1]})
		}
		return s
	}
	for _, tc := range []struct {
		name            string
		info            *debug.BuildInfo
		version, commit string
	}{
		{"no build info", nil, "devel", "unknown"},
		{"no vcs stamp", &debug.BuildInfo{Main: debug.Module{Version: "(devel)"}}, "devel", "unknown"},
		{"clean", &debug.BuildInfo{Settings: vcs("vcs.revision", "abc123", "vcs.modified", "false")}, "devel", "abc123"},
		{"modified", &debug.BuildInfo{Settings: vcs("vcs.revision", "abc123", "vcs.modified", "true")}, "devel", "abc123+dirty"},
		{"module version", &debug.BuildInfo{Main: debug.Module{Version: "v1.2.3"}}, "v1.2.3", "unknown"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v := readBuildVersion(tc.info, tc.info != nil)
			if v.Version != tc.version || v.Commit != tc.commit || v.Commands != fsm.CommandVersion {
				t.Errorf("got %+v, want version %q, commit %q", v, tc.version, tc.commit)
			}
		})
	}
}

// A second node on a data directory, or an offline command, is told which
// PID holds it, before any store is opened.
func TestSecondNodeOnDataDirNamesThePID(t *testing.T) {
	dir := t.TempDir()
	p, err := lockPIDFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("data directory %s is in use by PID %d", dir, os.Getpid())
	if _, err := lockPIDFile(dir); err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("second lock: %v, want %q", err, want)
	}
	var errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--data-dir", dir, "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, io.Discard, &errb)
	if code != 1 || !strings.Contains(errb.String(), want) {
		t.Fatalf("serve on a held dir: exit %d, stderr %q", code, errb.String())
	}
	// The offline commands name the running node too.
	for _, args := range [][]string{
		{"compact", "--data-dir", dir},
		{"repair", "--data-dir", dir},
		{"recover", "--data-dir", dir, "--peers", "n1=127.0.0.1:7401", "--yes"},
	} {
		errb.Reset()
		if code := run(context.Background(), args, io.Discard, &errb); code != 1 || !strings.Contains(errb.String(), want) {
			t.Errorf("%v on a held dir: exit %d, stderr %q", args, code, errb.String())
		}
	}
	p.release()
	if _, err := os.Stat(pidFilePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file after release: %v", err)
	}
	// A pid file left by a node that died does not hold the directory.
	if err := os.WriteFile(pidFilePath(dir), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	p, err = lockPIDFile(dir)
	if err != nil {
		t.Fatalf("lock over a stale pid file: %v", err)
	}
	if pid, err := readPID(pidFilePath(dir)); err != nil || pid != os.Getpid() {
		t.Fatalf("pid file holds %d, %v; want %d", pid, err, os.Getpid())
	}
	p.release()
}

// serve refuses --bootstrap-expect 3 without --join at start, and leaves no
// pid file behind.
func TestServeRefusesBootstrapExpectWithoutJoin(t *testing.T) {
	dir := t.TempDir()
	var errb bytes.Buffer
	code := run(context.Background(), []string{"serve", "--data-dir", dir, "--bootstrap-expect", "3", "--grpc-addr", "127.0.0.1:0", "--http-addr", "127.0.0.1:0",
		"--raft-addr", "127.0.0.1:0", "--gossip-addr", "127.0.0.1:0"}, io.Discard, &errb)
	if code != 1 || !strings.Contains(errb.String(), "no peers are configured (no --join)") || !strings.Contains(errb.String(), "--join node2:7402,node3:7402") {
		t.Fatalf("exit %d, stderr %q", code, errb.String())
	}
	if _, err := os.Stat(pidFilePath(dir)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("pid file after a refused start: %v", err)
	}
}

// reload finds the node by its pid file and signals it; a missing or stale
// file is said plainly.
func TestReload(t *testing.T) {
	reload := func(dir string) (int, string, string) {
		var out, errb bytes.Buffer
		code := run(context.Background(), []string{"reload", "--data-dir", dir}, &out, &errb)
		return code, out.String(), errb.String()
	}
	dir := t.TempDir()
	if code, _, errs := reload(dir); code != 1 || !strings.Contains(errs, "no node is running on "+dir) {
		t.Errorf("no pid file: exit %d, stderr %q", code, errs)
	}
	if err := os.WriteFile(pidFilePath(dir), []byte("999999\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if code, _, errs := reload(dir); code != 1 || !strings.Contains(errs, "stale pid file") || !strings.Contains(errs, "PID 999999") {
		t.Errorf("stale pid file: exit %d, stderr %q", code, errs)
	}

	// A stand-in node: a child that holds the lock (it inherits the locked
	// file) and whose PID is in the file. SIGHUP ends it, which shows it
	// received the signal.
	sleep, err := exec.LookPath("sleep")
	if err != nil {
		t.Skip("no sleep binary for the stand-in node")
	}
	dir = t.TempDir()
	p, err := lockPIDFile(dir)
	if err != nil {
		t.Fatal(err)
	}
	child := exec.Command(sleep, "60")
	child.ExtraFiles = []*os.File{p.f}
	// A process started under nohup ignores SIGHUP, and a child inherits an
	// ignored signal; one this process handles is reset to the default in
	// the child. So handle it while the child starts.
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	err = child.Start()
	signal.Stop(hup)
	if err != nil {
		p.release()
		t.Fatal(err)
	}
	defer child.Process.Kill()
	if err := p.write(child.Process.Pid); err != nil {
		t.Fatal(err)
	}
	p.f.Close() // the child's copy keeps the lock
	code, out, errs := reload(dir)
	if code != 0 || !strings.Contains(out, fmt.Sprintf("sent SIGHUP to PID %d", child.Process.Pid)) {
		t.Fatalf("reload: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	err = child.Wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) {
		t.Fatalf("stand-in node: %v, want it ended by SIGHUP", err)
	}
	if ws, ok := exit.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != syscall.SIGHUP {
		t.Fatalf("stand-in node ended with %v, want SIGHUP", err)
	}
	// Its lock died with it: the file is stale now.
	if code, _, errs := reload(dir); code != 1 || !strings.Contains(errs, "stale pid file") {
		t.Errorf("after the node died: exit %d, stderr %q", code, errs)
	}
}

func TestAddrDefaultPort(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"localhost", "localhost:7400"},
		{"127.0.0.1", "127.0.0.1:7400"},
		{"127.0.0.1:7410", "127.0.0.1:7410"},
		{"::1", "[::1]:7400"},
		{"[::1]", "[::1]:7400"},
		{"[::1]:7410", "[::1]:7410"},
		{"a, b:7401,c", "a:7400,b:7401,c:7400"},
		{"dns:///h:7400", "dns:///h:7400"},
		{"unix:/run/s.sock", "unix:/run/s.sock"},
	} {
		if got := withDefaultPort(tc.in); got != tc.want {
			t.Errorf("withDefaultPort(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	// Through parseFlags, from the command line and from the environment.
	parse := func(args ...string) string {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		addr := fs.String("addr", "127.0.0.1:7400", "")
		if err := parseFlags(fs, args); err != nil {
			t.Fatal(err)
		}
		return *addr
	}
	if got := parse("--addr", "localhost"); got != "localhost:7400" {
		t.Errorf("--addr localhost: %q", got)
	}
	t.Setenv("SESSIONSTORE_ADDR", "node1")
	if got := parse(); got != "node1:7400" {
		t.Errorf("SESSIONSTORE_ADDR=node1: %q", got)
	}
}

func TestWarnUnknownEnv(t *testing.T) {
	fs := flag.NewFlagSet("sessionstore serve", flag.ContinueOnError)
	cfg := defaultServeConfig()
	serveFlags(&cfg, fs)
	for _, tc := range []struct {
		env      string
		warn     bool
		nearFlag string
	}{
		{env: "SESSIONSTORE_DATADIR=/d", warn: true, nearFlag: "SESSIONSTORE_DATA_DIR (--data-dir)"},
		{env: "SESSIONSTORE_BOOTSTRAP_EXPCT=3", warn: true, nearFlag: "SESSIONSTORE_BOOTSTRAP_EXPECT (--bootstrap-expect)"},
		{env: "SESSIONSTORE_ZZZZZZZZZZZZ=1", warn: true},
		{env: "SESSIONSTORE_DATA_DIR=/d"},
		{env: "SESSIONSTORE_TOKEN=t"}, // a client subcommand's
		{env: "SESSIONSTORE_ADDR=h"},
		{env: "SESSIONSTORE_NODE1_GRPC_PORT=7410"}, // the compose files'
		{env: "OTHER_DATADIR=1"},
	} {
		var buf bytes.Buffer
		warnUnknownEnv(slog.New(slog.NewTextHandler(&buf, nil)), fs, []string{tc.env})
		name, _, _ := strings.Cut(tc.env, "=")
		got := buf.String()
		if !tc.warn {
			if got != "" {
				t.Errorf("%s: warned %q", tc.env, got)
			}
			continue
		}
		if !strings.Contains(got, "level=WARN") || !strings.Contains(got, "variable="+name) {
			t.Errorf("%s: logged %q, want a warning naming it", tc.env, got)
		}
		if tc.nearFlag != "" && !strings.Contains(got, tc.nearFlag) {
			t.Errorf("%s: logged %q, want the suggestion %q", tc.env, got, tc.nearFlag)
		}
		if tc.nearFlag == "" && strings.Contains(got, "did_you_mean") {
			t.Errorf("%s: logged %q, want no suggestion", tc.env, got)
		}
	}
}
