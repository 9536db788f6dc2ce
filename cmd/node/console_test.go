package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	cdbrowser "github.com/chromedp/cdproto/browser"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/klauspost/compress/zstd"
	"google.golang.org/grpc"

	"github.com/sessionstore/sessionstore"
	"github.com/sessionstore/sessionstore/api/client"
	"github.com/sessionstore/sessionstore/api/sessionpb"
)

// cnXSS is event text that would run script, close the page's markup or
// turn the page's text around if it were ever parsed as HTML.
const cnXSS = "<script>window.__xss=1</script></div><img src=x onerror=\"window.__xss=1\">\u2028next\u202Eevil\u200F\u2029end"

// cnBrowser starts headless Chromium for one test. Without Chromium the
// test skips, except in CI (CI=true), where it fails: the console would go
// untested.
func cnBrowser(t *testing.T) context.Context {
	t.Helper()
	path, err := exec.LookPath("chromium")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("chromium is not installed (.ci/run installs it): the console cannot be tested")
		}
		t.Skip("chromium is not installed (apt-get install chromium): skipping the console's browser test")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(path), chromedp.WindowSize(1280, 900))
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // Chromium's sandbox refuses to run as root
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	t.Cleanup(cancelAlloc)
	bctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(cancel)
	ctx, cancelTime := context.WithTimeout(bctx, 4*time.Minute)
	t.Cleanup(cancelTime)
	return ctx
}

// cnTab opens a tab that records the page's Content-Security-Policy
// violations in window.__csp (the recording script comes from the test, so
// the policy does not apply to it).
func cnTab(t *testing.T, browser context.Context) context.Context {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if _, err := chromedp.Call(ctx, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{
		Source: `window.__csp = []; document.addEventListener("securitypolicyviolation", (e) => window.__csp.push(e.violatedDirective + " " + e.blockedURI));`,
	}); err != nil {
		t.Fatal(err)
	}
	return ctx
}

