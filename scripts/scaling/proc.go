package main

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// freeAddrs holds every listener until it returns, so no port is handed
// out twice (scripts/vsetcd's closes each at once).
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
