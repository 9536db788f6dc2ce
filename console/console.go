// Package console serves the web console: a single page, in plain HTML, CSS
// and JavaScript modules embedded in the binary, that every node serves on
// its HTTP port under /ui/.
//
// The console holds no state and no privilege of its own. It calls the same
// Connect (HTTP/JSON) API on the same origin with the token the operator
// typed in, so permissions and session prefixes are enforced by the server
// exactly as for any other client, and any node serves it. There is no build
// step: what is in static/ is what the browser runs, which keeps the console
// reviewable and its Content-Security-Policy strict (no inline script or
// style, no eval).
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"strings"
	"time"
)

//go:embed static
var static embed.FS

// Prefix is the path the console is served under.
const Prefix = "/ui/"

// ContentSecurityPolicy allows only the console's own files and same-origin
// API calls: event text is data from agents, so even a rendering bug must not
// be able to run script, load from elsewhere or send data away.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// asset is one embedded file, read once.
type asset struct {
	name  string
	body  []byte
	etag  string
	ctype string
}

// Handler serves the embedded files under Prefix with the security headers.
// Every answer is revalidated (no-cache with an ETag of the content): the
// file names carry no version, and a node upgraded in place must not leave a
// browser running yesterday's modules against today's API.
func Handler() http.Handler {
	assets := map[string]*asset{}
	err := fs.WalkDir(static, "static", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		body, err := static.ReadFile(p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(body)
		name := strings.TrimPrefix(p, "static/")
		ctype := mime.TypeByExtension(path.Ext(name))
		if path.Ext(name) == ".js" {
			// Module scripts need a JavaScript type whatever the host's mime
			// tables say (nosniff makes browsers strict about it).
			ctype = "text/javascript; charset=utf-8"
		}
		assets[name] = &asset{name: name, body: body, etag: `"` + hex.EncodeToString(sum[:8]) + `"`, ctype: ctype}
		return nil
	})
	if err != nil {
		panic("console: embedded files unreadable: " + err.Error()) // a build defect, not a runtime condition
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Frame-Options", "DENY")
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			h.Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
			return
		}
		name := strings.TrimPrefix(r.URL.Path, Prefix)
		if name == "" {
			name = "index.html"
		}
		a, ok := assets[name]
		if !ok {
			http.NotFound(w, r)
			return
		}
		h.Set("Content-Type", a.ctype)
		h.Set("ETag", a.etag)
		h.Set("Cache-Control", "no-cache")
		http.ServeContent(w, r, a.name, time.Time{}, bytes.NewReader(a.body))
	})
}
