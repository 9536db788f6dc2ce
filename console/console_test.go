package console

import (
	"io/fs"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"golang.org/x/net/html"
)

func get(t *testing.T, h http.Handler, path string, hdr ...string) *httptest.ResponseRecorder {
	t.Helper()
	r := httptest.NewRequest(http.MethodGet, path, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		r.Header.Set(hdr[i], hdr[i+1])
	}
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	return w
}

// TestHandlerHeaders checks that every embedded file, and the answers that
// are not files, carry the security headers, and that files are revalidated.
func TestHandlerHeaders(t *testing.T) {
	h := Handler()
	paths := []string{Prefix, Prefix + "missing.js"}
	if err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, Prefix+strings.TrimPrefix(p, "static/"))
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	for _, p := range paths {
		w := get(t, h, p)
		for k, v := range map[string]string{
			"Content-Security-Policy": ContentSecurityPolicy,
			"X-Content-Type-Options":  "nosniff",
			"Referrer-Policy":         "no-referrer",
		} {
			if got := w.Header().Get(k); got != v {
				t.Errorf("%s: %s = %q, want %q", p, k, got, v)
			}
		}
		if p == Prefix+"missing.js" {
			if w.Code != http.StatusNotFound {
				t.Errorf("%s: status %d, want 404", p, w.Code)
			}
			continue
		}
		if w.Code != http.StatusOK || w.Header().Get("Cache-Control") != "no-cache" || w.Header().Get("ETag") == "" {
			t.Errorf("%s: status %d, Cache-Control %q, ETag %q; want 200, no-cache and an ETag", p, w.Code,
				w.Header().Get("Cache-Control"), w.Header().Get("ETag"))
		}
		if strings.HasSuffix(p, ".js") && !strings.HasPrefix(w.Header().Get("Content-Type"), "text/javascript") {
			t.Errorf("%s: Content-Type %q, want text/javascript", p, w.Header().Get("Content-Type"))
		}
		if again := get(t, h, p, "If-None-Match", w.Header().Get("ETag")); again.Code != http.StatusNotModified {
			t.Errorf("%s with its ETag: status %d, want 304", p, again.Code)
		}
	}
	for _, want := range []string{"default-src 'none'", "script-src 'self'", "style-src 'self'", "frame-ancestors 'none'"} {
		if !strings.Contains(ContentSecurityPolicy, want) {
			t.Errorf("CSP %q lacks %q", ContentSecurityPolicy, want)
		}
	}
	r := httptest.NewRequest(http.MethodPost, Prefix, nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r)
	if w.Code != http.StatusMethodNotAllowed {
		t.Errorf("POST %s: status %d, want 405", Prefix, w.Code)
	}
}

// TestStaticFilesNoInline checks what the CSP would refuse anyway, so that
// a page never depends on a browser being lenient: no inline script or
// style, no event-handler attributes, no javascript: URLs, and no markup
// built from strings in the modules.
func TestStaticFilesNoInline(t *testing.T) {
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		switch {
		case strings.HasSuffix(p, ".html"):
			checkHTML(t, p, string(body))
		case strings.HasSuffix(p, ".js"):
			for _, bad := range []string{"innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function", ".style.", "setAttribute(\"style\""} {
				if strings.Contains(string(body), bad) {
					t.Errorf("%s uses %s", p, bad)
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func checkHTML(t *testing.T, name, text string) {
	t.Helper()
	doc, err := html.Parse(strings.NewReader(text))
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	var walk func(*html.Node)
	walk = func(n *html.Node) {
		if n.Type == html.ElementNode {
			if n.Data == "style" {
				t.Errorf("%s: inline <style>", name)
			}
			if n.Data == "script" {
				src := ""
				for _, a := range n.Attr {
					if a.Key == "src" {
						src = a.Val
					}
				}
				if src == "" || n.FirstChild != nil {
					t.Errorf("%s: inline <script>", name)
				}
			}
			for _, a := range n.Attr {
				k := strings.ToLower(a.Key)
				if k == "style" || strings.HasPrefix(k, "on") {
					t.Errorf("%s: <%s %s=…>", name, n.Data, a.Key)
				}
				if strings.HasPrefix(strings.ToLower(strings.TrimSpace(a.Val)), "javascript:") {
					t.Errorf("%s: <%s %s=javascript:…>", name, n.Data, a.Key)
				}
			}
		}
		for c := n.FirstChild; c != nil; c = c.NextSibling {
			walk(c)
		}
	}
	walk(doc)
}
