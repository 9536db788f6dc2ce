package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/sessionpb"
	"github.com/sessionstore/sessionstore/cluster/clustertest"
)

// seStore puts the recorded session name (testdata/recorded) into n, packed
// rows expanded, under its own id or as (when non-empty), and returns its id
// and events.
func seStore(t *testing.T, n *testNode, name string, as ...string) (string, []string) {
	t.Helper()
	h, events, err := ctReadRecorded(filepath.Join("..", "..", "testdata", "recorded", name+".session.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	if len(as) > 0 {
		h.Id = as[0]
	}
	ctCreate(t, n, h)
	ctAppend(t, n, h.GetId(), events...)
	return h.GetId(), events
}

// seRun runs `sessions args... --addr addr` with stdin in (a terminal when
// tty) and returns its stdout, stderr and error.
func seRun(ctx context.Context, addr string, in string, tty bool, args ...string) (string, string, error) {
	var out, errb bytes.Buffer
	err := runSessions(ctx, append(args, "--addr", addr), sessionsIO{out: &out, err: &errb, in: strings.NewReader(in), tty: tty})
	return out.String(), errb.String(), err
}

// TestSessionsCLI runs ls, show, cat, tail and rm against one in-process node
// holding two recorded sessions.
func TestSessionsCLI(t *testing.T) {
	n := startTestNode(t, "")
	addr := n.srv.grpcAddr
	plan, planEvents := seStore(t, n, "web-plan-mode")
	reads, _ := seStore(t, n, "cli-parallel-file-reads")
	n.WaitArtifacts()
	run := func(t *testing.T, args ...string) (string, string) {
		t.Helper()
		out, errOut, err := seRun(n.ctx(), addr, "", false, args...)
		if err != nil {
			t.Fatalf("sessions %v: %v (stderr %q)", args, err, errOut)
		}
		return out, errOut
	}

	t.Run("ls", func(t *testing.T) {
		out, _ := run(t, "ls")
		lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
		if len(lines) != 3 || !strings.HasPrefix(lines[0], "ID ") || !strings.Contains(lines[0], "TITLE") {
			t.Fatalf("ls printed\n%s\nwant a header and two rows", out)
		}
		row := strings.Fields(lines[slicesIndexPrefix(lines, plan)])
		want := []string{plan, "/home/dev/project/workspace", fmt.Sprint(len(planEvents))}
		if len(row) < 3 || row[0] != want[0] || row[1] != want[1] || row[2] != want[2] || !strings.HasSuffix(lines[slicesIndexPrefix(lines, plan)], "Reply with exactly the single") {
			t.Errorf("ls row %q, want %v … and the title", lines[slicesIndexPrefix(lines, plan)], want)
		}

		for _, c := range []struct {
			name string
			args []string
			want []string
			more bool
		}{
			{"cwd", []string{"ls", "--cwd", "/home/dev/project/workspace"}, []string{plan}, false},
			{"other cwd", []string{"ls", "--cwd", "/home/dev/project/w"}, []string{plan}, false},
			{"no match", []string{"ls", "--cwd", "/elsewhere"}, nil, false},
			{"limit", []string{"ls", "--limit", "1"}, []string{"?"}, true},
			{"pages of one", []string{"ls", "--page-size", "1"}, []string{plan, reads}, false},
			{"limit over pages", []string{"ls", "--page-size", "1", "--limit", "5"}, []string{plan, reads}, false},
		} {
			t.Run(c.name, func(t *testing.T) {
				out, errOut := run(t, append(c.args, "--json")...)
				var ids []string
				for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
					if l == "" {
						continue
					}
					var r lsRow
					if err := json.Unmarshal([]byte(l), &r); err != nil {
						t.Fatalf("line %q: %v", l, err)
					}
					if r.Events == nil || r.Revision == "" || r.Error != "" {
						t.Errorf("row %+v: want events and a revision", r)
					}
					ids = append(ids, r.ID)
				}
				if len(c.want) == 1 && c.want[0] == "?" {
					if len(ids) != 1 {
						t.Errorf("listed %v, want one session", ids)
					}
				} else if !sameSet(ids, c.want) {
					t.Errorf("listed %v, want %v", ids, c.want)
				}
				if got := strings.Contains(errOut, "raise --limit"); got != c.more {
					t.Errorf("stderr %q: mentions more = %v, want %v", errOut, got, c.more)
				}
				if len(c.want) == 0 && !strings.Contains(errOut, "no sessions") {
					t.Errorf("stderr %q, want it to say there are no sessions", errOut)
				}
			})
		}
	})

	t.Run("show", func(t *testing.T) {
		out, _ := run(t, "show", plan)
		for _, want := range []string{"session   " + plan, "title     Reply with exactly the single", "turn 1",
			"user       Reply with exactly the single word OK and call no tools.", "plan mode  on", "assistant  OK", "end        completed"} {
			if !strings.Contains(out, want) {
				t.Errorf("show %s lacks %q:\n%s", plan, want, out)
			}
		}
		out, _ = run(t, "show", reads)
		for _, want := range []string{"tool       read {\"file_path\":\"a.txt\"}", "result     read: <path>/home/dev/project/b.txt</path>", "assistant  DONE"} {
			if !strings.Contains(out, want) {
				t.Errorf("show %s lacks %q:\n%s", reads, want, out)
			}
		}
		out, _ = run(t, "show", "--json", plan)
		var v struct {
			Header struct {
				ID string `json:"id"`
			} `json:"header"`
			Revision string            `json:"revision"`
			NextSeq  int64             `json:"next_seq"`
			Events   []json.RawMessage `json:"events"`
		}
		if err := json.Unmarshal([]byte(out), &v); err != nil {
			t.Fatalf("show --json: %v\n%s", err, out)
		}
		view := ctInspect(t, n, plan)
		if v.Header.ID != plan || v.Revision != view.GetRevision() || v.NextSeq != view.GetNextSeq() || len(v.Events) != len(view.GetEvents()) {
			t.Errorf("show --json: id %q, revision %q, next seq %d, %d events; want those of Inspect", v.Header.ID, v.Revision, v.NextSeq, len(v.Events))
		}
	})

	t.Run("cat", func(t *testing.T) {
		out, _ := run(t, "cat", plan)
		if raw := ctReadRaw(t, n, plan); out != string(raw.GetContent()) {
			t.Errorf("cat printed %d bytes, not the %d of ReadRaw", len(out), len(raw.GetContent()))
		}
	})

	t.Run("tail", func(t *testing.T) {
		out, _ := run(t, "tail", plan, "-n", "3")
		if want := strings.Join(planEvents[len(planEvents)-3:], "\n") + "\n"; out != want {
			t.Errorf("tail -n 3 =\n%s\nwant\n%s", out, want)
		}
		if out, _ := run(t, "tail", "-n", "0", plan); out != "" {
			t.Errorf("tail -n 0 printed %q", out)
		}
	})

	t.Run("tail -f", func(t *testing.T) {
		id, events := seStore(t, n, "web-fresh-round-trip")
		ctx, cancel := context.WithCancel(n.ctx())
		defer cancel()
		var out, errOut crBuffer
		done := make(chan error, 1)
		go func() {
			done <- runSessions(ctx, []string{"tail", "-f", "-n", "1", id, "--addr", addr}, sessionsIO{out: &out, err: &errOut})
		}()
		waitFor := func(what, want string) {
			t.Helper()
			clustertest.Eventually(t, 20*time.Second, func() error {
				if !strings.Contains(out.String(), want) {
					return fmt.Errorf("tail -f never printed %s; printed %q, stderr %q", what, out.String(), errOut.String())
				}
				return nil
			})
		}
		waitFor("the last event", events[len(events)-1])
		added := fmt.Sprintf(`{"type":"session/title","seq":%d,"time":1784973860000,"data":{"title":"followed","messageSeqs":[1],"source":{"kind":"fallback"}}}`, len(events))
		ctAppend(t, n, id, added)
		waitFor("the appended event", added)
		cancel()
		if err := <-done; err != nil {
			t.Errorf("tail -f ended with %v after the interrupt", err)
		}
		if want := events[len(events)-1] + "\n" + added + "\n"; out.String() != want {
			t.Errorf("tail -f printed\n%s\nwant\n%s", out.String(), want)
		}
	})

	t.Run("tail -f of a deleted session", func(t *testing.T) {
		id, events := seStore(t, n, "cli-parallel-file-reads", "followed-then-deleted")
		ctx, cancel := context.WithCancel(n.ctx())
		defer cancel()
		var out, errOut crBuffer
		done := make(chan error, 1)
		go func() {
			done <- runSessions(ctx, []string{"tail", "-f", "-n", "1", id, "--addr", addr}, sessionsIO{out: &out, err: &errOut})
		}()
		clustertest.Eventually(t, 20*time.Second, func() error {
			if !strings.Contains(out.String(), events[len(events)-1]) {
				return fmt.Errorf("tail -f never printed the last event; stderr %q", errOut.String())
			}
			return nil
		})
		if _, err := n.Client.Delete(n.ctx(), &sessionpb.DeleteRequest{SessionId: id}); err != nil {
			t.Fatal(err)
		}
		select {
		case err := <-done:
			if err != nil || !strings.Contains(errOut.String(), "was deleted") {
				t.Errorf("tail -f of a deleted session: %v, stderr %q; want a clean end saying it was deleted", err, errOut.String())
			}
		case <-time.After(20 * time.Second):
			t.Fatalf("tail -f did not end when its session was deleted; stderr %q", errOut.String())
		}
	})

	t.Run("errors", func(t *testing.T) {
		for _, sub := range []string{"show", "cat", "tail"} {
			_, _, err := seRun(n.ctx(), addr, "", false, sub, "nope")
			if err == nil || err.Error() != "no session nope" {
				t.Errorf("%s of an unknown id: %v, want \"no session nope\"", sub, err)
			}
		}
		_, _, err := seRun(n.ctx(), "127.0.0.1:1", "", false, "ls", "--timeout", "2s")
		if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1") {
			t.Errorf("ls of a wrong address: %v, want an error naming it", err)
		}
	})

	t.Run("rm", func(t *testing.T) {
		if _, errOut, err := seRun(n.ctx(), addr, "y\n", false, "rm", reads); !errors.Is(err, errUsage) || !strings.Contains(errOut, "--yes") {
			t.Errorf("rm without a terminal or --yes: %v, stderr %q; want a usage error asking for --yes", err, errOut)
		}
		if _, errOut, err := seRun(n.ctx(), addr, "n\n", true, "rm", reads); err != nil || !strings.Contains(errOut, "nothing deleted") {
			t.Errorf("rm answered no: %v, stderr %q", err, errOut)
		}
		ctLoad(t, n, reads) // still there
		out, errOut, err := seRun(n.ctx(), addr, "y\n", true, "rm", reads)
		if err != nil || !strings.HasPrefix(out, "deleted "+reads+" (revision ") || !strings.Contains(errOut, "[y/N]") {
			t.Errorf("rm answered yes: %v, stdout %q, stderr %q", err, out, errOut)
		}
		out, _, err = seRun(n.ctx(), addr, "", false, "rm", "--yes", "nope", plan)
		if err == nil || err.Error() != "no session nope" || !strings.HasPrefix(out, "deleted "+plan+" ") {
			t.Errorf("rm --yes nope %s: %v, stdout %q; want %s deleted and \"no session nope\"", plan, err, out, plan)
		}
		for _, id := range []string{reads, plan} {
			if _, err := n.Client.Load(n.ctx(), &sessionpb.LoadRequest{SessionId: id}); !errors.Is(err, sessionstore.ErrNotFound) {
				t.Errorf("Load %s after rm: %v, want NOT_FOUND", id, err)
			}
		}
	})
}

