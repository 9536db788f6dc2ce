package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// proc is a started server process; its output goes to a log file, shown
// when the process fails to start. startProc, stop, tail, freeAddrs,
// waitFor and diskUsage are scripts/vsetcd's.
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func startProc(bin, logPath string, args ...string) (*proc, error) {
	f, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &proc{cmd: cmd, log: logPath, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// stop asks for a clean exit (SIGTERM), then kills after 60 s (a large
// state may take a while to close). It returns how long the exit took.
func (p *proc) stop() time.Duration {
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(60 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return time.Since(start)
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

func freeAddrs(n int) ([]string, error) {
	out := make([]string, n)
	for i := range out {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, err
		}
		out[i] = l.Addr().String()
		defer l.Close() // all held until the end: no port handed out twice
	}
	return out, nil
}

// permanent marks an error waiting longer cannot cure.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// waitFor polls ready every interval until it succeeds, fails permanently
// or d passes.
func waitFor(ctx context.Context, d, interval time.Duration, ready func(ctx context.Context) error) error {
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		err := ready(ctx)
		if err == nil {
			return nil
		}
		if errors.As(err, new(permanent)) {
			return err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("not ready after %v: %w", d, err)
		case <-time.After(interval):
		}
	}
}

// diskUsage is the space allocated to the files and directories under path
// (du: preallocated WAL segments count as what they occupy, a small file
// as at least one block).
func diskUsage(path string) (int64, error) {
	n, _, err := usage(path)
	return n, err
}

// usage is du and the apparent size (the regular files' bytes) under path.
func usage(path string) (du, apparent int64, err error) {
	err = filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		info, err := d.Info()
		if err != nil {
			return err
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			du += st.Blocks * 512
		}
		if info.Mode().IsRegular() {
			apparent += info.Size()
		}
		return nil
	})
	return du, apparent, err
}

// countFiles is the number of regular files under dir (0 if it is missing).
func countFiles(dir string) int {
	n := 0
	_ = filepath.WalkDir(dir, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			n++
		}
		return nil
	})
	return n
}

// cpuNanos is the CPU time all of pid's threads have run, from each
// thread's /proc/PID/task/TID/schedstat (nanoseconds, unlike the 10 ms ticks
// of /proc/PID/stat: a window of a few Appends is measurable). Threads that
// already exited are not counted; Go rarely ends a thread.
func cpuNanos(pid int) (uint64, error) {
	tasks, err := os.ReadDir(fmt.Sprintf("/proc/%d/task", pid))
	if err != nil {
		return 0, err
	}
	var sum uint64
	for _, t := range tasks {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/task/%s/schedstat", pid, t.Name()))
		if err != nil {
			continue // the thread ended meanwhile
		}
		ns, err := parseSchedstat(string(b))
		if err != nil {
			return 0, fmt.Errorf("thread %s: %w", t.Name(), err)
		}
		sum += ns
	}
	return sum, nil
}

// parseSchedstat returns the first field of a schedstat line: time spent
// on the CPU, in nanoseconds.
func parseSchedstat(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("empty schedstat")
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// memory is a process's resident set: the whole (VmRSS), its anonymous
// part (heap, stacks) and the file-backed part, which for the node is
// mostly the mmap of state.db (page cache the kernel can drop).
type memory struct{ rss, anon, file int64 }

func memoryOf(pid int) (memory, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return memory{}, err
	}
	var m memory
	for _, f := range []struct {
		key string
		v   *int64
	}{{"VmRSS", &m.rss}, {"RssAnon", &m.anon}, {"RssFile", &m.file}} {
		if *f.v, err = parseStatusKB(string(b), f.key); err != nil {
			return memory{}, err
		}
	}
	return m, nil
}

// parseStatusKB returns the key line of /proc/PID/status ("key:  N kB") in
// bytes.
func parseStatusKB(status, key string) (int64, error) {
	sc := bufio.NewScanner(strings.NewReader(status))
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok || k != key {
			continue
		}
		f := strings.Fields(v)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("%s %q: want \"N kB\"", key, strings.TrimSpace(v))
		}
		n, err := strconv.ParseInt(f[0], 10, 64)
		return n * 1024, err
	}
	return 0, fmt.Errorf("no %s line", key)
}