// cnDo runs actions in the tab and fails the test on error.
func cnDo(t *testing.T, tab context.Context, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	if err := chromedp.Do(tab, actions...); err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// cnEval evaluates a JavaScript expression in the tab.
func cnEval[T any](t *testing.T, tab context.Context, expr string) T {
	t.Helper()
	v, err := chromedp.Run(tab, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// cnOpen loads url afresh, waits until page has drawn its data, logs and
// returns how long that took from navigation start (ms), and checks that no
// CSP rule was broken.
func cnOpen(t *testing.T, tab context.Context, url, pageName string) float64 {
	t.Helper()
	cnDo(t, tab, "open "+url, chromedp.Navigate("about:blank"), chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.body.dataset.rendered === %q`, pageName)))
	ms := cnEval[float64](t, tab, fmt.Sprintf(`performance.getEntriesByName("rendered:%s")[0].startTime`, pageName))
	t.Logf("%s page rendered %.0f ms after navigation start", pageName, ms)
	cnNoViolations(t, tab)
	return ms
}

// cnButton selects the button labelled label.
func cnButton(label string) chromedp.Search {
	return chromedp.Search(fmt.Sprintf(`//button[text()=%q]`, label))
}

// cnDownload clicks the button labelled label and returns the bytes of the
// file the browser saved (into a temporary directory, under the download's
// GUID).
func cnDownload(t *testing.T, tab context.Context, label string) []byte {
	t.Helper()
	dir := t.TempDir()
	progress := chromedp.Events(tab, cdbrowser.DownloadProgress)
	cnDo(t, tab, "download "+label, chromedp.Func(func(ctx context.Context, _ *chromedp.Target) error {
		_, err := chromedp.Call(ctx, cdbrowser.SetDownloadBehavior, cdbrowser.SetDownloadBehaviorParams{
			Behavior: cdbrowser.SetDownloadBehaviorBehaviorAllowAndName, DownloadPath: dir, EventsEnabled: new(true)})
		return err
	}), chromedp.Click(cnButton(label)))
	for ev, err := range progress {
		if err != nil {
			t.Fatalf("download %s: %v", label, err)
		}
		if ev.State == cdbrowser.DownloadProgressStateCanceled {
			t.Fatalf("download %s was canceled", label)
		}
		if ev.State == cdbrowser.DownloadProgressStateCompleted {
			b, err := os.ReadFile(filepath.Join(dir, ev.GUID))
			if err != nil {
				t.Fatal(err)
			}
			return b
		}
	}
	t.Fatalf("download %s: no completed download", label)
	return nil
}

// cnTitle appends a session/title event to id at its next seq.
func cnTitle(t *testing.T, n *testNode, id, title string) {
	t.Helper()
	v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
	if err != nil {
		t.Fatal(err)
	}
	ctAppend(t, n, id, cnEvent(t, "session/title", int(v.NextSeq), map[string]string{"title": title}))
}

// cnStoreMany stores count sessions prefix00000… of one event each, from
// parallel writers, so that the node's group commit batches them.
func cnStoreMany(t *testing.T, n *testNode, prefix string, count int) {
	t.Helper()
	type session struct{ id, event string }
	todo := make(chan session, count)
	for i := range count {
		todo <- session{fmt.Sprintf("%s%05d", prefix, i), cnEvent(t, "session/title", 0, map[string]string{"title": fmt.Sprint("session ", i)})}
	}
	close(todo)
	ctx, cwd := n.ctx(), "/home/dev/many"
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for s := range todo {
				_, err := n.Client.Create(ctx, &sessionpb.CreateRequest{Header: &sessionpb.SessionHeader{Id: s.id, CreatedAt: 1786004480000, Cwd: &cwd}})
				if err == nil {
					_, err = n.Client.Append(ctx, &sessionpb.AppendRequest{SessionId: s.id, Events: []string{s.event}})
				}
				if err != nil {
					t.Errorf("store %s: %v", s.id, err)
					return
				}
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
}

func cnNoViolations(t *testing.T, tab context.Context) {
	t.Helper()
	if v := cnEval[[]string](t, tab, `window.__csp`); len(v) != 0 {
		t.Errorf("Content-Security-Policy violations: %q", v)
	}
}

// cnShot writes a screenshot of the tab to $SESSIONSTORE_CONSOLE_SHOTS/name.png
// when that is set (docs/console holds the committed ones).
func cnShot(t *testing.T, tab context.Context, name string) {
	t.Helper()
	dir := os.Getenv("SESSIONSTORE_CONSOLE_SHOTS")
	if dir == "" {
		return
	}
	png, err := chromedp.Run(tab, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// cnLogin opens the console and logs in with token.
func cnLogin(t *testing.T, tab context.Context, base, token string) {
	t.Helper()
	cnDo(t, tab, "log in", chromedp.Navigate(base), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#login-form button")),
		chromedp.Poll[chromedp.Void](`document.body.dataset.rendered === "sessions"`))
}

// cnEvent is one event line for an Append.
func cnEvent(t *testing.T, typ string, seq int, data any, extra ...string) string {
	t.Helper()
	d, err := json.Marshal(data)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf(`{"type":%q,"seq":%d,"time":%d,"data":%s%s}`, typ, seq, 1786004480000+seq, d, strings.Join(extra, ""))
}

// TestConsole drives the web console in Chromium against a real node with
// authentication: the recorded sessions listed, filtered and by last append,
// a live tail, downloads, a prefix-limited token, hostile event text, a
// session of 100k events, deletes, and page loads on 10k sessions.
func TestConsole(t *testing.T) {
	browser := cnBrowser(t)
	tokens := auTokenFile(t, auTokens)
	n := startNode(t, nodeOpts{
		dial: []grpc.DialOption{grpc.WithPerRPCCredentials(client.BearerToken(auAdmin))},
		tune: func(c *serveConfig) { c.Auth.TokenFile = tokens },
	})
	n.waitReady(true)
	plan, planEvents := seStore(t, n, "web-plan-mode", "alice/plan-mode")
	seStore(t, n, "web-fresh-round-trip", "alice/fresh")
	reads, _ := seStore(t, n, "cli-parallel-file-reads", "bob/reads")
	base := "http://" + n.srv.httpAddr + "/ui/"
	sessionURL := func(id string) string { return base + "#/session/" + strings.ReplaceAll(id, "/", "%2F") }
	admin := cnTab(t, browser)
	cnLogin(t, admin, base, auAdmin)

	t.Run("cluster", func(t *testing.T) {
		cnOpen(t, admin, base+"#/cluster", "cluster")
		got := cnEval[[]string](t, admin, `[...document.querySelectorAll("#members tr.member")].map((r) => r.dataset.node + " " + r.dataset.role)`)
		if len(got) != 1 || got[0] != "test-node leader" {
			t.Errorf("members %q, want [test-node leader]", got)
		}
		summary := cnEval[string](t, admin, `document.getElementById("cluster-summary").textContent`)
		if id := n.srv.node.ClusterID(); id == "" || !strings.Contains(summary, id) || !strings.Contains(summary, "leadertest-node") {
			t.Errorf("summary %q lacks the cluster id %q and the leader", summary, id)
		}
	})

	rows := func(t *testing.T, tab context.Context) []string {
		t.Helper()
		return cnEval[[]string](t, tab, `[...document.querySelectorAll("#sessions tbody tr")].map((r) => r.dataset.id)`)
	}
	titles := func(t *testing.T, tab context.Context) string {
		t.Helper()
		return strings.Join(cnEval[[]string](t, tab, `[...document.querySelectorAll("#sessions tbody td.title")].map((c) => c.textContent)`), "|")
	}
	t.Run("sessions", func(t *testing.T) {
		cnOpen(t, admin, base+"#/sessions", "sessions")
		if got := rows(t, admin); strings.Join(got, " ") != "alice/fresh alice/plan-mode bob/reads" {
			t.Errorf("session rows %q, want the three recorded sessions in id order", got)
		}
		// Each row's title is its log's last session/title (the file reads
		// have none).
		if got := titles(t, admin); got != "Use the bash tool to|Reply with exactly the single|" {
			t.Errorf("titles %q, want the recorded sessions' titles", got)
		}
		filter := func(id, cwd string) []string {
			// (chromedp.SetValue cannot set an empty value.)
			cnDo(t, admin, "filter", chromedp.Evaluate[chromedp.Void](fmt.Sprintf(`document.getElementById("filter-id").value = %q;
				document.getElementById("filter-cwd").value = %q; delete document.body.dataset.rendered`, id, cwd)),
				chromedp.Click(chromedp.CSS("#session-filters button")),
				chromedp.Poll[chromedp.Void](`document.body.dataset.rendered === "sessions"`))
			return rows(t, admin)
		}
		if got := filter("alice/p", ""); strings.Join(got, " ") != plan {
			t.Errorf("id prefix alice/p: rows %q, want %s", got, plan)
		}
		if h := cnEval[string](t, admin, `location.hash`); h != "#/sessions?id=alice%2Fp" {
			t.Errorf("the hash after filtering is %q, want the filter in it", h)
		}
		if got := filter("", "/home/dev/project/"); strings.Join(got, " ") != "alice/fresh alice/plan-mode" {
			t.Errorf("cwd prefix /home/dev/project/: rows %q, want the two sessions in workspace/", got)
		}
		filter("", "")

		// By last append, newest first: a session appended to comes first
		// after a reload, which keeps the filters of the hash.
		for _, id := range []string{"alice/fresh", "bob/reads"} {
			cnTitle(t, n, id, "touched")
			cnOpen(t, admin, base+"#/sessions?order=last", "sessions")
			if got := rows(t, admin); len(got) != 3 || got[0] != id {
				t.Errorf("by last append after appending to %s: rows %q, want it first", id, got)
			}
		}
		if got := rows(t, admin); strings.Join(got, " ") != "bob/reads alice/fresh alice/plan-mode" {
			t.Errorf("by last append: rows %q", got)
		}
		if got := titles(t, admin); got != "touched|touched|Reply with exactly the single" {
			t.Errorf("titles after the new session/title events: %q", got)
		}
		if o := cnEval[string](t, admin, `document.getElementById("order").value`); o != "last" {
			t.Errorf("the order control says %q after a reload by last append", o)
		}
		cnShot(t, admin, "sessions")
	})

	t.Run("session", func(t *testing.T) {
		cnOpen(t, admin, sessionURL(plan), "session")
		// Turns and plan-mode flips, in log order.
		var want []string
		for _, e := range planEvents {
			var ev struct {
				Type string
				Seq  int
				Data struct{ Active *bool }
			}
			if err := json.Unmarshal([]byte(e), &ev); err != nil {
				t.Fatal(err)
			}
			switch ev.Type {
			case "turn/start", "turn/end":
				want = append(want, fmt.Sprintf("%d %s", ev.Seq, ev.Type))
			case "plan/mode":
				want = append(want, fmt.Sprintf("%d Plan mode %s", ev.Seq, map[bool]string{true: "on", false: "off"}[*ev.Data.Active]))
			}
		}
		const shown = `[...document.querySelectorAll('#events article.turn-start, #events article.turn-end, #events article.plan-mode')]
			.map((r) => r.dataset.seq + " " + (r.classList.contains("plan-mode") ? r.querySelector(".label").textContent : r.dataset.type))`
		if got := cnEval[[]string](t, admin, shown); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("turns and plan-mode flips %q, want %q", got, want)
		}
		cnShot(t, admin, "session")
		metaTitle := `[...document.querySelectorAll("dl.meta dt")].filter((d) => d.textContent === "title").map((d) => d.nextElementSibling.textContent).join()`
		if got := cnEval[string](t, admin, metaTitle); got != "Reply with exactly the single" {
			t.Errorf("the session's title %q, want the recorded one", got)
		}

		// A new event appears in the open page.
		seq := len(planEvents)
		ctAppend(t, n, plan, cnEvent(t, "plan/mode", seq, map[string]bool{"active": false}))
		want = append(want, fmt.Sprintf("%d Plan mode off", seq))
		cnDo(t, admin, "tail", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#events article[data-seq="%d"]') !== null`, seq)))
		if got := cnEval[[]string](t, admin, shown); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("after the append: %q, want %q", got, want)
		}
		// A new title from the tail replaces the one shown.
		cnTitle(t, n, plan, "renamed while open")
		cnDo(t, admin, "title from the tail", chromedp.Poll[chromedp.Void](metaTitle+` === "renamed while open"`))

		// Tool calls with their results beside them (two calls in parallel).
		cnOpen(t, admin, sessionURL(reads), "session")
		got := cnEval[[]string](t, admin, `[...document.querySelectorAll('#events article[data-type="tool/call"]')]
			.map((r) => r.dataset.seq + ">" + r.querySelector(".result").dataset.seq)`)
		if strings.Join(got, " ") != "13>15 14>16" {
			t.Errorf("tool calls and their results %q, want 13>15 14>16", got)
		}
		cnShot(t, admin, "session-tools")
	})

	// A hidden tab holds no Watch (a browser has six connections per host),
	// and shown again it catches up. Headless Chromium shows every tab, so
	// the test overrides what the page reads, document.visibilityState.
	t.Run("hidden", func(t *testing.T) {
		cnOpen(t, admin, sessionURL(plan), "session")
		watches := []string{"sessionstore_streams_open", "kind", "watch"}
		rdWaitMetric(t, n, 1, watches[0], watches[1:]...)
		cnDo(t, admin, "hide", chromedp.Evaluate[chromedp.Void](`Object.defineProperty(document, "visibilityState", {configurable: true, get: () => "hidden"});
			document.dispatchEvent(new Event("visibilitychange"))`))
		rdWaitMetric(t, n, 0, watches[0], watches[1:]...)
		if got := cnEval[string](t, admin, `document.querySelector("p.status").textContent`); got != "Live tail paused while this tab is hidden." {
			t.Errorf("status of a hidden tab: %q", got)
		}
		v, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: plan})
		if err != nil {
			t.Fatal(err)
		}
		seq := int(v.NextSeq)
		ctAppend(t, n, plan, cnEvent(t, "plan/mode", seq, map[string]bool{"active": true}))
		cnDo(t, admin, "show", chromedp.Evaluate[chromedp.Void](`delete document.visibilityState; document.dispatchEvent(new Event("visibilitychange"))`),
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#events article[data-seq="%d"]') !== null`, seq)))
		rdWaitMetric(t, n, 1, watches[0], watches[1:]...)
		if got := cnEval[string](t, admin, `document.querySelector("p.status").textContent`); got != "" {
			t.Errorf("status once shown again: %q", got)
		}
	})

	// A session cut short while two tool calls ran: Load commits the crash
	// closers, and the page marks exactly those rows as repaired.
	t.Run("repaired", func(t *testing.T) {
		h, events, err := ctReadRecorded(filepath.Join("..", "..", "testdata", "recorded", "cli-parallel-file-reads.session.jsonl"))
		if err != nil {
			t.Fatal(err)
		}
		h.Id = "bob/cut"
		ctCreate(t, n, h)
		ctAppend(t, n, h.GetId(), events[:15]...) // both calls (13, 14), neither result
		v := ctLoad(t, n, h.GetId())
		var want []string
		for _, seq := range ctSeqs(t, v.Events) {
			if seq >= 15 {
				want = append(want, fmt.Sprint(seq))
			}
		}
		if len(want) < 3 || !v.Repaired {
			t.Fatalf("Load of the cut session repaired %v with closers %q; want results of both calls and the turn's end", v.Repaired, want)
		}
		cnOpen(t, admin, sessionURL(h.GetId()), "session")
		got := cnEval[[]string](t, admin, `[...document.querySelectorAll("#events .closer")].map((r) => r.dataset.seq + " " + r.querySelector(".closer-badge").textContent)`)
		slices.Sort(got)
		for i := range want {
			want[i] += " interrupted — repaired on load"
		}
		slices.Sort(want)
		if strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("rows marked as crash closers %q, want %q", got, want)
		}
	})

	t.Run("download", func(t *testing.T) {
		cnOpen(t, admin, sessionURL(plan), "session")
		resp, want := owGet(t, n, "http://"+n.srv.httpAddr+"/v1/sessions/"+url.PathEscape(plan)+"/session.jsonl", auAdmin)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET session.jsonl: %s", resp.Status)
		}
		if got := cnDownload(t, admin, "Download session.jsonl"); !bytes.Equal(got, want) {
			t.Errorf("the downloaded session.jsonl (%d bytes) differs from the HTTP download (%d bytes)", len(got), len(want))
		}
		dec, err := zstd.NewReader(nil)
		if err != nil {
			t.Fatal(err)
		}
		defer dec.Close()
		text, err := dec.DecodeAll(cnDownload(t, admin, "Download .zstd"), nil)
		if err != nil || !bytes.Equal(text, want) {
			t.Errorf("the downloaded .zstd decodes to %d bytes (%v), want the %d of session.jsonl", len(text), err, len(want))
		}
	})

	t.Run("prefix", func(t *testing.T) {
		reader := cnTab(t, browser)
		cnLogin(t, reader, base, auReader)
		if got := rows(t, reader); strings.Join(got, " ") != "alice/fresh alice/plan-mode" {
			t.Errorf("reader's session rows %q, want only alice/ sessions", got)
		}
		cnOpen(t, reader, sessionURL(reads), "session")
		status := cnEval[string](t, reader, `document.querySelector(".status").textContent`)
		if !strings.Contains(status, "PERMISSION_DENIED") || cnEval[int](t, reader, `document.querySelectorAll("#events article").length`) != 0 {
			t.Errorf("reader opening %s: status %q and events shown; want PERMISSION_DENIED and none", reads, status)
		}
		cnOpen(t, reader, base+"#/cluster", "cluster")
		if s := cnEval[string](t, reader, `document.querySelector(".status").textContent`); !strings.Contains(s, "no admin permission") {
			t.Errorf("reader's cluster page says %q", s)
		}
	})

	t.Run("xss", func(t *testing.T) {
		const id = "alice/xss"
		ctCreate(t, n, &sessionpb.SessionHeader{Id: id, CreatedAt: 1786004480000, Cwd: new("/home/dev/<b>x</b>")})
		huge := strings.Repeat("</div><script>x</script>\u202E", 1<<20/34)
		msg := func(mid, text string) map[string]any {
			return map[string]any{"id": mid, "role": "user", "source": map[string]string{"kind": "user"},
				"content": []map[string]string{{"type": "text", "text": text}}}
		}
		ctAppend(t, n, id,
			cnEvent(t, "turn/start", 0, map[string]int{"turn": 1}),
			cnEvent(t, "user/message", 1, msg("u1", cnXSS), `,"surfaceOp":"append"`),
			cnEvent(t, "user/message", 2, msg("u2", huge), `,"surfaceOp":"append"`),
			cnEvent(t, "tool/call", 3, map[string]any{"turn": 1, "step": 1, "callId": "c1", "name": cnXSS, "arguments": cnXSS}),
			cnEvent(t, "turn/end", 4, map[string]any{"turn": 1, "reason": map[string]string{"kind": "completed"}}))
		cnOpen(t, admin, sessionURL(id), "session")
		type check struct {
			XSS     string `json:"xss"`
			Scripts int    `json:"scripts"`
			Images  int    `json:"images"`
			Text    string `json:"text"`
			Tool    string `json:"tool"`
			Page    int    `json:"page"`
		}
		c := cnEval[check](t, admin, `({xss: typeof window.__xss, scripts: document.scripts.length, images: document.images.length,
			text: document.querySelector('article[data-seq="1"] .text').textContent,
			tool: document.querySelector('article[data-seq="3"] .label').textContent,
			page: document.body.textContent.length})`)
		if c.XSS != "undefined" || c.Scripts != 1 || c.Images != 0 || c.Text != cnXSS || c.Tool != "tool "+cnXSS {
			t.Errorf("hostile text: got %+v; want no script run or added, no image, and the text shown as it is", c)
		}
		if c.Page > 100_000 {
			t.Errorf("page text is %d characters: the 1 MiB message is not collapsed", c.Page)
		}
		cnDo(t, admin, "open the long text", chromedp.Click(chromedp.CSS(`article[data-seq="2"] details.long > summary`)),
			chromedp.WaitReady(chromedp.CSS(`article[data-seq="2"] details.long .text`)))
		if got := cnEval[string](t, admin, `document.querySelector('article[data-seq="2"] details.long .text').textContent`); got != huge {
			t.Errorf("the long text opened to %d characters, want %d as stored", len(got), len(huge))
		}
		if x := cnEval[string](t, admin, `typeof window.__xss`); x != "undefined" || cnEval[int](t, admin, `document.scripts.length`) != 1 {
			t.Errorf("opening the long text ran or added script")
		}
		cnNoViolations(t, admin)
	})

	t.Run("big", func(t *testing.T) {
		const id, total, batch = "alice/big", 100_000, 1000
		ctCreate(t, n, &sessionpb.SessionHeader{Id: id, CreatedAt: 1786004480000, Cwd: new("/home/dev/big")})
		for from := 0; from < total; from += batch {
			events := make([]string, batch)
			for i := range events {
				events[i] = cnEvent(t, "session/title", from+i, map[string]string{"title": fmt.Sprint("title ", from+i)})
			}
			ctAppend(t, n, id, events...)
		}
		cnOpen(t, admin, sessionURL(id), "session")
		type shape struct {
			Rows  int    `json:"rows"`
			Nodes int    `json:"nodes"`
			Range string `json:"range"`
		}
		const shapeJS = `({rows: document.querySelectorAll("#events article").length,
			nodes: document.getElementsByTagName("*").length, range: document.querySelector(".range").textContent})`
		s := cnEval[shape](t, admin, shapeJS)
		t.Logf("a session of %d events: %d rows, %d elements (%s)", total, s.Rows, s.Nodes, s.Range)
		if s.Rows != 200 || s.Nodes > 5000 || s.Range != fmt.Sprintf("events %d–%d of %d", total-200, total-1, total) {
			t.Errorf("a session of %d events shows %+v; want the newest 200 rows and a bounded DOM", total, s)
		}

		// The open page follows 500 more events and stays bounded.
		events := make([]string, 500)
		for i := range events {
			events[i] = cnEvent(t, "session/title", total+i, map[string]string{"title": "more"})
		}
		ctAppend(t, n, id, events...)
		cnDo(t, admin, "tail", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#events article[data-seq="%d"]') !== null`, total+499)))
		s = cnEval[shape](t, admin, shapeJS)
		if s.Rows > 400 || s.Nodes > 5000 || !strings.HasSuffix(s.Range, fmt.Sprintf("–%d of %d", total+499, total+500)) {
			t.Errorf("after 500 more events the page shows %+v; want at most 400 rows up to the newest", s)
		}
	})

	t.Run("delete", func(t *testing.T) {
		id, _ := seStore(t, n, "web-fresh-round-trip", "alice/delete-me")
		status := func() string { return cnEval[string](t, admin, `document.querySelector(".status").textContent`) }
		cnOpen(t, admin, sessionURL(id), "session")
		// An event arrives between the question and the confirmation: the
		// delete named the revision asked about, and the server refuses it.
		asked, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id})
		if err != nil {
			t.Fatal(err)
		}
		cnDo(t, admin, "ask", chromedp.Click(cnButton("Delete…")))
		cnTitle(t, n, id, "changed")
		cnDo(t, admin, "confirm a stale delete",
			chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#events article[data-seq="%d"]') !== null`, asked.NextSeq)),
			chromedp.Click(cnButton("Confirm delete")),
			chromedp.Poll[chromedp.Void](`document.querySelector(".status").textContent.startsWith("Not deleted")`))
		_, err = n.Client.Delete(n.ctx(), &sessionpb.DeleteRequest{SessionId: id, ExpectedRevision: asked.Revision})
		refusal := ctDomainErr(t, "Delete at the revision asked about", err, sessionstore.ReasonRevisionMismatch)
		if got := status(); !strings.Contains(got, refusal.Message) || !strings.Contains(got, "REVISION_MISMATCH") {
			t.Errorf("after a stale delete the page says %q, want the server's %q", got, refusal.Message)
		}
		if _, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id}); err != nil {
			t.Fatalf("after a stale delete: %v", err)
		}
		// Asked again, at the revision now shown: gone, and the page says so.
		cnDo(t, admin, "delete", chromedp.Click(cnButton("Delete…")), chromedp.Click(cnButton("Confirm delete")),
			chromedp.Poll[chromedp.Void](`/deleted/i.test(document.querySelector(".status").textContent)`))
		if _, err := n.Client.Inspect(n.ctx(), &sessionpb.InspectRequest{SessionId: id}); auReason(err) != sessionstore.ReasonNotFound {
			t.Errorf("Inspect after the delete: %v, want NOT_FOUND (the page says %q)", err, status())
		}
	})

	t.Run("10k", func(t *testing.T) {
		const count = 10_000
		start := time.Now()
		cnStoreMany(t, n, "many/", count)
		t.Logf("stored %d sessions in %v", count, time.Since(start).Round(time.Millisecond))

		byID := cnOpen(t, admin, base+"#/sessions?id=many%2F", "sessions")
		// The next page comes from the server's token; the id prefix is
		// the server's too (a filter within the first page would find none).
		cnDo(t, admin, "next page", chromedp.Evaluate[chromedp.Void](`delete document.body.dataset.rendered`),
			chromedp.Click(chromedp.CSS("#next-page")), chromedp.Poll[chromedp.Void](`document.body.dataset.rendered === "sessions"`))
		if got := rows(t, admin); len(got) != 50 || got[0] != "many/00050" {
			t.Errorf("page 2 of many/: rows %q, want many/00050 and 49 more", got)
		}
		cnDo(t, admin, "previous page", chromedp.Evaluate[chromedp.Void](`delete document.body.dataset.rendered`),
			chromedp.Click(cnButton("← previous")), chromedp.Poll[chromedp.Void](`document.body.dataset.rendered === "sessions"`))
		if got := rows(t, admin); len(got) != 50 || got[0] != "many/00000" {
			t.Errorf("back to page 1 of many/: rows %q, want many/00000 and 49 more", got)
		}
		// A live lease shows in its row, and only there.
		if _, err := ctRaw(n).Prepare(context.Background(), &sessionpb.PrepareRequest{SessionId: "many/00001", Owner: "host-a", TtlMs: 600_000}); err != nil {
			t.Fatal(err)
		}
		cnOpen(t, admin, base+"#/sessions?id=many%2F0000", "sessions")
		held := cnEval[[]string](t, admin, `[...document.querySelectorAll("#sessions tbody tr")].filter((r) => r.querySelector(".badge.lease")).map((r) => r.dataset.id)`)
		if strings.Join(held, " ") != "many/00001" {
			t.Errorf("rows with a lease badge %q, want only many/00001", held)
		}
		cnOpen(t, admin, base+"#/sessions?id=many%2F0999", "sessions")
		if got := rows(t, admin); len(got) != 10 || got[0] != "many/09990" || got[9] != "many/09999" {
			t.Errorf("id prefix many/0999: rows %q, want many/09990…many/09999", got)
		}
		byLast := cnOpen(t, admin, base+"#/sessions?order=last", "sessions")
		cluster := cnOpen(t, admin, base+"#/cluster", "cluster")
		session := cnOpen(t, admin, sessionURL("many/05000"), "session")
		t.Logf("with %d sessions more, rendered after navigation start: sessions %.0f ms (by last append %.0f ms), cluster %.0f ms, session %.0f ms",
			count, byID, byLast, cluster, session)
	})
}

