package main

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// pidFileName is the file in the data directory that holds the running
// node's PID. An flock on it, held for the node's lifetime, is what says
// "running": the number alone could be stale after a crash or reused by
// another process, the lock is released by the kernel when the node dies.
const pidFileName = "sessionstore.pid"

// pidFile is a held lock on <data-dir>/sessionstore.pid.
type pidFile struct {
	path string
	f    *os.File
}

// errNoNode and errStalePID are what readRunningPID finds when no node holds
// the data directory.
var (
	errNoNode   = errors.New("no node is running")
	errStalePID = errors.New("stale pid file")
)

func pidFilePath(dataDir string) string { return filepath.Join(dataDir, pidFileName) }

// lockPIDFile takes the data directory for this process and writes its PID.
// A directory another node holds is refused with that node's PID, before
// anything else opens the directory's stores (which would only time out).
func lockPIDFile(dataDir string) (*pidFile, error) {
	path := pidFilePath(dataDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("pid file: %w", err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			who := "another process"
			if pid, perr := readPID(path); perr == nil {
				who = fmt.Sprintf("PID %d", pid)
			}
			return nil, fmt.Errorf("data directory %s is in use by %s (a node is running on it; see %s): stop that node first or give another --data-dir", dataDir, who, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	p := &pidFile{path: path, f: f}
	if err := p.write(os.Getpid()); err != nil {
		p.release()
		return nil, err
	}
	return p, nil
}

// write replaces the file's content with pid.
func (p *pidFile) write(pid int) error {
	if err := p.f.Truncate(0); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	if _, err := p.f.WriteAt([]byte(strconv.Itoa(pid)+"\n"), 0); err != nil {
		return fmt.Errorf("pid file: %w", err)
	}
	return nil
}

// release removes the file, then drops the lock (closing the file does).
// Removing first means a reader never finds a file that is unlocked but
// names this, perhaps reused, PID after a clean exit.
func (p *pidFile) release() {
	_ = os.Remove(p.path)
	_ = p.f.Close()
}

// readPID parses the number in a pid file.
func readPID(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	s := strings.TrimSpace(string(b))
	pid, err := strconv.Atoi(s)
	if err != nil || pid <= 0 {
		return 0, fmt.Errorf("%s holds %q, not a PID", path, s)
	}
	return pid, nil
}

// readRunningPID is the PID of the node running on dataDir: errNoNode without
// a pid file, errStalePID when the file is there but nobody holds its lock
// (the node that wrote it is gone).
func readRunningPID(dataDir string) (int, error) {
	path := pidFilePath(dataDir)
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return 0, fmt.Errorf("%w on %s (no %s)", errNoNode, dataDir, path)
	}
	if err != nil {
		return 0, err
	}
	defer f.Close()
	pid, perr := readPID(path)
	// A shared lock that can be taken means no node holds the exclusive one.
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err == nil {
		_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
		what := "no PID"
		if perr == nil {
			what = fmt.Sprintf("PID %d", pid)
		}
		return 0, fmt.Errorf("%w %s: it names %s, but no node holds it (the node exited without removing it); %w on %s", errStalePID, path, what, errNoNode, dataDir)
	} else if !errors.Is(err, unix.EWOULDBLOCK) {
		return 0, fmt.Errorf("lock %s: %w", path, err)
	}
	if perr != nil {
		return 0, fmt.Errorf("a node holds %s but its content is not a PID (still starting?): %w", path, perr)
	}
	return pid, nil
}

// refuseIfRunning is the offline commands' check: a node holding dataDir is
// named by its PID rather than found later by a store's lock timing out.
// It only looks: holding the lock would let `sessionstore reload` signal the
// offline command.
func refuseIfRunning(dataDir string) error {
	pid, err := readRunningPID(dataDir)
	if err != nil {
		return nil // no node, a stale file, or nothing readable: the stores' own locks still guard
	}
	return fmt.Errorf("data directory %s is in use by PID %d (a node is running on it; see %s): stop that node first", dataDir, pid, pidFilePath(dataDir))
}
