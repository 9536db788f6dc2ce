package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"google.golang.org/grpc"

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

// cnOpen loads url afresh, waits until page has drawn its data, logs how long
// that took from navigation start, and checks that no CSP rule was broken.
func cnOpen(t *testing.T, tab context.Context, url, pageName string) {
	t.Helper()
	cnDo(t, tab, "open "+url, chromedp.Navigate("about:blank"), chromedp.Navigate(url),
		chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.body.dataset.rendered === %q`, pageName)))
	ms := cnEval[float64](t, tab, fmt.Sprintf(`performance.getEntriesByName("rendered:%s")[0].startTime`, pageName))
	t.Logf("%s page rendered %.0f ms after navigation start", pageName, ms)
	cnNoViolations(t, tab)
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
// authentication: the recorded sessions, a live tail, a prefix-limited
// token, hostile event text and a session of 100k events.
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
	cnShot(t, admin, "sessions")

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
		cnShot(t, admin, "cluster")
	})

	rows := func(t *testing.T, tab context.Context) []string {
		t.Helper()
		return cnEval[[]string](t, tab, `[...document.querySelectorAll("#sessions tbody tr")].map((r) => r.dataset.id)`)
	}
	t.Run("sessions", func(t *testing.T) {
		cnOpen(t, admin, base+"#/sessions", "sessions")
		if got := rows(t, admin); strings.Join(got, " ") != "alice/fresh alice/plan-mode bob/reads" {
			t.Errorf("session rows %q, want the three recorded sessions in id order", got)
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
		if got := filter("", "/home/dev/project/"); strings.Join(got, " ") != "alice/fresh alice/plan-mode" {
			t.Errorf("cwd prefix /home/dev/project/: rows %q, want the two sessions in workspace/", got)
		}
		filter("", "")
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

		// A new event appears in the open page.
		seq := len(planEvents)
		ctAppend(t, n, plan, cnEvent(t, "plan/mode", seq, map[string]bool{"active": false}))
		want = append(want, fmt.Sprintf("%d Plan mode off", seq))
		cnDo(t, admin, "tail", chromedp.Poll[chromedp.Void](fmt.Sprintf(`document.querySelector('#events article[data-seq="%d"]') !== null`, seq)))
		if got := cnEval[[]string](t, admin, shown); strings.Join(got, "|") != strings.Join(want, "|") {
			t.Errorf("after the append: %q, want %q", got, want)
		}

		// Tool calls with their results beside them (two calls in parallel).
		cnOpen(t, admin, sessionURL(reads), "session")
		got := cnEval[[]string](t, admin, `[...document.querySelectorAll('#events article[data-type="tool/call"]')]
			.map((r) => r.dataset.seq + ">" + r.querySelector(".result").dataset.seq)`)
		if strings.Join(got, " ") != "13>15 14>16" {
			t.Errorf("tool calls and their results %q, want 13>15 14>16", got)
		}
		cnShot(t, admin, "session-tools")
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
}