// --help of every command exits 0 with its usage; bad usage exits 2; neither
// dials.
func TestSessionsHelpAndUsage(t *testing.T) {
	for _, sub := range []string{"ls", "show", "cat", "tail", "rm"} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), []string{"sessions", sub, "--help"}, &out, &errOut); code != 0 {
			t.Errorf("sessions %s --help: exit %d", sub, code)
		}
		for _, want := range []string{"Usage: sessionstore sessions " + sub, "-addr", "-timeout", "-tls-ca", "-tls-server-name", "-token"} {
			if !strings.Contains(errOut.String(), want) {
				t.Errorf("sessions %s --help lacks %q:\n%s", sub, want, errOut.String())
			}
		}
	}
	for _, args := range [][]string{{}, {"bogus"}, {"ls", "extra"}, {"ls", "--limit", "-1"}, {"show"}, {"show", "a", "b"},
		{"cat"}, {"tail"}, {"tail", "a", "-n", "-1"}, {"rm"}, {"show", "a", "--timeout", "0s"}, {"ls", "--nope"}} {
		var out, errOut bytes.Buffer
		if code := run(context.Background(), append([]string{"sessions"}, args...), &out, &errOut); code != 2 {
			t.Errorf("sessions %v: exit %d, want 2 (stderr %q)", args, code, errOut.String())
		}
	}
	var out, errOut bytes.Buffer
	if err := runSessions(context.Background(), []string{"--help"}, sessionsIO{out: &out, err: &errOut}); !errors.Is(err, flag.ErrHelp) ||
		!strings.Contains(errOut.String(), "tail  ID [-n N] [-f]") {
		t.Errorf("sessions --help: %v, %q", err, errOut.String())
	}
	out.Reset()
	run(context.Background(), []string{"help"}, &out, &errOut)
	if !strings.Contains(out.String(), "sessionstore sessions ls|show|cat|tail|rm") {
		t.Errorf("usage lacks the sessions line:\n%s", out.String())
	}
}