// TestConsoleCluster opens the console on a follower of a three-node
// cluster: the cluster page shows the three members, the leader marked and
// each one's applied index, and the sessions go through the follower.
func TestConsoleCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts three nodes")
	}
	browser := cnBrowser(t)
	tokens, key := auTokenFile(t, auTokens), peClusterKey(t) // client authentication needs authenticated peers
	nodes := startClusterOpts(t, 3, nodeOpts{
		dial: []grpc.DialOption{grpc.WithPerRPCCredentials(client.BearerToken(auAdmin))},
		tune: func(c *serveConfig) { c.Auth.TokenFile, c.TLS.ClusterKeyFile = tokens, key },
	})
	leader, follower := followerOf(t, nodes)
	plan, events := seStore(t, leader.testNode, "web-plan-mode", "alice/plan-mode")
	base := "http://" + follower.srv.httpAddr + "/ui/"
	tab := cnTab(t, browser)
	cnLogin(t, tab, base, auAdmin)
	if got := cnEval[[]string](t, tab, `[...document.querySelectorAll("#sessions tbody tr")].map((r) => r.dataset.id)`); len(got) != 1 || got[0] != plan {
		t.Errorf("sessions through the follower: %q, want %s", got, plan)
	}
	cnOpen(t, tab, base+"#/session/"+url.PathEscape(plan), "session")
	if got := cnEval[string](t, tab, `document.querySelector(".range").textContent`); !strings.HasSuffix(got, fmt.Sprintf(" of %d", len(events))) {
		t.Errorf("the session through the follower shows %q, want its %d events", got, len(events))
	}

	cnOpen(t, tab, base+"#/cluster", "cluster")
	// Members learn each other's applied index from gossip (about every
	// second); the page polls every 2 s.
	cnDo(t, tab, "members' applied indexes", chromedp.Poll[chromedp.Void](
		`[...document.querySelectorAll("#members tr.member")].filter((r) => r.dataset.applied).length === 3`))
	got := cnEval[[]string](t, tab, `[...document.querySelectorAll("#members tr.member")].map((r) => r.dataset.node + " " + r.dataset.role)`)
	slices.Sort(got)
	var want []string
	for _, nd := range nodes {
		want = append(want, nd.id+" "+map[bool]string{true: "leader", false: "follower"}[nd == leader])
	}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("members %q, want %q", got, want)
	}
	t.Logf("members as shown by %s: %s", follower.id, cnEval[string](t, tab, `document.getElementById("members").innerText`))
	cnShot(t, tab, "cluster")

	// The third node restarts demanding more free space than any disk has:
	// its row and the page's alarm say so once gossip has told the follower.
	for _, low := range nodes {
		if low == leader || low == follower {
			continue
		}
		normal := low.tune
		low.tune = func(c *serveConfig) { normal(c); c.Cluster.MinFreeBytes = 1 << 50 }
		low.testNode = low.Restart()
		cnDo(t, tab, "low disk on "+low.id, chromedp.Poll[chromedp.Void](fmt.Sprintf(
			`document.querySelector('#members tr.disk-low[data-node=%q]') !== null && document.getElementById("disk-alarm").textContent.includes(%q)`,
			low.id, "Low disk on "+low.id)))
	}
}
