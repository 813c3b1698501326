// Package console owns the web console: its embedded assets and the
// handler that serves them at /console/ on the HTTP listener.
//
// The assets are static (an HTML page, ES modules compiled from src/ by
// tsc, a style sheet) and hold no data, so serving them needs no key. The
// page reads and writes only through the public REST API on the same
// origin, with the key the user enters, so every permission rule of the
// API holds in the console as it does for curl.
//
// Every answer carries a Content-Security-Policy that lets the page load
// scripts, styles and connections only from its own origin, and no
// frames, forms or base URL: a value that reaches the page from the data
// it shows cannot run as script or send anything elsewhere.
package console

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"io/fs"
	"net/http"
	"path"
	"strings"
	"time"
)

// Prefix is the path the console is served under.
const Prefix = "/console/"

// ContentSecurityPolicy is the policy of every answer of the handler.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

//go:embed assets
var embedded embed.FS

// contentTypes are the types of the assets by extension; an asset of
// another extension is not served (nosniff leaves no guessing to the
// browser).
var contentTypes = map[string]string{
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".css":  "text/css; charset=utf-8",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
}

type asset struct {
	body  []byte
	ctype string
	etag  string
}

// Handler serves the console: GET and HEAD of /console/ (the page) and
// of the files below it; /console redirects to /console/. Anything else
// under the prefix is 404, another method 405.
type Handler struct {
	files map[string]asset // by path below Prefix; "" is index.html
}

var _ http.Handler = (*Handler)(nil)

// New returns the handler of the embedded assets.
func New() *Handler {
	h, err := newHandler(embedded, "assets")
	if err != nil {
		// The assets are compiled in: a failure here is a broken build.
		panic("console: " + err.Error())
	}
	return h
}

func newHandler(fsys fs.FS, root string) (*Handler, error) {
	sub, err := fs.Sub(fsys, root)
	if err != nil {
		return nil, err
	}
	h := &Handler{files: map[string]asset{}}
	err = fs.WalkDir(sub, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		ctype, ok := contentTypes[path.Ext(p)]
		if !ok {
			return nil
		}
		b, err := fs.ReadFile(sub, p)
		if err != nil {
			return err
		}
		sum := sha256.Sum256(b)
		h.files[p] = asset{body: b, ctype: ctype, etag: `"` + hex.EncodeToString(sum[:12]) + `"`}
		return nil
	})
	if err != nil {
		return nil, err
	}
	if idx, ok := h.files["index.html"]; ok {
		h.files[""] = idx
	}
	return h, nil
}

// size is the total size of the assets in bytes.
func (h *Handler) size() int {
	n := 0
	for p, a := range h.files {
		if p != "" {
			n += len(a.body)
		}
	}
	return n
}

// ServeHTTP implements http.Handler.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	hd := w.Header()
	hd.Set("Content-Security-Policy", ContentSecurityPolicy)
	hd.Set("X-Content-Type-Options", "nosniff")
	hd.Set("Referrer-Policy", "no-referrer")
	hd.Set("X-Frame-Options", "DENY")
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		hd.Set("Allow", "GET, HEAD")
		http.Error(w, "method "+r.Method+" is not allowed on the console's files", http.StatusMethodNotAllowed)
		return
	}
	if r.URL.Path == strings.TrimSuffix(Prefix, "/") {
		http.Redirect(w, r, Prefix, http.StatusMovedPermanently)
		return
	}
	name, ok := strings.CutPrefix(r.URL.Path, Prefix)
	a, found := h.files[name]
	if !ok || !found {
		http.Error(w, "no such file in the console: "+r.URL.Path, http.StatusNotFound)
		return
	}
	hd.Set("Content-Type", a.ctype)
	hd.Set("ETag", a.etag)
	// Revalidated on every load (a 304 when unchanged): a new server
	// version must not run with the modules of an old one.
	hd.Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, name, time.Time{}, bytes.NewReader(a.body))
}