// The view renders the store's own closers: a tool result in the message
// shape, named by its call, marked as not stored.
func TestSessionsShowClosers(t *testing.T) {
	v := &sessionpb.SessionView{Header: &sessionpb.SessionHeader{Id: "s", CreatedAt: 0}, NextSeq: 4, Revision: "r", Events: []string{
		ctEv("turn/start", 0, 1, `{"turn":1}`),
		ctSurf("user/message", 1, 1, `{"role":"user","content":[{"type":"text","text":"line one\nline two"}],"source":{"kind":"user"}}`),
		ctEv("plan/mode", 2, 1, `{"active":false}`),
		ctEv("tool/call", 3, 1, `{"turn":1,"step":1,"callId":"call_a","name":"bash","arguments":{"command":"ls"}}`),
		ctToolResultCloser(4, 2, 1, 1, "call_a", 3),
		ctTurnEndCloser(5, 2, 1),
	}}
	got := renderShow(v)
	for _, want := range []string{
		"events    4 stored + 2 closers of the open turn (a Load would store them), revision r\n",
		"turns     1, user messages 1, tool calls 1, plan-mode switches 1\n",
		"    1    user       line one\n" + strings.Repeat(" ", 20) + "line two\n",
		"    2    plan mode  off\n",
		"    3    tool       bash {\"command\":\"ls\"}\n",
		"    4    error      bash: The tool call was interrupted after it was recorded",
		"… (closer, not stored)\n",
		"    5    end        interrupted (closer, not stored)\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("renderShow lacks %q:\n%s", want, got)
		}
	}
}

// slicesIndexPrefix is the index of the first line starting with prefix+" "
// (0 when none: the header, which then fails the caller's checks).
func slicesIndexPrefix(lines []string, prefix string) int {
	for i, l := range lines {
		if strings.HasPrefix(l, prefix+" ") {
			return i
		}
	}
	return 0
}

func sameSet(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	seen := map[string]int{}
	for _, x := range a {
		seen[x]++
	}
	for _, x := range b {
		if seen[x]--; seen[x] < 0 {
			return false
		}
	}
	return true
}
