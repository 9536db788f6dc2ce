package serverproc

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

func TestWaitFor(t *testing.T) {
	errBusy := errors.New("busy")
	errGone := errors.New("gone")
	for _, tc := range []struct {
		name      string
		okAfter   int   // ready succeeds on this call (0: never)
		fail      error // what ready returns before that
		wantCalls int
		wantErr   error // errors.Is target; nil: success
		wantText  string
	}{
		{name: "ready at once", okAfter: 1, fail: errBusy, wantCalls: 1},
		{name: "ready on the third call", okAfter: 3, fail: errBusy, wantCalls: 3},
		{name: "permanent stops polling", fail: Permanent(errGone), wantCalls: 1, wantErr: errGone, wantText: "gone"},
		{name: "never ready", fail: errBusy, wantErr: errBusy, wantText: "not ready after 50ms: busy"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			calls := 0
			err := WaitFor(context.Background(), 50*time.Millisecond, time.Millisecond, func(context.Context) error {
				if calls++; calls == tc.okAfter {
					return nil
				}
				return tc.fail
			})
			if tc.wantErr == nil && err != nil || tc.wantErr != nil && !errors.Is(err, tc.wantErr) {
				t.Fatalf("WaitFor = %v; want %v", err, tc.wantErr)
			}
			if err != nil && err.Error() != tc.wantText {
				t.Errorf("WaitFor error %q; want %q", err, tc.wantText)
			}
			if tc.wantCalls != 0 && calls != tc.wantCalls {
				t.Errorf("ready called %d times; want %d", calls, tc.wantCalls)
			}
		})
	}
}

func TestProc(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh")
	}
	long := strings.Repeat("x", 2500) + "END"
	for _, tc := range []struct {
		name     string
		script   string
		wantTail string
		killed   bool // ignores SIGTERM, so Stop kills it after killAfter
	}{
		{name: "exits on SIGTERM", script: "echo started; exec sleep 30", wantTail: "started\n"},
		{name: "killed after killAfter", script: "trap '' TERM; echo started; exec sleep 30", wantTail: "started\n", killed: true},
		{name: "tail keeps the last 2000 bytes", script: "printf " + long + "; exec sleep 30", wantTail: long[len(long)-2000:]},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := Start("sh", filepath.Join(t.TempDir(), "log"), "-c", tc.script)
			if err != nil {
				t.Fatal(err)
			}
			if p.Pid() <= 0 || p.Exited() {
				t.Fatalf("pid %d, exited %v just after Start", p.Pid(), p.Exited())
			}
			if err := WaitFor(context.Background(), 10*time.Second, 10*time.Millisecond, func(context.Context) error {
				if p.Tail() != tc.wantTail {
					return errors.New("not written yet")
				}
				return nil
			}); err != nil {
				t.Fatalf("log tail %q: %v", p.Tail(), err)
			}
			// Long enough that a process that heeds SIGTERM is never killed,
			// however loaded the machine.
			killAfter, want := time.Minute, syscall.SIGTERM
			if tc.killed {
				killAfter, want = 300*time.Millisecond, syscall.SIGKILL
			}
			p.Stop(killAfter)
			if !p.Exited() {
				t.Fatal("not exited after Stop")
			}
			if ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus); !ok || !ws.Signaled() || ws.Signal() != want {
				t.Errorf("ended with %v; want the signal %v", p.cmd.ProcessState, want)
			}
		})
	}
	if _, err := Start(filepath.Join(t.TempDir(), "missing"), filepath.Join(t.TempDir(), "log")); err == nil {
		t.Error("Start of a missing binary: no error")
	}
}
