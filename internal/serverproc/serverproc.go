// Package serverproc runs server binaries as child processes for the
// measurement scripts (scripts/vsetcd, scripts/scaling): start one with its
// output in a log file, wait until it answers, stop it, show the end of its
// log when it fails. Both scripts start, wait for and stop their servers
// this same way.
package serverproc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"
)

// Proc is a started server process; its stdout and stderr go to the file Log.
type Proc struct {
	Log  string // path of the log file
	cmd  *exec.Cmd
	done chan struct{} // closed when the process has exited
}

// Start runs bin with args, its output (over)writing logPath.
func Start(bin, logPath string, args ...string) (*Proc, error) {
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
	p := &Proc{Log: logPath, cmd: cmd, done: make(chan struct{})}
	go func() { _ = cmd.Wait(); close(p.done) }()
	return p, nil
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Stop asks for a clean exit (SIGTERM), then kills the process if it has
// not exited after killAfter. It returns how long the exit took.
func (p *Proc) Stop(killAfter time.Duration) time.Duration {
	start := time.Now()
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(killAfter):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	return time.Since(start)
}

// Exited reports whether the process has exited.
func (p *Proc) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Tail is the last 2000 bytes of the log, for an error message.
func (p *Proc) Tail() string {
	b, _ := os.ReadFile(p.Log)
	if len(b) > 2000 {
		b = b[len(b)-2000:]
	}
	return string(b)
}

// permanent marks an error waiting longer cannot cure.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// Permanent marks err as one waiting longer cannot cure: WaitFor returns it
// at once instead of polling on.
func Permanent(err error) error { return permanent{err} }

// WaitFor polls ready every interval until it succeeds, fails permanently
// or d passes.
func WaitFor(ctx context.Context, d, interval time.Duration, ready func(ctx context.Context) error) error {
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
